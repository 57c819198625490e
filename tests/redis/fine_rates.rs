//! Bucket rates whose emission interval `T = period / count` is not a whole number of
//! microseconds (`30000/s`, `7/ms`, `3/s`, `u32::MAX` per day) through Redis, on a client's time:
//! every decision is the exact rational GCRA's (a `u128` model below, time in units of
//! `1 / count` µs), admitted or refused, with its numbers rounded up to whole nanoseconds; a
//! second of `30000/s` admits exactly 30,000 units after the burst; refunds and a shaper's
//! slots keep the remainder; a live change between a whole-µs rate (8-byte state) and a finer
//! one (24-byte state) reads the other's state exactly or later, never earlier; leases refuse
//! such a rate with a typed error, and read its state later, never earlier.

use std::cell::Cell;
use std::time::Duration;

use crate::redis_common::{client_time_limiter, raw_connection, shared_database};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use redis::AsyncCommands;
use tollgate::distributed::{DecidedBy, FailurePolicy, LeaseConfigError, RedisLimiter, TimeSource};
use tollgate::{Decision, LeakyBucket, ManualClock, Quota, Timestamp, TokenBucket};

/// 1_700_000_040 s since the epoch, in microseconds.
const BASE_MICROS: u64 = 1_700_000_040_000_000;

fn at(micros: u64) -> Timestamp {
    Timestamp::from_nanos(micros * 1_000)
}

/// A decision's numbers, compared field by field (ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shape {
    admitted: bool,
    remaining: u64,
    retry: u128,
    reset: u128,
    delay: u128,
}

impl From<Decision> for Shape {
    fn from(decision: Decision) -> Shape {
        Shape {
            admitted: decision.is_allowed(),
            remaining: decision.remaining(),
            retry: decision.retry_after().as_nanos(),
            reset: decision.reset_after().as_nanos(),
            delay: decision.delay().as_nanos(),
        }
    }
}

/// The exact GCRA: the TAT in units of `1 / count` µs, so that `T` is `period` (µs) of them.
#[derive(Clone, Copy, Debug)]
struct Exact {
    count: u128,
    period: u128,
    burst: u128,
    shaper: bool,
    tat: u128,
}

impl Exact {
    fn new(count: u64, period_micros: u64, burst: u64, shaper: bool) -> Exact {
        Exact {
            count: count.into(),
            period: period_micros.into(),
            burst: burst.into(),
            shaper,
            tat: 0,
        }
    }

    /// Whole ns in `x` units, rounded up.
    fn nanos(&self, x: u128) -> u128 {
        (x * 1_000).div_ceil(self.count)
    }

    /// How far the TAT runs ahead of `now_micros`, in whole µs rounded up.
    fn lead_micros(&self, now_micros: u64) -> u128 {
        let now = u128::from(now_micros) * self.count;
        (self.tat.max(now) - now).div_ceil(self.count)
    }

    fn decide(&mut self, now_micros: u64, cost: u64) -> Shape {
        let now = u128::from(now_micros) * self.count;
        let tolerance = self.burst * self.period;
        let backlog = self.tat.max(now) - now;
        let after = backlog + u128::from(cost) * self.period;
        let units = |room: u128| u64::try_from(room / self.period).unwrap();
        if cost == 0 || after <= tolerance {
            if cost > 0 {
                self.tat = now + after;
            }
            return Shape {
                admitted: true,
                remaining: units(tolerance.saturating_sub(after)),
                retry: 0,
                reset: self.nanos(after),
                delay: if self.shaper { self.nanos(backlog) } else { 0 },
            };
        }
        Shape {
            admitted: false,
            remaining: units(tolerance.saturating_sub(backlog)),
            retry: self.nanos(after - tolerance),
            reset: self.nanos(backlog),
            delay: 0,
        }
    }
}

fn bucket(quota: Quota, shaper: bool) -> tollgate::distributed::RedisAlgorithm {
    match shaper {
        true => LeakyBucket::new(quota).unwrap().into(),
        false => TokenBucket::new(quota).unwrap().into(),
    }
}

