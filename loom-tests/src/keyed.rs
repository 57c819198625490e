//! Models of the keyed table: requests for several keys, the invariant, and the loom run.

use crate::rejection::assert_violation;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use loom::sync::Arc;
use loom::thread;
use tollgate::algorithm::Algorithm;
use tollgate::{Decision, Faults, KeyedLimiter, ManualClock, Outcome, Timestamp, WhenFull};

use crate::keyed_spec::Spec;
use crate::placement::{deterministic_hashing, Placement};

/// The start of every keyed invariant's assertion message, which
/// [`KeyedModel::assert_rejected`] looks for to tell a caught violation from an unrelated panic.
pub const KEYED_VIOLATION: &str = "INVARIANT VIOLATED (keyed table):";

/// The preemption bound of a keyed model when `LOOM_MAX_PREEMPTIONS` is not set.
///
/// Not unbounded, as loom's default is: a freshly promoted member holds a fresh, so idle, state
/// until its inserter's first decision lands, and another inserter may reclaim it in between;
/// two inserters can take one slot from each other forever, neither deciding. So some keyed
/// executions never end, and an unbounded exploration of a model where an insert can reclaim
/// a slot stops with "Model exceeded maximum number of branches" (`tests/keyed_claims_in_flight.rs`).
/// Each such round costs each thread a preemption, so every bounded exploration ends.
pub const DEFAULT_KEYED_PREEMPTION_BOUND: usize = 3;

/// How many preemptions a keyed model's exploration allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bound {
    /// `LOOM_MAX_PREEMPTIONS` if set, else [`DEFAULT_KEYED_PREEMPTION_BOUND`].
    Default,
    /// At most this many (or `LOOM_MAX_PREEMPTIONS`, if lower).
    AtMost(usize),
    /// This bound (`None`: unbounded), whatever `LOOM_MAX_PREEMPTIONS` says.
    Fixed(Option<usize>),
}

/// One request of a keyed model: its key, its weight and the fixed time it is decided at.
///
/// A request of weight 1 goes through `KeyedLimiter::check_at`, any other through
/// `check_n_at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyedRequest {
    /// The key.
    pub key: u64,
    /// The weight.
    pub cost: u64,
    /// When it is decided.
    pub now: Timestamp,
}

impl KeyedRequest {
    /// A request of weight 1 for `key` at `now`.
    pub const fn at(key: u64, now: Timestamp) -> KeyedRequest {
        KeyedRequest { key, cost: 1, now }
    }

    /// A request of weight `cost` for `key` at `now`.
    pub const fn weighted(key: u64, cost: u64, now: Timestamp) -> KeyedRequest {
        KeyedRequest { key, cost, now }
    }
}

/// A [`Decision`] as plain values, so that the specification can make the answers the table
/// makes without the table (`Decision` has no public constructor).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Answer {
    /// [`Decision::outcome`].
    pub outcome: Outcome,
    /// [`Decision::remaining`].
    pub remaining: u64,
    /// [`Decision::retry_after`].
    pub retry_after: Duration,
    /// [`Decision::reset_after`].
    pub reset_after: Duration,
    /// [`Decision::delay`].
    pub delay: Duration,
}

impl Answer {
    /// The answer to a new key when the table is full and refuses it: `TableFull`, every
    /// duration zero. The table's own answer carries a retry-after hint, read slot by slot while
    /// other requests change them; [`Answer::from`] sets it aside (zero), so that the models
    /// check which requests find room, and the main crate's `tests/keyed/behaviour.rs` checks the
    /// hint's value, one caller at a time.
    pub const fn table_full() -> Answer {
        Answer {
            outcome: Outcome::TableFull,
            remaining: 0,
            retry_after: Duration::ZERO,
            reset_after: Duration::ZERO,
            delay: Duration::ZERO,
        }
    }
}

impl From<Decision> for Answer {
    /// The decision's values, but for a `TableFull` refusal's retry-after hint, set to zero (see
    /// [`Answer::table_full`]).
    fn from(decision: Decision) -> Answer {
        Answer {
            outcome: decision.outcome(),
            remaining: decision.remaining(),
            retry_after: match decision.outcome() {
                Outcome::TableFull => Duration::ZERO,
                _ => decision.retry_after(),
            },
            reset_after: decision.reset_after(),
            delay: decision.delay(),
        }
    }
}

