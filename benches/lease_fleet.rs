//! A fleet of processes sharing one quota per key through Redis, decided by leases
//! (`LeasedLimiter`) and by the exact per-decision limiter (`RedisLimiter`), on the real clock.
//!
//! `cargo bench -p tollgate --features redis --bench lease_fleet` (needs `redis-server`, started
//! here on a free loopback port). The bench binary runs itself again four times per run, as the
//! fleet's processes (`worker::ROLE`), each with its own connection. Each workload (a hot key at
//! 0.5x, 1x and 10x its quota, 1,000 keys of Zipf popularity, on/off bursts on a hot key) runs
//! twice over the same seeded trace, leased and exact, under key prefixes of its own. Printed: a
//! markdown table. Written: `$CARGO_TARGET_DIR/bench-results/lease-fleet.json`. Run without
//! `--bench` (as `cargo test --all-targets` does), each run lasts 0.3 s and nothing is written.
//!
//! The results file:
//!
//! ```text
//! {
//!   "redis_version": "7.0.15", "processes": 4, "seconds_per_run": 4.0, "lease_interval_ms": 500,
//!   "command": "cargo bench -p tollgate --features redis --bench lease_fleet",
//!   "workloads": [{
//!     "name": "hot key at 0.5x", "quota": "400/s burst 400" (a token bucket, per key),
//!     "keys": 1, "offered_per_second": 200.0 (the fleet's, while on), "pattern": "...",
//!     "leased": RUN, "exact": RUN,
//!     "extra_refusals": (exact.admitted - leased.admitted) / exact.admitted
//!   }, ...]
//! }
//! RUN = {
//!   "decisions", "admitted", "by_policy" (refusals of the failure policy: Redis did not answer),
//!   "round_trips" (counted by the limiters: LeaseCounts::round_trips, refreshes included; the
//!     exact limiter's, one per decision), "local_decisions" (made on a lease),
//!   "calls_per_decision" (round_trips / decisions),
//!   "redis_calls" (EVALSHA and EVAL calls Redis counted, INFO commandstats: the cross-check),
//!   "max_decision_us" (the longest decision), "most_behind_us" (the latest request's delay
//!     after its time in the trace),
//!   "worst_window": {"excess" (admitted - allowed, negative when under), "window_ms",
//!     "admitted", "allowed"} over every key and every interval [t, t + W), W of 100 ms and 1 s,
//!     allowed = burst + floor(W * rate) (`window.rs` says how admissions are placed in time),
//!   "over_admission": max(0, worst_window.excess)
//! }
//! ```

#[path = "../tests/redis_common/mod.rs"]
mod redis_common;
#[path = "lease_fleet/results.rs"]
mod results;
#[path = "lease_fleet/trace.rs"]
mod trace;
#[path = "lease_fleet/window.rs"]
mod window;
#[path = "lease_fleet/worker.rs"]
mod worker;

use std::process::{Command, Stdio};
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis_common::RedisServer;
use results::{Compared, Run};
use trace::{workloads, Workload, PROCESSES};
use window::Admission;
use worker::{Assignment, Mode};

/// Seconds each run lasts with `--bench`.
const SECONDS: f64 = 4.0;
/// Seconds each run lasts without it (a check that every run works).
const QUICK_SECONDS: f64 = 0.3;
/// Time the processes have to start and connect before the common start.
const START_MARGIN: Duration = Duration::from_millis(700);

/// EVALSHA and EVAL calls in `INFO commandstats`.
async fn script_calls(admin: &mut ConnectionManager) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(admin)
        .await
        .expect("INFO");
    info.lines()
        .filter(|line| line.starts_with("cmdstat_evalsha:") || line.starts_with("cmdstat_eval:"))
        .filter_map(|line| {
            line.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// One run: the fleet's processes started, waited for, their outputs merged.
async fn run_once(
    url: &str,
    admin: &mut ConnectionManager,
    workload: &Workload,
    index: usize,
    mode: Mode,
    duration: Duration,
) -> Run {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(admin)
        .await
        .expect("CONFIG RESETSTAT");
    let exe = std::env::current_exe().expect("the bench binary's path");
    let start_us = worker::unix_us() + START_MARGIN.as_micros() as u64;
    let children: Vec<_> = (0..PROCESSES)
        .map(|process| {
            let assignment = Assignment {
                url: url.to_owned(),
                prefix: format!("fleet:{index}:{}:", mode.name()),
                mode,
                workload: index,
                process,
                start_us,
                duration,
            };
            Command::new(&exe)
                .arg(worker::ROLE)
                .args(assignment.arguments())
                .stdout(Stdio::piped())
                .spawn()
                .expect("a process of the fleet")
        })
        .collect();
    let mut run = Run::default();
    let mut admissions = Vec::new();
    for child in children {
        let output = child.wait_with_output().expect("a process of the fleet");
        assert!(
            output.status.success(),
            "a process of the fleet failed: {}",
            output.status
        );
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            let fields: Vec<u64> = line
                .split(' ')
                .skip(1)
                .filter_map(|field| field.parse().ok())
                .collect();
            match (line.as_bytes().first(), fields.as_slice()) {
                (Some(b'A'), &[key, sent, done]) => admissions.push(Admission {
                    key: key as usize,
                    sent,
                    done,
                }),
                (Some(b'S'), &[decisions, admitted, by_policy, round_trips, local, latency, behind]) => {
                    run.decisions += decisions;
                    run.admitted += admitted;
                    run.by_policy += by_policy;
                    run.round_trips += round_trips;
                    run.local_decisions += local;
                    run.max_decision_us = run.max_decision_us.max(latency);
                    run.most_behind_us = run.most_behind_us.max(behind);
                }
                _ => panic!("a line a process of the fleet should not print: {line:?}"),
            }
        }
    }
    assert_eq!(admissions.len() as u64, run.admitted, "every admission reported");
    run.redis_calls = script_calls(admin).await;
    run.worst = window::worst(&admissions, workload.rate, workload.burst);
    run
}

async fn coordinate(full: bool) {
    let server = RedisServer::start();
    let client = redis::Client::open(server.url()).expect("client");
    let mut admin = ConnectionManager::new(client).await.expect("connection");
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut admin)
        .await
        .expect("INFO");
    let version = info
        .lines()
        .find_map(|line| line.strip_prefix("redis_version:"))
        .unwrap_or("?")
        .to_owned();
    let seconds = if full { SECONDS } else { QUICK_SECONDS };
    let duration = Duration::from_secs_f64(seconds);
    let mut compared = Vec::new();
    for (index, workload) in workloads().into_iter().enumerate() {
        let leased = run_once(
            &server.url(),
            &mut admin,
            &workload,
            index,
            Mode::Leased,
            duration,
        )
        .await;
        let exact = run_once(&server.url(), &mut admin, &workload, index, Mode::Exact, duration).await;
        compared.push(Compared {
            workload,
            leased,
            exact,
        });
    }
    results::print_summary(&compared, &version, seconds);
    if full {
        let path = results::write_json(&compared, &version, seconds, worker::LEASE_INTERVAL.as_millis());
        println!("\nwritten to {}", path.display());
    }
}

fn main() {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    if arguments.first().map(String::as_str) == Some(worker::ROLE) {
        runtime.block_on(worker::run(&arguments[1..]));
    } else {
        runtime.block_on(coordinate(arguments.iter().any(|arg| arg == "--bench")));
    }
}
