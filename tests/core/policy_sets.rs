//! `PolicySet`: several policies per request, all or nothing. Every decision of a set of two
//! or three policies (any algorithms, keyed and global) equals the composition of their
//! reference models (each asked in order, the first refusal answered, the admissions before it
//! thrown away); threads racing on a set at a frozen clock never pass one policy's last unit
//! twice, and leave every policy holding exactly the units of the requests admitted.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use proptest::prelude::*;
use tollgate::policy_set::{PolicySetError, MAX_POLICIES};
use tollgate::{
    DirectLimiter, FixedWindow, KeyedLimiter, KeyedLogLimiter, ManualClock, Outcome, PolicySet, Quota,
    SlidingLog, SlidingWindow, Timestamp, TokenBucket,
};

use crate::reference::fixed_window::FixedWindowModel;
use crate::reference::sliding_log::SlidingLogModel;
use crate::reference::sliding_window::SlidingWindowModel;
use crate::reference::token_bucket::TokenBucketModel;
use crate::reference::trace::{ops, start};
use crate::reference::Expected;

/// One policy's model, whatever its algorithm.
#[derive(Clone, Debug)]
enum Model {
    Bucket(TokenBucketModel),
    Fixed(FixedWindowModel),
    Sliding(SlidingWindowModel),
    Log(SlidingLogModel),
}

impl Model {
    fn decide(&mut self, now: u64, cost: u64) -> Expected {
        match self {
            Model::Bucket(model) => model.decide(now, cost),
            Model::Fixed(model) => model.decide(now, cost),
            Model::Sliding(model) => model.decide(now, cost),
            Model::Log(model) => model.decide(now, cost),
        }
    }
}

/// A policy of the trace's set: its algorithm (0 bucket, 1 fixed, 2 sliding, 3 log), its
/// limit, its window (ms), and whether it is keyed (else one global limiter).
type Spec = (u8, u64, u64, bool);

fn spec() -> impl Strategy<Value = Spec> {
    (
        0..4u8,
        1..=12u64,
        prop_oneof![Just(1u64), Just(7), Just(1_000)],
        any::<bool>(),
    )
}

/// The set's policies, and their models.
fn build(specs: &[Spec], clock: &ManualClock) -> (PolicySet<u64>, Vec<Model>) {
    let mut set: Option<PolicySet<u64>> = None;
    let mut models = Vec::new();
    for (index, &(algorithm, limit, window_ms, keyed)) in specs.iter().enumerate() {
        let window = Duration::from_millis(window_ms);
        let quota = Quota::new(limit, window).expect("valid");
        let w = window_ms * 1_000_000;
        let name = format!("p{index}");
        macro_rules! add {
            ($algorithm:expr) => {{
                let algorithm = $algorithm;
                match keyed {
                    true => {
                        let limiter = KeyedLimiter::with_clock(algorithm, 8, clock.clone()).expect("valid");
                        set = Some(match set.take() {
                            None => PolicySet::new(&name, limiter).expect("a name"),
                            Some(set) => set.and(&name, limiter).expect("room"),
                        });
                    }
                    false => {
                        let limiter = DirectLimiter::with_clock(algorithm, clock.clone());
                        set = Some(match set.take() {
                            None => PolicySet::new(&name, limiter).expect("a name"),
                            Some(set) => set.and(&name, limiter).expect("room"),
                        });
                    }
                }
            }};
        }
        match algorithm {
            0 => {
                let bucket = TokenBucket::new(quota).expect("valid");
                let t = u64::try_from(bucket.emission_interval().as_nanos()).expect("fits");
                add!(bucket);
                models.push(Model::Bucket(TokenBucketModel::new(t, limit)));
            }
            1 => {
                add!(FixedWindow::new(quota).expect("valid"));
                models.push(Model::Fixed(FixedWindowModel::new(w, limit)));
            }
            2 => {
                add!(SlidingWindow::new(quota).expect("valid"));
                models.push(Model::Sliding(SlidingWindowModel::new(w, limit)));
            }
            _ => {
                let log = SlidingLog::new(quota).expect("valid");
                let limiter = KeyedLogLimiter::with_clock(log, 8, clock.clone()).expect("valid");
                set = Some(match set.take() {
                    None => PolicySet::new(&name, limiter).expect("a name"),
                    Some(set) => set.and(&name, limiter).expect("room"),
                });
                models.push(Model::Log(SlidingLogModel::new(w, limit)));
            }
        }
    }
    (set.expect("at least one policy"), models)
}

