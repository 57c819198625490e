//! Where `now` comes from. Clocks are read once per decision, at the API edge; the decision
//! logic itself takes `now` as an argument.
//!
//! Every clock here reports nanoseconds since the UNIX epoch, so window boundaries fall on
//! multiples of the window on that timeline. The precise and coarse clocks are monotonic
//! readings of [`quanta`] anchored once per process to the system time: they start on the wall
//! clock and then drift from it by quanta's calibration error (parts per million, differently in
//! each process). [`SystemClock`] reads the system time itself, for processes that must share
//! one timeline.

mod coarse;
mod manual;
mod precise;
mod system;

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

pub use coarse::{CoarseClock, COARSE_UPKEEP_INTERVAL};
pub use manual::ManualClock;
pub use precise::PreciseClock;
pub use system::SystemClock;

use crate::time::duration_to_nanos_saturating;
use crate::Timestamp;

/// A source of timestamps for limiters.
///
/// A clock may step backwards (quanta's TSC across cores can, by a few nanoseconds): the
/// algorithms never admit more because of it, so clocks need not enforce monotonicity.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> Timestamp;
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Timestamp {
        (**self).now()
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now(&self) -> Timestamp {
        (**self).now()
    }
}

/// The process-wide anchor that turns quanta's monotonic instants into UNIX time.
#[derive(Debug)]
struct Origin {
    clock: quanta::Clock,
    /// The clock's raw counter at the anchor (the precise clock measures from it).
    raw: u64,
    /// The same moment as an instant (the coarse clock, which reads instants, measures from it).
    instant: quanta::Instant,
    unix_nanos: u64,
}

impl Origin {
    fn get() -> &'static Origin {
        static ORIGIN: OnceLock<Origin> = OnceLock::new();
        ORIGIN.get_or_init(|| {
            let clock = quanta::Clock::new();
            let raw = clock.raw();
            let instant = clock.scaled(raw);
            // A system clock set before 1970 is treated as the epoch itself.
            let since_epoch = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default();
            Origin {
                clock,
                raw,
                instant,
                unix_nanos: duration_to_nanos_saturating(since_epoch),
            }
        })
    }

    /// The clock's current reading on the UNIX timeline, scaled from the raw counter straight
    /// to nanoseconds (no `Duration` on the way: that conversion cost as much as the read). A
    /// reading before the origin (cross-core skew) reads as the origin.
    #[inline]
    fn now(&self) -> Timestamp {
        let since = self.clock.delta_as_nanos(self.raw, self.clock.raw());
        Timestamp::from_nanos(self.unix_nanos.saturating_add(since))
    }

    /// A quanta instant on the UNIX timeline. An instant before the origin (which quanta's
    /// cross-core skew can produce) reads as the origin.
    #[inline]
    fn timestamp(&self, instant: quanta::Instant) -> Timestamp {
        // quanta makes the duration from a u64 of nanoseconds; `nanos_of` turns it back into
        // that u64 in a form the compiler folds (through `as_nanos`' u128 it did not: 13
        // instructions more on every coarse clock read, 1.9 against 1.4 ns).
        let since = instant.saturating_duration_since(self.instant);
        Timestamp::from_nanos(self.unix_nanos.saturating_add(nanos_of(since)))
    }
}

/// The nanoseconds of a `Duration` made from a `u64` of nanoseconds (as quanta makes them):
/// exactly that `u64`, with no `u128` and no overflow.
#[inline(always)]
fn nanos_of(since: Duration) -> u64 {
    since.as_secs() * 1_000_000_000 + u64::from(since.subsec_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `nanos_of` gives back the `u64` a duration was made of, up to `u64::MAX`.
    #[test]
    fn nanos_of_a_duration_from_nanos_is_those_nanos() {
        for nanos in [
            0,
            1,
            999_999_999,
            1_000_000_000,
            1_700_000_000_123_456_789,
            u64::MAX - 1,
            u64::MAX,
        ] {
            assert_eq!(nanos_of(Duration::from_nanos(nanos)), nanos);
        }
    }
}
