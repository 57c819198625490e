//! What the Redis benchmarks share: a load of concurrent tasks over many keys, timed, and the
//! server's own time per call from `INFO commandstats`.

#![allow(dead_code)]

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Distinct keys the load cycles through (one per simulated client IP).
pub(crate) const KEYS: usize = 10_000;

/// One operation of a load, on the key numbered `key` (below [`KEYS`]).
pub(crate) trait Load: Clone + Send + Sync + 'static {
    /// Runs the operation once.
    fn run(&self, key: usize) -> impl Future<Output = ()> + Send;
}

/// What [`measure`] measured: operations per second and latency percentiles.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Measured {
    pub(crate) per_second: f64,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
}

/// Runs `load` from `tasks` concurrent tasks for `duration`, cycling over the keys.
pub(crate) async fn measure(load: &impl Load, tasks: usize, duration: Duration) -> Measured {
    let next_key = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let load = load.clone();
        let next_key = Arc::clone(&next_key);
        handles.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while start.elapsed() < duration {
                // Relaxed: only spreads the keys; no data is published through it.
                let key = next_key.fetch_add(1, Ordering::Relaxed) % KEYS;
                let began = Instant::now();
                load.run(key).await;
                latencies.push(began.elapsed());
            }
            latencies
        }));
    }
    let mut latencies = Vec::new();
    for handle in handles {
        latencies.extend(handle.await.expect("a load task"));
    }
    let elapsed = start.elapsed();
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    Measured {
        per_second: latencies.len() as f64 / elapsed.as_secs_f64(),
        p50: at(0.50),
        p99: at(0.99),
    }
}

/// `calls` and `usec_per_call` of `command` in the text of `INFO commandstats`, if it ran.
pub(crate) fn command_stats(info: &str, command: &str) -> Option<(u64, f64)> {
    let line = info
        .lines()
        .find(|line| line.starts_with(&format!("cmdstat_{command}:")))?;
    let field = |name: &str| {
        line.split([':', ','])
            .find_map(|field| field.strip_prefix(name))
            .map(str::to_owned)
    };
    Some((
        field("calls=")?.parse().ok()?,
        field("usec_per_call=")?.parse().ok()?,
    ))
}

/// The measured seconds per row (`TOLLGATE_BENCH_SECS`, default 2) and interleaved rounds
/// (`TOLLGATE_BENCH_ROUNDS`, default 3); with `full` false (run without `--bench`), 20 ms and one
/// round, only to check that every row runs.
pub(crate) fn settings(full: bool) -> (Duration, usize) {
    let seconds: f64 = std::env::var("TOLLGATE_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let rounds: usize = std::env::var("TOLLGATE_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    match full {
        true => (Duration::from_secs_f64(seconds), rounds.max(1)),
        false => (Duration::from_millis(20), 1),
    }
}
