//! Every typed error: the exact variant, the exact numbers it carries, and a message that says
//! what is wrong and (where there is one) what would be accepted instead.

use std::error::Error as _;
use std::time::Duration;

use tollgate::algorithm::Algorithm;
use tollgate::{
    Clock, CostTooLarge, DirectLimiter, FixedWindow, FixedWindowState, LeakyBucket, ManualClock,
    ParseQuotaError, Quota, QuotaError, SlidingWindow, SlidingWindowState, Timestamp, TokenBucket,
};

const SECOND: u64 = 1_000_000_000;

fn quota(text: &str) -> Quota {
    text.parse()
        .unwrap_or_else(|e| panic!("{text:?} should parse: {e}"))
}

fn parse_err(text: &str) -> ParseQuotaError {
    match text.parse::<Quota>() {
        Ok(q) => panic!("{text:?} should not parse, got {q:?}"),
        Err(e) => e,
    }
}

/// Asserts that `message` contains every needle, printing the message on failure.
fn assert_mentions(message: &str, needles: &[&str]) {
    for needle in needles {
        assert!(
            message.contains(needle),
            "message {message:?} should mention {needle:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// QuotaError from Quota's constructors
// ---------------------------------------------------------------------------------------------

#[test]
fn zero_count_is_refused_by_every_constructor() {
    assert_eq!(Quota::new(0, Duration::from_secs(1)), Err(QuotaError::ZeroCount));
    assert_eq!(Quota::per_second(0), Err(QuotaError::ZeroCount));
    assert_eq!(Quota::per_minute(0), Err(QuotaError::ZeroCount));
    assert_eq!(Quota::per_hour(0), Err(QuotaError::ZeroCount));
    let message = QuotaError::ZeroCount.to_string();
    assert_mentions(&message, &["count", "at least 1"]);
}

#[test]
fn zero_period_is_refused() {
    assert_eq!(Quota::new(1, Duration::ZERO), Err(QuotaError::ZeroPeriod));
    assert_eq!(
        Quota::new(u64::MAX, Duration::from_nanos(0)),
        Err(QuotaError::ZeroPeriod)
    );
    // One nanosecond is the shortest period there is, and it is valid.
    assert_eq!(
        Quota::new(1, Duration::from_nanos(1)).unwrap().period(),
        Duration::from_nanos(1)
    );
    assert_mentions(
        &QuotaError::ZeroPeriod.to_string(),
        &["period", "longer than zero"],
    );
}

#[test]
fn period_overflow_carries_the_period_asked_for() {
    assert_eq!(
        Quota::new(1, Duration::MAX),
        Err(QuotaError::PeriodOverflow {
            period: Duration::MAX
        })
    );
    // The longest period that fits is u64::MAX ns; one nanosecond more does not.
    let longest = Duration::from_nanos(u64::MAX);
    assert_eq!(Quota::new(1, longest).unwrap().period(), longest);
    let one_more = longest + Duration::from_nanos(1);
    let err = Quota::new(1, one_more).unwrap_err();
    assert_eq!(err, QuotaError::PeriodOverflow { period: one_more });
    // Its message names the period (in Debug form: 18446744073.709551616s) and the limit.
    assert_mentions(
        &err.to_string(),
        &["18446744073.709551616s", "64 bits", "584 years"],
    );
}

#[test]
fn zero_burst_is_refused() {
    assert_eq!(
        Quota::per_second(10).unwrap().with_burst(0),
        Err(QuotaError::ZeroBurst)
    );
    assert_mentions(&QuotaError::ZeroBurst.to_string(), &["burst", "at least 1"]);
}

// ---------------------------------------------------------------------------------------------
// BurstTooLarge (both buckets)
// ---------------------------------------------------------------------------------------------

/// The largest `b` with `b * interval <= u64::MAX`, computed without trusting the library.
fn largest_burst(interval: u64) -> u64 {
    let b = (u128::from(u64::MAX) / u128::from(interval)) as u64;
    assert!(u128::from(b) * u128::from(interval) <= u128::from(u64::MAX));
    assert!((u128::from(b) + 1) * u128::from(interval) > u128::from(u64::MAX));
    b
}

#[test]
fn burst_too_large_reports_the_true_largest_burst() {
    // 1/s: T = 1 s, so the largest burst is floor(u64::MAX / 1e9) = 18_446_744_073.
    let max = largest_burst(SECOND);
    assert_eq!(max, 18_446_744_073);

    let huge = quota("1/s burst 18446744073709551615");
    let expected = QuotaError::BurstTooLarge { burst: u64::MAX, max };
    assert_eq!(TokenBucket::new(huge), Err(expected.clone()));
    assert_eq!(LeakyBucket::new(huge), Err(expected.clone()));
    assert_mentions(
        &expected.to_string(),
        &["burst of 18446744073709551615", "at most 18446744073"],
    );

    // `max` itself works (and admits all of it at once), `max + 1` does not.
    let at_max = Quota::per_second(1).unwrap().with_burst(max).unwrap();
    let bucket = TokenBucket::new(at_max).unwrap();
    assert!(LeakyBucket::new(at_max).is_ok());
    let limiter = DirectLimiter::with_clock(bucket, ManualClock::new());
    let all = limiter.check_n(max).unwrap();
    assert!(all.is_allowed());
    assert_eq!(all.remaining(), 0);
    assert_eq!(all.reset_after(), Duration::from_secs(max));

    let over = Quota::per_second(1).unwrap().with_burst(max + 1).unwrap();
    let expected = QuotaError::BurstTooLarge { burst: max + 1, max };
    assert_eq!(TokenBucket::new(over), Err(expected.clone()));
    assert_eq!(LeakyBucket::new(over), Err(expected));
}

#[test]
fn burst_too_large_uses_the_rounded_up_interval() {
    // 3/s: T = ceil(1e9 / 3) = 333_333_334 ns; the largest burst follows from that T.
    let max = largest_burst(333_333_334);
    for (count, period, interval) in [
        (3, Duration::from_secs(1), 333_333_334),
        (7, Duration::from_secs(1), 142_857_143),
        (1, Duration::from_nanos(1), 1),
        (1, Duration::from_nanos(1 << 63), 1 << 63),
    ] {
        let max = largest_burst(interval);
        let base = Quota::new(count, period).unwrap();
        let ok = TokenBucket::new(base.with_burst(max).unwrap()).unwrap();
        assert_eq!(ok.emission_interval(), Duration::from_nanos(interval));
        assert!(LeakyBucket::new(base.with_burst(max).unwrap()).is_ok());
        if max < u64::MAX {
            let over = base.with_burst(max + 1).unwrap();
            assert_eq!(
                TokenBucket::new(over),
                Err(QuotaError::BurstTooLarge { burst: max + 1, max }),
                "{count} per {period:?}"
            );
            assert_eq!(
                LeakyBucket::new(over),
                Err(QuotaError::BurstTooLarge { burst: max + 1, max })
            );
        }
    }
    assert_eq!(max, 55_340_232_110);
    // The default burst (= count) can overflow too: 2 per u64::MAX ns has T = ceil(u64::MAX /
    // 2) = 2^63 (the longest interval accepted), and a burst of 2 does not fit.
    let two = Quota::new(2, Duration::from_nanos(u64::MAX)).unwrap();
    assert_eq!(
        TokenBucket::new(two),
        Err(QuotaError::BurstTooLarge { burst: 2, max: 1 })
    );
}

// ---------------------------------------------------------------------------------------------
// RateTooFine and IntervalTooLong (both buckets)
// ---------------------------------------------------------------------------------------------

/// Both buckets keep `count` per `period_ns` exactly in 128 bits when its count fits 32 bits
/// (reporting the interval rounded up), and refuse it with `RateTooFine` otherwise, naming the
/// interval whole nanoseconds would run it at.
fn assert_too_fine(count: u64, period_ns: u64, interval_ns: u64) {
    let base = Quota::new(count, Duration::from_nanos(period_ns)).unwrap();
    let expected = QuotaError::RateTooFine {
        count,
        period: Duration::from_nanos(period_ns),
        interval: Duration::from_nanos(interval_ns),
    };
    match count <= u64::from(u32::MAX) {
        true => {
            let bucket = TokenBucket::new(base).unwrap();
            assert!(bucket.is_wide(), "{count} per {period_ns} ns");
            assert_eq!(bucket.emission_interval(), Duration::from_nanos(interval_ns));
            let shaper = LeakyBucket::new(base).unwrap();
            assert!(shaper.is_wide(), "{count} per {period_ns} ns");
            assert_eq!(shaper.emission_interval(), Duration::from_nanos(interval_ns));
        }
        false => {
            assert_eq!(
                TokenBucket::new(base),
                Err(expected.clone()),
                "{count} per {period_ns} ns"
            );
            assert_eq!(
                LeakyBucket::new(base),
                Err(expected),
                "{count} per {period_ns} ns"
            );
        }
    }
}

#[test]
fn a_rate_whole_nanoseconds_would_slow_by_more_than_one_percent_is_refused() {
    // 300 M/s: T = ceil(3.33) = 4 ns, 250 M/s, 16.66% slower than asked.
    assert_too_fine(300_000_000, SECOND, 4);
    // 10 G/s: T = ceil(0.1) = 1 ns, a tenth of the rate, and a count past 32 bits.
    let err = LeakyBucket::new(quota("10000000000/s")).unwrap_err();
    assert_mentions(
        &err.to_string(),
        &[
            "10000000000 per 1s",
            "1ns per unit",
            "90.00% slower",
            "at most 1%",
            "larger units",
        ],
    );
    // Above one per nanosecond: T = 1 ns, a tenth of 10 G/s, or far less.
    assert_too_fine(u64::from(u32::MAX), SECOND, 1);
    assert_too_fine(10_000_000_000, SECOND, 1);
    assert_too_fine(u64::MAX, SECOND, 1);
    assert_too_fine(2, 1, 1);
    // The boundary, exactly: 100 per 4,950 ns runs at 50 ns per unit, 5,000 ns per 100, which is
    // 1% slower than asked (accepted, 64 bits); 100 per 4,949 ns, 51 ns slower per 100 (kept
    // exactly, in 128 bits, by both buckets).
    let at_one_percent = TokenBucket::new(Quota::new(100, Duration::from_nanos(4_950)).unwrap()).unwrap();
    assert_eq!(at_one_percent.emission_interval(), Duration::from_nanos(50));
    assert!(!at_one_percent.is_wide());
    assert!(LeakyBucket::new(Quota::new(100, Duration::from_nanos(4_950)).unwrap()).is_ok());
    assert_too_fine(100, 4_949, 50);
    // Rates that divide exactly are accepted however fast (one per nanosecond, 500 M/s), and
    // so are slow rates that round by less than 1% (`1_000_003/s`: T = 1,000 ns, 3 ppm slower).
    for text in [
        "1/ns",
        "500000000/s",
        "100000000/s",
        "1000003/s",
        "3/s",
        "999/min",
    ] {
        assert!(TokenBucket::new(quota(text)).is_ok(), "{text}");
        assert!(LeakyBucket::new(quota(text)).is_ok(), "{text}");
    }
    // Every rate of at most one per microsecond is accepted: its rounding is below 1 ns in
    // 1,000.
    for count in [1, 3, 7, 999, 999_999, 1_000_000] {
        assert!(TokenBucket::new(Quota::new(count, Duration::from_secs(1)).unwrap()).is_ok());
    }
}

#[test]
fn an_interval_past_the_end_of_time_is_refused() {
    let max = tollgate::algorithm::MAX_EMISSION_INTERVAL;
    assert_eq!(max, Duration::from_nanos(1 << 63));
    // One per 2^63 ns is the longest accepted, and its fresh bucket admits at a time of today's
    // order (2^61 ns is the year 2043). The next unit would end past the year 2554: never.
    let longest = Quota::new(1, max).unwrap();
    let limiter = DirectLimiter::with_clock(
        TokenBucket::new(longest).unwrap(),
        ManualClock::starting_at(Timestamp::from_nanos(1 << 61)),
    );
    assert!(limiter.check().is_allowed());
    let refused = limiter.check();
    assert!(!refused.is_allowed());
    assert_eq!(refused.retry_after(), Duration::from_nanos(u64::MAX));
    // Only a count of 1 can need more than 2^63 ns per unit: 2 per u64::MAX ns is 2^63.
    for (count, period) in [(1, (1 << 63) + 1), (1, u64::MAX)] {
        let quota = Quota::new(count, Duration::from_nanos(period)).unwrap();
        let interval = Duration::from_nanos(period.div_ceil(count));
        let expected = QuotaError::IntervalTooLong { interval, max };
        assert_eq!(
            TokenBucket::new(quota),
            Err(expected.clone()),
            "{count} per {period}"
        );
        assert_eq!(
            LeakyBucket::new(quota),
            Err(expected.clone()),
            "{count} per {period}"
        );
        assert_mentions(&expected.to_string(), &["too slow", "end of representable time"]);
    }
}

// ---------------------------------------------------------------------------------------------
// LimitTooLarge and BurstNotSupported (both windows)
// ---------------------------------------------------------------------------------------------

/// A fixed window at `max` (the largest limit of its 64-bit state, or any above it in 128 bits)
/// stores the count beside the window index without corrupting either, even in the very last
/// window of representable time.
fn fixed_window_holds(window: Duration, max: u64) {
    let w = window.as_nanos() as u64;
    let limiter = FixedWindow::new(Quota::new(max, window).unwrap()).unwrap();
    for now in [0, w - 1, u64::MAX / 2, u64::MAX] {
        let d = DirectLimiter::with_clock(limiter, ManualClock::starting_at(Timestamp::from_nanos(now)));
        assert!(d.check_n(max).unwrap().is_allowed());
        let state = FixedWindowState::from_raw_wide(d.raw_state_wide());
        assert_eq!(state.index(&limiter), now / w, "window index at {now}");
        assert_eq!(state.count(&limiter), max, "count at {now}");
        assert!(!d.check().is_allowed());
    }
}

fn sliding_window_holds(window: Duration, max: u64) {
    let w = window.as_nanos() as u64;
    let limiter = SlidingWindow::new(Quota::new(max, window).unwrap()).unwrap();
    for now in [0, u64::MAX / 2, u64::MAX - w, u64::MAX] {
        let d = DirectLimiter::with_clock(limiter, ManualClock::starting_at(Timestamp::from_nanos(now)));
        assert!(d.check_n(max).unwrap().is_allowed());
        let state = SlidingWindowState::from_raw_wide(d.raw_state_wide());
        assert_eq!(
            (
                state.index(&limiter),
                state.previous(&limiter),
                state.current(&limiter)
            ),
            (now / w, 0, max)
        );
        // Half way into the next window (if there is one), the full previous window weighs
        // half: half of the limit more passes, and both counters and the index read back.
        let half = (now / w + 1)
            .checked_mul(w)
            .and_then(|start| start.checked_add(w / 2));
        if let Some(half) = half {
            let admitted = d.check_n_at(max / 2, Timestamp::from_nanos(half)).unwrap();
            assert!(admitted.is_allowed(), "{admitted:?}");
            let state = SlidingWindowState::from_raw_wide(d.raw_state_wide());
            assert_eq!(
                (
                    state.index(&limiter),
                    state.previous(&limiter),
                    state.current(&limiter)
                ),
                (half / w, max, max / 2)
            );
        }
    }
}

/// Past the largest limit of the 64-bit state (the index takes 35 bits of a 1 s window's word:
/// 29 bits of count for the fixed window, 14 per counter for the sliding window) the state takes
/// 128 bits; past what those count, a typed error naming the largest.
#[test]
fn limit_too_large_reports_the_exact_max_for_one_second() {
    let second = Duration::from_secs(1);
    let fixed_max = (1 << 29) - 1;
    let sliding_max = (1 << 14) - 1;
    assert_eq!(fixed_max, 536_870_911);
    assert_eq!(sliding_max, 16_383);
    let fixed = FixedWindow::new(Quota::new(fixed_max, second).unwrap()).unwrap();
    let sliding = SlidingWindow::new(Quota::new(sliding_max, second).unwrap()).unwrap();
    assert_eq!((fixed.max_narrow_limit(), fixed.is_wide()), (fixed_max, false));
    assert_eq!(
        (sliding.max_narrow_limit(), sliding.is_wide()),
        (sliding_max, false)
    );
    for (limit, wide) in [(fixed_max, false), (fixed_max + 1, true)] {
        assert_eq!(
            FixedWindow::new(Quota::new(limit, second).unwrap())
                .unwrap()
                .is_wide(),
            wide
        );
        fixed_window_holds(second, limit);
    }
    for (limit, wide) in [
        (sliding_max, false),
        (sliding_max + 1, true),
        (u64::from(u32::MAX), true),
    ] {
        assert_eq!(
            SlidingWindow::new(Quota::new(limit, second).unwrap())
                .unwrap()
                .is_wide(),
            wide
        );
        sliding_window_holds(second, limit);
    }

    assert_eq!(
        SlidingWindow::new(Quota::new(1 << 32, second).unwrap()),
        Err(QuotaError::LimitTooLarge {
            limit: 1 << 32,
            max: u64::from(u32::MAX),
            window: second
        })
    );
    let message = FixedWindow::new(Quota::new(u64::MAX, second).unwrap())
        .unwrap_err()
        .to_string();
    assert_mentions(
        &message,
        &["18446744073709551615", "1s", "at most 9223372036854775807"],
    );
}

#[test]
fn limit_too_large_reports_the_exact_max_for_one_minute() {
    // A 1 min window leaves 64 - 29 = 35 bits for the count (fixed), 17 per counter (sliding).
    let minute = Duration::from_secs(60);
    let fixed_max = (1 << 35) - 1;
    let sliding_max = (1 << 17) - 1;
    assert_eq!(
        FixedWindow::new(Quota::new(fixed_max, minute).unwrap())
            .unwrap()
            .max_narrow_limit(),
        fixed_max
    );
    assert!(FixedWindow::new(Quota::new(fixed_max + 1, minute).unwrap())
        .unwrap()
        .is_wide());
    assert!(!SlidingWindow::new(Quota::new(sliding_max, minute).unwrap())
        .unwrap()
        .is_wide());
    assert!(SlidingWindow::new(Quota::new(sliding_max + 1, minute).unwrap())
        .unwrap()
        .is_wide());
    fixed_window_holds(minute, fixed_max);
    fixed_window_holds(minute, fixed_max + 1);
    sliding_window_holds(minute, sliding_max);
    sliding_window_holds(minute, sliding_max + 1);

    let message = SlidingWindow::new(quota("4294967296/min"))
        .unwrap_err()
        .to_string();
    assert_mentions(&message, &["4294967296", "60s", "at most 4294967295"]);
}

/// A window of 1 ns: its index alone takes all 64 bits of a word, so its counts live in the
/// 128-bit state, whatever the limit.
#[test]
fn a_one_nanosecond_window_keeps_its_counts_in_the_wide_state() {
    let ns = Duration::from_nanos(1);
    let fixed = FixedWindow::new(Quota::new(1, ns).unwrap()).unwrap();
    let sliding = SlidingWindow::new(Quota::new(1, ns).unwrap()).unwrap();
    assert_eq!((fixed.max_narrow_limit(), fixed.is_wide()), (0, true));
    assert_eq!((sliding.max_narrow_limit(), sliding.is_wide()), (0, true));
    fixed_window_holds(ns, 5);
    let limiter = DirectLimiter::with_clock(sliding, ManualClock::starting_at(Timestamp::from_nanos(100)));
    assert!(limiter.check().is_allowed());
    assert!(!limiter.check().is_allowed());
}

#[test]
fn windows_refuse_a_burst_but_accept_one_equal_to_the_count() {
    let with_burst = quota("10/s burst 20");
    assert_eq!(
        FixedWindow::new(with_burst),
        Err(QuotaError::BurstNotSupported {
            algorithm: "fixed window counter"
        })
    );
    assert_eq!(
        SlidingWindow::new(with_burst),
        Err(QuotaError::BurstNotSupported {
            algorithm: "sliding window counter"
        })
    );
    // A smaller burst is refused too.
    let smaller = quota("10/s burst 5");
    assert!(matches!(
        FixedWindow::new(smaller),
        Err(QuotaError::BurstNotSupported { .. })
    ));
    assert!(matches!(
        SlidingWindow::new(smaller),
        Err(QuotaError::BurstNotSupported { .. })
    ));
    // An explicit burst equal to the count is the window's own limit: accepted.
    let equal = quota("10/s burst 10");
    assert_eq!(FixedWindow::new(equal).unwrap().limit(), 10);
    assert_eq!(SlidingWindow::new(equal).unwrap().limit(), 10);
    // The burst check comes before the size check (both would fail here).
    assert_eq!(
        FixedWindow::new(quota("999999999999/s burst 1")),
        Err(QuotaError::BurstNotSupported {
            algorithm: "fixed window counter"
        })
    );

    let message = FixedWindow::new(with_burst).unwrap_err().to_string();
    assert_mentions(&message, &["fixed window counter", "no burst", "token bucket"]);
    let message = SlidingWindow::new(with_burst).unwrap_err().to_string();
    assert_mentions(&message, &["sliding window counter", "no burst"]);
}

// ---------------------------------------------------------------------------------------------
// CostTooLarge
// ---------------------------------------------------------------------------------------------

fn cost_too_large<A: Algorithm + Copy>(algorithm: A, name: &str) {
    let capacity = algorithm.capacity();
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_700_000_000));
    let limiter = DirectLimiter::with_clock(algorithm, clock);
    assert_eq!(limiter.capacity(), capacity);

    // On a fresh limiter the whole capacity passes in one request.
    let fresh = DirectLimiter::with_clock(algorithm, limiter.clock().clone());
    let all = fresh.check_n(capacity).unwrap();
    assert!(
        all.is_allowed(),
        "{name}: cost == capacity on a fresh limiter: {all:?}"
    );
    assert_eq!(all.remaining(), 0, "{name}");

    // A used limiter: the error leaves its state alone.
    assert!(limiter.check().is_allowed());
    let before = limiter.raw_state();
    for cost in [capacity + 1, capacity.saturating_mul(2), u64::MAX] {
        let expected = CostTooLarge { cost, capacity };
        assert_eq!(limiter.check_n(cost), Err(expected), "{name}: check_n({cost})");
        assert_eq!(limiter.peek_n(cost), Err(expected), "{name}: peek_n({cost})");
        let now = limiter.clock().now();
        assert_eq!(limiter.check_n_at(cost, now), Err(expected));
        assert_eq!(limiter.peek_n_at(cost, now), Err(expected));
        assert_eq!(limiter.raw_state(), before, "{name}: state after cost {cost}");
    }
    let message = CostTooLarge {
        cost: capacity + 1,
        capacity,
    }
    .to_string();
    assert_mentions(
        &message,
        &[
            &format!("weight {}", capacity + 1),
            &format!("capacity {capacity}"),
            "never pass",
        ],
    );
}

#[test]
fn cost_too_large_for_every_algorithm() {
    cost_too_large(TokenBucket::new(quota("10/s burst 20")).unwrap(), "token bucket");
    cost_too_large(LeakyBucket::new(quota("10/s burst 4")).unwrap(), "leaky bucket");
    cost_too_large(FixedWindow::new(quota("100/min")).unwrap(), "fixed window");
    cost_too_large(SlidingWindow::new(quota("100/min")).unwrap(), "sliding window");
    // Capacity 1 (a strict policer): cost 2 can never pass.
    cost_too_large(LeakyBucket::new(quota("5/s burst 1")).unwrap(), "policer");
}

#[test]
fn cost_too_large_is_a_std_error() {
    let err: Box<dyn std::error::Error> = Box::new(CostTooLarge { cost: 3, capacity: 2 });
    assert_eq!(
        err.to_string(),
        "a request of weight 3 can never pass a limiter of capacity 2"
    );
}

// ---------------------------------------------------------------------------------------------
// ParseQuotaError
// ---------------------------------------------------------------------------------------------

#[test]
fn syntax_errors_quote_the_input_and_say_what_was_expected() {
    let max = u64::MAX.to_string();
    let cases: &[(&str, &[&str])] = &[
        ("", &["invalid quota \"\"", "empty", "100/min"]),
        ("   ", &["invalid quota \"   \"", "empty"]),
        (
            "100",
            &["invalid quota \"100\"", "expected `<count>/<period>`", "per"],
        ),
        ("100 per", &["expected `<count>/<period>`"]),
        ("/s", &["count must be a whole number", "found \"\""]),
        (
            "abc/s",
            &["count must be a whole number from 1 to", &max, "found \"abc\""],
        ),
        ("-1/s", &["count must be a whole number", "found \"-1\""]),
        ("1.5/s", &["count must be a whole number", "found \"1.5\""]),
        (
            "18446744073709551616/s",
            &["count must be a whole number", "found \"18446744073709551616\""],
        ),
        ("_1/s", &["count must be a whole number", "found \"_1\""]),
        ("1_/s", &["count must be a whole number", "found \"1_\""]),
        (
            "10/fortnight",
            &["unknown time unit \"fortnight\"", "ns, us, ms, s, min, h, d"],
        ),
        ("10/-5s", &["unknown time unit \"-5s\""]),
        ("10/10", &["the period \"10\" has no unit", "10s"]),
        ("10/", &["the period is missing"]),
        (
            "10/99999999999999999999s",
            &["period must be a whole number", "found \"99999999999999999999\""],
        ),
        ("10/s burst", &["burst must be a whole number", "found \"\""]),
        ("10/s burst x", &["burst must be a whole number", "found \"x\""]),
        ("10/s burst -3", &["burst must be a whole number", "found \"-3\""]),
        (
            "10/s queue 4",
            &["unexpected \"s queue 4\" after the period", "burst <count>"],
        ),
    ];
    for &(text, needles) in cases {
        let err = parse_err(text);
        assert_eq!(
            err.quota_error(),
            None,
            "{text:?} is a syntax error, not an invalid quota"
        );
        assert!(err.source().is_none(), "{text:?}");
        assert_mentions(&err.to_string(), needles);
    }
    // The whole message, for one of them.
    assert_eq!(
        parse_err("10/fortnight").to_string(),
        "invalid quota \"10/fortnight\": unknown time unit \"fortnight\"; expected one of ns, us, ms, s, min, h, d"
    );
}

#[test]
fn a_missing_period_a_word_for_a_period_and_a_second_burst_are_named() {
    // Each names what is wrong, not what a looser parser would make of it: a period `""` with
    // no unit, text after a period that was never given, a burst that is not a whole number.
    let cases: &[(&str, &[&str], &str)] = &[
        ("10/burst 5", &["the period is missing", "100/min"], "has no unit"),
        ("10 per burst 5", &["the period is missing"], "has no unit"),
        ("10/", &["the period is missing"], "has no unit"),
        (
            "10 per per s",
            &["expected a period", "found \"per s\"", "10s"],
            "after the period",
        ),
        (
            "10/s burst 20 burst 30",
            &["`burst` is given twice", "found \"20 burst 30\""],
            "must be a whole number",
        ),
        (
            "10/s burst burst 30",
            &["`burst` is given twice"],
            "must be a whole number",
        ),
    ];
    for &(text, needles, misleading) in cases {
        let err = parse_err(text);
        assert_eq!(err.quota_error(), None, "{text:?}");
        let message = err.to_string();
        assert_mentions(&message, needles);
        assert!(!message.contains(misleading), "{text:?}: {message}");
    }
}

#[test]
fn parsed_but_invalid_quotas_keep_their_typed_error() {
    let cases = [
        ("0/s", QuotaError::ZeroCount),
        ("0 per min", QuotaError::ZeroCount),
        ("5/0s", QuotaError::ZeroPeriod),
        ("5/0_0ms", QuotaError::ZeroPeriod),
        ("5/s burst 0", QuotaError::ZeroBurst),
    ];
    for (text, expected) in cases {
        let err = parse_err(text);
        assert_eq!(err.quota_error(), Some(&expected), "{text:?}");
        // The message carries both the input and the typed error's message, so the typed error
        // is not its source as well (a chain printer would print it twice).
        assert!(err.source().is_none(), "{text:?}");
        assert_mentions(
            &err.to_string(),
            &[&format!("invalid quota {text:?}"), &expected.to_string()],
        );
    }
}

#[test]
fn a_period_that_overflows_when_parsed_is_a_period_overflow() {
    for text in ["5/1000000d", "5/18446744074s", "1/18446744073709551615d"] {
        let err = parse_err(text);
        assert!(
            matches!(err.quota_error(), Some(QuotaError::PeriodOverflow { .. })),
            "{text:?}: {err}"
        );
        assert_mentions(&err.to_string(), &[text, "64 bits"]);
    }
    // The largest period in nanoseconds parses.
    let longest = quota("1/18446744073709551615ns");
    assert_eq!(longest.period(), Duration::from_nanos(u64::MAX));
}

#[test]
fn a_period_overflow_from_parsing_carries_the_period_asked_for() {
    // `QuotaError::PeriodOverflow::period` is documented as "the period asked for". The string
    // asked for one million days, which a `Duration` holds exactly.
    let err = parse_err("5/1000000d");
    assert_eq!(
        err.quota_error(),
        Some(&QuotaError::PeriodOverflow {
            period: Duration::from_secs(86_400 * 1_000_000)
        })
    );
}

#[test]
fn a_period_overflow_from_parsing_is_reported_as_written() {
    // Longer than a `Duration` holds: the typed error holds `Duration::MAX` (as its docs say),
    // and the message gives the period the string asked for, not `Duration::MAX`.
    let err = parse_err("1/18446744073709551615d");
    assert_eq!(
        err.quota_error(),
        Some(&QuotaError::PeriodOverflow {
            period: Duration::MAX
        })
    );
    let message = err.to_string();
    assert_mentions(
        &message,
        &["the period \"18446744073709551615d\"", "64 bits", "584 years"],
    );
    assert!(!message.contains("18446744073709551615.999999999s"), "{message}");
    // A period a `Duration` holds is given as written too, in its own unit.
    assert_mentions(
        &parse_err("5/1_000_000 Days").to_string(),
        &["the period \"1_000_000 days\" does not fit in 64 bits"],
    );
}

#[test]
fn burst_too_large_from_a_parsed_quota() {
    // The string is fine; the burst only fails against the rate.
    let q = quota("1/s burst 18446744073709551615");
    assert_eq!(q.burst(), u64::MAX);
    assert!(matches!(
        TokenBucket::new(q),
        Err(QuotaError::BurstTooLarge {
            burst: u64::MAX,
            max: 18_446_744_073
        })
    ));
}

// ---------------------------------------------------------------------------------------------
// Error chains
// ---------------------------------------------------------------------------------------------

/// Every message along `error`'s `source()` chain, outermost first.
fn chain(error: &(dyn std::error::Error + 'static)) -> Vec<String> {
    let mut messages = vec![error.to_string()];
    let mut next = error.source();
    while let Some(error) = next {
        messages.push(error.to_string());
        next = error.source();
    }
    messages
}

/// An error either includes its source's message or returns that source, never both: a chain
/// printer (anyhow's `{:#}`, eyre, tracing) would print the same text twice.
#[test]
fn no_error_repeats_its_source() {
    #[cfg_attr(not(any(feature = "tower", feature = "redis")), allow(unused_mut))]
    let mut errors: Vec<Box<dyn std::error::Error + 'static>> = vec![
        Box::new(parse_err("0/s")),
        Box::new(parse_err("5/1000000d")),
        Box::new(parse_err("10/fortnight")),
        Box::new(QuotaError::ZeroCount),
        Box::new(CostTooLarge { cost: 5, capacity: 3 }),
    ];
    #[cfg(feature = "tower")]
    {
        use tollgate::middleware::LimiterError;
        let error = LimiterError::from(CostTooLarge { cost: 5, capacity: 3 });
        assert!(error.reason().downcast_ref::<CostTooLarge>().is_some());
        errors.push(Box::new(error));
        errors.push(Box::new(LimiterError::new(std::io::Error::other("store down"))));
    }
    #[cfg(feature = "redis")]
    errors.push(Box::new(tollgate::distributed::RedisCheckError::from(
        CostTooLarge { cost: 5, capacity: 3 },
    )));
    for error in &errors {
        let messages = chain(&**error);
        for pair in messages.windows(2) {
            assert!(!pair[0].contains(&pair[1]), "{messages:?}");
        }
    }
}

/// `100 per` with nothing after it asks for the whole form, as a missing separator does.
#[test]
fn a_dangling_per_asks_for_the_whole_form() {
    let message = parse_err("100 per").to_string();
    assert_mentions(&message, &["(or `<count> per <period>`)"]);
}
