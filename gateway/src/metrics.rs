//! The gateway's Prometheus series, recorded through the `metrics` facade, beside the library's
//! (`tollgate::metrics`: each route's limiter is named after its route), and the endpoint
//! serving them in the text format (`GET /metrics`). Without `--metrics` no recorder is
//! installed, and every series is a no-op.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use metrics::{counter, describe_counter, describe_gauge, gauge, Counter, Gauge};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::net::TcpListener;
use tollgate::metrics::{REDIS_CALL_SECONDS, REDIS_CALL_SECONDS_BUCKETS};

use crate::counters::Outcome;

/// Requests answered, by route and outcome.
const REQUESTS: &str = "tollgate_gateway_requests_total";
/// Reloads of the configuration file, by result.
const RELOADS: &str = "tollgate_gateway_reloads_total";
/// Keys a route's limiter holds in its table (in-memory routes only).
const KEYS: &str = "tollgate_gateway_keys";

/// The route label of requests that matched no route.
const NO_ROUTE: &str = "(none)";

/// Installs the Prometheus recorder behind the facade, binds the endpoint's address and
/// serves it; the bound address. An address that cannot be bound fails the start, before the
/// gateway listens.
pub(crate) async fn start(address: SocketAddr) -> Result<SocketAddr, String> {
    let named = |e: &dyn std::fmt::Display| format!("--metrics {address}: {e}");
    let listener = TcpListener::bind(address).await.map_err(|e| named(&e))?;
    // The Redis round trips' time as a histogram of buckets (the exporter's default for a
    // histogram is a summary of quantiles, which Prometheus cannot aggregate across gateways).
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full(REDIS_CALL_SECONDS.to_owned()),
            &REDIS_CALL_SECONDS_BUCKETS,
        )
        .map_err(|e| named(&e))?
        .install_recorder()
        .map_err(|e| named(&e))?;
    tollgate::metrics::describe();
    describe_counter!(REQUESTS, "Requests answered, by route and outcome (admitted, refused, unavailable, no_key; unlimited for requests that matched no route).");
    describe_counter!(
        RELOADS,
        "Reloads of the configuration file, by result (applied, failed)."
    );
    describe_gauge!(
        KEYS,
        "Keys the route's limiter holds in its table, idle ones not yet reclaimed included."
    );
    let bound = listener.local_addr().map_err(|e| named(&e))?;
    tokio::spawn(serve(listener, handle));
    Ok(bound)
}

/// Answers `GET /metrics` with the rendered series, anything else with 404.
async fn serve(listener: TcpListener, handle: PrometheusHandle) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of descriptors, most likely: the scrape is retried by Prometheus.
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            continue;
        };
        let handle = handle.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request: Request<Incoming>| {
                let handle = handle.clone();
                async move { Ok::<_, Infallible>(answer(&request, &handle)) }
            });
            // A scraper that goes away is not the gateway's error.
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn answer(request: &Request<Incoming>, handle: &PrometheusHandle) -> Response<Full<Bytes>> {
    if request.uri().path() != "/metrics" {
        let mut response = Response::new(Full::new(Bytes::from_static(b"the metrics are at /metrics\n")));
        *response.status_mut() = StatusCode::NOT_FOUND;
        return response;
    }
    // The library's counts and gauges, as they are now.
    tollgate::metrics::publish();
    handle.run_upkeep();
    let mut response = Response::new(Full::new(Bytes::from(handle.render())));
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

/// One route's series, registered once when the route is built, so that a request only adds
/// to an atomic.
#[derive(Debug)]
pub(crate) struct RouteSeries {
    /// Indexed by [`Outcome::index`]; only the outcomes the route can have are registered.
    outcomes: [Option<Counter>; Outcome::ALL.len()],
    /// In-memory routes only.
    keys: Option<Gauge>,
}

impl RouteSeries {
    /// The series of the route `name`: its limiter's outcomes, and its keys when it keeps
    /// them in memory.
    pub(crate) fn limited(name: &str, keys_in_memory: bool) -> RouteSeries {
        RouteSeries {
            outcomes: Outcome::ALL.map(|outcome| {
                (outcome != Outcome::Unlimited)
                    .then(|| counter!(REQUESTS, "route" => name.to_owned(), "outcome" => outcome.label()))
            }),
            keys: keys_in_memory.then(|| gauge!(KEYS, "route" => name.to_owned())),
        }
    }

    /// The series of requests that match no route: all unlimited.
    pub(crate) fn unrouted() -> RouteSeries {
        RouteSeries {
            outcomes: Outcome::ALL.map(|outcome| {
                (outcome == Outcome::Unlimited)
                    .then(|| counter!(REQUESTS, "route" => NO_ROUTE, "outcome" => outcome.label()))
            }),
            keys: None,
        }
    }

    /// Counts one request.
    pub(crate) fn count(&self, outcome: Outcome) {
        if let Some(counter) = &self.outcomes[outcome.index()] {
            counter.increment(1);
        }
    }

    /// Sets the keys the route's limiter holds.
    pub(crate) fn set_keys(&self, keys: usize) {
        if let Some(gauge) = &self.keys {
            // Precision: a gauge is an f64; key counts stay far below 2^53.
            gauge.set(keys as f64);
        }
    }
}

/// Counts one reload, `applied` or not.
pub(crate) fn count_reload(applied: bool) {
    counter!(RELOADS, "result" => if applied { "applied" } else { "failed" }).increment(1);
}
