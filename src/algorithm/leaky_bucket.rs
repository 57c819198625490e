//! Leaky bucket as a shaper: requests leave at a fixed rate, early ones wait for their slot.

use std::time::Duration;

use crate::error::QuotaError;
use crate::{Decision, Quota, Timestamp};

use super::gcra::Gcra;
use super::wide_gcra::WideGcra;
use super::{low_half, Algorithm, Transition};

/// Leaky bucket shaper: requests drain at exactly `count` per `period`. A request that arrives
/// before its slot is **accepted with a delay** ([`Decision::delay`](crate::Decision::delay)),
/// as long as at most `burst - 1` requests are waiting; past that it is refused.
///
/// A request of weight `n` takes `n` consecutive slots and proceeds at the first: its units
/// leave together, so "`count` per `period`" holds for units of weight-1 requests; with weights,
/// a period can see up to `count - 1 + n` units leave. A slot given back with
/// [`refund_slot`](crate::DirectLimiter::refund_slot) leaves the queue only if it is its end
/// (otherwise it passes unused), so requests keep leaving one interval apart; the
/// unconditional [`refund_n`](crate::DirectLimiter::refund_n) moves the queue's end back
/// without moving requests already waiting, so the next request may share the last one's
/// instant (`docs/algorithms.md`, "Leaky bucket").
///
/// `burst = 1` (a queue of zero) is a strict policer: one request per `period / count`, no
/// burst, no waiting. The limiter never sleeps; the caller waits out the delay. State:
/// [`GcraState`](super::GcraState), the time the queue will be empty.
///
/// # Rounding
/// The emission interval is rounded up to whole nanoseconds, as the
/// [`TokenBucket`](super::TokenBucket)'s is (see its "Rounding"), and a rate that this would
/// run more than 1% slow (near or above one unit per nanosecond: `300000000/s`,
/// `4294967295/s`, `4294967295/ms`) is run exactly instead, with its state in 128 bits
/// ([`Algorithm::is_wide`]), the time the queue is empty counted in units of `1 / count` ns.
/// Such a rate's count is at most `u32::MAX`, for every period; a larger one is refused with
/// [`QuotaError::RateTooFine`] (count in larger units). A wide shaper's slots are the exact
/// ones, `period / count` apart; its answers are rounded to whole nanoseconds, the delay,
/// retry-after and reset-after up, so that no request proceeds before its slot, and
/// [`check_n_within`](crate::DirectLimiter::check_n_within) refuses (counting nothing) a
/// request whose delay so rounded is above the maximum wait. It gives nothing back:
/// [`refund_slot`](crate::DirectLimiter::refund_slot), [`refund_n`](crate::DirectLimiter::refund_n)
/// and [`undo`](crate::DirectLimiter::undo) (and so a [`PolicySet`](crate::PolicySet)) return
/// `false` and keep its state, so a slot given up passes unused, as in the middle of the
/// queue (an end in whole nanoseconds does not name one slot of a fraction of a nanosecond).
/// Through Redis such a rate is refused (its interval in whole microseconds).
///
/// ```
/// use std::time::Duration;
/// use tollgate::{DirectLimiter, LeakyBucket, ManualClock, Quota};
///
/// // 2 per second, at most 2 waiting.
/// let shaper = DirectLimiter::with_clock(LeakyBucket::new("2/s burst 3".parse()?)?, ManualClock::new());
/// let delays: Vec<_> = (0..4).map(|_| shaper.check()).map(|d| (d.is_allowed(), d.delay())).collect();
/// assert_eq!(delays, [
///     (true, Duration::ZERO),
///     (true, Duration::from_millis(500)),
///     (true, Duration::from_millis(1000)),
///     (false, Duration::ZERO),
/// ]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeakyBucket {
    /// The 64-bit parameters; for a wide shaper, a [placeholder](Gcra::wide_placeholder) whose
    /// every decision goes to `wide`.
    gcra: Gcra,
    /// The exact parameters of a rate whole nanoseconds would run over 1% slow: its state is
    /// 128 bits.
    wide: Option<WideGcra>,
}

impl LeakyBucket {
    /// A shaper draining `quota.count()` per `quota.period()` that accepts up to `quota.burst()`
    /// requests at one instant (one proceeds, `burst - 1` wait).
    ///
    /// # Errors
    /// As [`TokenBucket::new`](super::TokenBucket::new): [`QuotaError::BurstTooLarge`],
    /// [`QuotaError::RateTooFine`] (a count above `u32::MAX` at a rate whole nanoseconds run
    /// over 1% slow: see "Rounding"), [`QuotaError::IntervalTooLong`].
    pub fn new(quota: Quota) -> Result<LeakyBucket, QuotaError> {
        match Gcra::new(&quota) {
            Ok(gcra) => Ok(LeakyBucket { gcra, wide: None }),
            Err(QuotaError::RateTooFine { .. }) => Ok(LeakyBucket {
                gcra: Gcra::wide_placeholder(&quota),
                wide: Some(WideGcra::new(&quota)?),
            }),
            Err(error) => Err(error),
        }
    }

