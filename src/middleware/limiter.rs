//! What the layer asks of a limiter: a decision per key, possibly asynchronous, possibly failing.

use std::error::Error;
use std::fmt;
use std::future::{ready, Future};
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use crate::algorithm::Algorithm;
use crate::clock::Clock;
use crate::live::LogQuota;
use crate::policy::{AnnouncedPolicy, Policy};
use crate::{CostTooLarge, Decision, KeyedLimiter, KeyedLogLimiter, Outcome, Timestamp};

/// A limiter the layer can put in front of a service: a [`Decision`] per key.
///
/// Implemented for every [`KeyedLimiter`] (any algorithm, any clock), for the exact
/// [`KeyedLogLimiter`], and for an `Arc` of any
/// implementation (so one limiter can serve several layers, or a layer and a handler). A limiter
/// that decides elsewhere (a remote store) returns a future that does its I/O, and a
/// [`LimiterError`] when it cannot decide; the layer then applies its
/// [`OnLimiterError`](super::OnLimiterError) policy. Such a future must finish by itself
/// (bound its I/O with a deadline): when a client leaves before the
/// answer, the layer lets the decision finish on a task of its own, so that a slot it took can
/// be given back, and a decision that never finishes keeps that task forever.
pub trait RateLimiter<K>: Send + Sync {
    /// Decides a request of weight `cost` for `key` now, and counts it if admitted.
    fn decide(&self, key: &K, cost: u64) -> impl Future<Output = Result<Decision, LimiterError>> + Send;

    /// [`decide`](Self::decide), and where the units of an admitted request were counted: the
    /// layer hands the [`Origin`] back to [`refund`](Self::refund) with the units it gives back.
    /// The default is `decide`'s decision, counted by the limiter itself ([`Origin::Limiter`]);
    /// a limiter that may decide somewhere else (a remote store's local fallback) overrides it.
    fn decide_with_origin(
        &self,
        key: &K,
        cost: u64,
    ) -> impl Future<Output = Result<(Decision, Origin), LimiterError>> + Send {
        let decided = self.decide(key, cost);
        async move { Ok((decided.await?, Origin::Limiter)) }
    }

    /// Decides at once, when this limiter can (a table in memory): the layer then answers
    /// without the asynchronous path, which costs an allocation and a reference count per
    /// request. `None` (the default) means "ask [`decide_with_origin`](Self::decide_with_origin)".
    /// A decision given here was counted by the limiter itself ([`Origin::Limiter`]).
    fn decide_now(&self, key: &K, cost: u64) -> Option<Result<Decision, LimiterError>> {
        let _ = (key, cost);
        None
    }

    /// [`decide_now`](Self::decide_now) for a request the layer lets wait at most `max_delay`
    /// for its slot (`None`: no maximum), with where it was counted. A shaper refuses a
    /// request that would wait longer, in the same step as the decision and with nothing
    /// counted, and answers an admission with [`Origin::Slot`], so that a refund gives its slot
    /// back only while it is still the end of the key's queue. The default is `decide_now`'s
    /// decision, counted by the limiter itself ([`Origin::Limiter`]); the layer then refuses a
    /// longer wait itself and refunds its slot.
    fn decide_now_within(
        &self,
        key: &K,
        cost: u64,
        max_delay: Option<Duration>,
    ) -> Option<Result<(Decision, Origin), LimiterError>> {
        let _ = max_delay;
        self.decide_now(key, cost)
            .map(|decided| decided.map(|decision| (decision, Origin::Limiter)))
    }

    /// [`decide_with_origin`](Self::decide_with_origin) for a request the layer lets wait at
    /// most `max_delay` for its slot: as [`decide_now_within`](Self::decide_now_within), for a
    /// limiter that decides elsewhere. The default is `decide_with_origin`.
    fn decide_within(
        &self,
        key: &K,
        cost: u64,
        max_delay: Option<Duration>,
    ) -> impl Future<Output = Result<(Decision, Origin), LimiterError>> + Send {
        let _ = max_delay;
        self.decide_with_origin(key, cost)
    }

    /// The quota announced in the `RateLimit-Policy` field.
    fn policy(&self) -> Policy;

