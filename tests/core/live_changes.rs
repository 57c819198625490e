//! Quotas changed live (`tollgate::Live`), every algorithm against its exact reference model
//! with the change rule the model states in its own terms: the buckets keep their debt in time
//! (`TokenBucketModel::retune`: full again at the same instant; `ShaperModel::retune`: slots
//! already given stay, the queue counts in the new interval), the windows keep their counts
//! (`set_limit`), the log keeps its admitted requests (`set_quota`, limit and window). Every
//! decision after every change, in both directions, equals the model's; a change the running
//! states cannot read is a typed error that changes nothing.

use std::time::Duration;

use proptest::prelude::*;
use tollgate::algorithm::Algorithm;
use tollgate::{
    DirectLimiter, FixedWindow, LeakyBucket, Live, LogLimiter, ManualClock, Quota, QuotaChangeError,
    QuotaError, SlidingLog, SlidingWindow, Timestamp, TokenBucket,
};

use crate::reference::fixed_window::FixedWindowModel;
use crate::reference::shaper::ShaperModel;
use crate::reference::sliding_log::SlidingLogModel;
use crate::reference::sliding_window::SlidingWindowModel;
use crate::reference::token_bucket::TokenBucketModel;
use crate::reference::trace::{bucket_period, ops, peek_then_check, start, window_length, Op, Start};
use crate::reference::{too_fine, Expected};

/// Whether the trace changes the quota before request `i`, and to which of `choices` (about one
/// request in four).
fn change_at(i: usize, op: &Op, choices: usize) -> Option<usize> {
    let raw = op.raw();
    (i > 0 && raw.is_multiple_of(4)).then(|| (raw >> 8) as usize % choices)
}

/// A bucket's quota: `count` per `period` ns, burst `burst`.
fn bucket_quota(count: u64, period: u64, burst: u64) -> Quota {
    Quota::new(count, Duration::from_nanos(period))
        .and_then(|quota| quota.with_burst(burst))
        .expect("a valid quota")
}

/// Quotas to change between: count, period (ns), burst.
fn bucket_quotas() -> impl Strategy<Value = Vec<(u64, u64, u64)>> {
    proptest::collection::vec((1..=20u64, bucket_period(), 1..=20u64), 2..=4)
}

/// A bucket's `T`, in ns.
fn interval(of: Duration) -> u64 {
    u64::try_from(of.as_nanos()).expect("fits")
}

