//! The dispatching [`decide`](Algorithm::decide) against the general path, which is its
//! definition: every transition must be the general path's, over windows, limits, states,
//! times (up to the end of representable time, and stepping back) and weights (0, above the
//! limit).

use std::time::Duration;

use proptest::prelude::*;

use super::{FixedWindow, WIDE};
use crate::algorithm::window::test_support::pick;
use crate::algorithm::window::Packing;
use crate::algorithm::Algorithm;
use crate::{Quota, Timestamp};

const SECOND: u64 = 1_000_000_000;

fn fixed(limit: u64, window: u64) -> FixedWindow {
    FixedWindow::new(Quota::new(limit, Duration::from_nanos(window)).unwrap()).unwrap()
}

/// Window lengths: tiny, up to 10 µs, 1 to 5 ms, a second, a day, and windows so long that only
/// a few fit in representable time.
fn window() -> impl Strategy<Value = u64> {
    prop_oneof![
        2..=64u64,
        2..=10_000u64,
        1_000_000..=5_000_000u64,
        Just(SECOND),
        Just(86_400 * SECOND),
        (1u64 << 60)..=u64::MAX,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// Whatever the path, the transition is the general path's.
    #[test]
    fn the_shortcut_decides_as_the_general_path(
        window in window(),
        limit_pick in (any::<u8>(), any::<u64>()),
        now_pick in (any::<u8>(), any::<u64>()),
        index_pick in (any::<u8>(), any::<u64>()),
        count_pick in (any::<u8>(), any::<u64>()),
        cost_pick in (any::<u8>(), any::<u64>()),
    ) {
        let max = fixed(1, window).max_narrow_limit();
        let limit = pick(limit_pick.0, limit_pick.1, 20, max).max(1);
        let limiter = fixed(limit, window);
        let now = match now_pick.0 % 4 {
            0 => now_pick.1,
            1 => u64::MAX - now_pick.1 % window.saturating_mul(3),
            2 => (now_pick.1 / window)
                .saturating_mul(window)
                .saturating_add(now_pick.1 % 3)
                .saturating_sub(1),
            _ => now_pick.1 % window.saturating_mul(8),
        };
        let now_index = now / window;
        // The stored window: this one, one or more before, one after (a step back in time), or
        // any index the field holds.
        let (selector, raw) = index_pick;
        let index = match selector % 8 {
            0..=2 => now_index,
            3 => now_index.saturating_sub(1),
            4 => now_index.saturating_sub(raw),
            5 => now_index.saturating_add(1),
            _ => limiter.layout.index(raw),
        };
        let count = pick(count_pick.0, count_pick.1, limit, max);
        let state = limiter.layout.pack(index, &[count]);
        let cost = match cost_pick.0 % 8 {
            7 => u64::MAX - cost_pick.1 % 2,
            selector => pick(selector, cost_pick.1, limit, limit.saturating_add(1)),
        };
        let at = Timestamp::from_nanos(now);
        prop_assert_eq!(
            limiter.decide(state, at, cost),
            limiter.decide_in_general(&limiter.layout, state, at, cost),
            "w={} limit={} index={} (now's {}) count={} now={} cost={}",
            window, limit, index, now_index, count, now, cost
        );
        // The 128-bit layout of the same configuration: its shortcut decides as its general
        // path, and both as the 64-bit layout on the same window and count.
        let wide = limiter.with_wide_state();
        let wide_state = WIDE.pack(limiter.layout.index(state), &[limiter.layout.counter(state, 0)]);
        let decided = wide.decide_wide(wide_state, at, cost);
        prop_assert_eq!(decided, wide.decide_in_general(&WIDE, wide_state, at, cost));
        let narrow = limiter.decide(state, at, cost);
        prop_assert_eq!(decided.decision, narrow.decision);
        prop_assert_eq!(
            (WIDE.index(decided.state), WIDE.counter(decided.state, 0)),
            (limiter.layout.index(narrow.state), limiter.layout.counter(narrow.state, 0))
        );
    }

    /// The 128-bit layout on counts past the 64-bit one (limits near `MAX_LIMIT`, `u32::MAX`
    /// and above): the shortcut decides as the general path.
    #[test]
    fn the_wide_shortcut_decides_as_the_general_path(
        window in window(),
        limit_pick in (any::<u8>(), any::<u64>()),
        now in any::<u64>(),
        back in 0..4u64,
        count_pick in (any::<u8>(), any::<u64>()),
        cost_pick in (any::<u8>(), any::<u64>()),
    ) {
        let limit = pick(limit_pick.0, limit_pick.1, u64::from(u32::MAX), FixedWindow::MAX_LIMIT).max(1);
        let limiter = fixed(limit, window).with_wide_state();
        let index = (now / window).saturating_sub(back);
        let count = pick(count_pick.0, count_pick.1, limit, FixedWindow::MAX_LIMIT);
        let state = WIDE.pack(index, &[count]);
        let cost = pick(cost_pick.0, cost_pick.1, limit, limit.saturating_add(1));
        let at = Timestamp::from_nanos(now);
        prop_assert_eq!(
            limiter.decide_wide(state, at, cost),
            limiter.decide_in_general(&WIDE, state, at, cost),
            "w={} limit={} index={} count={} now={} cost={}", window, limit, index, count, now, cost
        );
    }
}

/// A limit past the 64-bit layout takes the 128-bit one, up to `MAX_LIMIT`; past it, a typed
/// error naming it.
#[test]
fn limits_past_the_word_take_the_wide_layout() {
    let millisecond = fixed(1, 1_000_000);
    assert_eq!(millisecond.max_narrow_limit(), 524_287);
    assert!(!fixed(524_287, 1_000_000).is_wide());
    assert!(fixed(524_288, 1_000_000).is_wide());
    assert!(fixed(FixedWindow::MAX_LIMIT, 1).is_wide());
    assert_eq!(FixedWindow::MAX_LIMIT, (1 << 63) - 1);
    assert!(matches!(
        FixedWindow::new(Quota::new(1 << 63, Duration::from_secs(1)).unwrap()),
        Err(crate::QuotaError::LimitTooLarge { max, .. }) if max == FixedWindow::MAX_LIMIT
    ));
}

/// The shortcut is taken while the window after `now`'s starts by `u64::MAX`.
#[test]
fn the_shortcut_ends_where_the_next_window_would_start_past_u64_max() {
    assert_eq!(fixed(1, SECOND).fast_end, u64::MAX / SECOND);
    assert_eq!(fixed(1, u64::MAX / 2).fast_end, 2);
    assert_eq!(fixed(1, u64::MAX).fast_end, 1);
}
