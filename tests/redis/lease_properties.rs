//! The lease arithmetic against the exact reference models (`tests/reference/`): on random
//! traces of a moving client clock, three leased instances sharing one key (on a real
//! redis-server, each with its own connection, refreshes interleaving with the requests) admit
//! only what the model admits when fed every admission in time order: the token bucket never
//! more than `burst + (b - a) / T` in any `[a, b]`, the fixed window never more than its limit
//! in any window, the sliding window counter never past its limit at any admission (the exact
//! rational estimate of what was admitted).
//!
//! A key's TTL runs on the server's real clock while the trace's time is the client's, so a key
//! can expire, in real time, before its client time says: the traces keep clear of that (the
//! bucket's `T` is at least a minute and its weights below the burst, so a key that expired
//! early was already full enough for every request; the window's times never come within a
//! minute of a window's end), and a case takes far less than a minute.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use tollgate::distributed::{
    DecidedBy, FailurePolicy, LeasedLimiter, RedisAlgorithm, RedisLimiter, TimeSource,
};
use tollgate::{Clock, FixedWindow, ManualClock, Quota, SlidingWindow, Timestamp, TokenBucket};

use crate::redis_common::{shared_database, RedisUrl};
use crate::reference::fixed_window::FixedWindowModel;
use crate::reference::sliding_window::SlidingWindowModel;
use crate::reference::token_bucket::TokenBucketModel;

const SECOND: u64 = 1_000_000_000;
const START: u64 = 1_700_000_000 * SECOND;

#[derive(Clone, Debug)]
enum Kind {
    /// `T` and the burst.
    Bucket { interval: u64, burst: u64 },
    /// The window and its limit.
    Window { window: u64, limit: u64 },
    /// The sliding window counter's window and limit.
    Sliding { window: u64, limit: u64 },
}

/// One instant of the trace: how far the clock moves first, then requests of weight `weight`
/// from the instances in `from` (each a request, all at once).
#[derive(Clone, Debug)]
struct Step {
    advance: u64,
    from: Vec<usize>,
    weight: u64,
}

#[derive(Clone, Debug)]
struct Case {
    kind: Kind,
    max_lease: u64,
    steps: Vec<Step>,
}

fn case() -> impl Strategy<Value = Case> {
    let kind = prop_oneof![
        (prop::sample::select(vec![60, 90, 3_600]), 2..=12u64).prop_map(|(interval, burst)| Kind::Bucket {
            interval: interval * SECOND,
            burst
        }),
        (prop::sample::select(vec![3_600, 86_400]), 1..=20u64).prop_map(|(window, limit)| Kind::Window {
            window: window * SECOND,
            limit
        }),
        (prop::sample::select(vec![3_600, 86_400]), 1..=20u64).prop_map(|(window, limit)| Kind::Sliding {
            window: window * SECOND,
            limit
        }),
    ];
    (kind, 1..=8u64).prop_flat_map(|(kind, max_lease)| {
        let (span, heaviest) = match kind {
            Kind::Bucket { interval, burst } => (2 * interval, burst - 1),
            Kind::Window { window, limit } | Kind::Sliding { window, limit } => (window / 8, limit),
        };
        let step = (
            0..=span / 1_000,
            prop::collection::vec(0..3usize, 1..=3),
            0..=heaviest,
        )
            .prop_map(|(advance, from, weight)| Step {
                advance: advance * 1_000,
                from,
                weight,
            });
        prop::collection::vec(step, 20..60).prop_map(move |steps| Case {
            kind: kind.clone(),
            max_lease,
            steps,
        })
    })
}

fn algorithm(kind: &Kind) -> RedisAlgorithm {
    match *kind {
        Kind::Bucket { interval, burst } => {
            let quota = Quota::new(1, Duration::from_nanos(interval))
                .unwrap()
                .with_burst(burst)
                .unwrap();
            TokenBucket::new(quota).unwrap().into()
        }
        Kind::Window { window, limit } => {
            let quota = Quota::new(limit, Duration::from_nanos(window)).unwrap();
            FixedWindow::new(quota).unwrap().into()
        }
        Kind::Sliding { window, limit } => {
            let quota = Quota::new(limit, Duration::from_nanos(window)).unwrap();
            SlidingWindow::new(quota).unwrap().into()
        }
    }
}

