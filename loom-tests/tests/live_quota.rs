//! loom models of a decision racing a live quota change (`tollgate::Live`): each attempt of the
//! compare-and-swap loop decides on one snapshot of the parameters (`src/sync/snapshot.rs`,
//! whose loom stand-in is a `loom::sync::Mutex<Arc<_>>`), so a decision is made wholly under the
//! old quota or wholly under the new one, and stores that quota's state.
//!
//! The bucket: `1/s burst 2` (T = 1 s, the TAT may run 2 s ahead) changed to `2/s burst 1`
//! (T = 0.5 s, 0.5 s ahead), holding one unit admitted at 0 (TAT 1 s). A request of weight 1 at
//! 0 is admitted under the old quota (TAT 2 s, nothing left) and refused under the new one
//! (retry after 1 s). Read field by field, a decision can mix them: the new interval with the
//! old burst (2 units of 0.5 s: 1 s ahead) refuses it with a retry-after of 0.5 s, which is
//! neither quota's decision.
//!
//! Invariant: in every execution, every decision and the final state are those of some
//! sequential order of the decisions, each decided wholly by the pure algorithm of the old quota
//! or of the new one (the replays below). A decision in flight across the change may use either
//! (it reads its snapshot when its attempt starts, and its compare-and-swap may land after
//! another decision made under the new quota), never a mix. The broken twin (`TwoFields`) keeps the interval and the
//! burst in two loom atomics, read one after the other by each decision and written one after
//! the other by the change; loom must find the mix.
//!
//! Every party runs on a spawned thread (loom 0.7.3 does not run a spawned thread ahead of the
//! main thread's next access when the spawned one starts with a load: tokio-rs/loom#392).
//!
//! Compiled only under `--cfg tollgate_loom` (the attribute below comes after these docs so
//! that the crate keeps them, and `missing_docs` stays quiet, when the cfg strips it).
#![cfg(tollgate_loom)]

use std::time::Duration;

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;
use loom_tests::{assert_violation, ms};
use tollgate::algorithm::{Algorithm, Transition, FRESH_STATE};
use tollgate::{
    Decision, DirectLimiter, FixedWindow, KeyedLimiter, Live, ManualClock, Quota, Timestamp, TokenBucket,
};

/// What the invariant panics with, so that the twin is rejected on it alone.
const LIVE_VIOLATION: &str = "VIOLATION (live quota)";

const SECOND: u64 = 1_000_000_000;

fn bucket(interval_ns: u64, burst: u64) -> TokenBucket {
    let quota = Quota::new(1, Duration::from_nanos(interval_ns))
        .and_then(|quota| quota.with_burst(burst))
        .expect("a valid quota");
    TokenBucket::new(quota).expect("a valid bucket")
}

fn old() -> TokenBucket {
    bucket(SECOND, 2)
}

fn new() -> TokenBucket {
    bucket(SECOND / 2, 1)
}

/// One party of a model: a decision of weight 1 at `now`, or the change to the new quota.
#[derive(Clone, Copy, Debug)]
enum Party {
    Decide(Timestamp),
    Change,
}

/// Every outcome a sequential order of the decisions among `parties` gives from `state`, each
/// decided wholly under `old` or wholly under `new` (a decision in flight across the change may
/// use either: it reads its snapshot when its attempt starts, and its compare-and-swap may land
/// after a decision made under the new quota): each decision, by party, and the final state.
fn sequential<A: Algorithm>(
    old: &A,
    new: &A,
    state: u64,
    parties: &[Party],
) -> Vec<(Vec<Option<Decision>>, u64)> {
    fn orders(n: usize) -> Vec<Vec<usize>> {
        if n == 0 {
            return vec![vec![]];
        }
        orders(n - 1)
            .into_iter()
            .flat_map(|order| {
                (0..n).map(move |at| {
                    let mut order = order.clone();
                    order.insert(at, n - 1);
                    order
                })
            })
            .collect()
    }
    let deciders: Vec<(usize, Timestamp)> = parties
        .iter()
        .enumerate()
        .filter_map(|(index, party)| match party {
            Party::Decide(now) => Some((index, *now)),
            Party::Change => None,
        })
        .collect();
    let mut outcomes = Vec::new();
    for order in orders(deciders.len()) {
        for quotas in 0..1u32 << deciders.len() {
            let mut state = state;
            let mut decisions = vec![None; parties.len()];
            for (nth, &decider) in order.iter().enumerate() {
                let (party, now) = deciders[decider];
                let running = if quotas >> nth & 1 == 1 { new } else { old };
                let Transition {
                    state: next,
                    decision,
                } = running.decide(state, now, 1);
                decisions[party] = Some(decision);
                state = next;
            }
            outcomes.push((decisions, state));
        }
    }
    outcomes
}

