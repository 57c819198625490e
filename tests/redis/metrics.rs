//! A named Redis limiter's series (feature `metrics`), against a real redis-server that is then
//! killed: decisions by outcome, round trips and their time, failed round trips by cause, and
//! the failure policy's decisions, each equal to what the limiter answered.

use std::collections::BTreeMap;
use std::time::Duration;

use tollgate::distributed::{
    DecidedBy, Failure, FailurePolicy, RedisDecision, RedisFailureCause, RedisLimiter,
};
use tollgate::{Outcome, TokenBucket};

use crate::metrics_common::{name, Recorder};
use crate::redis_common::RedisServer;

const DEADLINE: Duration = Duration::from_millis(250);

/// `ConnectionRefused` as `connection_refused`: the `cause` label of each cause.
fn cause_label(cause: RedisFailureCause) -> String {
    let mut label = String::new();
    for c in format!("{cause:?}").chars() {
        if c.is_ascii_uppercase() && !label.is_empty() {
            label.push('_');
        }
        label.push(c.to_ascii_lowercase());
    }
    label
}

/// The series a limiter's answers call for, tallied from the answers themselves.
#[derive(Default)]
struct Tally {
    values: BTreeMap<String, f64>,
    /// Round trips since the histogram was last read.
    round_trips: usize,
}

impl Tally {
    fn add(&mut self, series: String) {
        *self.values.entry(series).or_default() += 1.0;
    }

    /// A decision (`counts`) or a peek: a round trip unless Redis was recently down, a failure
    /// by its cause, an outcome and a policy's decision for a decision.
    fn answer(&mut self, answer: &RedisDecision, counts: bool) {
        if !matches!(answer.failure, Some(Failure::RecentlyDown(_))) {
            self.add("tollgate_redis_calls_total".to_owned());
            self.round_trips += 1;
        }
        if let Some(failure) = answer
            .failure
            .filter(|failure| !matches!(failure, Failure::RecentlyDown(_)))
        {
            self.add(format!(
                "tollgate_redis_errors_total{{cause={}}}",
                cause_label(failure.cause())
            ));
        }
        if !counts {
            return;
        }
        let outcome = match answer.decision.outcome() {
            Outcome::Allowed => "allowed",
            Outcome::Denied => "refused",
            Outcome::TableFull => "table_full",
            _ => "untracked",
        };
        self.add(format!("tollgate_decisions_total{{outcome={outcome}}}"));
        let policy = match answer.decided_by {
            DecidedBy::Redis => return,
            DecidedBy::FailOpen => "fail_open",
            DecidedBy::FailClosed => "fail_closed",
            _ => "fallback",
        };
        self.add(format!(
            "tollgate_redis_policy_decisions_total{{policy={policy}}}"
        ));
    }

    /// What `publish` must show: the tally, with allowed, refused and the round trips at 0 when
    /// none happened.
    fn expected(&self) -> BTreeMap<String, f64> {
        let mut values = self.values.clone();
        for always in [
            "tollgate_decisions_total{outcome=allowed}",
            "tollgate_decisions_total{outcome=refused}",
            "tollgate_redis_calls_total",
        ] {
            values.entry(always.to_owned()).or_default();
        }
        values
    }
}

/// Checks `limiter`'s series against `tally`: every value, and one latency sample per round trip
/// since the last check, each within the deadline (and a little more for the timer).
fn check(recorder: &Recorder, limiter: &RedisLimiter, tally: &mut Tally) {
    let name = limiter.meter().expect("named").name().as_str();
    let published = recorder.published(name);
    assert_eq!(published.values, tally.expected(), "{name}");
    let samples = published
        .histograms
        .get("tollgate_redis_call_seconds")
        .cloned()
        .unwrap_or_default();
    assert_eq!(samples.len(), tally.round_trips, "{name}: {samples:?}");
    assert!(
        samples
            .iter()
            .all(|&seconds| seconds > 0.0 && seconds < DEADLINE.as_secs_f64() + 0.2),
        "{name}: {samples:?}"
    );
    tally.round_trips = 0;
}

#[tokio::test]
async fn a_named_redis_limiter_counts_round_trips_failures_and_its_policy() {
    let recorder = Recorder::new();
    // The latency is recorded at each round trip, on the thread that polls it: this one.
    let _local = metrics::set_default_local_recorder(recorder.recorder());
    let mut server = RedisServer::start();
    let bucket = TokenBucket::new("2/min".parse().unwrap()).unwrap();
    let url = server.url();
    let build = |policy| {
        let url = url.clone();
        async move {
            let builder = RedisLimiter::builder(url, bucket, policy).deadline(DEADLINE);
            builder.connect().await.unwrap()
        }
    };
    let closed = FailurePolicy::FailClosed {
        retry_after: Duration::from_secs(1),
    };
    let closed = build(closed).await.named(name("redis-closed"));
    let open = build(FailurePolicy::FailOpen).await.named(name("redis-open"));
    let (mut closed_tally, mut open_tally) = (Tally::default(), Tally::default());

    // Redis up: two admissions, a refusal, a peek.
    let mut outcomes = Vec::new();
    for _ in 0..3 {
        let answer = closed.check("alice").await.unwrap();
        closed_tally.answer(&answer, true);
        outcomes.push((answer.decision.outcome(), answer.decided_by));
    }
    assert_eq!(
        outcomes,
        [
            (Outcome::Allowed, DecidedBy::Redis),
            (Outcome::Allowed, DecidedBy::Redis),
            (Outcome::Denied, DecidedBy::Redis),
        ]
    );
    closed_tally.answer(&closed.peek("alice").await.unwrap(), false);
    check(&recorder, &closed, &mut closed_tally);
    check(&recorder, &open, &mut open_tally);

    // Redis killed: the failures, then decisions made without asking while it is recently
    // down, then a probe per pause.
    server.kill();
    for _ in 0..12 {
        for (limiter, tally) in [(&closed, &mut closed_tally), (&open, &mut open_tally)] {
            tally.answer(&limiter.check("alice").await.unwrap(), true);
        }
        open_tally.answer(&open.peek("bob").await.unwrap(), false);
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    for (limiter, tally) in [(&closed, &mut closed_tally), (&open, &mut open_tally)] {
        let policy = tally
            .values
            .keys()
            .filter(|series| series.contains("policy"))
            .count();
        assert_eq!(
            policy, 1,
            "only this limiter's policy decided: {:?}",
            tally.values
        );
        assert!(
            tally.values.keys().any(|series| series.contains("errors")),
            "round trips failed: {:?}",
            tally.values
        );
        check(&recorder, limiter, tally);
    }
}
