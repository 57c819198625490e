//! Leaky bucket as a shaper: requests leave at a fixed rate, early ones wait for their slot.

use std::time::Duration;

use crate::error::QuotaError;
use crate::{Quota, Timestamp};

use super::gcra::Gcra;
use super::{Algorithm, Transition};

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
/// [`GcraState`](super::GcraState), the time the queue will be empty. The emission interval is
/// rounded up to whole nanoseconds, and a rate that this would run more than 1% slow is refused
/// with [`QuotaError::RateTooFine`]. (The [`TokenBucket`](super::TokenBucket) runs such a rate
/// exactly in a 128-bit state; the shaper does not: a wide state's decisions carry no delay,
/// and the limiters decide its `check_n_within` with no maximum wait, so a shaper's slot and
/// its refusal past a maximum wait would need new 128-bit paths in both limiters.)
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
    gcra: Gcra,
}

impl LeakyBucket {
    /// A shaper draining `quota.count()` per `quota.period()` that accepts up to `quota.burst()`
    /// requests at one instant (one proceeds, `burst - 1` wait).
    ///
    /// # Errors
    /// As [`TokenBucket::new`](super::TokenBucket::new): [`QuotaError::BurstTooLarge`],
    /// [`QuotaError::RateTooFine`], [`QuotaError::IntervalTooLong`].
    pub fn new(quota: Quota) -> Result<LeakyBucket, QuotaError> {
        Ok(LeakyBucket {
            gcra: Gcra::new(&quota)?,
        })
    }

    /// The most requests that may wait at once (`burst - 1`).
    pub fn max_queue(&self) -> u64 {
        self.gcra.capacity() - 1
    }

    /// The gap between two slots (rounded up to whole nanoseconds).
    pub fn emission_interval(&self) -> Duration {
        Duration::from_nanos(self.gcra.interval())
    }

    /// The quota it was built from: it drains `count` per `period` exactly (the emission interval
    /// is their ratio rounded up to whole nanoseconds), and `burst` is its capacity.
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

    // Always inlined: returning the transition through memory costs more than computing it.
    #[inline(always)]
    fn decide(&self, state: u64, now: Timestamp, cost: u64) -> Transition {
        self.gcra.decide(state, now.as_nanos(), cost, true)
    }

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
}
