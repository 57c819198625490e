//! Deliberately broken limiters that loom must reject: each runs the same pure algorithm as
//! [`Shipped`](crate::Shipped) on a loom `AtomicU64`, but writes it the wrong way.
//!
//! Both use `SeqCst` everywhere, so what loom finds is a broken read-modify-write, not a weak
//! ordering.

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Mutex;
use tollgate::algorithm::{Algorithm, Transition, FRESH_STATE, FRESH_WIDE_STATE};
use tollgate::Decision;

use crate::{Request, Subject};

/// Loads the state, decides, then stores the new state with a plain `store` instead of a
/// compare-and-swap: two threads that load the same state both decide on it, and the later
/// store erases the earlier admission (a lost update, and so over-admission).
#[derive(Debug)]
pub struct RacyLimiter<A> {
    word: AtomicU64,
    algorithm: A,
}

impl<A: Algorithm + 'static> Subject<A> for RacyLimiter<A> {
    fn fresh(algorithm: A) -> Self {
        RacyLimiter {
            word: AtomicU64::new(FRESH_STATE),
            algorithm,
        }
    }

    fn decide(&self, request: &Request) -> Decision {
        let current = self.word.load(Ordering::SeqCst);
        let Transition { state, decision } = self.algorithm.decide(current, request.now, request.cost);
        if state != current {
            self.word.store(state, Ordering::SeqCst);
        }
        decision
    }

    fn state_word(&self) -> u128 {
        u128::from(self.word.load(Ordering::SeqCst))
    }
}

/// Admits through a correct compare-and-swap loop, but on a denial writes back the state it
/// decided on: a denial that lands after another thread's admission erases it.
#[derive(Debug)]
pub struct WritingDenialLimiter<A> {
    word: AtomicU64,
    algorithm: A,
}

impl<A: Algorithm + 'static> Subject<A> for WritingDenialLimiter<A> {
    fn fresh(algorithm: A) -> Self {
        WritingDenialLimiter {
            word: AtomicU64::new(FRESH_STATE),
            algorithm,
        }
    }

    fn decide(&self, request: &Request) -> Decision {
        let mut current = self.word.load(Ordering::SeqCst);
        loop {
            let Transition { state, decision } = self.algorithm.decide(current, request.now, request.cost);
            if !decision.is_allowed() {
                self.word.store(state, Ordering::SeqCst);
                return decision;
            }
            match self
                .word
                .compare_exchange(current, state, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return decision,
                Err(actual) => current = actual,
            }
        }
    }

    fn state_word(&self) -> u128 {
        u128::from(self.word.load(Ordering::SeqCst))
    }
}

/// A wide state's twin of [`RacyLimiter`]: loads the 128-bit state, decides
/// ([`Algorithm::decide_wide`]), then stores the new state, as two steps on a loom `Mutex<u128>`
/// (loom has no 128-bit atomic; the shipped one is a `Mutex<u128>` too under the cfg, each of its
/// operations one step: a load, then a store, is the broken read-modify-write).
#[derive(Debug)]
pub struct RacyWideLimiter<A> {
    word: Mutex<u128>,
    algorithm: A,
}

impl<A: Algorithm + 'static> Subject<A> for RacyWideLimiter<A> {
    fn fresh(algorithm: A) -> Self {
        RacyWideLimiter {
            word: Mutex::new(FRESH_WIDE_STATE),
            algorithm,
        }
    }

    fn decide(&self, request: &Request) -> Decision {
        let current = *self.word.lock().expect("no model panics holding it");
        let Transition { state, decision } = self.algorithm.decide_wide(current, request.now, request.cost);
        if state != current {
            *self.word.lock().expect("no model panics holding it") = state;
        }
        decision
    }

    fn state_word(&self) -> u128 {
        *self.word.lock().expect("no model panics holding it")
    }
}

/// The admission a hand-written twin races its broken operation with: `algorithm` deciding one
/// unit at `now` on `word` through a correct compare-and-swap loop (the shipped cell's, with its
/// `Relaxed` orderings: the twins' bug is in the other party, not here). Returns the decision.
pub fn admit_by_cas<A: Algorithm>(word: &AtomicU64, algorithm: &A, now: tollgate::Timestamp) -> Decision {
    // Relaxed: as the shipped cell; a stale read only costs a failed CAS below.
    let mut current = word.load(Ordering::Relaxed);
    loop {
        let Transition { state, decision } = algorithm.decide(current, now, 1);
        // Relaxed on success and failure: the word is self-contained, as in the shipped cell.
        match word.compare_exchange(current, state, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return decision,
            Err(actual) => current = actual,
        }
    }
}
