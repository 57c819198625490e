//! Decisions per second and latency of every tollgate script on one Redis against a Redis
//! Cluster of three masters (each with a replica) on the same machine, at 1 and 50 concurrent
//! tasks, with each master's own server time per call (`INFO commandstats`); and the price of
//! `WAIT 1` after each admission, on the cluster.
//!
//! `cargo bench --features redis --bench redis_cluster_speed` (needs `redis-server` and
//! `redis-cli`; both started here on free ports). `TOLLGATE_BENCH_SECS` sets the measured seconds
//! per row (default 2) and `TOLLGATE_BENCH_ROUNDS` the interleaved rounds (default 3; each row
//! keeps its best). Prints a markdown table, and writes the same rows as JSON to
//! `$CARGO_TARGET_DIR/bench-results/redis-cluster.json` (`target/` by default; the path is
//! printed). Run without `--bench` (as `cargo test --all-targets` does), it only checks that
//! every row runs.

#[path = "../tests/redis_common/mod.rs"]
mod redis_common;
mod redis_load;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use redis::cluster_async::ClusterConnection;
use redis_common::cluster::{command, RedisCluster};
use redis_common::RedisServer;
use redis_load::{command_stats, measure, Load, Measured, KEYS};
use tollgate::distributed::{DecidedBy, FailurePolicy, RedisAlgorithm, RedisLimiter};
use tollgate::{FixedWindow, LeakyBucket, SlidingLog, SlidingWindow, TokenBucket};

/// A decision through the limiter.
#[derive(Clone)]
struct Decide(Arc<RedisLimiter>);

impl Load for Decide {
    async fn run(&self, key: usize) {
        let answer = self.0.check(&client(key)).await.expect("a decision");
        assert_eq!(answer.decided_by, DecidedBy::Redis, "{answer:?}");
    }
}

/// The token bucket's script sent by hand on a cluster connection, alone or followed by
/// `WAIT 1 100` in the same pipeline (so on the same node's connection): an admission returns
/// only once the master's replica has it.
#[derive(Clone)]
struct Raw {
    connection: ClusterConnection,
    script: Arc<redis::Script>,
    wait: bool,
}

impl Load for Raw {
    async fn run(&self, key: usize) {
        let mut connection = self.connection.clone();
        // `cost`, `T` and `burst * T` (µs) of `2/s burst 10`, as the limiter packs them.
        let mut arguments = Vec::with_capacity(24);
        for value in [1i64, 500_000, 5_000_000] {
            arguments.extend(value.to_le_bytes());
        }
        let mut pipeline = redis::pipe();
        pipeline
            .cmd("EVALSHA")
            .arg(self.script.get_hash())
            .arg(1)
            .arg(format!("raw:{{{}}}:tb2", client(key)))
            .arg(arguments);
        if self.wait {
            pipeline.cmd("WAIT").arg(1).arg(100);
        }
        let _: Vec<redis::Value> = pipeline.query_async(&mut connection).await.expect("EVALSHA");
    }
}

fn client(key: usize) -> String {
    format!("10.0.{}.{}", key / 256, key % 256)
}

/// Where a row ran.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    Single,
    Cluster,
}

impl Target {
    fn name(self) -> &'static str {
        match self {
            Target::Single => "single",
            Target::Cluster => "cluster",
        }
    }
}

struct Row {
    operation: String,
    target: Target,
    tasks: usize,
    measured: Measured,
    /// Per node (`host:port`): the calls it ran and its server time per call (µs), the least
    /// of the rounds.
    nodes: Vec<(String, u64, f64)>,
}

impl Row {
    /// Server time per call over every node, weighted by their calls.
    fn server_us_per_call(&self) -> f64 {
        let calls: u64 = self.nodes.iter().map(|(_, calls, _)| calls).sum();
        let time: f64 = self.nodes.iter().map(|(_, calls, us)| *calls as f64 * us).sum();
        time / calls.max(1) as f64
    }
}

