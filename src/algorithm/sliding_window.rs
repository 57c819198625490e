//! Sliding window counter: the current window's count plus the previous window's count
//! weighted by how much of it the sliding window still overlaps, in exact integer arithmetic.

use std::time::Duration;

use crate::error::QuotaError;
use crate::{Decision, Quota, Timestamp};

use super::window::{nanos_until, WindowLayout};
use super::{Algorithm, Transition};

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
        limiter.layout.index(self.0, FIELDS)
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
    limit: u64,
    layout: WindowLayout,
    /// `limit * w`, the right-hand side of the decision's inequality.
    budget: u128,
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
        let layout = WindowLayout::new(quota.period_nanos(), quota.count(), FIELDS)?;
        Ok(SlidingWindow {
            budget: u128::from(quota.count()) * u128::from(quota.period_nanos()),
            limit: quota.count(),
            layout,
        })
    }

    /// The window length.
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.layout.window())
    }

    /// The limit per window.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The largest limit that fits with this window.
    pub fn max_limit(&self) -> u64 {
        self.layout.count_mask()
    }

    /// Builds a state: window `index` holds `current`, the window before it held `previous`.
    /// Counts above [`max_limit`](Self::max_limit) are clamped to it.
    pub fn state(&self, index: u64, previous: u64, current: u64) -> SlidingWindowState {
        let max = self.layout.count_mask();
        SlidingWindowState(self.layout.pack(index, &[current.min(max), previous.min(max)]))
    }

    /// How many whole units `scaled` (units times the window length) holds.
    #[inline]
    fn units_in(&self, scaled: u128) -> u64 {
        match u64::try_from(scaled) {
            Ok(small) => self.layout.windows_in(small),
            // Below limit * w, so the quotient is below the limit and fits.
            Err(_) => (scaled / u128::from(self.layout.window())) as u64,
        }
    }

    /// The earliest time at or after `now` at which `cost` more units pass, starting from
    /// window `index` with counts `previous` and `current`, if nothing else is admitted; `None`
    /// if that is never (past the end of representable time).
    fn first_pass(&self, index: u64, previous: u64, current: u64, cost: u64) -> Option<u64> {
        let w = u128::from(self.layout.window());
        let at = |index: u64, offset: u128| self.layout.start_of(index)?.checked_add(offset as u64);
        // Within window `index`: previous * (w - e) <= (limit - current - cost) * w.
        if let Some(free) = self.limit.checked_sub(current).and_then(|f| f.checked_sub(cost)) {
            let offset = earliest_offset(u128::from(previous), u128::from(free) * w, w);
            if offset < w {
                return at(index, offset);
            }
        }
        // Within window `index + 1`, where `current` has become the previous count.
        let free = self.limit.checked_sub(cost)?;
        let offset = earliest_offset(u128::from(current), u128::from(free) * w, w);
        if offset < w {
            return at(index.checked_add(1)?, offset);
        }
        // Two windows on, both counts have left the sliding window.
        self.layout.start_of(index.checked_add(2)?)
    }
}

/// The smallest `e` in `[0, w]` with `weight * (w - e) <= budget`, or `w` if none below it.
fn earliest_offset(weight: u128, budget: u128, w: u128) -> u128 {
    match weight {
        0 => 0,
        // Usually both fit 64 bits, where division is several times cheaper than in 128.
        _ => match (u64::try_from(budget), u64::try_from(weight)) {
            (Ok(budget), Ok(weight)) => w - u128::from(budget / weight).min(w),
            _ => w - (budget / weight).min(w),
        },
    }
}

impl Algorithm for SlidingWindow {
    fn capacity(&self) -> u64 {
        self.limit
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
        let now = now.as_nanos();
        let stored = SlidingWindowState(state);
        let stored_index = stored.index(self);
        let now_index = self.layout.index_of(now);
        let (index, previous, current) = match now_index.checked_sub(stored_index) {
            Some(0) => (stored_index, stored.previous(self), stored.current(self)),
            Some(1) => (now_index, stored.current(self), 0),
            Some(_) => (now_index, 0, 0),
            // The clock went back into an earlier window: stay in the stored window, at its
            // start, where the previous window weighs the most. No time has passed.
            None => (stored_index, stored.previous(self), stored.current(self)),
        };
        // The current window's start is at most `now` (or, after a step back, the stored one's).
        let window_start = self.layout.start_of(index).unwrap_or(u64::MAX);
        let elapsed = now.saturating_sub(window_start);
        let w = u128::from(self.layout.window());
        let budget = self.budget;
        let used = u128::from(previous) * (w - u128::from(elapsed)) + u128::from(current) * w;
        let until = |at: Option<u64>| nanos_until(at, now);
        let reset_at = |current: u64| match (previous, current) {
            (_, 1..) => self.layout.start_of(index.checked_add(2)?),
            (1.., 0) => self.layout.start_of(index.checked_add(1)?),
            (0, 0) => Some(now),
        };
        let after = used.saturating_add(u128::from(cost) * w);
        // A weightless request is always allowed and stores nothing, even when the clock stepped
        // back to where the previous window weighs more than the limit.
        if after <= budget || cost == 0 {
            let total = current + cost;
            Transition {
                state: if cost == 0 {
                    state
                } else {
                    self.layout.pack(index, &[total, previous])
                },
                decision: Decision::allowed(
                    self.units_in(budget.saturating_sub(after)),
                    until(reset_at(total)),
                    0,
                ),
            }
        } else {
            Transition::refuse(
                state,
                Decision::denied(
                    self.units_in(budget.saturating_sub(used)),
                    until(self.first_pass(index, previous, current, cost)),
                    until(reset_at(current)),
                ),
            )
        }
    }
}
