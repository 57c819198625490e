//! The precise clock: one quanta reading (the TSC where it is reliable) per decision.

use super::{Clock, Origin};
use crate::Timestamp;

/// Reads quanta's high-resolution clock on every call (about 10-20 ns; the TSC where the CPU
/// has an invariant one). The default clock of [`DirectLimiter::new`](crate::DirectLimiter::new).
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
