//! A deterministic Zipf-like key sequence: key `k` of `0..n` comes up with probability
//! proportional to `1 / (k + 1)^s`, so a few keys are hot and most are cold, as client traffic is.
//!
//! The sampler inverts the cumulative distribution by binary search over a precomputed table; the
//! uniform numbers come from SplitMix64 with a fixed seed, so every run and every contender sees
//! the very same sequence. Sequences are built before any timing starts.

/// The exponent the benchmarks use: 0.99, YCSB's "zipfian" constant.
pub const ZIPF_EXPONENT: f64 = 0.99;

/// The random-number seed of every benchmark sequence.
pub const ZIPF_SEED: u64 = 0x5EED_2026;

/// SplitMix64 (Steele, Lea, Flood 2014): a tiny, well-mixed, deterministic generator.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform number in `[0, 1)`, from the top 53 bits.
    pub fn next_unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Zipf's distribution over `0..n` with exponent `s`, by inversion.
#[derive(Debug, Clone)]
pub struct Zipf {
    /// `cumulative[k]` = P(key <= k); the last entry is 1.
    cumulative: Vec<f64>,
}

impl Zipf {
    /// The distribution over `0..n` (`n` at least 1) with exponent `s`.
    pub fn new(n: u64, s: f64) -> Zipf {
        assert!(n >= 1, "a Zipf distribution needs at least one key");
        let mut cumulative = Vec::with_capacity(n as usize);
        let mut total = 0.0;
        for rank in 1..=n {
            total += (rank as f64).powf(-s);
            cumulative.push(total);
        }
        for weight in &mut cumulative {
            *weight /= total;
        }
        Zipf { cumulative }
    }

    /// The key at which the cumulative distribution first reaches `unit` (in `[0, 1)`).
    pub fn key_at(&self, unit: f64) -> u64 {
        let index = self.cumulative.partition_point(|&below| below <= unit);
        index.min(self.cumulative.len() - 1) as u64
    }
}

/// `len` keys of `0..keys` drawn from [`Zipf`] with [`ZIPF_EXPONENT`], from [`ZIPF_SEED`].
pub fn zipf_sequence(keys: u64, len: usize) -> Vec<u64> {
    let zipf = Zipf::new(keys, ZIPF_EXPONENT);
    let mut random = SplitMix64::new(ZIPF_SEED);
    (0..len).map(|_| zipf.key_at(random.next_unit())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequence_is_deterministic_in_range_and_skewed() {
        let keys = 1_000;
        let first = zipf_sequence(keys, 100_000);
        assert_eq!(first, zipf_sequence(keys, 100_000), "same seed, same sequence");
        assert!(first.iter().all(|&key| key < keys));

        let mut counts = vec![0u64; keys as usize];
        for &key in &first {
            counts[key as usize] += 1;
        }
        // With s = 0.99 over 1,000 keys, P(key 0) is about 0.13 and P(key 999) about 0.0002.
        let p0 = counts[0] as f64 / first.len() as f64;
        assert!((0.11..0.15).contains(&p0), "key 0 drawn with frequency {p0}");
        assert!(counts[0] > counts[1] && counts[1] > counts[10] && counts[10] > counts[500]);
    }

    #[test]
    fn one_key_is_always_that_key() {
        let zipf = Zipf::new(1, ZIPF_EXPONENT);
        assert_eq!(zipf.key_at(0.0), 0);
        assert_eq!(zipf.key_at(0.999_999), 0);
    }
}