/// The masters' ports of `target`.
fn masters(target: Target, single: &RedisServer, cluster: &RedisCluster) -> Vec<u16> {
    match target {
        Target::Single => vec![single.port()],
        Target::Cluster => cluster.masters().iter().map(|node| node.port).collect(),
    }
}

/// On every master: `FLUSHALL`, then `CONFIG RESETSTAT`.
fn reset(ports: &[u16], flush: bool) {
    for &port in ports {
        if flush {
            let () = command(port, &["FLUSHALL"]);
        }
        let () = command(port, &["CONFIG", "RESETSTAT"]);
    }
}

/// `EVALSHA` calls and server µs per call of each master since the last reset.
fn node_stats(ports: &[u16]) -> Vec<(String, u64, f64)> {
    ports
        .iter()
        .map(|&port| {
            let info: String = command(port, &["INFO", "commandstats"]);
            let (calls, us) = command_stats(&info, "evalsha").unwrap_or((0, 0.0));
            (format!("127.0.0.1:{port}"), calls, us)
        })
        .collect()
}

async fn run(full: bool) {
    let (duration, rounds) = redis_load::settings(full);
    let single = RedisServer::start();
    let cluster = RedisCluster::start();
    let version: String = command(single.port(), &["INFO", "server"]);
    let version = version
        .lines()
        .find_map(|line| line.strip_prefix("redis_version:"))
        .unwrap_or("?")
        .trim()
        .to_owned();
    let quota = "2/s burst 10".parse().expect("quota");
    let window = "10/5s".parse().expect("quota");
    let algorithms: [(&str, RedisAlgorithm); 5] = [
        ("token bucket", TokenBucket::new(quota).expect("bucket").into()),
        ("leaky bucket", LeakyBucket::new(quota).expect("shaper").into()),
        ("fixed window", FixedWindow::new(window).expect("window").into()),
        (
            "sliding window",
            SlidingWindow::new(window).expect("window").into(),
        ),
        ("sliding log", SlidingLog::new(window).expect("log").into()),
    ];
    let mut rows: Vec<Row> = Vec::new();
    let mut decides = Vec::new();
    for target in [Target::Single, Target::Cluster] {
        for (name, algorithm) in algorithms {
            let builder = match target {
                Target::Single => RedisLimiter::builder(single.url(), algorithm, FailurePolicy::FailOpen),
                Target::Cluster => {
                    RedisLimiter::cluster_builder(cluster.seeds(), algorithm, FailurePolicy::FailOpen)
                }
            };
            let limiter = builder
                .deadline(Duration::from_secs(5))
                .connect_checked()
                .await
                .expect("limiter");
            decides.push((name.to_owned(), target, Decide(Arc::new(limiter))));
        }
    }
    let connection = cluster.raw_connection().await;
    let script = Arc::new(redis::Script::new(algorithms[0].1.script_source()));
    let raws: Vec<(String, Raw)> = [false, true]
        .into_iter()
        .map(|wait| {
            let name = if wait {
                "token bucket by hand + WAIT 1"
            } else {
                "token bucket by hand"
            };
            let raw = Raw {
                connection: connection.clone(),
                script: Arc::clone(&script),
                wait,
            };
            (name.to_owned(), raw)
        })
        .collect();
    let mut keep = |row: Row| match rows
        .iter_mut()
        .find(|r| r.operation == row.operation && r.target == row.target && r.tasks == row.tasks)
    {
        None => rows.push(row),
        Some(best) => {
            if row.measured.per_second > best.measured.per_second {
                best.measured = row.measured;
            }
            if row.server_us_per_call() < best.server_us_per_call() {
                best.nodes = row.nodes;
            }
        }
    };
    for _ in 0..rounds {
        for (name, target, decide) in &decides {
            let ports = masters(*target, &single, &cluster);
            for tasks in [1, 50] {
                reset(&ports, true);
                // Warm up: loads the script, fills the connections' buffers.
                measure(decide, tasks, duration / 10).await;
                reset(&ports, false);
                let measured = measure(decide, tasks, duration).await;
                let nodes = node_stats(&ports);
                keep(Row {
                    operation: name.clone(),
                    target: *target,
                    tasks,
                    measured,
                    nodes,
                });
            }
        }
        for (name, raw) in &raws {
            let ports = masters(Target::Cluster, &single, &cluster);
            for tasks in [1, 50] {
                reset(&ports, true);
                for &port in &ports {
                    let _: String = command(port, &["SCRIPT", "LOAD", algorithms[0].1.script_source()]);
                }
                measure(raw, tasks, duration / 10).await;
                reset(&ports, false);
                let measured = measure(raw, tasks, duration).await;
                let nodes = node_stats(&ports);
                keep(Row {
                    operation: name.clone(),
                    target: Target::Cluster,
                    tasks,
                    measured,
                    nodes,
                });
            }
        }
    }
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    println!(
        "Redis {version} on loopback, {cpus} CPUs, a current-thread tokio client; single: one server; \
         cluster: three masters with a replica each; {KEYS} keys, {:.2} s per row, best of {rounds} \
         interleaved rounds\n",
        duration.as_secs_f64()
    );
    println!("| operation | target | tasks | decisions/s | p50 µs | p99 µs | server µs/call | per master: calls, µs/call |");
    println!("|---|---|---:|---:|---:|---:|---:|---|");
    for row in &rows {
        let nodes: Vec<String> = row
            .nodes
            .iter()
            .map(|(node, calls, us)| format!("{node}: {calls}, {us:.2}"))
            .collect();
        println!(
            "| {} | {} | {} | {:.0} | {:.1} | {:.1} | {:.2} | {} |",
            row.operation,
            row.target.name(),
            row.tasks,
            row.measured.per_second,
            row.measured.p50.as_secs_f64() * 1e6,
            row.measured.p99.as_secs_f64() * 1e6,
            row.server_us_per_call(),
            nodes.join("; ")
        );
    }
    let path = write_json(&rows, &version, cpus, duration, rounds);
    println!("\nrows written to {}", path.display());
}

