//! Limits near `u32::MAX` over windows of 1 ms, 1 s, 1 min, 1 h and 24 h, direct and keyed:
//! every decision of both window counters is their exact reference model's
//! (`tests/reference/`), on traces of large weights around window boundaries; the buckets take
//! every such count whose rate their whole-nanosecond emission interval holds, and refuse the
//! others with the typed error that says why; the sliding log is bounded by memory, not by a
//! count's width, and says so.

use std::time::Duration;

use crate::reference::fixed_window::FixedWindowModel;
use crate::reference::sliding_window::SlidingWindowModel;
use crate::reference::Expected;
use tollgate::algorithm::Algorithm;
use tollgate::{
    DirectLimiter, FixedWindow, KeyedLimiter, LeakyBucket, ManualClock, Quota, QuotaError, SlidingLog,
    SlidingWindow, Timestamp, TokenBucket,
};

const MAX: u64 = u32::MAX as u64;

/// The windows: 1 ms, 1 s, 1 min, 1 h, 24 h.
const WINDOWS: [Duration; 5] = [
    Duration::from_millis(1),
    Duration::from_secs(1),
    Duration::from_secs(60),
    Duration::from_secs(3_600),
    Duration::from_secs(86_400),
];

/// The limits: `u32::MAX`, just below it, and a service-wide round one.
const LIMITS: [u64; 3] = [MAX, MAX - 1, 1_000_000_000];

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap()
}

/// A trace over window `w` for `limit`: `(ns after a window boundary, weight)`, with weights a
/// large share of the limit, around the first boundary and the next two (where the previous
/// window weighs on the sliding window), and a step back.
fn trace(w: u64, limit: u64) -> Vec<(u64, u64)> {
    let start = 1_700_000_000_000_000_000 / w * w;
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
        (start + 2 * w, limit / 2),
        (start + 3 * w + w / 2, limit - limit / 4),
        (start + 5 * w, limit),
    ]
}

/// A trace through `check` (`(now, weight) -> decision`) and `model` (decided at the running
/// maximum of the times, as a step back is: for these traces, never before the latest window's
/// start, where both windows decide as at the latest time's window): every decision alike.
fn same_as_model(
    name: &str,
    trace: &[(u64, u64)],
    mut check: impl FnMut(u64, u64) -> Expected,
    mut model: impl FnMut(u64, u64) -> Expected,
    window_start: impl Fn(u64) -> u64,
) {
    let mut latest = 0;
    for &(now, cost) in trace {
        let at = now.max(window_start(latest));
        latest = latest.max(now);
        let got = check(now, cost);
        let expected = model(at, cost);
        assert_eq!(got.allowed, expected.allowed, "{name}: {cost} at {now}");
        assert_eq!(got.remaining, expected.remaining, "{name}: {cost} at {now}");
        for (got, expected) in [
            (got.retry_after, expected.retry_after),
            (got.reset_after, expected.reset_after),
        ] {
            if expected == 0 {
                assert_eq!(got, 0, "{name}: {cost} at {now}");
            } else {
                assert_eq!(now + got, at + expected, "{name}: {cost} at {now}");
            }
        }
    }
}

/// Both windows, direct and keyed, at every window and limit: the model's decisions.
#[test]
fn window_counters_take_every_limit_up_to_u32_max_at_every_window() {
    let at = Timestamp::from_nanos;
    for window in WINDOWS {
        let w = nanos(window);
        let start_of = |t: u64| t / w * w;
        for limit in LIMITS {
            let quota = Quota::new(limit, window).unwrap();
            let sliding = SlidingWindow::new(quota).unwrap();
            let fixed = FixedWindow::new(quota).unwrap();
            assert!(
                sliding.is_wide(),
                "{limit} per {window:?} does not fit a 64-bit sliding window"
            );
            let trace = trace(w, limit);

            let direct = DirectLimiter::with_clock(sliding, ManualClock::new());
            let mut model = SlidingWindowModel::new(w, limit);
            same_as_model(
                &format!("direct sliding {limit} per {window:?}"),
                &trace,
                |now, cost| Expected::of(&direct.check_n_at(cost, at(now)).unwrap()),
                |now, cost| model.decide(now, cost),
                start_of,
            );
            let keyed = KeyedLimiter::<str, _, _>::with_clock(sliding, 8, ManualClock::new()).unwrap();
            let mut model = SlidingWindowModel::new(w, limit);
            same_as_model(
                &format!("keyed sliding {limit} per {window:?}"),
                &trace,
                |now, cost| Expected::of(&keyed.check_n_at("service", cost, at(now)).unwrap()),
                |now, cost| model.decide(now, cost),
                start_of,
            );

            let direct = DirectLimiter::with_clock(fixed, ManualClock::new());
            let mut model = FixedWindowModel::new(w, limit);
            same_as_model(
                &format!("direct fixed {limit} per {window:?}"),
                &trace,
                |now, cost| Expected::of(&direct.check_n_at(cost, at(now)).unwrap()),
                |now, cost| model.decide(now, cost),
                |latest| latest,
            );
            let keyed = KeyedLimiter::<str, _, _>::with_clock(fixed, 8, ManualClock::new()).unwrap();
            let mut model = FixedWindowModel::new(w, limit);
            same_as_model(
                &format!("keyed fixed {limit} per {window:?}"),
                &trace,
                |now, cost| Expected::of(&keyed.check_n_at("service", cost, at(now)).unwrap()),
                |now, cost| model.decide(now, cost),
                |latest| latest,
            );
        }
    }
}