/// What one run of a keyed model observed. Every field is compared, so two runs agree only if
/// every key got the same answers (outcome, remaining, retry-after, reset-after, delay).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyedOutcome {
    /// The setup's answers, in order (the same in every run: the setup is sequential).
    pub setup: Vec<(u64, Answer)>,
    /// `len()` once the setup is done.
    pub setup_len: usize,
    /// `threads[t][i]`: thread `t`'s `i`-th request's key and answer.
    pub threads: Vec<Vec<(u64, Answer)>>,
    /// `len()` once every thread has finished.
    pub len: usize,
    /// The answers to the requests made after the threads finished (probes of each key's
    /// state), in order.
    pub after: Vec<(u64, Answer)>,
}

impl KeyedOutcome {
    /// The outcomes of the threads' requests for `key`, thread by thread, in order.
    pub fn outcomes(&self, key: u64) -> Vec<Outcome> {
        self.threads
            .iter()
            .flatten()
            .filter(|(k, _)| *k == key)
            .map(|(_, answer)| answer.outcome)
            .collect()
    }

    /// How many of the threads' requests for `key` were admitted and counted
    /// ([`Outcome::Allowed`]).
    pub fn admitted(&self, key: u64) -> usize {
        self.outcomes(key)
            .iter()
            .filter(|o| **o == Outcome::Allowed)
            .count()
    }

    /// The outcomes of the requests made after the threads finished, in order.
    pub fn after_outcomes(&self) -> Vec<Outcome> {
        self.after.iter().map(|(_, answer)| answer.outcome).collect()
    }
}

/// One algorithm in a table for `capacity` keys, the requests made before any thread starts
/// (`setup`), each spawned thread's requests, and requests made once every thread has finished
/// (`after`: they read back each key's state), all at fixed timestamps.
///
/// # The invariant
/// In every execution loom explores, `len()` never exceeds the table's slots, and the outcome
/// (every answer, setup and after included, and `len()` after the setup and at the end) is one
/// the specification allows (`src/keyed_spec.rs`): a map of at most `slots` keys, each key its
/// own limiter deciding with the pure algorithm, a key forgotten only while idle, and only to
/// make room for another, every request's steps (insert, decide) interleaved with the others' in
/// every way. So no key is charged for another key's request, no admission is lost or doubled,
/// no key with debt is forgotten, a key never has two entries, and a new key is refused room
/// only when every key in the table carries debt.
///
/// Every sequential order of the threads' requests, replayed on a fresh shipped table (one
/// thread, so one execution, inside `loom::model`), must also be allowed: a check of the
/// specification as much as of the table. What the allowed outcomes are is asserted by hand,
/// from the algorithm, by each model in `tests/keyed_*.rs`.
#[derive(Clone, Debug)]
pub struct KeyedModel<A> {
    algorithm: A,
    capacity: usize,
    slots: usize,
    when_full: WhenFull,
    setup: Vec<KeyedRequest>,
    threads: Vec<Vec<KeyedRequest>>,
    after: Vec<KeyedRequest>,
    bound: Bound,
}

