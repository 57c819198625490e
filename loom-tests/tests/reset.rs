//! loom models of a reset (`reset_at`) racing an admission on the same state: the reset runs in
//! the same compare-and-swap loop as a decision (`src/cell.rs` for a direct limiter,
//! `Shard::update` for a keyed one), storing the fresh state.
//!
//! The bucket: 1 per second, burst 2, holding one admission made at 0 (TAT 1 s). At 0, thread
//! 1 resets and thread 2 asks for one unit. The admission's `remaining` tells the order: 1 if the
//! reset came first (a full bucket of 2, then one unit: the bucket ends at TAT 1 s), 0 if the
//! admission came first (then the reset empties everything: TAT 0, the fresh state). Either way
//! the reset replaced a state still limiting, so it answers `true`. The broken twin resets with a
//! single compare-and-swap that gives up when it fails (no loop), which loom catches keeping the
//! admission after a reset that said it had forgotten everything.
//!
//! Both parties run on spawned threads and the model's own thread only sets the bucket up,
//! joins and checks: loom 0.7.3 does not run a spawned thread ahead of the main thread's next
//! access when the spawned one starts with a load (tokio-rs/loom#392), so a party on the main
//! thread explores fewer orders.
//!
//! Compiled only under `--cfg tollgate_loom` (the attribute below comes after these docs so
//! that the crate keeps them, and `missing_docs` stays quiet, when the cfg strips it).
#![cfg(tollgate_loom)]

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;
use loom_tests::{admit_by_cas, assert_violation};
use tollgate::algorithm::{Algorithm, FRESH_STATE};
use tollgate::{DirectLimiter, Faults, KeyedLimiter, ManualClock, Quota, Timestamp, TokenBucket};

const ONE_SECOND: u64 = 1_000_000_000;

fn bucket() -> TokenBucket {
    TokenBucket::new(
        Quota::per_second(1)
            .and_then(|q| q.with_burst(2))
            .expect("a valid quota"),
    )
    .expect("a valid bucket")
}

/// The state the race must end in, given the admission's `remaining`.
fn expected_state(remaining: u64) -> u64 {
    match remaining {
        1 => ONE_SECOND,
        0 => FRESH_STATE,
        other => panic!("an admission into a bucket of 2 left {other}"),
    }
}

/// Invariant: the reset answers `true`, the admission passes, and the final state is the one
/// its `remaining` says came last.
#[test]
fn direct_reset_and_admission_fall_in_one_order() {
    loom::model(|| {
        let limiter = Arc::new(DirectLimiter::with_clock(bucket(), ManualClock::new()));
        assert!(limiter.check_at(Timestamp::UNIX_EPOCH).is_allowed());
        let resetter = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || limiter.reset_at(Timestamp::UNIX_EPOCH))
        };
        let admitter = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || limiter.check_at(Timestamp::UNIX_EPOCH))
        };
        assert!(resetter.join().expect("no panic"), "the bucket was limiting");
        let admission = admitter.join().expect("no panic");
        assert!(admission.is_allowed());
        assert_eq!(limiter.raw_state(), expected_state(admission.remaining()));
    });
}

/// What the keyed model's invariant panics with, so that its twin is rejected on it alone.
const KEYED_VIOLATION: &str = "VIOLATION (keyed reset vs admission)";

/// The same race on a key of a keyed table (built with `faults`): the reset goes through the
/// slot's CAS loop.
fn keyed_reset_race(faults: Faults) {
    loom::model(move || {
        let limiter: Arc<KeyedLimiter<u64, _, _>> = Arc::new(
            KeyedLimiter::with_clock(bucket(), 1, ManualClock::new())
                .expect("a valid table")
                .with_faults(faults),
        );
        assert!(limiter.check_at(&7, Timestamp::UNIX_EPOCH).is_allowed());
        let resetter = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || limiter.reset_at(&7, Timestamp::UNIX_EPOCH))
        };
        let admitter = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || limiter.check_at(&7, Timestamp::UNIX_EPOCH))
        };
        assert!(resetter.join().expect("no panic"), "the key was limited");
        let admission = admitter.join().expect("no panic");
        assert!(admission.is_allowed());
        // The key's state, read through the public API: units a weight-2 request finds at 0 are
        // 2 (fresh) or 1 (TAT 1 s), and a fresh key decides as an absent one.
        let whole = limiter
            .peek_n_at(&7, 2, Timestamp::UNIX_EPOCH)
            .expect("fits")
            .is_allowed();
        assert!(
            whole == (expected_state(admission.remaining()) == FRESH_STATE),
            "{KEYED_VIOLATION}: the final state is not the order the admission saw ({admission:?})"
        );
    });
}

#[test]
fn keyed_reset_and_admission_fall_in_one_order() {
    keyed_reset_race(Faults::NONE);
}

/// The keyed twin: the shipped table whose slot updates store their word instead of a CAS
/// (`Faults::update_by_store`), the reset's and the admission's alike.
#[test]
fn keyed_reset_by_store_twin_is_rejected() {
    assert_violation(KEYED_VIOLATION, "the keyed update by store", || {
        keyed_reset_race(Faults {
            update_by_store: true,
            ..Faults::NONE
        });
    });
}

/// The twin: the same algorithm and state word, reset with one compare-and-swap from the state
/// it read, abandoned when another thread changed the word first.
#[test]
fn reset_without_a_loop_twin_is_rejected() {
    assert_violation("a reset was lost", "the reset without a loop", || {
        loom::model(|| {
            let algorithm = bucket();
            let word = Arc::new(AtomicU64::new(ONE_SECOND));
            let resetter = {
                let word = Arc::clone(&word);
                thread::spawn(move || {
                    // Relaxed, as the shipped loop: the bug is the missing retry, not the ordering.
                    let state = word.load(Ordering::Relaxed);
                    let limiting = !algorithm.is_idle(state, Timestamp::UNIX_EPOCH);
                    let _ = word.compare_exchange(state, FRESH_STATE, Ordering::Relaxed, Ordering::Relaxed);
                    limiting
                })
            };
            // The admission, through a correct CAS loop.
            let admitter = {
                let word = Arc::clone(&word);
                thread::spawn(move || {
                    let decision = admit_by_cas(&word, &algorithm, Timestamp::UNIX_EPOCH);
                    assert!(decision.is_allowed());
                    decision.remaining()
                })
            };
            assert!(resetter.join().expect("no panic"));
            let remaining = admitter.join().expect("no panic");
            let state = word.load(Ordering::Relaxed);
            assert!(
                state == expected_state(remaining),
                "a reset was lost: state {state} after an admission leaving {remaining}"
            );
        });
    });
}
