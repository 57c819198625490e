//! The coarse clock: a shared timestamp that quanta's upkeep thread refreshes.

use std::sync::OnceLock;
use std::time::Duration;

use super::{Clock, Origin};
use crate::Timestamp;

/// How often the upkeep thread refreshes the coarse time.
pub const COARSE_UPKEEP_INTERVAL: Duration = Duration::from_millis(1);

/// Reads the time quanta's upkeep thread last published: one load, no clock instruction.
///
/// The reading lags the real time by anything from 0 to the upkeep interval (1 ms, more when the
/// upkeep thread is delayed under load), and the lag changes from one reading to the next: it
/// grows until the upkeep thread publishes, then drops to 0. A limiter is exact in the time it
/// reads, so what the lag changes is the real time between decisions: two readings can be up to
/// the largest lag `L` closer together, or further apart, than the real instants they were
/// taken at. Over any real span `D` a limiter on this clock admits at most what its quota allows
/// over `D + L` (for `L` = 1 ms, one unit more at 1000/s, none more at rates below one per
/// millisecond and burst 1), and window boundaries fall up to `L` after the wall clock's. It is
/// not "only stricter": use the [`PreciseClock`](super::PreciseClock) where a quota must hold to
/// the microsecond.
///
/// quanta allows one upkeep thread per process. The first `CoarseClock::new` starts it (with
/// [`COARSE_UPKEEP_INTERVAL`]) and keeps it running for the life of the process; every other
/// coarse clock shares it. If another library already started quanta's upkeep, its thread is
/// used instead (and if that library later stops it, coarse time stops advancing: use the
/// [`PreciseClock`](super::PreciseClock) in such a process).
///
/// ```
/// use tollgate::{Clock, CoarseClock};
///
/// let clock = CoarseClock::new();
/// assert!(clock.now().as_nanos() > 0);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct CoarseClock {
    origin: &'static Origin,
}

impl CoarseClock {
    /// The coarse clock, starting the shared upkeep thread if it is not running yet.
    pub fn new() -> CoarseClock {
        static UPKEEP: OnceLock<Option<quanta::Handle>> = OnceLock::new();
        let origin = Origin::get();
        UPKEEP.get_or_init(|| {
            // An error means another upkeep thread already runs (or none could be spawned, in
            // which case quanta's recent time falls back to a full clock read): both work.
            quanta::Upkeep::new_with_clock(COARSE_UPKEEP_INTERVAL, origin.clock.clone())
                .start()
                .ok()
        });
        CoarseClock { origin }
    }
}

impl Default for CoarseClock {
    fn default() -> Self {
        CoarseClock::new()
    }
}

impl Clock for CoarseClock {
    #[inline]
    fn now(&self) -> Timestamp {
        self.origin.timestamp(quanta::Instant::recent())
    }
}