/// Runs `ops` through a `Live` bucket and its model, changing the quota where the trace says.
#[allow(clippy::too_many_arguments)] // the trace, and the bucket under test and its reference
fn run_bucket<B, M>(
    quotas: &[(u64, u64, u64)],
    start: Start,
    ops: &[Op],
    build: impl Fn(Quota) -> Result<B, QuotaError>,
    of: impl Fn(&B) -> (u64, u64),
    model: impl Fn(u64, u64) -> M,
    retune: impl Fn(&mut M, u64, u64, u64),
    decide: impl Fn(&mut M, u64, u64) -> Expected,
) -> Result<(), TestCaseError>
where
    B: Algorithm + tollgate::live::Retune,
{
    let (count, period, burst) = quotas[0];
    let first = match build(bucket_quota(count, period, burst)) {
        // A rate whole nanoseconds cannot hold: refused by the shaper, and kept exactly by the
        // token bucket, whose changes `a_wide_token_bucket_changes_only_to_its_own_time_unit`
        // tests.
        Ok(first) if !first.is_wide() => first,
        _ => {
            prop_assert!(too_fine(count, period), "{count} per {period} ns refused or wide");
            return Err(TestCaseError::reject("a rate whole nanoseconds cannot hold"));
        }
    };
    let (mut t, mut b) = of(&first);
    let limiter = DirectLimiter::with_clock(Live::new(first), ManualClock::new());
    let mut model = model(t, b);
    let mut now = start.at(t);
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            now = op.forward(now, t);
        }
        if let Some(choice) = change_at(i, op, quotas.len()) {
            let (count, period, burst) = quotas[choice];
            match limiter.algorithm().set_quota(bucket_quota(count, period, burst)) {
                Ok(()) => {
                    (t, b) = of(&limiter.algorithm().current());
                    retune(&mut model, now, t, b);
                }
                Err(
                    QuotaChangeError::Invalid(QuotaError::RateTooFine { .. })
                    | QuotaChangeError::TimeUnitChanged { .. },
                ) => {
                    prop_assert!(too_fine(count, period), "{count} per {period} ns refused")
                }
                Err(other) => prop_assert!(false, "a bucket takes every quota live: {other}"),
            }
        }
        let cost = op.cost(b);
        let got = peek_then_check(&limiter, op, now, cost)?;
        let expected = decide(&mut model, now, cost);
        prop_assert_eq!(
            got,
            expected,
            "request {} at t={} weight {} (T={}, burst={})",
            i,
            now,
            cost,
            t,
            b
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(384))]

    /// A token bucket whose quota changes between requests decides as the token-count model
    /// whose debt is kept in time.
    #[test]
    fn a_token_bucket_keeps_its_debt_in_time(quotas in bucket_quotas(), start in start(), ops in ops(48)) {
        run_bucket(
            &quotas,
            start,
            &ops,
            TokenBucket::new,
            |bucket| (interval(bucket.emission_interval()), bucket.capacity()),
            TokenBucketModel::new,
            TokenBucketModel::retune,
            TokenBucketModel::decide,
        )?;
    }

    /// A shaper whose quota changes between requests decides as the slot-by-slot queue whose
    /// slots already given stay, counted from then on in the new interval.
    #[test]
    fn a_shaper_keeps_the_slots_it_gave(quotas in bucket_quotas(), start in start(), ops in ops(48)) {
        run_bucket(
            &quotas,
            start,
            &ops,
            LeakyBucket::new,
            |shaper| (interval(shaper.emission_interval()), shaper.capacity()),
            ShaperModel::new,
            ShaperModel::retune,
            ShaperModel::decide,
        )?;
    }

    /// A fixed window whose limit changes between requests decides as the window map with its
    /// counts kept; a limit its 64-bit state cannot hold is refused, and nothing changes.
    #[test]
    fn a_fixed_window_keeps_its_count(
        limits in proptest::collection::vec(1..=20u64, 2..=4),
        window in window_length(),
        start in start(),
        ops in ops(48),
    ) {
        let quota = |limit| Quota::new(limit, Duration::from_nanos(window)).expect("a valid quota");
        let first = FixedWindow::new(quota(limits[0])).expect("every limit up to 2^63 - 1");
        let limiter = DirectLimiter::with_clock(Live::new(first), ManualClock::new());
        let mut model = FixedWindowModel::new(window, limits[0]);
        let mut limit = limits[0];
        let mut now = start.at(window);
        for (i, op) in ops.iter().enumerate() {
            if i > 0 {
                now = op.forward(now, window);
            }
            if let Some(choice) = change_at(i, op, limits.len()) {
                match limiter.algorithm().set_quota(quota(limits[choice])) {
                    Ok(()) => {
                        limit = limits[choice];
                        model.set_limit(limit);
                    }
                    Err(QuotaChangeError::NeedsWideState { limit: asked, max, .. }) => {
                        prop_assert!(!first.is_wide() && asked > max, "{asked} above {max}");
                        prop_assert_eq!(max, first.max_narrow_limit());
                    }
                    Err(other) => prop_assert!(false, "the same window takes its limit live: {}", other),
                }
            }
            prop_assert_eq!(limiter.capacity(), limit);
            let cost = op.cost(limit);
            let got = peek_then_check(&limiter, op, now, cost)?;
            prop_assert_eq!(got, model.decide(now, cost), "request {} at t={} weight {} (w={}, limit={})", i, now, cost, window, limit);
        }
    }

    /// A sliding window whose limit changes between requests decides as the exact estimate
    /// with both counts kept.
    #[test]
    fn a_sliding_window_keeps_its_counts(
        limits in proptest::collection::vec(1..=20u64, 2..=4),
        window in window_length(),
        start in start(),
        ops in ops(40),
    ) {
        let quota = |limit| Quota::new(limit, Duration::from_nanos(window)).expect("a valid quota");
        let first = SlidingWindow::new(quota(limits[0])).expect("every limit up to u32::MAX");
        let limiter = DirectLimiter::with_clock(Live::new(first), ManualClock::new());
        let mut model = SlidingWindowModel::new(window, limits[0]);
        let mut limit = limits[0];
        let mut now = start.at(window);
        for (i, op) in ops.iter().enumerate() {
            if i > 0 {
                now = op.forward(now, window);
            }
            if let Some(choice) = change_at(i, op, limits.len()) {
                match limiter.algorithm().set_quota(quota(limits[choice])) {
                    Ok(()) => {
                        limit = limits[choice];
                        model.set_limit(limit);
                    }
                    Err(QuotaChangeError::NeedsWideState { limit: asked, max, .. }) => {
                        prop_assert!(!first.is_wide() && asked > max, "{asked} above {max}");
                    }
                    Err(other) => prop_assert!(false, "the same window takes its limit live: {}", other),
                }
            }
            let cost = op.cost(limit);
            let got = peek_then_check(&limiter, op, now, cost)?;
            prop_assert_eq!(got, model.decide(now, cost), "request {} at t={} weight {} (w={}, limit={})", i, now, cost, window, limit);
        }
    }

    /// A sliding log whose limit and window both change between requests decides as the list
    /// of admitted requests, all kept; a longer window is refused (the log has dropped the
    /// units it would count), and nothing changes.
    #[test]
    fn a_sliding_log_keeps_its_admissions(
        quotas in proptest::collection::vec((1..=20u64, window_length()), 2..=4),
        start in start(),
        ops in ops(48),
    ) {
        let quota = |(limit, window): (u64, u64)| Quota::new(limit, Duration::from_nanos(window)).expect("valid");
        let (limit, window) = quotas[0];
        let limiter = LogLimiter::with_clock(Live::new(SlidingLog::new(quota(quotas[0])).expect("valid")), ManualClock::new());
        let mut model = SlidingLogModel::new(window, limit);
        let (mut limit, mut window) = (limit, window);
        let mut now = start.at(window);
        for (i, op) in ops.iter().enumerate() {
            if i > 0 {
                now = op.forward(now, window);
            }
            if let Some(choice) = change_at(i, op, quotas.len()) {
                match limiter.set_quota(quota(quotas[choice])) {
                    Ok(()) => {
                        prop_assert!(quotas[choice].1 <= window, "a longer window was taken");
                        (limit, window) = quotas[choice];
                        model.set_quota(window, limit);
                    }
                    Err(QuotaChangeError::WindowLengthened { from, to }) => {
                        prop_assert_eq!((from, to), (Duration::from_nanos(window), Duration::from_nanos(quotas[choice].1)));
                        prop_assert!(quotas[choice].1 > window);
                    }
                    Err(other) => prop_assert!(false, "a log takes any limit and a shorter window: {}", other),
                }
            }
            let cost = op.cost(limit);
            let at = Timestamp::from_nanos(now);
            let (peeked, got) = (limiter.peek_n_at(cost, at).expect("fits"), limiter.check_n_at(cost, at).expect("fits"));
            prop_assert_eq!(Expected::of(&peeked), Expected::of(&got));
            prop_assert_eq!(Expected::of(&got), model.decide(now, cost), "request {} at t={} weight {} (w={}, limit={})", i, now, cost, window, limit);
        }
    }
}

