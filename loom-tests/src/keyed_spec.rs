//! The specification of a keyed table, on plain values: a map of at most `slots` keys, each key
//! its own limiter, a key with debt never forgotten.
//!
//! What a request does, as atomic steps that interleave with other threads' steps:
//!
//! - if its key is in the map: decide on the key's state with the pure `Algorithm::decide` and
//!   store the result (one step; the request is answered);
//! - otherwise, one step of: insert the key fresh, into room if the map has fewer than `slots`
//!   keys, or in place of any key that is idle at the request's time (`Algorithm::is_idle`:
//!   its state decides as a fresh key's would), after which the request goes on with its next
//!   step (its key may be forgotten again before it decides: a fresh key is idle); or, only when
//!   there is neither room nor an idle key, answer `TableFull` (`WhenFull::Refuse`) or
//!   `AllowedUntracked` with a fresh key's answer (`WhenFull::Admit`), storing nothing.
//!
//! Which idle key makes room, and whether one does while there is room, is left open: the table
//! takes the first free or idle slot on the key's probe chain, which the specification does not
//! model (it is invisible in the answers, since an idle key decides as a fresh one). So is the
//! moment a request's insertion lands relative to its decision: another thread's request for the
//! same key may decide first on the entry it made.

use std::collections::HashSet;

use tollgate::algorithm::{Algorithm, FRESH_STATE};
use tollgate::{Outcome, WhenFull};

use crate::keyed::{Answer, KeyedOutcome, KeyedRequest};

/// The map: `(key, state)` pairs sorted by key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Map(Vec<(u64, u64)>);

impl Map {
    fn state(&self, key: u64) -> Option<u64> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, s)| *s)
    }

    fn with(&self, key: u64, state: u64) -> Map {
        let mut entries: Vec<_> = self.0.iter().copied().filter(|(k, _)| *k != key).collect();
        entries.push((key, state));
        entries.sort_unstable();
        Map(entries)
    }

    fn without(&self, key: u64) -> Map {
        Map(self.0.iter().copied().filter(|(k, _)| *k != key).collect())
    }
}

/// The table's parameters.
pub(crate) struct Spec<'a, A> {
    pub(crate) algorithm: &'a A,
    pub(crate) slots: usize,
    pub(crate) when_full: WhenFull,
}

/// Where one concurrent exploration stands: the map, each thread's next request, and the answers
/// so far.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Point {
    map: Map,
    next: Vec<usize>,
    answers: Vec<Vec<(u64, Answer)>>,
}

impl<A: Algorithm> Spec<'_, A> {
    /// Every outcome the specification allows: the setup in order, the threads' requests
    /// interleaved step by step in every way, then the after requests in order.
    pub(crate) fn outcomes(
        &self,
        setup: &[KeyedRequest],
        threads: &[Vec<KeyedRequest>],
        after: &[KeyedRequest],
    ) -> Vec<KeyedOutcome> {
        let mut outcomes = Vec::new();
        for (map, setup_answers) in self.sequential(Map(Vec::new()), setup) {
            let setup_len = map.0.len();
            let start = Point {
                map,
                next: vec![0; threads.len()],
                answers: vec![Vec::new(); threads.len()],
            };
            let mut seen = HashSet::new();
            let mut stack = vec![start];
            while let Some(point) = stack.pop() {
                if !seen.insert(point.clone()) {
                    continue;
                }
                let mut finished = true;
                for (t, requests) in threads.iter().enumerate() {
                    let Some(request) = requests.get(point.next[t]) else {
                        continue;
                    };
                    finished = false;
                    for (map, answer) in self.step(&point.map, request) {
                        let mut next = point.clone();
                        next.map = map;
                        if let Some(answer) = answer {
                            next.answers[t].push((request.key, answer));
                            next.next[t] += 1;
                        }
                        stack.push(next);
                    }
                }
                if finished {
                    let len = point.map.0.len();
                    for (_, after_answers) in self.sequential(point.map.clone(), after) {
                        let outcome = KeyedOutcome {
                            setup: setup_answers.clone(),
                            setup_len,
                            threads: point.answers.clone(),
                            len,
                            after: after_answers,
                        };
                        if !outcomes.contains(&outcome) {
                            outcomes.push(outcome);
                        }
                    }
                }
            }
        }
        outcomes
    }

    /// Every way of answering `requests` one after another from `map`: the maps they leave and
    /// their answers.
    fn sequential(&self, map: Map, requests: &[KeyedRequest]) -> Vec<(Map, Vec<(u64, Answer)>)> {
        let mut done = Vec::new();
        let mut seen = HashSet::new();
        let mut stack = vec![(map, Vec::new())];
        while let Some((map, answers)) = stack.pop() {
            if !seen.insert((map.clone(), answers.clone())) {
                continue;
            }
            let Some(request) = requests.get(answers.len()) else {
                if !done.contains(&(map.clone(), answers.clone())) {
                    done.push((map, answers));
                }
                continue;
            };
            for (map, answer) in self.step(&map, request) {
                let mut answers = answers.clone();
                if let Some(answer) = answer {
                    answers.push((request.key, answer));
                }
                stack.push((map, answers));
            }
        }
        done
    }

    /// Each atomic step `request` may take from `map`: the map after it, and the answer if the
    /// step answers the request.
    fn step(&self, map: &Map, request: &KeyedRequest) -> Vec<(Map, Option<Answer>)> {
        let (key, now, cost) = (request.key, request.now, request.cost);
        if let Some(state) = map.state(key) {
            let transition = self.algorithm.decide(state, now, cost);
            return vec![(
                map.with(key, transition.state),
                Some(Answer::from(transition.decision)),
            )];
        }
        let mut steps = Vec::new();
        if map.0.len() < self.slots {
            steps.push((map.with(key, FRESH_STATE), None));
        }
        for &(idle, _) in map.0.iter().filter(|(_, s)| self.algorithm.is_idle(*s, now)) {
            steps.push((map.without(idle).with(key, FRESH_STATE), None));
        }
        if steps.is_empty() {
            let answer = match self.when_full {
                WhenFull::Refuse => Answer::table_full(),
                WhenFull::Admit => Answer {
                    outcome: Outcome::AllowedUntracked,
                    ..Answer::from(self.algorithm.decide(FRESH_STATE, now, cost).decision)
                },
                other => panic!("a policy this specification does not know: {other:?}"),
            };
            steps.push((map.clone(), Some(answer)));
        }
        steps
    }
}
