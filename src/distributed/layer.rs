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
/// A shaped request abandoned while it waits (the leaky bucket) gives its slot back to the
/// fleet: [`refund`](RateLimiter::refund) starts [`RedisLimiter::refund_n`] on a task of its
/// own and returns at once, since it is called from a destructor. Without a tokio runtime on
/// the dropping thread nothing is started (and nothing panics); the refund is best effort, its
/// failures are dropped, and a refund still in flight when the runtime shuts down is lost.
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

    fn refund(&self, key: K, cost: u64) {
        // Only the buckets make a round trip; a cost above the capacity was never admitted.
        let Ok(Some(refund)) = self.prepare_refund(&key.to_string(), cost) else {
            return;
        };
        // tokio's `rt` (the `redis` feature asks for it): the refund runs on a task of its own.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                // Best effort: nobody is left to tell (see above).
                let _ = refund.run().await;
            });
        }
    }
}
