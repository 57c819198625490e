//! Token bucket, decided GCRA-style: one timestamp instead of a token count.

use std::time::Duration;

use crate::error::QuotaError;
use crate::{Quota, Timestamp};

use super::gcra::Gcra;
use super::{Algorithm, Transition};

/// Token bucket: holds up to `burst` tokens, refilled at `count` per `period`; a request of
/// weight `n` takes `n` tokens or is refused.
///
/// A full bucket admits exactly `burst` requests at the same instant, then one every
/// `period / count`. State: [`GcraState`](super::GcraState), the time the bucket will be full.
///
/// # Rounding
/// The emission interval `T = period / count` is kept in whole nanoseconds, rounded **up**: a
/// rate that does not divide its period into whole nanoseconds (for example `3/s`, `T =
/// 333_333_333.3 ns`) is run at the next slower whole-nanosecond interval (`333_333_334 ns`).
/// The limiter therefore never admits more than the quota; it admits at most one unit less per
/// `T` nanoseconds of rounding error accumulated (about 1 per 5.3 years for `3/s`). A rate that
/// rounding would run more than 1% slower than asked (near or above one unit per nanosecond,
/// such as `300000000/s`, whose `T` of 3.3 ns becomes 4 ns) is refused with
/// [`QuotaError::RateTooFine`] rather than run slow: count such rates in larger units. Every rate
/// of at most one unit per microsecond is accepted.
///
/// ```
/// use tollgate::{DirectLimiter, ManualClock, Quota, TokenBucket};
///
/// let bucket = TokenBucket::new("10/s burst 3".parse()?)?;
/// let limiter = DirectLimiter::with_clock(bucket, ManualClock::new());
/// assert_eq!((0..5).filter(|_| limiter.check().is_allowed()).count(), 3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenBucket {
    gcra: Gcra,
}

impl TokenBucket {
    /// A token bucket refilled at `quota.count()` per `quota.period()`, holding `quota.burst()`.
    ///
    /// # Errors
    /// [`QuotaError::BurstTooLarge`] when `burst * T` does not fit in a `u64` of nanoseconds;
    /// [`QuotaError::RateTooFine`] when whole nanoseconds would run the rate more than 1% slow
    /// (see "Rounding"); [`QuotaError::IntervalTooLong`] when `T` exceeds
    /// [`MAX_EMISSION_INTERVAL`](super::MAX_EMISSION_INTERVAL).
    pub fn new(quota: Quota) -> Result<TokenBucket, QuotaError> {
        Ok(TokenBucket {
            gcra: Gcra::new(&quota)?,
        })
    }

    /// The time one token takes to refill (rounded up to whole nanoseconds).
    pub fn emission_interval(&self) -> Duration {
        Duration::from_nanos(self.gcra.interval())
    }

    /// The quota it was built from: it refills `count` per `period` exactly (the emission interval
    /// is their ratio rounded up to whole nanoseconds), and `burst` is its capacity.
    pub const fn quota(&self) -> Quota {
        self.gcra.quota()
    }
}

impl Algorithm for TokenBucket {
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
        self.gcra.decide(state, now.as_nanos(), cost, false)
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
}
