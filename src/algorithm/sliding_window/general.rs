//! The sliding window counter's decision for every input, in `u128`: the definition.

use crate::algorithm::window::{nanos_until, Packing};
use crate::algorithm::{Algorithm, OutOfLine, Transition};
use crate::{Decision, Timestamp};

use super::{SlidingWindow, CURRENT, PREVIOUS, WIDE};

impl SlidingWindow {
    /// [`decide`](crate::algorithm::Algorithm::decide) for every input, in either layout, in
    /// `u128`: the definition that [`decide_in_u64`](Self::decide_in_u64) shortcuts. Taken for
    /// a weight of 0 or above the limit, after a step back into an earlier window, within two
    /// windows of the end of representable time, and for quotas whose `limit * w` exceeds a
    /// `u64` or what one multiplication divides by `w` exactly (`fast_end == 0`).
    pub(super) fn decide_in_general<P: Packing>(
        &self,
        packing: &P,
        state: P::Word,
        now: Timestamp,
        cost: u64,
    ) -> Transition<P::Word> {
        let stored_index = packing.index(state);
        let (stored_previous, stored_current) =
            (packing.counter(state, PREVIOUS), packing.counter(state, CURRENT));
        let now_index = self.layout.index_of(now.as_nanos());
        let (index, previous, current) = match now_index.checked_sub(stored_index) {
            Some(0) => (stored_index, stored_previous, stored_current),
            Some(1) => (now_index, stored_current, 0),
            Some(_) => (now_index, 0, 0),
            // The clock went back into an earlier window: stay in the stored window, at its
            // start, where the previous window weighs the most. No time has passed.
            None => (stored_index, stored_previous, stored_current),
        };
        let (decision, total) = self.decide_counts(index, previous, current, now, cost);
        match total {
            Some(total) => Transition {
                state: packing.pack(index, &[total, previous]),
                decision,
            },
            // A refusal in a later window than the stored one stores the state moved to it (the
            // same counts): a request stamped earlier is then decided in this window, as at the
            // latest time a decision was made (`docs/design.md`, "Time that goes backwards").
            // Once per window: the next refusal finds it stored. A weightless request stores
            // nothing.
            None if cost > 0 && index != stored_index => {
                Transition::refuse(packing.pack(index, &[current, previous]), decision)
            }
            None => Transition::refuse(state, decision),
        }
    }

    /// The decision for `cost` units at `now` in window `index` (which starts at or before
    /// `now`, or after it only when the clock went back), holding `current` units after a
    /// previous window of `previous`, and the current count to store (`None`: nothing to
    /// store, a refusal or a weightless request). The counts may be any `u64`, not only what a
    /// state packs: the Redis backend decides its replies here, whose counts carried across a
    /// change of window may exceed this window's count field.
    pub(crate) fn decide_counts(
        &self,
        index: u64,
        previous: u64,
        current: u64,
        now: Timestamp,
        cost: u64,
    ) -> (Decision, Option<u64>) {
        let now = now.as_nanos();
        // The current window's start is at most `now` (or, after a step back, the stored one's).
        let window_start = self.layout.start_of(index).unwrap_or(u64::MAX);
        let elapsed = now.saturating_sub(window_start);
        let w = u128::from(self.layout.window());
        let budget = self.budget;
        // `elapsed < w` for a window holding `now`; `min` keeps a caller's other window from
        // wrapping the weight.
        let used = u128::from(previous) * (w - u128::from(elapsed).min(w)) + u128::from(current) * w;
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
            let total = current.saturating_add(cost);
            let decision = Decision::allowed(
                self.units_in(budget.saturating_sub(after)),
                until(reset_at(total)),
                0,
            );
            (decision, (cost > 0).then_some(total))
        } else {
            let decision = Decision::denied(
                self.units_in(budget.saturating_sub(used)),
                until(self.first_pass(index, previous, current, cost)),
                until(reset_at(current)),
            );
            (decision, None)
        }
    }

    /// [`decide_counts`](Self::decide_counts) in a window placed relative to now, for counts
    /// read from elsewhere (Redis's, a lease's): the window began `elapsed` ns ago, or, `ahead`
    /// above 0 (a clock that went back), begins `ahead` ns from now. Placed at window 2 or later,
    /// so that a previous window exists; `None` when the placement passes the time range.
    #[cfg(any(feature = "redis", tollgate_loom))]
    pub(crate) fn decide_placed(
        &self,
        previous: u64,
        current: u64,
        ahead: u64,
        elapsed: u64,
        cost: u64,
    ) -> Option<Decision> {
        let w = self.layout.window();
        let index = ahead.div_ceil(w).checked_add(2)?;
        let now = self
            .layout
            .start_of(index)?
            .checked_add(elapsed)?
            .checked_sub(ahead)?;
        Some(
            self.decide_counts(index, previous, current, Timestamp::from_nanos(now), cost)
                .0,
        )
    }

    /// [`decide_in_general`](Self::decide_in_general) out of line, for `decide`'s fast path to
    /// call (see [`OutOfLine`]). A wide configuration's 64-bit decision decides the state
    /// zero-extended (see [`Algorithm::is_wide`]).
    #[cold]
    #[inline(never)]
    pub(super) fn decide_out_of_line(&self, state: u64, now: Timestamp, cost: u64) -> OutOfLine {
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
    pub(super) fn decide_out_of_line_or(
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
    pub(super) fn decide_wide_out_of_line(&self, state: u128, now: Timestamp, cost: u64) -> OutOfLine<u128> {
        let Transition { state, decision } = self.decide_in_general(&WIDE, state, now, cost);
        (state, decision)
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
        if let Some(free) = self
            .limit()
            .checked_sub(current)
            .and_then(|f| f.checked_sub(cost))
        {
            let offset = earliest_offset(u128::from(previous), u128::from(free) * w, w);
            if offset < w {
                return at(index, offset);
            }
        }
        // Within window `index + 1`, where `current` has become the previous count.
        let free = self.limit().checked_sub(cost)?;
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
