//! The generic cell rate algorithm (GCRA), shared by the token bucket and the leaky bucket.
//!
//! Both buckets are the same arithmetic read two ways: a request of weight `n` arriving at
//! `now` is scheduled at `start = max(tat, now)` and occupies `n` emission intervals `T`. It is
//! admitted iff `start + n*T - now <= burst*T`. The token bucket lets it go at once; the shaper
//! holds it until `start`.

use std::time::Duration;

use crate::error::QuotaError;
use crate::time::duration_to_nanos_saturating;
use crate::{Decision, Quota, Timestamp};

use super::{OutOfLine, Transition};

/// Packed state of both buckets.
///
/// ```text
///  63                                                              0
/// +-----------------------------------------------------------------+
/// |        TAT: theoretical arrival time, ns since the UNIX epoch    |
/// +-----------------------------------------------------------------+
/// ```
///
/// The TAT is when the bucket would be full again (token bucket), or when the queue would be
/// empty (shaper). `0` (or any TAT not after `now`) is a full bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcraState(u64);

impl GcraState {
    /// Reads a raw state word.
    pub const fn from_raw(raw: u64) -> Self {
        GcraState(raw)
    }

    /// The raw state word.
    pub const fn raw(self) -> u64 {
        self.0
    }

    /// The theoretical arrival time, in ns since the UNIX epoch.
    pub const fn tat(self) -> u64 {
        self.0
    }
}

/// The longest emission interval a bucket accepts, 2^63 ns (about 292 years): with it, a
/// fresh bucket's first unit is due within representable time (until the year 2554) for every
/// `now` before the year 2262.
pub const MAX_EMISSION_INTERVAL: Duration = Duration::from_nanos(MAX_EMISSION_INTERVAL_NANOS);
const MAX_EMISSION_INTERVAL_NANOS: u64 = 1 << 63;

/// Validated GCRA parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Gcra {
    /// `T`: nanoseconds per unit, `ceil(period / count)` so that rounding never admits more.
    interval: u64,
    /// `burst`: the most units admitted at one instant.
    capacity: u64,
    /// `burst * T`: how far ahead of `now` the TAT may run.
    tolerance: u64,
    /// The quota it was built from (its exact rate, before `T` was rounded up): never read by
    /// a decision.
    quota: Quota,
}

impl Gcra {
    pub(crate) fn new(quota: &Quota) -> Result<Gcra, QuotaError> {
        let (count, period) = (quota.count(), quota.period_nanos());
        let interval = period.div_ceil(count);
        // Rounding `T` up runs the bucket at `1 / T` instead of `count / period`: refused when
        // that is more than 1% slower, `100 * (T * count - period) > T * count` (in `u128`:
        // `T * count < period + count` fits).
        let run = u128::from(interval) * u128::from(count);
        if 100 * (run - u128::from(period)) > run {
            return Err(QuotaError::RateTooFine {
                count,
                period: quota.period(),
                interval: Duration::from_nanos(interval),
            });
        }
        if interval > MAX_EMISSION_INTERVAL_NANOS {
            return Err(QuotaError::IntervalTooLong {
                interval: Duration::from_nanos(interval),
                max: MAX_EMISSION_INTERVAL,
            });
        }
        let capacity = quota.burst();
        let tolerance = capacity.checked_mul(interval).ok_or(QuotaError::BurstTooLarge {
            burst: capacity,
            max: u64::MAX / interval,
        })?;
        Ok(Gcra {
            interval,
            capacity,
            tolerance,
            quota: *quota,
        })
    }

    /// The parameters a bucket decided exactly in 128 bits (`WideGcra`) keeps in its
    /// 64-bit place: its quota and burst, and an emission interval of 0, which no rate accepted
    /// by [`new`](Self::new) has (`T >= 1`). Every request is then weightless to
    /// [`decide_or`](Self::decide_or), whose weightless branch hands a zero interval to the
    /// wide bucket: the one branch of the 64-bit step that a wide configuration takes, and no
    /// 64-bit one but a weightless request (which then compares the interval once more).
    pub(crate) const fn wide_placeholder(quota: &Quota) -> Gcra {
        Gcra {
            interval: 0,
            capacity: quota.burst(),
            tolerance: 0,
            quota: *quota,
        }
    }

    pub(crate) const fn capacity(&self) -> u64 {
        self.capacity
    }