/// What the limiter under test offers a model: decide, change, and read its state word.
trait Subject: Send + Sync + 'static {
    fn decide(&self, now: Timestamp) -> Decision;
    fn change(&self);
    fn state(&self) -> u64;
}

/// The shipped limiter: `DirectLimiter<Live<TokenBucket>>`.
impl Subject for DirectLimiter<Live<TokenBucket>, ManualClock> {
    fn decide(&self, now: Timestamp) -> Decision {
        self.check_at(now)
    }

    fn change(&self) {
        self.algorithm()
            .replace(new())
            .expect("a bucket takes every quota live");
    }

    fn state(&self) -> u64 {
        self.raw_state()
    }
}

/// The broken twin: the bucket's interval and burst in two atomics, each decision reading one
/// and then the other, the change writing one and then the other.
struct TwoFields {
    interval: AtomicU64,
    burst: AtomicU64,
}

impl Algorithm for TwoFields {
    fn capacity(&self) -> u64 {
        // SeqCst: what the twin gets wrong is the two reads, not an ordering.
        self.burst.load(Ordering::SeqCst)
    }

    fn decide(&self, state: u64, now: Timestamp, cost: u64) -> Transition {
        let interval = self.interval.load(Ordering::SeqCst);
        let burst = self.burst.load(Ordering::SeqCst);
        bucket(interval, burst).decide(state, now, cost)
    }

    fn is_idle(&self, state: u64, now: Timestamp) -> bool {
        state <= now.as_nanos()
    }
}

impl Subject for DirectLimiter<TwoFields, ManualClock> {
    fn decide(&self, now: Timestamp) -> Decision {
        self.check_at(now)
    }

    fn change(&self) {
        self.algorithm().interval.store(SECOND / 2, Ordering::SeqCst);
        self.algorithm().burst.store(1, Ordering::SeqCst);
    }

    fn state(&self) -> u64 {
        self.raw_state()
    }
}

/// Runs `parties` on spawned threads against `limiter` (after one admission at 0), and asserts
/// the invariant.
fn run<S: Subject>(limiter: S, parties: &'static [Party]) {
    let limiter = Arc::new(limiter);
    assert!(limiter.decide(ms(0)).is_allowed(), "the setup's admission");
    let start = limiter.state();
    let handles: Vec<_> = parties
        .iter()
        .map(|&party| {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || match party {
                Party::Decide(now) => Some(limiter.decide(now)),
                Party::Change => {
                    limiter.change();
                    None
                }
            })
        })
        .collect();
    let decisions: Vec<Option<Decision>> = handles.into_iter().map(|h| h.join().expect("no panic")).collect();
    let outcome = (decisions, limiter.state());
    let orders = sequential(&old(), &new(), start, parties);
    assert!(
        orders.contains(&outcome),
        "{LIVE_VIOLATION}: {outcome:?} is no sequential order's: {orders:?}"
    );
}

const DECIDE_AND_CHANGE: &[Party] = &[Party::Decide(ms(0)), Party::Change];
const TWO_DECISIONS_AND_CHANGE: &[Party] = &[Party::Decide(ms(0)), Party::Decide(ms(250)), Party::Change];