    /// Every policy the `RateLimit-Policy` field lists, in order, each with its name (`None`:
    /// the layer's [`policy_name`](super::RateLimitBuilder::policy_name)). The default is
    /// [`policy`](Self::policy), unnamed; a [`PolicySet`](crate::PolicySet) lists each of its
    /// policies that announces one, by its own name.
    fn policies(&self) -> Vec<NamedPolicy> {
        vec![NamedPolicy {
            name: None,
            policy: self.policy(),
        }]
    }

    /// How many times the policies have changed since the limiter was built (a quota changed
    /// live: [`Live`](crate::Live)): the layer announces them again when this moves. The
    /// default is 0, never: the layer then reads them once, when it is built.
    fn policy_changes(&self) -> u64 {
        0
    }

    /// [`decide_now_within`](Self::decide_now_within), with which of
    /// [`policies`](Self::policies) the decision reports (its index; `None`: none of them,
    /// and the `RateLimit` field is left out): a [`PolicySet`](crate::PolicySet)'s refusing
    /// policy, or its policy nearest to refusal. The default is `decide_now_within`'s, reporting
    /// the first. (A limiter that decides elsewhere reports its first policy.)
    #[allow(clippy::type_complexity)]
    fn decide_now_reporting(
        &self,
        key: &K,
        cost: u64,
        max_delay: Option<Duration>,
    ) -> Option<Result<(Decision, Origin, Option<usize>), LimiterError>> {
        self.decide_now_within(key, cost, max_delay)
            .map(|decided| decided.map(|(decision, origin)| (decision, origin, Some(0))))
    }

    /// Gives back `cost` units admitted earlier for `key` and never used: a shaped request whose
    /// client left before its slot (or before this limiter's answer: the layer then lets the
    /// decision finish on a task of its own, and refunds an admission with a wait), or whose
    /// wait was above the layer's maximum (admitted by a
    /// limiter that keeps the provided [`decide_now_within`](Self::decide_now_within) and
    /// [`decide_within`](Self::decide_within), or by a stand-in that does not refuse such a wait
    /// itself). `origin` is where its decision said they were counted, so that they go back
    /// there and nowhere else; an [`Origin::Slot`] goes back only if it is still the end of the
    /// key's queue.
    /// Called from a destructor, so it cannot wait: a limiter whose refund needs I/O starts it
    /// and returns. The default gives nothing back.
    fn refund(&self, key: K, cost: u64, origin: Origin) {
        let _ = (key, cost, origin);
    }

    /// The meter this limiter counts its decisions with, once named (feature `metrics`): the
    /// layer counts its own outcomes there (`unavailable`: this limiter could not decide;
    /// `no_key`: the layer answered a request without a key), under the same name. The default
    /// has none, and the layer then counts nothing.
    #[cfg(feature = "metrics")]
    fn meter(&self) -> Option<&crate::metrics::Meter> {
        None
    }
}

/// One policy the `RateLimit-Policy` field lists ([`RateLimiter::policies`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedPolicy {
    /// Its name in the fields; `None`: the layer's
    /// [`policy_name`](super::RateLimitBuilder::policy_name).
    pub name: Option<String>,
    /// The policy.
    pub policy: Policy,
}

/// Where a limiter counted the units of a request it admitted (see
/// [`RateLimiter::decide_with_origin`]), so that [`RateLimiter::refund`] gives unused units
/// back to the store that counted them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Origin {
    /// The limiter's own store (its table in memory, its remote store): the usual case.
    #[default]
    Limiter,
    /// The limiter's own store, which gave the request the slot of the key's queue that ends at
    /// `end` (a shaper's admission: `end` is the time the queue would be empty after it, the
    /// decision's time plus its [`reset_after`](Decision::reset_after)). A refund gives the
    /// slot back only if it is still the end of the queue, that is if no other request of the
    /// key has been given a slot after it since (other than ones given back in their turn):
    /// otherwise the slot passes unused, and the requests behind keep their spacing.
    Slot {
        /// When the slot ends.
        end: Timestamp,
    },
    /// A stand-in that decided because the limiter's own store could not (a remote store's
    /// local fallback while the store is away): the units go back to the stand-in,
    /// unconditionally (a stand-in that does not name its slots).
    Fallback,
    /// A stand-in that decided because the limiter's own store could not (a remote store's
    /// local fallback while the store is away), and gave the request the slot of the key's
    /// queue that ends at `end`, as [`Slot`](Self::Slot) does for the limiter's own store: the
    /// slot goes back to the stand-in only if it is still the end of its queue.
    FallbackSlot {
        /// When the slot ends, on the stand-in's clock.
        end: Timestamp,
    },
    /// Nothing counted them (a fail-open admission): nothing to give back.
    Uncounted,
}

