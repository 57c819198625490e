//! Routes counted in Redis: their limiter, watched for decisions Redis did not make, and the
//! check of the Redis configuration before the gateway listens.

use std::fmt::Display;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tollgate::distributed::{redacted_url, FailurePolicy, RedisAlgorithm, RedisLimiter};
use tollgate::middleware::{LimiterError, Origin, Policy, RateLimiter};
use tollgate::{Decision, FixedWindow, LeakyBucket, SlidingLog, SlidingWindow, TokenBucket};

use crate::counters::WITHOUT_REDIS;
use crate::forms::{AlgorithmChoice, RedisAwayChoice};
use crate::routing::Table;
use crate::settings::RouteSettings;

/// How long a refused client waits before retrying while Redis is away.
const AWAY_RETRY_AFTER: Duration = Duration::from_secs(1);

/// The Redis limiter, counting the decisions its failure policy made instead of Redis, which
/// the gateway prints each second they happen.
#[derive(Debug)]
pub(crate) struct WatchedRedis {
    limiter: RedisLimiter,
    /// The URL with its password hidden, for messages.
    shown: String,
}

impl WatchedRedis {
    /// The limiter of `route` on the Redis at `url`: its keys are `gateway:{route}:...`, so
    /// every gateway with the same URL and route name shares one quota per key.
    pub(crate) async fn connect(
        url: &str,
        when_away: RedisAwayChoice,
        route: &RouteSettings,
    ) -> Result<WatchedRedis, String> {
        let quota = route.quota;
        let bad_quota = |e: tollgate::QuotaError| format!("quota `{quota}`: {e}");
        let algorithm: RedisAlgorithm = match route.algorithm {
            AlgorithmChoice::Token => TokenBucket::new(quota).map_err(bad_quota)?.into(),
            AlgorithmChoice::Leaky => LeakyBucket::new(quota).map_err(bad_quota)?.into(),
            AlgorithmChoice::Fixed => FixedWindow::new(quota).map_err(bad_quota)?.into(),
            AlgorithmChoice::Sliding => SlidingWindow::new(quota).map_err(bad_quota)?.into(),
            AlgorithmChoice::Log => SlidingLog::new(quota).map_err(bad_quota)?.into(),
        };
        let policy = match when_away {
            RedisAwayChoice::Refuse => FailurePolicy::FailClosed {
                retry_after: AWAY_RETRY_AFTER,
            },
            RedisAwayChoice::Admit => FailurePolicy::FailOpen,
        };
        let shown = redacted_url(url);
        let limiter = RedisLimiter::builder(url, algorithm, policy)
            .prefix(format!("gateway:{}:", route.name))
            .connect()
            .await
            .map_err(|e| format!("Redis at {shown}: {e}"))?;
        Ok(WatchedRedis { limiter, shown })
    }

    /// The decision's `origin`, after counting it if Redis did not make it.
    fn watched<T>(answer: Result<(T, Origin), LimiterError>) -> Result<(T, Origin), LimiterError> {
        if let Ok((_, Origin::Uncounted | Origin::Fallback | Origin::FallbackSlot { .. })) = &answer {
            // Relaxed: a statistic, read once a second for a report.
            WITHOUT_REDIS.fetch_add(1, Ordering::Relaxed);
        }
        answer
    }
}

impl<K: Display + Sync> RateLimiter<K> for WatchedRedis {
    fn decide(&self, key: &K, cost: u64) -> impl Future<Output = Result<Decision, LimiterError>> + Send {
        let decided = self.decide_with_origin(key, cost);
        async move { decided.await.map(|(decision, _)| decision) }
    }

    fn decide_with_origin(
        &self,
        key: &K,
        cost: u64,
    ) -> impl Future<Output = Result<(Decision, Origin), LimiterError>> + Send {
        let decided = self.limiter.decide_with_origin(key, cost);
        async move { Self::watched(decided.await) }
    }

    fn decide_within(
        &self,
        key: &K,
        cost: u64,
        max_delay: Option<Duration>,
    ) -> impl Future<Output = Result<(Decision, Origin), LimiterError>> + Send {
        let decided = self.limiter.decide_within(key, cost, max_delay);
        async move { Self::watched(decided.await) }
    }

    fn policy(&self) -> Policy {
        RateLimiter::<K>::policy(&self.limiter)
    }

    fn refund(&self, key: K, cost: u64, origin: Origin) {
        self.limiter.refund(key, cost, origin);
    }
}

/// Checks the Redis configuration of every Redis route before the gateway listens.
///
/// The limiter's connection is made at its first decision, and a Redis that is away only
/// shows as refusals: each route asks once now, so that a wrong address or password is said
/// at start, as a warning (the gateway still starts, and answers by the failure policy until
/// Redis does). This is the place for the library's start-up check of a Redis limiter, with
/// its typed causes, when it lands: call it here, and fail the start on the causes that a
/// retry cannot fix.
pub(crate) async fn check_before_listening(table: &Table) -> Result<(), String> {
    for (route, redis) in table.redis_routes() {
        let probe = redis.limiter.peek_n("gateway-start", 0).await;
        match probe.as_ref().map(|answer| answer.failure) {
            Ok(None) => {}
            Ok(Some(failure)) => eprintln!(
                "tollgate-gateway: warning: route {route}: Redis at {} did not answer ({failure:?}); \
                 requests are answered by the failure policy until it does",
                redis.shown
            ),
            Err(error) => eprintln!(
                "tollgate-gateway: warning: route {route}: Redis at {}: {error}",
                redis.shown
            ),
        }
    }
    Ok(())
}
