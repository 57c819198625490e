//! The buckets' exact GCRA (the token bucket's and the shaper's), for a rate whose emission
//! interval is not a whole number of nanoseconds within 1%: time counted in units of `1 / count`
//! ns, in 128 bits.
//!
//! Scaling every time by `count` makes the emission interval whole: `T = period / count` ns is
//! `period` scaled units. So the bucket keeps its TAT as `tat * count` in a `u128`, and decides
//! with
//!
//! - `now' = now * count`,
//! - `T' = period` (per unit),
//! - `tolerance' = burst * period`,
//!
//! the same GCRA step as [`Gcra`](super::gcra::Gcra)'s, with no rounding. Only the answers are
//! rounded, to whole nanoseconds: retry-after, reset-after and the shaper's delay up (a client
//! told to retry in `x` is never refused at `x` for rounding, and a shaped request never
//! proceeds before its slot), the units remaining down.
//!
//! # Bounds
//! `count <= u32::MAX` ([`MAX_COUNT`]) and `burst * period <= u64::MAX * count` (a full bucket
//! refills within `u64::MAX` ns, as every bucket's `burst * T` does: else
//! [`QuotaError::BurstTooLarge`]). Then, for every `now` a [`Timestamp`](crate::Timestamp) holds
//! (up to `u64::MAX` ns): `now' < 2^96`, `tolerance' < 2^96`, a stored TAT is at most `now' +
//! tolerance' < 2^97`, and `backlog + need <= 2^98`: no `u128` step overflows, and no time is
//! refused. A wide rate's period is below `100 * count` ns (otherwise whole nanoseconds hold it
//! within 1%), so under 430 s: the periods of 1 ms to a day all fit these bounds.

use crate::error::QuotaError;
use crate::time::duration_to_nanos_saturating;
use crate::{Decision, Quota};

use super::Transition;

/// The largest count per period a wide bucket takes: `u32::MAX`, so that `now * count` fits 96
/// bits for every `now`. A finer rate with a larger count is refused with
/// [`QuotaError::RateTooFine`] (count in larger units).
pub(crate) const MAX_COUNT: u64 = u32::MAX as u64;

/// Validated parameters of an exact (wide) bucket: a token bucket's or a shaper's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WideGcra {
    /// The quota's count: the scale of every time (`1 / count` ns per scaled unit).
    count: u64,
    /// The quota's period, ns: `T` in scaled units.
    period: u64,
    /// `burst`: the most units admitted at one instant.
    capacity: u64,
    /// `burst * period`: how far ahead of `now'` the scaled TAT may run.
    tolerance: u128,
}

impl WideGcra {
    /// The exact bucket for `quota`, whose count is at most [`MAX_COUNT`].
    ///
    /// # Errors
    /// [`QuotaError::RateTooFine`] when the count is above [`MAX_COUNT`] (`interval` the
    /// whole-nanosecond interval rounding would have run it at);
    /// [`QuotaError::BurstTooLarge`] when a full bucket would take more than `u64::MAX` ns to
    /// refill.
    pub(crate) fn new(quota: &Quota) -> Result<WideGcra, QuotaError> {
        let (count, period, capacity) = (quota.count(), quota.period_nanos(), quota.burst());
        if count > MAX_COUNT {
            return Err(QuotaError::RateTooFine {
                count,
                period: quota.period(),
                interval: std::time::Duration::from_nanos(period.div_ceil(count)),
            });
        }
        // `burst * period <= u64::MAX * count`: both sides fit a `u128` (below 2^128 and 2^96).
        let tolerance = u128::from(capacity) * u128::from(period);
        let most = u128::from(u64::MAX) * u128::from(count);
        if tolerance > most {
            return Err(QuotaError::BurstTooLarge {
                burst: capacity,
                // At most `u64::MAX`, since `tolerance > most` needs `burst > most / period`.
                max: u64::try_from(most / u128::from(period)).unwrap_or(u64::MAX),
            });
        }
        Ok(WideGcra {
            count,
            period,
            capacity,
            tolerance,
        })
    }

    /// `T = period / count` rounded up to whole nanoseconds (what the bucket reports as its
    /// emission interval; its decisions use the exact ratio).
    pub(crate) const fn rounded_interval(&self) -> u64 {
        self.period.div_ceil(self.count)
    }

    /// A scaled TAT not after `now'` is a full bucket, exactly like a fresh one.
    pub(crate) fn is_idle(&self, tat: u128, now: u64) -> bool {
        tat <= self.scaled(now)
    }

