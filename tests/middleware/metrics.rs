//! The layer's outcomes in the series of the limiter it decides with (feature `metrics`), over
//! real TCP: every outcome of a known sequence of requests, with its labels, read back through a
//! recorder of the test's own; and a limiter of the test's own counting through its `Meter`.

use std::future::{ready, Future};

use http::StatusCode;
use tollgate::metrics::Meter;
use tollgate::middleware::{
    AnnouncedPolicy, LimiterError, OnLimiterError, Policy, RateLimitLayer, RateLimiter,
};
use tollgate::{DirectLimiter, KeyedLimiter, ManualClock, TokenBucket};
use tower::Layer;

use crate::metrics_common::{expected, name, Recorder};
use crate::middleware_common::{api_key, clock, get, http1_client, serve, Hello};

type Error = Box<dyn std::error::Error>;

/// A named table for one key (two slots) behind the layer: admitted, refused, a third key with
/// no room (503), a request without a key (400), each counted once under the table's name.
#[tokio::test]
async fn every_outcome_of_a_table_is_counted_under_its_name() -> Result<(), Error> {
    let recorder = Recorder::new();
    let name = name("layer");
    let limiter = KeyedLimiter::<String, _, _>::with_clock(TokenBucket::new("2/min".parse()?)?, 1, clock())?
        .named(name.clone());
    let address = serve(RateLimitLayer::new(limiter, api_key()).layer(Hello), true).await;
    let client = http1_client();
    let mut statuses = Vec::new();
    for key in [
        Some("alice"),
        Some("alice"),
        Some("alice"),
        Some("bob"),
        Some("carol"),
        None,
    ] {
        let headers: Vec<(&str, &str)> = key.map(|key| ("x-api-key", key)).into_iter().collect();
        statuses.push(get(&client, address, "/", &headers).await.status.as_u16());
    }
    assert_eq!(statuses, [200, 200, 429, 200, 503, 400]);
    assert_eq!(
        recorder.published(name.as_str()).values,
        expected(&[
            ("tollgate_decisions_total{outcome=allowed}", 3.0),
            ("tollgate_decisions_total{outcome=refused}", 1.0),
            ("tollgate_decisions_total{outcome=table_full}", 1.0),
            ("tollgate_decisions_total{outcome=no_key}", 1.0),
            ("tollgate_keys_capacity", 1.0),
            ("tollgate_keys_held", 2.0),
            ("tollgate_keys_reclaimed_total", 0.0),
        ])
    );
    Ok(())
}

/// A limiter of the test's own that decides elsewhere: it cannot decide for the key `down`
/// (asked at once) or `later` (asked asynchronously), and otherwise admits with its direct
/// limiter, whose meter is also the one it hands the layer.
struct Remote {
    local: DirectLimiter<TokenBucket, ManualClock>,
}

impl RateLimiter<String> for Remote {
    fn decide(
        &self,
        key: &String,
        cost: u64,
    ) -> impl Future<Output = Result<tollgate::Decision, LimiterError>> + Send {
        let answer = match key.as_str() {
            "later" => Err(LimiterError::new("the store is away")),
            _ => self.local.check_n(cost).map_err(LimiterError::from),
        };
        ready(answer)
    }

    fn decide_now(&self, key: &String, _cost: u64) -> Option<Result<tollgate::Decision, LimiterError>> {
        (key == "down").then(|| Err(LimiterError::new("the store is away")))
    }

    fn policy(&self) -> Policy {
        self.local.algorithm().policy()
    }

    fn meter(&self) -> Option<&Meter> {
        self.local.meter()
    }
}

/// A limiter that cannot decide, at once or asynchronously: `unavailable`, whether the layer
/// then refuses (503) or forwards (fail open); its own decisions under its outcomes.
#[tokio::test]
async fn a_limiter_that_cannot_decide_is_counted_unavailable() -> Result<(), Error> {
    let recorder = Recorder::new();
    let name = name("remote");
    let local = DirectLimiter::with_clock(TokenBucket::new("1/min".parse()?)?, clock()).named(name.clone());
    let remote = std::sync::Arc::new(Remote { local });
    let refusing = serve(RateLimitLayer::new(remote.clone(), api_key()).layer(Hello), true).await;
    let admitting = RateLimitLayer::builder(remote, api_key())
        .on_limiter_error(OnLimiterError::Admit)
        .build();
    let admitting = serve(admitting.layer(Hello), true).await;
    let client = http1_client();
    let mut statuses = Vec::new();
    for (address, key) in [
        (refusing, "down"),
        (refusing, "later"),
        (admitting, "down"),
        (admitting, "later"),
        (refusing, "alice"),
        (refusing, "alice"),
    ] {
        let answer = get(&client, address, "/", &[("x-api-key", key)]).await;
        statuses.push(answer.status);
    }
    let (ok, busy, unavailable) = (
        StatusCode::OK,
        StatusCode::TOO_MANY_REQUESTS,
        StatusCode::SERVICE_UNAVAILABLE,
    );
    assert_eq!(statuses, [unavailable, unavailable, ok, ok, ok, busy]);
    assert_eq!(
        recorder.published(name.as_str()).values,
        expected(&[
            ("tollgate_decisions_total{outcome=allowed}", 1.0),
            ("tollgate_decisions_total{outcome=refused}", 1.0),
            ("tollgate_decisions_total{outcome=unavailable}", 4.0),
        ])
    );
    Ok(())
}