/// Quotas whose `T` is not whole µs, and random ones (some of them whole): `(count, period µs)`.
fn rate() -> impl Strategy<Value = (u64, u64)> {
    prop_oneof![
        Just((30_000, 1_000_000)),
        Just((70_000, 1_000_000)),
        Just((7, 1_000)),
        Just((4_294_967_295, 86_400_000_000)),
        Just((1_000_000, 60_000_000)),
        Just((3, 1_000_000)),
        (1..=1_000_000u64, 1..=86_400_000u64).prop_map(|(count, ms)| (count, ms * 1_000)),
    ]
}

/// One case: the rate, a burst, token bucket or shaper, and `(µs after the last, weight)` steps
/// in units of `T` / 8 (so that steps land between slots as well as on them).
#[derive(Clone, Debug)]
struct Case {
    count: u64,
    period: u64,
    burst: u64,
    shaper: bool,
    steps: Vec<(u64, u64)>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        rate(),
        1..=20u64,
        any::<bool>(),
        prop::collection::vec((0..=16u64, 0..=6u64), 1..40),
    )
        .prop_filter(
            "a shaper needs T in whole nanoseconds within 1%",
            |(rate, _, shaper, _)| {
                !*shaper
                    || LeakyBucket::new(Quota::new(rate.0, Duration::from_micros(rate.1)).unwrap()).is_ok()
            },
        )
        .prop_map(|((count, period), burst, shaper, steps)| Case {
            count,
            period,
            burst,
            shaper,
            steps,
        })
}

/// What the cases compared: decisions admitted and refused, and keys that expired, in real time,
/// before their `PERSIST`.
#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    admitted: u64,
    refused: u64,
    raced: u64,
}

/// Every decision of a case through Redis is the exact model's, field for field. A key whose
/// lead is short may expire in real time before its `PERSIST` (its TTL is client time on the
/// server's clock, a millisecond for the fastest rates): found gone, the model restarts too,
/// counted in `raced`.
async fn run_case(
    case: &Case,
    number: u64,
    server: &crate::redis_common::SharedDatabase,
    raw: &mut redis::aio::MultiplexedConnection,
    tally: &mut Tally,
) -> Result<(), TestCaseError> {
    let quota = Quota::new(case.count, Duration::from_micros(case.period))
        .unwrap()
        .with_burst(case.burst)
        .unwrap();
    let clock = ManualClock::new();
    let remote =
        client_time_limiter(server, bucket(quota, case.shaper), &clock, &format!("p{number}:")).await;
    let key = remote.redis_key("k");
    let mut model = Exact::new(case.count, case.period, case.burst, case.shaper);
    // An eighth of T, at least a µs.
    let step = (case.period / case.count / 8).max(1);
    let mut now = BASE_MICROS;
    for &(gap, weight) in &case.steps {
        now += gap * step;
        clock.set(at(now));
        let weight = weight.min(case.burst);
        let answer = remote.check_n("k", weight).await.unwrap();
        let _: bool = raw.persist(&key).await.unwrap();
        prop_assert_eq!(answer.decided_by, DecidedBy::Redis);
        let expected = model.decide(now, weight);
        prop_assert_eq!(Shape::from(answer.decision), expected, "{:?} at {} µs", case, now);
        match expected.admitted {
            true => tally.admitted += 1,
            false => tally.refused += 1,
        }
        if model.lead_micros(now) > 0 && !raw.exists::<_, bool>(&key).await.unwrap() {
            // A TTL of a second outlives any stall between the script and its `PERSIST`.
            prop_assert!(model.lead_micros(now) < 1_000_000, "gone while it counts");
            model.tat = 0;
            tally.raced += 1;
        }
    }
    Ok(())
}

