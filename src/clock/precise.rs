//! The precise clock: one quanta reading (the TSC where it is reliable) per decision.

use super::{Clock, Origin};
use crate::Timestamp;

/// Reads quanta's high-resolution clock on every call (about 10-20 ns; the TSC where the CPU
/// has an invariant one). The default clock of [`DirectLimiter::new`](crate::DirectLimiter::new).
///
/// Where a decision's state is not in the cache (a keyed limiter over far more keys than the
/// cache holds), a read of the time-stamp counter can cost much more than its own time: on the
/// virtual machine of `docs/benchmarks.md` (an Intel Xeon under KVM), one bare read per decision
/// over 1,000,000 keys took each decision from 57 to 125 ns (keys present) and from 87 to 169 ns
/// (keys inserted), where a [`CoarseClock`](crate::CoarseClock) read added about 5 ns
/// (`benches/peers/src/bin/clock_read_cost.rs`, medians of three rounds). Such tables decide
/// faster on the coarse clock, if its lag (up to its upkeep interval) is acceptable.
///
/// ```
/// use tollgate::{Clock, PreciseClock};
///
/// let clock = PreciseClock::new();
/// let (a, b) = (clock.now(), clock.now());
/// assert!(b >= a);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct PreciseClock {
    origin: &'static Origin,
}

impl PreciseClock {
    /// The precise clock. The first clock of a process calibrates quanta (up to a few hundred
    /// milliseconds, once); later ones are free.
    pub fn new() -> PreciseClock {
        PreciseClock {
            origin: Origin::get(),
        }
    }
}

impl Default for PreciseClock {
    fn default() -> Self {
        PreciseClock::new()
    }
}

impl Clock for PreciseClock {
    #[inline]
    fn now(&self) -> Timestamp {
        self.origin.now()
    }
}
