//! A route's limiter and the service it guards: built from the route's settings, or kept from
//! the route of the same name in the running table, so that its keys keep their counts across a
//! reload. A limiter is kept when only its quota changed too: the quota then changes live (the
//! library's `Live`, `set_quota`, `RedisLimiter::set_algorithm`), once the whole new table is
//! built ([`QuotaChange`]). A route of several named policies keeps each policy's limiter by its
//! name.

use std::any::Any;
use std::fmt::Display;
use std::hash::Hash;
use std::sync::Arc;

use tollgate::metrics::LimiterName;
use tollgate::middleware::{HeaderKey, Ipv6Prefix, KeyExtractor, PeerIp, RateLimitLayer, RateLimiter};
use tollgate::policy_set::SetMember;
use tollgate::{
    FixedWindow, LeakyBucket, PolicySet, QuotaError, SlidingLog, SlidingWindow, TokenBucket, WhenFull,
};
use tower::Layer;

use crate::forms::{AlgorithmChoice, KeyChoice};
use crate::held::{Continuity, HeldLimiter, HeldPart, Kept, Made, QuotaChange};
use crate::redis::WatchedRedis;
use crate::routing::RouteService;
use crate::settings::{FieldSettings, LimiterSpec, NamedPolicy, RouteSettings, Store};
use crate::tables::{keyed, logged, Table, TableLimiter};
use crate::upstream::Upstream;

/// A route's service, and the limiters it decides with.
pub(crate) struct BuiltRoute {
    pub(crate) service: Box<dyn RouteService>,
    pub(crate) limiter: HeldLimiter,
    /// What became of each limiter: the route's one, or each policy's by name.
    pub(crate) continuity: Vec<(Option<String>, Continuity)>,
    /// The quota changes to apply when the table is swapped in.
    pub(crate) changes: Vec<QuotaChange>,
}

/// Builds `route`'s service over `upstream`, keeping from `previous` (the limiters of the route
/// of the same name in the running table) each limiter whose key, algorithm and store are
/// unchanged.
pub(crate) async fn build(
    route: &RouteSettings,
    store: &Store,
    fields: FieldSettings,
    upstream: &Upstream,
    previous: Option<&HeldLimiter>,
) -> Result<BuiltRoute, String> {
    let build = Build {
        route,
        store,
        fields,
        upstream,
        previous,
    };
    let prefix = route.ipv6_prefix;
    let bad_prefix = |e: tollgate::middleware::IpRangeError| format!("ipv6_prefix {prefix}: {e}");
    match &route.key {
        KeyChoice::Peer => {
            build
                .with_key(Ipv6Prefix::new(PeerIp, prefix).map_err(bad_prefix)?)
                .await
        }
        KeyChoice::Header(name) => build.with_key(HeaderKey::new(name.clone())).await,
        KeyChoice::ClientIp { extractor, .. } => {
            build
                .with_key(Ipv6Prefix::new(extractor.clone(), prefix).map_err(bad_prefix)?)
                .await
        }
    }
}

/// What building one route needs.
struct Build<'a> {
    route: &'a RouteSettings,
    store: &'a Store,
    fields: FieldSettings,
    upstream: &'a Upstream,
    previous: Option<&'a HeldLimiter>,
}

/// The name of `route`'s limiter in the library's series (`tollgate::metrics`): the route's.
/// (Each policy of a route of several is named `ROUTE/POLICY`: [`Build::member`].)
pub(crate) fn limiter_name(route: &RouteSettings) -> Result<LimiterName, String> {
    LimiterName::new(&route.name).map_err(|e| format!("name: {e}"))
}

/// A policy's limiter as a member of its route's set, what the next reload needs of it, and
/// what became of it.
type Member<K> = (Arc<dyn SetMember<K>>, HeldPart, Kept);