/// A client's spending across a change, both ways, in numbers: a client that spent 8 of 10 when the quota
/// becomes 5 or 20. The bucket keeps the 0.8 s of debt: 4 of 5 spent (1 left), 16 of 20 spent
/// (4 left); the windows and the log keep the 8 units: none left of 5, 12 left of 20.
#[test]
fn eight_of_ten_spent_then_five_or_twenty() {
    let at = Timestamp::from_secs(1_000);
    for (to, bucket_left, counted_left) in [("5/s", 1, 0), ("20/s", 4, 12)] {
        let to: Quota = to.parse().expect("valid");
        let bucket = DirectLimiter::with_clock(
            Live::new(TokenBucket::new("10/s".parse().expect("valid")).expect("valid")),
            ManualClock::new(),
        );
        assert!(bucket.check_n_at(8, at).expect("fits").is_allowed());
        bucket.algorithm().set_quota(to).expect("live");
        assert_eq!(
            bucket.peek_n_at(0, at).expect("fits").remaining(),
            bucket_left,
            "bucket to {to}"
        );
        let fixed = DirectLimiter::with_clock(
            Live::new(FixedWindow::new("10/s".parse().expect("valid")).expect("valid")),
            ManualClock::new(),
        );
        assert!(fixed.check_n_at(8, at).expect("fits").is_allowed());
        fixed.algorithm().set_quota(to).expect("live");
        assert_eq!(
            fixed.peek_n_at(0, at).expect("fits").remaining(),
            counted_left,
            "fixed window to {to}"
        );
        let sliding = DirectLimiter::with_clock(
            Live::new(SlidingWindow::new("10/s".parse().expect("valid")).expect("valid")),
            ManualClock::new(),
        );
        assert!(sliding.check_n_at(8, at).expect("fits").is_allowed());
        sliding.algorithm().set_quota(to).expect("live");
        assert_eq!(
            sliding.peek_n_at(0, at).expect("fits").remaining(),
            counted_left,
            "sliding window to {to}"
        );
        let log = LogLimiter::with_clock(
            Live::new(SlidingLog::new("10/s".parse().expect("valid")).expect("valid")),
            ManualClock::new(),
        );
        assert!(log.check_n_at(8, at).expect("fits").is_allowed());
        log.set_quota(to).expect("live");
        assert_eq!(
            log.peek_n_at(0, at).expect("fits").remaining(),
            counted_left,
            "log to {to}"
        );
    }
}

