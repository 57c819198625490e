//! The sliding log's models: a [`LogLimiter`] or a [`KeyedLogLimiter`] (whose locks, under
//! `--cfg tollgate_loom`, are loom's `Mutex`es, and whose tags and counters are loom atomics),
//! requests made before, in and after two or three threads, and the invariant that what the
//! threads observed is what some sequential order of the same requests gives. The same models
//! run a [`KeyedLimiter`] of a wide window (`LogModel::keyed_wide`): its keys live in the same
//! locked table as the keyed log's (`src/keyed/locked.rs`), with a 128-bit state per key.
//!
//! # The invariant
//! In every execution loom explores, the outcome (every thread's decisions, the decisions of the
//! `after` requests made on the main thread once the threads are joined, which read back the
//! final logs, and `len()` for a keyed table) equals the outcome of *some* sequential order of
//! the threads' requests (every interleaving that keeps each thread's own order), each replayed
//! on a fresh shipped limiter, one request at a time, on one thread. The shipped limiter's
//! sequential decisions are themselves checked against a plain list of admissions by the main
//! crate's property tests (`tests/log/properties_sliding_log.rs`), so "some sequential order" means
//! "some order of the exact algorithm": no over-admission, no lost record, no key charged for
//! another's request, no debt forgotten, no key inserted twice.
//!
//! Broken twins are the shipped limiters with one step of their locking left out
//! (`tollgate::LogFaults`); [`LogModel::assert_rejected`] asserts loom finds an execution that
//! breaks the invariant, and fails on its assertion ([`LOG_VIOLATION`]), not another panic.

use crate::rejection::assert_violation;
use std::sync::Mutex as StdMutex;

use loom::sync::Arc;
use loom::thread;
use tollgate::{
    Decision, KeyedLimiter, KeyedLogLimiter, LogFaults, LogLimiter, ManualClock, SlidingLog, SlidingWindow,
    Timestamp, WhenFull,
};

use crate::deterministic_hashing;

/// The start of the invariant's assertion message.
pub const LOG_VIOLATION: &str = "INVARIANT VIOLATED (sliding log): no sequential order of these requests";

/// One request of a log model: a key (ignored by a direct limiter), a weight and a fixed time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogRequest {
    /// The key (keyed models only).
    pub key: u64,
    /// The weight.
    pub cost: u64,
    /// When it is decided.
    pub now: Timestamp,
}

impl LogRequest {
    /// A request of weight 1 for `key` at `now`.
    pub const fn at(key: u64, now: Timestamp) -> LogRequest {
        LogRequest { key, cost: 1, now }
    }

    /// A request of weight `cost` for `key` at `now`.
    pub const fn weighted(key: u64, cost: u64, now: Timestamp) -> LogRequest {
        LogRequest { key, cost, now }
    }
}

/// What one run produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogOutcome {
    /// `decisions[t][i]`: the answer to thread `t`'s `i`-th request.
    pub decisions: Vec<Vec<Decision>>,
    /// The answers to the requests made after every thread was joined.
    pub after: Vec<Decision>,
    /// `len()` at the end (keyed models; 0 for a direct one).
    pub len: usize,
}

impl LogOutcome {
    /// How many of the threads' requests were counted as admitted (`Outcome::Allowed`).
    pub fn admitted(&self) -> usize {
        self.decisions
            .iter()
            .flatten()
            .filter(|d| d.outcome() == tollgate::Outcome::Allowed)
            .count()
    }
}

/// Which limiter a model runs.
#[derive(Clone, Copy, Debug)]
enum Form {
    Direct(SlidingLog),
    Keyed {
        log: SlidingLog,
        capacity: usize,
        when_full: WhenFull,
    },
    /// A `KeyedLimiter` of a wide sliding window: the locked table.
    KeyedWide {
        window: SlidingWindow,
        capacity: usize,
    },
}

/// A limiter of any form, built inside a loom execution.
#[derive(Debug)]
enum Limiter {
    Direct(LogLimiter<ManualClock>),
    Keyed(KeyedLogLimiter<u64, ManualClock>),
    KeyedWide(KeyedLimiter<u64, SlidingWindow, ManualClock>),
}

