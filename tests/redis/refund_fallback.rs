//! The layer over a Redis shaper while Redis is away (`FailurePolicy::Fallback`): the local
//! share decides as the fleet would, and gives its slots back as Redis does, only while a slot
//! still ends the key's queue; a wait above the layer's maximum is refused by the share itself.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, Request, Response, StatusCode};
use tollgate::distributed::{DecidedBy, Failure, FailurePolicy, LocalFallback, RedisLimiter};
use tollgate::middleware::{HeaderKey, RateLimit, RateLimitLayer};
use tollgate::{CostTooLarge, Decision, KeyedLimiter, LeakyBucket, ManualClock, Timestamp};
use tower::{Layer, Service};

use crate::middleware_common::Hello;
use crate::redis_common::RedisServer;

type Shaper = KeyedLimiter<str, LeakyBucket, ManualClock>;

/// The instance's share ("1/10s burst 5" on a clock that stands still: a slot every 10 s,
/// one at once and up to 4 waiting), counting the refunds the layer hands it.
struct Share {
    limiter: Shaper,
    /// `refund_n` calls: unconditional refunds.
    refunds: AtomicUsize,
    /// `refund_slot` calls that gave the slot back, and that kept it.
    slots_back: AtomicUsize,
    slots_kept: AtomicUsize,
}

impl Share {
    fn new() -> Share {
        Share {
            limiter: KeyedLimiter::with_clock(
                LeakyBucket::new("1/10s burst 5".parse().unwrap()).unwrap(),
                100,
                ManualClock::starting_at(Timestamp::from_secs(1_800_000_000)),
            )
            .unwrap(),
            refunds: AtomicUsize::new(0),
            slots_back: AtomicUsize::new(0),
            slots_kept: AtomicUsize::new(0),
        }
    }

    /// How long until `k`'s queue is empty: the end of its last slot (its TAT), from the
    /// share's clock (a weightless peek's reset-after, which a full queue reports too).
    fn queue(&self) -> Duration {
        self.limiter.peek_n("k", 0).unwrap().reset_after()
    }

    // Relaxed: counts read on this test's one thread, after the calls that made them.
    fn counts(&self) -> [usize; 3] {
        [&self.refunds, &self.slots_back, &self.slots_kept].map(|count| count.load(Ordering::Relaxed))
    }
}

/// Hands every call on to the share's limiter; counts the refunds.
impl LocalFallback for Share {
    fn check_n(&self, key: &str, cost: u64) -> Result<Decision, CostTooLarge> {
        LocalFallback::check_n(&self.limiter, key, cost)
    }

    fn peek_n(&self, key: &str, cost: u64) -> Result<Decision, CostTooLarge> {
        LocalFallback::peek_n(&self.limiter, key, cost)
    }

    fn check_slot(
        &self,
        key: &str,
        cost: u64,
        max_delay: Option<Duration>,
    ) -> Result<(Decision, Option<Timestamp>), CostTooLarge> {
        LocalFallback::check_slot(&self.limiter, key, cost, max_delay)
    }

    fn refund_n(&self, key: &str, cost: u64) -> bool {
        self.refunds.fetch_add(1, Ordering::Relaxed);
        LocalFallback::refund_n(&self.limiter, key, cost)
    }

    fn refund_slot(&self, key: &str, cost: u64, end: Timestamp) -> bool {
        let gave_back = LocalFallback::refund_slot(&self.limiter, key, cost, end);
        let count = if gave_back {
            &self.slots_back
        } else {
            &self.slots_kept
        };
        count.fetch_add(1, Ordering::Relaxed);
        gave_back
    }
}

type Gateway = RateLimit<Hello, Arc<RedisLimiter>, HeaderKey>;

/// A layer (longest wait `max_delay`) over a Redis shaper of the same quota as `share`,
/// whose server is killed: once a decision has found Redis gone, the next ones do not ask it
/// for an hour (the breaker is open) and the share answers at once, without I/O. Then
/// tokio's clock is paused: it moves only to the next timer when every task waits, so each
/// request is answered exactly at the timer the layer set for its slot.
async fn gateway_without_redis(share: &Arc<Share>, max_delay: Option<Duration>) -> Gateway {
    let mut server = RedisServer::start();
    let limiter = RedisLimiter::builder(
        server.url(),
        LeakyBucket::new("1/10s burst 5".parse().unwrap()).unwrap(),
        FailurePolicy::Fallback(Arc::clone(share) as _),
    )
    .deadline(Duration::from_secs(2))
    .probe_interval(Duration::from_secs(3600))
    .connect()
    .await
    .unwrap();
    server.kill();
    let found_gone = limiter.check("warm-up").await.unwrap();
    assert_eq!(found_gone.decided_by, DecidedBy::Fallback);
    let not_asked = limiter.check("warm-up").await.unwrap();
    assert!(
        matches!(not_asked.failure, Some(Failure::RecentlyDown(_))),
        "{not_asked:?}"
    );
    tokio::time::pause();
    let mut layer = RateLimitLayer::builder(
        Arc::new(limiter),
        HeaderKey::new(HeaderName::from_static("x-api-key")),
    );
    if let Some(max) = max_delay {
        layer = layer.max_delay(max);
    }
    layer.build().layer(Hello)
}

type Answered = tokio::task::JoinHandle<(StatusCode, Duration)>;

