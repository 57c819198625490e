//! The specification: every sequential order of a model's requests, replayed on a plain state:
//! a `u128`, in which a 64-bit algorithm's state is the low half (`Algorithm::decide_wide`).

use tollgate::algorithm::{Algorithm, Transition};
use tollgate::{Decision, Timestamp};

/// `millis` milliseconds after the UNIX epoch.
pub const fn ms(millis: u64) -> Timestamp {
    Timestamp::from_nanos(millis * 1_000_000)
}

/// One request of a model: its weight and the fixed time it is decided at.
///
/// A request of weight 1 goes through [`check_at`](tollgate::DirectLimiter::check_at), any other
/// through [`check_n_at`](tollgate::DirectLimiter::check_n_at).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// The weight.
    pub cost: u64,
    /// When it is decided.
    pub now: Timestamp,
}

impl Request {
    /// A request of weight 1 at `now`.
    pub const fn at(now: Timestamp) -> Request {
        Request { cost: 1, now }
    }

    /// A request of weight `cost` at `now`.
    pub const fn weighted(cost: u64, now: Timestamp) -> Request {
        Request { cost, now }
    }
}

/// What one run of a model's threads produced: each thread's decisions, in the order it made
/// its requests, and the state word once every thread has finished.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// `decisions[t][i]`: the answer to thread `t`'s `i`-th request.
    pub decisions: Vec<Vec<Decision>>,
    /// The final raw state, 128 bits (a 64-bit state zero-extended).
    pub state: u128,
}

impl Outcome {
    /// How many requests were admitted, over all threads.
    pub fn admitted(&self) -> usize {
        self.decisions.iter().flatten().filter(|d| d.is_allowed()).count()
    }
}

/// The state after deciding `requests` one after the other from `state`.
pub(crate) fn replay<A: Algorithm>(algorithm: &A, state: u128, requests: &[Request]) -> u128 {
    requests.iter().fold(state, |state, r| {
        algorithm.decide_wide(state, r.now, r.cost).state
    })
}

/// The distinct outcomes of every sequential order of `threads`' requests (every interleaving
/// that keeps each thread's own order) started from `state`.
pub(crate) fn sequential_outcomes<A: Algorithm>(
    algorithm: &A,
    state: u128,
    threads: &[Vec<Request>],
) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    let mut decisions = vec![Vec::new(); threads.len()];
    interleave(algorithm, threads, state, &mut decisions, &mut outcomes);
    outcomes
}

/// Extends the order whose decisions so far are `decisions` (thread `t` has made
/// `decisions[t].len()` requests) by each thread's next request in turn.
fn interleave<A: Algorithm>(
    algorithm: &A,
    threads: &[Vec<Request>],
    state: u128,
    decisions: &mut Vec<Vec<Decision>>,
    outcomes: &mut Vec<Outcome>,
) {
    let mut finished = true;
    for (t, requests) in threads.iter().enumerate() {
        let Some(request) = requests.get(decisions[t].len()) else {
            continue;
        };
        finished = false;
        let Transition {
            state: next,
            decision,
        } = algorithm.decide_wide(state, request.now, request.cost);
        decisions[t].push(decision);
        interleave(algorithm, threads, next, decisions, outcomes);
        decisions[t].pop();
    }
    if finished {
        let outcome = Outcome {
            decisions: decisions.clone(),
            state,
        };
        if !outcomes.contains(&outcome) {
            outcomes.push(outcome);
        }
    }
}
