//! A [`PolicySet`] in front of a service: every policy announced in `RateLimit-Policy`, the
//! one that refused (or, admitted, the one nearest to refusal) in `RateLimit`.

use std::future::{ready, Future};
use std::time::Duration;

use super::limiter::{LimiterError, NamedPolicy, Origin, RateLimiter};
use crate::policy::Policy;
use crate::{Decision, Outcome, PolicySet, SetDecision};

impl<K: Sync> RateLimiter<K> for PolicySet<K> {
    fn decide(&self, key: &K, cost: u64) -> impl Future<Output = Result<Decision, LimiterError>> + Send {
        ready(
            self.check_n(key, cost)
                .map(|decided| decided.decision())
                .map_err(LimiterError::from),
        )
    }

    fn decide_now(&self, key: &K, cost: u64) -> Option<Result<Decision, LimiterError>> {
        Some(
            self.check_n(key, cost)
                .map(|decided| decided.decision())
                .map_err(LimiterError::from),
        )
    }

    /// The first policy that announces one (what a layer that reads one policy only shows).
    fn policy(&self) -> Policy {
        self.policies().into_iter().next().map_or_else(
            || Policy::new(self.capacity(), Duration::ZERO),
            |named| named.policy,
        )
    }

    /// Every policy that announces one ([`SetMember::announced`](crate::policy_set::SetMember::announced):
    /// each of tollgate's limiters), by its own name.
    fn policies(&self) -> Vec<NamedPolicy> {
        (0..self.len())
            .filter_map(|index| {
                let policy = self.limiter(index)?.announced()?;
                Some(NamedPolicy {
                    name: Some(self.name(index).to_owned()),
                    policy,
                })
            })
            .collect()
    }

    fn policy_changes(&self) -> u64 {
        self.changes()
    }

    /// The set's decision, reporting its refusing policy or its policy nearest to refusal (by
    /// its place among the announced ones). Counted by the set's limiters ([`Origin::Limiter`]);
    /// an admission with a wait (a shaper in the set) that its client leaves keeps its units:
    /// the set gives back only a refusal's.
    fn decide_now_reporting(
        &self,
        key: &K,
        cost: u64,
        _max_delay: Option<Duration>,
    ) -> Option<Result<(Decision, Origin, Option<usize>), LimiterError>> {
        Some(
            self.check_n(key, cost)
                .map(|decided| {
                    (
                        decided.decision(),
                        origin(&decided),
                        self.announced_index(decided.reporting()),
                    )
                })
                .map_err(LimiterError::from),
        )
    }
}

/// Where the set counted an admission: in its limiters, unless none counted it.
fn origin(decided: &SetDecision) -> Origin {
    match decided.outcome() {
        Outcome::AllowedUntracked => Origin::Uncounted,
        _ => Origin::Limiter,
    }
}

impl<K> PolicySet<K> {
    /// Policy `index`'s place among the policies that announce one; `None` when it does not.
    fn announced_index(&self, index: usize) -> Option<usize> {
        #[allow(clippy::needless_borrow)]
        let announces = |at: usize| {
            self.limiter(at)
                .is_some_and(|limiter| limiter.announced().is_some())
        };
        announces(index).then(|| (0..index).filter(|&at| announces(at)).count())
    }
}