/// The rows as JSON (written by hand: no serializer among the dependencies), to
/// `$CARGO_TARGET_DIR/bench-results/redis-cluster.json`.
fn write_json(rows: &[Row], version: &str, cpus: usize, duration: Duration, rounds: usize) -> PathBuf {
    let mut json = String::new();
    let _ = write!(
        json,
        "{{\n  \"redis_version\": \"{version}\",\n  \"cpus\": {cpus},\n  \"keys\": {KEYS},\n  \
         \"seconds_per_row\": {},\n  \"rounds\": {rounds},\n  \"rows\": [",
        duration.as_secs_f64()
    );
    for (index, row) in rows.iter().enumerate() {
        let nodes: Vec<String> = row
            .nodes
            .iter()
            .map(|(node, calls, us)| {
                format!("{{\"node\": \"{node}\", \"calls\": {calls}, \"server_us_per_call\": {us:.3}}}")
            })
            .collect();
        let _ = write!(
            json,
            "{}\n    {{\"operation\": \"{}\", \"target\": \"{}\", \"tasks\": {}, \"decisions_per_second\": {:.1}, \
             \"p50_us\": {:.1}, \"p99_us\": {:.1}, \"server_us_per_call\": {:.3}, \"nodes\": [{}]}}",
            if index == 0 { "" } else { "," },
            row.operation,
            row.target.name(),
            row.tasks,
            row.measured.per_second,
            row.measured.p50.as_secs_f64() * 1e6,
            row.measured.p99.as_secs_f64() * 1e6,
            row.server_us_per_call(),
            nodes.join(", ")
        );
    }
    json.push_str("\n  ]\n}\n");
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from);
    let directory = target.join("bench-results");
    std::fs::create_dir_all(&directory).expect("the results directory");
    let path = directory.join("redis-cluster.json");
    std::fs::write(&path, json).expect("the results file");
    path
}

fn main() {
    let full = std::env::args().any(|arg| arg == "--bench");
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(run(full));
}
