//! The coarse clock: a shared timestamp that quanta's upkeep thread refreshes.

use std::sync::OnceLock;
use std::time::Duration;

use super::{Clock, Origin};
use crate::Timestamp;

/// How often the upkeep thread refreshes the coarse time.
pub const COARSE_UPKEEP_INTERVAL: Duration = Duration::from_millis(1);

/// Reads the time quanta's upkeep thread last published: one load, no clock instruction.
///
/// The reading lags the real time by up to the upkeep interval (1 ms, plus scheduling delay
/// under load). A lagging clock only makes a limiter stricter: refill is seen late, so a bucket
/// refills up to one interval late and a window opens up to one interval late; it never admits
/// more than the quota.
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
