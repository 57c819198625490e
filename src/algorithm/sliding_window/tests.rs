//! The 64-bit path against the general one, which is its definition: every transition the
//! dispatching [`decide`](Algorithm::decide) returns must be the general path's, over windows,
//! limits (on both sides of `limit * w = u64::MAX`), states, times (up to the end of
//! representable time, and stepping back) and weights (0, above the limit).

use std::time::Duration;

use proptest::prelude::*;

use super::{SlidingWindow, CURRENT, PREVIOUS, WIDE};
use crate::algorithm::divisor::BoundedDivisor;
use crate::algorithm::window::test_support::pick;
use crate::algorithm::window::Packing;
use crate::algorithm::Algorithm;
use crate::{Quota, Timestamp};

const SECOND: u64 = 1_000_000_000;
const DAY: u64 = 86_400 * SECOND;

fn sliding(limit: u64, window: u64) -> SlidingWindow {
    SlidingWindow::new(Quota::new(limit, Duration::from_nanos(window)).unwrap()).unwrap()
}

/// Window lengths: tiny (where every remainder modulo `w` turns up), up to 10 µs, 1 to 5 ms,
/// a second, a minute, about a day (where `limit * w` passes `u64::MAX` within the limits that
/// fit; for `DAY + 4` division by one multiplication stops being exact before that), a year,
/// and windows so long that only a few fit in representable time.
fn window() -> impl Strategy<Value = u64> {
    prop_oneof![
        4..=64u64,
        4..=10_000u64,
        1_000_000..=5_000_000u64,
        Just(SECOND),
        Just(60 * SECOND),
        Just(DAY),
        DAY - 1..=DAY + 1,
        Just(DAY + 4),
        Just(365 * DAY),
        (1u64 << 60)..=u64::MAX,
    ]
}

/// The limit: small, near either bound of the 64-bit path (`limit * w` fits a `u64`, and
/// division by `w` in one multiplication is exact up to it), or any that fits.
fn limit_for(limiter_max: u64, window: u64, selector: u8, raw: u64) -> u64 {
    let anchor = match raw % 2 {
        0 => u64::MAX / window,
        _ => BoundedDivisor::new(window).max() / window,
    };
    pick(selector, raw / 2, anchor, limiter_max).max(1)
}