/// Past what a window counts: `u32::MAX + 1` for the sliding window (its counts are 32 bits in
/// the 128-bit state), `2^63` for the fixed window (63), a typed error naming the maximum, at
/// every window. The fixed window takes every limit up to that, far past `u32::MAX`.
#[test]
fn past_what_a_window_counts_is_a_typed_error() {
    for window in WINDOWS {
        let sliding = SlidingWindow::new(Quota::new(MAX + 1, window).unwrap());
        assert_eq!(
            sliding,
            Err(QuotaError::LimitTooLarge {
                limit: MAX + 1,
                max: MAX,
                window
            })
        );
        let fixed = FixedWindow::new(Quota::new(1 << 63, window).unwrap());
        assert!(matches!(fixed, Err(QuotaError::LimitTooLarge { max, .. }) if max == (1 << 63) - 1));
        let large = FixedWindow::new(Quota::new((1 << 63) - 1, window).unwrap()).unwrap();
        let limiter = DirectLimiter::with_clock(large, ManualClock::new());
        assert!(limiter
            .check_n_at((1 << 63) - 1, Timestamp::from_secs(1))
            .unwrap()
            .is_allowed());
        assert!(!limiter.check_at(Timestamp::from_secs(1)).is_allowed());
    }
}

/// The buckets keep no count: their state is a time, and what bounds them is the rate their
/// emission interval, whole nanoseconds rounded up, runs at (`QuotaError::RateTooFine` past 1%
/// slow: `docs/design.md`, "Token bucket and leaky bucket"). `u32::MAX` per minute, hour and day
/// run at 14, 839 and 20,117 ns per unit: a full burst of `u32::MAX` at one instant, then
/// nothing until units refill, direct and keyed. Per millisecond or second, more than a unit per
/// nanosecond: refused, saying so.
#[test]
fn buckets_take_u32_max_counts_whose_rate_nanoseconds_hold() {
    let at = Timestamp::from_nanos;
    let t0 = 1_700_000_000_000_000_000;
    for window in WINDOWS {
        let quota = Quota::new(MAX, window).unwrap();
        if window < Duration::from_secs(60) {
            assert!(matches!(
                TokenBucket::new(quota),
                Err(QuotaError::RateTooFine { .. })
            ));
            assert!(matches!(
                LeakyBucket::new(quota),
                Err(QuotaError::RateTooFine { .. })
            ));
            continue;
        }
        let bucket = TokenBucket::new(quota).unwrap();
        let interval = nanos(bucket.emission_interval());
        let direct = DirectLimiter::with_clock(bucket, ManualClock::new());
        let keyed = KeyedLimiter::<str, _, _>::with_clock(bucket, 8, ManualClock::new()).unwrap();
        for (name, check) in [
            (
                "direct",
                &(|now, cost| direct.check_n_at(cost, at(now)).unwrap())
                    as &dyn Fn(u64, u64) -> tollgate::Decision,
            ),
            ("keyed", &|now, cost| {
                keyed.check_n_at("service", cost, at(now)).unwrap()
            }),
        ] {
            let name = format!("{name} token bucket {MAX} per {window:?}");
            let first = check(t0, MAX - 1);
            assert!(first.is_allowed(), "{name}");
            assert_eq!(first.remaining(), 1, "{name}");
            assert!(check(t0, 1).is_allowed(), "{name}");
            let refused = check(t0, 1);
            assert!(!refused.is_allowed(), "{name}");
            assert_eq!(refused.retry_after(), Duration::from_nanos(interval), "{name}");
            assert_eq!(
                refused.reset_after(),
                Duration::from_nanos(interval * MAX),
                "{name}"
            );
            // A whole refill later (the window, run slow by the rounding), the whole burst again.
            assert!(check(t0 + interval * MAX, MAX).is_allowed(), "{name}");
        }
    }
    // A burst of `u32::MAX` at one unit per millisecond: `burst * T` is 4.3e15 ns, which fits.
    let slow = TokenBucket::new(
        Quota::new(1, Duration::from_millis(1))
            .unwrap()
            .with_burst(MAX)
            .unwrap(),
    )
    .unwrap();
    assert!(DirectLimiter::with_clock(slow, ManualClock::new())
        .check_n_at(MAX, at(t0))
        .unwrap()
        .is_allowed());
}

/// The log keeps one 8-byte timestamp per unit: its limit is bounded by memory (2^24 units, 128
/// MiB per log), and its error says so, whatever the window.
#[test]
fn the_log_is_bounded_by_memory_and_says_so() {
    for window in WINDOWS {
        let error = SlidingLog::new(Quota::new(MAX, window).unwrap()).unwrap_err();
        assert_eq!(
            error,
            QuotaError::LogTooLarge {
                limit: MAX,
                max: SlidingLog::MAX_LIMIT
            }
        );
        let message = error.to_string();
        for part in ["8 bytes per unit", "16777216", "Redis", "sliding window counter"] {
            assert!(message.contains(part), "{message:?} does not mention {part:?}");
        }
        assert!(SlidingLog::new(Quota::new(SlidingLog::MAX_LIMIT, window).unwrap()).is_ok());
    }
}
