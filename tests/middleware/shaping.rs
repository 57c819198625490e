//! Shaping through the layer with the leaky bucket, over real TCP: admitted requests wait for
//! their slots, a wait beyond the maximum is refused, a client that leaves gives its slot back.

use std::sync::Arc;
use std::time::Duration;

use crate::middleware_common::{api_key, clock, get, http1_client, serve, Hello, Stamp};
use http::{Request, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tollgate::middleware::{HeaderKey, Origin, RateLimit, RateLimitLayer, RateLimiter};
use tollgate::{KeyedLimiter, LeakyBucket, ManualClock};
use tower::{Layer, Service};

type Error = Box<dyn std::error::Error>;

// Tokio's clock is paused: it moves only to the next timer when every task waits, so the wait
// each request measures (from entering the server to reaching the application) is exactly the
// timer the layer set, whatever the machine's load. The delays themselves come from the
// limiter's manual clock, which stands still: every request is decided at the same instant.
#[tokio::test(start_paused = true)]
async fn shaped_requests_wait_for_their_slots() -> Result<(), Error> {
    // A slot every 100 ms; one proceeds at once and up to 3 wait.
    let limiter =
        KeyedLimiter::<String, _, _>::with_clock(LeakyBucket::new("10/s burst 4".parse()?)?, 100, clock())?;
    let address = serve(Stamp(RateLimitLayer::new(limiter, api_key()).layer(Hello)), true).await;
    let client = http1_client();

    let requests = (0..5).map(|_| {
        let client = client.clone();
        tokio::spawn(async move { get(&client, address, "/", &[("x-api-key", "k")]).await })
    });
    let mut waits = Vec::new();
    let mut refused = Vec::new();
    for request in requests {
        let answer = request.await?;
        match answer.status {
            StatusCode::OK => waits.push(answer.header("x-waited-ns").parse::<u64>()?),
            _ => refused.push(answer),
        }
    }
    waits.sort_unstable();
    let slot = Duration::from_millis(100).as_nanos() as u64;
    assert_eq!(waits, [0, slot, 2 * slot, 3 * slot]);
    // The fifth finds the queue full: refused, told to come back when the first slot drains.
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused[0].header("retry-after"), "1");
    assert_eq!(refused[0].header("ratelimit-policy"), r#""default";q=10;w=1"#);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_wait_beyond_the_maximum_is_refused_and_its_slot_given_back() -> Result<(), Error> {
    let clock = clock();
    let limiter = KeyedLimiter::<String, _, _>::with_clock(
        LeakyBucket::new("10/s burst 5".parse()?)?,
        100,
        clock.clone(),
    )?;
    let layer = RateLimitLayer::builder(limiter, api_key())
        .max_delay(Duration::from_millis(150))
        .build();
    let address = serve(Stamp(layer.layer(Hello)), true).await;
    let client = http1_client();
    let key = [("x-api-key", "k")];

    let first = get(&client, address, "/", &key).await;
    assert_eq!(
        (first.status, first.header("x-waited-ns")),
        (StatusCode::OK, "0".to_owned())
    );
    let second = get(&client, address, "/", &key).await;
    assert_eq!(
        (second.status, second.header("x-waited-ns")),
        (StatusCode::OK, "100000000".to_owned())
    );
    // The third would wait 200 ms: refused, to retry in 50 ms (1 s, rounded up).
    let third = get(&client, address, "/", &key).await;
    assert_eq!(third.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(third.header("retry-after"), "1");
    assert_eq!(third.header("ratelimit"), r#""default";r=0;t=1"#);
    // Its slot was given back: 50 ms later (on the limiter's clock) the next request is given
    // that slot, 150 ms away, within the maximum (without the refund it would be 250 ms away).
    clock.advance(Duration::from_millis(50));
    let fourth = get(&client, address, "/", &key).await;
    assert_eq!(
        (fourth.status, fourth.header("x-waited-ns")),
        (StatusCode::OK, "150000000".to_owned())
    );
    Ok(())
}

#[tokio::test]
async fn a_client_that_leaves_while_waiting_gives_its_slot_back() -> Result<(), Error> {
    // A slot every 10 s: a waiting request stays waiting for the whole test.
    let limiter = Arc::new(KeyedLimiter::<String, _, _>::with_clock(
        LeakyBucket::new("1/10s burst 3".parse()?)?,
        100,
        clock(),
    )?);
    let address = serve(
        RateLimitLayer::new(Arc::clone(&limiter), api_key()).layer(Hello),
        true,
    )
    .await;
    let key = "k".to_owned();
    let next_delay = |limiter: &KeyedLimiter<String, LeakyBucket, ManualClock>| limiter.peek(&key).delay();
    let until = |wanted: Duration| {
        let limiter = Arc::clone(&limiter);
        async move {
            // Polls the shared limiter until the server's side has happened (a bounded wait on
            // a condition, not a sleep standing in for one).
            while next_delay(&limiter) != wanted {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    };

    assert_eq!(
        get(&http1_client(), address, "/", &[("x-api-key", "k")])
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(next_delay(&limiter), Duration::from_secs(10));

    // A client asks, is given the slot 10 s away, and hangs up while waiting for it.
    let mut stream = TcpStream::connect(address).await?;
    stream
        .write_all(b"GET / HTTP/1.1\r\nhost: test\r\nx-api-key: k\r\n\r\n")
        .await?;
    tokio::time::timeout(Duration::from_secs(30), until(Duration::from_secs(20))).await?;
    drop(stream);

    // The server notices, drops the waiting request, and the slot comes back.
    tokio::time::timeout(Duration::from_secs(30), until(Duration::from_secs(10))).await?;

    // A client that stays is answered after its slot (not 20 s: the freed slot is its own).
    let mut stream = TcpStream::connect(address).await?;
    stream
        .write_all(b"GET / HTTP/1.1\r\nhost: test\r\nx-api-key: k\r\n\r\n")
        .await?;
    tokio::time::timeout(Duration::from_secs(30), until(Duration::from_secs(20))).await?;
    let mut byte = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_millis(200), stream.read(&mut byte)).await;
    assert!(early.is_err(), "the request waits for its slot 10 s away");
    Ok(())
}

#[tokio::test]
async fn a_response_future_dropped_before_its_first_poll_gives_its_slot_back() -> Result<(), Error> {
    // A slot every 10 s, one at once and up to 3 waiting, on a clock that stands still: the
    // limiter's state only changes when the layer decides or refunds.
    let limiter = Arc::new(KeyedLimiter::<String, _, _>::with_clock(
        LeakyBucket::new("1/10s burst 4".parse()?)?,
        100,
        clock(),
    )?);
    let mut service = RateLimitLayer::new(Arc::clone(&limiter), api_key()).layer(Hello);
    let key = "k".to_owned();
    let next_delay = || limiter.peek(&key).delay();
    let request = || {
        Request::get("/")
            .header("x-api-key", "k")
            .body(())
            .expect("a valid request")
    };

    // The first request takes the free slot and is answered at once.
    std::future::poll_fn(|cx| Service::<Request<()>>::poll_ready(&mut service, cx)).await?;
    let first = service.call(request()).await?;
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(next_delay(), Duration::from_secs(10));

    // The second is given the slot 10 s away the moment it is called: the slot is counted...
    std::future::poll_fn(|cx| Service::<Request<()>>::poll_ready(&mut service, cx)).await?;
    let waiting = service.call(request());
    assert_eq!(next_delay(), Duration::from_secs(20));
    // ... and its response future, dropped without ever being polled, gives it back.
    drop(waiting);
    assert_eq!(next_delay(), Duration::from_secs(10));

    // The same with several never-polled requests at once, dropped last first: each gives back
    // its own slot, the end of the queue in its turn.
    let mut waiting: Vec<_> = (0..2).map(|_| service.call(request())).collect();
    assert_eq!(next_delay(), Duration::from_secs(30));
    while let Some(last) = waiting.pop() {
        drop(last);
    }
    assert_eq!(next_delay(), Duration::from_secs(10));
    Ok(())
}

/// The gateway's shaping example (`--algorithm leaky --quota "2/s burst 5" --max-delay-ms
/// 1000`, fields on admitted responses): the queue holds 4 more, but the maximum wait lets only
/// 2 through (0.5 s and 1 s away; the third would wait 1.5 s). `r` counts those 2, and `t` says
/// when 3 pass.
#[tokio::test(start_paused = true)]
async fn with_a_maximum_wait_remaining_counts_only_what_it_lets_through() -> Result<(), Error> {
    let clock = clock();
    let limiter = KeyedLimiter::<String, _, _>::with_clock(
        LeakyBucket::new("2/s burst 5".parse()?)?,
        100,
        clock.clone(),
    )?;
    let layer = RateLimitLayer::builder(limiter, api_key())
        .fields_on_admitted(true)
        .max_delay(Duration::from_secs(1))
        .build();
    let address = serve(Stamp(layer.layer(Hello)), true).await;
    let client = http1_client();
    let key = [("x-api-key", "k")];

    let first = get(&client, address, "/", &key).await;
    assert_eq!(first.status, StatusCode::OK);
    // 3 more would pass 0.5 s from now (waiting 0.5, 1 and 1.5 s less 0.5): `t` is 1, rounded up.
    assert_eq!(first.header("ratelimit"), r#""default";r=2;t=1"#);
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(get(&client, address, "/", &key).await.status);
    }
    assert_eq!(
        statuses,
        [StatusCode::OK, StatusCode::OK, StatusCode::TOO_MANY_REQUESTS]
    );

    // A second key, told `r` and `t`: after `t`, `r + 1` pass (the limiter's clock is frozen,
    // so these are decided at the same instant, one after the other).
    let key = [("x-api-key", "other")];
    let first = get(&client, address, "/", &key).await;
    assert_eq!(first.header("ratelimit"), r#""default";r=2;t=1"#);
    clock.advance(Duration::from_secs(1));
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(get(&client, address, "/", &key).await.status);
    }
    assert_eq!(statuses, [StatusCode::OK; 3]);
    Ok(())
}

/// A shaped request's fields are those of the moment it is sent on, its slot, not of the
/// earlier moment it was admitted: the wait has drained the queue in front of it. The
/// limiter's clock stands still (every request is decided at the same instant) and tokio's is
/// paused (each request leaves exactly at its slot).
#[tokio::test(start_paused = true)]
async fn a_shaped_response_tells_the_quota_as_at_its_slot() -> Result<(), Error> {
    // A slot every 10 s, one at once and up to 4 waiting.
    for (max_delay, expected) in [
        // At B's slot (10 s on) only B's own slot is queued: 4 pass, the next in 10 s (at its
        // admission, C behind it made 3). At C's, the same: only C's is queued.
        (None, [r#""default";r=4;t=10"#; 3]),
        // At most 25 s of wait: at B's or C's slot a request waits 10 s, the next 20 s, the
        // third 30 s: 2 pass, and 3 in 5 s (at their admissions, B was told r=1, C r=0).
        (Some(Duration::from_secs(25)), [r#""default";r=2;t=5"#; 3]),
    ] {
        let limiter = ten_second_shaper()?;
        let builder = RateLimitLayer::builder(limiter, api_key()).fields_on_admitted(true);
        let layer = match max_delay {
            Some(max) => builder.max_delay(max).build(),
            None => builder.build(),
        };
        let address = serve(Stamp(layer.layer(Hello)), true).await;
        let client = http1_client();
        // Sent together; which is A, B or C is told by its wait.
        let requests: Vec<_> = (0..3)
            .map(|_| {
                let client = client.clone();
                tokio::spawn(async move { get(&client, address, "/", &[("x-api-key", "k")]).await })
            })
            .collect();
        let mut answers = Vec::new();
        for request in requests {
            answers.push(request.await?);
        }
        answers.sort_by_key(|answer| answer.header("x-waited-ns").parse::<u64>().unwrap_or(u64::MAX));
        let waits: Vec<_> = answers
            .iter()
            .map(|answer| answer.header("x-waited-ns"))
            .collect();
        assert_eq!(waits, ["0", "10000000000", "20000000000"], "{max_delay:?}");
        let fields: Vec<_> = answers.iter().map(|answer| answer.header("ratelimit")).collect();
        assert_eq!(fields, expected, "{max_delay:?}");
    }
    Ok(())
}

/// A refusal because the queue is full, on a layer whose maximum wait is shorter than the
/// queue: the queue has room again after its retry-after, but the request would then still wait
/// above the maximum. `Retry-After` (and `t`) is when it would fit.
#[tokio::test(start_paused = true)]
async fn a_full_queue_is_retried_when_the_wait_fits_the_maximum() -> Result<(), Error> {
    let clock = clock();
    // A slot every 10 s, at most 2 waiting (20 s of queue), a maximum wait of 15 s.
    let limiter = KeyedLimiter::<String, _, _>::with_clock(
        LeakyBucket::new("6/min burst 3".parse()?)?,
        100,
        clock.clone(),
    )?;
    let layer = RateLimitLayer::builder(limiter, api_key())
        .max_delay(Duration::from_secs(15))
        .build();
    let address = serve(Stamp(layer.layer(Hello)), true).await;
    let client = http1_client();
    let key = [("x-api-key", "k")];

    // At once, then 10 s away; the third (20 s away) is above the maximum: refused, and told 5 s.
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(get(&client, address, "/", &key).await);
    }
    assert_eq!(statuses[0].status, StatusCode::OK);
    assert_eq!(statuses[1].status, StatusCode::OK);
    assert_eq!(statuses[2].status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(statuses[2].header("retry-after"), "5");
    // 5 s later it is given the slot 15 s away: the queue now ends 25 s away.
    clock.advance(Duration::from_secs(5));
    assert_eq!(get(&client, address, "/", &key).await.status, StatusCode::OK);
    // The queue is full (25 s of 30): room in 5 s, but a request then would wait 20 s. It fits
    // in 10 s.
    let full = get(&client, address, "/", &key).await;
    assert_eq!(full.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(full.header("retry-after"), "10");
    assert_eq!(full.header("ratelimit"), r#""default";r=0;t=10"#);
    clock.advance(Duration::from_secs(5));
    assert_eq!(
        get(&client, address, "/", &key).await.status,
        StatusCode::TOO_MANY_REQUESTS,
        "5 s later it would still wait 20 s"
    );
    clock.advance(Duration::from_secs(5));
    let fits = get(&client, address, "/", &key).await;
    assert_eq!(
        (fits.status, fits.header("x-waited-ns")),
        (StatusCode::OK, Duration::from_secs(15).as_nanos().to_string())
    );
    Ok(())
}

/// A shaping layer over a keyed shaper whose clock stands still ("1/10s burst 5": a slot every
/// 10 s, one at once and up to 4 waiting), served without TCP: `call` decides the moment it is
/// called, and dropping its future before the slot is the client hanging up.
fn shaping_service(limiter: &Arc<Shaper>) -> RateLimit<Hello, Arc<Shaper>, HeaderKey> {
    RateLimitLayer::new(Arc::clone(limiter), api_key()).layer(Hello)
}

type Shaper = KeyedLimiter<String, LeakyBucket, ManualClock>;

/// A keyed shaper whose clock stands still: a slot every 10 s, one at once and up to 4
/// waiting, room for 100 keys.
fn ten_second_shaper() -> Result<Shaper, Error> {
    Ok(KeyedLimiter::with_clock(
        LeakyBucket::new("1/10s burst 5".parse()?)?,
        100,
        clock(),
    )?)
}

/// Calls `service` now (the layer decides at once): the response future, which holds the slot.
pub(crate) async fn hold<S: Service<Request<()>>>(service: &mut S) -> S::Future
where
    S::Error: std::fmt::Debug,
{
    std::future::poll_fn(|cx| service.poll_ready(cx))
        .await
        .expect("ready");
    service.call(request())
}

fn request() -> Request<()> {
    Request::get("/")
        .header("x-api-key", "k")
        .body(())
        .expect("a valid request")
}

/// Calls `service` now (the layer decides at once) and runs the response future on a task of
/// its own that says when, after `since` on tokio's clock, the request was answered.
async fn leave_at<S>(service: &mut S, since: tokio::time::Instant) -> tokio::task::JoinHandle<Duration>
where
    S: Service<Request<()>> + Send,
    S::Future: Send + 'static,
    S::Error: std::fmt::Debug,
{
    let answered = hold(service).await;
    tokio::spawn(async move {
        answered.await.expect("answered");
        since.elapsed()
    })
}

/// The wait runs from the decision, not from the response future's first poll: a future
/// polled late (a busy executor, a buffer, a caller that awaits later) still forwards its request
/// at its slot, not a whole delay after it, when it could go out with the next request's slot.
#[tokio::test(start_paused = true)]
async fn a_wait_counts_from_the_decision_not_from_the_first_poll() -> Result<(), Error> {
    let limiter = Arc::new(ten_second_shaper()?);
    let mut service = shaping_service(&limiter);
    let start = tokio::time::Instant::now();
    hold(&mut service).await.await?;
    assert_eq!(start.elapsed(), Duration::ZERO);
    // Decided now, given the slot 10 s on; first polled only 10 s later.
    let second = hold(&mut service).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    second.await?;
    assert_eq!(start.elapsed(), Duration::from_secs(10));
    Ok(())
}

/// A client in the middle of the queue hangs up: its slot passes unused, and the next request
/// is scheduled after the last one waiting, not with it (the unconditional refund gave E the
/// 30 s of D). Tokio's clock is paused, so each answer comes exactly at its timer.
#[tokio::test(start_paused = true)]
async fn a_slot_given_up_in_the_middle_of_the_queue_passes_unused() -> Result<(), Error> {
    let limiter = Arc::new(ten_second_shaper()?);
    let mut service = shaping_service(&limiter);
    let next_delay = || limiter.peek(&"k".to_owned()).delay();
    let since = tokio::time::Instant::now();

    // A leaves at once; B, C and D are given 10, 20 and 30 s.
    let a = leave_at(&mut service, since).await;
    let b = hold(&mut service).await;
    let c = leave_at(&mut service, since).await;
    let d = leave_at(&mut service, since).await;
    assert_eq!(next_delay(), Duration::from_secs(40));
    // B's client hangs up: nothing comes back, its slot is not the end of the queue.
    drop(b);
    assert_eq!(next_delay(), Duration::from_secs(40));
    // E is given 40 s, after D.
    let e = leave_at(&mut service, since).await;
    let secs = |s| Duration::from_secs(s);
    assert_eq!(
        [a.await?, c.await?, d.await?, e.await?],
        [secs(0), secs(20), secs(30), secs(40)]
    );
    Ok(())
}

/// A client at the end of the queue hangs up: its slot goes to the next request exactly; and
/// clients leaving from the end, the last first, give back every slot.
#[tokio::test(start_paused = true)]
async fn slots_given_up_from_the_end_of_the_queue_go_to_the_next_requests() -> Result<(), Error> {
    let limiter = Arc::new(ten_second_shaper()?);
    let mut service = shaping_service(&limiter);
    let next_delay = || limiter.peek(&"k".to_owned()).delay();
    let since = tokio::time::Instant::now();
    let a = leave_at(&mut service, since).await;
    let (b, c, d) = (
        hold(&mut service).await,
        hold(&mut service).await,
        hold(&mut service).await,
    );
    assert_eq!(next_delay(), Duration::from_secs(40));
    // D, the last, hangs up: E is given its 30 s.
    drop(d);
    assert_eq!(next_delay(), Duration::from_secs(30));
    let e = hold(&mut service).await;
    assert_eq!(next_delay(), Duration::from_secs(40));
    // E, C and B hang up in that order, each the end of the queue in its turn: all come back.
    drop(e);
    drop(c);
    drop(b);
    assert_eq!(next_delay(), Duration::from_secs(10));
    // The next is given B's 10 s.
    let f = leave_at(&mut service, since).await;
    assert_eq!([a.await?, f.await?], [Duration::ZERO, Duration::from_secs(10)]);
    Ok(())
}

/// A limiter that counts the refunds the layer asks of it (and hands every call on).
struct CountingRefunds {
    limiter: KeyedLimiter<String, LeakyBucket, ManualClock>,
    refunds: std::sync::atomic::AtomicUsize,
}

impl RateLimiter<String> for CountingRefunds {
    fn decide(
        &self,
        key: &String,
        cost: u64,
    ) -> impl std::future::Future<Output = Result<tollgate::Decision, tollgate::middleware::LimiterError>> + Send
    {
        self.limiter.decide(key, cost)
    }

    fn decide_now(
        &self,
        key: &String,
        cost: u64,
    ) -> Option<Result<tollgate::Decision, tollgate::middleware::LimiterError>> {
        self.limiter.decide_now(key, cost)
    }

    fn decide_now_within(
        &self,
        key: &String,
        cost: u64,
        max_delay: Option<Duration>,
    ) -> Option<Result<(tollgate::Decision, Origin), tollgate::middleware::LimiterError>> {
        self.limiter.decide_now_within(key, cost, max_delay)
    }

    fn policy(&self) -> tollgate::middleware::Policy {
        self.limiter.policy()
    }

    fn refund(&self, key: String, cost: u64, origin: Origin) {
        // Relaxed: a count read after the layer's calls returned, on the same task.
        self.refunds.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.limiter.refund(key, cost, origin);
    }
}

/// A wait above the maximum is refused by the limiter itself, in the decision, with nothing
/// counted: no slot to give back, so none that a concurrent admission behind it could turn
/// into a slot wasted for good (admitted, then refunded, it was counted for a moment).
#[tokio::test(start_paused = true)]
async fn a_wait_beyond_the_maximum_is_never_counted() -> Result<(), Error> {
    let limiter = Arc::new(CountingRefunds {
        limiter: ten_second_shaper()?,
        refunds: std::sync::atomic::AtomicUsize::new(0),
    });
    let mut service = RateLimitLayer::builder(Arc::clone(&limiter), api_key())
        .max_delay(Duration::from_secs(15))
        .build()
        .layer(Hello);
    let next_delay = || limiter.limiter.peek(&"k".to_owned()).delay();
    let mut statuses = Vec::new();
    for _ in 0..3 {
        std::future::poll_fn(|cx| Service::<Request<()>>::poll_ready(&mut service, cx)).await?;
        statuses.push(service.call(request()).await?.status());
    }
    // At once, 10 s, then 20 s: above 15 s, refused.
    assert_eq!(
        statuses,
        [StatusCode::OK, StatusCode::OK, StatusCode::TOO_MANY_REQUESTS]
    );
    assert_eq!(limiter.refunds.load(std::sync::atomic::Ordering::Relaxed), 0);
    assert_eq!(next_delay(), Duration::from_secs(20));
    Ok(())
}

/// An application's algorithm that delegates to the shaper and implements only the trait's
/// required methods and `refund` (as any `Algorithm` written before `refund_slot` and
/// `decide_within` existed): the layer still refuses a wait above its maximum without keeping
/// the slot, and gives back the slot of a client that leaves from the end of the queue, through
/// the provided defaults (`decide_within` is `decide`, `refund_slot` is `refund`).
struct Delegating(LeakyBucket);

impl tollgate::algorithm::Algorithm for Delegating {
    fn capacity(&self) -> u64 {
        self.0.capacity()
    }

    fn decide(&self, state: u64, now: tollgate::Timestamp, cost: u64) -> tollgate::algorithm::Transition {
        self.0.decide(state, now, cost)
    }

    fn is_idle(&self, state: u64, now: tollgate::Timestamp) -> bool {
        self.0.is_idle(state, now)
    }

    fn refund(&self, state: u64, now: tollgate::Timestamp, cost: u64) -> u64 {
        self.0.refund(state, now, cost)
    }
}

impl tollgate::middleware::AnnouncedPolicy for Delegating {
    fn policy(&self) -> tollgate::middleware::Policy {
        self.0.policy()
    }
}

#[tokio::test(start_paused = true)]
async fn an_algorithm_written_before_slot_refunds_still_gets_its_slots_back() -> Result<(), Error> {
    let shaper = Delegating(LeakyBucket::new("1/10s burst 5".parse()?)?);
    let limiter = Arc::new(KeyedLimiter::<String, _, _>::with_clock(shaper, 100, clock())?);
    let mut service = RateLimitLayer::builder(Arc::clone(&limiter), api_key())
        .max_delay(Duration::from_secs(15))
        .build()
        .layer(Hello);
    let next_delay = || limiter.peek(&"k".to_owned()).delay();
    // A at once; B given 10 s and held; C would wait 20 s: refused, its slot given back.
    assert_eq!(hold(&mut service).await.await?.status(), StatusCode::OK);
    let b = hold(&mut service).await;
    assert_eq!(
        hold(&mut service).await.await?.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(next_delay(), Duration::from_secs(20), "C kept no slot");
    // B, the end of the queue, hangs up: its slot goes back.
    drop(b);
    assert_eq!(next_delay(), Duration::from_secs(10), "B's slot came back");
    Ok(())
}

/// What the layer is told of each kind of decision by a table: a counted admission names its
/// slot, an untracked one (a table full of keys in debt, `WhenFull::Admit`) was counted
/// nowhere, so nothing of it may ever be given back, and a refusal holds nothing.
#[test]
fn a_table_names_the_slot_of_a_counted_admission_only() -> Result<(), Error> {
    let limiter =
        KeyedLimiter::<String, _, _>::with_clock(LeakyBucket::new("1/10s burst 2".parse()?)?, 1, clock())?
            .when_full(tollgate::WhenFull::Admit);
    let slots = limiter.slots();
    let decide = |key: &str| {
        limiter
            .decide_now_within(&key.to_owned(), 1, None)
            .expect("a table decides at once")
            .expect("fits")
    };
    for key in 0..slots {
        let (decision, origin) = decide(&key.to_string());
        assert!(decision.is_allowed());
        assert!(matches!(origin, Origin::Slot { .. }), "{origin:?}");
    }
    let (untracked, origin) = decide("newcomer");
    assert_eq!(untracked.outcome(), tollgate::Outcome::AllowedUntracked);
    assert_eq!(origin, Origin::Uncounted);
    assert!(decide("0").0.is_allowed(), "burst 2: a second request waits");
    let (refused, origin) = decide("0");
    assert!(!refused.is_allowed());
    assert_eq!(origin, Origin::Limiter);
    Ok(())
}

/// A gate the test opens: the answers of [`RemoteShaper`] wait at it, as a remote store's
/// answers travel back.
#[derive(Default)]
struct Gate {
    /// Whether it is open, and who waits for it to open.
    state: std::sync::Mutex<(bool, Vec<std::task::Waker>)>,
}

impl Gate {
    fn state(&self) -> std::sync::MutexGuard<'_, (bool, Vec<std::task::Waker>)> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn open(&self) {
        let mut state = self.state();
        state.0 = true;
        state.1.drain(..).for_each(std::task::Waker::wake);
    }

    async fn passed(&self) {
        std::future::poll_fn(|cx| {
            let mut state = self.state();
            if state.0 {
                return std::task::Poll::Ready(());
            }
            state.1.push(cx.waker().clone());
            std::task::Poll::Pending
        })
        .await;
    }
}

/// A shaper deciding elsewhere, as a Redis limiter does: its table counts a request when the
/// decision starts (the script ran), and the answer arrives once the gate is open. It records
/// the refunds the layer asks of it.
struct RemoteShaper {
    table: Shaper,
    gate: Gate,
    refunds: std::sync::Mutex<Vec<(String, Origin)>>,
}

impl RateLimiter<String> for RemoteShaper {
    fn decide(
        &self,
        key: &String,
        cost: u64,
    ) -> impl std::future::Future<Output = Result<tollgate::Decision, tollgate::middleware::LimiterError>> + Send
    {
        let decided = self.decide_within(key, cost, None);
        async move { decided.await.map(|(decision, _)| decision) }
    }

    async fn decide_within(
        &self,
        key: &String,
        cost: u64,
        max_delay: Option<Duration>,
    ) -> Result<(tollgate::Decision, Origin), tollgate::middleware::LimiterError> {
        let counted = self.table.decide_within(key, cost, max_delay).await;
        self.gate.passed().await;
        counted
    }

    fn policy(&self) -> tollgate::middleware::Policy {
        self.table.policy()
    }

    fn refund(&self, key: String, cost: u64, origin: Origin) {
        self.refunds
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((key.clone(), origin));
        self.table.refund(key, cost, origin);
    }
}

/// A client that leaves while a remote limiter's decision is in flight: the store counted the
/// request all the same, so the decision finishes on a task of its own and its slot comes back
/// (without it, the slot stayed taken until its time passed). An admission without a wait is
/// kept, as when its client leaves while the service behind is not ready.
#[tokio::test]
async fn a_client_that_leaves_before_a_remote_answer_gives_its_slot_back() -> Result<(), Error> {
    let limiter = Arc::new(RemoteShaper {
        table: ten_second_shaper()?,
        gate: Gate::default(),
        refunds: std::sync::Mutex::new(Vec::new()),
    });
    let mut service = RateLimitLayer::new(Arc::clone(&limiter), api_key()).layer(Hello);
    let next_delay = |key: &str| limiter.table.peek(&key.to_owned()).delay();
    // The free slot of "k" is taken: the next request of "k" waits 10 s.
    assert!(limiter.table.check(&"k".to_owned()).is_allowed());

    // B ("k", to wait 10 s) and X ("x", at once) are counted, and leave before the answers.
    let mut leaving = Vec::new();
    for key in ["k", "x"] {
        std::future::poll_fn(|cx| Service::<Request<()>>::poll_ready(&mut service, cx)).await?;
        let request = Request::get("/").header("x-api-key", key).body(())?;
        let mut answer = Box::pin(service.call(request));
        let polled =
            std::future::poll_fn(|cx| std::task::Poll::Ready(std::future::Future::poll(answer.as_mut(), cx)))
                .await;
        assert!(polled.is_pending(), "the answer waits at the gate");
        leaving.push(answer);
    }
    assert_eq!(
        (next_delay("k"), next_delay("x")),
        (Duration::from_secs(20), Duration::from_secs(10))
    );
    drop(leaving);

    // The answers arrive: B's slot, the end of the queue, is given back; X's is kept.
    limiter.gate.open();
    tokio::time::timeout(Duration::from_secs(10), async {
        while next_delay("k") != Duration::from_secs(10) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .map_err(|_| "the slot of the request that left never came back")?;
    let refunds = limiter
        .refunds
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    assert_eq!(refunds.len(), 1, "{refunds:?}");
    assert_eq!(refunds[0].0, "k");
    assert!(matches!(refunds[0].1, Origin::Slot { .. }), "{refunds:?}");
    assert_eq!(next_delay("x"), Duration::from_secs(10));
    Ok(())
}

/// A limiter deciding elsewhere whose decision panics (a bug of its own).
struct Panicking;

impl RateLimiter<String> for Panicking {
    async fn decide(
        &self,
        _key: &String,
        _cost: u64,
    ) -> Result<tollgate::Decision, tollgate::middleware::LimiterError> {
        panic!("the limiter's own bug");
    }

    fn policy(&self) -> tollgate::middleware::Policy {
        tollgate::middleware::AnnouncedPolicy::policy(
            &LeakyBucket::new("1/10s burst 5".parse().unwrap()).unwrap(),
        )
    }

    fn refund(&self, _key: String, _cost: u64, _origin: Origin) {}
}

thread_local! {
    /// The panics of this thread (the tests below run on a current-thread runtime, whose tasks
    /// run on the test's thread).
    static PANICS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// A limiter's decision that panics panics once: the response future dropped as that panic
/// unwinds does not hand the decision to a task of its own, where polling it again would panic
/// a second time (`async fn resumed after panicking`, in tollgate's code).
#[tokio::test]
async fn a_decision_that_panics_is_not_polled_again() -> Result<(), Error> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.with(|panics| panics.set(panics.get() + 1));
        hook(info);
    }));
    let mut service = RateLimitLayer::new(Panicking, api_key()).layer(Hello);
    std::future::poll_fn(|cx| Service::<Request<()>>::poll_ready(&mut service, cx)).await?;
    let request = Request::get("/").header("x-api-key", "k").body(())?;
    let mut answer = Box::pin(service.call(request));
    let polled = std::future::poll_fn(|cx| {
        std::task::Poll::Ready(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            std::future::Future::poll(answer.as_mut(), cx).is_pending()
        })))
    })
    .await;
    assert!(polled.is_err(), "the decision panicked");
    drop(answer);
    // Any task the drop started runs now.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    let _ = std::panic::take_hook();
    assert_eq!(
        PANICS.with(std::cell::Cell::get),
        1,
        "panicked again after the decision's panic"
    );
    Ok(())
}
