//! What the routing table holds of each route's limiters between reloads, and what becomes of
//! each on a reload: kept, kept with its quota changed live, or rebuilt (and why).

use std::any::Any;
use std::sync::Arc;

use tollgate::Quota;

use crate::redis::WatchedRedis;
use crate::settings::{LimiterChange, LimiterSpec};

/// Checks whether a limiter takes a quota live (`Err`: why it needs a new limiter), or changes
/// it.
pub(crate) type Retuner = Arc<dyn Fn(Quota) -> Result<(), String> + Send + Sync>;

/// One limiter of a route (its one quota, or one of its named policies), as the routing table
/// holds it between reloads.
#[derive(Clone)]
pub(crate) struct HeldPart {
    /// The policy's name; `None` for a route's one quota.
    pub(crate) name: Option<String>,
    pub(crate) spec: LimiterSpec,
    /// The limiter itself (its type depends on the key and the algorithm); a new table built
    /// with the same key, algorithm and store takes it back by downcasting.
    pub(crate) limiter: Arc<dyn Any + Send + Sync>,
    /// Whether it takes a quota live.
    pub(crate) can_take: Retuner,
    /// Changes its quota live.
    pub(crate) take: Retuner,
    /// The keys an in-memory limiter holds.
    pub(crate) keys: Option<Arc<dyn Fn() -> usize + Send + Sync>>,
}

/// A route's limiters, as the routing table holds them between reloads.
#[derive(Clone)]
pub(crate) struct HeldLimiter {
    pub(crate) parts: Vec<HeldPart>,
    /// A Redis route's limiter, for the start-up check and the per-second report.
    pub(crate) redis: Option<Arc<WatchedRedis>>,
}

impl HeldLimiter {
    /// Whether the limiters keep their keys in memory, and can count them.
    pub(crate) fn counts_keys(&self) -> bool {
        self.parts.iter().all(|part| part.keys.is_some())
    }

    /// The keys the fullest of its in-memory tables holds now.
    pub(crate) fn keys(&self) -> Option<usize> {
        self.parts
            .iter()
            .map(|part| part.keys.as_ref().map(|keys| keys()))
            .try_fold(0, |most, keys| keys.map(|keys| most.max(keys)))
    }

    /// The part named `name` (`None`: the route's one quota).
    fn part(&self, name: Option<&str>) -> Option<&HeldPart> {
        self.parts.iter().find(|part| part.name.as_deref() == name)
    }
}

impl std::fmt::Debug for HeldLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let specs: Vec<(&Option<String>, &LimiterSpec)> =
            self.parts.iter().map(|part| (&part.name, &part.spec)).collect();
        f.debug_struct("HeldLimiter")
            .field("parts", &specs)
            .finish_non_exhaustive()
    }
}

/// What became of a limiter (a route's, or one policy's) on a reload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Continuity {
    /// No limiter of that name before: new.
    New,
    /// The same limiter, the same quota.
    Kept,
    /// The same limiter (every key's state kept), its quota changed live.
    Retuned,
    /// A new limiter, its keys afresh, for this reason.
    Rebuilt(String),
}

impl Continuity {
    /// Whether the limiter is new (its keys start afresh).
    pub(crate) fn is_fresh(&self) -> bool {
        matches!(self, Continuity::New | Continuity::Rebuilt(_))
    }
}

/// A quota change a kept limiter takes once the whole new table is built, so that a reload that
/// fails changes nothing in the running table.
pub(crate) struct QuotaChange {
    /// The route's name, and the policy's (`None`: the route's one quota).
    pub(crate) route: String,
    pub(crate) policy: Option<String>,
    pub(crate) quota: Quota,
    pub(crate) take: Retuner,
}

impl QuotaChange {
    /// Changes the limiter's quota (`Err`: why it kept its quota).
    pub(crate) fn apply(&self) -> Result<(), String> {
        (self.take)(self.quota)
    }
}

/// What keeping or making one limiter came to.
pub(crate) struct Made<L> {
    pub(crate) limiter: Arc<L>,
    pub(crate) continuity: Continuity,
    /// The quota to change it to, when kept with a new one.
    pub(crate) retune: Option<Quota>,
}

/// What became of a limiter, without the limiter.
pub(crate) struct Kept {
    pub(crate) continuity: Continuity,
    pub(crate) retune: Option<Quota>,
}

impl Kept {
    pub(crate) fn of<L>(made: &Made<L>) -> Kept {
        Kept {
            continuity: made.continuity.clone(),
            retune: made.retune,
        }
    }
}

impl HeldLimiter {
    /// The running limiter (in `previous`) of the part named `name` (`None`: the route's one
    /// quota), when its
    /// key, algorithm and store are unchanged and it takes the new quota live; otherwise what
    /// the new one is (new, or rebuilt and why).
    pub(crate) fn keep<L: Send + Sync + 'static>(
        previous: Option<&HeldLimiter>,
        name: Option<&str>,
        spec: &LimiterSpec,
    ) -> Result<Made<L>, Continuity> {
        let Some(held) = previous.and_then(|previous| previous.part(name)) else {
            return Err(Continuity::New);
        };
        let limiter = || {
            Arc::clone(&held.limiter)
                .downcast::<L>()
                .map_err(|_| Continuity::Rebuilt("another kind of limiter".to_owned()))
        };
        match held.spec.change_to(spec) {
            LimiterChange::Same => Ok(Made {
                limiter: limiter()?,
                continuity: Continuity::Kept,
                retune: None,
            }),
            LimiterChange::Quota => match (held.can_take)(spec.quota) {
                Ok(()) => Ok(Made {
                    limiter: limiter()?,
                    continuity: Continuity::Retuned,
                    retune: Some(spec.quota),
                }),
                Err(why) => Err(Continuity::Rebuilt(why)),
            },
            LimiterChange::Other(why) => Err(Continuity::Rebuilt(why)),
        }
    }
}
