//! Fixed window counter: `limit` per window, windows aligned to multiples of `w` since the
//! UNIX epoch.

use std::num::NonZeroU64;
use std::time::Duration;

use crate::error::QuotaError;
use crate::{Decision, Quota, Timestamp};

use super::window::{nanos_until, Packing, WideLayout, WindowLayout};
use super::{low_half, Admission, Algorithm, OutOfLine, Transition};

const FIELDS: u32 = 1;

#[cfg(test)]
mod tests;

/// Packed state of the fixed window counter: `[window index | count]`, split as the window
/// length dictates in 64 bits (the index field is as wide as the largest window index a `u64`
/// timestamp can produce; the count takes the rest, see [`FixedWindow::max_narrow_limit`] and
/// `docs/design.md`), or a 64-bit index and a 64-bit count in 128 bits for a limit that does not
/// fit that ([`Algorithm::is_wide`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedWindowState(u128);

impl FixedWindowState {
    /// Reads a raw 64-bit state word.
    pub const fn from_raw(raw: u64) -> Self {
        FixedWindowState(raw as u128)
    }

    /// Reads a raw 128-bit state (a [wide](Algorithm::is_wide) configuration's).
    pub const fn from_raw_wide(raw: u128) -> Self {
        FixedWindowState(raw)
    }

    /// The raw 64-bit state word (the low 64 bits of a wide state).
    pub const fn raw(self) -> u64 {
        self.0 as u64
    }

    /// The raw 128-bit state (a 64-bit one zero-extended).
    pub const fn raw_wide(self) -> u128 {
        self.0
    }

    /// The window the count belongs to (`now / w` when it was last written), in `limiter`'s
    /// layout.
    pub fn index(self, limiter: &FixedWindow) -> u64 {
        match limiter.wide {
            true => WIDE.index(self.0),
            false => limiter.layout.index(self.raw()),
        }
    }

    /// Units admitted in that window, in `limiter`'s layout.
    pub fn count(self, limiter: &FixedWindow) -> u64 {
        match limiter.wide {
            true => WIDE.counter(self.0, 0),
            false => limiter.layout.counter(self.raw(), 0),
        }
    }
}

/// The 128-bit layout: a 64-bit index and a 64-bit count.
const WIDE: WideLayout<FIELDS> = WideLayout;

/// Fixed window counter: at most `limit` units per window of length `w`; windows start at
/// multiples of `w` since the UNIX epoch (a one-minute window starts at :00).
///
/// Cheap and exact within a window, but it admits up to `2 * limit` across a boundary (the
/// end of one window and the start of the next). Refused requests are not counted.
///
/// Every limit up to `2^63 - 1` works, for every window: one that fits beside the window
/// index in 64 bits ([`max_narrow_limit`](Self::max_narrow_limit): 524,287 per millisecond,
/// 536,870,911 per second) keeps its state in one `u64`; a larger one in 128 bits
/// ([`Algorithm::is_wide`]), chosen by [`new`](Self::new) from the quota.
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
    /// The window, and the 64-bit packing (unused by a wide configuration).
    layout: WindowLayout,
    /// The first window index the 64-bit [`decide`](Algorithm::decide) hands to the general
    /// path: below it, the window after `index` starts at a representable instant
    /// (`u64::MAX / w`). 0 for a wide configuration, whose 64-bit decisions all go there (and
    /// on, through `decide_in_cells`, to the limiter's 128-bit cell).
    fast_end: u64,
    /// The state is 128 bits ([`Algorithm::is_wide`]).
    wide: bool,
    /// `fast_end` of the 128-bit decision.
    wide_fast_end: u64,
}

