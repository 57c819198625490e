//! Property tests of the fixed window counter against a map from window to count
//! ([`reference::fixed_window::FixedWindowModel`]), and of its behaviour when the clock steps
//! backwards.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::reference::fixed_window::FixedWindowModel;
use crate::reference::trace::{ops, peek_then_check, start, window_length, Op, Start};
use proptest::prelude::*;
use tollgate::{DirectLimiter, FixedWindow, ManualClock, Quota, QuotaError, Timestamp};

/// A fixed window of `window` ns with `limit` per window, or with the largest limit that fits
/// its packed state when `limit` does not (`None` when not even 1 fits: a 1 ns window).
fn fixed(limit: u64, window: u64) -> Option<FixedWindow> {
    let build = |limit| FixedWindow::new(Quota::new(limit, Duration::from_nanos(window)).unwrap());
    match build(limit) {
        Ok(fixed) => Some(fixed),
        Err(QuotaError::LimitTooLarge { max, .. }) => (max > 0).then(|| build(max).unwrap()),
        Err(other) => panic!("unexpected error {other}"),
    }
}

fn run_against_model(fixed: FixedWindow, start: Start, ops: &[Op]) -> Result<(), TestCaseError> {
    let (limit, window) = (fixed.limit(), u64::try_from(fixed.window().as_nanos()).unwrap());
    let limiter = DirectLimiter::with_clock(fixed, ManualClock::new());
    prop_assert_eq!(limiter.capacity(), limit);
    let mut model = FixedWindowModel::new(window, limit);
    let mut now = start.at(window);
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            now = op.forward(now, window);
        }
        let cost = op.cost(limit);
        let got = peek_then_check(&limiter, op, now, cost)?;
        let expected = model.decide(now, cost);
        prop_assert_eq!(
            got,
            expected,
            "request {} at t={} weight {} (w={}, limit={})",
            i,
            now,
            cost,
            window,
            limit
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// With time never going backwards, every decision (allowed, remaining, retry-after,
    /// reset-after, delay) equals the window map's, and peeking first changes nothing.
    #[test]
    fn decisions_match_the_window_map(
        limit in 1..=20u64,
        window in window_length(),
        start in start(),
        ops in ops(64),
    ) {
        let fixed = fixed(limit, window);
        prop_assume!(fixed.is_some());
        run_against_model(fixed.unwrap(), start, &ops)?;
    }

    /// With the clock stepping backwards as well, nothing panics, peek agrees with check, and
    /// the limiter decides exactly as the window map fed the running maximum of the timestamps
    /// of the requests counted so far (a step back into an earlier window is decided in the
    /// latest window; a weightless request is decided there too, and moves nothing):
    /// - the same requests are admitted, with the same `remaining`, so no window (of the
    ///   running-maximum time) ever holds more than the limit, and the admitted totals are equal;
    /// - retry-after and reset-after point at the same instant as the model's (the end of the
    ///   latest window), measured from the real, earlier, `now`.
    #[test]
    fn backward_steps_decide_as_at_the_latest_time_seen(
        limit in 1..=20u64,
        window in window_length(),
        start in start(),
        ops in ops(64),
    ) {
        let fixed = fixed(limit, window);
        prop_assume!(fixed.is_some());
        run_with_backward_steps(fixed.unwrap(), start, false, &ops)?;
    }

    /// The same for traces that run into the end of representable time (`u64::MAX` ns), except
    /// for the timings in the last window, which ends past it (not checked there).
    #[test]
    fn the_end_of_time_decides_as_at_the_latest_time_seen(
        limit in 1..=20u64,
        window in window_length(),
        start in start(),
        ops in ops(64),
    ) {
        let fixed = fixed(limit, window);
        prop_assume!(fixed.is_some());
        run_with_backward_steps(fixed.unwrap(), start, true, &ops)?;
    }
}

