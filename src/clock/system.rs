//! The system's wall clock, read at every decision.

use std::time::SystemTime;

use super::Clock;
use crate::time::duration_to_nanos_saturating;
use crate::Timestamp;

/// Reads the system's wall clock (`SystemTime::now()`) at every decision.
///
/// The clock for processes that must share one timeline, such as a fleet deciding through Redis
/// on its own time (`tollgate::distributed::TimeSource::Client`, feature `redis`) on
/// hosts that keep their system time in sync. The [`PreciseClock`](super::PreciseClock) and
/// [`CoarseClock`](super::CoarseClock) are anchored to the system time once per process and
/// then run on quanta's counter, at the rate quanta estimated when the process started: they
/// drift from the system time by that estimate's error, differently in each process (parts per
/// million: 2 ppm is 0.17 s a day).
/// This clock follows the system time as the host keeps it, so window boundaries stay on
/// wall-clock multiples of the window however long the process runs.
///
/// It steps back when the system time is set back: the limiters treat an earlier reading as no
/// time having passed, and never admit more for it (`docs/design.md`, "Time that goes
/// backwards"). A system time before 1970 reads as the epoch. Each reading is a system call
/// (through the vDSO on Linux), dearer than the precise clock's counter read.
///
/// ```
/// use tollgate::{Clock, SystemClock};
/// use std::time::{SystemTime, UNIX_EPOCH};
///
/// let before = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
/// let now = SystemClock.now().as_nanos();
/// assert!(u128::from(now) >= before);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> Timestamp {
        let since_epoch = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp::from_nanos(duration_to_nanos_saturating(since_epoch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn system_nanos() -> u64 {
        duration_to_nanos_saturating(SystemTime::now().duration_since(UNIX_EPOCH).unwrap())
    }

    /// A reading lies between two system-time readings taken around it: it is the system time,
    /// not a reading anchored once and run on another counter.
    #[test]
    fn reads_the_system_time() {
        for _ in 0..1_000 {
            let before = system_nanos();
            let now = SystemClock.now().as_nanos();
            let after = system_nanos();
            assert!(before <= now && now <= after, "{before} <= {now} <= {after}");
        }
    }
}