    pub(crate) const fn interval(&self) -> u64 {
        self.interval
    }

    /// The quota it was built from: `T` is its period over its count, rounded up.
    pub(crate) const fn quota(&self) -> Quota {
        self.quota
    }

    /// A TAT not after `now` is a full bucket (an empty queue), exactly like a fresh one.
    pub(crate) const fn is_idle(tat: u64, now: u64) -> bool {
        tat <= now
    }

    /// Gives back `cost` slots: the TAT moves back by `cost * T`, but never behind `now` (a TAT
    /// at or before `now` is a full bucket, so there is nothing more to give back).
    ///
    /// Unconditional: for the shaper, a slot in the middle of the queue given back this way
    /// goes to the next request, which then shares the instant of the last one waiting; the
    /// shaper's own refund is [`refund_slot`](Self::refund_slot).
    pub(crate) fn refund(&self, tat: u64, now: u64, cost: u64) -> u64 {
        if tat <= now {
            return tat;
        }
        tat.saturating_sub(cost.saturating_mul(self.interval)).max(now)
    }

    /// Gives back the slot of `cost` units that ended the queue at `end` (the TAT its admission
    /// stored) only if it still does: the TAT equals `end`, so nothing has been scheduled after
    /// it (slots scheduled after it and given back in their turn have moved the TAT back to
    /// `end` already). Then it is [`refund`](Self::refund); otherwise the TAT stays as it is and
    /// the slot passes unused, so that the requests behind it keep their spacing and the next
    /// request is scheduled after the last of them.
    pub(crate) fn refund_slot(&self, tat: u64, now: u64, cost: u64, end: u64) -> u64 {
        if tat != end {
            return tat;
        }
        self.refund(tat, now, cost)
    }

    /// [`decide_or`](Self::decide_or) for a request that may wait at most `max_delay` ns for its
    /// slot (the shaper's): one that would wait longer is refused and nothing is stored, so that no
    /// slot has to be given back. Its refusal says: nothing passes now within the maximum
    /// (`remaining` 0), the same request fits once `backlog - max_delay` has passed (the queue
    /// only shortens meanwhile), and the queue is empty after `backlog`. A request refused for
    /// a full queue while the backlog is above the maximum too says the same, with the later
    /// of the two retry-afters: when the queue has room, its wait may still be too long.
    /// Any other decision is `decide_or`'s. A [placeholder](Self::wide_placeholder) refuses every
    /// request (its decisions are the wide shaper's, on the 128-bit state), never admitting one
    /// uncounted.
    #[inline(always)]
    pub(crate) fn decide_within(&self, tat: u64, now: u64, cost: u64, max_delay: u64) -> Transition {
        let wide = |tat, _, _| Transition::refuse(tat, Decision::denied(0, u64::MAX, u64::MAX));
        let transition = self.decide_or(tat, now, cost, true, Some(wide));
        let backlog = tat.max(now) - now;
        if backlog <= max_delay {
            return transition;
        }
        let fits = backlog - max_delay;
        let retry = match transition.decision.is_allowed() {
            true => fits,
            // Both conditions only become true as time passes: the later of the two instants.
            false => duration_to_nanos_saturating(transition.decision.retry_after()).max(fits),
        };
        Transition::refuse(tat, Decision::denied(0, retry, backlog))
    }

    /// The GCRA step. With `shaper`, an admitted request reports its wait for its slot. For a
    /// [placeholder](Self::wide_placeholder) (an interval of 0), `wide(tat, now, cost)` decides
    /// instead: from the weightless branch, which every request takes at that interval, so that
    /// no other decision runs a branch more (`docs/design.md`, "Wide states").
    ///
    /// Time that goes backwards needs no special case: an earlier `now` only makes
    /// `start - now` larger, so it can only admit less (see `docs/design.md`).
    /// [`decide_or`](Self::decide_or) for a bucket or shaper whose [wide](super::Algorithm::is_wide)
    /// decisions `wide` makes on the limiter's 128-bit cell, reached from the weightless branch
    /// (see [`Algorithm::decide_in_cells`](super::Algorithm::decide_in_cells)): every other
    /// decision runs `decide_or`'s instructions.
    #[inline(always)]
    pub(crate) fn decide_in_cells(
        &self,
        state: u64,
        now: Timestamp,
        cost: u64,
        shaper: bool,
        wide: impl FnOnce(Timestamp, u64) -> Decision,
    ) -> Transition {
        let in_cell =
            |tat, now, cost| Transition::from_out_of_line(decide_in_cell_out_of_line(tat, now, cost, wide));
        self.decide_or(state, now.as_nanos(), cost, shaper, Some(in_cell))
    }

