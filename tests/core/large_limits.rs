//! Limits near `u32::MAX` over windows of 1 ms, 1 s, 1 min, 1 h and 24 h, direct and keyed:
//! every decision of both window counters is their exact reference model's
//! (`tests/reference/`), on traces of large weights around window boundaries; the token bucket
//! and the shaper take every such count, exactly (their models' decisions, direct and keyed,
//! the shaper's delays and maximum waits included); the sliding log is bounded by memory, not
//! by a count's width, and says so.

use std::time::Duration;

use crate::reference::exact_shaper::ExactShaperModel;
use crate::reference::fixed_window::FixedWindowModel;
use crate::reference::sliding_window::SlidingWindowModel;
use crate::reference::token_bucket::TokenBucketModel;
use crate::reference::{too_fine, Expected};
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

/// The buckets keep no count: their state is a time. The token bucket takes every count up to
/// `u32::MAX` at every period: a rate whose emission interval whole nanoseconds hold within 1%
/// as a 64-bit bucket at that interval (`u32::MAX` per minute, hour and day: 14, 839 and 20,117
/// ns per unit), and every other exactly, in 128 bits (`u32::MAX` or `10^9` per 1 ms or 1 s).
/// Direct and keyed, every decision of a trace of large weights is the token-count model's
/// (refilled at the rounded interval, or at exactly `count / period`), and a request refused
/// with a retry-after of `x` passes at `x`.
#[test]
fn token_bucket_takes_every_u32_count_at_every_period() {
    let t0 = 1_700_000_000_000_000_000;
    for window in WINDOWS {
        let period = nanos(window);
        for count in LIMITS {
            let quota = Quota::new(count, window).unwrap();
            let bucket = TokenBucket::new(quota).unwrap();
            let wide = too_fine(count, period);
            assert_eq!(bucket.is_wide(), wide, "{quota}");
            let model = || match wide {
                true => TokenBucketModel::exact(count, period, count),
                false => TokenBucketModel::new(nanos(bucket.emission_interval()), count),
            };
            let trace = bucket_trace(t0, period, count);
            let direct = DirectLimiter::with_clock(bucket, ManualClock::new());
            same_as_bucket_model(
                &format!("direct token bucket {quota}"),
                &trace,
                |now, cost| direct.check_n_at(cost, Timestamp::from_nanos(now)).unwrap(),
                |now, cost| direct.peek_n_at(cost, Timestamp::from_nanos(now)).unwrap(),
                model(),
            );
            let keyed = KeyedLimiter::<str, _, _>::with_clock(bucket, 8, ManualClock::new()).unwrap();
            same_as_bucket_model(
                &format!("keyed token bucket {quota}"),
                &trace,
                |now, cost| {
                    keyed
                        .check_n_at("service", cost, Timestamp::from_nanos(now))
                        .unwrap()
                },
                |now, cost| {
                    keyed
                        .peek_n_at("service", cost, Timestamp::from_nanos(now))
                        .unwrap()
                },
                model(),
            );
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
        .check_n_at(MAX, Timestamp::from_nanos(t0))
        .unwrap()
        .is_allowed());
}

/// The shaper takes every count up to `u32::MAX` at every period, as the token bucket does: a
/// 64-bit shaper at the rounded interval where whole nanoseconds hold the rate within 1%, and
/// every other exactly, in 128 bits. Direct and keyed, every decision of a trace of large
/// weights is the model's whose slots are the rounded interval, or exactly `period / count`,
/// long (delays included); every third request waits at most a third of the period, refused
/// past it as the model refuses it; and a request refused with a retry-after of `x` passes at
/// `x`.
#[test]
fn shaper_takes_every_u32_count_at_every_period() {
    let t0 = 1_700_000_000_000_000_000;
    for window in WINDOWS {
        let period = nanos(window);
        for count in LIMITS {
            let quota = Quota::new(count, window).unwrap();
            let shaper = LeakyBucket::new(quota).unwrap();
            let wide = too_fine(count, period);
            assert_eq!(shaper.is_wide(), wide, "{quota}");
            assert_eq!(shaper.max_queue(), count - 1, "{quota}");
            let model = || match wide {
                true => ExactShaperModel::new(count, period, count),
                false => ExactShaperModel::new(1, nanos(shaper.emission_interval()), count),
            };
            let trace = bucket_trace(t0, period, count);
            let max = Duration::from_nanos(period / 3);
            let direct = DirectLimiter::with_clock(shaper, ManualClock::new());
            same_as_shaper_model(
                &format!("direct shaper {quota}"),
                &trace,
                |now, cost, within| {
                    let at = Timestamp::from_nanos(now);
                    match within {
                        true => direct.check_n_within_at(cost, max, at),
                        false => direct.check_n_at(cost, at),
                    }
                    .unwrap()
                },
                |now, cost| direct.peek_n_at(cost, Timestamp::from_nanos(now)).unwrap(),
                (model(), period / 3),
            );
            let keyed = KeyedLimiter::<str, _, _>::with_clock(shaper, 8, ManualClock::new()).unwrap();
            same_as_shaper_model(
                &format!("keyed shaper {quota}"),
                &trace,
                |now, cost, within| {
                    let at = Timestamp::from_nanos(now);
                    match within {
                        true => keyed.check_n_within_at("service", cost, max, at),
                        false => keyed.check_n_at("service", cost, at),
                    }
                    .unwrap()
                },
                |now, cost| {
                    keyed
                        .peek_n_at("service", cost, Timestamp::from_nanos(now))
                        .unwrap()
                },
                (model(), period / 3),
            );
        }
    }
}

/// Every decision of `trace` through `check(now, cost, within)` is `model`'s, every third one
/// within a maximum wait of `max` ns (`check_n_within`); after each refusal without a maximum,
/// the same request passes at its retry-after (`peek`, which counts nothing).
fn same_as_shaper_model(
    name: &str,
    trace: &[(u64, u64)],
    check: impl Fn(u64, u64, bool) -> tollgate::Decision,
    peek: impl Fn(u64, u64) -> tollgate::Decision,
    (mut model, max): (ExactShaperModel, u64),
) {
    let (mut refused, mut delayed) = (0, 0);
    for (i, &(now, cost)) in trace.iter().enumerate() {
        let within = i % 3 == 2;
        let got = check(now, cost, within);
        let expected = match within {
            true => model.decide_within(now, cost, max),
            false => model.decide(now, cost),
        };
        assert_eq!(
            Expected::of(&got),
            expected,
            "{name}: {cost} at {now}, within {within}"
        );
        delayed += usize::from(got.is_allowed() && !got.delay().is_zero());
        if !got.is_allowed() && !within {
            refused += 1;
            let retry = nanos(got.retry_after());
            assert!(
                peek(now + retry, cost).is_allowed(),
                "{name}: {cost} at {now} + {retry}"
            );
        }
    }
    assert!(refused >= 2, "{name}: the trace fills the queue");
    assert!(delayed >= 1, "{name}: the trace waits for a slot");
}

/// A bucket trace over period `p` for a count (and burst) `c`: `(time, weight)`, a full burst
/// spent at once, single units at the edge, large shares over the next periods.
fn bucket_trace(t0: u64, p: u64, c: u64) -> Vec<(u64, u64)> {
    vec![
        (t0, c - 1),
        (t0, 1),
        (t0, 1),
        (t0 + 1, 1),
        (t0 + p / 3, c / 3),
        (t0 + p / 3, c / 2),
        (t0 + p / 2, c / 2),
        (t0 + p - 1, c),
        (t0 + 2 * p, c),
        (t0 + 2 * p, 1),
        (t0 + 2 * p + p / 4, c / 4),
        (t0 + 2 * p + p / 4, c / 4),
        (t0 + 5 * p, c),
    ]
}

/// Every decision of `trace` through `check` is `model`'s; after each refusal, the same request
/// passes at its retry-after (`peek`, which counts nothing; the model's copy agrees).
fn same_as_bucket_model(
    name: &str,
    trace: &[(u64, u64)],
    check: impl Fn(u64, u64) -> tollgate::Decision,
    peek: impl Fn(u64, u64) -> tollgate::Decision,
    mut model: TokenBucketModel,
) {
    let mut refused = 0;
    for &(now, cost) in trace {
        let got = check(now, cost);
        assert_eq!(
            Expected::of(&got),
            model.decide(now, cost),
            "{name}: {cost} at {now}"
        );
        if !got.is_allowed() {
            refused += 1;
            let retry = nanos(got.retry_after());
            assert!(
                peek(now + retry, cost).is_allowed(),
                "{name}: {cost} at {now} + {retry}"
            );
            assert!(model.clone().decide(now + retry, cost).allowed, "{name}");
        }
    }
    assert!(refused >= 2, "{name}: the trace reaches the bucket's bottom");
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
