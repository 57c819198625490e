//! Sliding window counter: the current window's count plus the previous window's count
//! weighted by how much of it the sliding window still overlaps, in exact integer arithmetic.

use std::num::NonZeroU64;
use std::time::Duration;

use super::divisor::BoundedDivisor;
use crate::error::QuotaError;
use crate::{Decision, Quota, Timestamp};

use super::window::{Packing, WideLayout, WindowLayout};
use super::{low_half, Admission, Algorithm, Transition};

mod general;
mod in_u64;
#[cfg(test)]
mod tests;

use in_u64::Counts;

const FIELDS: u32 = 2;
const CURRENT: u32 = 0;
const PREVIOUS: u32 = 1;

/// Packed state of the sliding window counter: `[window index | previous count | current
/// count]`, split as the window length dictates in 64 bits, or a 64-bit index and two 32-bit
/// counts in 128 bits for a limit that does not fit that ([`Algorithm::is_wide`]; see
/// `docs/design.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlidingWindowState(u128);

impl SlidingWindowState {
    /// Reads a raw 64-bit state word.
    pub const fn from_raw(raw: u64) -> Self {
        SlidingWindowState(raw as u128)
    }

    /// Reads a raw 128-bit state (a [wide](Algorithm::is_wide) configuration's).
    pub const fn from_raw_wide(raw: u128) -> Self {
        SlidingWindowState(raw)
    }

    /// The raw 64-bit state word (the low 64 bits of a wide state).
    pub const fn raw(self) -> u64 {
        self.0 as u64
    }

    /// The raw 128-bit state (a 64-bit one zero-extended).
    pub const fn raw_wide(self) -> u128 {
        self.0
    }

    /// The window the current count belongs to, in `limiter`'s layout.
    pub fn index(self, limiter: &SlidingWindow) -> u64 {
        match limiter.wide {
            true => WIDE.index(self.0),
            false => limiter.layout.index(self.raw()),
        }
    }

    /// Units admitted in the window before [`index`](Self::index).
    pub fn previous(self, limiter: &SlidingWindow) -> u64 {
        self.counter(limiter, PREVIOUS)
    }

    /// Units admitted in window [`index`](Self::index).
    pub fn current(self, limiter: &SlidingWindow) -> u64 {
        self.counter(limiter, CURRENT)
    }

    fn counter(self, limiter: &SlidingWindow, field: u32) -> u64 {
        match limiter.wide {
            true => WIDE.counter(self.0, field),
            false => limiter.layout.counter(self.raw(), field),
        }
    }
}

/// The 128-bit layout: a 64-bit index and two 32-bit counts.
const WIDE: WideLayout<FIELDS> = WideLayout;

/// Sliding window counter: a request of weight `n` at `elapsed` ns into the current window
/// passes iff
///
/// ```text
/// previous * (w - elapsed) + (current + n) * w <= limit * w
/// ```
///
/// that is, iff the estimate `current + previous * (w - elapsed) / w` plus `n` stays within
/// `limit`, decided without floats or rounding. It smooths the fixed window's boundary spike
/// at the cost of assuming the previous window's requests were spread evenly.
///
/// A worked example: limit 100, 80 requests in the previous window, 25% into
/// the current one with 30 so far: `30 + 80 * 0.75 = 90 < 100`, allowed.
///
/// Every limit up to `u32::MAX` works, for every window: one whose two counts fit beside the
/// window index in 64 bits ([`max_narrow_limit`](Self::max_narrow_limit): 511 per millisecond,
/// 16,383 per second, 131,071 per minute) keeps its state in one `u64`; a larger one (a
/// service-wide `50000/s` or `1000000/min`) in 128 bits ([`Algorithm::is_wide`]), chosen by
/// [`new`](Self::new) from the quota.
///
/// ```
/// use tollgate::{algorithm::Algorithm, SlidingWindow, SlidingWindowState, Timestamp};
///
/// let limiter = SlidingWindow::new("100/min".parse()?)?;
/// let state = limiter.state(1, 80, 30); // window 1 (00:01:00) holds 30, window 0 held 80
/// let decision = limiter.decide(state.raw(), Timestamp::from_secs(75), 1).decision;
/// assert!(decision.is_allowed());
/// assert_eq!(decision.remaining(), 9); // 100 - 90 - 1
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlidingWindow {
    /// Never 0 (a [`Quota`] counts at least 1), which the compiler then knows too.
    limit: NonZeroU64,
    /// The window, and the 64-bit packing (unused by a wide configuration).
    layout: WindowLayout,
    /// `limit * w`, the right-hand side of the decision's inequality.
    budget: u128,
    /// The first window index the 64-bit [`decide`](Algorithm::decide) hands to the general
    /// `u128` path (`0` when the quota always needs it, and for a wide configuration, whose
    /// 64-bit decisions all go there and on, through `decide_in_cells`, to the limiter's
    /// 128-bit cell): below it `limit * w` fits a `u64` and `units` is exact up to it, and the
    /// window two on starts at a representable instant.
    fast_end: u64,
    /// `fast_end` of the 128-bit decision.
    wide_fast_end: u64,
    /// The state is 128 bits ([`Algorithm::is_wide`]).
    wide: bool,
    /// Division by `w` in one multiplication, exact up to `limit * w` when `fast_end > 0`: it
    /// bounds where the 64-bit path is used. That path no longer divides (its `Decision` divides
    /// its room by `w` when asked, exactly for every `u64`), so the bound could widen to every
    /// `limit * w` that fits a `u64`; it is kept where the equivalence tests pinned it.
    units: BoundedDivisor,
}

