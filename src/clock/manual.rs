//! A clock that moves only when told to: for tests, simulations and replays.

use std::sync::Arc;
use std::time::Duration;

use super::Clock;
use crate::sync::{AtomicU64, Ordering};
use crate::time::duration_to_nanos_saturating;
use crate::Timestamp;

/// A clock set by hand. Clones share the same time, and a thread that reads a time another set
/// (`set`, `advance`) sees what that thread did before setting it: a simulation that resets a
/// limiter and then ticks the clock can have workers decide at the new time on the reset state.
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
        // Release: a thread that reads this time (`now`, Acquire) sees what this one did before
        // setting it (a reset, a refill), as a simulation that ticks the clock expects.
        self.nanos.store(now.as_nanos(), Ordering::Release);
    }

    /// Moves the time forward by `by`, saturating at [`Timestamp::MAX`].
    pub fn advance(&self, by: Duration) {
        let by = duration_to_nanos_saturating(by);
        // Release on the write, as in `set` (a read-modify-write also carries the earlier
        // advances' releases on); the read needs none. fetch_update so concurrent advances all
        // count.
        let _ = self
            .nanos
            .fetch_update(Ordering::Release, Ordering::Relaxed, |n| {
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
        // Acquire: pairs with `set` and `advance`.
        Timestamp::from_nanos(self.nanos.load(Ordering::Acquire))
    }
}