#[test]
fn every_decision_is_the_exact_rational_gcras() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = shared_database();
    let raw = runtime.block_on(raw_connection(&server));
    let mut runner = TestRunner::new(Config {
        cases: 48,
        failure_persistence: None,
        ..Config::default()
    });
    let (number, tally) = (Cell::new(0), Cell::new(Tally::default()));
    runner
        .run(&case(), |case| {
            number.set(number.get() + 1);
            let mut sum = tally.get();
            let result = runtime.block_on(run_case(&case, number.get(), &server, &mut raw.clone(), &mut sum));
            tally.set(sum);
            result
        })
        .unwrap();
    // Both verdicts were compared many times, and races (which restart a case's model) were
    // a minority of the steps.
    let Tally {
        admitted,
        refused,
        raced,
    } = tally.get();
    assert!(admitted >= 100 && refused >= 100, "{:?}", tally.get());
    assert!(raced * 4 <= admitted + refused, "{:?}", tally.get());
}

/// Every unit that fits now, asked for in weights of 64, then 8, then 1.
async fn take_all(remote: &RedisLimiter) -> u64 {
    let mut admitted = 0;
    for weight in [64, 8, 1] {
        loop {
            let answer = remote.check_n("k", weight).await.unwrap();
            assert_eq!(answer.decided_by, DecidedBy::Redis);
            if !answer.is_allowed() {
                break;
            }
            admitted += weight;
        }
    }
    admitted
}

/// `30000/s` (T = 33⅓ µs, burst 30,000): after its burst at one instant, one second of requests
/// taken as soon as they fit (every 1,234 µs, then at the second's end) admits exactly 30,000
/// units. (The burst's lead of a second keeps the key alive, in real time, between calls.)
#[tokio::test(flavor = "current_thread")]
async fn a_second_of_30000_per_second_admits_exactly_30000_after_the_burst() {
    let server = shared_database();
    let clock = ManualClock::new();
    let quota: Quota = "30000/s".parse().unwrap();
    let remote = client_time_limiter(&server, TokenBucket::new(quota).unwrap(), &clock, "second:").await;
    clock.set(at(BASE_MICROS));
    // The burst in one request, so that the key's lead (its TTL) is a second from the start.
    assert!(remote.check_n("k", 30_000).await.unwrap().is_allowed());
    assert_eq!(take_all(&remote).await, 0);
    let mut admitted = 0;
    let mut offset = 0;
    while offset < 1_000_000 {
        offset = (offset + 1_234).min(1_000_000);
        clock.set(at(BASE_MICROS + offset));
        admitted += take_all(&remote).await;
    }
    assert_eq!(admitted, 30_000);
}

/// A refund of a `3/s burst 3` bucket (T = 333,333⅓ µs) moves its TAT back by exactly `T`:
/// one more unit passes at once, and the next only a third of a second later.
#[tokio::test(flavor = "current_thread")]
async fn a_refund_gives_back_exactly_its_fraction_of_a_microsecond() {
    let server = shared_database();
    let clock = ManualClock::new();
    let quota: Quota = "3/s burst 3".parse().unwrap();
    let remote = client_time_limiter(&server, TokenBucket::new(quota).unwrap(), &clock, "refund:").await;
    let mut model = Exact::new(3, 1_000_000, 3, false);
    clock.set(at(BASE_MICROS));
    assert!(remote.check_n("k", 3).await.unwrap().is_allowed());
    model.decide(BASE_MICROS, 3);
    assert!(remote.refund_n("k", 2).await.unwrap());
    model.tat -= 2 * model.period;
    for (offset, weight) in [(0, 2), (0, 1), (333_333, 1), (333_334, 1), (333_334, 1)] {
        clock.set(at(BASE_MICROS + offset));
        let answer = remote.check_n("k", weight).await.unwrap();
        assert_eq!(
            Shape::from(answer.decision),
            model.decide(BASE_MICROS + offset, weight),
            "{weight} at +{offset} µs"
        );
    }
    // Nothing given back for a weight of 0.
    assert!(!remote.refund_n("k", 0).await.unwrap());
}

