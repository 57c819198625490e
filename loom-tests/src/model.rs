//! A model, its invariant, and the loom run that checks it.

use crate::rejection::assert_violation;
use std::fmt;

use loom::sync::Arc;
use loom::thread;
use tollgate::algorithm::{Algorithm, FRESH_WIDE_STATE};

use crate::replay::{replay, sequential_outcomes};
use crate::{Outcome, Request, Subject};

/// The start of the invariant's assertion message, which [`Model::assert_rejected`] looks for
/// to tell a caught violation from an unrelated panic.
pub const VIOLATION: &str = "INVARIANT VIOLATED: no sequential order of these requests";

/// One algorithm, the requests made before any thread starts (`setup`, decided in order on the
/// model's main thread), and each spawned thread's requests, all at fixed timestamps.
///
/// # The invariant
/// In every execution loom explores, the outcome (every thread's decisions, and the final
/// state word) equals the outcome of *some* sequential order of the same requests, replayed
/// with the pure `Algorithm::decide` from the state the setup leaves. In particular the
/// admitted total is one a sequential order admits (no over-admission) and every admission
/// is in the final state (no lost update).
#[derive(Clone, Debug)]
pub struct Model<A> {
    algorithm: A,
    setup: Vec<Request>,
    threads: Vec<Vec<Request>>,
}

impl<A: Algorithm + Clone + fmt::Debug + 'static> Model<A> {
    /// A model of `algorithm` with no setup and no threads yet.
    pub fn new(algorithm: A) -> Model<A> {
        Model {
            algorithm,
            setup: Vec::new(),
            threads: Vec::new(),
        }
    }

    /// Decides `requests` in order before the threads start.
    ///
    /// # Panics
    /// As [`thread`](Self::thread).
    pub fn setup(mut self, requests: &[Request]) -> Model<A> {
        self.assert_fit(requests);
        self.setup.extend_from_slice(requests);
        self
    }

    /// Adds a thread that makes `requests` in order.
    ///
    /// # Panics
    /// When a request is heavier than the algorithm's capacity (the limiter refuses it with
    /// `CostTooLarge` before deciding anything, so it would model nothing).
    pub fn thread(mut self, requests: &[Request]) -> Model<A> {
        self.assert_fit(requests);
        self.threads.push(requests.to_vec());
        self
    }

    /// The distinct outcomes of every sequential order of the threads' requests.
    pub fn sequential_outcomes(&self) -> Vec<Outcome> {
        sequential_outcomes(&self.algorithm, self.start_state(), &self.threads)
    }

    /// The admitted totals the sequential orders give, sorted, without repeats.
    pub fn admitted_totals(&self) -> Vec<usize> {
        let mut totals: Vec<_> = self.sequential_outcomes().iter().map(Outcome::admitted).collect();
        totals.sort_unstable();
        totals.dedup();
        totals
    }

    /// Runs the model under `loom::model` against the limiter `S`, asserting the invariant (see
    /// [`Model`]) in every execution.
    ///
    /// # Panics
    /// With a message starting with [`VIOLATION`] when an execution breaks the invariant.
    pub fn check<S: Subject<A>>(&self) {
        let expected = self.sequential_outcomes();
        let model = self.clone();
        loom::model(move || model.run_once::<S>(&expected));
    }

    /// Asserts that loom rejects the limiter `S` on this model: [`check`](Self::check) panics,
    /// and with the invariant's message, not for some other reason.
    ///
    /// # Panics
    /// When loom finds no violation, or the run panics for another reason.
    pub fn assert_rejected<S: Subject<A>>(&self) {
        assert_violation(VIOLATION, std::any::type_name::<S>(), || self.check::<S>());
    }

    fn assert_fit(&self, requests: &[Request]) {
        for request in requests {
            assert!(
                request.cost <= self.algorithm.capacity(),
                "{request:?} exceeds the capacity"
            );
        }
    }

    /// The state the setup leaves.
    fn start_state(&self) -> u128 {
        replay(&self.algorithm, FRESH_WIDE_STATE, &self.setup)
    }

    /// One execution: set up, spawn the threads, join them, check the invariant.
    fn run_once<S: Subject<A>>(&self, expected: &[Outcome]) {
        let limiter = Arc::new(S::fresh(self.algorithm.clone()));
        for request in &self.setup {
            let _ = limiter.decide(request);
        }
        assert_eq!(
            limiter.state_word(),
            self.start_state(),
            "the setup left another state"
        );

        let handles: Vec<_> = self
            .threads
            .iter()
            .map(|requests| {
                let limiter = Arc::clone(&limiter);
                let requests = requests.clone();
                thread::spawn(move || requests.iter().map(|r| limiter.decide(r)).collect::<Vec<_>>())
            })
            .collect();
        let decisions = handles
            .into_iter()
            .map(|handle| handle.join().expect("a model thread panicked"))
            .collect();

        let observed = Outcome {
            decisions,
            state: limiter.state_word(),
        };
        assert!(
            expected.contains(&observed),
            "{VIOLATION} gives this outcome ({} admitted): {observed:#?}\nmodel: {self:#?}\n\
             sequential outcomes: {expected:#?}",
            observed.admitted(),
        );
    }
}
