//! A clock that moves only when told to: for tests, simulations and replays.

use std::sync::Arc;
use std::time::Duration;

use super::Clock;
use crate::sync::{AtomicU64, Ordering};
use crate::time::duration_to_nanos_saturating;
use crate::Timestamp;

/// A clock set by hand. Clones share the same time.
///
/// ```
/// use std::time::Duration;
/// use tollgate::{Clock, ManualClock, Timestamp};
///
/// let clock = ManualClock::starting_at(Timestamp::from_secs(10));
/// let handle = clock.clone();
/// handle.advance(Duration::from_millis(1500));
/// assert_eq!(clock.now().as_nanos(), 11_500_000_000);
/// ```
#[derive(Clone, Debug)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock stopped at the UNIX epoch.
    pub fn new() -> ManualClock {
        ManualClock::starting_at(Timestamp::UNIX_EPOCH)
    }

    /// A clock stopped at `start`.
    pub fn starting_at(start: Timestamp) -> ManualClock {
        ManualClock {
            nanos: Arc::new(AtomicU64::new(start.as_nanos())),
        }
    }

    /// Sets the time (backwards too).
    pub fn set(&self, now: Timestamp) {
        // Relaxed: the clock's value is self-contained; tests order their threads by joins.
        self.nanos.store(now.as_nanos(), Ordering::Relaxed);
    }

    /// Moves the time forward by `by`, saturating at [`Timestamp::MAX`].
    pub fn advance(&self, by: Duration) {
        let by = duration_to_nanos_saturating(by);
        // Relaxed: as in `set`. fetch_update so concurrent advances all count.
        let _ = self
            .nanos
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                Some(n.saturating_add(by))
            });
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        // Relaxed: as in `set`.
        Timestamp::from_nanos(self.nanos.load(Ordering::Relaxed))
    }
}
