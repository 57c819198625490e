//! Routes counted in Redis (one server or a cluster): their limiter, watched for decisions
//! Redis did not make and why, and the check of the Redis configuration before the gateway
//! listens.

use std::fmt::Display;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tollgate::distributed::{
    FailurePolicy, LeaseConfigError, LeasedLimiter, RedisAlgorithm, RedisConfigError, RedisFailureCause,
    RedisLimiter,
};
use tollgate::middleware::{LimiterError, Origin, Policy, RateLimiter};
use tollgate::{Decision, FixedWindow, LeakyBucket, Quota, SlidingLog, SlidingWindow, TokenBucket};

use crate::forms::{AlgorithmChoice, RedisAwayChoice};
use crate::routing::Table;
use crate::settings::{RedisTarget, RouteSettings, Store};

/// How long a refused client waits before retrying while Redis is away.
const AWAY_RETRY_AFTER: Duration = Duration::from_secs(1);

/// The Redis limiter, counting the decisions its failure policy made instead of Redis, which
/// the gateway prints each second they happen, with the cause of the last failure.
#[derive(Debug)]
pub(crate) struct WatchedRedis {
    limiter: Decider,
    /// Decisions made without Redis since the last report.
    without_redis: AtomicU64,
}

/// A decision per request in Redis, or on leases taken from it (`--lease`).
#[derive(Debug)]
enum Decider {
    PerRequest(RedisLimiter),
    Leased(LeasedLimiter),
}

impl Decider {
    fn per_request(&self) -> &RedisLimiter {
        match self {
            Decider::PerRequest(limiter) => limiter,
            Decider::Leased(limiter) => limiter.per_decision(),
        }
    }
}

impl WatchedRedis {
    /// The limiter of `route` on `target`: its keys are `gateway:{route}:...`, so every gateway
    /// on the same Redis (or cluster) with the same route name shares one quota per key.
    pub(crate) async fn connect(
        target: &RedisTarget,
        when_away: RedisAwayChoice,
        lease: bool,
        route: &RouteSettings,
    ) -> Result<WatchedRedis, String> {
        let algorithm = redis_algorithm(route.algorithm, route.quota)?;
        let policy = match when_away {
            RedisAwayChoice::Refuse => FailurePolicy::FailClosed {
                retry_after: AWAY_RETRY_AFTER,
            },
            RedisAwayChoice::Admit => FailurePolicy::FailOpen,
        };
        let builder = match target {
            RedisTarget::Single(url) => RedisLimiter::builder(url, algorithm, policy),
            RedisTarget::Cluster(seeds) => RedisLimiter::cluster_builder(seeds, algorithm, policy),
        };
        // A cluster's seeds are asked for its topology here: seeds without cluster support are
        // refused now, before the start-up check.
        let builder = builder.prefix(format!("gateway:{}:", route.name));
        let limiter = if lease {
            let leased = builder.leased().connect().await.map_err(|e| match e {
                LeaseConfigError::Redis(e) => format!("{}: {}", target.shown(), said(target, &e)),
                e => format!("route `{}`: {e} (the file's `lease`, or --lease)", route.name),
            })?;
            Decider::Leased(leased.named(crate::limiter::limiter_name(route)?))
        } else {
            let limiter = builder
                .connect()
                .await
                .map_err(|e| format!("{}: {}", target.shown(), said(target, &e)))?
                .named(crate::limiter::limiter_name(route)?);
            Decider::PerRequest(limiter)
        };
        Ok(WatchedRedis {
            limiter,
            without_redis: AtomicU64::new(0),
        })
    }

    /// Whether the route's quota can change to `quota` live: per-request decisions only (a
    /// lease is spent under the quota it was taken with).
    pub(crate) fn can_take(&self, algorithm: AlgorithmChoice, quota: Quota) -> Result<(), String> {
        match &self.limiter {
            Decider::PerRequest(_) => redis_algorithm(algorithm, quota).map(drop),
            Decider::Leased(_) => Err("units are leased under the quota they were taken with".to_owned()),
        }
    }

