//! A named Redis limiter's series (feature `metrics`), against a real redis-server that is then
//! killed: decisions by outcome, round trips and their time, failed round trips by cause, and
//! the failure policy's decisions, each equal to what the limiter answered. A named leased
//! limiter's, the same way: those series (decisions spent from its leases included), and its
//! lease round trips, lease sizes and units given back, each equal to what its answers and its
//! own `LeaseCounts` say.

use std::collections::BTreeMap;
use std::time::Duration;

use tollgate::distributed::{
    DecidedBy, Failure, FailurePolicy, LeasedLimiter, RedisDecision, RedisFailureCause, RedisLimiter,
    TimeSource,
};
use tollgate::metrics::Meter;
use tollgate::{ManualClock, Outcome, Timestamp, TokenBucket};

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

    /// A decision (`counts`) or a peek: a round trip unless Redis was recently down or a lease
    /// decided it, a failure by its cause, an outcome and a policy's decision for a decision.
    fn answer(&mut self, answer: &RedisDecision, counts: bool) {
        let round_trip = answer.decided_by != DecidedBy::Lease;
        if round_trip && !matches!(answer.failure, Some(Failure::RecentlyDown(_))) {
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
            DecidedBy::Redis | DecidedBy::Lease => return,
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
    let meter = limiter.meter().expect("named");
    check_meter(recorder, meter, &tally.expected(), tally.round_trips);
    tally.round_trips = 0;
}

/// Checks the series of `meter` against `expected`, and `round_trips` latency samples, each
/// within the deadline (and a little more for the timer); returns what was published.
fn check_meter(
    recorder: &Recorder,
    meter: &Meter,
    expected: &BTreeMap<String, f64>,
    round_trips: usize,
) -> crate::metrics_common::Series {
    let name = meter.name().as_str();
    let published = recorder.published(name);
    assert_eq!(&published.values, expected, "{name}");
    let samples = published
        .histograms
        .get("tollgate_redis_call_seconds")
        .cloned()
        .unwrap_or_default();
    assert_eq!(samples.len(), round_trips, "{name}: {samples:?}");
    assert!(
        samples
            .iter()
            .all(|&seconds| seconds > 0.0 && seconds < DEADLINE.as_secs_f64() + 0.2),
        "{name}: {samples:?}"
    );
    published
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

/// What a leased limiter's answers leave uncounted in a [`Tally`]: its peeks that Redis
/// answered (round trips beside the lease scripts'), and the round trips already checked.
#[derive(Default)]
struct LeaseTally {
    peeks_by_redis: u64,
    round_trips_checked: u64,
}

/// Checks a named leased limiter's series: its answers' tally (outcomes, failures by cause,
/// the policy's decisions), its lease round trips and the units it gave back as its own
/// `LeaseCounts` counted them, its Redis round trips (the lease scripts' and the peeks Redis
/// answered) with one latency sample each, and one lease-size sample per lease, summing to the
/// units leased. Returns those lease sizes (the ones recorded since the last check).
fn check_leased(
    recorder: &Recorder,
    limiter: &LeasedLimiter,
    tally: &Tally,
    leases: &mut LeaseTally,
    leases_checked: &mut (u64, u64),
) -> Vec<f64> {
    let counts = limiter.counts();
    let round_trips = counts.round_trips + leases.peeks_by_redis;
    let mut expected = tally.expected();
    for (series, value) in [
        ("tollgate_redis_calls_total", round_trips),
        ("tollgate_redis_lease_calls_total", counts.round_trips),
        (
            "tollgate_redis_lease_returned_units_total",
            counts.units_given_back,
        ),
    ] {
        expected.insert(series.to_owned(), value as f64);
    }
    let new_trips = (round_trips - leases.round_trips_checked) as usize;
    leases.round_trips_checked = round_trips;
    let meter = limiter.meter().expect("named");
    let published = check_meter(recorder, meter, &expected, new_trips);
    let sizes = published
        .histograms
        .get("tollgate_redis_lease_units")
        .cloned()
        .unwrap_or_default();
    let (leases_before, units_before) = *leases_checked;
    assert_eq!(sizes.len() as u64, counts.leases - leases_before, "{counts:?}");
    assert_eq!(
        sizes.iter().sum::<f64>(),
        (counts.units_leased - units_before) as f64,
        "{counts:?}"
    );
    assert!(
        sizes
            .iter()
            .all(|&units| units >= 1.0 && units <= limiter.max_lease() as f64),
        "{sizes:?}"
    );
    *leases_checked = (counts.leases, counts.units_leased);
    sizes
}

/// Waits until `limiter`'s refreshes have landed: its round trips stop changing.
async fn settle(limiter: &LeasedLimiter) {
    let mut last = limiter.counts().round_trips;
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = limiter.counts().round_trips;
        if now == last {
            return;
        }
        last = now;
    }
}

/// A named leased limiter, on one thread (its refreshes run on this thread's runtime, so their
/// lease sizes reach this thread's recorder), at a frozen client time: a key seen once is one
/// lease round trip and no lease; a hot key's decisions are mostly its leases', each lease a
/// sample of its size; what `release` gives back is counted; peeks answered by Redis are round
/// trips, peeks answered by the lease are not; with Redis killed, its failures and the policy's
/// decisions are counted as a per-decision limiter's are. A direct leased limiter counts under
/// its own name.
#[tokio::test]
async fn a_named_leased_limiter_counts_its_decisions_and_its_leases() {
    let recorder = Recorder::new();
    let _local = metrics::set_default_local_recorder(recorder.recorder());
    let mut server = RedisServer::start();
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_700_000_040));
    let bucket = TokenBucket::new("100/h".parse().unwrap()).unwrap();
    let builder = || {
        let closed = FailurePolicy::FailClosed {
            retry_after: Duration::from_secs(1),
        };
        RedisLimiter::builder(server.url(), bucket, closed)
            .time(TimeSource::client(clock.clone()))
            .deadline(DEADLINE)
            .leased()
    };
    let limiter = builder().connect().await.unwrap().named(name("leased"));
    let (mut tally, mut leases, mut checked) = (Tally::default(), LeaseTally::default(), (0, 0));

    // A key seen once: one lease round trip, Redis's answer, no lease.
    let answer = limiter.check("once").await.unwrap();
    assert_eq!(answer.decided_by, DecidedBy::Redis);
    tally.answer(&answer, true);
    let sizes = check_leased(&recorder, &limiter, &tally, &mut leases, &mut checked);
    assert!(sizes.is_empty(), "{sizes:?}");
    assert_eq!(limiter.counts().round_trips, 1);

    // A hot key: its leases grow, and most decisions are theirs; then they are given back.
    let mut by_lease = 0;
    for _ in 0..30 {
        let answer = limiter.check("hot").await.unwrap();
        by_lease += u32::from(answer.decided_by == DecidedBy::Lease);
        tally.answer(&answer, true);
        settle(&limiter).await;
    }
    assert!(by_lease >= 15, "{by_lease} of 30 by lease");
    let held = limiter.units_held();
    assert!(held > 0, "a lease is held");
    let peek = limiter.peek("hot").await.unwrap();
    assert_eq!(peek.decided_by, DecidedBy::Lease);
    tally.answer(&peek, false);
    assert_eq!(limiter.release().await, held);
    let sizes = check_leased(&recorder, &limiter, &tally, &mut leases, &mut checked);
    assert!(
        sizes.iter().any(|&units| units > 1.0),
        "the hot key's leases grew: {sizes:?}"
    );
    assert_eq!(limiter.counts().units_given_back, held);

    // Past the quota: refusals, by lease or by Redis; a peek of a new key is Redis's.
    for _ in 0..100 {
        let answer = limiter.check("hot").await.unwrap();
        tally.answer(&answer, true);
        settle(&limiter).await;
    }
    assert!(
        tally
            .values
            .get("tollgate_decisions_total{outcome=refused}")
            .copied()
            .unwrap_or(0.0)
            > 0.0,
        "{:?}",
        tally.values
    );
    let peek = limiter.peek("new").await.unwrap();
    assert_eq!(peek.decided_by, DecidedBy::Redis);
    leases.peeks_by_redis += 1;
    tally.answer(&peek, false);
    check_leased(&recorder, &limiter, &tally, &mut leases, &mut checked);

    // A direct leased limiter, under its own name.
    let direct = builder()
        .connect_direct("partner")
        .await
        .unwrap()
        .named(name("direct-leased"));
    assert!(direct.check().await.unwrap().is_allowed());
    let published = recorder.published(direct.meter().expect("named").name().as_str());
    assert_eq!(published.values["tollgate_decisions_total{outcome=allowed}"], 1.0);
    assert_eq!(published.values["tollgate_redis_lease_calls_total"], 1.0);

    // Redis killed: a new key's lease round trips fail, then the policy decides without one.
    server.kill();
    for _ in 0..6 {
        let answer = limiter.check("away").await.unwrap();
        assert_eq!(answer.decided_by, DecidedBy::FailClosed);
        tally.answer(&answer, true);
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    assert!(
        tally.values.keys().any(|series| series.contains("errors")),
        "round trips failed: {:?}",
        tally.values
    );
    check_leased(&recorder, &limiter, &tally, &mut leases, &mut checked);
}