impl Build<'_> {
    /// The route's limiter (or policy set) over the extractor's key type, and its service.
    async fn with_key<X>(self, extractor: X) -> Result<BuiltRoute, String>
    where
        X: KeyExtractor + Send + Sync + 'static,
        X::Key: Hash + Eq + Clone + Display + Send + Sync + 'static,
    {
        let table = match self.store {
            Store::Table { capacity, when_full } => Table {
                capacity: *capacity,
                when_full: WhenFull::from(*when_full),
            },
            Store::Redis {
                target,
                when_away,
                lease,
            } => return self.in_redis(extractor, target, *when_away, *lease).await,
        };
        if self.route.policies.is_empty() {
            let quota = self.route.quota;
            let bad_quota = |e: QuotaError| format!("quota `{quota}`: {e}");
            let spec = self.route.limiter_spec(self.store);
            let name = limiter_name(self.route)?;
            return match self.route.algorithm {
                AlgorithmChoice::Token => {
                    let bucket = TokenBucket::new(quota).map_err(bad_quota)?;
                    self.single(extractor, spec, name, || keyed(bucket, table))
                }
                AlgorithmChoice::Leaky => {
                    let bucket = LeakyBucket::new(quota).map_err(bad_quota)?;
                    self.single(extractor, spec, name, || keyed(bucket, table))
                }
                AlgorithmChoice::Fixed => {
                    let window = FixedWindow::new(quota).map_err(bad_quota)?;
                    self.single(extractor, spec, name, || keyed(window, table))
                }
                AlgorithmChoice::Sliding => {
                    let window = SlidingWindow::new(quota).map_err(bad_quota)?;
                    self.single(extractor, spec, name, || keyed(window, table))
                }
                AlgorithmChoice::Log => {
                    let log = SlidingLog::new(quota).map_err(bad_quota)?;
                    self.single(extractor, spec, name, || logged(log, table))
                }
            };
        }
        let mut set: Option<PolicySet<X::Key>> = None;
        let (mut parts, mut continuity, mut changes) = (Vec::new(), Vec::new(), Vec::new());
        for policy in &self.route.policies {
            let (member, part, kept) = self.member::<X::Key>(policy, table)?;
            let bad_set = |e: tollgate::policy_set::PolicySetError| format!("policies: {e}");
            set = Some(match set {
                None => PolicySet::new(&policy.name, member).map_err(bad_set)?,
                Some(set) => set.and(&policy.name, member).map_err(bad_set)?,
            });
            let (change, said) = self.outcome(&part, kept);
            changes.extend(change);
            continuity.extend(said);
            parts.push(part);
        }
        let set = set.ok_or_else(|| "policies: the list is empty".to_owned())?;
        let held = HeldLimiter { parts, redis: None };
        self.finish(extractor, Arc::new(set), held, continuity, changes)
    }

    /// A Redis route's limiter, kept (its quota changed live if need be) or new, and its
    /// service.
    async fn in_redis<X>(
        self,
        extractor: X,
        target: &crate::settings::RedisTarget,
        when_away: crate::forms::RedisAwayChoice,
        lease: bool,
    ) -> Result<BuiltRoute, String>
    where
        X: KeyExtractor + Send + Sync + 'static,
        X::Key: Hash + Eq + Clone + Display + Send + Sync + 'static,
    {
        let spec = self.route.limiter_spec(self.store);
        let made = match HeldLimiter::keep::<WatchedRedis>(self.previous, None, &spec) {
            Ok(made) => made,
            Err(continuity) => Made {
                limiter: Arc::new(WatchedRedis::connect(target, when_away, lease, self.route).await?),
                continuity,
                retune: None,
            },
        };
        let algorithm = self.route.algorithm;
        let (checked, changed) = (Arc::clone(&made.limiter), Arc::clone(&made.limiter));
        let part = HeldPart {
            name: None,
            spec,
            limiter: Arc::clone(&made.limiter) as Arc<dyn Any + Send + Sync>,
            can_take: Arc::new(move |quota| checked.can_take(algorithm, quota)),
            take: Arc::new(move |quota| changed.take(algorithm, quota)),
            keys: None,
        };
        let redis = Some(Arc::clone(&made.limiter));
        let (changes, continuity) = self.outcome(&part, Kept::of(&made));
        let held = HeldLimiter {
            parts: vec![part],
            redis,
        };
        self.finish(extractor, made.limiter, held, continuity, changes)
    }

    /// A route of one quota in memory: its limiter, kept or from `make`, and its service.
    fn single<X, L>(
        self,
        extractor: X,
        spec: LimiterSpec,
        name: LimiterName,
        make: impl FnOnce() -> Result<L, String>,
    ) -> Result<BuiltRoute, String>
    where
        X: KeyExtractor + Send + Sync + 'static,
        X::Key: Clone + Send + Sync + 'static,
        L: RateLimiter<X::Key> + TableLimiter + Send + Sync + 'static,
    {
        let (part, made) = self.table_part(None, spec, name, make)?;
        let (changes, continuity) = self.outcome(&part, Kept::of(&made));
        let held = HeldLimiter {
            parts: vec![part],
            redis: None,
        };
        self.finish(extractor, made.limiter, held, continuity, changes)
    }

    /// One named policy's limiter in memory, kept or new, as a member of the route's set.
    fn member<K>(&self, policy: &NamedPolicy, table: Table) -> Result<Member<K>, String>
    where
        K: Hash + Eq + Send + Sync + 'static,
    {
        let quota = policy.quota;
        let bad_quota = |e: QuotaError| format!("policies: `{}`: quota `{quota}`: {e}", policy.name);
        let spec = self.route.policy_spec(policy, self.store);
        let name = LimiterName::new(&format!("{}/{}", self.route.name, policy.name))
            .map_err(|e| format!("policies: `{}`: {e}", policy.name))?;
        let at = Some(policy.name.as_str());
        fn erased<K: ?Sized, L: SetMember<K> + 'static>((part, made): (HeldPart, Made<L>)) -> Member<K> {
            let kept = Kept::of(&made);
            (made.limiter, part, kept)
        }
        Ok(match policy.algorithm {
            AlgorithmChoice::Token => {
                let bucket = TokenBucket::new(quota).map_err(bad_quota)?;
                erased(self.table_part(at, spec, name, || keyed::<K, _>(bucket, table))?)
            }
            AlgorithmChoice::Leaky => {
                let bucket = LeakyBucket::new(quota).map_err(bad_quota)?;
                erased(self.table_part(at, spec, name, || keyed::<K, _>(bucket, table))?)
            }
            AlgorithmChoice::Fixed => {
                let window = FixedWindow::new(quota).map_err(bad_quota)?;
                erased(self.table_part(at, spec, name, || keyed::<K, _>(window, table))?)
            }
            AlgorithmChoice::Sliding => {
                let window = SlidingWindow::new(quota).map_err(bad_quota)?;
                erased(self.table_part(at, spec, name, || keyed::<K, _>(window, table))?)
            }
            AlgorithmChoice::Log => {
                let log = SlidingLog::new(quota).map_err(bad_quota)?;
                erased(self.table_part(at, spec, name, || logged::<K>(log, table))?)
            }
        })
    }

    /// An in-memory limiter (the route's one, or the policy `name`'s), kept or from `make`, with
    /// what the next reload needs of it.
    fn table_part<L>(
        &self,
        name: Option<&str>,
        spec: LimiterSpec,
        metric: LimiterName,
        make: impl FnOnce() -> Result<L, String>,
    ) -> Result<(HeldPart, Made<L>), String>
    where
        L: TableLimiter + Send + Sync + 'static,
    {
        let made = match HeldLimiter::keep::<L>(self.previous, name, &spec) {
            Ok(made) => made,
            Err(continuity) => Made {
                limiter: Arc::new(make()?.with_name(metric)),
                continuity,
                retune: None,
            },
        };
        let (counted, checked, changed) = (
            Arc::clone(&made.limiter),
            Arc::clone(&made.limiter),
            Arc::clone(&made.limiter),
        );
        let part = HeldPart {
            name: name.map(str::to_owned),
            spec,
            limiter: Arc::clone(&made.limiter) as Arc<dyn Any + Send + Sync>,
            can_take: Arc::new(move |quota| checked.can_take(quota)),
            take: Arc::new(move |quota| changed.take(quota)),
            keys: Some(Arc::new(move || counted.held_keys())),
        };
        Ok((part, made))
    }

    /// The quota change a kept part takes, and what became of it.
    fn outcome(&self, part: &HeldPart, kept: Kept) -> (Vec<QuotaChange>, Vec<(Option<String>, Continuity)>) {
        let change = kept.retune.map(|quota| QuotaChange {
            route: self.route.name.clone(),
            policy: part.name.clone(),
            quota,
            take: Arc::clone(&part.take),
        });
        (
            change.into_iter().collect(),
            vec![(part.name.clone(), kept.continuity)],
        )
    }

    /// The layer around the upstream, with the route's name and fields.
    fn finish<X, L>(
        self,
        extractor: X,
        limiter: Arc<L>,
        held: HeldLimiter,
        continuity: Vec<(Option<String>, Continuity)>,
        changes: Vec<QuotaChange>,
    ) -> Result<BuiltRoute, String>
    where
        X: KeyExtractor + Send + Sync + 'static,
        X::Key: Clone + Send + Sync + 'static,
        L: RateLimiter<X::Key> + Send + Sync + 'static,
    {
        let mut layer = RateLimitLayer::builder(limiter, extractor)
            .policy_name(&self.route.name)
            .map_err(|e| format!("name: {e}"))?
            .legacy_fields(self.fields.legacy)
            .fields_on_admitted(self.fields.on_admitted);
        if let Some(max) = self.route.max_delay {
            layer = layer.max_delay(max);
        }
        Ok(BuiltRoute {
            service: Box::new(layer.build().layer(self.upstream.clone())),
            limiter: held,
            continuity,
            changes,
        })
    }
}
