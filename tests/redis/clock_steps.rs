//! A client clock that steps back never admits more through Redis: for every algorithm, what a
//! `RedisLimiter` on a client's time admits, replayed on a clock that never goes back (the
//! running maximum of the times its counted decisions were made at, refusals included), is
//! admitted there too by the exact reference model (`tests/reference/`). The same property as
//! `tests/core/clock_steps.rs`, against one real `redis-server`, with fewer cases.
//!
//! Times and parameters are whole seconds (bucket intervals whole microseconds), so a key lives
//! at least a second of real time after a write (its TTL is client time, counted on the
//! server's clock: `docs/distributed.md`), longer than a case runs: no key expires while its
//! state still matters on the test's clock. A key that expires is forgotten, as a keyed
//! table's reclaimed key is: the documented exception.

use std::time::Duration;

use crate::redis_common::{client_time_limiter, RedisServer};
use crate::reference::fixed_window::FixedWindowModel;
use crate::reference::shaper::ShaperModel;
use crate::reference::sliding_log::SlidingLogModel;
use crate::reference::sliding_window::SlidingWindowModel;
use crate::reference::token_bucket::TokenBucketModel;
use crate::reference::trace::{ops, Op};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use tollgate::distributed::{DecidedBy, RedisAlgorithm};
use tollgate::{
    FixedWindow, LeakyBucket, ManualClock, Quota, SlidingLog, SlidingWindow, Timestamp, TokenBucket,
};

const SECOND: u64 = 1_000_000_000;
/// Where every trace starts: 1_700_000_000 s since the epoch, in ns.
const BASE: u64 = 1_700_000_000 * SECOND;

#[derive(Clone, Copy, Debug)]
enum Kind {
    Token,
    Leaky,
    Fixed,
    Sliding,
    /// A packed log (limit up to 256).
    Log,
    /// A list log (limit above 256).
    ListLog,
}

/// One case: the algorithm, its count, its period in seconds, a bucket's burst, the trace.
#[derive(Clone, Debug)]
struct Case {
    kind: Kind,
    count: u64,
    seconds: u64,
    burst: u64,
    ops: Vec<Op>,
}

fn case() -> impl Strategy<Value = Case> {
    let kind = prop_oneof![
        Just(Kind::Token),
        Just(Kind::Leaky),
        Just(Kind::Fixed),
        Just(Kind::Sliding),
        Just(Kind::Log),
        Just(Kind::ListLog),
    ];
    // Bucket counts divide a second into whole microseconds.
    let count = prop_oneof![Just(1u64), Just(2), Just(4), Just(5), Just(8), Just(10)];
    (kind, count, 2..=20u64, 1..=6u64, 257..=300u64, ops(48)).prop_map(
        |(kind, count, seconds, burst, large, ops)| Case {
            kind,
            count: match kind {
                Kind::ListLog => large,
                _ => count,
            },
            seconds,
            burst,
            ops,
        },
    )
}

/// An exact model of a case's algorithm, asked whether it admits a request.
enum Model {
    Token(TokenBucketModel),
    Leaky(ShaperModel),
    Fixed(FixedWindowModel),
    Sliding(SlidingWindowModel),
    Log(SlidingLogModel),
}

impl Model {
    fn admits(&mut self, now: u64, cost: u64) -> bool {
        match self {
            Model::Token(model) => model.decide(now, cost).allowed,
            Model::Leaky(model) => model.decide(now, cost).allowed,
            Model::Fixed(model) => model.decide(now, cost).allowed,
            Model::Sliding(model) => model.admit(now, cost),
            Model::Log(model) => model.decide(now, cost).allowed,
        }
    }
}

/// The algorithm for Redis, its model, and the trace's time unit (interval or window, ns).
fn build(case: &Case) -> (RedisAlgorithm, Model, u64) {
    let period = Duration::from_secs(case.seconds);
    let quota = Quota::new(case.count, period).unwrap();
    let window = case.seconds * SECOND;
    let interval = window / case.count;
    match case.kind {
        Kind::Token => {
            let quota = quota.with_burst(case.burst).unwrap();
            let model = Model::Token(TokenBucketModel::new(interval, case.burst));
            (TokenBucket::new(quota).unwrap().into(), model, interval)
        }
        Kind::Leaky => {
            let quota = quota.with_burst(case.burst).unwrap();
            let model = Model::Leaky(ShaperModel::new(interval, case.burst));
            (LeakyBucket::new(quota).unwrap().into(), model, interval)
        }
        Kind::Fixed => {
            let model = Model::Fixed(FixedWindowModel::new(window, case.count));
            (FixedWindow::new(quota).unwrap().into(), model, window)
        }
        Kind::Sliding => {
            let model = Model::Sliding(SlidingWindowModel::new(window, case.count));
            (SlidingWindow::new(quota).unwrap().into(), model, window)
        }
        Kind::Log | Kind::ListLog => {
            let model = Model::Log(SlidingLogModel::new(window, case.count));
            (SlidingLog::new(quota).unwrap().into(), model, window)
        }
    }
}