/// The next time of the trace: `advance` later, moved to the next window's start if it falls
/// within a minute of a window's end.
fn next_time(kind: &Kind, now: u64, advance: u64) -> u64 {
    let next = now + advance;
    match *kind {
        Kind::Window { window, .. } | Kind::Sliding { window, .. }
            if window - next % window < 60 * SECOND =>
        {
            next - next % window + window
        }
        _ => next,
    }
}

/// Runs `case` on three leased instances (prefix `prefix`): every admission, as (time, weight).
async fn admissions(server: &impl RedisUrl, prefix: &str, case: &Case) -> Vec<(u64, u64)> {
    let clock = ManualClock::starting_at(Timestamp::from_nanos(START));
    let mut limiters = Vec::new();
    for _ in 0..3 {
        let limiter = RedisLimiter::builder(
            server.url(),
            algorithm(&case.kind),
            FailurePolicy::FailClosed {
                retry_after: Duration::from_secs(1),
            },
        )
        .time(TimeSource::client(clock.clone()))
        .deadline(Duration::from_secs(5))
        .prefix(prefix)
        .leased()
        .max_lease(case.max_lease)
        .connect()
        .await
        .unwrap();
        limiters.push(Arc::new(limiter));
    }
    let mut now = START;
    let mut admitted = Vec::new();
    for step in &case.steps {
        now = next_time(&case.kind, now, step.advance);
        clock.set(Timestamp::from_nanos(now));
        let requests: Vec<_> = step
            .from
            .iter()
            .map(|&instance| {
                let limiter: Arc<LeasedLimiter> = Arc::clone(&limiters[instance]);
                let weight = step.weight;
                tokio::spawn(async move { limiter.check_n("k", weight).await.unwrap() })
            })
            .collect();
        for request in requests {
            let answer = request.await.unwrap();
            assert!(
                matches!(answer.decided_by, DecidedBy::Redis | DecidedBy::Lease),
                "{answer:?}"
            );
            if answer.is_allowed() && step.weight > 0 {
                admitted.push((now, step.weight));
            }
        }
        assert_eq!(clock.now().as_nanos(), now);
    }
    admitted
}

/// Every admission of three leased instances is one the exact reference model admits.
#[test]
fn leased_instances_admit_only_what_the_exact_model_admits() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = shared_database();
    let mut runner = TestRunner::new(Config {
        cases: 48,
        failure_persistence: None,
        ..Config::default()
    });
    let number = std::cell::Cell::new(0);
    let total = std::cell::Cell::new(0);
    let result = runner.run(&case(), |case| {
        number.set(number.get() + 1);
        let prefix = format!("property:{}:", number.get());
        let admitted = runtime.block_on(admissions(&server, &prefix, &case));
        total.set(total.get() + admitted.len());
        match case.kind {
            Kind::Bucket { interval, burst } => {
                let mut model = TokenBucketModel::new(interval, burst);
                for &(at, weight) in &admitted {
                    prop_assert!(model.decide(at, weight).allowed, "{weight} at {at}: {admitted:?}");
                }
            }
            Kind::Window { window, limit } => {
                let mut model = FixedWindowModel::new(window, limit);
                for &(at, weight) in &admitted {
                    prop_assert!(model.decide(at, weight).allowed, "{weight} at {at}: {admitted:?}");
                }
            }
            Kind::Sliding { window, limit } => {
                let mut model = SlidingWindowModel::new(window, limit);
                for &(at, weight) in &admitted {
                    prop_assert!(model.decide(at, weight).allowed, "{weight} at {at}: {admitted:?}");
                }
            }
        }
        Ok(())
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
    // The traces admit plenty: the property is not met by refusing everything.
    assert!(total.get() > 500, "{} admissions in all", total.get());
}