impl<K, A, C> RateLimiter<K> for KeyedLimiter<K, A, C>
where
    K: Hash,
    A: Algorithm + AnnouncedPolicy,
    C: Clock,
{
    fn decide(&self, key: &K, cost: u64) -> impl Future<Output = Result<Decision, LimiterError>> + Send {
        ready(self.check_n(key, cost).map_err(LimiterError::from))
    }

    fn decide_now(&self, key: &K, cost: u64) -> Option<Result<Decision, LimiterError>> {
        Some(self.check_n(key, cost).map_err(LimiterError::from))
    }

    fn decide_now_within(
        &self,
        key: &K,
        cost: u64,
        max_delay: Option<Duration>,
    ) -> Option<Result<(Decision, Origin), LimiterError>> {
        Some(decide_slot(self, key, cost, max_delay))
    }

    fn decide_within(
        &self,
        key: &K,
        cost: u64,
        max_delay: Option<Duration>,
    ) -> impl Future<Output = Result<(Decision, Origin), LimiterError>> + Send {
        ready(decide_slot(self, key, cost, max_delay))
    }

    fn policy(&self) -> Policy {
        self.algorithm().policy()
    }

    fn policy_changes(&self) -> u64 {
        self.algorithm().changes()
    }

    #[cfg(feature = "metrics")]
    fn meter(&self) -> Option<&crate::metrics::Meter> {
        KeyedLimiter::meter(self)
    }

    fn refund(&self, key: K, cost: u64, origin: Origin) {
        // Only the buckets can give back; for the windows these are no-ops returning `false`.
        // Every decision of a table in memory is its own.
        match origin {
            Origin::Slot { end } => {
                let _ = self.refund_slot(&key, cost, end);
            }
            Origin::Limiter => {
                let _ = self.refund_n(&key, cost);
            }
            Origin::Fallback | Origin::FallbackSlot { .. } | Origin::Uncounted => {}
        }
    }
}

/// A table's decision for a request allowed to wait at most `max_delay`, decided at a time read
/// once, so that an admission's slot is known exactly: it ends at that time plus the decision's
/// reset-after (the TAT a bucket stored).
fn decide_slot<K: Hash, A: Algorithm, C: Clock>(
    limiter: &KeyedLimiter<K, A, C>,
    key: &K,
    cost: u64,
    max_delay: Option<Duration>,
) -> Result<(Decision, Origin), LimiterError> {
    let (decision, end) = limiter.check_slot(key, cost, max_delay)?;
    // A counted admission holds the slot that ends at `end`. An untracked admission (a full
    // table) counted nothing, so nothing of it may ever be given back; a refusal is never
    // refunded.
    let origin = match (end, decision.outcome()) {
        (Some(end), _) => Origin::Slot { end },
        (None, Outcome::AllowedUntracked) => Origin::Uncounted,
        (None, _) => Origin::Limiter,
    };
    Ok((decision, origin))
}

impl<K: Hash, C: Clock, L: LogQuota> RateLimiter<K> for KeyedLogLimiter<K, C, L> {
    fn decide(&self, key: &K, cost: u64) -> impl Future<Output = Result<Decision, LimiterError>> + Send {
        ready(self.check_n(key, cost).map_err(LimiterError::from))
    }

    fn decide_now(&self, key: &K, cost: u64) -> Option<Result<Decision, LimiterError>> {
        Some(self.check_n(key, cost).map_err(LimiterError::from))
    }

    fn policy(&self) -> Policy {
        self.algorithm().current().policy()
    }