    /// [`decide`](Self::decide) for a shaper's request that may wait at most `max_delay` ns
    /// for its slot, as [`Gcra::decide_within`](super::gcra::Gcra::decide_within) decides it:
    /// one whose delay (the backlog, rounded up to whole ns) would be longer is refused and
    /// nothing is stored. Its refusal has `remaining` 0, a retry-after of when the wait fits
    /// (the backlog less `max_delay`, rounded up), or the later of that and the full queue's
    /// own retry-after, and the backlog as its reset-after. Any other decision is `decide`'s,
    /// so with `max_delay` `u64::MAX` (a delay is at most that) it is `decide`.
    pub(crate) fn decide_within(&self, tat: u128, now: u64, cost: u64, max_delay: u64) -> Transition<u128> {
        let transition = self.decide(tat, now, cost, true);
        let backlog = tat.saturating_sub(self.scaled(now));
        let wait = self.nanos_up(backlog);
        if wait <= max_delay {
            return transition;
        }
        // `max_delay < wait` and `wait` rounds the backlog up: `max_delay * count < backlog`.
        let fits = self.nanos_up(backlog - u128::from(max_delay) * u128::from(self.count));
        let retry = match transition.decision.is_allowed() {
            true => fits,
            // Both conditions only become true as time passes: the later of the two instants.
            false => duration_to_nanos_saturating(transition.decision.retry_after()).max(fits),
        };
        Transition::refuse(tat, Decision::denied(0, retry, wait))
    }

    /// The GCRA step in scaled time: a request of weight `cost` at `now` starts at `max(tat,
    /// now')`, takes `cost * period` scaled units, and is admitted iff it ends within
    /// `tolerance'` of `now'`. With `shaper`, an admitted request reports its wait for its
    /// slot, `start - now'` rounded up to whole ns: below the tolerance, so it fits a `u64`.
    pub(crate) fn decide(&self, tat: u128, now: u64, cost: u64, shaper: bool) -> Transition<u128> {
        let now = self.scaled(now);
        let start = tat.max(now);
        let backlog = start - now;
        let need = u128::from(cost) * u128::from(self.period);
        let after = backlog + need;
        let delay = match shaper {
            true => self.nanos_up(backlog),
            false => 0,
        };
        if cost == 0 {
            // A weightless request takes no slot: always allowed, and nothing to store. The
            // shaper still has it wait its turn behind the queue, as any request.
            return Transition::refuse(
                tat,
                Decision::allowed(self.room(backlog), self.nanos_up(backlog), delay),
            );
        }
        if cost > self.capacity {
            // More than the whole bucket (only through `Algorithm::decide_wide`: the limiters
            // refuse that weight with `CostTooLarge`): it can never pass.
            return Transition::refuse(
                tat,
                Decision::denied(self.room(backlog), u64::MAX, self.nanos_up(backlog)),
            );
        }
        match after <= self.tolerance {
            true => Transition {
                state: start + need,
                decision: Decision::allowed(self.units(self.tolerance - after), self.nanos_up(after), delay),
            },
            false => Transition::refuse(
                tat,
                Decision::denied(
                    self.room(backlog),
                    self.nanos_up(after - self.tolerance),
                    self.nanos_up(backlog),
                ),
            ),
        }
    }

    /// `now` in scaled units: below 2^96 (see the module's bounds).
    fn scaled(&self, now: u64) -> u128 {
        u128::from(now) * u128::from(self.count)
    }

    /// Whole units in `scaled` units of room: at most `burst`, so it fits.
    fn units(&self, scaled: u128) -> u64 {
        u64::try_from(scaled / u128::from(self.period)).unwrap_or(u64::MAX)
    }

    /// Whole units that fit with the queue `backlog` scaled units ahead of now.
    fn room(&self, backlog: u128) -> u64 {
        self.units(self.tolerance.saturating_sub(backlog))
    }

