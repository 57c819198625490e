//! The Redis limiter behind the tower layer (features `redis` and `tower`): a fleet of proxies
//! answering 429 from one shared quota. Everything here is the adapter: it decides and refunds
//! through the limiter's own API (`check_n`, `check_slot`, the refunds `refund_n` and
//! `refund_slot` prepare, the failure policy's), and keeps the queue that sends the refunds a
//! destructor starts ([`refund_queue`]).

mod refund_queue;

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

use refund_queue::REFUNDS;

use super::{DecidedBy, RedisAlgorithm, RedisLimiter};
use crate::middleware::{AnnouncedPolicy, LimiterError, Origin, Policy, RateLimiter};
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

/// Where a decision's units were counted: by the script in Redis (the fleet's quota), by the
/// local fallback, or nowhere (fail open, or a fail-closed refusal).
fn origin(decided_by: DecidedBy) -> Origin {
    match decided_by {
        DecidedBy::Redis | DecidedBy::Lease => Origin::Limiter,
        DecidedBy::Fallback => Origin::Fallback,
        DecidedBy::FailOpen | DecidedBy::FailClosed => Origin::Uncounted,
    }
}

/// Keys are written into Redis keys with `Display` (an IP address as `192.0.2.7`, a header
/// value as itself). Redis being down is not an error here: the limiter's
/// [`FailurePolicy`](super::FailurePolicy) answers, and the decision it gives goes to the layer
/// like any other. Errors (a key holding another type, a cost above the capacity) go to the
/// layer's [`OnLimiterError`](crate::middleware::OnLimiterError) policy.
///
/// A shaped request abandoned while it waits (the leaky bucket) or before the answer came back
/// from Redis (the layer lets the decision finish on a task of its own), or refused by the layer
/// for a wait above its maximum (only after a fallback that does not refuse such a wait itself:
/// Redis and the keyed and direct fallbacks do, counting nothing), gives its slot back where it
/// was counted ([`decide_within`](RateLimiter::decide_within) says where). A slot Redis gave goes
/// back to the fleet only if it still ends the key's queue there: [`refund`](RateLimiter::refund)
/// starts the round trip of [`RedisLimiter::refund_slot`] and returns at once, since it is
/// called from a destructor: a key's refunds are sent one after the other, on a task of the
/// runtime that gave back the first of them, so that they reach Redis in the order the slots
/// were given back (D, C and B leaving in that order give back all three); other keys' refunds
/// do not wait for them. At most 4,096 refunds of a key and 65,536 of a limiter in all wait
/// (where clients leave faster than Redis answers, later ones are dropped: their units stay
/// charged). Without a tokio
/// runtime on the dropping thread nothing is sent (and nothing panics); the refund is best
/// effort, its failures are dropped, and refunds still waiting when that runtime shuts down are
/// lost. A slot the local fallback gave while Redis was away never goes
/// to Redis, which did not count it (it would give the fleet a unit it never spent): it goes
/// back to the fallback's own limiter, which did, under the same condition as Redis's when the
/// fallback named the slot's end ([`FailurePolicy::refund_slot`](super::FailurePolicy::refund_slot)), and
/// unconditionally when it did not ([`FailurePolicy::refund_n`](super::FailurePolicy::refund_n):
/// a custom [`LocalFallback`](super::LocalFallback) that keeps the default
/// [`check_slot`](super::LocalFallback::check_slot)). A decision of fail open or fail closed
/// counted nothing and gives nothing back.
impl<K: Display + Sync> RateLimiter<K> for RedisLimiter {
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

    /// A shaper's admission by Redis comes with the end of its slot ([`Origin::Slot`]): its
    /// refund gives the slot back only if it still ends the key's queue in Redis. A wait above
    /// `max_delay` is refused by the script itself, with nothing counted. While Redis is away
    /// the local fallback is asked the same
    /// ([`LocalFallback::check_slot`](super::LocalFallback::check_slot)): the keyed and direct
    /// limiters refuse a longer wait themselves and name their slot's end
    /// ([`Origin::FallbackSlot`]); a fallback that names none answers [`Origin::Fallback`],
    /// and a longer wait it admits is refused by the layer and refunded to it.
    fn decide_within(
        &self,
        key: &K,
        cost: u64,
        max_delay: Option<Duration>,
    ) -> impl Future<Output = Result<(Decision, Origin), LimiterError>> + Send {
        let key = key.to_string();
        async move {
            let (answer, end) = self
                .check_slot(&key, cost, max_delay)
                .await
                .map_err(LimiterError::new)?;
            let origin = match (answer.decided_by, end) {
                (DecidedBy::Redis, Some(end)) => Origin::Slot { end },
                (DecidedBy::Fallback, Some(end)) => Origin::FallbackSlot { end },
                (decided_by, _) => origin(decided_by),
            };
            Ok((answer.decision, origin))
        }
    }

    /// The algorithm's policy, at the rate the script runs it: a bucket's interval (exactly
    /// `period / count`, announced rounded up to whole nanoseconds), so that the announced `q`
    /// never promises what the fleet's bucket does not admit.
    fn policy(&self) -> Policy {
        // One snapshot: the policy and the interval of one quota.
        let configured = self.configured.load();
        let policy = configured.algorithm.policy();
        match configured.program.reader.bucket_interval() {
            Some(interval) => policy.running_at(interval),
            None => policy,
        }
    }

    fn policy_changes(&self) -> u64 {
        self.changes()
    }

    #[cfg(feature = "metrics")]
    fn meter(&self) -> Option<&crate::metrics::Meter> {
        RedisLimiter::meter(self)
    }

    fn refund(&self, key: K, cost: u64, origin: Origin) {
        let end = match origin {
            Origin::Limiter => None,
            // Given back only if it still ends the key's queue (`gcra_refund.lua` compares).
            Origin::Slot { end } => Some(end),
            // See above: never to Redis, which did not count it; to the share that did.
            Origin::Fallback => {
                self.failure_policy().refund_n(&key.to_string(), cost);
                return;
            }
            Origin::FallbackSlot { end } => {
                self.failure_policy().refund_slot(&key.to_string(), cost, end);
                return;
            }
            Origin::Uncounted => return,
        };
        // `refund_n`'s or `refund_slot`'s round trip, owned: only the buckets make one; a cost
        // above the capacity was never admitted.
        let Ok(Some(refund)) = self.prepare_refund(&key.to_string(), cost, end) else {
            return;
        };
        // Behind the refunds of its key given back before it, on a task (tokio's `rt`, which
        // the `redis` feature asks for): a slot's refund must reach Redis after those of the
        // slots queued behind it, or it finds the queue ending elsewhere.
        REFUNDS.push(refund);
    }
}