/// What needs a new limiter is a typed error, with the numbers to fix, and the running quota
/// stays: a window counter's length, a limit past a 64-bit state's, a layout offered by hand,
/// a quota the algorithm refuses.
#[test]
fn what_is_not_live_is_a_typed_error_and_changes_nothing() {
    let fixed = Live::new(FixedWindow::new("10/s".parse().expect("valid")).expect("valid"));
    let error = fixed
        .set_quota("10/min".parse().expect("valid"))
        .expect_err("a new window");
    assert_eq!(
        error,
        QuotaChangeError::WindowChanged {
            algorithm: "fixed window counter",
            from: Duration::from_secs(1),
            to: Duration::from_secs(60)
        }
    );
    assert!(
        error
            .to_string()
            .contains("build a new limiter for the new window"),
        "{error}"
    );
    let max = fixed.current().max_narrow_limit();
    let error = fixed
        .set_quota(Quota::per_second(max + 1).expect("valid"))
        .expect_err("too wide");
    assert_eq!(
        error,
        QuotaChangeError::NeedsWideState {
            algorithm: "fixed window counter",
            limit: max + 1,
            max
        }
    );
    let wide = FixedWindow::new(Quota::per_second(max + 1).expect("valid")).expect("valid");
    assert_eq!(
        fixed.replace(wide),
        Err(QuotaChangeError::NeedsWideState {
            algorithm: "fixed window counter",
            limit: max + 1,
            max
        })
    );
    let narrow_as_wide = FixedWindow::new("10/s".parse().expect("valid"))
        .expect("valid")
        .with_wide_state();
    assert_eq!(
        fixed.replace(narrow_as_wide),
        Err(QuotaChangeError::LayoutChanged {
            algorithm: "fixed window counter"
        })
    );
    assert!(matches!(
        fixed.set_quota("10/s burst 20".parse().expect("valid")),
        Err(QuotaChangeError::Invalid(QuotaError::BurstNotSupported { .. }))
    ));
    assert_eq!(fixed.current().limit(), 10);
    assert_eq!(fixed.changes(), 0);
    // A wide state takes any limit, and keeps its width under a small one.
    let sliding = Live::new(
        SlidingWindow::new("10/s".parse().expect("valid"))
            .expect("valid")
            .with_wide_state(),
    );
    sliding
        .set_quota(Quota::per_second(u64::from(u32::MAX)).expect("valid"))
        .expect("wide");
    sliding.set_quota("3/s".parse().expect("valid")).expect("wide");
    assert!(sliding.current().is_wide());
    assert_eq!((sliding.current().limit(), sliding.changes()), (3, 2));
    let bucket = Live::new(TokenBucket::new("10/s".parse().expect("valid")).expect("valid"));
    assert!(matches!(
        bucket.set_quota("300000000/s".parse().expect("valid")),
        Err(QuotaChangeError::TimeUnitChanged { .. })
    ));
    assert!(matches!(
        bucket.set_quota("10000000000/s".parse().expect("valid")),
        Err(QuotaChangeError::Invalid(QuotaError::RateTooFine { .. }))
    ));
    let log = LogLimiter::new(Live::new(
        SlidingLog::new("10/s".parse().expect("valid")).expect("valid"),
    ));
    assert!(matches!(
        log.set_quota(Quota::per_second(SlidingLog::MAX_LIMIT + 1).expect("valid")),
        Err(QuotaChangeError::Invalid(QuotaError::LogTooLarge { .. }))
    ));
    assert_eq!(log.capacity(), 10);
}

