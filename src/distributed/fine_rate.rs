//! A bucket's emission interval that is not a whole number of microseconds, run exactly
//! through Redis: every time is a pair of whole microseconds and a remainder in `1/d` µs.
//!
//! `T = period / count` is `num / d` µs in lowest terms (`d = 1000 * count / gcd(period_ns,
//! 1000 * count)`). The client (here, in 128 bits) computes `cost * T` and `burst * T` as pairs
//! `(whole µs, remainder < d)` and sends them; `gcra.lua` and `gcra_refund.lua` only add,
//! subtract and compare pairs with a carry, every value below 2^53, and keep the TAT as
//! `<i8i8i8>` (whole µs, remainder, `d`). A rate whose `T` is whole µs (`d == 1`) keeps the
//! 8-byte TAT and arguments and never reaches this module.
//!
//! The replies are pairs too, and the decision is made here from them in units of `1/d` µs:
//! the same GCRA as the core's wide bucket, its durations rounded up to whole nanoseconds.

use super::algorithm::MAX_SPAN_MICROS;
use super::error::RedisConfigError;
use crate::{Decision, Quota};

/// The largest denominator a script takes, 2^43 (every `d` of a count up to `u32::MAX` is below
/// `1000 * 2^32 < 2^42`): `gcra_refund.lua` compares `remainder * 1000` with `999 * d`, below
/// 2^53.
pub(crate) const MAX_DENOMINATOR: u64 = 1 << 43;

/// Nanoseconds per microsecond.
const MICROS: u128 = 1_000;

/// A bucket's exact emission interval and tolerance, in units of `1/d` µs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FineRate {
    /// `T * d`: the interval in units of `1/d` µs.
    interval: u128,
    /// The denominator, at least 2.
    d: u64,
    /// `burst * T * d`.
    tolerance: u128,
    /// `burst`.
    capacity: u64,
}

impl FineRate {
    /// The exact rate of `quota` (its count per period, with its burst), or `None` when `T` is a
    /// whole number of microseconds (the 8-byte form runs it exactly).
    ///
    /// # Errors
    /// [`RedisConfigError::BeyondExactIntegers`] when `burst * T` passes 2^51 µs, or when the
    /// denominator passes [`MAX_DENOMINATOR`] (a count above 8.8e9, about 2^33, whose period it does
    /// not divide: count in larger units).
    pub(crate) fn of(algorithm: &'static str, quota: &Quota) -> Result<Option<FineRate>, RedisConfigError> {
        let period = u128::from(quota.period_nanos());
        let scale = u128::from(quota.count()) * MICROS;
        let common = gcd(period, scale);
        let (interval, d) = (period / common, scale / common);
        if d == 1 {
            return Ok(None);
        }
        let d = u64::try_from(d).ok().filter(|&d| d <= MAX_DENOMINATOR).ok_or(
            RedisConfigError::BeyondExactIntegers {
                algorithm,
                parameter: "denominator of the emission interval (1/d µs; count in larger units)",
                value: u64::try_from(d).unwrap_or(u64::MAX),
                max: MAX_DENOMINATOR,
            },
        )?;
        let capacity = quota.burst();
        let tolerance = u128::from(capacity) * interval;
        // The tolerance's whole µs, rounded up, at most 2^51: a TAT ahead of now (below 2^52)
        // by at most that stays below 2^53.
        let span = u128::from(MAX_SPAN_MICROS) * u128::from(d);
        if tolerance > span {
            return Err(RedisConfigError::BeyondExactIntegers {
                algorithm,
                parameter: "burst (burst * T)",
                value: capacity,
                max: u64::try_from(span / interval).unwrap_or(u64::MAX),
            });
        }
        Ok(Some(FineRate {
            interval,
            d,
            tolerance,
            capacity,
        }))
    }

    /// `T` rounded up to whole nanoseconds (what the bucket reports; decisions use `T`).
    pub(crate) fn rounded_interval_nanos(&self) -> u64 {
        self.nanos_up(self.interval)
    }

    /// `x` units of `1/d` µs as the pair (whole µs, remainder).
    fn pair(&self, x: u128) -> (u64, u64) {
        let d = u128::from(self.d);
        // Whole parts at most 2^51 (`x` at most the tolerance, checked at construction).
        (
            u64::try_from(x / d).unwrap_or(u64::MAX),
            u64::try_from(x % d).unwrap_or(0),
        )
    }