/// A client: a request for `k` on a task of its own, saying its status and when, after
/// `since` on tokio's clock, it was answered. Returns once the share has decided it (the
/// queue is then `queued` long), so that requests are decided in the order they are sent;
/// aborting the task is the client hanging up.
async fn send(gateway: &Gateway, share: &Share, queued: Duration, since: tokio::time::Instant) -> Answered {
    let mut service = gateway.clone();
    let client = tokio::spawn(async move {
        std::future::poll_fn(|cx| Service::<Request<()>>::poll_ready(&mut service, cx))
            .await
            .unwrap();
        let request = Request::get("/").header("x-api-key", "k").body(()).unwrap();
        let answer: Response<_> = service.call(request).await.unwrap();
        (answer.status(), since.elapsed())
    });
    // Yields (tokio's clock does not move while a task is ready): the decision is the
    // client's first poll, and answers without I/O.
    for _ in 0..1_000 {
        if share.queue() == queued {
            return client;
        }
        tokio::task::yield_now().await;
    }
    panic!("the share never queued {queued:?}: {:?}", share.queue());
}

/// The client hangs up: its task is dropped, and with it the request's slot (the layer's
/// refund runs in the drop).
async fn hang_up(client: Answered) {
    client.abort();
    assert!(client.await.unwrap_err().is_cancelled());
}

async fn answered(client: Answered) -> Duration {
    let (status, at) = client.await.unwrap();
    assert_eq!(status, StatusCode::OK);
    at
}

/// Each waiting client was answered at its slot, `at[i]` for `slots[i]`, up to tokio's
/// timer resolution: its clock was paused between two of its milliseconds, so every timer
/// fires late by the same amount, under a millisecond (0 on the boundary).
fn assert_answered_at(at: &[Duration], slots: &[Duration]) {
    let late: Vec<_> = at
        .iter()
        .zip(slots)
        .map(|(at, slot)| at.checked_sub(*slot))
        .collect();
    let same = late.iter().all(|each| *each == late[0]);
    assert!(
        same && late[0].is_some_and(|late| late <= Duration::from_millis(1)),
        "answered at {at:?} for the slots {slots:?}"
    );
}

fn secs(secs: u64) -> Duration {
    Duration::from_secs(secs)
}

/// B, in the middle of the queue, hangs up: its slot passes unused, and E is answered after
/// D, not with it (the unconditional refund gave E the 30 s of D).
#[tokio::test]
async fn a_slot_the_fallback_gave_in_the_middle_of_its_queue_passes_unused() {
    let share = Arc::new(Share::new());
    let gateway = gateway_without_redis(&share, None).await;
    let since = tokio::time::Instant::now();
    let a = send(&gateway, &share, secs(10), since).await;
    let b = send(&gateway, &share, secs(20), since).await;
    let c = send(&gateway, &share, secs(30), since).await;
    let d = send(&gateway, &share, secs(40), since).await;
    hang_up(b).await;
    assert_eq!(share.queue(), secs(40), "B's slot is not the end of the queue");
    assert_eq!(share.counts(), [0, 0, 1], "refund_n, refund_slot gave back, kept");
    let e = send(&gateway, &share, secs(50), since).await;
    assert_eq!(answered(a).await, secs(0));
    let mut at = Vec::new();
    for client in [c, d, e] {
        at.push(answered(client).await);
    }
    assert_answered_at(&at, &[secs(20), secs(30), secs(40)]);
}

/// D, the last, hangs up: E is given its slot exactly (the end the share named is the TAT
/// it stored); then E and C, each the end of the queue in its turn, give theirs back too.
#[tokio::test]
async fn the_last_slot_the_fallback_gave_goes_to_the_next_request() {
    let share = Arc::new(Share::new());
    let gateway = gateway_without_redis(&share, None).await;
    let since = tokio::time::Instant::now();
    let a = send(&gateway, &share, secs(10), since).await;
    let b = send(&gateway, &share, secs(20), since).await;
    let c = send(&gateway, &share, secs(30), since).await;
    let d = send(&gateway, &share, secs(40), since).await;
    hang_up(d).await;
    assert_eq!(share.queue(), secs(30));
    let e = send(&gateway, &share, secs(40), since).await;
    hang_up(e).await;
    hang_up(c).await;
    assert_eq!(share.queue(), secs(20));
    assert_eq!(share.counts(), [0, 3, 0], "refund_n, refund_slot gave back, kept");
    let f = send(&gateway, &share, secs(30), since).await;
    assert_eq!(answered(a).await, secs(0));
    let at = [answered(b).await, answered(f).await];
    assert_answered_at(&at, &[secs(10), secs(20)]);
}

/// A wait above the layer's maximum (15 s) is refused by the share itself, in the decision:
/// nothing is counted, so nothing is refunded. The refusal says when the wait fits.
#[tokio::test]
async fn a_wait_above_the_maximum_is_refused_by_the_fallback() {
    let share = Arc::new(Share::new());
    let gateway = gateway_without_redis(&share, Some(secs(15))).await;
    let since = tokio::time::Instant::now();
    let a = send(&gateway, &share, secs(10), since).await;
    let b = send(&gateway, &share, secs(20), since).await;
    // 20 s: above 15 s. The queue stays 20 s long whoever refuses (the layer gives back
    // what the share admitted), so the count of refunds tells them apart.
    let mut service = gateway.clone();
    std::future::poll_fn(|cx| Service::<Request<()>>::poll_ready(&mut service, cx))
        .await
        .unwrap();
    let request = Request::get("/").header("x-api-key", "k").body(()).unwrap();
    let refused = service.call(request).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()["retry-after"], "5");
    assert_eq!(share.queue(), secs(20));
    assert_eq!(share.counts(), [0, 0, 0], "no refund: nothing was counted");
    assert_eq!(answered(a).await, secs(0));
    assert_answered_at(&[answered(b).await], &[secs(10)]);
}
