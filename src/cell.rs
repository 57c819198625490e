//! The compare-and-swap loop a [`DirectLimiter`](crate::DirectLimiter) runs its algorithm in, on
//! its 64-bit word, or on its 128-bit one for a wide state ([`update_wide`]: the same loop). The
//! keyed table runs the same loop on its 128-bit slots (`Shard::update`, which also checks that the
//! slot still holds the key); the sliding log, and a keyed table of wide states, take a lock
//! instead.
//!
//! # Orderings
//! The state word is the only data a decision reads or writes: nothing else is published
//! through it, and no other memory depends on it. Atomicity of the read-modify-write comes from
//! the compare-and-swap on that one location (all writes to one atomic are totally ordered,
//! whatever the ordering argument), so `Relaxed` is enough everywhere. `loom-tests` checks this
//! under loom's model of the C++ memory model. The 128-bit word is the same: one location,
//! whose compare-and-swap (`lock cmpxchg16b` on x86_64) replaces exactly the value it read.

use crate::algorithm::Transition;
use crate::sync::{AtomicU128, AtomicU64, Ordering};
use crate::Decision;

/// Runs `decide` on the word's current state and stores the new state if the request was
/// admitted, retrying when another thread got there first.
///
/// A denial (or an admission that changes nothing) returns without writing: it is decided on a
/// state the word really held, so it is linearizable at that load. `decide` must be pure; it may
/// run several times.
#[inline]
pub(crate) fn update(word: &AtomicU64, mut decide: impl FnMut(u64) -> Transition) -> Decision {
    // Relaxed: the state word is self-contained; a stale read only costs a failed CAS below.
    let mut current = word.load(Ordering::Relaxed);
    loop {
        let Transition { state, decision } = decide(current);
        if state == current {
            return decision;
        }
        // Relaxed on success and failure: see the module's `# Orderings`. Weak: a spurious
        // failure just reruns `decide` on the value it returns.
        match word.compare_exchange_weak(current, state, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return decision,
            Err(actual) => current = actual,
        }
    }
}

/// Reads the state for a decision that must not change it (`peek`).
#[inline]
pub(crate) fn load(word: &AtomicU64) -> u64 {
    // Relaxed: see the module's `# Orderings`.
    word.load(Ordering::Relaxed)
}

/// [`update`] on a 128-bit word: a wide state's compare-and-swap loop, the same steps.
#[inline]
pub(crate) fn update_wide(word: &AtomicU128, mut decide: impl FnMut(u128) -> Transition<u128>) -> Decision {
    // Relaxed: as in `update`; a stale read only costs a failed CAS below.
    let mut current = word.load(Ordering::Relaxed);
    loop {
        let Transition { state, decision } = decide(current);
        if state == current {
            return decision;
        }
        // Relaxed on success and failure: see the module's `# Orderings`. Weak: a spurious
        // failure just reruns `decide` on the value it returns.
        match word.compare_exchange_weak(current, state, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return decision,
            Err(actual) => current = actual,
        }
    }
}

/// [`load`] of a 128-bit word.
#[inline]
pub(crate) fn load_wide(word: &AtomicU128) -> u128 {
    // Relaxed: see the module's `# Orderings`.
    word.load(Ordering::Relaxed)
}