/// A token bucket kept exactly (a rate whole nanoseconds cannot hold) counts its time in units
/// of `1 / count` ns: it changes live to another period or burst of the same count, keeping its
/// debt in time; to another count, or to or from a 64-bit bucket, the change is a typed error
/// that changes nothing.
#[test]
fn a_wide_token_bucket_changes_only_to_its_own_time_unit() {
    let quota = |text: &str| text.parse::<Quota>().expect("valid");
    let at = Timestamp::from_nanos(1_000_000_000);
    let bucket = TokenBucket::new(quota("300000000/s burst 3")).expect("valid");
    assert!(bucket.is_wide());
    let limiter = DirectLimiter::with_clock(Live::new(bucket), ManualClock::new());
    assert!(limiter.check_n_at(3, at).expect("fits").is_allowed());
    // Full again 10 ns on (3 units of 10/3 ns); at 3 per 20 ns the same instant holds 1.5 units.
    limiter
        .algorithm()
        .set_quota(quota("300000000/2s burst 3"))
        .expect("same count");
    let peeked = limiter.peek_n_at(0, at).expect("fits");
    assert_eq!(
        (peeked.remaining(), peeked.reset_after()),
        (1, Duration::from_nanos(10))
    );
    for next in ["200000000/s", "10/s"] {
        assert_eq!(
            limiter.algorithm().set_quota(quota(next)),
            Err(QuotaChangeError::TimeUnitChanged {
                from: quota("300000000/2s burst 3"),
                to: quota(next)
            })
        );
    }
    assert_eq!(limiter.algorithm().changes(), 1);
    let message = QuotaChangeError::TimeUnitChanged {
        from: quota("300000000/s"),
        to: quota("10/s"),
    }
    .to_string();
    assert!(message.contains("build a new limiter for 10/s"), "{message}");
}
