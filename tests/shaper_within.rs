//! `check_n_within`: a shaper's request that would wait longer than a maximum is refused in the
//! decision, and its refusal's retry-after is the first instant it passes, whether the queue is
//! too long to wait behind or full as well.

use std::time::Duration;

use tollgate::{DirectLimiter, KeyedLimiter, LeakyBucket, ManualClock, Timestamp};

const SEC: u64 = 1_000_000_000;
const T0: u64 = 1_700_000_000 * SEC;

fn ts(nanos: u64) -> Timestamp {
    Timestamp::from_nanos(nanos)
}

/// One slot a second, 10 at once: after 10 requests at T0 the queue is full and ends at T0 +
/// 10 s. With a maximum wait of 2 s, a request is refused both for the full queue (room at T0 +
/// 1 s) and for the wait (it fits from T0 + 8 s): told to retry when both hold, it passes then,
/// and not a nanosecond before.
fn full_and_long(decide: impl Fn(u64) -> tollgate::Decision) {
    let refused = decide(T0);
    assert!(!refused.is_allowed());
    assert_eq!(refused.remaining(), 0);
    assert_eq!(refused.retry_after(), Duration::from_secs(8));
    assert_eq!(refused.reset_after(), Duration::from_secs(10));
    let retry = T0 + 8 * SEC;
    assert!(!decide(retry - 1).is_allowed());
    let passed = decide(retry);
    assert!(passed.is_allowed(), "retried at its retry-after: {passed:?}");
    assert_eq!(passed.delay(), Duration::from_secs(2));
}

#[test]
fn a_direct_refusal_of_a_full_and_long_queue_retries_when_both_fit() {
    let limiter = DirectLimiter::with_clock(
        LeakyBucket::new("1/s burst 10".parse().unwrap()).unwrap(),
        ManualClock::new(),
    );
    for _ in 0..10 {
        assert!(limiter.check_n_at(1, ts(T0)).unwrap().is_allowed());
    }
    let max = Duration::from_secs(2);
    full_and_long(|at| limiter.check_n_within_at(1, max, ts(at)).unwrap());
}

#[test]
fn a_keyed_refusal_of_a_full_and_long_queue_retries_when_both_fit() {
    let shaper = LeakyBucket::new("1/s burst 10".parse().unwrap()).unwrap();
    let limiter = KeyedLimiter::<u64, _, _>::with_clock(shaper, 8, ManualClock::new()).unwrap();
    for _ in 0..10 {
        assert!(limiter.check_n_at(&7, 1, ts(T0)).unwrap().is_allowed());
    }
    let max = Duration::from_secs(2);
    full_and_long(|at| limiter.check_n_within_at(&7, 1, max, ts(at)).unwrap());
}

/// A weight no queue can ever hold is the typed error of `check_n`, whatever the maximum wait,
/// and a keyed limiter inserts nothing for it.
#[test]
fn a_weight_above_the_capacity_is_an_error_within_a_maximum_too() {
    let shaper = LeakyBucket::new("1/s burst 10".parse().unwrap()).unwrap();
    let direct = DirectLimiter::with_clock(shaper, ManualClock::new());
    let max = Duration::from_secs(2);
    let error = direct.check_n_within_at(11, max, ts(T0)).unwrap_err();
    assert_eq!((error.cost, error.capacity), (11, 10));
    assert_eq!(direct.raw_state(), tollgate::algorithm::FRESH_STATE);
    let keyed = KeyedLimiter::<u64, _, _>::with_clock(shaper, 8, ManualClock::new()).unwrap();
    let error = keyed.check_n_within_at(&7, u64::MAX, max, ts(T0)).unwrap_err();
    assert_eq!((error.cost, error.capacity), (u64::MAX, 10));
    assert_eq!(keyed.len(), 0);
}
