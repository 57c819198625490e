//! The leased limiter behind the tower layer (features `redis` and `tower`): a fleet of proxies
//! sharing one quota, each deciding on its leases without a round trip per request.

use std::fmt::Display;
use std::future::Future;

use super::key_bytes::KeyBytes;
use super::ledger::LeaseRule;
use super::limiter::LeasedLimiter;
use crate::distributed::DecidedBy;
use crate::middleware::{AnnouncedPolicy, LimiterError, Origin, Policy, RateLimiter};
use crate::{CostTooLarge, Decision};

/// Where a decision's units were counted: in Redis (by a lease taken from it, or by the
/// script), by the local fallback, or nowhere.
fn origin(decided_by: DecidedBy) -> Origin {
    match decided_by {
        DecidedBy::Fallback => Origin::Fallback,
        DecidedBy::FailOpen | DecidedBy::FailClosed => Origin::Uncounted,
        _ => Origin::Limiter,
    }
}

/// The layer asks [`decide_now`](RateLimiter::decide_now) first: a request the lease holds (or
/// refuses on what Redis last said) is answered there, with no allocation and no task (the key
/// is written on the stack to be hashed); one that needs Redis goes the asynchronous way, as a
/// [`RedisLimiter`](crate::distributed::RedisLimiter)'s every request does. Nothing is given
/// back through [`refund`](RateLimiter::refund): the algorithms it leases (the token bucket, the
/// fixed window, the sliding window counter) never delay a request, so the layer never has a
/// slot to give back.
impl<K: Display + Sync> RateLimiter<K> for LeasedLimiter {
    fn decide(&self, key: &K, cost: u64) -> impl Future<Output = Result<Decision, LimiterError>> + Send {
        let decided = self.decide_with_origin(key, cost);
        async move { decided.await.map(|(decision, _origin)| decision) }
    }

    fn decide_with_origin(
        &self,
        key: &K,
        cost: u64,
    ) -> impl Future<Output = Result<(Decision, Origin), LimiterError>> + Send {
        let key = key.to_string();
        async move {
            let answer = self.check_n(&key, cost).await.map_err(LimiterError::new)?;
            Ok((answer.decision, origin(answer.decided_by)))
        }
    }

    fn decide_now(&self, key: &K, cost: u64) -> Option<Result<Decision, LimiterError>> {
        let shared = &self.shared;
        if let Err(error) = CostTooLarge::check(cost, shared.capacity()) {
            return Some(Err(error.into()));
        }
        // A clock out of range: the asynchronous path says so.
        let local = shared.clock.now().ok()?;
        let text = KeyBytes::of(key);
        let hash = shared.table.hash(text.as_bytes());
        shared
            .spend_locally(&self.metering, text.as_str(), hash, local, cost)
            .map(|answer| Ok(answer.decision))
    }

    /// The quota the leases are taken from (the one it was built with, whatever
    /// `per_decision().set_algorithm` did since), at the rate the script runs it, as
    /// [`RedisLimiter`](crate::distributed::RedisLimiter)'s.
    fn policy(&self) -> Policy {
        let shared = &self.shared;
        let policy = shared.algorithm.policy();
        match shared.table.rule() {
            LeaseRule::Bucket { bucket, .. } => policy.running_at(bucket.emission_interval()),
            LeaseRule::Window { .. } => policy,
        }
    }

    #[cfg(feature = "metrics")]
    fn meter(&self) -> Option<&crate::metrics::Meter> {
        LeasedLimiter::meter(self)
    }
}
