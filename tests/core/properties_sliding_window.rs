//! Property tests of the sliding window counter against per-window counts and an exact rational
//! estimate ([`reference::sliding_window::SlidingWindowModel`]), the estimate's worked example
//! (80 in the previous minute, 30 in this one, a quarter in: 90 of 100), and its behaviour when
//! the clock steps backwards.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::reference::sliding_window::SlidingWindowModel;
use crate::reference::trace::{ops, peek_then_check, start, window_length, Op, Start};
use num_rational::Ratio;
use proptest::prelude::*;
use tollgate::{DirectLimiter, ManualClock, Quota, QuotaError, SlidingWindow, Timestamp};

/// A sliding window of `window` ns with `limit` per window, or with the largest limit that fits
/// its packed state when `limit` does not (`None` when not even 1 fits: windows under 4 ns).
fn sliding(limit: u64, window: u64) -> Option<SlidingWindow> {
    let build = |limit| SlidingWindow::new(Quota::new(limit, Duration::from_nanos(window)).unwrap());
    match build(limit) {
        Ok(sliding) => Some(sliding),
        Err(QuotaError::LimitTooLarge { max, .. }) => (max > 0).then(|| build(max).unwrap()),
        Err(other) => panic!("unexpected error {other}"),
    }
}

/// One day in nanoseconds.
const DAY: u64 = 86_400_000_000_000;

/// A weight of 0 to `limit`, mostly a large share of it: a tenth, a third, a half, all of it, or
/// one unit more or less than those.
fn large_share(op: &Op, limit: u64) -> u64 {
    let share = match op.cost(4) {
        0 => limit / 10,
        1 => limit / 3,
        2 => limit / 2,
        3 => limit,
        _ => op.cost(limit),
    };
    (share + op.cost(2)).saturating_sub(1).min(limit)
}

fn window_of(sliding: &SlidingWindow) -> u64 {
    u64::try_from(sliding.window().as_nanos()).unwrap()
}

fn run_against_model(sliding: SlidingWindow, start: Start, ops: &[Op]) -> Result<(), TestCaseError> {
    run_against_model_weighing(sliding, start, ops, Op::cost)
}

/// [`run_against_model`] with each request's weight drawn by `cost(op, limit)`.
fn run_against_model_weighing(
    sliding: SlidingWindow,
    start: Start,
    ops: &[Op],
    cost: impl Fn(&Op, u64) -> u64,
) -> Result<(), TestCaseError> {
    let (limit, window) = (sliding.limit(), window_of(&sliding));
    let limiter = DirectLimiter::with_clock(sliding, ManualClock::new());
    prop_assert_eq!(limiter.capacity(), limit);
    let mut model = SlidingWindowModel::new(window, limit);
    let mut now = start.at(window);
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            now = op.forward(now, window);
        }
        let cost = cost(op, limit);
        let got = peek_then_check(&limiter, op, now, cost)?;
        let estimate = model.estimate(now);
        let expected = model.decide(now, cost);
        prop_assert_eq!(
            got,
            expected,
            "request {} at t={} weight {} (w={}, limit={}, estimate before {})",
            i,
            now,
            cost,
            window,
            limit,
            estimate
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// With time never going backwards, every decision (allowed, remaining, retry-after,
    /// reset-after, delay) equals the exact-estimate model's, and peeking first changes nothing.
    #[test]
    fn decisions_match_the_exact_estimate(
        limit in 1..=20u64,
        window in window_length(),
        start in start(),
        ops in ops(64),
    ) {
        let sliding = sliding(limit, window);
        prop_assume!(sliding.is_some());
        run_against_model(sliding.unwrap(), start, &ops)?;
    }

    /// The same where `limit * w` is near `u64::MAX` (one-day windows, limits around
    /// `u64::MAX / w` = 213,503), on both sides: below it the limiter decides in `u64`, above it
    /// in `u128`. Weights are a large share of the limit, so windows fill within a trace.
    #[test]
    fn decisions_match_the_exact_estimate_where_limit_times_window_nears_u64_max(
        above in -3i64..=3,
        window in DAY - 1..=DAY + 1,
        start in start(),
        ops in ops(48),
    ) {
        let limit = (u64::MAX / window).saturating_add_signed(above);
        run_against_model_weighing(sliding(limit, window).unwrap(), start, &ops, large_share)?;
    }

    /// With the clock stepping backwards as well, nothing panics, peek agrees with check, and:
    ///
    /// 1. Safety: replaying only the admitted (weighted) requests into the model, each at the latest time
    ///    a weighted request was decided at so far, admitted or refused (the running maximum),
    ///    the model admits every one of them. So the
    ///    admitted requests never exceed the sliding-window rule on a monotone timeline, and no
    ///    window of that timeline holds more than the limit.
    /// 2. Exactly what the limiter does: it decides each request as the model would at
    ///    `max(now, start of the window of that latest time)`, counting it there; its
    ///    retry-after and reset-after point at the same instants as the model's, measured from
    ///    the real `now`. (A step back within the latest window is decided at its own, earlier,
    ///    time, where the previous window weighs more; a step back before it is decided at its
    ///    start.)
    ///
    /// (The admitted *total* is not bounded by the model's total on running-maximum
    /// timestamps; see `backward_totals_are_not_bounded_by_the_clamped_replay`.)
    #[test]
    fn backward_steps_never_break_the_rule_on_a_monotone_timeline(
        limit in 1..=20u64,
        window in window_length(),
        start in start(),
        ops in ops(64),
    ) {
        let sliding = sliding(limit, window);
        prop_assume!(sliding.is_some());
        run_with_backward_steps(sliding.unwrap(), start, false, &ops)?;
    }

    /// The same for traces that run into the end of representable time (`u64::MAX` ns), except
    /// for the timings within two windows of it (not checked there).
    #[test]
    fn the_end_of_time_never_breaks_the_rule_on_a_monotone_timeline(
        limit in 1..=20u64,
        window in window_length(),
        start in start(),
        ops in ops(64),
    ) {
        let sliding = sliding(limit, window);
        prop_assume!(sliding.is_some());
        run_with_backward_steps(sliding.unwrap(), start, true, &ops)?;
    }
}

