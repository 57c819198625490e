//! A seeded pseudo-random generator, so that every run replays exactly the same traffic.

/// SplitMix64 (Steele, Lea and Flood, 2014): 64 bits of state, one add and two multiplies per
/// draw. Plenty for generating arrival times; nothing here is cryptographic.
#[derive(Clone, Debug)]
pub(crate) struct Rng {
    state: u64,
}

impl Rng {
    /// A generator for `seed`, mixed with `stream` so that each client draws its own sequence.
    pub(crate) fn new(seed: u64, stream: u64) -> Rng {
        let mut mixer = Rng {
            state: seed ^ stream.wrapping_mul(0xD605_BBB5_8C8A_BBB5),
        };
        Rng {
            state: mixer.next_u64(),
        }
    }

    /// The next 64 uniformly distributed bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `(0, 1]`: never zero, so its logarithm is finite.
    pub(crate) fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[low, high)`.
    pub(crate) fn between(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * (1.0 - self.unit())
    }

    /// An exponentially distributed duration with mean `mean_nanos`, in whole nanoseconds: the
    /// gap between two arrivals of a Poisson process.
    pub(crate) fn exponential_nanos(&mut self, mean_nanos: f64) -> u64 {
        (-self.unit().ln() * mean_nanos).round() as u64
    }
}