impl SlidingWindow {
    /// The largest limit a sliding window takes, whatever its window: `u32::MAX`, the most a
    /// count of the 128-bit state holds. A limit above [`max_narrow_limit`](Self::max_narrow_limit)
    /// keeps its state in 128 bits.
    pub const MAX_LIMIT: u64 = WideLayout::<FIELDS>::COUNT_MASK;

    /// `quota.count()` units per sliding window of `quota.period()`: in one 64-bit word when
    /// both counts fit beside the window index ([`max_narrow_limit`](Self::max_narrow_limit)),
    /// else in 128 bits.
    ///
    /// # Errors
    /// [`QuotaError::BurstNotSupported`] when the quota has an explicit burst other than its
    /// count; [`QuotaError::LimitTooLarge`] for a limit above [`MAX_LIMIT`](Self::MAX_LIMIT).
    pub fn new(quota: Quota) -> Result<SlidingWindow, QuotaError> {
        if quota.explicit_burst().is_some_and(|burst| burst != quota.count()) {
            return Err(QuotaError::BurstNotSupported {
                algorithm: "sliding window counter",
            });
        }
        if quota.count() > SlidingWindow::MAX_LIMIT {
            return Err(QuotaError::LimitTooLarge {
                limit: quota.count(),
                max: SlidingWindow::MAX_LIMIT,
                window: quota.period(),
            });
        }
        let limit = NonZeroU64::new(quota.count()).ok_or(QuotaError::ZeroCount)?;
        let layout = WindowLayout::new(quota.period_nanos(), FIELDS);
        let w = quota.period_nanos();
        let budget = u128::from(limit.get()) * u128::from(w);
        let units = BoundedDivisor::new(w);
        // Window `index + 2` starts at a representable instant iff `index + 2 <= u64::MAX / w`.
        // `units` is exact up to at least 2^63 - 1 for `w > 1`, and for 0 alone for `w = 1`
        // (which only a wide state holds counts for): the general path decides that one.
        let fast_end = match u64::try_from(budget) {
            Ok(budget) if budget <= units.max() => (u64::MAX / w).saturating_sub(1),
            _ => 0,
        };
        let window = SlidingWindow {
            budget,
            limit,
            layout,
            fast_end,
            wide_fast_end: fast_end,
            wide: false,
            units,
        };
        Ok(match layout.holds(limit.get()) {
            true => window,
            false => window.with_wide_state(),
        })
    }

    /// The same window with its state in 128 bits whatever its limit: what [`new`](Self::new)
    /// chooses for a limit above [`max_narrow_limit`](Self::max_narrow_limit). For comparing
    /// the two layouts (tests, benchmarks); the decisions are the same.
    pub fn with_wide_state(self) -> SlidingWindow {
        SlidingWindow {
            fast_end: 0,
            wide: true,
            ..self
        }
    }

