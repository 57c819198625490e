//! Fixed window counter: `limit` per window, windows aligned to multiples of `w` since the
//! UNIX epoch.

use std::num::NonZeroU64;
use std::time::Duration;

use crate::error::QuotaError;
use crate::{Decision, Quota, Timestamp};

use super::window::{nanos_until, WindowLayout};
use super::{Algorithm, OutOfLine, Transition};

const FIELDS: u32 = 1;

#[cfg(test)]
mod tests;

/// Packed state of the fixed window counter: `[window index | count]`, split as the window
/// length dictates (the index field is as wide as the largest window index a `u64` timestamp can
/// produce; the count takes the rest, see [`FixedWindow::max_limit`] and `docs/design.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedWindowState(u64);

impl FixedWindowState {
    /// Reads a raw state word.
    pub const fn from_raw(raw: u64) -> Self {
        FixedWindowState(raw)
    }

    /// The raw state word.
    pub const fn raw(self) -> u64 {
        self.0
    }

    /// The window the count belongs to (`now / w` when it was last written).
    pub fn index(self, limiter: &FixedWindow) -> u64 {
        limiter.layout.index(self.0)
    }

    /// Units admitted in that window.
    pub fn count(self, limiter: &FixedWindow) -> u64 {
        limiter.layout.counter(self.0, 0)
    }
}

/// Fixed window counter: at most `limit` units per window of length `w`; windows start at
/// multiples of `w` since the UNIX epoch (a one-minute window starts at :00).
///
/// Cheap and exact within a window, but it admits up to `2 * limit` across a boundary (the
/// end of one window and the start of the next). Refused requests are not counted.
///
/// ```
/// use tollgate::{DirectLimiter, FixedWindow, ManualClock, Timestamp};
///
/// let clock = ManualClock::starting_at(Timestamp::from_secs(59));
/// let limiter = DirectLimiter::with_clock(FixedWindow::new("100/min".parse()?)?, clock.clone());
/// assert_eq!((0..150).filter(|_| limiter.check().is_allowed()).count(), 100);
/// clock.set(Timestamp::from_secs(61)); // a new minute: the boundary spike
/// assert_eq!((0..150).filter(|_| limiter.check().is_allowed()).count(), 100);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedWindow {
    /// Never 0 (a [`Quota`] counts at least 1), which the compiler then knows too.
    limit: NonZeroU64,
    layout: WindowLayout,
    /// The first window index [`decide`](Algorithm::decide) hands to the general path: below
    /// it, the window after `index` starts at a representable instant (`u64::MAX / w`).
    fast_end: u64,
}

