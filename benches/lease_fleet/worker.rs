//! One process of the fleet: the bench binary run again with [`ROLE`] as its first argument.
//! It connects its own limiter (leased or exact) to the shared Redis, waits for the common start
//! time, replays its trace on the real clock and prints what it decided on stdout, one line per
//! admission and one summary line, for the coordinating process to merge.

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tollgate::distributed::{FailurePolicy, LeasedLimiter, RedisCheckError, RedisDecision, RedisLimiter};
use tollgate::TokenBucket;

use crate::trace::{trace, workloads};

/// The first argument that makes the bench binary a process of the fleet.
pub(crate) const ROLE: &str = "--fleet-process";

/// The span a lease is sized for in the leased runs: a key spent steadily asks Redis about
/// twice a second (a lease holds twice what was spent in this span, at most an eighth of the
/// burst, refreshed when half spent).
pub(crate) const LEASE_INTERVAL: Duration = Duration::from_millis(500);

/// Which limiter a run decides with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `LeasedLimiter`: units leased from Redis, spent locally.
    Leased,
    /// `RedisLimiter`: one round trip per decision, the exact shared limiter.
    Exact,
}

impl Mode {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Leased => "leased",
            Mode::Exact => "exact",
        }
    }

    fn parse(text: &str) -> Mode {
        match text {
            "leased" => Mode::Leased,
            "exact" => Mode::Exact,
            other => panic!("a mode is `leased` or `exact`, not {other:?}"),
        }
    }
}

/// What one process is told to run.
#[derive(Clone, Debug)]
pub(crate) struct Assignment {
    pub(crate) url: String,
    pub(crate) prefix: String,
    pub(crate) mode: Mode,
    pub(crate) workload: usize,
    pub(crate) process: usize,
    /// The common start, µs since the Unix epoch.
    pub(crate) start_us: u64,
    pub(crate) duration: Duration,
}

impl Assignment {
    /// The arguments after [`ROLE`].
    pub(crate) fn arguments(&self) -> Vec<String> {
        vec![
            self.url.clone(),
            self.prefix.clone(),
            self.mode.name().to_owned(),
            self.workload.to_string(),
            self.process.to_string(),
            self.start_us.to_string(),
            self.duration.as_millis().to_string(),
        ]
    }

    fn parse(arguments: &[String]) -> Assignment {
        let number = |at: usize| -> u64 {
            arguments
                .get(at)
                .and_then(|text| text.parse().ok())
                .unwrap_or_else(|| panic!("argument {at} of a fleet process: a number, in {arguments:?}"))
        };
        Assignment {
            url: arguments[0].clone(),
            prefix: arguments[1].clone(),
            mode: Mode::parse(&arguments[2]),
            workload: number(3) as usize,
            process: number(4) as usize,
            start_us: number(5),
            duration: Duration::from_millis(number(6)),
        }
    }
}

/// The system clock in µs since the Unix epoch: the clock every process and Redis's `TIME`
/// read on this one machine.
pub(crate) fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_micros() as u64)
}

enum Limiter {
    Leased(LeasedLimiter),
    Exact(RedisLimiter),
}

impl Limiter {
    async fn check(&self, key: &str) -> Result<RedisDecision, RedisCheckError> {
        match self {
            Limiter::Leased(limiter) => limiter.check(key).await,
            Limiter::Exact(limiter) => limiter.check(key).await,
        }
    }

    /// Round trips and local decisions as the limiter counts them (the exact limiter makes one
    /// round trip per decision it sends).
    fn counts(&self, sent: u64) -> (u64, u64) {
        match self {
            Limiter::Leased(limiter) => {
                let counts = limiter.counts();
                (counts.round_trips, counts.local_decisions)
            }
            Limiter::Exact(_) => (sent, 0),
        }
    }
}

/// Runs one process of the fleet from its arguments (after [`ROLE`]).
pub(crate) async fn run(arguments: &[String]) {
    let assignment = Assignment::parse(arguments);
    let workload = workloads()[assignment.workload];
    let bucket = TokenBucket::new(workload.quota.parse().expect("the workload's quota")).expect("a bucket");
    // Failing closed: a decision Redis did not make is a refusal, never an admission, and is
    // counted apart.
    let builder = RedisLimiter::builder(
        assignment.url.clone(),
        bucket,
        FailurePolicy::FailClosed {
            retry_after: Duration::from_secs(1),
        },
    )
    .deadline(Duration::from_secs(5))
    .prefix(&assignment.prefix);
    let limiter = match assignment.mode {
        Mode::Leased => Limiter::Leased(
            builder
                .leased()
                .lease_interval(LEASE_INTERVAL)
                .connect()
                .await
                .expect("a leased limiter"),
        ),
        Mode::Exact => Limiter::Exact(builder.connect().await.expect("a limiter")),
    };
    let keys: Vec<String> = (0..workload.keys).map(|key| format!("key-{key}")).collect();
    let arrivals = trace(
        &workload,
        assignment.workload,
        assignment.process,
        assignment.duration,
    );
    let mut out = String::with_capacity(arrivals.len() * 24);
    let (mut decisions, mut admitted, mut by_policy, mut max_latency, mut most_behind) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    for arrival in &arrivals {
        let due = assignment.start_us + arrival.at_us;
        let now = unix_us();
        if due > now + 1_000 {
            // tokio's timer has a millisecond's resolution: the requests due within it go at once.
            tokio::time::sleep(Duration::from_micros(due - now)).await;
        }
        let sent = unix_us();
        most_behind = most_behind.max(sent.saturating_sub(due));
        let answer = limiter.check(&keys[arrival.key]).await.expect("a decision");
        let done = unix_us();
        decisions += 1;
        max_latency = max_latency.max(done - sent);
        if answer.failure.is_some() {
            by_policy += 1;
        } else if answer.is_allowed() {
            admitted += 1;
            let _ = writeln!(out, "A {} {sent} {done}", arrival.key);
        }
    }
    // Refreshes still in flight land (and are counted) before the counts are read.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (round_trips, local) = limiter.counts(decisions);
    let _ = writeln!(
        out,
        "S {decisions} {admitted} {by_policy} {round_trips} {local} {max_latency} {most_behind}"
    );
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(out.as_bytes()).expect("stdout");
    stdout.flush().expect("stdout");
}