    // Always inlined: returning the transition through memory costs more than computing it.
    #[inline(always)]
    pub(crate) fn decide_or(
        &self,
        tat: u64,
        now: u64,
        cost: u64,
        shaper: bool,
        wide: Option<impl FnOnce(u64, u64, u64) -> Transition>,
    ) -> Transition {
        let start = tat.max(now);
        let backlog = start - now;
        let need = cost.saturating_mul(self.interval);
        let after = backlog.saturating_add(need);
        if need == 0 {
            if let (0, Some(wide)) = (self.interval, wide) {
                return wide(tat, now, cost);
            }
            // A weightless request takes no slot: always allowed, and nothing to store, even if
            // the clock stepped back past the bucket's tolerance.
            // The shaper still has it wait its turn behind the queue, as any request.
            let delay = if shaper { backlog } else { 0 };
            return Transition::refuse(
                tat,
                Decision::allowed_in_units(self.room(start, backlog), self.interval, backlog, delay),
            );
        }
        match start.checked_add(need) {
            Some(next) if after <= self.tolerance => Transition {
                state: next,
                decision: Decision::allowed_in_units(
                    self.before_end(next, self.tolerance - after),
                    self.interval,
                    after,
                    if shaper { backlog } else { 0 },
                ),
            },
            // The request needs a slot past the end of representable time, or more than the
            // whole bucket (only through `Algorithm::decide`: the limiters refuse that weight
            // with `CostTooLarge`): it can never pass.
            None => Transition::refuse(tat, self.denied(start, backlog, u64::MAX)),
            Some(_) if cost > self.capacity => Transition::refuse(tat, self.denied(start, backlog, u64::MAX)),
            // It did not fit: fewer than `cost` units remain, so none for a single unit (the
            // plain `check`), without reading the room.
            Some(_) if cost == 1 => Transition::refuse(
                tat,
                Decision::denied_in_units(0, self.interval, after - self.tolerance, backlog),
            ),
            Some(_) => Transition::refuse(tat, self.denied(start, backlog, after - self.tolerance)),
        }
    }

    /// A refusal with the queue starting at `start`, `backlog` after now.
    // Methods, not closures: a closure used in several arms was built in memory on every path,
    // the admitted one included.
    #[inline(always)]
    fn denied(&self, start: u64, backlog: u64, retry_after: u64) -> Decision {
        Decision::denied_in_units(self.room(start, backlog), self.interval, retry_after, backlog)
    }

    /// The room, in nanoseconds of emission intervals, with the queue starting at `start`,
    /// `backlog` after now: what a refused or weightless request reports as remaining, once
    /// divided by the interval (the `Decision` divides when asked).
    #[inline(always)]
    fn room(&self, start: u64, backlog: u64) -> u64 {
        self.before_end(start, self.tolerance.saturating_sub(backlog))
    }

    /// `room` nanoseconds of intervals, or less if less still fits before the end of
    /// representable time once `from` is taken. (Whole intervals of the lesser room are the
    /// lesser count of whole intervals: flooring keeps order.)
    #[inline(always)]
    fn before_end(&self, from: u64, room: u64) -> u64 {
        match from > u64::MAX - self.tolerance {
            true => room.min(u64::MAX - from),
            false => room,
        }
    }
}

/// A [wide](super::Algorithm::is_wide) bucket's or shaper's decision on the limiter's 128-bit
/// cell (`wide`), leaving the 64-bit state `tat` as it is. Out of line, so that the 64-bit step
/// it is reached from keeps the registers and instructions it has without it (as the windows'
/// general paths: see [`OutOfLine`]).
#[cold]
#[inline(never)]
fn decide_in_cell_out_of_line(
    tat: u64,
    now: u64,
    cost: u64,
    wide: impl FnOnce(Timestamp, u64) -> Decision,
) -> OutOfLine {
    (tat, wide(Timestamp::from_nanos(now), cost))
}