    /// `scaled` units in whole nanoseconds, rounded up; `u64::MAX` past it (a TAT stored at a
    /// later time than a decision whose clock stepped back that far).
    fn nanos_up(&self, scaled: u128) -> u64 {
        u64::try_from(scaled.div_ceil(u128::from(self.count))).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn wide(count: u64, period: u64, burst: u64) -> WideGcra {
        let quota = Quota::new(count, Duration::from_nanos(period))
            .and_then(|quota| quota.with_burst(burst))
            .unwrap();
        WideGcra::new(&quota).unwrap()
    }

    #[test]
    fn three_per_ten_nanoseconds_admits_exactly_three_per_ten() {
        // T = 10/3 ns: a full burst of 3, then one unit at 10/3, 20/3 and 10 ns, rounded up.
        let bucket = wide(3, 10, 3);
        let mut tat = 0;
        for _ in 0..3 {
            let step = bucket.decide(tat, 1_000, 1, false);
            assert!(step.decision.is_allowed());
            tat = step.state;
        }
        let refused = bucket.decide(tat, 1_000, 1, false);
        assert!(!refused.decision.is_allowed());
        assert_eq!(refused.decision.retry_after(), Duration::from_nanos(4));
        assert_eq!(refused.decision.reset_after(), Duration::from_nanos(10));
        assert!(!bucket.decide(tat, 1_003, 1, false).decision.is_allowed());
        assert!(bucket.decide(tat, 1_004, 1, false).decision.is_allowed());
        // After 10 ns, all 3 again.
        assert!(bucket.decide(tat, 1_010, 3, false).decision.is_allowed());
        assert!(!bucket.decide(tat, 1_009, 3, false).decision.is_allowed());
    }

    #[test]
    fn a_shaper_of_three_per_ten_nanoseconds_waits_its_slots_rounded_up() {
        // Slots at 0, 10/3, 20/3 and 10 ns after 1_000: delays 0, 4, 7 and 10 (rounded up).
        let shaper = wide(3, 10, 4);
        let mut tat = 0;
        for delay in [0, 4, 7, 10] {
            let step = shaper.decide(tat, 1_000, 1, true);
            assert!(step.decision.is_allowed());
            assert_eq!(step.decision.delay(), Duration::from_nanos(delay));
            tat = step.state;
        }
        assert!(!shaper.decide(tat, 1_000, 1, true).decision.is_allowed());
        // At 1_001 a fifth request would wait 37/3 ns (13, rounded up): within a maximum of 9
        // it is refused, nothing stored, and told to retry when its wait is 9 (after 10/3 ns,
        // 4 rounded up; the queue has room after 7/3 ns already).
        let refused = shaper.decide_within(tat, 1_001, 1, 9);
        assert_eq!(refused.state, tat);
        assert!(!refused.decision.is_allowed());
        assert_eq!(refused.decision.remaining(), 0);
        assert_eq!(refused.decision.retry_after(), Duration::from_nanos(4));
        assert_eq!(refused.decision.reset_after(), Duration::from_nanos(13));
        assert!(!shaper.decide_within(tat, 1_004, 1, 9).decision.is_allowed());
        let passed = shaper.decide_within(tat, 1_005, 1, 9);
        assert!(passed.decision.is_allowed());
        assert_eq!(passed.decision.delay(), Duration::from_nanos(9));
        // No maximum: `decide` itself.
        assert_eq!(
            shaper.decide_within(tat, 1_001, 1, u64::MAX),
            shaper.decide(tat, 1_001, 1, true)
        );
    }

    #[test]
    fn the_largest_inputs_stay_within_their_bounds() {
        // `u32::MAX` per ms with the largest burst, at the last nanosecond: no overflow.
        let bucket = wide(MAX_COUNT, 1_000_000, u64::MAX);
        let full = bucket.decide(0, u64::MAX, u64::MAX, false);
        assert!(full.decision.is_allowed());
        assert_eq!(full.decision.remaining(), 0);
        let refused = bucket.decide(full.state, u64::MAX, 1, false);
        assert!(!refused.decision.is_allowed());
        // A clock stepped back to 0 saturates the answers, never wraps.
        let back = bucket.decide(full.state, 0, 1, false);
        assert_eq!(back.decision.reset_after(), Duration::from_nanos(u64::MAX));
    }

    #[test]
    fn past_the_bounds_is_a_typed_error() {
        let quota = Quota::new(MAX_COUNT + 1, Duration::from_secs(1)).unwrap();
        assert!(matches!(
            WideGcra::new(&quota),
            Err(QuotaError::RateTooFine { count, .. }) if count == MAX_COUNT + 1
        ));
        // 3 per 10 ns holds `burst * 10 / 3 <= u64::MAX` ns: burst at most floor(u64::MAX * 3 / 10).
        let max = u64::try_from(u128::from(u64::MAX) * 3 / 10).unwrap();
        let at = |burst| {
            WideGcra::new(
                &Quota::new(3, Duration::from_nanos(10))
                    .and_then(|quota| quota.with_burst(burst))
                    .unwrap(),
            )
        };
        assert!(at(max).is_ok());
        assert_eq!(
            at(max + 1),
            Err(QuotaError::BurstTooLarge { burst: max + 1, max })
        );
    }
}
