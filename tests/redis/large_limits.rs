//! Limits near `u32::MAX` over windows of 1 ms, 1 s, 1 min, 1 h and 24 h through Redis, on a
//! client's time: every decision of both window counters is the local limiter's, field for
//! field, on traces of large weights around window boundaries (the sliding window's script
//! multiplies such counts by such windows in two exact limbs, past the doubles' 2^53), and many
//! requests of weight 1 on one key admit exactly a limit. The buckets run such counts exactly, their
//! interval a whole µs and a remainder (`fine_rates.rs` compares them with an exact model).
//!
//! Keys are made persistent after every call: a key's TTL is client time counted on the
//! server's clock, and a 1 ms window's lives about a millisecond of real time (expiry has its
//! own tests, `redis_faults.rs`).

use std::time::Duration;

use crate::redis_common::{client_time_limiter, raw_connection, RedisServer};
use redis::AsyncCommands;
use tollgate::distributed::{DecidedBy, RedisLimiter};
use tollgate::{
    DirectLimiter, FixedWindow, LeakyBucket, ManualClock, Quota, SlidingWindow, Timestamp, TokenBucket,
};

const MAX: u64 = u32::MAX as u64;

const WINDOWS: [Duration; 5] = [
    Duration::from_millis(1),
    Duration::from_secs(1),
    Duration::from_secs(60),
    Duration::from_secs(3_600),
    Duration::from_secs(86_400),
];

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap()
}

/// `(µs, weight)` around the first window boundary after a round time and the next two, with a
/// step back: weights a large share of the limit.
fn trace(w: u64, limit: u64) -> Vec<(u64, u64)> {
    let start = 1_700_000_000_000_000 / w * w;
    vec![
        (start, limit - 1),
        (start, 1),
        (start, 1),
        (start + w / 2, limit / 3),
        (start + w - 1, 1),
        (start + w, limit),
        (start + w, 1),
        (start + w + w / 4, limit / 4),
        (start + w + w / 2, limit / 2),
        (start + w / 3, 2),
        (start + 2 * w - 1, limit / 10),
        (start + 2 * w, limit),
        (start + 3 * w + w / 2, limit - limit / 4),
    ]
}

/// Every step of `trace` through Redis and through a local limiter of `algorithm` (both on
/// `clock`): the same decision, field for field. Returns how many were admitted, and how many
/// times a key expired before its `PERSIST` (then both sides start afresh, as in
/// `redis_same_decisions.rs`: a 1 ms window's key lives about a millisecond of real time).
async fn same_decisions<A: tollgate::algorithm::Algorithm + Copy>(
    name: &str,
    algorithm: A,
    remote: &RedisLimiter,
    raw: &mut redis::aio::MultiplexedConnection,
    clock: &ManualClock,
    trace: &[(u64, u64)],
) -> (usize, usize) {
    let mut local = DirectLimiter::with_clock(algorithm, clock.clone());
    let (mut admitted, mut raced) = (0, 0);
    let key = remote.redis_key("k");
    for &(at, cost) in trace {
        let now = Timestamp::from_nanos(at * 1_000);
        clock.set(now);
        let answer = remote.check_n("k", cost).await.unwrap();
        let _: bool = raw.persist(&key).await.unwrap();
        let expected = local.check_n_at(cost, now).unwrap();
        assert_eq!(answer.decided_by, DecidedBy::Redis, "{name}: {cost} at {at} µs");
        assert_eq!(answer.decision, expected, "{name}: {cost} at {at} µs");
        admitted += usize::from(expected.is_allowed());
        if !expected.reset_after().is_zero() && !raw.exists::<_, bool>(&key).await.unwrap() {
            assert!(
                expected.reset_after() <= Duration::from_millis(20),
                "{name}: the key is gone while its state counts for {:?}",
                expected.reset_after()
            );
            local = DirectLimiter::with_clock(algorithm, clock.clone());
            raced += 1;
        }
    }
    (admitted, raced)
}

