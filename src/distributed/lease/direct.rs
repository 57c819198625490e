//! A leased limiter of one quota: one Redis key, leased and spent by every request.

use std::fmt;

use super::counters::LeaseCounts;
use super::limiter::LeasedLimiter;
use crate::distributed::{RedisCheckError, RedisDecision, RedisResetError};

/// A limiter of one quota shared through Redis, spent locally from leases
/// (`docs/distributed.md`, "Leases"): every request of every process that uses the same Redis,
/// prefix, algorithm and key counts against it. Built with
/// [`LeasedLimiterBuilder::connect_direct`](super::LeasedLimiterBuilder::connect_direct).
///
/// ```no_run
/// use tollgate::distributed::{FailurePolicy, RedisLimiter};
/// use tollgate::TokenBucket;
///
/// # async fn serve() -> Result<(), Box<dyn std::error::Error>> {
/// // 5,000 calls a second to a partner's API, for the whole fleet.
/// let partner = RedisLimiter::builder(
///     "redis://127.0.0.1:6379/",
///     TokenBucket::new("5000/s burst 500".parse()?)?,
///     FailurePolicy::FailOpen,
/// )
/// .leased()
/// .connect_direct("partner-api")
/// .await?;
/// if partner.check().await?.is_allowed() {
///     // call the partner
/// }
/// # Ok(())
/// # }
/// ```
pub struct DirectLeasedLimiter {
    keyed: LeasedLimiter,
    key: String,
}

impl DirectLeasedLimiter {
    pub(super) fn new(keyed: LeasedLimiter, key: String) -> DirectLeasedLimiter {
        DirectLeasedLimiter { keyed, key }
    }

    /// The same limiter over `change(keyed)`, for [`named`](Self::named).
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn map_keyed(self, change: impl FnOnce(LeasedLimiter) -> LeasedLimiter) -> Self {
        DirectLeasedLimiter {
            keyed: change(self.keyed),
            key: self.key,
        }
    }

    /// Decides one request of weight 1, and counts it if admitted.
    ///
    /// # Errors
    /// As [`LeasedLimiter::check_n`].
    pub async fn check(&self) -> Result<RedisDecision, RedisCheckError> {
        self.keyed.check_n(&self.key, 1).await
    }

    /// Decides one request of weight `cost`, and counts it if admitted.
    ///
    /// # Errors
    /// As [`LeasedLimiter::check_n`].
    pub async fn check_n(&self, cost: u64) -> Result<RedisDecision, RedisCheckError> {
        self.keyed.check_n(&self.key, cost).await
    }

    /// What [`check`](Self::check) would answer, without counting anything.
    ///
    /// # Errors
    /// As [`LeasedLimiter::check_n`].
    pub async fn peek(&self) -> Result<RedisDecision, RedisCheckError> {
        self.keyed.peek_n(&self.key, 1).await
    }

    /// What [`check_n`](Self::check_n) would answer, without counting anything.
    ///
    /// # Errors
    /// As [`LeasedLimiter::check_n`].
    pub async fn peek_n(&self, cost: u64) -> Result<RedisDecision, RedisCheckError> {
        self.keyed.peek_n(&self.key, cost).await
    }

    /// Forgets everything counted, for the whole fleet ([`LeasedLimiter::reset`]).
    ///
    /// # Errors
    /// As [`LeasedLimiter::reset`].
    pub async fn reset(&self) -> Result<bool, RedisResetError> {
        self.keyed.reset(&self.key).await
    }

    /// Gives back what this process's lease still holds ([`LeasedLimiter::release`]).
    pub async fn release(&self) -> u64 {
        self.keyed.release().await
    }

    /// The units this process's lease can still spend now ([`LeasedLimiter::units_held`]).
    pub fn units_held(&self) -> u64 {
        self.keyed.units_held()
    }

    /// What this limiter counted of its leases since it was built.
    pub fn counts(&self) -> LeaseCounts {
        self.keyed.counts()
    }

    /// The client key its quota is kept under.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The keyed limiter underneath (its algorithm, capacity, policy, Redis key...).
    pub fn keyed(&self) -> &LeasedLimiter {
        &self.keyed
    }
}

impl fmt::Debug for DirectLeasedLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DirectLeasedLimiter")
            .field("key", &self.key)
            .field("keyed", &self.keyed)
            .finish()
    }
}
