//! The layer and the inner service's readiness: an inner service that reserves capacity in
//! `poll_ready` (as tower's `ConcurrencyLimit` or `Buffer` do) keeps serving other clients while
//! requests wait, for their shaping slot or for a limiter deciding elsewhere; a waiting request
//! polls the inner service ready only once its wait is over.

use std::convert::Infallible;
use std::future::{poll_fn, ready, Ready};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::middleware_common::{api_key, clock};
use http::{Request, Response, StatusCode};
use tokio::time::Instant;
use tollgate::middleware::{LimiterError, Policy, RateLimitLayer, RateLimiter};
use tollgate::{Decision, KeyedLimiter, LeakyBucket, ManualClock, TokenBucket};
use tower::{Layer, Service};

type Error = Box<dyn std::error::Error>;

/// A request from client `key`, named `id` (what the inner service records).
fn request(key: &str, id: &str) -> Request<()> {
    Request::get("/")
        .header("x-api-key", key)
        .header("x-id", id)
        .body(())
        .expect("a valid request")
}

/// The permits an inner service's clones share, and the tasks waiting for one.
#[derive(Debug)]
struct Pool {
    free: usize,
    waiting: Vec<Waker>,
}

/// An inner service with a fixed number of permits, like a concurrency limit: `poll_ready`
/// reserves one (and the instance keeps it until `call`), `call` releases it at once (the work
/// is instant), a clone starts without one. It records the tokio instant each request reaches
/// it.
#[derive(Debug)]
struct Permits {
    pool: Arc<Mutex<Pool>>,
    reserved: bool,
    seen: Arc<Mutex<Vec<(String, Instant)>>>,
}

impl Permits {
    fn new(permits: usize) -> Permits {
        Permits {
            pool: Arc::new(Mutex::new(Pool {
                free: permits,
                waiting: Vec::new(),
            })),
            reserved: false,
            seen: Arc::default(),
        }
    }

    /// The requests that reached the service, and when (from `start`), in order.
    fn seen(&self, start: Instant) -> Vec<(String, Duration)> {
        let seen = self.seen.lock().expect("not poisoned");
        seen.iter().map(|(id, at)| (id.clone(), *at - start)).collect()
    }

    fn release(&mut self) {
        if std::mem::take(&mut self.reserved) {
            let mut pool = self.pool.lock().expect("not poisoned");
            pool.free += 1;
            pool.waiting.drain(..).for_each(Waker::wake);
        }
    }
}

impl Clone for Permits {
    fn clone(&self) -> Self {
        Permits {
            pool: Arc::clone(&self.pool),
            reserved: false,
            seen: Arc::clone(&self.seen),
        }
    }
}

impl Drop for Permits {
    fn drop(&mut self) {
        self.release();
    }
}

impl Service<Request<()>> for Permits {
    type Response = Response<()>;
    type Error = Infallible;
    type Future = Ready<Result<Response<()>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        if self.reserved {
            return Poll::Ready(Ok(()));
        }
        let mut pool = self.pool.lock().expect("not poisoned");
        if pool.free == 0 {
            pool.waiting.push(cx.waker().clone());
            return Poll::Pending;
        }
        pool.free -= 1;
        self.reserved = true;
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<()>) -> Self::Future {
        assert!(self.reserved, "called without being polled ready");
        let id = request.headers()["x-id"].to_str().expect("ASCII").to_owned();
        self.seen.lock().expect("not poisoned").push((id, Instant::now()));
        self.release();
        ready(Ok(Response::new(())))
    }
}

/// How long a service that should be ready at once is given: a blocked one fails the test
/// rather than hanging it (tokio's paused clock jumps to this timer when nothing else can run).
const AT_ONCE: Duration = Duration::from_secs(1);

/// Polls `service` ready (failing after [`AT_ONCE`]), then calls it with `request`.
async fn ready_and_call<S>(service: &mut S, request: Request<()>) -> Result<S::Future, Error>
where
    S: Service<Request<()>>,
    S::Error: std::error::Error + 'static,
{
    tokio::time::timeout(AT_ONCE, poll_fn(|cx| service.poll_ready(cx)))
        .await
        .map_err(|_| "the service was not ready within 1 s")??;
    Ok(service.call(request))
}

// Tokio's clock is paused in these tests: it moves only to the next timer when every task
// waits, so an instant measured is exactly the timers that had to fire before it.

