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
/// used instead: the lag `L` above is then that thread's interval, which tollgate does not know
/// (behind a 250 ms upkeep, a `1000/s burst 1` bucket sees time move in 250 ms steps and admits
/// a burst at each), and if that library later stops it, coarse time stops advancing. Use the
/// [`PreciseClock`](super::PreciseClock) in such a process. If the upkeep thread cannot be
/// spawned (a thread limit, no memory), every coarse clock of the process reads the precise
/// time instead, as [`is_coarse`](Self::is_coarse) then says: quanta would otherwise leave
/// its coarse time frozen at the failed start, and a limiter on it would never refill.
///
/// ```
/// use tollgate::{Clock, CoarseClock};
///
/// let clock = CoarseClock::new();
/// assert!(clock.now().as_nanos() > 0);
/// assert!(clock.is_coarse()); // its upkeep thread runs
/// ```
#[derive(Clone, Copy, Debug)]
pub struct CoarseClock {
    origin: &'static Origin,
    /// Whether an upkeep thread refreshes quanta's recent time (tollgate's or another
    /// library's); `false` when tollgate's could not be spawned, and every reading is precise.
    recent: bool,
}

/// What became of tollgate's attempt to start quanta's upkeep thread.
#[derive(Debug)]
enum Upkeep {
    /// tollgate's thread runs; the handle keeps it running for the life of the process.
    Started { _running: quanta::Handle },
    /// Another library's upkeep thread already ran.
    Shared,
    /// The thread could not be spawned: quanta's recent time stays at the failed start's
    /// reading forever (quanta sets it before spawning), so it must not be read.
    Unavailable,
}

impl CoarseClock {
    /// The coarse clock, starting the shared upkeep thread if it is not running yet.
    pub fn new() -> CoarseClock {
        static UPKEEP: OnceLock<Upkeep> = OnceLock::new();
        let origin = Origin::get();
        let upkeep = UPKEEP.get_or_init(|| {
            match quanta::Upkeep::new_with_clock(COARSE_UPKEEP_INTERVAL, origin.clock.clone()).start() {
                Ok(_running) => Upkeep::Started { _running },
                Err(quanta::Error::UpkeepRunning) => Upkeep::Shared,
                Err(quanta::Error::FailedToSpawnUpkeepThread(_)) => Upkeep::Unavailable,
            }
        });
        CoarseClock {
            origin,
            recent: !matches!(upkeep, Upkeep::Unavailable),
        }
    }

    /// Whether this clock reads the coarse time an upkeep thread publishes: `false` only when
    /// the upkeep thread could not be spawned, in which case it reads the precise time (as a
    /// [`PreciseClock`](super::PreciseClock) does), so that limiters still refill.
    pub fn is_coarse(&self) -> bool {
        self.recent
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
        match self.recent {
            true => self.origin.timestamp(quanta::Instant::recent()),
            false => self.origin.now(),
        }
    }
}