impl<A: Algorithm + Clone + fmt::Debug + Send + Sync + 'static> KeyedModel<A> {
    /// A model of `algorithm` in a table for `capacity` keys (refusing new keys when full), with
    /// no requests yet.
    ///
    /// # Panics
    /// As [`Placement::for_capacity`].
    pub fn new(algorithm: A, capacity: usize) -> KeyedModel<A> {
        KeyedModel {
            algorithm,
            capacity,
            slots: Placement::for_capacity(capacity).slots(),
            when_full: WhenFull::Refuse,
            setup: Vec::new(),
            threads: Vec::new(),
            after: Vec::new(),
            bound: Bound::Default,
        }
    }

    /// The same model with another policy for new keys when the table is full.
    pub fn when_full(mut self, policy: WhenFull) -> KeyedModel<A> {
        self.when_full = policy;
        self
    }

    /// Decides `requests` in order before the threads start.
    ///
    /// # Panics
    /// As [`thread`](Self::thread).
    pub fn setup(mut self, requests: &[KeyedRequest]) -> KeyedModel<A> {
        self.assert_fit(requests);
        self.setup.extend_from_slice(requests);
        self
    }

    /// Adds a thread that makes `requests` in order.
    ///
    /// # Panics
    /// When a request is heavier than the algorithm's capacity (the limiter refuses it with
    /// `CostTooLarge` before deciding anything, so it would model nothing).
    pub fn thread(mut self, requests: &[KeyedRequest]) -> KeyedModel<A> {
        self.assert_fit(requests);
        self.threads.push(requests.to_vec());
        self
    }

    /// Decides `requests` in order once every thread has finished.
    ///
    /// # Panics
    /// As [`thread`](Self::thread).
    pub fn after(mut self, requests: &[KeyedRequest]) -> KeyedModel<A> {
        self.assert_fit(requests);
        self.after.extend_from_slice(requests);
        self
    }

    /// Explores with at most `bound` preemptions (or `LOOM_MAX_PREEMPTIONS`, if lower), rather
    /// than `LOOM_MAX_PREEMPTIONS` or [`DEFAULT_KEYED_PREEMPTION_BOUND`].
    pub fn preemption_bound(mut self, bound: usize) -> KeyedModel<A> {
        self.bound = Bound::AtMost(bound);
        self
    }

    /// Explores with exactly this preemption bound (`None`: every execution, loom's full
    /// exploration), whatever `LOOM_MAX_PREEMPTIONS` says: for the models of
    /// `tests/keyed_claims_in_flight.rs`, whose failing executions need more preemptions than the
    /// default run allows, or none.
    pub fn fixed_preemption_bound(mut self, bound: Option<usize>) -> KeyedModel<A> {
        self.bound = Bound::Fixed(bound);
        self
    }

    /// Slots in the model's table.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The distinct outcomes the specification allows (see [`KeyedModel`]).
    pub fn allowed_outcomes(&self) -> Vec<KeyedOutcome> {
        Spec {
            algorithm: &self.algorithm,
            slots: self.slots,
            when_full: self.when_full,
        }
        .outcomes(&self.setup, &self.threads, &self.after)
    }

    /// The distinct outcomes of every sequential order of the threads' requests (every
    /// interleaving that keeps each thread's own order), each replayed on a fresh shipped
    /// limiter.
    pub fn sequential_outcomes(&self) -> Vec<KeyedOutcome> {
        deterministic_hashing();
        let mut orders = Vec::new();
        interleavings(&self.threads, &mut Vec::new(), &mut orders);
        let outcomes = std::sync::Arc::new(Mutex::new(Vec::new()));
        for order in orders {
            let model = self.clone();
            let found = std::sync::Arc::clone(&outcomes);
            // One thread: loom runs the closure once.
            loom::model(move || {
                let outcome = model.replay(&order);
                let mut found = found.lock().expect("not poisoned");
                if !found.contains(&outcome) {
                    found.push(outcome);
                }
            });
        }
        let outcomes = outcomes.lock().expect("not poisoned").clone();
        outcomes
    }

    /// The outcomes the specification allows, once checked to include every sequential order's
    /// outcome on the shipped table.
    ///
    /// # Panics
    /// When a sequential order's outcome is not allowed (the specification or the table is
    /// wrong without any concurrency: not a violation loom found).
    pub fn expected_outcomes(&self) -> Vec<KeyedOutcome> {
        let allowed = self.allowed_outcomes();
        for outcome in self.sequential_outcomes() {
            assert!(
                allowed.contains(&outcome),
                "the shipped table, run sequentially, gives an outcome the specification does not \
                 allow: {outcome:#?}\nmodel: {self:#?}\nallowed: {allowed:#?}"
            );
        }
        allowed
    }

    /// Runs the model under loom against the shipped limiter, asserting the invariant (see
    /// [`KeyedModel`]) in every execution. Returns how many executions loom explored (also
    /// printed, for `--nocapture`).
    ///
    /// # Panics
    /// With a message starting with [`KEYED_VIOLATION`] when an execution breaks the invariant;
    /// when loom explores only one execution (the threads never race: the model models nothing).
    pub fn check(&self) -> usize {
        let executions = self.check_with(Faults::NONE);
        assert!(executions > 1, "loom explored a single execution: no race");
        executions
    }

    /// Runs the model under loom against the shipped limiter with the protocol steps `faults`
    /// names left out (a broken twin), asserting the same invariant as [`check`](Self::check).
    /// Returns how many executions loom explored.
    ///
    /// # Panics
    /// With a message starting with [`KEYED_VIOLATION`] when an execution breaks the invariant.
    pub fn check_with(&self, faults: Faults) -> usize {
        let expected = self.expected_outcomes();
        let model = self.clone();
        let executions = std::sync::Arc::new(AtomicUsize::new(0));
        let counter = std::sync::Arc::clone(&executions);
        let mut builder = loom::model::Builder::new();
        // `Builder::new` reads `LOOM_MAX_PREEMPTIONS`.
        builder.preemption_bound = match self.bound {
            Bound::Default => Some(builder.preemption_bound.unwrap_or(DEFAULT_KEYED_PREEMPTION_BOUND)),
            Bound::AtMost(bound) => Some(builder.preemption_bound.map_or(bound, |b| b.min(bound))),
            Bound::Fixed(bound) => bound,
        };
        builder.check(move || {
            counter.fetch_add(1, Ordering::Relaxed);
            model.run_once(faults, &expected);
        });
        let executions = executions.load(Ordering::Relaxed);
        eprintln!(
            "{executions} executions (preemption bound {:?}), {faults:?}",
            builder.preemption_bound
        );
        executions
    }

    /// Asserts that loom rejects the limiter with `faults`: [`check_with`](Self::check_with)
    /// panics, and with the invariant's message, not for some other reason. Returns that
    /// message (the violating outcome).
    ///
    /// # Panics
    /// When loom finds no violation, or the run panics for another reason.
    pub fn assert_rejected(&self, faults: Faults) -> String {
        let twin = format!("the limiter with {faults:?}");
        assert_violation(KEYED_VIOLATION, &twin, || {
            self.check_with(faults);
        })
    }

    fn assert_fit(&self, requests: &[KeyedRequest]) {
        for request in requests {
            assert!(
                request.cost <= self.algorithm.capacity(),
                "{request:?} exceeds the capacity"
            );
        }
    }

    /// A fresh limiter (call inside `loom::model`: it builds loom objects).
    fn limiter(&self, faults: Faults) -> KeyedLimiter<u64, A, ManualClock> {
        let limiter =
            KeyedLimiter::<u64, _, _>::with_clock(self.algorithm.clone(), self.capacity, ManualClock::new())
                .expect("a valid capacity")
                .when_full(self.when_full)
                .with_faults(faults);
        assert_eq!(
            limiter.slots(),
            self.slots,
            "the table's size is not the one placed"
        );
        limiter
    }

    /// The setup, then `order` (thread index, request index) one request after another on this
    /// thread, then the after requests.
    fn replay(&self, order: &[(usize, usize)]) -> KeyedOutcome {
        let limiter = self.limiter(Faults::NONE);
        let setup = decide_all(&limiter, &self.setup);
        let setup_len = limiter.len();
        let mut threads: Vec<Vec<_>> = vec![Vec::new(); self.threads.len()];
        for &(t, i) in order {
            let request = self.threads[t][i];
            threads[t].push((request.key, decide(&limiter, &request).into()));
        }
        let len = limiter.len();
        let after = decide_all(&limiter, &self.after);
        KeyedOutcome {
            setup,
            setup_len,
            threads,
            len,
            after,
        }
    }

    /// One execution: set up, spawn the threads, join them, read back, check the invariant.
    fn run_once(&self, faults: Faults, expected: &[KeyedOutcome]) {
        let limiter = Arc::new(self.limiter(faults));
        let setup = decide_all(&limiter, &self.setup);
        let setup_len = limiter.len();
        let handles: Vec<_> = self
            .threads
            .iter()
            .map(|requests| {
                let limiter = Arc::clone(&limiter);
                let requests = requests.clone();
                thread::spawn(move || decide_all(&limiter, &requests))
            })
            .collect();
        let threads = handles
            .into_iter()
            .map(|handle| handle.join().expect("a model thread panicked"))
            .collect();
        let len = limiter.len();
        let after = decide_all(&limiter, &self.after);
        let observed = KeyedOutcome {
            setup,
            setup_len,
            threads,
            len,
            after,
        };
        assert!(
            len <= self.slots,
            "{KEYED_VIOLATION} the table counts {len} keys in {} slots: {observed:#?}\nmodel: {self:#?}",
            self.slots,
        );
        assert!(
            expected.contains(&observed),
            "{KEYED_VIOLATION} the specification does not allow this outcome: \
             {observed:#?}\nmodel: {self:#?}\nallowed outcomes: {expected:#?}",
        );
    }
}