fn shipped() -> DirectLimiter<Live<TokenBucket>, ManualClock> {
    DirectLimiter::with_clock(Live::new(old()), ManualClock::new())
}

fn twin() -> DirectLimiter<TwoFields, ManualClock> {
    let twin = TwoFields {
        interval: AtomicU64::new(SECOND),
        burst: AtomicU64::new(2),
    };
    DirectLimiter::with_clock(twin, ManualClock::new())
}

/// The mix the model is built to catch (the new interval with the old burst: refused, retry
/// after 0.5 s) is neither quota's decision.
#[test]
fn the_mixed_decision_is_no_sequential_orders() {
    loom::model(|| {
        let orders = sequential(&old(), &new(), SECOND, DECIDE_AND_CHANGE);
        let mixed = bucket(SECOND / 2, 2).decide(SECOND, ms(0), 1);
        assert!(!mixed.decision.is_allowed());
        assert_eq!(mixed.decision.retry_after(), Duration::from_millis(500));
        assert!(orders
            .iter()
            .all(|(decisions, state)| decisions[0] != Some(mixed.decision) || *state != mixed.state));
        assert_eq!(bucket(SECOND, 2).decide(FRESH_STATE, ms(0), 1).state, SECOND);
    });
}

/// Invariant: the decision is wholly the old quota's or wholly the new one's.
#[test]
fn a_decision_racing_a_change_is_one_quotas() {
    loom::model(|| run(shipped(), DECIDE_AND_CHANGE));
}

/// Two decisions and a change: an attempt that fails its compare-and-swap decides again on a
/// snapshot loaded again, which may be the new quota's.
#[test]
fn two_decisions_racing_a_change_are_some_sequential_orders() {
    loom::model(|| run(shipped(), TWO_DECISIONS_AND_CHANGE));
}

/// The twin: two fields, read one at a time. loom must find the mix.
#[test]
fn parameters_read_field_by_field_twin_is_rejected() {
    assert_violation(LIVE_VIOLATION, "the two-field parameters", || {
        loom::model(|| run(twin(), DECIDE_AND_CHANGE));
    });
}

/// A keyed table of live fixed windows: the limit of 2 lowered to 1 while a key holding one
/// unit asks for another; the key's slot is updated with the quota its attempt read.
#[test]
fn a_keyed_decision_racing_a_change_is_one_quotas() {
    loom::model(|| {
        let window = |limit| FixedWindow::new(Quota::per_second(limit).expect("valid")).expect("valid");
        let limiter = Arc::new(
            KeyedLimiter::<u64, _, _>::with_clock(Live::new(window(2)), 1, ManualClock::new())
                .expect("a valid table"),
        );
        assert!(limiter.check_at(&7, ms(0)).is_allowed());
        let decider = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || limiter.check_at(&7, ms(0)))
        };
        let changer = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || {
                limiter
                    .algorithm()
                    .set_quota(Quota::per_second(1).expect("valid"))
                    .expect("live")
            })
        };
        let decision = decider.join().expect("no panic");
        changer.join().expect("no panic");
        // Under the old limit: the second unit, nothing left; under the new one: refused.
        let held = window(2).decide(FRESH_STATE, ms(0), 1).state;
        let (under_old, under_new) = (window(2).decide(held, ms(0), 1), window(1).decide(held, ms(0), 1));
        assert!(
            decision == under_old.decision || decision == under_new.decision,
            "{LIVE_VIOLATION}: {decision:?} is neither limit's"
        );
        // The count, read back under the old limit: 2 if admitted, else 1.
        limiter
            .algorithm()
            .set_quota(Quota::per_second(2).expect("valid"))
            .expect("live");
        let left = limiter.peek_n_at(&7, 0, ms(0)).expect("fits").remaining();
        assert_eq!(
            left,
            if decision.is_allowed() { 0 } else { 1 },
            "{LIVE_VIOLATION}: the count"
        );
    });
}