fn run_with_backward_steps(
    fixed: FixedWindow,
    start: Start,
    near_the_end: bool,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let (limit, window) = (fixed.limit(), u64::try_from(fixed.window().as_nanos()).unwrap());
    let limiter = DirectLimiter::with_clock(fixed, ManualClock::new());
    let mut model = FixedWindowModel::new(window, limit);
    let mut per_window = BTreeMap::<u64, u64>::new();
    let mut now = if near_the_end {
        start.near_the_end(window)
    } else {
        start.at(window)
    };
    // The latest time a request was counted at (nothing yet).
    let mut latest = 0;
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            now = op.any_direction(now, window);
        }
        let cost = op.cost(limit);
        // The limiter's window moves only when a request is counted; a weightless one stores
        // nothing, so it is decided at the latest time, but does not move it.
        let at = latest.max(now);
        if cost > 0 {
            latest = at;
        }
        let got = peek_then_check(&limiter, op, now, cost)?;
        let expected = model.decide(at, cost);
        let context =
            format!("request {i} at t={now} (decided at {at}) weight {cost} (w={window}, limit={limit})");
        prop_assert_eq!(got.allowed, expected.allowed, "{}", context);
        prop_assert_eq!(got.remaining, expected.remaining, "{}", context);
        prop_assert_eq!(got.delay, 0, "{}", context);
        for (got, expected) in [
            (got.retry_after, expected.retry_after),
            (got.reset_after, expected.reset_after),
        ] {
            let deadline = u128::from(at) + u128::from(expected);
            if expected == 0 {
                prop_assert_eq!(got, 0, "{}", context);
            } else if deadline <= u128::from(u64::MAX) {
                prop_assert_eq!(u128::from(now) + u128::from(got), deadline, "{}", context);
            } else {
                // Past the last representable instant: "never".
                prop_assert_eq!(got, u64::MAX, "{}", context);
            }
        }
        if got.allowed {
            let count = per_window.entry(at / window).or_insert(0);
            *count += cost;
            prop_assert!(*count <= limit, "{}", context);
        }
    }
    Ok(())
}

/// Windows are aligned to the UNIX epoch: a one-minute window starts at :00, whatever time the
/// limiter is first used (the crate's documented example: 100 at :59, 100 more at 1:01).
#[test]
fn windows_are_aligned_to_the_epoch() {
    let limiter = DirectLimiter::with_clock(
        FixedWindow::new("100/min".parse().unwrap()).unwrap(),
        ManualClock::new(),
    );
    let mut model = FixedWindowModel::new(60_000_000_000, 100);
    for (secs, admitted) in [(59, 100), (61, 100), (119, 0), (120, 100)] {
        let now = Timestamp::from_secs(secs);
        let got = (0..150).filter(|_| limiter.check_at(now).is_allowed()).count();
        let expected = (0..150)
            .filter(|_| model.decide(now.as_nanos(), 1).allowed)
            .count();
        assert_eq!((got, expected), (admitted, admitted), "at {secs} s");
    }
}

/// A step back into an earlier window is decided (and counted) in the latest window, so the
/// requests *timestamped* in one window can exceed the limit, while no window of the
/// running-maximum time does: limit 2, two at 0 s, one at 1:00, then one at 0:30 passes (it is
/// counted in minute 1) and a second one does not.
#[test]
fn a_step_back_is_counted_in_the_latest_window() {
    let limiter = DirectLimiter::with_clock(
        FixedWindow::new("2/min".parse().unwrap()).unwrap(),
        ManualClock::new(),
    );
    let at = Timestamp::from_secs;
    assert!(limiter.check_at(at(0)).is_allowed());
    assert!(limiter.check_at(at(0)).is_allowed());
    assert!(limiter.check_at(at(60)).is_allowed());
    let back = limiter.check_at(at(30));
    assert!(back.is_allowed());
    assert_eq!(back.remaining(), 0);
    assert_eq!(back.reset_after(), Duration::from_secs(90)); // the end of minute 1, from 0:30
    let refused = limiter.check_at(at(30));
    assert!(!refused.is_allowed());
    assert_eq!(refused.retry_after(), Duration::from_secs(90));
}