/// What the models answer: each asked in order on a copy, up to the first refusal; the copies
/// are kept only when every one admitted.
fn composed(models: &mut Vec<Model>, now: u64, cost: u64) -> Vec<Option<Expected>> {
    let mut tried = models.clone();
    let mut answers = vec![None; models.len()];
    for (index, model) in tried.iter_mut().enumerate() {
        let answer = model.decide(now, cost);
        answers[index] = Some(answer);
        if !answer.allowed {
            return answers;
        }
    }
    *models = tried;
    answers
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Each policy's decision equals its model's, in the composition: the set admits exactly
    /// when every model admits, a refusal is the first refusing model's, and the admissions
    /// before a refusal leave no trace (the models never count them).
    #[test]
    fn a_set_decides_as_its_models_composed(
        specs in proptest::collection::vec(spec(), 2..=3),
        start in start(),
        ops in ops(48),
    ) {
        let clock = ManualClock::new();
        let (set, mut models) = build(&specs, &clock);
        let capacity = specs.iter().map(|spec| spec.1).min().expect("policies");
        prop_assert_eq!(set.capacity(), capacity);
        let mut now = start.at(1_000_000);
        for (i, op) in ops.iter().enumerate() {
            if i > 0 {
                now = op.forward(now, 1_000_000);
            }
            let cost = op.cost(capacity);
            let at = Timestamp::from_nanos(now);
            let peeked = set.peek_n_at(&3, cost, at).expect("fits");
            let got = set.check_n_at(&3, cost, at).expect("fits");
            let expected = composed(&mut models, now, cost);
            let answers: Vec<Option<Expected>> = got.policies().map(|d| d.map(|d| Expected::of(&d))).collect();
            prop_assert_eq!(&answers, &expected, "request {} at t={} weight {}", i, now, cost);
            prop_assert_eq!(peeked.is_allowed(), got.is_allowed());
            let allowed = expected.iter().all(|answer| answer.is_some_and(|a| a.allowed));
            prop_assert_eq!(got.is_allowed(), allowed);
            let reporting = got.of(got.reporting()).expect("the reporting policy was asked");
            match allowed {
                // The nearest to refusal: the fewest remaining, the first of a tie.
                true => {
                    let fewest = answers.iter().flatten().map(|a| a.remaining).min().expect("policies");
                    prop_assert_eq!(reporting.remaining(), fewest);
                    prop_assert!(answers[..got.reporting()].iter().flatten().all(|a| a.remaining > fewest));
                }
                // The refusing one, the last asked.
                false => {
                    prop_assert!(!reporting.is_allowed());
                    prop_assert!(answers[got.reporting() + 1..].iter().all(Option::is_none));
                }
            }
            prop_assert_eq!(Expected::of(&got.decision()), Expected::of(&reporting));
        }
    }
}