    /// `cost * T` in units of `1/d` µs (`cost` at most `burst`: at most the tolerance).
    fn need(&self, cost: u64) -> u128 {
        u128::from(cost) * self.interval
    }

    /// The scripts' first argument (`prologue.lua`): `cost`, `cost * T` and `burst * T` in whole
    /// µs [, `now`], then the two remainders and `d`; 48 bytes, or 56 with `now`.
    pub(crate) fn arguments(&self, cost: u64, now: Option<i64>) -> ([u8; 56], usize) {
        let (need, need_rem) = self.pair(self.need(cost.min(self.capacity)));
        let (tolerance, tolerance_rem) = self.pair(self.tolerance);
        let mut bytes = [0; 56];
        let mut at = 0;
        let mut put = |value: [u8; 8]| {
            bytes[at..at + 8].copy_from_slice(&value);
            at += 8;
        };
        for value in [cost, need, tolerance] {
            put(value.to_le_bytes());
        }
        if let Some(now) = now {
            put(now.to_le_bytes());
        }
        for value in [need_rem, tolerance_rem, self.d] {
            put(value.to_le_bytes());
        }
        (bytes, at)
    }

    /// A pair `(whole, remainder)` a script sent, in units of `1/d` µs; `None` unless both are
    /// non-negative and the remainder below `d`.
    fn scaled_pair(&self, whole: i64, rem: i64) -> Option<u128> {
        let (whole, rem) = (u64::try_from(whole).ok()?, u64::try_from(rem).ok()?);
        (rem < self.d).then(|| u128::from(whole) * u128::from(self.d) + u128::from(rem))
    }

    /// `x` units of `1/d` µs in whole nanoseconds, rounded up (saturating).
    fn nanos_up(&self, x: u128) -> u64 {
        u64::try_from((x * MICROS).div_ceil(u128::from(self.d))).unwrap_or(u64::MAX)
    }

    /// Whole units in `x` of room.
    fn units(&self, x: u128) -> u64 {
        u64::try_from(x / self.interval).unwrap_or(u64::MAX)
    }

    /// The decision of `gcra.lua`'s reply `[whole, remainder]` (admitted: the TAT's lead on
    /// now after the request, `whole >= 0`; refused: `[-1 - lead, remainder]` before it), for a
    /// request of weight `cost`; `shaper` for the leaky bucket (an admission waits for its
    /// slot); `max_delay` the longest wait a `'slot'` call allowed, whole µs. `None` for a pair
    /// that is no such reply, or one whose admission this arithmetic does not make.
    pub(crate) fn decision(
        &self,
        [whole, rem]: [i64; 2],
        cost: u64,
        shaper: bool,
        max_delay: Option<u64>,
    ) -> Option<Decision> {
        let need = self.need(cost);
        let admitted = whole >= 0;
        let backlog = match admitted {
            true => self.scaled_pair(whole, rem)?.checked_sub(need)?,
            false => self.scaled_pair(-1 - whole, rem)?,
        };
        let after = backlog + need;
        let max = max_delay.map(|max| u128::from(max) * u128::from(self.d));
        let decision = match max {
            Some(max) if backlog > max => {
                let fits = self.nanos_up(backlog - max);
                let retry = match after <= self.tolerance {
                    true => fits,
                    false => self.nanos_up(after - self.tolerance).max(fits),
                };
                Decision::denied(0, retry, self.nanos_up(backlog))
            }
            _ if cost == 0 || after <= self.tolerance => {
                let room = self.tolerance.saturating_sub(after);
                let delay = if shaper { self.nanos_up(backlog) } else { 0 };
                Decision::allowed(self.units(room), self.nanos_up(after), delay)
            }
            _ => Decision::denied(
                self.units(self.tolerance.saturating_sub(backlog)),
                self.nanos_up(after - self.tolerance),
                self.nanos_up(backlog),
            ),
        };
        (decision.is_allowed() == admitted).then_some(decision)
    }

    /// A slot's end the script sent (the TAT after an admission, a pair) as nanoseconds since
    /// the epoch, rounded up: what a refund of the slot names (`gcra_refund.lua` rounds the TAT
    /// it compares the same way).
    pub(crate) fn end_nanos(&self, whole: i64, rem: i64) -> Option<u64> {
        let end = self.scaled_pair(whole, rem)?;
        Some(self.nanos_up(end))
    }
}

