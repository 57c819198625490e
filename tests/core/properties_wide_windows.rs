//! The windows' property tests on their 128-bit state: the same reference models
//! (`tests/reference/`), the same traces, with every window built wide (`with_wide_state`, the
//! layout a limit too large for one word takes: a 16-byte cell in the direct limiter, the
//! locked table in the keyed one), and with limits up to `u32::MAX`, which only that layout
//! holds.
//!
//! - forward traces: every decision (allowed, remaining, retry-after, reset-after, delay) is the
//!   model's, and a peek first changes nothing;
//! - traces stepping back: each request is decided as the model decides it at the latest time a
//!   weighted request was decided at (the fixed window), or at the start of that time's window
//!   when `now` is before it (the sliding window), with the same instants for retry-after and
//!   reset-after, measured from the real `now`;
//! - keyed: several keys in a table with room for all, each decided exactly as its own model.

use std::collections::HashMap;
use std::time::Duration;

use crate::reference::fixed_window::FixedWindowModel;
use crate::reference::sliding_window::SlidingWindowModel;
use crate::reference::trace::{ops, peek_then_check, start, window_length, Op, Start};
use crate::reference::Expected;
use proptest::prelude::*;
use tollgate::algorithm::Algorithm;
use tollgate::{DirectLimiter, FixedWindow, KeyedLimiter, ManualClock, Quota, SlidingWindow, Timestamp};

/// One day in nanoseconds.
const DAY: u64 = 86_400_000_000_000;

fn quota(limit: u64, window: u64) -> Quota {
    Quota::new(limit, Duration::from_nanos(window)).unwrap()
}

/// The fixed window, wide whatever its limit.
fn fixed(limit: u64, window: u64) -> FixedWindow {
    let fixed = FixedWindow::new(quota(limit, window)).unwrap().with_wide_state();
    assert!(fixed.is_wide());
    fixed
}

/// The sliding window, wide whatever its limit.
fn sliding(limit: u64, window: u64) -> SlidingWindow {
    let sliding = SlidingWindow::new(quota(limit, window))
        .unwrap()
        .with_wide_state();
    assert!(sliding.is_wide());
    sliding
}

/// A model of either window, asked for a whole decision.
trait Model {
    fn decide(&mut self, now: u64, cost: u64) -> Expected;
}

impl Model for FixedWindowModel {
    fn decide(&mut self, now: u64, cost: u64) -> Expected {
        FixedWindowModel::decide(self, now, cost)
    }
}

impl Model for SlidingWindowModel {
    fn decide(&mut self, now: u64, cost: u64) -> Expected {
        SlidingWindowModel::decide(self, now, cost)
    }
}

/// A weight of 0 to `limit`, mostly a large share of it: a tenth, a third, a half, all of it,
/// or one unit more or less than those (so that windows of large limits fill within a trace).
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

/// A forward trace through a direct limiter of `algorithm` and through `model`: every decision
/// is the model's.
fn forward<A: Algorithm, M: Model>(
    algorithm: A,
    window: u64,
    mut model: M,
    start: Start,
    ops: &[Op],
    weigh: impl Fn(&Op, u64) -> u64,
) -> Result<(), TestCaseError> {
    let limit = algorithm.capacity();
    let limiter = DirectLimiter::with_clock(algorithm, ManualClock::new());
    let mut now = start.at(window);
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            now = op.forward(now, window);
        }
        let cost = weigh(op, limit);
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

/// A trace stepping back through a direct limiter: each request is decided as `model` decides
/// it at `effective(now, latest)`, `latest` the latest time a weighted request was decided at.
fn backward<A: Algorithm, M: Model>(
    algorithm: A,
    window: u64,
    mut model: M,
    start: Start,
    ops: &[Op],
    effective: impl Fn(u64, Option<u64>) -> u64,
) -> Result<(), TestCaseError> {
    let limit = algorithm.capacity();
    let limiter = DirectLimiter::with_clock(algorithm, ManualClock::new());
    let mut now = start.at(window);
    let mut latest = None;
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            now = op.any_direction(now, window);
        }
        let cost = op.cost(limit);
        let at = effective(now, latest);
        if cost > 0 {
            latest = Some(latest.map_or(now, |latest: u64| latest.max(now)));
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
            if expected == 0 {
                prop_assert_eq!(got, 0, "{}", context);
            } else {
                prop_assert_eq!(
                    u128::from(now) + u128::from(got),
                    u128::from(at) + u128::from(expected),
                    "{}",
                    context
                );
            }
        }
    }
    Ok(())
}