/// A `3/s burst 3` shaper (T = 333,333⅓ µs): slots a third of a second apart, their delays
/// and ends rounded up to whole ns; a wait longer than allowed is refused; a slot goes back only
/// while it ends the queue, by exactly `T`.
#[tokio::test(flavor = "current_thread")]
async fn a_shapers_slots_are_a_third_of_a_second_apart() {
    let server = shared_database();
    let clock = ManualClock::new();
    let quota: Quota = "3/s burst 3".parse().unwrap();
    let remote = client_time_limiter(&server, LeakyBucket::new(quota).unwrap(), &clock, "slots:").await;
    clock.set(at(BASE_MICROS));
    let mut ends = Vec::new();
    for delay in [0, 333_333_334, 666_666_667] {
        let (answer, end) = remote.check_slot("k", 1, None).await.unwrap();
        assert!(answer.is_allowed());
        assert_eq!(answer.decision.delay(), Duration::from_nanos(delay));
        ends.push(end.unwrap());
    }
    let base = BASE_MICROS * 1_000;
    let nanos: Vec<u64> = ends.iter().map(|end| end.as_nanos() - base).collect();
    assert_eq!(nanos, [333_333_334, 666_666_667, 1_000_000_000]);
    // A fourth would wait a whole second: refused within 999,999 µs, and for a full queue
    // (room for it after T, rounded up).
    let (refused, end) = remote
        .check_slot("k", 1, Some(Duration::from_micros(999_999)))
        .await
        .unwrap();
    assert!(!refused.is_allowed() && end.is_none());
    assert_eq!(refused.decision.retry_after(), Duration::from_nanos(333_333_334));
    // The middle slot does not end the queue; the last does, then the middle one again.
    assert!(!remote.refund_slot("k", 1, ends[1]).await.unwrap());
    assert!(remote.refund_slot("k", 1, ends[2]).await.unwrap());
    assert!(remote.refund_slot("k", 1, ends[1]).await.unwrap());
    // The queue ends at T again: the next slot waits exactly T, rounded up.
    let (answer, end) = remote.check_slot("k", 1, None).await.unwrap();
    assert_eq!(answer.decision.delay(), Duration::from_nanos(333_333_334));
    assert_eq!(end.unwrap().as_nanos() - base, 666_666_667);
    // 1 µs after T, the queue's end (2T) is 333,332⅔ µs ahead: a weight of 1 is refused within
    // 333,332 µs of waiting, admitted within 333,333.
    clock.set(at(BASE_MICROS + 333_334));
    let (short, _) = remote
        .check_slot("k", 1, Some(Duration::from_micros(333_332)))
        .await
        .unwrap();
    assert!(!short.is_allowed());
    let (fits, _) = remote
        .check_slot("k", 1, Some(Duration::from_micros(333_333)))
        .await
        .unwrap();
    assert!(fits.is_allowed(), "{fits:?}");
}

/// A live change between `3/s burst 2` (24-byte state, T = 333,333⅓ µs) and `3/999999us burst 1`
/// (8-byte state, T = 333,333 µs whole): the finer state is read up to the next whole µs
/// (refused where its exact TAT is a third of a µs ahead), the whole one exactly.
#[tokio::test(flavor = "current_thread")]
async fn a_live_change_reads_the_other_form_exactly_or_later() {
    let server = shared_database();
    let clock = ManualClock::new();
    let fine = TokenBucket::new("3/s burst 1".parse().unwrap()).unwrap();
    let whole = TokenBucket::new("3/999999us burst 1".parse().unwrap()).unwrap();
    let remote = client_time_limiter(&server, fine, &clock, "live:").await;
    let check = |offset: u64| {
        clock.set(at(BASE_MICROS + offset));
        remote.check("k")
    };
    assert!(check(0).await.unwrap().is_allowed());
    // TAT = +333,333⅓ µs, read as +333,334 under T = 333,333 µs, tolerance 333,333.
    remote.set_algorithm(whole).unwrap();
    assert!(!check(333_333).await.unwrap().is_allowed());
    assert!(check(333_334).await.unwrap().is_allowed());
    // Now the whole form: TAT = +666,667 exactly, read so by the finer rate.
    remote.set_algorithm(fine).unwrap();
    assert!(!check(666_666).await.unwrap().is_allowed());
    assert!(check(666_667).await.unwrap().is_allowed());
    // And back: the finer TAT +1,000,000⅓ is +1,000,001 µs whole.
    remote.set_algorithm(whole).unwrap();
    assert!(!check(1_000_000).await.unwrap().is_allowed());
    assert!(check(1_000_001).await.unwrap().is_allowed());
}

