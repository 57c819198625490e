//! Division of `u64`s by a divisor fixed at construction, by multiplication.
//!
//! A hardware 64-bit division costs 10 to 40 cycles, as much as the rest of a decision. The
//! divisors on the decision path (the window lengths) never change, so each is turned once into
//! a 128-bit reciprocal `c = ceil(2^128 / d)`; then for every `u64` n, `n / d == (c * n) >> 128`
//! exactly (Lemire, Kaser and Kurz, "Faster remainder by direct computation", 2019: exact when
//! the reciprocal has at least `64 + log2(d)` fractional bits, and here it has 128). Two
//! multiplications, no branch but the `d == 1` case. (The buckets divide by their emission
//! interval only when a `Decision` is asked for its `remaining`.)

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

/// A divisor with a 64-bit multiplier and a shift, exact for numerators up to a bound: one
/// multiplication instead of [`Divisor`]'s two, where the numerators are known to be small.
///
/// With `L = ceil(log2(d))` and `F = 63 + L`, the multiplier `c = ceil(2^F / d)` fits 64 bits
/// (`2^(L - 1) < d`), and with `e = c * d - 2^F` (`0 <= e < d`), `n / d == (n * c) >> F` for
/// every `n` with `n * e < 2^F`: writing `n = q * d + r`,
/// `n * c / 2^F = q + r / d + n * e / (d * 2^F) < q + (d - 1) / d + 1 / d`. That holds for every
/// `n < 2^63` (`e < d <= 2^L`), and for every `u64` when `e == 0` (a power of two).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BoundedDivisor {
    multiplier: u64,
    /// `F - 64`.
    shift: u32,
    /// The largest numerator the quotient is exact for.
    max: u64,
}

impl BoundedDivisor {
    /// `divisor` must be at least 1 (every caller validates that first). A divisor of 1 has no
    /// 64-bit multiplier: it is exact for 0 alone.
    pub(crate) const fn new(divisor: u64) -> BoundedDivisor {
        assert!(divisor > 0, "a divisor is at least 1");
        if divisor == 1 {
            return BoundedDivisor {
                multiplier: u64::MAX,
                shift: 0,
                max: 0,
            };
        }
        // ceil(log2(divisor)), 1 to 64.
        let bits = u64::BITS - (divisor - 1).leading_zeros();
        let power = 1u128 << (63 + bits);
        let multiplier = power.div_ceil(divisor as u128);
        let excess = multiplier * divisor as u128 - power;
        // Exact for every `n <= (2^F - 1) / e`; for every `n` when `e == 0` (a power of two).
        let max = match (power - 1).checked_div(excess) {
            Some(max) if max < u64::MAX as u128 => max as u64,
            _ => u64::MAX,
        };
        BoundedDivisor {
            // Below 2^64: see the type's documentation.
            multiplier: multiplier as u64,
            shift: bits - 1,
            max,
        }
    }

    /// The largest numerator [`divide`](Self::divide) is exact for: at least `2^63 - 1` for
    /// every divisor but 1.
    pub(crate) const fn max(&self) -> u64 {
        self.max
    }

    /// `n / divisor`, rounded down, for `n <= max()`. Only the tests divide now (the sliding
    /// window's `Decision` divides when asked); the window's 64-bit path still ends where this
    /// division stopped being exact (`SlidingWindow`'s `fast_end`), as its tests pin.
    #[cfg_attr(not(test), allow(dead_code))]
    #[inline]
    pub(crate) const fn divide(&self, n: u64) -> u64 {
        ((n as u128 * self.multiplier as u128) >> 64) as u64 >> self.shift
    }
}

#[cfg(test)]
mod tests {
    use super::{BoundedDivisor, Divisor};
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

    fn check_bounded(d: u64, n: u64) {
        let divisor = BoundedDivisor::new(d);
        if n <= divisor.max() {
            assert_eq!(
                divisor.divide(n),
                n / d,
                "{n} / {d} (exact up to {})",
                divisor.max()
            );
        }
    }

    #[test]
    fn bounded_edges() {
        assert_eq!(BoundedDivisor::new(1).max(), 0);
        assert_eq!(BoundedDivisor::new(1).divide(0), 0);
        for k in 1..64 {
            assert_eq!(BoundedDivisor::new(1 << k).max(), u64::MAX, "2^{k}");
        }
        for d in [
            2,
            3,
            5,
            7,
            10,
            1_000_000_000,
            86_400_000_000_000,
            u64::MAX / 2,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let divisor = BoundedDivisor::new(d);
            assert!(divisor.max() >= (1 << 63) - 1, "{d}");
            for n in [
                0,
                1,
                d - 1,
                d,
                d.saturating_add(1),
                divisor.max() - 1,
                divisor.max(),
            ] {
                check_bounded(d, n);
            }
        }
        // Past its bound the quotient may be wrong: 7's multiplier is `(2^66 + 6) / 7`, 6 too
        // many, so numerators of 2^66 / 6 and above can land on the next quotient.
        let seven = BoundedDivisor::new(7);
        assert_eq!(seven.max(), 12_297_829_382_473_034_410); // (2^66 - 1) / 6
        let n = u64::MAX - 2; // 6 modulo 7
        assert_ne!(seven.divide(n), n / 7);
    }

    proptest! {
        #[test]
        fn matches_hardware_division(d in 1..=u64::MAX, n: u64) {
            check(d, n);
        }

        #[test]
        fn bounded_matches_hardware_division_up_to_its_bound(d in 1..=u64::MAX, n: u64, k in 0u64..1 << 20) {
            let max = BoundedDivisor::new(d).max();
            // Anywhere up to the bound, just below it, and the largest remainder near it.
            let near = ((max / d).saturating_sub(k) * d).saturating_add(d - 1);
            for n in [n, n % max.saturating_add(1), max.saturating_sub(k), near] {
                check_bounded(d, n);
            }
        }

        #[test]
        fn matches_near_multiples(d in 1u64..=1 << 40, k in 0u64..=1 << 20, delta in 0u64..3) {
            let n = (d * k).saturating_add(delta).saturating_sub(1);
            check(d, n);
        }
    }
}