impl Limiter {
    fn decide(&self, request: &LogRequest) -> Decision {
        let result = match self {
            Limiter::Direct(limiter) => limiter.check_n_at(request.cost, request.now),
            Limiter::Keyed(limiter) => limiter.check_n_at(&request.key, request.cost, request.now),
            Limiter::KeyedWide(limiter) => limiter.check_n_at(&request.key, request.cost, request.now),
        };
        result.expect("a model's requests fit the limit")
    }

    fn len(&self) -> usize {
        match self {
            Limiter::Direct(_) => 0,
            Limiter::Keyed(limiter) => limiter.len(),
            Limiter::KeyedWide(limiter) => limiter.len(),
        }
    }
}

/// A sliding log model: the limiter's form (and its log or window), and the requests (see the
/// module docs).
#[derive(Clone, Debug)]
pub struct LogModel {
    form: Form,
    setup: Vec<LogRequest>,
    threads: Vec<Vec<LogRequest>>,
    after: Vec<LogRequest>,
}

impl LogModel {
    /// A model of a [`LogLimiter`].
    pub fn direct(log: SlidingLog) -> LogModel {
        LogModel::new(Form::Direct(log))
    }

    /// A model of a [`KeyedLogLimiter`] for `capacity` keys, refusing new keys when full.
    pub fn keyed(log: SlidingLog, capacity: usize) -> LogModel {
        LogModel::new(Form::Keyed {
            log,
            capacity,
            when_full: WhenFull::Refuse,
        })
    }

    /// A model of a [`KeyedLimiter`] of a wide sliding window (`window.is_wide()`) for
    /// `capacity` keys, refusing new keys when full: its locked table.
    pub fn keyed_wide(window: SlidingWindow, capacity: usize) -> LogModel {
        LogModel::new(Form::KeyedWide { window, capacity })
    }

    fn new(form: Form) -> LogModel {
        LogModel {
            form,
            setup: Vec::new(),
            threads: Vec::new(),
            after: Vec::new(),
        }
    }

    /// Decides `requests` in order before the threads start.
    pub fn setup(mut self, requests: &[LogRequest]) -> LogModel {
        self.setup.extend_from_slice(requests);
        self
    }

    /// Adds a thread that makes `requests` in order.
    pub fn thread(mut self, requests: &[LogRequest]) -> LogModel {
        self.threads.push(requests.to_vec());
        self
    }

    /// Decides `requests` in order once every thread is joined.
    pub fn after(mut self, requests: &[LogRequest]) -> LogModel {
        self.after.extend_from_slice(requests);
        self
    }

    fn fresh(&self, faults: LogFaults) -> Limiter {
        match self.form {
            Form::Direct(log) => {
                Limiter::Direct(LogLimiter::with_clock(log, ManualClock::new()).with_faults(faults))
            }
            Form::Keyed {
                log,
                capacity,
                when_full,
            } => Limiter::Keyed(
                KeyedLogLimiter::with_clock(log, capacity, ManualClock::new())
                    .expect("a valid capacity")
                    .when_full(when_full)
                    .with_faults(faults),
            ),
            Form::KeyedWide { window, capacity } => Limiter::KeyedWide(
                KeyedLimiter::with_clock(window, capacity, ManualClock::new())
                    .expect("a valid capacity")
                    .with_locked_faults(faults),
            ),
        }
    }

