//! What one run of a workload measured, merged over the fleet's processes, and the results file
//! (JSON written by hand: no serializer among the dependencies; the schema is in
//! `benches/lease_fleet.rs`).

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::trace::{Workload, PROCESSES};
use crate::window::Worst;

/// One run (one workload, one limiter), merged over the processes.
#[derive(Clone, Debug, Default)]
pub(crate) struct Run {
    pub(crate) decisions: u64,
    pub(crate) admitted: u64,
    /// Decisions the failure policy made (Redis did not answer in time): refusals.
    pub(crate) by_policy: u64,
    /// Round trips the limiters counted (the exact limiter's: one per decision).
    pub(crate) round_trips: u64,
    /// Decisions made on a lease, without a round trip.
    pub(crate) local_decisions: u64,
    /// Script calls Redis counted (`INFO commandstats`: EVALSHA and EVAL).
    pub(crate) redis_calls: u64,
    /// The longest decision, µs.
    pub(crate) max_decision_us: u64,
    /// How late the latest request was sent after its time in the trace, µs.
    pub(crate) most_behind_us: u64,
    pub(crate) worst: Option<Worst>,
}

impl Run {
    /// Round trips (counted by the limiters) per decision.
    pub(crate) fn calls_per_decision(&self) -> f64 {
        self.round_trips as f64 / self.decisions.max(1) as f64
    }

    /// The most any interval admitted beyond the quota's bound: 0 when none did.
    pub(crate) fn over_admission(&self) -> u64 {
        self.worst.map_or(0, |worst| worst.excess.max(0) as u64)
    }
}

/// A workload's two runs.
#[derive(Clone, Debug)]
pub(crate) struct Compared {
    pub(crate) workload: Workload,
    pub(crate) leased: Run,
    pub(crate) exact: Run,
}

impl Compared {
    /// The leased run's extra refusals: (exact admissions - leased admissions) / exact
    /// admissions (negative: the leased run admitted more, within the bound).
    pub(crate) fn extra_refusals(&self) -> f64 {
        (self.exact.admitted as f64 - self.leased.admitted as f64) / self.exact.admitted.max(1) as f64
    }
}

fn run_json(run: &Run) -> String {
    let worst = run.worst.map_or_else(
        || "null".to_owned(),
        |worst| {
            format!(
                "{{\"excess\": {}, \"window_ms\": {}, \"admitted\": {}, \"allowed\": {}}}",
                worst.excess, worst.window_ms, worst.admitted, worst.allowed
            )
        },
    );
    format!(
        "{{\"decisions\": {}, \"admitted\": {}, \"by_policy\": {}, \"round_trips\": {}, \
         \"local_decisions\": {}, \"calls_per_decision\": {:.5}, \"redis_calls\": {}, \
         \"max_decision_us\": {}, \"most_behind_us\": {}, \"worst_window\": {worst}, \
         \"over_admission\": {}}}",
        run.decisions,
        run.admitted,
        run.by_policy,
        run.round_trips,
        run.local_decisions,
        run.calls_per_decision(),
        run.redis_calls,
        run.max_decision_us,
        run.most_behind_us,
        run.over_admission()
    )
}

/// Writes `$CARGO_TARGET_DIR/bench-results/lease-fleet.json` (`target/` by default).
pub(crate) fn write_json(
    compared: &[Compared],
    redis_version: &str,
    seconds: f64,
    lease_interval_ms: u128,
) -> PathBuf {
    let mut json = String::new();
    let _ = write!(
        json,
        "{{\n  \"redis_version\": \"{redis_version}\",\n  \"processes\": {PROCESSES},\n  \
         \"seconds_per_run\": {seconds},\n  \"lease_interval_ms\": {lease_interval_ms},\n  \
         \"command\": \"cargo bench -p tollgate --features redis --bench lease_fleet\",\n  \"workloads\": ["
    );
    for (index, found) in compared.iter().enumerate() {
        let workload = &found.workload;
        let _ = write!(
            json,
            "{}\n    {{\"name\": \"{}\", \"quota\": \"{}\", \"keys\": {}, \"offered_per_second\": {}, \
             \"pattern\": \"{}\",\n     \"leased\": {},\n     \"exact\": {},\n     \"extra_refusals\": {:.5}}}",
            if index == 0 { "" } else { "," },
            workload.name,
            workload.quota,
            workload.keys,
            workload.offered,
            workload.pattern_text(),
            run_json(&found.leased),
            run_json(&found.exact),
            found.extra_refusals()
        );
    }
    json.push_str("\n  ]\n}\n");
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from);
    let directory = target.join("bench-results");
    std::fs::create_dir_all(&directory).expect("the results directory");
    let path = directory.join("lease-fleet.json");
    std::fs::write(&path, json).expect("the results file");
    path
}

/// The readable summary: one line per workload and limiter.
pub(crate) fn print_summary(compared: &[Compared], redis_version: &str, seconds: f64) {
    println!(
        "Leases: {PROCESSES} processes sharing one quota per key through Redis {redis_version} on loopback, \
         {seconds} s per run, each workload's trace replayed by LeasedLimiter and by RedisLimiter\n"
    );
    println!(
        "| workload | limiter | decisions | admitted | Redis calls/decision | Redis's count | worst window (admitted - allowed) | over-admission | extra refusals |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for found in compared {
        for (run, name) in [(&found.leased, "leased"), (&found.exact, "exact")] {
            let worst = run.worst.map_or_else(
                || "-".to_owned(),
                |worst| format!("{} in {} ms", worst.excess, worst.window_ms),
            );
            let extra = if name == "leased" {
                format!("{:.2}%", found.extra_refusals() * 100.0)
            } else {
                String::new()
            };
            println!(
                "| {} | {name} | {} | {} | {:.4} | {:.4} | {worst} | {} | {extra} |",
                found.workload.name,
                run.decisions,
                run.admitted,
                run.calls_per_decision(),
                run.redis_calls as f64 / run.decisions.max(1) as f64,
                run.over_admission(),
            );
        }
    }
}