    /// The window length.
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.layout.window())
    }

    /// The limit per window.
    pub fn limit(&self) -> u64 {
        self.limit.get()
    }

    /// The largest limit this window takes: [`MAX_LIMIT`](Self::MAX_LIMIT), whatever the
    /// window.
    pub fn max_limit(&self) -> u64 {
        SlidingWindow::MAX_LIMIT
    }

    /// The largest limit whose two counts fit one 64-bit word beside this window's index: above
    /// it the state takes 128 bits ([`Algorithm::is_wide`]). 511 for a 1 ms window, 16,383 for
    /// a second, 131,071 for a minute, 1,048,575 for an hour (`docs/design.md`).
    pub fn max_narrow_limit(&self) -> u64 {
        self.layout.count_mask()
    }

    /// Builds a state in this configuration's layout: window `index` holds `current`, the
    /// window before it held `previous`. Counts above what the layout holds
    /// ([`max_narrow_limit`](Self::max_narrow_limit) in 64 bits, `u32::MAX` in 128) are clamped
    /// to it, and an index past the window holding the last representable instant to that
    /// window's.
    pub fn state(&self, index: u64, previous: u64, current: u64) -> SlidingWindowState {
        let index = index.min(self.layout.index_of(u64::MAX));
        match self.wide {
            true => {
                let max = WIDE.count_mask();
                SlidingWindowState(WIDE.pack(index, &[current.min(max), previous.min(max)]))
            }
            false => {
                let max = self.layout.count_mask();
                let packed = self.layout.pack(index, &[current.min(max), previous.min(max)]);
                SlidingWindowState::from_raw(packed)
            }
        }
    }

    /// Idle when neither count can weigh on a decision at `now` or later: both are zero, or the
    /// current count is zero and its window has ended, or both windows have ended.
    fn is_idle_in<P: Packing>(&self, packing: &P, state: P::Word, now: Timestamp) -> bool {
        let index = packing.index(state);
        let (previous, current) = (packing.counter(state, PREVIOUS), packing.counter(state, CURRENT));
        let now_index = self.layout.index_of(now.as_nanos());
        match now_index.checked_sub(index) {
            Some(2..) => true,
            Some(1) => current == 0,
            Some(0) | None => previous == 0 && current == 0,
        }
    }

    /// See [`Algorithm::undo`]: the admission's units come off the current count while the
    /// stored window is the one they were counted in, off the previous count once the window has
    /// moved on once, and then count no more. The counted window is the one two before the end
    /// of the admission's reset-after (later than its own time's window when the clock had
    /// stepped back).
    fn undo_in<P: Packing>(&self, packing: &P, state: P::Word, admission: &Admission) -> P::Word {
        let end = admission.end().as_nanos();
        // `end - 1` is in the window after the counted one; near the end of representable time
        // `end` saturates, and the admission's own window (never later than the counted one)
        // bounds it from below.
        let counted = self
            .layout
            .index_of(end.saturating_sub(1))
            .saturating_sub(1)
            .max(self.layout.index_of(admission.at().as_nanos()));
        let stored = packing.index(state);
        let (mut previous, mut current) = (packing.counter(state, PREVIOUS), packing.counter(state, CURRENT));
        match stored.checked_sub(counted) {
            _ if admission.cost() == 0 => return state,
            Some(0) => current = current.saturating_sub(admission.cost()),
            Some(1) => previous = previous.saturating_sub(admission.cost()),
            _ => return state,
        }
        packing.pack(stored, &[current, previous])
    }

    /// The decision in either layout for a weight in `1..=limit` in the stored window or a
    /// later one below `fast_end`, in `u64` ([`decide_in_u64`](Self::decide_in_u64)); `None` for
    /// everything else, which the caller decides by the definition
    /// ([`decide_in_general`](Self::decide_in_general)), out of line. (`None` rather than a
    /// closure for that path: a closure passed in here kept `state`, `now` and `cost` in memory on
    /// every decision, counted with callgrind.)
    // Always inlined: returning the transition through memory costs more than computing it.
    #[inline(always)]
    fn decide_packed<P: Packing>(
        &self,
        packing: &P,
        fast_end: u64,
        state: P::Word,
        now: Timestamp,
        cost: u64,
    ) -> Option<Transition<P::Word>> {
        // A weight of 0 or above the limit takes the general path (`cost - 1` wraps for 0).
        if cost.wrapping_sub(1) >= self.limit.get() {
            return None;
        }
        let (now_nanos, w) = (now.as_nanos(), self.layout.window());
        let stored_index = packing.index(state);
        // Still in the stored window: known without a division. Below `fast_end`, the stored
        // window's start does not overflow, so `elapsed < w` means `now` is in it.
        let elapsed = now_nanos.wrapping_sub(stored_index.wrapping_mul(w));
        if elapsed < w && stored_index < fast_end {
            return Some(self.decide_in_u64(Counts {
                state,
                moved: state,
                previous: packing.counter(state, PREVIOUS),
                current: packing.counter(state, CURRENT),
                elapsed,
                cost,
            }));
        }
        // A later window, or the general path: a step back into an earlier window, or a window
        // at or past `fast_end`.
        let index = self.layout.index_of(now_nanos);
        let (previous, current) = match index.checked_sub(stored_index) {
            _ if index >= fast_end => return None,
            Some(1) => (packing.counter(state, CURRENT), 0),
            Some(2..) => (0, 0),
            Some(0) | None => return None,
        };
        let moved = packing.pack(index, &[0, previous]);
        let transition = self.decide_in_u64(Counts {
            state,
            moved,
            previous,
            current,
            // `index * w <= now`, without overflow.
            elapsed: now_nanos - index * w,
            cost,
        });
        // A refusal in a later window than the stored one stores the state moved to it (the
        // same counts): a request stamped earlier is then decided in this window, as at the
        // latest time a decision was made (`docs/design.md`, "Time that goes backwards"). Once
        // per window: the next refusal finds it stored. Here, apart from the stored window's
        // path, so that the common decisions run the instructions they ran before (a refusal
        // storing the moved state on both paths cost the allowed path 3 instructions and the
        // refused one 5, callgrind).
        Some(match transition.decision.is_allowed() {
            true => transition,
            false => Transition::refuse(moved, transition.decision),
        })
    }
}

