//! A Redis limiter's series (features `metrics` and `redis`): its round trips, their latency,
//! their failures by cause, and the decisions its failure policy made.
//!
//! These count on shared atomics, not per thread: a round trip takes tens of microseconds, next
//! to which one locked add per call is nothing. The latency goes to the recorder at each call,
//! as a histogram sample (a histogram cannot be summed and handed over later as a count can).

use std::future::Future;
use std::time::Instant;

use metrics::{Key, Label, Recorder};

use super::meter::Meter;
use super::registry::METADATA;
use super::{REDIS_CALLS, REDIS_CALL_SECONDS, REDIS_ERRORS, REDIS_POLICY_DECISIONS};
use crate::distributed::{DecidedBy, Failure, RedisDecision, RedisFailureCause};
use crate::sync::{AtomicU64, Ordering};

/// Room for every cause's code (`RedisFailureCause::code`), with some to spare for causes to
/// come; a code past it is counted as the last one.
const CAUSES: usize = 32;
/// The failure policy's decisions: fail open, fail closed, the fallback.
const POLICIES: usize = 3;

/// A Redis limiter's counters, and the key of its latency histogram.
#[derive(Debug)]
pub(crate) struct RedisCounts {
    calls: AtomicU64,
    errors: [AtomicU64; CAUSES],
    policy: [AtomicU64; POLICIES],
    latency: Key,
}

impl RedisCounts {
    /// Counters at 0 for the limiter `name`.
    pub(crate) fn new(name: &str) -> RedisCounts {
        RedisCounts {
            calls: AtomicU64::new(0),
            errors: std::array::from_fn(|_| AtomicU64::new(0)),
            policy: std::array::from_fn(|_| AtomicU64::new(0)),
            latency: Key::from_parts(REDIS_CALL_SECONDS, vec![Label::new("limiter", name.to_owned())]),
        }
    }

    pub(crate) fn totals(&self) -> RedisTotals {
        // Relaxed: counts read as they are; each only grows.
        let read = |count: &AtomicU64| count.load(Ordering::Relaxed);
        RedisTotals {
            calls: read(&self.calls),
            errors: self.errors.each_ref().map(read),
            policy: self.policy.each_ref().map(read),
        }
    }
}

/// [`RedisCounts`], read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RedisTotals {
    calls: u64,
    errors: [u64; CAUSES],
    policy: [u64; POLICIES],
}

impl Default for RedisTotals {
    fn default() -> Self {
        RedisTotals {
            calls: 0,
            errors: [0; CAUSES],
            policy: [0; POLICIES],
        }
    }
}

impl RedisTotals {
    pub(crate) fn add(&mut self, other: &RedisTotals) {
        self.calls = self.calls.wrapping_add(other.calls);
        for (total, more) in self.errors.iter_mut().zip(other.errors) {
            *total = total.wrapping_add(more);
        }
        for (total, more) in self.policy.iter_mut().zip(other.policy) {
            *total = total.wrapping_add(more);
        }
    }
}

/// Adds one to `count`.
fn bump(count: &AtomicU64) {
    // Relaxed: a count read only by `publish`, as a sum; `fetch_add` keeps every increment.
    count.fetch_add(1, Ordering::Relaxed);
}

/// The `cause` label of a failure's cause.
pub(crate) fn cause_label(cause: RedisFailureCause) -> &'static str {
    match cause {
        RedisFailureCause::Timeout => "timeout",
        RedisFailureCause::ConnectionRefused => "connection_refused",
        RedisFailureCause::ConnectionLost => "connection_lost",
        RedisFailureCause::Unreachable => "unreachable",
        RedisFailureCause::AuthenticationFailed => "authentication_failed",
        RedisFailureCause::AuthenticationRequired => "authentication_required",
        RedisFailureCause::NoPermission => "no_permission",
        RedisFailureCause::NoSuchDatabase => "no_such_database",
        RedisFailureCause::NotACluster => "not_a_cluster",
        RedisFailureCause::ClusterDown => "cluster_down",
        RedisFailureCause::ClusterReconfiguring => "cluster_reconfiguring",
        RedisFailureCause::ReadOnly => "read_only",
        RedisFailureCause::Loading => "loading",
        RedisFailureCause::Busy => "busy",
        RedisFailureCause::OutOfMemory => "out_of_memory",
        RedisFailureCause::ServerError => "server_error",
        RedisFailureCause::UnexpectedReply => "unexpected_reply",
    }
}