impl FixedWindow {
    /// `quota.count()` units per window of `quota.period()`: in one 64-bit word when the limit
    /// fits beside the window index ([`max_narrow_limit`](Self::max_narrow_limit)), else in
    /// 128 bits.
    ///
    /// # Errors
    /// [`QuotaError::BurstNotSupported`] when the quota has an explicit burst other than its
    /// count; [`QuotaError::LimitTooLarge`] for a limit above [`MAX_LIMIT`](Self::MAX_LIMIT).
    pub fn new(quota: Quota) -> Result<FixedWindow, QuotaError> {
        if quota.explicit_burst().is_some_and(|burst| burst != quota.count()) {
            return Err(QuotaError::BurstNotSupported {
                algorithm: "fixed window counter",
            });
        }
        if quota.count() > FixedWindow::MAX_LIMIT {
            return Err(QuotaError::LimitTooLarge {
                limit: quota.count(),
                max: FixedWindow::MAX_LIMIT,
                window: quota.period(),
            });
        }
        let limit = NonZeroU64::new(quota.count()).ok_or(QuotaError::ZeroCount)?;
        let layout = WindowLayout::new(quota.period_nanos(), FIELDS);
        let window = FixedWindow {
            limit,
            layout,
            fast_end: u64::MAX / quota.period_nanos(),
            wide: false,
            wide_fast_end: u64::MAX / quota.period_nanos(),
        };
        Ok(match layout.holds(limit.get()) {
            true => window,
            false => window.with_wide_state(),
        })
    }