#[tokio::test(flavor = "current_thread")]
async fn both_windows_decide_as_the_local_limiters_up_to_u32_max() {
    let server = RedisServer::start();
    let mut raw = raw_connection(&server).await;
    let (mut admitted, mut raced) = (0, 0);
    for (number, window) in WINDOWS.into_iter().enumerate() {
        let w = micros(window);
        for limit in [MAX, MAX - 1, 1_000_000_000] {
            let quota = Quota::new(limit, window).unwrap();
            let clock = ManualClock::new();
            let sliding = SlidingWindow::new(quota).unwrap();
            let remote = client_time_limiter(&server, sliding, &clock, &format!("sw{number}-{limit}:")).await;
            let name = format!("sliding {limit} per {window:?}");
            let (a, r) = same_decisions(&name, sliding, &remote, &mut raw, &clock, &trace(w, limit)).await;
            (admitted, raced) = (admitted + a, raced + r);

            let fixed = FixedWindow::new(quota).unwrap();
            let remote = client_time_limiter(&server, fixed, &clock, &format!("fw{number}-{limit}:")).await;
            let name = format!("fixed {limit} per {window:?}");
            let (a, r) = same_decisions(&name, fixed, &remote, &mut raw, &clock, &trace(w, limit)).await;
            (admitted, raced) = (admitted + a, raced + r);
        }
    }
    // Admissions and refusals were both compared (30 configurations of 13 requests), and keys
    // rarely expired before their `PERSIST`.
    assert!((100..300).contains(&admitted), "{admitted} admitted");
    assert!(raced <= 10, "{raced} keys expired before their PERSIST");
}

/// A sliding window of `u32::MAX` per day asked for in 1,000 requests of a thousandth of the
/// limit and then some, at one instant: exactly as many as fit are admitted, the count is the
/// key's, and the next unit is refused.
#[tokio::test(flavor = "current_thread")]
async fn a_day_of_u32_max_counts_every_request() {
    let server = RedisServer::start();
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_700_000_000));
    let sliding = SlidingWindow::new(Quota::new(MAX, Duration::from_secs(86_400)).unwrap()).unwrap();
    let remote = client_time_limiter(&server, sliding, &clock, "day:").await;
    let share = MAX / 1_000;
    let mut admitted = 0;
    for _ in 0..1_010 {
        if remote.check_n("k", share).await.unwrap().is_allowed() {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 1_000);
    let rest = MAX - 1_000 * share;
    let last = remote.check_n("k", rest).await.unwrap();
    assert!(last.is_allowed() && last.decision.remaining() == 0, "{last:?}");
    assert!(!remote.check("k").await.unwrap().is_allowed());
}

/// The buckets through Redis run `u32::MAX` per millisecond, second, minute, hour or day exactly
/// (`T` under a microsecond or, per day, 20.1 µs: a whole µs and a remainder in `1/d` µs): the
/// whole burst at one instant, then nothing, then one unit once `T` has passed, not a µs before.
#[tokio::test(flavor = "current_thread")]
async fn bucket_rates_finer_than_microseconds_run_exactly() {
    let server = RedisServer::start();
    for (number, window) in [
        Duration::from_millis(1),
        Duration::from_secs(1),
        Duration::from_secs(60),
        Duration::from_secs(3_600),
        Duration::from_secs(86_400),
    ]
    .into_iter()
    .enumerate()
    {
        let quota = Quota::new(MAX, window).unwrap();
        // Whole µs for one unit: ceil(window / MAX).
        let unit = micros(window).div_ceil(MAX);
        for shaper in [false, true] {
            let start = Timestamp::from_secs(1_700_000_000);
            let clock = ManualClock::starting_at(start);
            let remote = match shaper {
                false => TokenBucket::new(quota).unwrap().into(),
                true => tollgate::distributed::RedisAlgorithm::from(LeakyBucket::new(quota).unwrap()),
            };
            let prefix = format!("fine{number}-{shaper}:");
            let remote = client_time_limiter(&server, remote, &clock, &prefix).await;
            assert!(remote.check_n("k", MAX).await.unwrap().is_allowed(), "{window:?}");
            assert!(!remote.check("k").await.unwrap().is_allowed(), "{window:?}");
            if unit > 1 {
                clock.set(start.saturating_add(Duration::from_micros(unit - 1)));
                assert!(!remote.check("k").await.unwrap().is_allowed(), "{window:?}");
            }
            clock.set(start.saturating_add(Duration::from_micros(unit)));
            assert!(remote.check("k").await.unwrap().is_allowed(), "{window:?}");
        }
    }
}