    fn policy_changes(&self) -> u64 {
        self.algorithm().changes()
    }

    #[cfg(feature = "metrics")]
    fn meter(&self) -> Option<&crate::metrics::Meter> {
        KeyedLogLimiter::meter(self)
    }

    // No refund: the log never delays a request (its decisions have no `delay`), so no request
    // is ever abandoned while it waits for a slot.
}

impl<K, L: RateLimiter<K> + ?Sized> RateLimiter<K> for Arc<L> {
    fn decide(&self, key: &K, cost: u64) -> impl Future<Output = Result<Decision, LimiterError>> + Send {
        (**self).decide(key, cost)
    }

    fn decide_with_origin(
        &self,
        key: &K,
        cost: u64,
    ) -> impl Future<Output = Result<(Decision, Origin), LimiterError>> + Send {
        (**self).decide_with_origin(key, cost)
    }

    fn decide_now(&self, key: &K, cost: u64) -> Option<Result<Decision, LimiterError>> {
        (**self).decide_now(key, cost)
    }

    fn decide_now_within(
        &self,
        key: &K,
        cost: u64,
        max_delay: Option<Duration>,
    ) -> Option<Result<(Decision, Origin), LimiterError>> {
        (**self).decide_now_within(key, cost, max_delay)
    }

    fn decide_within(
        &self,
        key: &K,
        cost: u64,
        max_delay: Option<Duration>,
    ) -> impl Future<Output = Result<(Decision, Origin), LimiterError>> + Send {
        (**self).decide_within(key, cost, max_delay)
    }

    fn policy(&self) -> Policy {
        (**self).policy()
    }

    fn policies(&self) -> Vec<NamedPolicy> {
        (**self).policies()
    }

    fn policy_changes(&self) -> u64 {
        (**self).policy_changes()
    }

    fn decide_now_reporting(
        &self,
        key: &K,
        cost: u64,
        max_delay: Option<Duration>,
    ) -> Option<Result<(Decision, Origin, Option<usize>), LimiterError>> {
        (**self).decide_now_reporting(key, cost, max_delay)
    }

    fn refund(&self, key: K, cost: u64, origin: Origin) {
        (**self).refund(key, cost, origin);
    }

    #[cfg(feature = "metrics")]
    fn meter(&self) -> Option<&crate::metrics::Meter> {
        (**self).meter()
    }
}

/// A limiter could not decide (a remote store unreachable, a request heavier than the
/// limiter's capacity). The layer answers with its [`OnLimiterError`](super::OnLimiterError)
/// policy.
///
/// Its text is for the operator, never the client: it may name internals (a remote store's
/// address, a key with its prefix). A request refused for it gets a fixed message, and its
/// response carries the error in its extensions, for a layer outside to log:
/// `response.extensions().get::<LimiterError>()`. Cloning it shares the reason.
#[derive(Clone, Debug)]
pub struct LimiterError {
    source: Arc<dyn Error + Send + Sync>,
}

impl LimiterError {
    /// Wraps the reason the limiter could not decide.
    pub fn new(source: impl Into<Box<dyn Error + Send + Sync>>) -> LimiterError {
        LimiterError {
            source: Arc::from(source.into()),
        }
    }

    /// Why the limiter could not decide, to downcast to the limiter's own error type:
    ///
    /// ```
    /// use tollgate::middleware::LimiterError;
    /// use tollgate::CostTooLarge;
    ///
    /// fn too_heavy(error: &LimiterError) -> bool {
    ///     error.reason().downcast_ref::<CostTooLarge>().is_some()
    /// }
    /// ```
    pub fn reason(&self) -> &(dyn Error + Send + Sync + 'static) {
        &*self.source
    }
}

impl From<CostTooLarge> for LimiterError {
    fn from(error: CostTooLarge) -> LimiterError {
        LimiterError::new(error)
    }
}

impl fmt::Display for LimiterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the rate limiter could not decide: {}", self.source)
    }
}

/// Its message includes the reason's, so its source is the reason's own source (an error chain
/// printer would otherwise print the reason twice); [`LimiterError::reason`] gives the reason
/// itself, to downcast.
impl Error for LimiterError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.source.source()
    }
}
