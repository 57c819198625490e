//! A sliding log's limit and window changed while its limiters run
//! ([`LogLimiter::set_quota`], [`KeyedLogLimiter::set_quota`]).
//!
//! The log's state is the times of its admitted units, which read the same under any limit or
//! window: the entries stay, a unit counts while it is inside the new window, and the new limit
//! applies from the change on (a lowered one refuses until enough units have left the window).
//! A log keeps only the units that can still count: its limit's newest entries, and none a whole
//! window older than its newest. So a larger limit first grows every log (allocated, under its
//! lock) before any decision reads it (a smaller one keeps the room), and a shorter window
//! counts exactly (every unit inside it is still there); a longer one would count units already
//! dropped, and is refused ([`QuotaChangeError::WindowLengthened`]).

use std::hash::Hash;

use super::{KeyedLogLimiter, LogLimiter, SlidingLog};
use crate::clock::Clock;
use crate::live::{Live, QuotaChangeError};
use crate::sync::{lock, Ordering};
use crate::Quota;

impl<C: Clock> LogLimiter<C, Live<SlidingLog>> {
    /// Changes the limit and window live: the log keeps its entries, each unit counts while it
    /// is inside the new window, and the new limit applies from now on (a lowered one refuses
    /// until enough units have left the window; a raised one admits the difference at once).
    /// A decision in flight is made under the old quota or the new one, never a mix.
    ///
    /// ```
    /// use tollgate::{Live, LogLimiter, ManualClock, SlidingLog};
    ///
    /// let limiter = LogLimiter::with_clock(Live::new(SlidingLog::new("10/min".parse()?)?), ManualClock::new());
    /// assert!(limiter.check_n(8)?.is_allowed());
    /// limiter.set_quota("5/min".parse()?)?;
    /// // The 8 units stay in the window: a lowered limit refuses until enough leave.
    /// assert!(!limiter.check().is_allowed());
    /// limiter.set_quota("20/min".parse()?)?;
    /// assert_eq!(limiter.check().remaining(), 11);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`QuotaChangeError::Invalid`] for a quota the log refuses (a burst, a limit above
    /// [`SlidingLog::MAX_LIMIT`]); [`QuotaChangeError::WindowLengthened`] for a longer window
    /// (the log has dropped the units a longer window would count); [`QuotaChangeError::LogMemory`]
    /// when the log cannot grow to a larger limit. The limiter keeps its quota either way.
    pub fn set_quota(&self, quota: Quota) -> Result<(), QuotaChangeError> {
        self.log.change(|running| {
            let next = retuned(running, quota)?;
            // The room, before a decision can read the limit that needs it.
            lock(&self.state)
                .ring
                .grow(next.entries())
                .map_err(|_| QuotaChangeError::LogMemory { limit: next.limit })?;
            Ok(next)
        })
    }
}

impl<K: Hash + ?Sized, C: Clock> KeyedLogLimiter<K, C, Live<SlidingLog>> {
    /// Changes every key's limit and window live, as
    /// [`LogLimiter::set_quota`](crate::LogLimiter::set_quota) does one log's: every key keeps
    /// its entries. A larger limit first grows every slot's log (8 bytes per unit of the new
    /// limit, for each slot already used; [`max_memory`](Self::max_memory) follows), one slot
    /// locked at a time, while decisions go on under the old limit.
    ///
    /// # Errors
    /// [`QuotaChangeError::Invalid`] for a quota the log refuses;
    /// [`QuotaChangeError::WindowLengthened`] for a longer window; [`QuotaChangeError::LogMemory`]
    /// when a log cannot grow (the logs grown so far keep their room, unused). The limiter keeps
    /// its quota either way.
    pub fn set_quota(&self, quota: Quota) -> Result<(), QuotaChangeError> {
        self.log.change(|running| {
            let next = retuned(running, quota)?;
            // Relaxed: read and raised under the change lock only.
            if next.limit > self.entries.load(Ordering::Relaxed) {
                let too_little = |_| QuotaChangeError::LogMemory { limit: next.limit };
                for shard in self.shards.iter() {
                    shard.try_for_each_value(|state| state.ring.grow(next.entries()).map_err(too_little))?;
                }
                // Relaxed: a size (`max_memory`).
                self.entries.store(next.limit, Ordering::Relaxed);
            }
            Ok(next)
        })
    }
}

/// The log of `quota`, if the running log's entries read under it: the same window or a shorter
/// one.
fn retuned(running: &SlidingLog, quota: Quota) -> Result<SlidingLog, QuotaChangeError> {
    let next = SlidingLog::new(quota)?;
    if next.window > running.window {
        return Err(QuotaChangeError::WindowLengthened {
            from: running.window(),
            to: next.window(),
        });
    }
    Ok(next)
}