fn run_with_backward_steps(
    sliding: SlidingWindow,
    start: Start,
    near_the_end: bool,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let (limit, window) = (sliding.limit(), window_of(&sliding));
    let limiter = DirectLimiter::with_clock(sliding, ManualClock::new());
    let mut shadow = SlidingWindowModel::new(window, limit);
    let mut replay = SlidingWindowModel::new(window, limit);
    let mut per_window = BTreeMap::<u64, u64>::new();
    let mut latest_counted: Option<u64> = None;
    let mut now = if near_the_end {
        start.near_the_end(window)
    } else {
        start.at(window)
    };
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            now = op.any_direction(now, window);
        }
        let cost = op.cost(limit);
        let got = peek_then_check(&limiter, op, now, cost)?;
        let effective = latest_counted.map_or(now, |latest| now.max(latest / window * window));
        let context = format!(
            "request {i} at t={now} (decided at {effective}) weight {cost} (w={window}, limit={limit})"
        );
        prop_assert_eq!(got.delay, 0, "{}", context);
        if effective.checked_add(2 * window).is_some() {
            let expected = shadow.decide(effective, cost);
            prop_assert_eq!(got.allowed, expected.allowed, "{}", context);
            prop_assert_eq!(got.remaining, expected.remaining, "{}", context);
            for (got, expected) in [
                (got.retry_after, expected.retry_after),
                (got.reset_after, expected.reset_after),
            ] {
                if expected == 0 {
                    prop_assert_eq!(got, 0, "{}", context);
                } else {
                    prop_assert_eq!(now + got, effective + expected, "{}", context);
                }
            }
        } else {
            prop_assert_eq!(got.allowed, shadow.admit(effective, cost), "{}", context);
            prop_assert_eq!(got.remaining, shadow.remaining(effective), "{}", context);
            // Near the end of time the instants themselves are not checked, but no promise may
            // point past the last representable instant: "never" or within it.
            for got in [got.retry_after, got.reset_after] {
                prop_assert!(
                    got == u64::MAX || u128::from(now) + u128::from(got) <= u128::from(u64::MAX),
                    "{}",
                    context
                );
            }
        }
        // A weightless request counts nothing and stores nothing: it does not move the window.
        if cost > 0 {
            latest_counted = Some(latest_counted.map_or(now, |latest| latest.max(now)));
        }
        if got.allowed && cost > 0 {
            let latest = latest_counted.unwrap_or(now);
            prop_assert!(replay.admit(latest, cost), "replay refuses {}", context);
            let count = per_window.entry(latest / window).or_insert(0);
            *count += cost;
            prop_assert!(*count <= limit, "{}", context);
        }
    }
    Ok(())
}

