//! Token bucket, decided GCRA-style: one timestamp instead of a token count.

use std::time::Duration;

use crate::error::QuotaError;
use crate::{Decision, Quota, Timestamp};

use super::gcra::Gcra;
use super::wide_gcra::WideGcra;
use super::{low_half, Algorithm, Transition};

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
/// `T` nanoseconds of rounding error accumulated (about 1 per 5.3 years for `3/s`). Every rate
/// of at most one unit per microsecond rounds so by less than 1%.
///
/// A rate that rounding would run more than 1% slower than asked (near or above one unit per
/// nanosecond, such as `300000000/s`, whose `T` of 3.3 ns would become 4 ns) is run exactly
/// instead, with no rounding: its state takes 128 bits ([`Algorithm::is_wide`]), the TAT
/// counted in units of `1 / count` ns, so that `T` is `period` of them. Its answers are rounded
/// to whole nanoseconds, retry-after and reset-after up. Such a rate's count is at most
/// `u32::MAX` (every count of 32 bits, for every period): a larger one is refused with
/// [`QuotaError::RateTooFine`] (count in larger units). A wide bucket gives nothing back
/// ([`refund`](Algorithm::refund), [`undo`](Algorithm::undo) keep its state). Through Redis
/// every bucket runs its exact `period / count` (whole microseconds and a remainder).
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
    /// The 64-bit parameters; for a wide bucket, a
    /// [placeholder](Gcra::wide_placeholder) whose every decision goes to `wide`.
    gcra: Gcra,
    /// The exact parameters of a rate whole nanoseconds would run over 1% slow: its state is
    /// 128 bits.
    wide: Option<WideGcra>,
}

impl TokenBucket {
    /// A token bucket refilled at `quota.count()` per `quota.period()`, holding `quota.burst()`.
    ///
    /// # Errors
    /// [`QuotaError::BurstTooLarge`] when `burst * T` does not fit in a `u64` of nanoseconds;
    /// [`QuotaError::RateTooFine`] when whole nanoseconds would run the rate more than 1% slow
    /// and its count is above `u32::MAX` (see "Rounding"); [`QuotaError::IntervalTooLong`] when
    /// `T` exceeds [`MAX_EMISSION_INTERVAL`](super::MAX_EMISSION_INTERVAL).
    pub fn new(quota: Quota) -> Result<TokenBucket, QuotaError> {
        match Gcra::new(&quota) {
            Ok(gcra) => Ok(TokenBucket { gcra, wide: None }),
            Err(QuotaError::RateTooFine { .. }) => Ok(TokenBucket {
                gcra: Gcra::wide_placeholder(&quota),
                wide: Some(WideGcra::new(&quota)?),
            }),
            Err(error) => Err(error),
        }
    }

    /// The time one token takes to refill (rounded up to whole nanoseconds; a
    /// [wide](Algorithm::is_wide) bucket refills at the exact ratio).
    pub fn emission_interval(&self) -> Duration {
        Duration::from_nanos(match self.wide {
            Some(wide) => wide.rounded_interval(),
            None => self.gcra.interval(),
        })
    }

    /// The quota it was built from: it refills `count` per `period` (at the emission interval,
    /// their ratio rounded up to whole nanoseconds, or for a [wide](Algorithm::is_wide) bucket
    /// at the ratio itself), and `burst` is its capacity.
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

    /// A [wide](Algorithm::is_wide) bucket's decisions are [`decide_wide`](Algorithm::decide_wide)'s
    /// on its 128-bit state (the limiters decide it there): this 64-bit step refuses every
    /// request of such a bucket, never admitting one uncounted.
    // Always inlined: returning the transition through memory costs more than computing it.
    // The wide refusal is a value, not a call: a call in the step, even one never made, cost
    // every keyed token-bucket decision 8 instructions (callgrind, `keyed/precise/hot_key/tollgate`).
    #[inline(always)]
    fn decide(&self, state: u64, now: Timestamp, cost: u64) -> Transition {
        let wide = |tat, _, _| Transition::refuse(tat, Decision::denied(0, u64::MAX, u64::MAX));
        self.gcra
            .decide_or(state, now.as_nanos(), cost, false, Some(wide))
    }

    /// For a [wide](Algorithm::is_wide) bucket's 64-bit state (its scaled TAT), `tat <= now`
    /// implies the scaled `tat <= now * count`: idle only when it is, never forgetting a debt.
    fn is_idle(&self, state: u64, now: Timestamp) -> bool {
        Gcra::is_idle(state, now.as_nanos())
    }

    fn refund(&self, state: u64, now: Timestamp, cost: u64) -> u64 {
        self.gcra.refund(state, now.as_nanos(), cost)
    }

    fn refund_slot(&self, state: u64, now: Timestamp, cost: u64, end: Timestamp) -> u64 {
        self.gcra.refund_slot(state, now.as_nanos(), cost, end.as_nanos())
    }

    /// A rate whole nanoseconds would run over 1% slow (see "Rounding").
    fn is_wide(&self) -> bool {
        self.wide.is_some()
    }

    fn decide_wide(&self, state: u128, now: Timestamp, cost: u64) -> Transition<u128> {
        match &self.wide {
            Some(wide) => wide.decide(state, now.as_nanos(), cost, false),
            None => Transition::widened(self.decide(low_half(state), now, cost)),
        }
    }

    fn is_idle_wide(&self, state: u128, now: Timestamp) -> bool {
        match &self.wide {
            Some(wide) => wide.is_idle(state, now.as_nanos()),
            None => self.is_idle(low_half(state), now),
        }
    }

    /// [`decide`](Algorithm::decide), with a [wide](Algorithm::is_wide) bucket's decisions
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
        self.gcra.decide_in_cells(state, now, cost, false, wide)
    }
}