/// Greatest common divisor (Euclid).
fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(quota: &str) -> Option<FineRate> {
        FineRate::of("token bucket", &quota.parse().unwrap()).unwrap()
    }

    #[test]
    fn whole_microsecond_intervals_need_no_remainder() {
        for quota in ["1000/s", "10/s burst 3", "1/ms", "1/day", "500000/s"] {
            assert_eq!(rate(quota), None, "{quota}");
        }
    }

    #[test]
    fn the_interval_is_reduced_to_lowest_terms() {
        // 30000/s: T = 1e6 / 30000 = 100/3 µs.
        let thirty = rate("30000/s").unwrap();
        assert_eq!((thirty.interval, thirty.d), (100, 3));
        assert_eq!(thirty.rounded_interval_nanos(), 33_334);
        // 7/ms: T = 1000/7 µs. u32::MAX per day: 86_400_000_000 / 4_294_967_295 µs.
        assert_eq!(rate("7/ms").unwrap().d, 7);
        let day = rate("4294967295/day").unwrap();
        assert_eq!(
            day.interval * u128::from(u32::MAX),
            86_400_000_000 * u128::from(day.d)
        );
    }

    #[test]
    fn arguments_carry_the_pairs_after_the_common_fields() {
        let thirty = rate("30000/s burst 10").unwrap();
        let (bytes, length) = thirty.arguments(2, Some(7));
        let words: Vec<u64> = bytes[..length]
            .chunks_exact(8)
            .map(|chunk| u64::from_le_bytes(chunk.try_into().unwrap()))
            .collect();
        // 2 * 100/3 = 66 + 2/3; 10 * 100/3 = 333 + 1/3.
        assert_eq!(words, [2, 66, 333, 7, 2, 1, 3]);
        assert_eq!(thirty.arguments(2, None).1, 48);
    }

    #[test]
    fn replies_become_exact_decisions() {
        let thirty = rate("30000/s burst 2").unwrap();
        // Admitted with the TAT 66 2/3 µs ahead after a unit: 33 1/3 µs of backlog before.
        let admitted = thirty.decision([66, 2], 1, true, None).unwrap();
        assert!(admitted.is_allowed());
        assert_eq!(admitted.remaining(), 0);
        assert_eq!(admitted.reset_after().as_nanos(), 66_667);
        assert_eq!(admitted.delay().as_nanos(), 33_334);
        // Refused with 66 2/3 ahead: one unit fits after 33 1/3 µs.
        let refused = thirty.decision([-67, 2], 1, false, None).unwrap();
        assert!(!refused.is_allowed());
        assert_eq!(refused.retry_after().as_nanos(), 33_334);
        // A refusal the arithmetic admits, a remainder of d or more: no decision.
        assert_eq!(thirty.decision([-1, 0], 1, false, None), None);
        assert_eq!(thirty.decision([66, 3], 1, false, None), None);
    }

    #[test]
    fn extreme_pairs_are_refused_or_read_never_a_panic() {
        let day = rate("4294967295/day burst 4294967295").unwrap();
        for whole in [i64::MIN, -1, 0, i64::MAX] {
            for rem in [i64::MIN, -1, 0, 1, i64::MAX] {
                for cost in [0, 1, u64::from(u32::MAX)] {
                    for max in [None, Some(0), Some(u64::MAX >> 11)] {
                        let _ = day.decision([whole, rem], cost, true, max);
                    }
                }
                let _ = day.end_nanos(whole, rem);
            }
        }
        // A negative remainder, or one of `d` or more, is no pair.
        assert_eq!(day.decision([5, -1], 0, false, None), None);
        assert_eq!(day.end_nanos(5, i64::MAX), None);
    }

    #[test]
    fn out_of_range_rates_are_typed_errors() {
        let quota: Quota = "4294967295/ms burst 4294967295".parse().unwrap();
        assert!(FineRate::of("token bucket", &quota).is_ok());
        let huge: Quota = Quota::new(u64::MAX, std::time::Duration::from_nanos(999_999_999)).unwrap();
        assert!(matches!(
            FineRate::of("token bucket", &huge),
            Err(RedisConfigError::BeyondExactIntegers { .. })
        ));
    }
}