/// The estimate's worked example, through real requests: limit 100 per minute, 80 requests
/// in minute 0, 30 in minute 1 before 1:15; at 1:15 (25% into minute 1) the estimate is
/// `30 + 80 * 0.75 = 90`, so one more is allowed and 9 remain.
///
/// The 30 arrive at 1:10, not at 1:00 sharp: at 1:00 the previous minute still weighs fully
/// (80), so only 20 of them would pass there (checked below on a second limiter).
#[test]
fn a_quarter_into_the_minute_80_before_and_30_now_estimate_90() {
    let minute = 60_000_000_000u64;
    let limiter = DirectLimiter::with_clock(
        SlidingWindow::new("100/min".parse().unwrap()).unwrap(),
        ManualClock::new(),
    );
    let mut model = SlidingWindowModel::new(minute, 100);
    let at = Timestamp::from_secs;
    for _ in 0..80 {
        assert!(limiter.check_at(at(0)).is_allowed());
        assert!(model.decide(0, 1).allowed);
    }
    for _ in 0..30 {
        assert!(limiter.check_at(at(70)).is_allowed());
        assert!(model.decide(at(70).as_nanos(), 1).allowed);
    }
    assert_eq!(model.estimate(at(75).as_nanos()), Ratio::from_integer(90));
    let peeked = limiter.peek_at(at(75));
    let decision = limiter.check_at(at(75));
    assert_eq!(peeked, decision);
    assert!(decision.is_allowed());
    assert_eq!(decision.remaining(), 9);
    assert_eq!(decision.retry_after(), Duration::ZERO);
    // 31 counted in minute 1: the estimate is zero once minute 2 is over.
    assert_eq!(decision.reset_after(), Duration::from_secs(180 - 75));

    let sharp = DirectLimiter::with_clock(
        SlidingWindow::new("100/min".parse().unwrap()).unwrap(),
        ManualClock::new(),
    );
    for _ in 0..80 {
        assert!(sharp.check_at(at(0)).is_allowed());
    }
    assert_eq!(
        (0..30).filter(|_| sharp.check_at(at(60)).is_allowed()).count(),
        20
    );
}

/// The counter's worst case over any span of one window is `2 * limit - 1`, not about the limit:
/// after an empty minute, 100 at 00:59.9 all pass; at 01:59.8 the previous minute's 100 weigh
/// `100 * 0.2 / 60`, a third of a unit, so 99 more pass; all 199 lie in (00:59.85, 01:59.85].
#[test]
fn a_minute_can_hold_twice_the_limit_less_one() {
    let minute = Timestamp::from_secs(1_800_000_000);
    let limiter = DirectLimiter::with_clock(
        SlidingWindow::new("100/min".parse().unwrap()).unwrap(),
        ManualClock::new(),
    );
    let at = |millis: u64| Timestamp::from_nanos(minute.as_nanos() + millis * 1_000_000);
    let first = (0..100)
        .filter(|_| limiter.check_at(at(59_900)).is_allowed())
        .count();
    let second = (0..100)
        .filter(|_| limiter.check_at(at(119_800)).is_allowed())
        .count();
    assert_eq!((first, second), (100, 99));
}

proptest! {
    /// And never more: whatever the arrivals (weight 1, a clock that only moves forward), no
    /// span of one window holds more than `2 * limit - 1` admissions. A window's count `p`, once
    /// it is the previous one, still weighs `p * (w - e) / w > 0` at every `e` before the
    /// window's end, so the next window admits at most `limit - 1` while it does: at most
    /// `p + limit - 1 <= 2 * limit - 1` in any span across the boundary.
    #[test]
    fn no_window_holds_more_than_twice_the_limit_less_one(
        limit in 1u64..12,
        gaps in prop::collection::vec(prop_oneof![Just(0u64), 0u64..1_200, 990u64..1_000], 1..400),
    ) {
        const W: u64 = 1_000;
        let limiter = DirectLimiter::with_clock(
            SlidingWindow::new(Quota::new(limit, Duration::from_nanos(W)).unwrap()).unwrap(),
            ManualClock::new(),
        );
        let mut now = 1_000_000_000u64;
        let mut admitted = Vec::new();
        for gap in gaps {
            now += gap;
            if limiter.check_at(Timestamp::from_nanos(now)).is_allowed() {
                admitted.push(now);
            }
        }
        // Every span (t - w, t] ending at an admission.
        for (i, &end) in admitted.iter().enumerate() {
            let inside = admitted[..=i].iter().filter(|&&t| t + W > end).count() as u64;
            prop_assert!(inside < 2 * limit, "{inside} admissions in ({}, {end}], limit {limit}", end - W);
        }
    }
}

