//! Sliding window counter: the current window's count plus the previous window's count
//! weighted by how much of it the sliding window still overlaps, in exact integer arithmetic.

use std::num::NonZeroU64;
use std::time::Duration;

use super::divisor::BoundedDivisor;
use crate::error::QuotaError;
use crate::{Quota, Timestamp};

use super::window::WindowLayout;
use super::{Algorithm, Transition};

mod general;
mod in_u64;
#[cfg(test)]
mod tests;

use in_u64::Counts;

const FIELDS: u32 = 2;
const CURRENT: u32 = 0;
const PREVIOUS: u32 = 1;

/// Packed state of the sliding window counter: `[window index | previous count | current
/// count]`, split as the window length dictates (see `docs/design.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlidingWindowState(u64);

impl SlidingWindowState {
    /// Reads a raw state word.
    pub const fn from_raw(raw: u64) -> Self {
        SlidingWindowState(raw)
    }

    /// The raw state word.
    pub const fn raw(self) -> u64 {
        self.0
    }

    /// The window the current count belongs to.
    pub fn index(self, limiter: &SlidingWindow) -> u64 {
        limiter.layout.index(self.0)
    }

    /// Units admitted in the window before [`index`](Self::index).
    pub fn previous(self, limiter: &SlidingWindow) -> u64 {
        limiter.layout.counter(self.0, PREVIOUS)
    }

    /// Units admitted in window [`index`](Self::index).
    pub fn current(self, limiter: &SlidingWindow) -> u64 {
        limiter.layout.counter(self.0, CURRENT)
    }
}

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
/// The seed article's worked example: limit 100, 80 requests in the previous window, 25% into
/// the current one with 30 so far: `30 + 80 * 0.75 = 90 < 100`, allowed.
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
    layout: WindowLayout,
    /// `limit * w`, the right-hand side of the decision's inequality.
    budget: u128,
    /// The first window index [`decide`](Algorithm::decide) hands to the general `u128` path
    /// (`0` when the quota always needs it): below it `limit * w` fits a `u64` and `units` is
    /// exact up to it, and the window two on starts at a representable instant.
    fast_end: u64,
    /// Division by `w` in one multiplication, exact up to `limit * w` when `fast_end > 0`: it
    /// bounds where the 64-bit path is used. That path no longer divides (its `Decision` divides
    /// its room by `w` when asked, exactly for every `u64`), so the bound could widen to every
    /// `limit * w` that fits a `u64`; it is kept where the equivalence tests pinned it.
    units: BoundedDivisor,
}

impl SlidingWindow {
    /// `quota.count()` units per sliding window of `quota.period()`.
    ///
    /// # Errors
    /// [`QuotaError::BurstNotSupported`] when the quota has an explicit burst other than its
    /// count; [`QuotaError::LimitTooLarge`] when the limit does not fit the packed state (two
    /// counters share the bits the window index leaves).
    pub fn new(quota: Quota) -> Result<SlidingWindow, QuotaError> {
        if quota.explicit_burst().is_some_and(|burst| burst != quota.count()) {
            return Err(QuotaError::BurstNotSupported {
                algorithm: "sliding window counter",
            });
        }
        let limit = NonZeroU64::new(quota.count()).ok_or(QuotaError::ZeroCount)?;
        let layout = WindowLayout::new(quota.period_nanos(), limit.get(), FIELDS)?;
        let w = quota.period_nanos();
        let budget = u128::from(limit.get()) * u128::from(w);
        let units = BoundedDivisor::new(w);
        // Window `index + 2` starts at a representable instant iff `index + 2 <= u64::MAX / w`.
        // `units` is exact up to at least 2^63 - 1 (`w > 1`: a window of 1 ns holds no count).
        let fast_end = match u64::try_from(budget) {
            Ok(budget) if budget <= units.max() => (u64::MAX / w).saturating_sub(1),
            _ => 0,
        };
        Ok(SlidingWindow {
            budget,
            limit,
            layout,
            fast_end,
            units,
        })
    }

    /// The window length.
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.layout.window())
    }

    /// The limit per window.
    pub fn limit(&self) -> u64 {
        self.limit.get()
    }

    /// The largest limit that fits with this window.
    pub fn max_limit(&self) -> u64 {
        self.layout.count_mask()
    }

    /// Builds a state: window `index` holds `current`, the window before it held `previous`.
    /// Counts above [`max_limit`](Self::max_limit) are clamped to it, and an index past the
    /// window holding the last representable instant to that window's.
    pub fn state(&self, index: u64, previous: u64, current: u64) -> SlidingWindowState {
        let max = self.layout.count_mask();
        let index = index.min(self.layout.index_of(u64::MAX));
        SlidingWindowState(self.layout.pack(index, &[current.min(max), previous.min(max)]))
    }
}

impl Algorithm for SlidingWindow {
    fn capacity(&self) -> u64 {
        self.limit.get()
    }

    /// Idle when neither count can weigh on a decision at `now` or later: both are zero, or the
    /// current count is zero and its window has ended, or both windows have ended.
    fn is_idle(&self, state: u64, now: Timestamp) -> bool {
        let stored = SlidingWindowState(state);
        let (index, previous, current) = (stored.index(self), stored.previous(self), stored.current(self));
        let now_index = self.layout.index_of(now.as_nanos());
        match now_index.checked_sub(index) {
            Some(2..) => true,
            Some(1) => current == 0,
            Some(0) | None => previous == 0 && current == 0,
        }
    }

    // Always inlined: returning the transition through memory costs more than computing it.
    #[inline(always)]
    fn decide(&self, state: u64, now: Timestamp, cost: u64) -> Transition {
        let general = || Transition::from_out_of_line(self.decide_out_of_line(state, now, cost));
        // A weight of 0 or above the limit takes the general path (`cost - 1` wraps for 0).
        if cost.wrapping_sub(1) >= self.limit.get() {
            return general();
        }
        let (now_nanos, w) = (now.as_nanos(), self.layout.window());
        let stored = SlidingWindowState(state);
        let stored_index = stored.index(self);
        // Still in the stored window: known without a division. Below `fast_end`, the stored
        // window's start does not overflow, so `elapsed < w` means `now` is in it.
        let elapsed = now_nanos.wrapping_sub(stored_index.wrapping_mul(w));
        let counts = if elapsed < w && stored_index < self.fast_end {
            Counts {
                moved: state,
                previous: stored.previous(self),
                current: stored.current(self),
                elapsed,
                cost,
            }
        } else {
            // A later window, or the general path: a step back into an earlier window, or a
            // window at or past `fast_end`.
            let index = self.layout.index_of(now_nanos);
            let (previous, current) = match index.checked_sub(stored_index) {
                _ if index >= self.fast_end => return general(),
                Some(1) => (stored.current(self), 0),
                Some(2..) => (0, 0),
                Some(0) | None => return general(),
            };
            Counts {
                moved: self.layout.pack(index, &[0, previous]),
                previous,
                current,
                // `index * w <= now`, without overflow.
                elapsed: now_nanos - index * w,
                cost,
            }
        };
        self.decide_in_u64(counts)
    }
}
