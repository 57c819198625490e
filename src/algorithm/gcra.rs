//! The generic cell rate algorithm (GCRA), shared by the token bucket and the leaky bucket.
//!
//! Both buckets are the same arithmetic read two ways: a request of weight `n` arriving at
//! `now` is scheduled at `start = max(tat, now)` and occupies `n` emission intervals `T`. It is
//! admitted iff `start + n*T - now <= burst*T`. The token bucket lets it go at once; the shaper
//! holds it until `start`.

use crate::divisor::Divisor;
use crate::error::QuotaError;
use crate::{Decision, Quota};

use super::Transition;

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

/// Validated GCRA parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Gcra {
    /// `T`: nanoseconds per unit, `ceil(period / count)` so that rounding never admits more.
    interval: Divisor,
    /// `burst`: the most units admitted at one instant.
    capacity: u64,
    /// `burst * T`: how far ahead of `now` the TAT may run.
    tolerance: u64,
}

impl Gcra {
    pub(crate) fn new(quota: &Quota) -> Result<Gcra, QuotaError> {
        let interval = quota.period_nanos().div_ceil(quota.count());
        let capacity = quota.burst();
        let tolerance = capacity.checked_mul(interval).ok_or(QuotaError::BurstTooLarge {
            burst: capacity,
            max: u64::MAX / interval,
        })?;
        Ok(Gcra {
            interval: Divisor::new(interval),
            capacity,
            tolerance,
        })
    }

    pub(crate) const fn capacity(&self) -> u64 {
        self.capacity
    }

    pub(crate) const fn interval(&self) -> u64 {
        self.interval.get()
    }

    /// The GCRA step. With `shaper`, an admitted request reports its wait for its slot.
    ///
    /// Time that goes backwards needs no special case: an earlier `now` only makes
    /// `start - now` larger, so it can only admit less (see `docs/design.md`).
    #[inline]
    pub(crate) fn decide(&self, tat: u64, now: u64, cost: u64, shaper: bool) -> Transition {
        let start = tat.max(now);
        let backlog = start - now;
        let need = cost.saturating_mul(self.interval.get());
        let after = backlog.saturating_add(need);
        match start.checked_add(need) {
            Some(next) if after <= self.tolerance => Transition {
                state: next,
                decision: Decision::allowed(
                    self.interval.divide(self.tolerance - after),
                    after,
                    if shaper { backlog } else { 0 },
                ),
            },
            // Past the end of representable time the request can never be scheduled.
            None => Transition::refuse(tat, Decision::denied(0, u64::MAX, backlog)),
            Some(_) => Transition::refuse(
                tat,
                Decision::denied(
                    self.interval.divide(self.tolerance.saturating_sub(backlog)),
                    after - self.tolerance,
                    backlog,
                ),
            ),
        }
    }
}