    /// Changes the route's quota live ([`RedisLimiter::set_algorithm`]).
    pub(crate) fn take(&self, algorithm: AlgorithmChoice, quota: Quota) -> Result<(), String> {
        self.can_take(algorithm, quota)?;
        let next = redis_algorithm(algorithm, quota)?;
        self.limiter
            .per_request()
            .set_algorithm(next)
            .map_err(|e| e.to_string())
    }

    /// The decision's `origin`, after counting it if Redis did not make it.
    fn watched<T>(&self, answer: Result<(T, Origin), LimiterError>) -> Result<(T, Origin), LimiterError> {
        if let Ok((_, Origin::Uncounted | Origin::Fallback | Origin::FallbackSlot { .. })) = &answer {
            // Relaxed: a statistic, read once a second for a report.
            self.without_redis.fetch_add(1, Ordering::Relaxed);
        }
        answer
    }

    /// The decisions made without Redis since the last call, and the cause of the last failure
    /// to reach it (`None` when Redis never failed).
    fn take_report(&self) -> (u64, Option<RedisFailureCause>) {
        // Relaxed: a statistic, read once a second for a report; nothing else is published
        // through it.
        let count = self.without_redis.swap(0, Ordering::Relaxed);
        (count, self.limiter.per_request().last_failure())
    }
}

impl<K: Display + Sync> RateLimiter<K> for WatchedRedis {
    fn decide(&self, key: &K, cost: u64) -> impl Future<Output = Result<Decision, LimiterError>> + Send {
        let decided = self.decide_with_origin(key, cost);
        async move { decided.await.map(|(decision, _)| decision) }
    }

    async fn decide_with_origin(&self, key: &K, cost: u64) -> Result<(Decision, Origin), LimiterError> {
        let decided = match &self.limiter {
            Decider::PerRequest(limiter) => limiter.decide_with_origin(key, cost).await,
            Decider::Leased(limiter) => limiter.decide_with_origin(key, cost).await,
        };
        self.watched(decided)
    }

    /// A leased limiter decides here what its lease holds (no task, no allocation); a request
    /// that needs Redis goes the asynchronous way.
    fn decide_now(&self, key: &K, cost: u64) -> Option<Result<Decision, LimiterError>> {
        match &self.limiter {
            Decider::PerRequest(_) => None,
            Decider::Leased(limiter) => limiter.decide_now(key, cost),
        }
    }

    async fn decide_within(
        &self,
        key: &K,
        cost: u64,
        max_delay: Option<Duration>,
    ) -> Result<(Decision, Origin), LimiterError> {
        let decided = match &self.limiter {
            Decider::PerRequest(limiter) => limiter.decide_within(key, cost, max_delay).await,
            Decider::Leased(limiter) => limiter.decide_within(key, cost, max_delay).await,
        };
        self.watched(decided)
    }

    fn policy(&self) -> Policy {
        RateLimiter::<K>::policy(self.limiter.per_request())
    }

    fn policy_changes(&self) -> u64 {
        self.limiter.per_request().changes()
    }

    fn refund(&self, key: K, cost: u64, origin: Origin) {
        match &self.limiter {
            Decider::PerRequest(limiter) => limiter.refund(key, cost, origin),
            Decider::Leased(limiter) => limiter.refund(key, cost, origin),
        }
    }

    fn meter(&self) -> Option<&tollgate::metrics::Meter> {
        match &self.limiter {
            Decider::PerRequest(limiter) => limiter.meter(),
            Decider::Leased(limiter) => limiter.meter(),
        }
    }
}

/// The Redis form of `algorithm` under `quota`.
fn redis_algorithm(algorithm: AlgorithmChoice, quota: Quota) -> Result<RedisAlgorithm, String> {
    let bad_quota = |e: tollgate::QuotaError| format!("quota `{quota}`: {e}");
    Ok(match algorithm {
        AlgorithmChoice::Token => TokenBucket::new(quota).map_err(bad_quota)?.into(),
        AlgorithmChoice::Leaky => LeakyBucket::new(quota).map_err(bad_quota)?.into(),
        AlgorithmChoice::Fixed => FixedWindow::new(quota).map_err(bad_quota)?.into(),
        AlgorithmChoice::Sliding => SlidingWindow::new(quota).map_err(bad_quota)?.into(),
        AlgorithmChoice::Log => SlidingLog::new(quota).map_err(bad_quota)?.into(),
    })
}