/// Runs one case on `server` under its own prefix: returns the admitted requests at the running
/// maximum of the counted times, and how many counted requests were refused.
async fn admitted_on_running_max(
    server: &RedisServer,
    number: usize,
    case: &Case,
) -> Result<(Vec<(u64, u64)>, usize), TestCaseError> {
    let (algorithm, _, unit) = build(case);
    let capacity = algorithm.capacity();
    let clock = ManualClock::new();
    let remote = client_time_limiter(server, algorithm, &clock, &format!("steps{number}:")).await;
    let mut now = BASE;
    // The latest time a counted decision was made at (none yet).
    let mut latest = 0;
    let (mut admitted, mut refused) = (Vec::new(), 0);
    for (i, op) in case.ops.iter().enumerate() {
        if i > 0 {
            // Whole seconds: see the module's docs.
            now = op.any_direction(now, unit) / SECOND * SECOND;
        }
        let cost = op.cost(capacity);
        // One request in eight is a peek (at this time or 40 units on): it counts nothing.
        if op.raw() % 8 == 1 {
            let at = match op.raw() % 2 {
                0 => now,
                _ => now + 40 * unit / SECOND * SECOND,
            };
            clock.set(Timestamp::from_nanos(at));
            let peeked = remote.peek_n("k", cost).await.unwrap();
            prop_assert_eq!(peeked.decided_by, DecidedBy::Redis);
            continue;
        }
        clock.set(Timestamp::from_nanos(now));
        let decided = remote.check_n("k", cost).await.unwrap();
        prop_assert_eq!(decided.decided_by, DecidedBy::Redis);
        // A weightless request counts nothing: it is no decision of the running maximum.
        if cost == 0 {
            continue;
        }
        latest = latest.max(now);
        if decided.is_allowed() {
            admitted.push((latest, cost));
        } else {
            refused += 1;
        }
    }
    Ok((admitted, refused))
}

/// Redis, on random traces with backward steps, admits only what the model admits on the
/// running maximum of the times shown.
#[test]
fn redis_admits_only_what_a_clock_that_never_goes_back_admits() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = RedisServer::start();
    let mut runner = TestRunner::new(Config {
        cases: 160,
        failure_persistence: None,
        ..Config::default()
    });
    let number = std::cell::Cell::new(0);
    let refusals = std::cell::Cell::new(0);
    let result = runner.run(&case(), |case| {
        number.set(number.get() + 1);
        let (admitted, refused) = runtime.block_on(admitted_on_running_max(&server, number.get(), &case))?;
        refusals.set(refusals.get() + refused);
        let (_, mut model, _) = build(&case);
        for (i, &(at, cost)) in admitted.iter().enumerate() {
            prop_assert!(
                model.admits(at, cost),
                "{:?}: admission {} of {:?} (at the running maximum {}, weight {}) is refused by the model",
                case.kind,
                i,
                admitted,
                at,
                cost
            );
        }
        Ok(())
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
    // The traces meet refusals, which are what must move the time decisions are made at.
    let refusals = refusals.get();
    assert!(refusals > 100, "{refusals} refusals in all");
}

/// A list log (limit above 256) keeps a client's latest refused time as a marker at its end, not
/// a unit: a packed log's quota reading that list (the quota crossed 256) counts its units
/// alone and decides at the marker's time. 200 units at `t`, 100 refused at `t + 10 s` (the
/// marker); then at 250 per minute, asked at `t + 5 s` (the client clock stepped back): 50 more
/// pass, decided and recorded at `t + 10 s`, and the next unit is refused. Read as a unit, the
/// marker would have refused the 50; the units at `t + 10 s` still count at `t + 65 s`.
#[test]
fn a_list_logs_latest_refused_time_is_a_marker_the_packed_log_reads() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let server = RedisServer::start();
        let clock = ManualClock::new();
        let at = |seconds: u64| Timestamp::from_nanos(BASE + seconds * SECOND);
        let minute = Duration::from_secs(60);
        let list = SlidingLog::new(Quota::new(257, minute).unwrap()).unwrap();
        let packed = SlidingLog::new(Quota::new(250, minute).unwrap()).unwrap();
        let list = client_time_limiter(&server, list, &clock, "cross:").await;
        let packed = client_time_limiter(&server, packed, &clock, "cross:").await;
        clock.set(at(0));
        assert!(list.check_n("k", 200).await.unwrap().is_allowed());
        clock.set(at(10));
        assert!(!list.check_n("k", 100).await.unwrap().is_allowed());
        clock.set(at(5));
        let fifty = packed.check_n("k", 50).await.unwrap();
        assert_eq!(fifty.decided_by, DecidedBy::Redis);
        assert!(fifty.is_allowed(), "{fifty:?}");
        // Recorded at t + 10 s: it leaves the window at t + 70 s, 65 s after now.
        assert_eq!(fifty.decision.reset_after(), Duration::from_secs(65));
        assert!(!packed.check("k").await.unwrap().is_allowed());
        // At t + 65 s the 200 units of t have left; the 50 of t + 10 s have not.
        clock.set(at(65));
        assert!(packed.check_n("k", 200).await.unwrap().is_allowed());
        assert!(!packed.check("k").await.unwrap().is_allowed());
    });
}
