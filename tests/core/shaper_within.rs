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

/// A wait of exactly the maximum is within it; a maximum one nanosecond shorter refuses, and the
/// refusal's retry-after is that nanosecond.
#[test]
fn a_wait_of_exactly_the_maximum_is_admitted() {
    let wait = Duration::from_millis(100);
    for (max, admitted) in [(wait, true), (wait - Duration::from_nanos(1), false)] {
        let shaper = LeakyBucket::new("10/s burst 3".parse().unwrap()).unwrap();
        let limiter = DirectLimiter::with_clock(shaper, ManualClock::starting_at(ts(T0)));
        assert_eq!(limiter.check().delay(), Duration::ZERO);
        let d = limiter.check_n_within(1, max).unwrap();
        assert_eq!(d.is_allowed(), admitted, "max {max:?}: {d:?}");
        match admitted {
            true => assert_eq!(d.delay(), wait),
            false => assert_eq!(d.retry_after(), Duration::from_nanos(1)),
        }
    }
}

/// A maximum wait longer than a `u64` of nanoseconds holds is no maximum, not that length cut to
/// 64 bits (`18,446,744,074 s` cut so would be 0.29 s, shorter than the 1 s wait here).
#[test]
fn a_maximum_past_u64_nanoseconds_is_no_maximum() {
    let huge = Duration::from_secs(18_446_744_074);
    let shaper = LeakyBucket::new("1/s burst 3".parse().unwrap()).unwrap();
    let direct = DirectLimiter::with_clock(shaper, ManualClock::starting_at(ts(T0)));
    assert!(direct.check().is_allowed());
    let d = direct.check_n_within(1, huge).unwrap();
    assert!(d.is_allowed(), "{d:?}");
    assert_eq!(d.delay(), Duration::from_secs(1));
    let keyed = KeyedLimiter::<u64, _, _>::with_clock(shaper, 8, ManualClock::starting_at(ts(T0))).unwrap();
    assert!(keyed.check(&1).is_allowed());
    let d = keyed.check_n_within(&1, 1, huge).unwrap();
    assert!(d.is_allowed(), "{d:?}");
    assert_eq!(d.delay(), Duration::from_secs(1));
}
