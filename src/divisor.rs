//! Division of `u64`s by a divisor fixed at construction, by multiplication.
//!
//! A hardware 64-bit division costs 10 to 40 cycles, as much as the rest of a decision. The
//! divisors on the decision path (the window length, the emission interval) never change, so
//! each is turned once into a 128-bit reciprocal `c = ceil(2^128 / d)`; then for every `u64` n,
//! `n / d == (c * n) >> 128` exactly (Lemire, Kaser and Kurz, "Faster remainder by direct
//! computation", 2019: exact when the reciprocal has at least `64 + log2(d)` fractional bits,
//! and here it has 128). Two multiplications, no branch but the `d == 1` case.

/// A divisor with its precomputed reciprocal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Divisor {
    divisor: u64,
    /// `ceil(2^128 / divisor)`, or 0 for a divisor of 1 (where it would not fit).
    reciprocal: u128,
}

impl Divisor {
    /// `divisor` must be at least 1 (every caller validates that first).
    pub(crate) const fn new(divisor: u64) -> Divisor {
        assert!(divisor > 0, "a divisor is at least 1");
        let reciprocal = if divisor == 1 {
            0
        } else {
            u128::MAX / divisor as u128 + 1
        };
        Divisor { divisor, reciprocal }
    }

    pub(crate) const fn get(&self) -> u64 {
        self.divisor
    }

    /// `n / divisor`, rounded down.
    #[inline]
    pub(crate) const fn divide(&self, n: u64) -> u64 {
        if self.divisor == 1 {
            return n;
        }
        let (high, low) = ((self.reciprocal >> 64) as u64, self.reciprocal as u64);
        // (c * n) >> 128 = (high * n + ((low * n) >> 64)) >> 64; the sum cannot overflow.
        let low_part = (low as u128 * n as u128) >> 64;
        ((high as u128 * n as u128 + low_part) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::Divisor;
    use proptest::prelude::*;

    fn check(d: u64, n: u64) {
        assert_eq!(Divisor::new(d).divide(n), n / d, "{n} / {d}");
    }

    #[test]
    fn edges() {
        let divisors = [
            1,
            2,
            3,
            7,
            10,
            1 << 32,
            (1 << 32) + 1,
            1_000_000_007,
            u64::MAX / 2,
            u64::MAX - 1,
            u64::MAX,
        ];
        let numerators = [
            0,
            1,
            2,
            3,
            u64::MAX / 3,
            (1 << 63) - 1,
            1 << 63,
            u64::MAX - 1,
            u64::MAX,
        ];
        for d in divisors {
            for n in numerators
                .into_iter()
                .chain([d - 1, d, d.saturating_add(1), d.saturating_mul(3)])
            {
                check(d, n);
            }
        }
    }

    proptest! {
        #[test]
        fn matches_hardware_division(d in 1..=u64::MAX, n: u64) {
            check(d, n);
        }

        #[test]
        fn matches_near_multiples(d in 1u64..=1 << 40, k in 0u64..=1 << 20, delta in 0u64..3) {
            let n = (d * k).saturating_add(delta).saturating_sub(1);
            check(d, n);
        }
    }
}