/// A forward trace over several keys in a keyed table with room for all: each key is decided
/// exactly as its own model.
fn keyed<A: Algorithm, M: Model>(
    algorithm: A,
    window: u64,
    model: impl Fn() -> M,
    start: Start,
    keys: &[u64],
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let limit = algorithm.capacity();
    let limiter = KeyedLimiter::<u64, _, _>::with_clock(algorithm, 64, ManualClock::new()).unwrap();
    let mut models: HashMap<u64, M> = HashMap::new();
    let mut now = start.at(window);
    for (i, (op, key)) in ops.iter().zip(keys.iter().cycle()).enumerate() {
        if i > 0 {
            now = op.forward(now, window);
        }
        let cost = op.cost(limit);
        let at = Timestamp::from_nanos(now);
        let peeked = Expected::of(&limiter.peek_n_at(key, cost, at).unwrap());
        let got = Expected::of(&limiter.check_n_at(key, cost, at).unwrap());
        let expected = models.entry(*key).or_insert_with(&model).decide(now, cost);
        prop_assert_eq!(peeked, got, "request {} key {} at t={}", i, key, now);
        prop_assert_eq!(
            got,
            expected,
            "request {} key {} at t={} weight {} (w={}, limit={})",
            i,
            key,
            now,
            cost,
            window,
            limit
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn wide_fixed_decisions_match_the_window_map(
        limit in 1..=20u64,
        window in prop_oneof![1..=64u64, window_length()],
        start in start(),
        ops in ops(64),
    ) {
        forward(fixed(limit, window), window, FixedWindowModel::new(window, limit), start, &ops, Op::cost)?;
    }

    #[test]
    fn wide_sliding_decisions_match_the_exact_estimate(
        limit in 1..=20u64,
        window in prop_oneof![1..=64u64, window_length()],
        start in start(),
        ops in ops(64),
    ) {
        forward(sliding(limit, window), window, SlidingWindowModel::new(window, limit), start, &ops, Op::cost)?;
    }

    /// Limits near `u32::MAX` (and near where `limit * w` passes `u64::MAX`), windows from 1 ms
    /// to a day, weights a large share of the limit.
    #[test]
    fn large_limits_match_the_models(
        limit in prop_oneof![(1u64 << 32) - 64..=(1u64 << 32) - 1, 1u64..(1 << 32), 213_500u64..213_510],
        window in prop_oneof![
            Just(1_000_000u64),
            Just(1_000_000_000),
            Just(60_000_000_000),
            Just(3_600_000_000_000),
            DAY - 1..=DAY + 1,
        ],
        start in start(),
        ops in ops(40),
    ) {
        let fixed = FixedWindow::new(quota(limit, window)).unwrap();
        forward(fixed, window, FixedWindowModel::new(window, limit), start, &ops, large_share)?;
        let sliding = SlidingWindow::new(quota(limit, window)).unwrap();
        forward(sliding, window, SlidingWindowModel::new(window, limit), start, &ops, large_share)?;
    }

    #[test]
    fn wide_fixed_backward_steps_decide_as_at_the_latest_time(
        limit in 1..=20u64,
        window in window_length(),
        start in start(),
        ops in ops(64),
    ) {
        let latest = |now: u64, latest: Option<u64>| latest.map_or(now, |latest| latest.max(now));
        backward(fixed(limit, window), window, FixedWindowModel::new(window, limit), start, &ops, latest)?;
    }

    #[test]
    fn wide_sliding_backward_steps_decide_in_the_latest_window(
        limit in 1..=20u64,
        window in window_length(),
        start in start(),
        ops in ops(64),
    ) {
        let in_latest_window = |now: u64, latest: Option<u64>| {
            latest.map_or(now, |latest| now.max(latest / window * window))
        };
        backward(sliding(limit, window), window, SlidingWindowModel::new(window, limit), start, &ops, in_latest_window)?;
    }

    #[test]
    fn wide_keyed_keys_decide_as_their_own_models(
        limit in 1..=10u64,
        window in window_length(),
        start in start(),
        keys in proptest::collection::vec(0u64..6, 1..8),
        ops in ops(64),
    ) {
        let fixed_model = || FixedWindowModel::new(window, limit);
        keyed(fixed(limit, window), window, fixed_model, start, &keys, &ops)?;
        let sliding_model = || SlidingWindowModel::new(window, limit);
        keyed(sliding(limit, window), window, sliding_model, start, &keys, &ops)?;
    }
}