fn decide<A: Algorithm>(limiter: &KeyedLimiter<u64, A, ManualClock>, request: &KeyedRequest) -> Decision {
    match request.cost {
        1 => limiter.check_at(&request.key, request.now),
        cost => limiter
            .check_n_at(&request.key, cost, request.now)
            .expect("a model's requests fit the capacity"),
    }
}

fn decide_all<A: Algorithm>(
    limiter: &KeyedLimiter<u64, A, ManualClock>,
    requests: &[KeyedRequest],
) -> Vec<(u64, Answer)> {
    requests
        .iter()
        .map(|request| (request.key, decide(limiter, request).into()))
        .collect()
}

/// Every order of the threads' requests that keeps each thread's own order, as (thread,
/// request) pairs, appended to `orders`.
fn interleavings(
    threads: &[Vec<KeyedRequest>],
    prefix: &mut Vec<(usize, usize)>,
    orders: &mut Vec<Vec<(usize, usize)>>,
) {
    let mut finished = true;
    for (t, requests) in threads.iter().enumerate() {
        let next = prefix.iter().filter(|(thread, _)| *thread == t).count();
        if next < requests.len() {
            finished = false;
            prefix.push((t, next));
            interleavings(threads, prefix, orders);
            prefix.pop();
        }
    }
    if finished {
        orders.push(prefix.clone());
    }
}
