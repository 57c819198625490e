//! Counting admitted, refused, unavailable and keyless responses, printed once a second, with
//! the last reason a limiter could not decide (the operator's view of the layer's 503s).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use http_body_util::Either;
use tollgate::middleware::{LimitedBody, LimiterError};
use tower::Service;

use crate::upstream::UpstreamBody;

/// Decisions the Redis limiter's failure policy made because Redis did not answer (`--redis`
/// only), counted by `WatchedRedis` and printed each second there were any.
pub(crate) static WITHOUT_REDIS: AtomicU64 = AtomicU64::new(0);

#[derive(Debug, Default)]
pub(crate) struct Counters {
    admitted: AtomicU64,
    refused: AtomicU64,
    unavailable: AtomicU64,
    no_key: AtomicU64,
    /// The last limiter error of the current second: the client is told only that the limiter
    /// could not decide; the reason travels in the response's extensions, for the operator.
    last_error: Mutex<Option<String>>,
}

impl Counters {
    /// Prints, every second, what was admitted, refused, unavailable and keyless in that second.
    pub(crate) fn print_every_second(self: Arc<Self>) {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.tick().await;
            let mut second = 0u64;
            loop {
                tick.tick().await;
                second += 1;
                // Relaxed: independent counters read for a report; no other data depends on them.
                let admitted = self.admitted.swap(0, Ordering::Relaxed);
                let refused = self.refused.swap(0, Ordering::Relaxed);
                let unavailable = self.unavailable.swap(0, Ordering::Relaxed);
                let no_key = self.no_key.swap(0, Ordering::Relaxed);
                println!(
                    "{second:>5}s  admitted {admitted:>8}  refused {refused:>8}  unavailable {unavailable:>8}  no key {no_key:>8}"
                );
                // Relaxed: a statistic, as above.
                let without_redis = WITHOUT_REDIS.swap(0, Ordering::Relaxed);
                if without_redis > 0 {
                    eprintln!("{second:>5}s  decided without Redis (away or failing): {without_redis}");
                }
                let last_error = self.last_error.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some(error) = last_error {
                    eprintln!("{second:>5}s  last limiter error: {error}");
                }
            }
        });
    }
}

/// Whether a response body is the rate-limit layer's own answer (a refusal, an error), not
/// the upstream's.
pub(crate) trait LayerAnswer {
    fn is_layer_answer(&self) -> bool;
}

/// `--no-limit`: every answer is the upstream's.
impl LayerAnswer for UpstreamBody {
    fn is_layer_answer(&self) -> bool {
        false
    }
}

impl LayerAnswer for LimitedBody<UpstreamBody> {
    fn is_layer_answer(&self) -> bool {
        matches!(self, Either::Right(_))
    }
}

/// Counts each response by who answered it. The layer's own answers: a 429 or a gRPC
/// `RESOURCE_EXHAUSTED` is refused (over quota, a shaping wait too long, or Redis away with the
/// gateway's fail-closed policy); a 503 or a gRPC `UNAVAILABLE` is unavailable (the key table
/// was full of active keys, or a limiter could not decide); anything else is no key (the
/// layer's answer to a request it could not key). Every answer from the upstream is admitted,
/// whatever its status.
#[derive(Clone, Debug)]
pub(crate) struct Count<S> {
    pub(crate) inner: S,
    pub(crate) counters: Arc<Counters>,
}

impl<S, B, R> Service<Request<B>> for Count<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    R: LayerAnswer,
    S::Future: Send + 'static,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Response<R>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let counters = Arc::clone(&self.counters);
        let answer = self.inner.call(request);
        Box::pin(async move {
            let response = answer.await?;
            if let Some(error) = response.extensions().get::<LimiterError>() {
                *counters.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(error.to_string());
            }
            let grpc_status = response.headers().get("grpc-status");
            let counter = if !response.body().is_layer_answer() {
                &counters.admitted
            } else if response.status() == StatusCode::TOO_MANY_REQUESTS
                || grpc_status.is_some_and(|status| status == "8")
            {
                &counters.refused
            } else if response.status() == StatusCode::SERVICE_UNAVAILABLE
                || grpc_status.is_some_and(|status| status == "14")
            {
                &counters.unavailable
            } else {
                &counters.no_key
            };
            // Relaxed: a statistic; see `print_every_second`.
            counter.fetch_add(1, Ordering::Relaxed);
            Ok(response)
        })
    }
}
