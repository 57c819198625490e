//! The sliding window log's configuration: a limit and a window, validated once.

use std::time::Duration;

use crate::error::QuotaError;
use crate::Quota;

/// The sliding window log: exact. It remembers the time of every unit admitted in the last
/// window `w` and admits a request of weight `n` at `now` iff the weight admitted in
/// `(now - w, now]` plus `n` stays within `limit`.
///
/// Unlike the [`SlidingWindow`](crate::SlidingWindow) counter it estimates nothing, so it is
/// the ground truth the others are measured against; the price is memory (8 bytes per unit of
/// the limit, per log, allocated once) and a short lock per decision instead of a
/// compare-and-swap (`docs/design.md`, "Sliding window log", says why). It runs in a
/// [`LogLimiter`](crate::LogLimiter) or a [`KeyedLogLimiter`](crate::KeyedLogLimiter).
///
/// ```
/// use tollgate::{LogLimiter, ManualClock, SlidingLog, Timestamp};
///
/// let clock = ManualClock::starting_at(Timestamp::from_secs(100));
/// let limiter = LogLimiter::with_clock(SlidingLog::new("2/min".parse()?)?, clock.clone());
/// assert!(limiter.check().is_allowed());
/// clock.set(Timestamp::from_secs(130));
/// assert!(limiter.check().is_allowed());
/// let refused = limiter.check();
/// assert!(!refused.is_allowed());
/// // The oldest admission (at 100 s) leaves the window at 160 s.
/// assert_eq!(refused.retry_after().as_secs(), 30);
/// assert_eq!(refused.reset_after().as_secs(), 60);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SlidingLog {
    pub(super) limit: u64,
    pub(super) window: u64,
}

impl SlidingLog {
    /// The largest limit a log accepts: 2^24 units, 128 MiB of timestamps per log. A log keeps
    /// the time of every unit in its window, one 8-byte entry each, allocated at once (that is
    /// what makes it exact, and what bounds it: by memory, not by a count's width). Through
    /// Redis the bound is 65,536 (`tollgate::distributed::MAX_LOG_LIMIT`, feature `redis`: a
    /// list entry per unit, pushed by one script). For larger limits use a
    /// [`SlidingWindow`](crate::SlidingWindow) counter (up to `u32::MAX`).
    pub const MAX_LIMIT: u64 = 1 << 24;

    /// At most `quota.count()` units in any window of `quota.period()`.
    ///
    /// # Errors
    /// [`QuotaError::BurstNotSupported`] when the quota has an explicit burst other than its
    /// count; [`QuotaError::LogTooLarge`] when the limit exceeds [`SlidingLog::MAX_LIMIT`].
    pub fn new(quota: Quota) -> Result<SlidingLog, QuotaError> {
        if quota.explicit_burst().is_some_and(|burst| burst != quota.count()) {
            return Err(QuotaError::BurstNotSupported {
                algorithm: "sliding window log",
            });
        }
        if quota.count() > SlidingLog::MAX_LIMIT {
            return Err(QuotaError::LogTooLarge {
                limit: quota.count(),
                max: SlidingLog::MAX_LIMIT,
            });
        }
        Ok(SlidingLog {
            limit: quota.count(),
            window: quota.period_nanos(),
        })
    }

    /// The most units admitted in any window.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window length.
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.window)
    }

    /// Entries in one log's ring: the limit, which `new` bounded by `MAX_LIMIT` (2^24), so it
    /// fits a `usize` on every target with 32-bit pointers or wider.
    pub(super) fn entries(&self) -> usize {
        usize::try_from(self.limit).unwrap_or(usize::MAX)
    }
}

/// `limit` per window; its units come back as old requests leave the window, at times a
/// decision does not tell.
#[cfg(feature = "tower")]
impl crate::policy::AnnouncedPolicy for SlidingLog {
    fn policy(&self) -> crate::policy::Policy {
        crate::policy::Policy::new(self.limit(), self.window())
    }
}

#[cfg(all(test, feature = "tower"))]
mod tests {
    use std::time::Duration;

    use super::SlidingLog;
    use crate::policy::{AnnouncedPolicy, Policy};

    #[test]
    fn the_log_announces_its_limit_per_window() -> Result<(), Box<dyn std::error::Error>> {
        assert_eq!(
            SlidingLog::new("5/10s".parse()?)?.policy(),
            Policy::new(5, Duration::from_secs(10))
        );
        Ok(())
    }
}
