//! A route's limiter and the service it guards: built from the route's settings, or kept from
//! the route of the same name in the running table while its policy is unchanged, so that its
//! keys keep their counts across a reload.

use std::any::Any;
use std::fmt::Display;
use std::hash::Hash;
use std::sync::Arc;

use tollgate::algorithm::Algorithm;
use tollgate::metrics::LimiterName;
use tollgate::middleware::{HeaderKey, Ipv6Prefix, KeyExtractor, PeerIp, RateLimitLayer, RateLimiter};
use tollgate::{
    CapacityError, FixedWindow, KeyedLimiter, KeyedLogLimiter, LeakyBucket, QuotaError, SlidingLog,
    SlidingWindow, TokenBucket, WhenFull,
};
use tower::Layer;

use crate::forms::{AlgorithmChoice, KeyChoice};
use crate::redis::WatchedRedis;
use crate::routing::RouteService;
use crate::settings::{FieldSettings, LimiterChange, LimiterSpec, RouteSettings, Store};
use crate::upstream::Upstream;

/// A route's limiter, as the routing table holds it between reloads.
#[derive(Clone)]
pub(crate) struct HeldLimiter {
    pub(crate) spec: LimiterSpec,
    /// The limiter itself (its type depends on the key and the algorithm); a new table built
    /// with an unchanged spec takes it back by downcasting.
    limiter: Arc<dyn Any + Send + Sync>,
    /// The keys an in-memory limiter holds.
    keys: Option<Arc<dyn Fn() -> usize + Send + Sync>>,
    /// A Redis route's limiter, for the start-up check and the per-second report.
    pub(crate) redis: Option<Arc<WatchedRedis>>,
}

impl HeldLimiter {
    /// Whether the limiter keeps its keys in memory, and can count them.
    pub(crate) fn counts_keys(&self) -> bool {
        self.keys.is_some()
    }

    /// The keys the limiter holds now (in-memory limiters only).
    pub(crate) fn keys(&self) -> Option<usize> {
        self.keys.as_ref().map(|keys| keys())
    }
}

impl std::fmt::Debug for HeldLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldLimiter")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

/// A route's service, and the limiter it decides with.
pub(crate) struct BuiltRoute {
    pub(crate) service: Box<dyn RouteService>,
    pub(crate) limiter: HeldLimiter,
    /// Whether the limiter is new (its keys start afresh), not the previous table's.
    pub(crate) fresh: bool,
}