/// The `policy` label of a decision the failure policy made, and its counter; `None` for
/// Redis's own.
fn policy_of(decided_by: DecidedBy) -> Option<(usize, &'static str)> {
    match decided_by {
        DecidedBy::Redis | DecidedBy::Lease => None,
        DecidedBy::FailOpen => Some((0, "fail_open")),
        DecidedBy::FailClosed => Some((1, "fail_closed")),
        DecidedBy::Fallback => Some((2, "fallback")),
    }
}

impl Meter {
    /// Runs `call`, a round trip to Redis, counting it and timing it.
    pub(crate) async fn timed<F: Future>(&self, call: F) -> F::Output {
        let started = Instant::now();
        let answer = call.await;
        self.round_trip_took(started);
        answer
    }

    /// Counts one round trip, started at `started`, and records its time.
    pub(crate) fn round_trip_took(&self, started: Instant) {
        let seconds = started.elapsed().as_secs_f64();
        if let Some(redis) = &self.shared().redis {
            bump(&redis.calls);
            metrics::with_recorder(|recorder| {
                recorder
                    .register_histogram(&redis.latency, &METADATA)
                    .record(seconds)
            });
        }
    }

    /// Counts a failed round trip by its cause (one not made, Redis being recently down, is no
    /// round trip).
    pub(crate) fn redis_failed(&self, failure: Failure) {
        let Some(redis) = &self.shared().redis else {
            return;
        };
        match failure {
            Failure::RecentlyDown(_) => {}
            failure => {
                let code = usize::from(failure.cause().code()).min(CAUSES - 1);
                bump(&redis.errors[code]);
            }
        }
    }

    /// Counts a Redis limiter's answer: a failed round trip by its cause (one not made, Redis
    /// being recently down, is no round trip), and, when it `counts` (a decision, not a peek),
    /// its outcome and the failure policy's decision.
    pub(crate) fn redis_decided(&self, answer: &RedisDecision, counts: bool) {
        let Some(redis) = &self.shared().redis else {
            return;
        };
        if let Some(failure) = answer.failure {
            self.redis_failed(failure);
        }
        if counts {
            self.record(&answer.decision);
            if let Some((policy, _)) = policy_of(answer.decided_by) {
                bump(&redis.policy[policy]);
            }
        }
    }
}

/// The Redis series of one name (the latency histogram is recorded at each call).
pub(super) fn emit(recorder: &dyn Recorder, limiter: impl Fn() -> Label, totals: &RedisTotals) {
    let key = Key::from_parts(REDIS_CALLS, vec![limiter()]);
    recorder.register_counter(&key, &METADATA).absolute(totals.calls);
    for (code, &count) in totals.errors.iter().enumerate() {
        let cause = u8::try_from(code).map(RedisFailureCause::from_code);
        // Codes no cause has (past the last one) read as a timeout: skip them.
        let Some(cause) = cause.ok().filter(|cause| usize::from(cause.code()) == code) else {
            continue;
        };
        if count > 0 {
            let labels = vec![limiter(), Label::new("cause", cause_label(cause))];
            let key = Key::from_parts(REDIS_ERRORS, labels);
            recorder.register_counter(&key, &METADATA).absolute(count);
        }
    }
    for decided_by in [DecidedBy::FailOpen, DecidedBy::FailClosed, DecidedBy::Fallback] {
        let Some((policy, label)) = policy_of(decided_by) else {
            continue;
        };
        let count = totals.policy[policy];
        if count > 0 {
            let labels = vec![limiter(), Label::new("policy", label)];
            let key = Key::from_parts(REDIS_POLICY_DECISIONS, labels);
            recorder.register_counter(&key, &METADATA).absolute(count);
        }
    }
}
