//! Counting admitted, refused, unavailable and keyless responses, printed once a second when
//! any happened, with the last reason a limiter could not decide (the operator's view of the
//! layer's 503s).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Response, StatusCode};
use http_body_util::Either;
use tollgate::middleware::LimiterError;

use crate::routing::GatewayBody;

/// Who answered a request, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Forwarded upstream by a route's limiter, whatever the upstream answered.
    Admitted = 0,
    /// The layer's 429 (or gRPC `RESOURCE_EXHAUSTED`): over quota, a shaping wait too long, or
    /// Redis away under the refusing policy.
    Refused = 1,
    /// The layer's 503 (or gRPC `UNAVAILABLE`): the key table was full of active keys, or the
    /// limiter could not decide.
    Unavailable = 2,
    /// The layer's answer to a request it could not key.
    NoKey = 3,
    /// Forwarded without a limit: the request matched no route.
    Unlimited = 4,
}

impl Outcome {
    /// Every outcome, in the order of their metric labels.
    pub(crate) const ALL: [Outcome; 5] = [
        Outcome::Admitted,
        Outcome::Refused,
        Outcome::Unavailable,
        Outcome::NoKey,
        Outcome::Unlimited,
    ];

    /// Its place in [`ALL`](Self::ALL).
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The metric label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Outcome::Admitted => "admitted",
            Outcome::Refused => "refused",
            Outcome::Unavailable => "unavailable",
            Outcome::NoKey => "no_key",
            Outcome::Unlimited => "unlimited",
        }
    }

    /// How a route's limiter answered `response`: the layer's own answers are refused (429,
    /// gRPC 8), unavailable (503, gRPC 14) or no key (anything else); every answer from the
    /// upstream is admitted.
    pub(crate) fn of(response: &Response<GatewayBody>) -> Outcome {
        if matches!(response.body(), Either::Left(_)) {
            return Outcome::Admitted;
        }
        let grpc_status = response.headers().get("grpc-status");
        if response.status() == StatusCode::TOO_MANY_REQUESTS
            || grpc_status.is_some_and(|status| status == "8")
        {
            Outcome::Refused
        } else if response.status() == StatusCode::SERVICE_UNAVAILABLE
            || grpc_status.is_some_and(|status| status == "14")
        {
            Outcome::Unavailable
        } else {
            Outcome::NoKey
        }
    }
}

/// This second's counts, over every route.
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
    /// Counts one response (an unlimited one as admitted: it was forwarded upstream).
    pub(crate) fn count(&self, outcome: Outcome, response: &Response<GatewayBody>) {
        if let Some(error) = response.extensions().get::<LimiterError>() {
            *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(error.to_string());
        }
        let counter = match outcome {
            Outcome::Admitted | Outcome::Unlimited => &self.admitted,
            Outcome::Refused => &self.refused,
            Outcome::Unavailable => &self.unavailable,
            Outcome::NoKey => &self.no_key,
        };
        // Relaxed: a statistic; see `print_every_second`.
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Prints, every second in which anything happened, what was admitted, refused,
    /// unavailable and keyless in that second; `each_second` runs every second too, and the
    /// lines it returns (the Redis routes' report) are printed on stderr after the counts.
    pub(crate) fn print_every_second(
        self: Arc<Self>,
        each_second: impl Fn() -> Vec<String> + Send + 'static,
    ) {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.tick().await;
            let mut second = 0u64;
            loop {
                tick.tick().await;
                second += 1;
                let reported = each_second();
                // Relaxed: independent counters read for a report; no other data depends on them.
                let admitted = self.admitted.swap(0, Ordering::Relaxed);
                let refused = self.refused.swap(0, Ordering::Relaxed);
                let unavailable = self.unavailable.swap(0, Ordering::Relaxed);
                let no_key = self.no_key.swap(0, Ordering::Relaxed);
                if admitted + refused + unavailable + no_key > 0 {
                    println!(
                        "{second:>5}s  admitted {admitted:>8}  refused {refused:>8}  unavailable {unavailable:>8}  no key {no_key:>8}"
                    );
                }
                for line in reported {
                    eprintln!("{second:>5}s  {line}");
                }
                let last_error = self.last_error.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some(error) = last_error {
                    eprintln!("{second:>5}s  last limiter error: {error}");
                }
            }
        });
    }
}