impl FixedWindow {
    /// `quota.count()` units per window of `quota.period()`.
    ///
    /// # Errors
    /// [`QuotaError::BurstNotSupported`] when the quota has an explicit burst other than its
    /// count; [`QuotaError::LimitTooLarge`] when the limit does not fit the packed state.
    pub fn new(quota: Quota) -> Result<FixedWindow, QuotaError> {
        if quota.explicit_burst().is_some_and(|burst| burst != quota.count()) {
            return Err(QuotaError::BurstNotSupported {
                algorithm: "fixed window counter",
            });
        }
        let limit = NonZeroU64::new(quota.count()).ok_or(QuotaError::ZeroCount)?;
        let layout = WindowLayout::new(quota.period_nanos(), limit.get(), FIELDS)?;
        Ok(FixedWindow {
            limit,
            layout,
            fast_end: u64::MAX / quota.period_nanos(),
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
}

impl Algorithm for FixedWindow {
    fn capacity(&self) -> u64 {
        self.limit.get()
    }

    /// Idle when nothing is counted, or the count belongs to a window that has ended.
    fn is_idle(&self, state: u64, now: Timestamp) -> bool {
        let stored = FixedWindowState(state);
        stored.count(self) == 0 || stored.index(self) < self.layout.index_of(now.as_nanos())
    }

    /// Reclaimable when nothing is counted, or the count's window ended a whole window ago (its
    /// index two or more behind `now`'s), not as soon as it ends: every key used in a window is
    /// idle at the next boundary, and one forgotten there and asked for with a reading taken
    /// just before it would be decided fresh in the window it had used up, a whole limit more.
    /// So a reading less than a window older than the reclaim never finds a key forgotten
    /// while its count still weighs.
    fn is_reclaimable(&self, state: u64, now: Timestamp) -> bool {
        let stored = FixedWindowState(state);
        stored.count(self) == 0 || stored.index(self).saturating_add(1) < self.layout.index_of(now.as_nanos())
    }

    /// Until the start of the window two on from the count's (zero when nothing is counted).
    fn reclaimable_in(&self, state: u64, now: Timestamp) -> Duration {
        let stored = FixedWindowState(state);
        if stored.count(self) == 0 {
            return Duration::ZERO;
        }
        let at = stored
            .index(self)
            .checked_add(2)
            .and_then(|index| self.layout.start_of(index));
        Duration::from_nanos(nanos_until(at, now.as_nanos()))
    }

    // Always inlined: returning the transition through memory costs more than computing it.
    #[inline(always)]
    fn decide(&self, state: u64, now: Timestamp, cost: u64) -> Transition {
        let limit = self.limit.get();
        let general = || Transition::from_out_of_line(self.decide_out_of_line(state, now, cost));
        // A weight of 0 or above the limit takes the general path (`cost - 1` wraps for 0).
        if cost.wrapping_sub(1) >= limit {
            return general();
        }
        let (now_nanos, w) = (now.as_nanos(), self.layout.window());
        let stored = FixedWindowState(state);
        let stored_index = stored.index(self);
        // Still in the stored window: known without a division. Below `fast_end`, the stored
        // window's start does not overflow, so `elapsed < w` means `now` is in it.
        let elapsed = now_nanos.wrapping_sub(stored_index.wrapping_mul(w));
        let (moved, count, elapsed) = if elapsed < w && stored_index < self.fast_end {
            (state, stored.count(self), elapsed)
        } else {
            // A later window starts empty. A step back into an earlier window, or a window at
            // or past `fast_end`, takes the general path.
            let index = self.layout.index_of(now_nanos);
            if index <= stored_index || index >= self.fast_end {
                return general();
            }
            // `index * w <= now`, without overflow.
            (self.layout.pack(index, &[0]), 0, now_nanos - index * w)
        };
        // The window ends at a representable instant, `w - elapsed` from `now`.
        let until_window_end = w - elapsed;
        // Each at most `count_mask < 2^63`: the sum fits.
        let total = count + cost;
        if total <= limit {
            Transition {
                // `total <= limit <= count_mask`: no carry out of the counter.
                state: moved + cost,
                decision: Decision::allowed(limit - total, until_window_end, 0),
            }
        } else {
            // `cost <= limit`, so it passes in the next window; and `count > 0`, so the window
            // holds something until it ends.
            Transition::refuse(
                state,
                Decision::denied(limit.saturating_sub(count), until_window_end, until_window_end),
            )
        }
    }
}

impl FixedWindow {
    /// [`decide_in_general`](Self::decide_in_general) out of line, for `decide`'s fast path to
    /// call (see [`OutOfLine`]).
    #[cold]
    #[inline(never)]
    fn decide_out_of_line(&self, state: u64, now: Timestamp, cost: u64) -> OutOfLine {
        let Transition { state, decision } = self.decide_in_general(state, now, cost);
        (state, decision)
    }

    /// [`decide`](Algorithm::decide) for every input: the definition that `decide` shortcuts
    /// for a weight in `1..=limit` in a window at or after the stored one and below `fast_end`.
    fn decide_in_general(&self, state: u64, now: Timestamp, cost: u64) -> Transition {
        let limit = self.limit.get();
        let now = now.as_nanos();
        let stored = FixedWindowState(state);
        let now_index = self.layout.index_of(now);
        let stored_index = stored.index(self);
        // A new window starts empty. If the clock went back into an earlier window, keep
        // deciding in the stored one: no time has passed.
        let (index, count) = if now_index > stored_index {
            (now_index, 0)
        } else {
            (stored_index, stored.count(self))
        };
        let until_window_end = nanos_until(self.layout.start_of(index.saturating_add(1)), now);
        match count.checked_add(cost) {
            Some(total) if total <= limit => Transition {
                // A weightless request stores nothing (not even a new window's index).
                state: if cost == 0 {
                    state
                } else {
                    self.layout.pack(index, &[total])
                },
                decision: Decision::allowed(limit - total, if total > 0 { until_window_end } else { 0 }, 0),
            },
            _ => Transition::refuse(
                state,
                Decision::denied(
                    limit.saturating_sub(count),
                    if cost <= limit { until_window_end } else { u64::MAX },
                    if count > 0 { until_window_end } else { 0 },
                ),
            ),
        }
    }
}