/// Which routes [`check`] asks about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Checked {
    /// Every Redis route: at start, before the gateway listens.
    Every,
    /// The Redis routes whose limiter is new in a reloaded table (a kept one was checked when
    /// it was built).
    New,
}

/// Asks Redis once for each Redis route (the library's `verify`: one peek of the route's own
/// script, which writes nothing; on a cluster each seed node's `CLUSTER INFO` first), all routes at
/// once.
///
/// A configuration no retry mends (a wrong or missing password, a database past the server's,
/// a user without permission, seeds that are not a cluster) is an error, with its cause and
/// what to fix: the gateway does not start (or a reload does not apply). One that may pass by
/// itself (a refused connection, no answer in time, a cluster down) is a warning on stderr:
/// the route answers by its failure policy until Redis answers.
pub(crate) async fn check(table: &Table, which: Checked) -> Result<(), String> {
    let Some(Store::Redis {
        target, when_away, ..
    }) = table.settings.limits.as_ref().map(|l| &l.store)
    else {
        return Ok(());
    };
    let mut asked = JoinSet::new();
    for (at, route) in table.routes.iter().enumerate() {
        let Some(redis) = &route.limiter.redis else {
            continue;
        };
        if which == Checked::New && !route.fresh() {
            continue;
        }
        let redis = Arc::clone(redis);
        asked.spawn(async move { (at, redis.limiter.per_request().verify().await) });
    }
    let mut answers = Vec::with_capacity(asked.len());
    while let Some(joined) = asked.join_next().await {
        answers.push(joined.map_err(|e| format!("the check of Redis did not finish: {e}"))?);
    }
    answers.sort_by_key(|(at, _)| *at);
    let meanwhile = match when_away {
        RedisAwayChoice::Refuse => "refused (429, retry after 1 s)",
        RedisAwayChoice::Admit => "forwarded, uncounted",
    };
    for (at, answer) in answers {
        let Err(error) = answer else { continue };
        let route = &table.routes[at].settings.name;
        let shown = target.shown();
        if !error.is_transient() {
            return Err(format!("route `{route}`: {shown}: {}", said(target, &error)));
        }
        eprintln!(
            "tollgate-gateway: warning: route {route}: {shown}: {}; its requests are {meanwhile} until Redis answers",
            said(target, &error)
        );
    }
    Ok(())
}

/// What `error` says, for a message that already names `target`: the cause alone where the
/// error would name the one node again, and the gateway's flag where the library's message
/// names its own API.
fn said(target: &RedisTarget, error: &RedisConfigError) -> String {
    match (target, error) {
        (
            RedisTarget::Single(_),
            RedisConfigError::Unreachable { cause, .. } | RedisConfigError::Refused { cause, .. },
        ) => cause.to_string(),
        (_, RedisConfigError::NotACluster { .. }) => format!(
            "{error} (in the gateway: --redis URL, or `url` in [redis], instead of --redis-cluster or `cluster`)"
        ),
        _ => error.to_string(),
    }
}

/// The lines of this second's report: for each Redis route whose failure policy decided
/// instead of Redis, how many times, and the cause of the last failure to reach Redis.
pub(crate) fn report(table: &Table) -> Vec<String> {
    let mut lines = Vec::new();
    for route in &table.routes {
        let Some(redis) = &route.limiter.redis else {
            continue;
        };
        let (count, cause) = redis.take_report();
        if count == 0 {
            continue;
        }
        let cause = cause.map_or(String::new(), |cause| format!("; last failure: {cause}"));
        lines.push(format!(
            "decided without Redis (away or failing): {count} on route {}{cause}",
            route.settings.name
        ));
    }
    lines
}
