//! What the gateway runs with, once the flags and the file are read and checked: the one shape
//! both the quick start (flags alone) and the configuration file become.

use std::net::SocketAddr;
use std::time::Duration;

use http::{Method, Uri};
use tollgate::distributed::redacted_url;
use tollgate::middleware::RouteFilter;
use tollgate::Quota;

use crate::forms::{AlgorithmChoice, KeyChoice, KeyKind, RedisAwayChoice, WhenFullChoice};

/// Where to listen, where to forward, and the limits.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) listen: SocketAddr,
    /// `None`: the built-in upstream answering `hello`.
    pub(crate) upstream: Option<Uri>,
    /// Where `/metrics` is served, if anywhere.
    pub(crate) metrics: Option<SocketAddr>,
    /// `None`: no rate limiter (`--no-limit`).
    pub(crate) limits: Option<Limits>,
}

/// The routes, where their keys are counted, and the fields written on responses.
#[derive(Clone, Debug)]
pub(crate) struct Limits {
    /// In order: a request is limited by the first route it matches; one matching none is
    /// forwarded unlimited.
    pub(crate) routes: Vec<RouteSettings>,
    pub(crate) store: Store,
    pub(crate) fields: FieldSettings,
}

/// Where each route counts its keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Store {
    /// A table in this process, per route, of `capacity` keys.
    Table {
        capacity: usize,
        when_full: WhenFullChoice,
    },
    /// Redis (one server or a cluster), shared by every gateway on it with the same route.
    Redis {
        target: RedisTarget,
        when_away: RedisAwayChoice,
        /// Whether each gateway spends units leased from Redis's quota locally (`--lease`,
        /// `[redis] lease`): the token bucket, the fixed window and the sliding window counter.
        lease: bool,
    },
}

/// Which Redis a route counts in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RedisTarget {
    /// One Redis, at this URL (`--redis`, `[redis] url`).
    Single(String),
    /// A Redis Cluster, found from these seed nodes (`--redis-cluster`, `[redis] cluster`).
    Cluster(Vec<String>),
}

impl RedisTarget {
    /// The target with its passwords hidden, for messages: `Redis at redis://:***@host:port/`,
    /// `Redis Cluster at redis://host:7000, redis://host:7001`.
    pub(crate) fn shown(&self) -> String {
        match self {
            RedisTarget::Single(url) => format!("Redis at {}", redacted_url(url)),
            RedisTarget::Cluster(seeds) => {
                let seeds: Vec<String> = seeds.iter().map(|seed| redacted_url(seed)).collect();
                format!("Redis Cluster at {}", seeds.join(", "))
            }
        }
    }
}

impl Store {
    /// The quick start's table: 100,000 keys, new ones refused when full.
    pub(crate) const DEFAULT_CAPACITY: usize = 100_000;
}

/// Which `RateLimit` fields responses carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FieldSettings {
    /// `X-RateLimit-Limit/Remaining/Reset` beside the IETF fields.
    pub(crate) legacy: bool,
    /// The fields on admitted responses too, not only on refusals.
    pub(crate) on_admitted: bool,
}

/// One route: which requests, keyed how, limited how.
#[derive(Clone, Debug)]
pub(crate) struct RouteSettings {
    /// The policy's name in the `RateLimit` fields, and the route's in metrics and logs.
    pub(crate) name: String,
    /// A path prefix (whole segments); `None`: every path.
    pub(crate) path: Option<String>,
    /// `None`: every method.
    pub(crate) method: Option<Method>,
    pub(crate) key: KeyChoice,
    /// An IPv6 client is keyed by its first this many bits (IP keys only).
    pub(crate) ipv6_prefix: u8,
    pub(crate) algorithm: AlgorithmChoice,
    /// The route's one quota, when `policies` is empty; the first policy's otherwise.
    pub(crate) quota: Quota,
    /// Several named policies, all or nothing (the file's `policies`); empty: the one `quota`.
    pub(crate) policies: Vec<NamedPolicy>,
    /// The leaky bucket's longest wait for a slot.
    pub(crate) max_delay: Option<Duration>,
}

/// One policy of a route with several: its name in the `RateLimit` fields, its algorithm and
/// quota.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NamedPolicy {
    pub(crate) name: String,
    pub(crate) algorithm: AlgorithmChoice,
    pub(crate) quota: Quota,
}

impl RouteSettings {
    /// The quick start's route: every request, under the policy name `default`.
    pub(crate) const QUICK_START_NAME: &'static str = "default";

    /// The IPv6 prefix of the quick start and of a route that names none.
    pub(crate) const DEFAULT_IPV6_PREFIX: u8 = 64;

    /// The requests this route limits.
    pub(crate) fn filter(&self) -> RouteFilter {
        let path = RouteFilter::path_prefix(self.path.clone().unwrap_or_default());
        match &self.method {
            Some(method) => RouteFilter::method(method.clone()).and(path),
            None => path,
        }
    }

    /// What decides whether a limiter can be kept across a reload.
    pub(crate) fn limiter_spec(&self, store: &Store) -> LimiterSpec {
        LimiterSpec {
            algorithm: self.algorithm,
            quota: self.quota,
            key: self.key.kind(),
            store: store.clone(),
        }
    }

    /// The same for one of its named policies.
    pub(crate) fn policy_spec(&self, policy: &NamedPolicy, store: &Store) -> LimiterSpec {
        LimiterSpec {
            algorithm: policy.algorithm,
            quota: policy.quota,
            key: self.key.kind(),
            store: store.clone(),
        }
    }
}

/// A limiter's policy: what it counts and how. Two routes (one before a reload, one after) of
/// the same name and equal specs can share one limiter, and so its counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LimiterSpec {
    pub(crate) algorithm: AlgorithmChoice,
    pub(crate) quota: Quota,
    pub(crate) key: KeyKind,
    pub(crate) store: Store,
}

/// How a route's limiter changes from one configuration to the next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum LimiterChange {
    /// The same policy: keep the limiter, and its counters.
    Same,
    /// Only the quota differs: keep the limiter and change its quota live, if the library
    /// takes the change.
    Quota,
    /// Another algorithm, key type or store: a new limiter, for this reason.
    Other(String),
}

impl LimiterSpec {
    /// How `self` differs from `next`.
    pub(crate) fn change_to(&self, next: &LimiterSpec) -> LimiterChange {
        if self == next {
            LimiterChange::Same
        } else if self.algorithm != next.algorithm {
            LimiterChange::Other(format!("algorithm {} -> {}", self.algorithm, next.algorithm))
        } else if self.key != next.key {
            LimiterChange::Other("another kind of key".to_owned())
        } else if self.store != next.store {
            LimiterChange::Other("another store".to_owned())
        } else {
            LimiterChange::Quota
        }
    }
}