impl Algorithm for SlidingWindow {
    #[cfg(feature = "tower")]
    fn announced(&self) -> Option<crate::policy::Policy> {
        Some(crate::policy::AnnouncedPolicy::policy(self))
    }

    fn capacity(&self) -> u64 {
        self.limit.get()
    }

    /// Idle when neither count can weigh on a decision at `now` or later: both are zero, or the
    /// current count is zero and its window has ended, or both windows have ended.
    fn is_idle(&self, state: u64, now: Timestamp) -> bool {
        match self.wide {
            true => self.is_idle_wide(u128::from(state), now),
            false => self.is_idle_in(&self.layout, state, now),
        }
    }

    // Always inlined: returning the transition through memory costs more than computing it.
    #[inline(always)]
    fn decide(&self, state: u64, now: Timestamp, cost: u64) -> Transition {
        match self.decide_packed(&self.layout, self.fast_end, state, now, cost) {
            Some(transition) => transition,
            None => Transition::from_out_of_line(self.decide_out_of_line(state, now, cost)),
        }
    }

    #[inline(always)]
    fn decide_in_cells(
        &self,
        state: u64,
        now: Timestamp,
        cost: u64,
        wide: impl FnOnce(Timestamp, u64) -> Decision,
    ) -> Transition {
        match self.decide_packed(&self.layout, self.fast_end, state, now, cost) {
            Some(transition) => transition,
            None => Transition::from_out_of_line(self.decide_out_of_line_or(state, now, cost, wide)),
        }
    }

    fn undo(&self, state: u64, admission: &Admission) -> u64 {
        match self.wide {
            true => low_half(self.undo_wide(u128::from(state), admission)),
            false => self.undo_in(&self.layout, state, admission),
        }
    }

    fn is_wide(&self) -> bool {
        self.wide
    }

    #[inline(always)]
    fn decide_wide(&self, state: u128, now: Timestamp, cost: u64) -> Transition<u128> {
        if !self.wide {
            return Transition::widened(self.decide(low_half(state), now, cost));
        }
        match self.decide_packed(&WIDE, self.wide_fast_end, state, now, cost) {
            Some(transition) => transition,
            None => Transition::from_out_of_line(self.decide_wide_out_of_line(state, now, cost)),
        }
    }

    fn is_idle_wide(&self, state: u128, now: Timestamp) -> bool {
        match self.wide {
            true => self.is_idle_in(&WIDE, state, now),
            false => self.is_idle(low_half(state), now),
        }
    }

    fn undo_wide(&self, state: u128, admission: &Admission) -> u128 {
        match self.wide {
            true => self.undo_in(&WIDE, state, admission),
            false => u128::from(self.undo(low_half(state), admission)),
        }
    }
}