    /// The distinct outcomes of every sequential order of the threads' requests, each replayed
    /// on a fresh shipped limiter (in one loom execution, which has no threads to explore).
    pub fn sequential_outcomes(&self) -> Vec<LogOutcome> {
        deterministic_hashing();
        let outcomes = std::sync::Arc::new(StdMutex::new(Vec::new()));
        let (model, sink) = (self.clone(), std::sync::Arc::clone(&outcomes));
        loom::model(move || {
            let mut found = Vec::new();
            for order in interleavings(&model.threads) {
                let limiter = model.fresh(LogFaults::NONE);
                for request in &model.setup {
                    let _ = limiter.decide(request);
                }
                let mut decisions: Vec<Vec<Decision>> = vec![Vec::new(); model.threads.len()];
                for (thread, index) in order {
                    decisions[thread].push(limiter.decide(&model.threads[thread][index]));
                }
                let outcome = model.finish(&limiter, decisions);
                if !found.contains(&outcome) {
                    found.push(outcome);
                }
            }
            *sink.lock().unwrap() = found;
        });
        let found = outcomes.lock().unwrap().clone();
        found
    }

    /// The admitted totals of the sequential orders, sorted, without repeats.
    pub fn admitted_totals(&self) -> Vec<usize> {
        let mut totals: Vec<_> = self
            .sequential_outcomes()
            .iter()
            .map(LogOutcome::admitted)
            .collect();
        totals.sort_unstable();
        totals.dedup();
        totals
    }

    fn finish(&self, limiter: &Limiter, decisions: Vec<Vec<Decision>>) -> LogOutcome {
        let after = self.after.iter().map(|request| limiter.decide(request)).collect();
        LogOutcome {
            decisions,
            after,
            len: limiter.len(),
        }
    }

    /// Runs the model under `loom::model` against the shipped limiter.
    ///
    /// # Panics
    /// With a message starting with [`LOG_VIOLATION`] when an execution breaks the invariant.
    pub fn check(&self) {
        self.check_with(LogFaults::NONE);
    }

    /// Runs the model against the shipped limiter with `faults` left out of its locking.
    ///
    /// # Panics
    /// As [`check`](Self::check).
    pub fn check_with(&self, faults: LogFaults) {
        let expected = self.sequential_outcomes();
        let model = self.clone();
        loom::model(move || {
            let limiter = Arc::new(model.fresh(faults));
            for request in &model.setup {
                let _ = limiter.decide(request);
            }
            let handles: Vec<_> = model
                .threads
                .iter()
                .map(|requests| {
                    let (limiter, requests) = (Arc::clone(&limiter), requests.clone());
                    thread::spawn(move || requests.iter().map(|r| limiter.decide(r)).collect::<Vec<_>>())
                })
                .collect();
            let decisions = handles
                .into_iter()
                .map(|handle| handle.join().expect("a model thread panicked"))
                .collect();
            let observed = model.finish(&limiter, decisions);
            assert!(
                expected.contains(&observed),
                "{LOG_VIOLATION} gives this outcome ({} admitted): {observed:#?}\nmodel: {model:#?}\n\
                 sequential outcomes: {expected:#?}",
                observed.admitted(),
            );
        });
    }

    /// Asserts that loom rejects the limiter with `faults`: [`check_with`](Self::check_with)
    /// panics, and on the invariant's assertion.
    ///
    /// # Panics
    /// When loom finds no violation, or the run panics for another reason.
    pub fn assert_rejected(&self, faults: LogFaults) {
        assert_violation(LOG_VIOLATION, &format!("{faults:?}"), || {
            self.check_with(faults);
        });
    }
}

/// Every order of the threads' requests that keeps each thread's own order, as
/// `(thread, index)` pairs.
fn interleavings(threads: &[Vec<LogRequest>]) -> Vec<Vec<(usize, usize)>> {
    fn extend(
        threads: &[Vec<LogRequest>],
        taken: &mut Vec<usize>,
        order: &mut Vec<(usize, usize)>,
        all: &mut Vec<Vec<(usize, usize)>>,
    ) {
        let mut done = true;
        for thread in 0..threads.len() {
            if taken[thread] < threads[thread].len() {
                done = false;
                order.push((thread, taken[thread]));
                taken[thread] += 1;
                extend(threads, taken, order, all);
                taken[thread] -= 1;
                order.pop();
            }
        }
        if done {
            all.push(order.clone());
        }
    }
    let mut all = Vec::new();
    extend(threads, &mut vec![0; threads.len()], &mut Vec::new(), &mut all);
    all
}
