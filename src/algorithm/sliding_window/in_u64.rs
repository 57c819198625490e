//! The sliding window counter's decision in `u64`, for the inputs where nothing can overflow it.

use crate::algorithm::window::Word;
use crate::algorithm::Transition;
use crate::Decision;

use super::SlidingWindow;

/// What the 64-bit path decides on: the window holding `now` (below `fast_end`), its counts and
/// how far into it `now` is, and the request's weight (`1..=limit`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Counts<W> {
    /// The stored state.
    pub(super) state: W,
    /// The stored state moved to the window holding `now`: `state` itself when that is the
    /// stored window; otherwise that window's index, `previous` and a current count of 0. An
    /// admission stores it with the request's units; a refusal stores `state` (the caller moves
    /// a refusal in a later window: see `SlidingWindow::decide_packed`).
    pub(super) moved: W,
    /// Units admitted in the window before.
    pub(super) previous: u64,
    /// Units admitted in this window so far.
    pub(super) current: u64,
    /// Nanoseconds from this window's start to `now`, below `w`.
    pub(super) elapsed: u64,
    /// The request's weight.
    pub(super) cost: u64,
}

impl SlidingWindow {
    /// [`decide`](crate::algorithm::Algorithm::decide) for `1 <= cost <= limit` in a window below
    /// `fast_end`, in `u64`, with every instant measured from `now`: `limit * w` fits, so every
    /// budget below does, and `units` divides each exactly; `previous * (w - e)` is checked
    /// (past `u64::MAX` it exceeds every budget); the two windows after this one start at
    /// representable instants. The same transition as
    /// [`decide_in_general`](Self::decide_in_general), which is the definition.
    #[inline(always)]
    pub(super) fn decide_in_u64<W: Word>(&self, counts: Counts<W>) -> Transition<W> {
        let Counts {
            state,
            moved,
            previous,
            current,
            elapsed,
            cost,
        } = counts;
        let (limit, w) = (self.limit.get(), self.layout.window());
        // From `now` to the end of this window and of the next one: `elapsed < w`, and both
        // ends are representable instants, so `2 * w` fits.
        let until_next = w - elapsed;
        let until_reset = until_next + w;
        let weighed = previous.checked_mul(until_next);
        // Each at most `count_mask < 2^63`: the sum fits.
        let total = current + cost;
        if total <= limit {
            let budget = (limit - total) * w;
            if let Some(weighed) = weighed.filter(|&weighed| weighed <= budget) {
                return Transition {
                    // `current + cost <= limit <= count_mask`: no carry out of the counter.
                    state: moved + W::from(cost),
                    // `total >= 1`: it weighs until the window after this one ends. The
                    // remaining units are `(budget - weighed) / w`, divided when asked for.
                    decision: Decision::allowed_in_units(budget - weighed, w, until_reset, 0),
                };
            }
        }
        // Refused: `total > limit`, or `previous` weighs more than `budget` now. From the next
        // window on, `current` is the previous count: the first instant the request passes is
        // in that window, or at the start of the one after, where both counts have left the
        // sliding window.
        let from_next_window = match earliest_offset_in_u64(current, limit - cost, w) {
            Some(offset) => until_next + offset,
            None => until_reset,
        };
        if current >= limit {
            // `current` alone fills the limit (or exceeds it, after a step back in time), and
            // weighs until the window after this one ends: nothing passes now, nor later in
            // this window. No division.
            return Transition::refuse(state, Decision::denied(0, from_next_window, until_reset));
        }
        let free = limit - current;
        // What would pass now, times `w` (divided when asked for).
        let remaining = match weighed {
            Some(weighed) => (free * w).saturating_sub(weighed),
            None => 0,
        };
        // Later in this window, only if `current + cost` fits.
        let in_this_window = match cost <= free {
            true => earliest_offset_in_u64(previous, free - cost, w),
            false => None,
        };
        let retry_after = match in_this_window {
            Some(offset) => offset.saturating_sub(elapsed),
            None => from_next_window,
        };
        let reset_after = match (previous, current) {
            (_, 1..) => until_reset,
            (1.., 0) => until_next,
            (0, 0) => 0,
        };
        Transition::refuse(
            state,
            Decision::denied_in_units(remaining, w, retry_after, reset_after),
        )
    }
}

/// The general path's `earliest_offset` for a budget of `free * w` that fits a `u64`: the
/// smallest `e` in `[0, w)` with `weight * (w - e) <= free * w`, or `None` if none (the general
/// path's `w`). It divides only when the answer is strictly between 0 and `w`.
#[inline(always)]
fn earliest_offset_in_u64(weight: u64, free: u64, w: u64) -> Option<u64> {
    let budget = free * w;
    if weight <= free {
        // `weight * w <= budget`: from the window's start (also for a weight of 0).
        Some(0)
    } else if budget < weight {
        // `weight * (w - e) >= weight > budget` for every `e < w`.
        None
    } else {
        // `free < weight <= budget`, so `budget / weight` is in `[1, w)`, and `weight > 0`.
        Some(w - budget / weight)
    }
}