/// The time: anywhere, near the end of representable time, near a window boundary, or early.
fn now_for(window: u64, selector: u8, raw: u64) -> u64 {
    match selector % 4 {
        0 => raw,
        1 => u64::MAX - raw % window.saturating_mul(4),
        2 => (raw / window)
            .saturating_mul(window)
            .saturating_add(raw % 3)
            .saturating_sub(1),
        _ => raw % window.saturating_mul(8),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// Whatever the path, the transition is the general path's.
    #[test]
    fn the_u64_path_decides_as_the_general_one(
        window in window(),
        limit_pick in (any::<u8>(), any::<u64>()),
        now_pick in (any::<u8>(), any::<u64>()),
        index_pick in (any::<u8>(), any::<u64>()),
        previous_pick in (any::<u8>(), any::<u64>()),
        current_pick in (any::<u8>(), any::<u64>()),
        cost_pick in (any::<u8>(), any::<u64>()),
    ) {
        let max = sliding(1, window).max_narrow_limit();
        let limit = limit_for(max, window, limit_pick.0, limit_pick.1);
        let limiter = sliding(limit, window);
        let now = now_for(window, now_pick.0, now_pick.1);
        let now_index = now / window;
        // The stored window: this one, one to three before (or far before), one after (a step
        // back in time), or any index the field holds.
        let (selector, raw) = index_pick;
        let index = match selector % 8 {
            0..=2 => now_index,
            3 => now_index.saturating_sub(1),
            4 => now_index.saturating_sub(2 + raw % 2),
            5 => now_index.saturating_add(1),
            6 => now_index.saturating_sub(raw),
            _ => limiter.layout.index(raw),
        };
        let previous = pick(previous_pick.0, previous_pick.1, limit, max);
        let current = pick(current_pick.0, current_pick.1, limit, max);
        let state = limiter.state(index, previous, current).raw();
        let cost = match cost_pick.0 % 8 {
            7 => u64::MAX - cost_pick.1 % 2,
            selector => pick(selector, cost_pick.1, limit, limit.saturating_add(1)),
        };
        let at = Timestamp::from_nanos(now);
        prop_assert_eq!(
            limiter.decide(state, at, cost),
            limiter.decide_in_general(&limiter.layout, state, at, cost),
            "w={} limit={} index={} (now's {}) previous={} current={} now={} cost={}",
            window, limit, index, now_index, previous, current, now, cost
        );
        // The 128-bit layout of the same configuration: its shortcut decides as its general
        // path, and both as the 64-bit layout on the same window and counts.
        let wide = limiter.with_wide_state();
        let wide_state = wide.state(index, previous, current).raw_wide();
        let decided = wide.decide_wide(wide_state, at, cost);
        prop_assert_eq!(decided, wide.decide_in_general(&WIDE, wide_state, at, cost));
        let narrow = limiter.decide(state, at, cost);
        prop_assert_eq!(decided.decision, narrow.decision);
        let fields = |packing: &dyn Fn(u32) -> u64, index: u64| (index, packing(PREVIOUS), packing(CURRENT));
        prop_assert_eq!(
            fields(&|field| WIDE.counter(decided.state, field), WIDE.index(decided.state)),
            fields(&|field| limiter.layout.counter(narrow.state, field), limiter.layout.index(narrow.state))
        );
    }

    /// The 128-bit layout on counts past the 64-bit one (limits up to `u32::MAX`, windows from
    /// 1 ns): the shortcut decides as the general path.
    #[test]
    fn the_wide_u64_path_decides_as_the_general_one(
        window in prop_oneof![1..=64u64, window()],
        limit_pick in (any::<u8>(), any::<u64>()),
        now_pick in (any::<u8>(), any::<u64>()),
        back in 0..4u64,
        previous_pick in (any::<u8>(), any::<u64>()),
        current_pick in (any::<u8>(), any::<u64>()),
        cost_pick in (any::<u8>(), any::<u64>()),
    ) {
        let max = SlidingWindow::MAX_LIMIT;
        let limit = limit_for(max, window, limit_pick.0, limit_pick.1);
        let limiter = sliding(limit, window).with_wide_state();
        let now = now_for(window, now_pick.0, now_pick.1);
        let index = (now / window).saturating_sub(back);
        let previous = pick(previous_pick.0, previous_pick.1, limit, max);
        let current = pick(current_pick.0, current_pick.1, limit, max);
        let state = limiter.state(index, previous, current).raw_wide();
        let cost = pick(cost_pick.0, cost_pick.1, limit, limit.saturating_add(1));
        let at = Timestamp::from_nanos(now);
        prop_assert_eq!(
            limiter.decide_wide(state, at, cost),
            limiter.decide_in_general(&WIDE, state, at, cost),
            "w={} limit={} index={} previous={} current={} now={} cost={}",
            window, limit, index, previous, current, now, cost
        );
    }
}

/// A limit past the 64-bit layout takes the 128-bit one, up to `u32::MAX`; past it, a typed
/// error naming it. Every window takes one, down to 1 ns.
#[test]
fn limits_past_the_word_take_the_wide_layout() {
    assert_eq!(sliding(1, 1_000_000).max_narrow_limit(), 511);
    assert!(!sliding(511, 1_000_000).is_wide());
    assert!(sliding(512, 1_000_000).is_wide());
    assert!(sliding(u64::from(u32::MAX), 1).is_wide());
    assert_eq!(SlidingWindow::MAX_LIMIT, u64::from(u32::MAX));
    assert!(matches!(
        SlidingWindow::new(Quota::new(1 << 32, Duration::from_secs(1)).unwrap()),
        Err(crate::QuotaError::LimitTooLarge { max, .. }) if max == SlidingWindow::MAX_LIMIT
    ));
}

/// The 64-bit path is taken exactly while `limit * w` fits a `u64`: for a one-day window up to
/// a limit of `u64::MAX / w` (213,503), and then up to two windows before the end of time.
#[test]
fn the_u64_path_ends_where_limit_times_window_passes_u64_max() {
    let boundary = u64::MAX / DAY;
    assert_eq!(boundary, 213_503);
    assert!(boundary < sliding(1, DAY).max_narrow_limit());
    assert_eq!(sliding(boundary, DAY).fast_end, u64::MAX / DAY - 1);
    assert_eq!(sliding(boundary + 1, DAY).fast_end, 0);
    assert_eq!(sliding(16_000, SECOND).fast_end, u64::MAX / SECOND - 1);
    // One multiplication divides by a window of `DAY + 4` ns exactly up to 174,229 windows'
    // worth: larger limits take the general path although `limit * w` fits.
    let (odd, exact) = (DAY + 4, 174_229);
    assert_eq!(BoundedDivisor::new(odd).max() / odd, exact);
    assert!(sliding(exact + 1, odd).budget <= u128::from(u64::MAX));
    assert_eq!(sliding(exact, odd).fast_end, u64::MAX / odd - 1);
    assert_eq!(sliding(exact + 1, odd).fast_end, 0);
    // Windows so long that only three, two or one start in representable time: the 64-bit path
    // needs the window two after `now`'s to start there too.
    assert_eq!(sliding(1, u64::MAX / 3).fast_end, 2);
    assert_eq!(sliding(1, u64::MAX / 2).fast_end, 1);
    assert_eq!(sliding(1, u64::MAX).fast_end, 0);
}

/// Both sides of the boundary decide the same requests alike where both are defined: a full
/// window refuses, and the previous window weighs as much on either side.
#[test]
fn both_sides_of_the_boundary_decide_alike() {
    let boundary = u64::MAX / DAY;
    for limit in [boundary - 1, boundary, boundary + 1, boundary + 2] {
        let limiter = sliding(limit, DAY);
        let noon = Timestamp::from_nanos(1_000 * DAY + DAY / 2);
        // Half the previous window's count still weighs at noon: `limit / 2` of it, rounded up.
        let state = limiter.state(1_000, limit, 0).raw();
        let half = limit - limit.div_ceil(2);
        let passes = limiter.decide(state, noon, half);
        assert!(passes.decision.is_allowed(), "limit {limit}");
        assert_eq!(passes.decision.remaining(), 0, "limit {limit}");
        assert_eq!(
            passes,
            limiter.decide_in_general(&limiter.layout, state, noon, half)
        );
        let refused = limiter.decide(state, noon, half + 1);
        assert!(!refused.decision.is_allowed(), "limit {limit}");
        assert_eq!(
            refused,
            limiter.decide_in_general(&limiter.layout, state, noon, half + 1)
        );
    }
}

/// Where one multiplication no longer divides by `w` exactly, the general path decides: for a
/// window of `DAY + 4` ns and a limit of 213,503 (past the 174,229 it is exact for), one unit in
/// the previous window and a request 1 ns before the window ends leave
/// `(213,502 * w - 1) / w = 213,501` units, which the multiplication would round up to 213,502.
#[test]
fn limits_past_the_exact_division_take_the_general_path() {
    let w = DAY + 4;
    let limiter = sliding(213_503, w);
    let state = limiter.state(100, 1, 0).raw();
    let now = Timestamp::from_nanos(100 * w + w - 1);
    let units = BoundedDivisor::new(w);
    assert!(213_502 * w - 1 > units.max());
    assert_eq!(units.divide(213_502 * w - 1), 213_502);
    let decision = limiter.decide(state, now, 1);
    assert_eq!(decision.decision.remaining(), 213_501);
    assert_eq!(
        decision,
        limiter.decide_in_general(&limiter.layout, state, now, 1)
    );
}