    /// The same window with its state in 128 bits whatever its limit: what [`new`](Self::new)
    /// chooses for a limit above [`max_narrow_limit`](Self::max_narrow_limit). For comparing
    /// the two layouts (tests, benchmarks); the decisions are the same.
    pub fn with_wide_state(self) -> FixedWindow {
        FixedWindow {
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

    /// The largest limit a fixed window takes, whatever its window: `2^63 - 1`. A limit above
    /// [`max_narrow_limit`](Self::max_narrow_limit) keeps its state in 128 bits, a 64-bit
    /// window index and a 63-bit count (so that a count plus a weight never overflows).
    pub const MAX_LIMIT: u64 = WideLayout::<FIELDS>::COUNT_MASK;

    /// The largest limit this window takes: [`MAX_LIMIT`](Self::MAX_LIMIT), whatever the
    /// window.
    pub fn max_limit(&self) -> u64 {
        FixedWindow::MAX_LIMIT
    }

    /// The largest limit whose state fits one 64-bit word beside this window's index: above
    /// it the state takes 128 bits ([`Algorithm::is_wide`]). 524,287 for a 1 ms window,
    /// 536,870,911 for a second, 34,359,738,367 for a minute (`docs/design.md`).
    pub fn max_narrow_limit(&self) -> u64 {
        self.layout.count_mask()
    }

    /// Idle when nothing is counted, or the count belongs to a window that has ended.
    #[inline]
    fn is_idle_in<P: Packing>(&self, packing: &P, state: P::Word, now: Timestamp) -> bool {
        packing.counter(state, 0) == 0 || packing.index(state) < self.layout.index_of(now.as_nanos())
    }

    /// See [`Algorithm::is_reclaimable`].
    fn is_reclaimable_in<P: Packing>(&self, packing: &P, state: P::Word, now: Timestamp) -> bool {
        packing.counter(state, 0) == 0
            || packing.index(state).saturating_add(1) < self.layout.index_of(now.as_nanos())
    }

    /// See [`Algorithm::undo`]: the admission's units come off the count while the stored
    /// window is the one they were counted in, the window before the end of its decision's
    /// reset-after (later than its own time's window when the clock had stepped back).
    fn undo_in<P: Packing>(&self, packing: &P, state: P::Word, admission: &Admission) -> P::Word {
        let end = admission.end().as_nanos();
        // `end` is that window's end; near the end of representable time it saturates, and the
        // admission's own window (never later than the counted one) bounds it from below.
        let counted = self
            .layout
            .index_of(end.saturating_sub(1))
            .max(self.layout.index_of(admission.at().as_nanos()));
        if admission.cost() == 0 || packing.index(state) != counted {
            return state;
        }
        let count = packing.counter(state, 0).saturating_sub(admission.cost());
        packing.pack(counted, &[count])
    }

    /// See [`Algorithm::reclaimable_in`].
    fn reclaimable_in_in<P: Packing>(&self, packing: &P, state: P::Word, now: Timestamp) -> Duration {
        if packing.counter(state, 0) == 0 {
            return Duration::ZERO;
        }
        let at = packing
            .index(state)
            .checked_add(2)
            .and_then(|index| self.layout.start_of(index));
        Duration::from_nanos(nanos_until(at, now.as_nanos()))
    }

    /// The decision in either layout for a weight in `1..=limit` in a window at or after the
    /// stored one and below `fast_end`, in `u64`; `None` for everything else, which the caller
    /// decides by the definition ([`decide_in_general`](Self::decide_in_general)), out of line.
    /// (`None` rather than a closure for that path: a closure passed in here kept `state`, `now`
    /// and `cost` in memory on every decision, 29 more instructions per fixed window admission,
    /// counted with callgrind.)
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
        let limit = self.limit.get();
        // A weight of 0 or above the limit takes the general path (`cost - 1` wraps for 0).
        if cost.wrapping_sub(1) >= limit {
            return None;
        }
        let (now_nanos, w) = (now.as_nanos(), self.layout.window());
        let stored_index = packing.index(state);
        // Still in the stored window: known without a division. Below `fast_end`, the stored
        // window's start does not overflow, so `elapsed < w` means `now` is in it.
        let elapsed = now_nanos.wrapping_sub(stored_index.wrapping_mul(w));
        let (moved, count, elapsed) = if elapsed < w && stored_index < fast_end {
            (state, packing.counter(state, 0), elapsed)
        } else {
            // A later window starts empty. A step back into an earlier window, or a window at
            // or past `fast_end`, takes the general path.
            let index = self.layout.index_of(now_nanos);
            if index <= stored_index || index >= fast_end {
                return None;
            }
            // `index * w <= now`, without overflow.
            (packing.pack(index, &[0]), 0, now_nanos - index * w)
        };
        // The window ends at a representable instant, `w - elapsed` from `now`.
        let until_window_end = w - elapsed;
        // Each at most `count_mask < 2^64` and the limit: the sum fits (`count <= limit`).
        let total = count + cost;
        Some(if total <= limit {
            Transition {
                // `total <= limit <= count_mask`: no carry out of the counter.
                state: moved + P::Word::from(cost),
                decision: Decision::allowed(limit - total, until_window_end, 0),
            }
        } else {
            // `cost <= limit`, so it passes in the next window; and `count > 0`, so the window
            // holds something until it ends.
            Transition::refuse(
                state,
                Decision::denied(limit.saturating_sub(count), until_window_end, until_window_end),
            )
        })
    }
}

impl Algorithm for FixedWindow {
    #[cfg(feature = "tower")]
    fn announced(&self) -> Option<crate::policy::Policy> {
        Some(crate::policy::AnnouncedPolicy::policy(self))
    }

    fn capacity(&self) -> u64 {
        self.limit.get()
    }

    /// Idle when nothing is counted, or the count belongs to a window that has ended.
    fn is_idle(&self, state: u64, now: Timestamp) -> bool {
        match self.wide {
            true => self.is_idle_wide(u128::from(state), now),
            false => self.is_idle_in(&self.layout, state, now),
        }
    }

    /// Reclaimable when nothing is counted, or the count's window ended a whole window ago (its
    /// index two or more behind `now`'s), not as soon as it ends: every key used in a window is
    /// idle at the next boundary, and one forgotten there and asked for with a reading taken
    /// just before it would be decided fresh in the window it had used up, a whole limit more.
    /// So a reading less than a window older than the reclaim never finds a key forgotten
    /// while its count still weighs.
    fn is_reclaimable(&self, state: u64, now: Timestamp) -> bool {
        match self.wide {
            true => self.is_reclaimable_wide(u128::from(state), now),
            false => self.is_reclaimable_in(&self.layout, state, now),
        }
    }

