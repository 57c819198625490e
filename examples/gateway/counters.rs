//! Counting admitted, refused and unavailable responses, printed once a second.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use tower::Service;

#[derive(Debug, Default)]
pub(crate) struct Counters {
    admitted: AtomicU64,
    refused: AtomicU64,
    unavailable: AtomicU64,
}

impl Counters {
    /// Prints, every second, what was admitted, refused and unavailable in that second.
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
                println!(
                    "{second:>5}s  admitted {admitted:>8}  refused {refused:>8}  unavailable {unavailable:>8}"
                );
            }
        });
    }
}

/// Counts each response: a 429 or a gRPC `RESOURCE_EXHAUSTED` is refused; a 503 or a gRPC
/// `UNAVAILABLE` is unavailable (the limiter could not decide: its table was full of active
/// keys, or Redis was away and the policy fails closed; or the upstream itself answered so);
/// anything else admitted.
#[derive(Clone, Debug)]
pub(crate) struct Count<S> {
    pub(crate) inner: S,
    pub(crate) counters: Arc<Counters>,
}

impl<S, B, R> Service<Request<B>> for Count<S>
where
    S: Service<Request<B>, Response = Response<R>>,
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
            let grpc_status = response.headers().get("grpc-status");
            let counter = if response.status() == StatusCode::TOO_MANY_REQUESTS
                || grpc_status.is_some_and(|status| status == "8")
            {
                &counters.refused
            } else if response.status() == StatusCode::SERVICE_UNAVAILABLE
                || grpc_status.is_some_and(|status| status == "14")
            {
                &counters.unavailable
            } else {
                &counters.admitted
            };
            // Relaxed: a statistic; see `print_every_second`.
            counter.fetch_add(1, Ordering::Relaxed);
            Ok(response)
        })
    }
}