/// Threads racing on one set at a frozen clock: per key a fixed window of 150 and a log of 200,
/// and a global fixed window of 500, over 4 keys and 8 threads of 400 requests each. No policy
/// ever admits past its limit (two requests never both pass its last unit), and once the threads
/// are done every policy holds exactly the units of the requests the set admitted: each
/// refusal's units went back to the policies before it.
#[test]
fn racing_requests_never_share_a_last_unit_and_leave_exact_counts() {
    const THREADS: usize = 8;
    const CALLS: usize = 400;
    let at = Timestamp::from_secs(1_700_000_000);
    for _round in 0..20 {
        let clock = ManualClock::starting_at(at);
        let window = |limit: u64| FixedWindow::new(Quota::per_minute(limit).expect("valid")).expect("valid");
        let per_key =
            Arc::new(KeyedLimiter::<u64, _, _>::with_clock(window(150), 16, clock.clone()).expect("valid"));
        let log = Arc::new(
            KeyedLogLimiter::<u64, _>::with_clock(
                SlidingLog::new(Quota::per_minute(200).expect("valid")).expect("valid"),
                16,
                clock.clone(),
            )
            .expect("valid"),
        );
        let global = Arc::new(DirectLimiter::with_clock(window(500), clock.clone()));
        let set = PolicySet::new("per-key", Arc::clone(&per_key))
            .and_then(|set| set.and("log", Arc::clone(&log)))
            .and_then(|set| set.and("global", Arc::clone(&global)))
            .expect("three policies");
        let set = Arc::new(set);
        let barrier = Arc::new(Barrier::new(THREADS));
        let workers: Vec<_> = (0..THREADS)
            .map(|thread| {
                let (set, barrier) = (Arc::clone(&set), Arc::clone(&barrier));
                thread::spawn(move || {
                    let mut admitted = [0u64; 4];
                    barrier.wait();
                    for call in 0..CALLS {
                        let key = ((thread + call) % 4) as u64;
                        let decision = set.check(&key);
                        assert_ne!(decision.outcome(), Outcome::TableFull);
                        if decision.is_allowed() {
                            admitted[key as usize] += 1;
                        }
                    }
                    admitted
                })
            })
            .collect();
        let mut per_key_admitted = [0u64; 4];
        for worker in workers {
            for (total, admitted) in per_key_admitted.iter_mut().zip(worker.join().expect("no panic")) {
                *total += admitted;
            }
        }
        let total: u64 = per_key_admitted.iter().sum();
        assert!(total <= 500, "the global window admitted {total}");
        let left = |decision: tollgate::Decision| decision.remaining();
        assert_eq!(
            left(global.peek_n_at(0, at).expect("fits")),
            500 - total,
            "global count"
        );
        for (key, &admitted) in per_key_admitted.iter().enumerate() {
            let key = key as u64;
            assert!(admitted <= 150, "key {key}: {admitted} past its 150");
            assert_eq!(
                left(per_key.peek_n_at(&key, 0, at).expect("fits")),
                150 - admitted,
                "key {key}'s window"
            );
            assert_eq!(
                left(log.peek_n_at(&key, 0, at).expect("fits")),
                200 - admitted,
                "key {key}'s log"
            );
        }
        // 4 keys of 150 ask for more than the global 500 allows, and every thread asks 400
        // times: the global window runs out (a request refused for units held a moment by
        // another that is then refused is retried by the calls that follow).
        assert_eq!(total, 500, "admitted {total} of the global 500");
    }
}

/// Building a set: a name once, at most `MAX_POLICIES` policies, each refusal a typed error.
#[test]
fn a_set_refuses_a_name_twice_and_a_ninth_policy() {
    let clock = ManualClock::new();
    let bucket = || {
        DirectLimiter::with_clock(
            TokenBucket::new("1/s".parse().expect("valid")).expect("valid"),
            clock.clone(),
        )
    };
    let set = PolicySet::<str>::new("a", bucket()).expect("a name");
    let error = set.and("a", bucket()).expect_err("a name twice");
    assert_eq!(error, PolicySetError::DuplicateName { name: "a".to_owned() });
    assert!(
        error
            .to_string()
            .contains("give each policy of a set its own name"),
        "{error}"
    );
    let mut set = PolicySet::<str>::new("p0", bucket()).expect("a name");
    for index in 1..MAX_POLICIES {
        set = set.and(&format!("p{index}"), bucket()).expect("room");
    }
    assert_eq!(set.len(), MAX_POLICIES);
    assert_eq!(
        set.and("more", bucket()).expect_err("full"),
        PolicySetError::TooMany { max: MAX_POLICIES }
    );
    let set = PolicySet::<str>::new("a", bucket()).expect("a name");
    assert_eq!(
        set.and("", bucket()).expect_err("empty"),
        PolicySetError::InvalidName { name: String::new() }
    );
    let error = PolicySet::<str>::new("caf\u{e9}", bucket()).expect_err("not ASCII");
    assert!(error.to_string().contains("printable ASCII"), "{error}");
    let heavy = PolicySet::<str>::new("small", bucket()).expect("a name");
    assert_eq!(heavy.check_n("k", 2).expect_err("too heavy").capacity, 1);
}