/// On a backward step the limiter may refuse what the model fed running-maximum timestamps
/// admits (a step back within the latest window weighs the previous window more), and, having
/// counted less, admit more later, so its admitted total can exceed that replay's. Limit 10 per
/// 10 µs: 10 at t=0, 1 at t=19 µs; then 8 at t=10 µs (back to the start of window 1: estimate
/// 1 + 10 = 11, refused; the replay decides it at t=19 µs, estimate 2, admitted); then 9 at
/// t=20 µs (the previous window holds 1 here, 9 in the replay): admitted here, refused by the
/// replay. Totals: 20 against 19. Every admission still keeps the rule on the monotone timeline
/// (see the property above): at t=20 µs the estimate is `9 + 1 * 10/10 = 10`.
#[test]
fn backward_totals_are_not_bounded_by_the_clamped_replay() {
    let sliding = SlidingWindow::new(Quota::new(10, Duration::from_micros(10)).unwrap()).unwrap();
    let limiter = DirectLimiter::with_clock(sliding, ManualClock::new());
    let mut clamped = SlidingWindowModel::new(10_000, 10);
    let trace = [(0u64, 10u64), (19_000, 1), (10_000, 8), (20_000, 9)];
    let mut latest = 0;
    let (mut got, mut expected) = (Vec::new(), Vec::new());
    for (t, cost) in trace {
        latest = t.max(latest);
        got.push(
            limiter
                .check_n_at(cost, Timestamp::from_nanos(t))
                .unwrap()
                .is_allowed(),
        );
        expected.push(clamped.decide(latest, cost).allowed);
    }
    assert_eq!(got, [true, true, false, true]);
    assert_eq!(expected, [true, true, true, false]);
    let total = |admitted: &[bool]| {
        trace
            .iter()
            .zip(admitted)
            .filter(|(_, &a)| a)
            .map(|(&(_, c), _)| c)
            .sum::<u64>()
    };
    assert_eq!((total(&got), total(&expected)), (20, 19));
}

/// A refused request in a later window than the stored one moves the window there: a later
/// request stamped before it is decided in that window, as on the running maximum of the times
/// shown. Limit 2 per 10 µs: 1 at t=0; 2 at t=10 µs refused (estimate 1 + 2 > 2), which moves the
/// state to window 1 (previous 1, current 0); 1 at t=5 µs, decided at the start of window 1
/// (estimate 1 + 1 = 2), admitted there; 1 at t=19 µs refused (`1 + 1 * 1/10 + 1 > 2`). On the
/// running maximum of all times (0, 10, 10, 19 µs) the model admits the same two.
#[test]
fn a_refused_request_moves_the_window() {
    let sliding = SlidingWindow::new(Quota::new(2, Duration::from_micros(10)).unwrap()).unwrap();
    let limiter = DirectLimiter::with_clock(sliding, ManualClock::new());
    let trace = [(0u64, 1u64), (10_000, 2), (5_000, 1), (19_000, 1)];
    let got: Vec<bool> = trace
        .iter()
        .map(|&(t, cost)| {
            limiter
                .check_n_at(cost, Timestamp::from_nanos(t))
                .unwrap()
                .is_allowed()
        })
        .collect();
    assert_eq!(got, [true, false, true, false]);

    let mut latest_seen = SlidingWindowModel::new(10_000, 2);
    let mut latest = 0;
    let mut on_latest_seen = Vec::new();
    for (&(t, cost), &admitted) in trace.iter().zip(&got) {
        latest = latest.max(t);
        if admitted {
            on_latest_seen.push(latest_seen.decide(latest, cost).allowed);
        }
    }
    assert_eq!(on_latest_seen, [true, true]);
}