    /// The most requests that may wait at once (`burst - 1`).
    pub fn max_queue(&self) -> u64 {
        self.gcra.capacity() - 1
    }

    /// The gap between two slots, rounded up to whole nanoseconds. A [wide](Algorithm::is_wide)
    /// shaper's slots are the exact ratio `period / count` apart, less than this: it is then
    /// the gap rounded up, a bound (of 1 ns for every rate of one unit per nanosecond or more),
    /// not the spacing itself (see "Rounding").
    pub fn emission_interval(&self) -> Duration {
        Duration::from_nanos(match self.wide {
            Some(wide) => wide.rounded_interval(),
            None => self.gcra.interval(),
        })
    }

    /// The quota it was built from: it drains `count` per `period` exactly (at the emission
    /// interval, their ratio rounded up to whole nanoseconds, or for a
    /// [wide](Algorithm::is_wide) shaper at the ratio itself), and `burst` is its capacity.
    pub const fn quota(&self) -> Quota {
        self.gcra.quota()
    }
}

impl Algorithm for LeakyBucket {
    #[cfg(feature = "tower")]
    fn announced(&self) -> Option<crate::policy::Policy> {
        Some(crate::policy::AnnouncedPolicy::policy(self))
    }

    fn capacity(&self) -> u64 {
        self.gcra.capacity()
    }

    /// A [wide](Algorithm::is_wide) shaper's decisions are [`decide_wide`](Algorithm::decide_wide)'s
    /// on its 128-bit state (the limiters decide it there): this 64-bit step refuses every
    /// request of such a shaper, never admitting one uncounted.
    // Always inlined: returning the transition through memory costs more than computing it.
    // The wide refusal is a value, not a call, as in the token bucket's step.
    #[inline(always)]
    fn decide(&self, state: u64, now: Timestamp, cost: u64) -> Transition {
        let wide = |tat, _, _| Transition::refuse(tat, Decision::denied(0, u64::MAX, u64::MAX));
        self.gcra.decide_or(state, now.as_nanos(), cost, true, Some(wide))
    }

    /// For a [wide](Algorithm::is_wide) shaper's 64-bit state, as the token bucket's: idle
    /// only when `is_idle_wide` is, never forgetting a queue.
    fn is_idle(&self, state: u64, now: Timestamp) -> bool {
        Gcra::is_idle(state, now.as_nanos())
    }

    fn refund(&self, state: u64, now: Timestamp, cost: u64) -> u64 {
        self.gcra.refund(state, now.as_nanos(), cost)
    }

    fn refund_slot(&self, state: u64, now: Timestamp, cost: u64, end: Timestamp) -> u64 {
        self.gcra.refund_slot(state, now.as_nanos(), cost, end.as_nanos())
    }

    // Always inlined, as `decide`.
    #[inline(always)]
    fn decide_within(&self, state: u64, now: Timestamp, cost: u64, max_delay: u64) -> Transition {
        self.gcra.decide_within(state, now.as_nanos(), cost, max_delay)
    }

    /// A rate whole nanoseconds would run over 1% slow (see "Rounding").
    fn is_wide(&self) -> bool {
        self.wide.is_some()
    }

    fn decide_wide(&self, state: u128, now: Timestamp, cost: u64) -> Transition<u128> {
        match &self.wide {
            Some(wide) => wide.decide(state, now.as_nanos(), cost, true),
            None => Transition::widened(self.decide(low_half(state), now, cost)),
        }
    }

    fn decide_within_wide(&self, state: u128, now: Timestamp, cost: u64, max_delay: u64) -> Transition<u128> {
        match &self.wide {
            Some(wide) => wide.decide_within(state, now.as_nanos(), cost, max_delay),
            None => Transition::widened(self.decide_within(low_half(state), now, cost, max_delay)),
        }
    }

    fn is_idle_wide(&self, state: u128, now: Timestamp) -> bool {
        match &self.wide {
            Some(wide) => wide.is_idle(state, now.as_nanos()),
            None => self.is_idle(low_half(state), now),
        }
    }

    /// [`decide`](Algorithm::decide), with a [wide](Algorithm::is_wide) shaper's decisions
    /// made by `wide` on the limiter's 128-bit cell, from the 64-bit step's weightless branch
    /// (see [`Algorithm::decide_in_cells`]): every other decision runs `decide`'s instructions.
    #[inline(always)]
    fn decide_in_cells(
        &self,
        state: u64,
        now: Timestamp,
        cost: u64,
        wide: impl FnOnce(Timestamp, u64) -> Decision,
    ) -> Transition {
        self.gcra.decide_in_cells(state, now, cost, true, wide)
    }
}