#[tokio::test(start_paused = true)]
async fn a_shaped_request_waits_without_holding_the_inner_readiness() -> Result<(), Error> {
    // One permit for the whole service; a slot every 10 s, one at once and up to 3 waiting.
    let limiter =
        KeyedLimiter::<String, _, _>::with_clock(LeakyBucket::new("1/10s burst 4".parse()?)?, 100, clock())?;
    let inner = Permits::new(1);
    let recorded = inner.clone();
    let mut service = RateLimitLayer::new(limiter, api_key()).layer(inner);
    let start = Instant::now();

    // Client "busy" takes its free slot, then queues two requests (slots 10 s and 20 s away).
    ready_and_call(&mut service, request("busy", "busy-0"))
        .await?
        .await?;
    let mut queued = Vec::new();
    for id in ["busy-1", "busy-2"] {
        queued.push(tokio::spawn(
            ready_and_call(&mut service, request("busy", id)).await?,
        ));
    }
    tokio::task::yield_now().await;

    // Another client is served at once: the queued requests hold no permit while they wait.
    let answer = ready_and_call(&mut service, request("other", "other-0"))
        .await?
        .await?;
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(Instant::now() - start, Duration::ZERO, "the other client waited");

    // Each queued request polls the inner service ready when its slot comes, and is served.
    for answer in queued {
        assert_eq!(answer.await??.status(), StatusCode::OK);
    }
    let slot = Duration::from_secs(10);
    assert_eq!(
        recorded.seen(start),
        [
            ("busy-0".to_owned(), Duration::ZERO),
            ("other-0".to_owned(), Duration::ZERO),
            ("busy-1".to_owned(), slot),
            ("busy-2".to_owned(), 2 * slot),
        ]
    );
    Ok(())
}

/// A limiter deciding elsewhere, slowly: each decision takes 5 s (a slow remote store).
struct SlowStore(KeyedLimiter<String, TokenBucket, ManualClock>);

const STORE_LATENCY: Duration = Duration::from_secs(5);

impl RateLimiter<String> for SlowStore {
    async fn decide(&self, key: &String, cost: u64) -> Result<Decision, LimiterError> {
        tokio::time::sleep(STORE_LATENCY).await;
        self.0.check_n(key, cost).map_err(LimiterError::from)
    }

    fn policy(&self) -> Policy {
        self.0.policy()
    }
}

#[tokio::test(start_paused = true)]
async fn a_request_waiting_on_a_remote_decision_holds_no_inner_readiness() -> Result<(), Error> {
    let limiter = SlowStore(KeyedLimiter::<String, _, _>::with_clock(
        TokenBucket::new("100/s".parse()?)?,
        100,
        clock(),
    )?);
    let inner = Permits::new(1);
    let recorded = inner.clone();
    let mut service = RateLimitLayer::new(limiter, api_key()).layer(inner);
    let start = Instant::now();

    // Two requests wait on the store at once: the service is ready for both at once.
    let mut pending = Vec::new();
    for id in ["first", "second"] {
        pending.push(tokio::spawn(
            ready_and_call(&mut service, request("k", id)).await?,
        ));
    }
    assert_eq!(
        Instant::now() - start,
        Duration::ZERO,
        "the second request waited for the first"
    );

    // Each is forwarded once its decision comes, after polling the inner service ready.
    for answer in pending {
        assert_eq!(answer.await??.status(), StatusCode::OK);
    }
    let seen = recorded.seen(start);
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|(_, at)| *at == STORE_LATENCY), "{seen:?}");
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_shaped_request_dropped_while_the_inner_service_is_busy_gives_its_slot_back() -> Result<(), Error> {
    let limiter = Arc::new(KeyedLimiter::<String, _, _>::with_clock(
        LeakyBucket::new("1/10s burst 4".parse()?)?,
        100,
        clock(),
    )?);
    let inner = Permits::new(1);
    let mut elsewhere = inner.clone();
    let mut service = RateLimitLayer::new(Arc::clone(&limiter), api_key()).layer(inner.clone());
    let key = "k".to_owned();
    let next_delay = || limiter.peek(&key).delay();
    let start = Instant::now();

    ready_and_call(&mut service, request("k", "first")).await?.await?;
    let waiting = tokio::spawn(ready_and_call(&mut service, request("k", "waiting")).await?);
    assert_eq!(next_delay(), Duration::from_secs(20));
    // The only permit goes elsewhere; the slot comes (10 s) while the inner service is busy.
    tokio::time::timeout(AT_ONCE, poll_fn(|cx| elsewhere.poll_ready(cx))).await??;
    tokio::time::sleep(Duration::from_secs(15)).await;
    assert!(!waiting.is_finished(), "forwarded without a permit");

    // The client leaves before its request reached the inner service: the slot comes back.
    waiting.abort();
    assert!(waiting.await.is_err_and(|error| error.is_cancelled()));
    assert_eq!(next_delay(), Duration::from_secs(10));
    assert_eq!(inner.seen(start), [("first".to_owned(), Duration::ZERO)]);
    Ok(())
}