/// Leases hand out slots in whole µs: a token bucket whose `T` is not is refused with a typed
/// error that names the way out; a whole-µs lease on a key a finer limiter wrote reads its TAT
/// up to the next whole µs.
#[tokio::test(flavor = "current_thread")]
async fn leases_refuse_a_fine_rate_and_read_its_state_later() {
    let server = shared_database();
    let policy = FailurePolicy::FailClosed {
        retry_after: Duration::from_secs(1),
    };
    let thirty = TokenBucket::new("30000/s".parse().unwrap()).unwrap();
    let refused = RedisLimiter::builder(server.url(), thirty, policy.clone())
        .leased()
        .connect()
        .await;
    match refused {
        Err(error @ LeaseConfigError::IntervalNotWholeMicros { interval }) => {
            assert_eq!(interval, Duration::from_nanos(33_334));
            assert!(error.to_string().contains("RedisLimiter"), "{error}");
        }
        other => panic!("{other:?}"),
    }
    let clock = ManualClock::new();
    clock.set(at(BASE_MICROS));
    let fine = TokenBucket::new("3/s burst 1".parse().unwrap()).unwrap();
    let remote = client_time_limiter(&server, fine, &clock, "lease:").await;
    assert!(remote.check("k").await.unwrap().is_allowed());
    let whole = TokenBucket::new("3/999999us burst 1".parse().unwrap()).unwrap();
    let leased = RedisLimiter::builder(server.url(), whole, policy)
        .time(TimeSource::client(clock.clone()))
        .prefix("lease:")
        .leased()
        .connect()
        .await
        .unwrap();
    clock.set(at(BASE_MICROS + 333_333));
    assert!(!leased.check("k").await.unwrap().is_allowed());
    clock.set(at(BASE_MICROS + 333_334));
    assert!(leased.check("k").await.unwrap().is_allowed());
}

/// `7/s burst 7` (T = 142,857 1/7 µs) on the shared Redis Cluster, three keys in different slots:
/// each key's decisions are the exact model's (the same scripts, routed by the key's slot), a
/// reset of a limited key says so and leaves a full bucket, and one of an idle key says not.
#[tokio::test(flavor = "current_thread")]
async fn a_cluster_runs_a_fine_rate_and_resets_it() {
    let cluster = crate::redis_common::cluster::RedisCluster::shared();
    let clock = ManualClock::new();
    let quota: Quota = "7/s burst 7".parse().unwrap();
    let remote =
        client_time_limiter(cluster, TokenBucket::new(quota).unwrap(), &clock, "fine-cluster:").await;
    for key in ["a", "b", "c"] {
        let mut model = Exact::new(7, 1_000_000, 7, false);
        // Steps of 100 ms (between slots), weights 3 and 1; the key lives about a second of
        // real time after each write, longer than the test runs.
        for (step, weight) in (0..20u64).zip([3, 1, 1, 3, 1].into_iter().cycle()) {
            let now = BASE_MICROS + step * 100_000;
            clock.set(at(now));
            let answer = remote.check_n(key, weight).await.unwrap();
            assert_eq!(answer.decided_by, DecidedBy::Redis);
            assert_eq!(
                Shape::from(answer.decision),
                model.decide(now, weight),
                "{key} at step {step}"
            );
        }
        let now = BASE_MICROS + 20 * 100_000;
        clock.set(at(now));
        assert_eq!(
            remote.reset(key).await.unwrap(),
            model.lead_micros(now) > 0,
            "{key}"
        );
        assert_eq!(
            remote.peek_n(key, 0).await.unwrap().decision.remaining(),
            7,
            "{key}"
        );
        assert!(!remote.reset(key).await.unwrap(), "{key}");
    }
}
