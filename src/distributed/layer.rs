//! The Redis limiter behind the tower layer (features `redis` and `tower`): a fleet of proxies
//! answering 429 from one shared quota.

use std::fmt::Display;
use std::future::Future;

use super::{RedisAlgorithm, RedisLimiter};
use crate::middleware::{AnnouncedPolicy, LimiterError, Policy, RateLimiter};
use crate::Decision;

impl AnnouncedPolicy for RedisAlgorithm {
    fn policy(&self) -> Policy {
        match self {
            RedisAlgorithm::TokenBucket(bucket) => bucket.policy(),
            RedisAlgorithm::LeakyBucket(bucket) => bucket.policy(),
            RedisAlgorithm::FixedWindow(window) => window.policy(),
            RedisAlgorithm::SlidingWindow(window) => window.policy(),
            RedisAlgorithm::SlidingLog(log) => log.policy(),
        }
    }
}

/// Keys are written into Redis keys with `Display` (an IP address as `192.0.2.7`, a header
/// value as itself). Redis being down is not an error here: the limiter's
/// [`FailurePolicy`](super::FailurePolicy) answers, and the decision it gives goes to the layer
/// like any other. Errors (a key holding another type, a cost above the capacity) go to the
/// layer's [`OnLimiterError`](crate::middleware::OnLimiterError) policy.
///
/// A shaped request abandoned while it waits is not given back: a refund through Redis would
/// be a second round trip, started from a destructor.
impl<K: Display + Sync> RateLimiter<K> for RedisLimiter {
    fn decide(&self, key: &K, cost: u64) -> impl Future<Output = Result<Decision, LimiterError>> + Send {
        let key = key.to_string();
        async move {
            self.check_n(&key, cost)
                .await
                .map(|answer| answer.decision)
                .map_err(LimiterError::new)
        }
    }

    fn policy(&self) -> Policy {
        self.algorithm().policy()
    }
}