    /// Until the start of the window two on from the count's (zero when nothing is counted).
    fn reclaimable_in(&self, state: u64, now: Timestamp) -> Duration {
        match self.wide {
            true => self.reclaimable_in_wide(u128::from(state), now),
            false => self.reclaimable_in_in(&self.layout, state, now),
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

    fn is_reclaimable_wide(&self, state: u128, now: Timestamp) -> bool {
        match self.wide {
            true => self.is_reclaimable_in(&WIDE, state, now),
            false => self.is_reclaimable(low_half(state), now),
        }
    }

    fn reclaimable_in_wide(&self, state: u128, now: Timestamp) -> Duration {
        match self.wide {
            true => self.reclaimable_in_in(&WIDE, state, now),
            false => self.reclaimable_in(low_half(state), now),
        }
    }

    fn undo_wide(&self, state: u128, admission: &Admission) -> u128 {
        match self.wide {
            true => self.undo_in(&WIDE, state, admission),
            false => u128::from(self.undo(low_half(state), admission)),
        }
    }
}

impl FixedWindow {
    /// [`decide_in_general`](Self::decide_in_general) out of line, for `decide`'s fast path to
    /// call (see [`OutOfLine`]). A wide configuration's 64-bit decision decides the state
    /// zero-extended (see [`Algorithm::is_wide`]).
    #[cold]
    #[inline(never)]
    fn decide_out_of_line(&self, state: u64, now: Timestamp, cost: u64) -> OutOfLine {
        let Transition { state, decision } = match self.wide {
            true => self.decide_wide(u128::from(state), now, cost).low_half(),
            false => self.decide_in_general(&self.layout, state, now, cost),
        };
        (state, decision)
    }

    /// [`decide_out_of_line`](Self::decide_out_of_line) in a limiter: a wide configuration's
    /// decision is `wide`'s, on the limiter's 128-bit cell, and `state` stays as it is.
    #[cold]
    #[inline(never)]
    fn decide_out_of_line_or(
        &self,
        state: u64,
        now: Timestamp,
        cost: u64,
        wide: impl FnOnce(Timestamp, u64) -> Decision,
    ) -> OutOfLine {
        if self.wide {
            return (state, wide(now, cost));
        }
        let Transition { state, decision } = self.decide_in_general(&self.layout, state, now, cost);
        (state, decision)
    }

    /// The 128-bit [`decide_in_general`](Self::decide_in_general) out of line.
    #[cold]
    #[inline(never)]
    fn decide_wide_out_of_line(&self, state: u128, now: Timestamp, cost: u64) -> OutOfLine<u128> {
        let Transition { state, decision } = self.decide_in_general(&WIDE, state, now, cost);
        (state, decision)
    }

    /// [`decide`](Algorithm::decide) for every input, in either layout: the definition that
    /// `decide` shortcuts for a weight in `1..=limit` in a window at or after the stored one
    /// and below `fast_end`.
    fn decide_in_general<P: Packing>(
        &self,
        packing: &P,
        state: P::Word,
        now: Timestamp,
        cost: u64,
    ) -> Transition<P::Word> {
        let limit = self.limit.get();
        let now = now.as_nanos();
        let now_index = self.layout.index_of(now);
        let stored_index = packing.index(state);
        // A new window starts empty. If the clock went back into an earlier window, keep
        // deciding in the stored one: no time has passed.
        let (index, count) = if now_index > stored_index {
            (now_index, 0)
        } else {
            (stored_index, packing.counter(state, 0))
        };
        let until_window_end = nanos_until(self.layout.start_of(index.saturating_add(1)), now);
        match count.checked_add(cost) {
            Some(total) if total <= limit => Transition {
                // A weightless request stores nothing (not even a new window's index).
                state: if cost == 0 {
                    state
                } else {
                    packing.pack(index, &[total])
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
