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

use tollgate::algorithm::Algorithm;
use tollgate::live::Retune;
use tollgate::metrics::LimiterName;
use tollgate::middleware::{HeaderKey, Ipv6Prefix, KeyExtractor, PeerIp, RateLimitLayer, RateLimiter};
use tollgate::policy_set::SetMember;
use tollgate::{
    CapacityError, FixedWindow, KeyedLimiter, KeyedLogLimiter, LeakyBucket, Live, PolicySet, PreciseClock,
    Quota, QuotaError, SlidingLog, SlidingWindow, TokenBucket, WhenFull,
};
use tower::Layer;

use crate::forms::{AlgorithmChoice, KeyChoice};
use crate::redis::WatchedRedis;
use crate::routing::RouteService;
use crate::settings::{FieldSettings, LimiterChange, LimiterSpec, NamedPolicy, RouteSettings, Store};
use crate::upstream::Upstream;

/// Checks whether a limiter takes a quota live (`Err`: why it needs a new limiter), or changes
/// it.
type Retuner = Arc<dyn Fn(Quota) -> Result<(), String> + Send + Sync>;

/// One limiter of a route (its one quota, or one of its named policies), as the routing table
/// holds it between reloads.
#[derive(Clone)]
struct HeldPart {
    /// The policy's name; `None` for a route's one quota.
    name: Option<String>,
    spec: LimiterSpec,
    /// The limiter itself (its type depends on the key and the algorithm); a new table built
    /// with the same key, algorithm and store takes it back by downcasting.
    limiter: Arc<dyn Any + Send + Sync>,
    /// Whether it takes a quota live.
    can_take: Retuner,
    /// Changes its quota live.
    take: Retuner,
    /// The keys an in-memory limiter holds.
    keys: Option<Arc<dyn Fn() -> usize + Send + Sync>>,
}

/// A route's limiters, as the routing table holds them between reloads.
#[derive(Clone)]
pub(crate) struct HeldLimiter {
    parts: Vec<HeldPart>,
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
    take: Retuner,
}

impl QuotaChange {
    /// Changes the limiter's quota (`Err`: why it kept its quota).
    pub(crate) fn apply(&self) -> Result<(), String> {
        (self.take)(self.quota)
    }
}

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

/// An in-memory limiter whose quota changes live: the keys it holds, its name in the library's
/// series, and the quota change.
trait TableLimiter: Sized {
    fn held_keys(&self) -> usize;
    fn with_name(self, name: LimiterName) -> Self;
    /// `Ok` when the limiter takes `quota` live; why not otherwise.
    fn can_take(&self, quota: Quota) -> Result<(), String>;
    fn take(&self, quota: Quota) -> Result<(), String>;
}

impl<K: Hash, A: Algorithm + Retune> TableLimiter for KeyedLimiter<K, Live<A>> {
    fn held_keys(&self) -> usize {
        self.len()
    }

    fn with_name(self, name: LimiterName) -> Self {
        self.named(name)
    }

    fn can_take(&self, quota: Quota) -> Result<(), String> {
        self.algorithm()
            .current()
            .retune(quota)
            .map(drop)
            .map_err(|e| e.to_string())
    }

    fn take(&self, quota: Quota) -> Result<(), String> {
        self.algorithm().set_quota(quota).map_err(|e| e.to_string())
    }
}

impl<K: Hash> TableLimiter for KeyedLogLimiter<K, PreciseClock, Live<SlidingLog>> {
    fn held_keys(&self) -> usize {
        self.len()
    }

    fn with_name(self, name: LimiterName) -> Self {
        self.named(name)
    }

    /// The log's rule (`KeyedLogLimiter::set_quota`): any limit, the same window or a shorter
    /// one.
    fn can_take(&self, quota: Quota) -> Result<(), String> {
        let next = SlidingLog::new(quota).map_err(|e| e.to_string())?;
        let running = self.algorithm().current().window();
        if next.window() > running {
            return Err(format!(
                "the sliding log's window lengthened from {running:?} to {:?}",
                next.window()
            ));
        }
        Ok(())
    }

    fn take(&self, quota: Quota) -> Result<(), String> {
        self.set_quota(quota).map_err(|e| e.to_string())
    }
}

/// The name of `route`'s limiter in the library's series (`tollgate::metrics`): the route's.
/// (Each policy of a route of several is named `ROUTE/POLICY`: [`Build::member`].)
pub(crate) fn limiter_name(route: &RouteSettings) -> Result<LimiterName, String> {
    LimiterName::new(&route.name).map_err(|e| format!("name: {e}"))
}

/// What keeping or making one limiter came to.
struct Made<L> {
    limiter: Arc<L>,
    continuity: Continuity,
    /// The quota to change it to, when kept with a new one.
    retune: Option<Quota>,
}

/// A keyed table of `algorithm`, its quota changeable live.
fn keyed<K: Hash, A: Algorithm>(algorithm: A, table: Table) -> Result<KeyedLimiter<K, Live<A>>, String> {
    let capacity = table.capacity;
    let limiter = KeyedLimiter::new(Live::new(algorithm), capacity)
        .map_err(|e: CapacityError| format!("capacity {capacity}: {e}"))?;
    Ok(limiter.when_full(table.when_full))
}

/// A keyed table of sliding logs, their quota changeable live.
fn logged<K: Hash>(
    log: SlidingLog,
    table: Table,
) -> Result<KeyedLogLimiter<K, PreciseClock, Live<SlidingLog>>, String> {
    let capacity = table.capacity;
    let limiter = KeyedLogLimiter::new(Live::new(log), capacity)
        .map_err(|e: CapacityError| format!("capacity {capacity}: {e}"))?;
    Ok(limiter.when_full(table.when_full))
}

/// A policy's limiter as a member of its route's set, what the next reload needs of it, and
/// what became of it.
type Member<K> = (Arc<dyn SetMember<K>>, HeldPart, Kept);

/// What became of a limiter, without the limiter.
struct Kept {
    continuity: Continuity,
    retune: Option<Quota>,
}

impl Kept {
    fn of<L>(made: &Made<L>) -> Kept {
        Kept {
            continuity: made.continuity.clone(),
            retune: made.retune,
        }
    }
}

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
        let made = match self.kept::<WatchedRedis>(None, &spec) {
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
        let made = match self.kept::<L>(name, &spec) {
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

    /// The running limiter of the part named `name` (`None`: the route's one quota), when its
    /// key, algorithm and store are unchanged and it takes the new quota live; otherwise what
    /// the new one is (new, or rebuilt and why).
    fn kept<L: Send + Sync + 'static>(
        &self,
        name: Option<&str>,
        spec: &LimiterSpec,
    ) -> Result<Made<L>, Continuity> {
        let Some(held) = self.previous.and_then(|previous| previous.part(name)) else {
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

/// Where a route's in-memory limiters keep their keys.
#[derive(Clone, Copy)]
struct Table {
    capacity: usize,
    when_full: WhenFull,
}