/// Builds `route`'s service over `upstream`, keeping `previous` (the limiter of the route of
/// the same name in the running table) when its policy is unchanged.
pub(crate) async fn build(
    route: &RouteSettings,
    store: &Store,
    fields: FieldSettings,
    upstream: &Upstream,
    previous: Option<&HeldLimiter>,
) -> Result<BuiltRoute, String> {
    let spec = route.limiter_spec(store);
    let kept = previous.and_then(|held| match held.spec.change_to(&spec) {
        LimiterChange::Same => Some(held.clone()),
        // The place for the library's live quota change: once a limiter can take a new quota
        // in place, apply `spec.quota` to `held`'s limiter here and keep it (its keys keep
        // their state). Until then a changed quota gets a new limiter.
        LimiterChange::Quota => None,
        LimiterChange::Other => None,
    });
    let build = Build {
        route,
        store,
        fields,
        upstream,
        spec,
        kept,
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
    spec: LimiterSpec,
    kept: Option<HeldLimiter>,
}

/// The keys an in-memory limiter holds, and its name in the library's series.
trait HeldKeys: Sized {
    fn held_keys(&self) -> usize;
    fn with_name(self, name: LimiterName) -> Self;
}

impl<K: Hash, A: Algorithm> HeldKeys for KeyedLimiter<K, A> {
    fn held_keys(&self) -> usize {
        self.len()
    }

    fn with_name(self, name: LimiterName) -> Self {
        self.named(name)
    }
}

impl<K: Hash> HeldKeys for KeyedLogLimiter<K> {
    fn held_keys(&self) -> usize {
        self.len()
    }

    fn with_name(self, name: LimiterName) -> Self {
        self.named(name)
    }
}

/// The name of `route`'s limiter in the library's series (`tollgate::metrics`): the route's.
pub(crate) fn limiter_name(route: &RouteSettings) -> Result<LimiterName, String> {
    LimiterName::new(&route.name).map_err(|e| format!("name: {e}"))
}

impl Build<'_> {
    /// The route's limiter over the extractor's key type, and its service.
    async fn with_key<X>(self, extractor: X) -> Result<BuiltRoute, String>
    where
        X: KeyExtractor + Send + Sync + 'static,
        X::Key: Hash + Eq + Clone + Display + Send + Sync + 'static,
    {
        let quota = self.route.quota;
        let bad_quota = |e: QuotaError| format!("quota `{quota}`: {e}");
        let (capacity, when_full) = match self.store {
            Store::Table { capacity, when_full } => (*capacity, WhenFull::from(*when_full)),
            Store::Redis {
                target,
                when_away,
                lease,
            } => {
                let (limiter, fresh) = match self.kept_limiter::<WatchedRedis>() {
                    Some(limiter) => (limiter, false),
                    None => (
                        Arc::new(WatchedRedis::connect(target, *when_away, *lease, self.route).await?),
                        true,
                    ),
                };
                let redis = Some(Arc::clone(&limiter));
                return self.finish(extractor, limiter, None, redis, fresh);
            }
        };
        let bad_capacity = |e: CapacityError| format!("capacity {capacity}: {e}");
        match self.route.algorithm {
            AlgorithmChoice::Token => self.in_table(extractor, || {
                let bucket = TokenBucket::new(quota).map_err(bad_quota)?;
                let table = KeyedLimiter::<X::Key, _>::new(bucket, capacity).map_err(bad_capacity)?;
                Ok(table.when_full(when_full))
            }),
            AlgorithmChoice::Leaky => self.in_table(extractor, || {
                let bucket = LeakyBucket::new(quota).map_err(bad_quota)?;
                let table = KeyedLimiter::<X::Key, _>::new(bucket, capacity).map_err(bad_capacity)?;
                Ok(table.when_full(when_full))
            }),
            AlgorithmChoice::Fixed => self.in_table(extractor, || {
                let window = FixedWindow::new(quota).map_err(bad_quota)?;
                let table = KeyedLimiter::<X::Key, _>::new(window, capacity).map_err(bad_capacity)?;
                Ok(table.when_full(when_full))
            }),
            AlgorithmChoice::Sliding => self.in_table(extractor, || {
                let window = SlidingWindow::new(quota).map_err(bad_quota)?;
                let table = KeyedLimiter::<X::Key, _>::new(window, capacity).map_err(bad_capacity)?;
                Ok(table.when_full(when_full))
            }),
            AlgorithmChoice::Log => self.in_table(extractor, || {
                let log = SlidingLog::new(quota).map_err(bad_quota)?;
                let table = KeyedLogLimiter::<X::Key>::new(log, capacity).map_err(bad_capacity)?;
                Ok(table.when_full(when_full))
            }),
        }
    }

    /// The kept limiter, if its type is `L` (it always is when its spec is unchanged).
    fn kept_limiter<L: Send + Sync + 'static>(&self) -> Option<Arc<L>> {
        let kept = self.kept.as_ref()?;
        Arc::clone(&kept.limiter).downcast::<L>().ok()
    }

    /// An in-memory limiter: the kept one, or a new one from `make`.
    fn in_table<X, L>(
        self,
        extractor: X,
        make: impl FnOnce() -> Result<L, String>,
    ) -> Result<BuiltRoute, String>
    where
        X: KeyExtractor + Send + Sync + 'static,
        X::Key: Clone + Send + Sync + 'static,
        L: RateLimiter<X::Key> + HeldKeys + Send + Sync + 'static,
    {
        let (limiter, fresh) = match self.kept_limiter::<L>() {
            Some(limiter) => (limiter, false),
            None => (Arc::new(make()?.with_name(limiter_name(self.route)?)), true),
        };
        let counted = Arc::clone(&limiter);
        let keys: Arc<dyn Fn() -> usize + Send + Sync> = Arc::new(move || counted.held_keys());
        self.finish(extractor, limiter, Some(keys), None, fresh)
    }

    /// The layer around the upstream, with the route's name and fields.
    fn finish<X, L>(
        self,
        extractor: X,
        limiter: Arc<L>,
        keys: Option<Arc<dyn Fn() -> usize + Send + Sync>>,
        redis: Option<Arc<WatchedRedis>>,
        fresh: bool,
    ) -> Result<BuiltRoute, String>
    where
        X: KeyExtractor + Send + Sync + 'static,
        X::Key: Clone + Send + Sync + 'static,
        L: RateLimiter<X::Key> + Send + Sync + 'static,
    {
        let held = HeldLimiter {
            spec: self.spec,
            limiter: Arc::clone(&limiter) as Arc<dyn Any + Send + Sync>,
            keys,
            redis,
        };
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
            fresh,
        })
    }
}
