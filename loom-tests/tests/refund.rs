//! loom models of a refund (`refund_n_at`) racing an admission on the same state: the refund
//! runs in the same compare-and-swap loop as a decision (`src/cell.rs` for a direct limiter,
//! `Shard::update` for a keyed one), so neither can erase the other.
//!
//! The bucket: 1 per second, burst 2, holding one admission made at 0 (TAT 1 s). At 0, thread
//! 1 gives that unit back and thread 2 asks for one. In either order thread 2 is admitted and
//! the bucket ends holding exactly thread 2's unit (TAT 1 s): refund first takes the TAT to 0
//! and the admission to 1 s; admission first takes it to 2 s and the refund back to 1 s. The
//! broken twin refunds with a plain load and store, which loom catches erasing the admission.
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
use tollgate::algorithm::Algorithm;
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

/// Invariant: the admission always passes and the final TAT is 1 s.
#[test]
fn direct_refund_and_admission_never_erase_each_other() {
    loom::model(|| {
        let limiter = Arc::new(DirectLimiter::with_clock(bucket(), ManualClock::new()));
        assert!(limiter.check_at(Timestamp::UNIX_EPOCH).is_allowed());
        let refunder = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || limiter.refund_n_at(1, Timestamp::UNIX_EPOCH))
        };
        let admitter = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || limiter.check_at(Timestamp::UNIX_EPOCH).is_allowed())
        };
        assert!(refunder.join().expect("no panic"), "the unit was outstanding");
        let admitted = admitter.join().expect("no panic");
        assert!(admitted);
        assert_eq!(limiter.raw_state(), ONE_SECOND);
    });
}

/// What the keyed model's invariant panics with, so that its twin is rejected on it alone.
const KEYED_VIOLATION: &str = "VIOLATION (keyed refund vs admission)";

/// The same race on a key of a keyed table (built with `faults`): the refund goes through the
/// slot's CAS loop.
fn keyed_refund_race(faults: Faults) {
    loom::model(move || {
        let limiter: Arc<KeyedLimiter<u64, _, _>> = Arc::new(
            KeyedLimiter::with_clock(bucket(), 1, ManualClock::new())
                .expect("a valid table")
                .with_faults(faults),
        );
        assert!(limiter.check_at(&7, Timestamp::UNIX_EPOCH).is_allowed());
        let refunder = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || limiter.refund_n_at(&7, 1, Timestamp::UNIX_EPOCH))
        };
        let admitter = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || limiter.check_at(&7, Timestamp::UNIX_EPOCH).is_allowed())
        };
        assert!(refunder.join().expect("no panic"), "the unit was outstanding");
        let admitted = admitter.join().expect("no panic");
        assert!(admitted, "{KEYED_VIOLATION}: the admission was refused");
        // A request of weight 2 is refused at 0 and admitted at 1 s only if the TAT is exactly
        // 1 s (at 0 an erased admission would admit it; at 1 s an erased refund would refuse it).
        assert!(
            !limiter
                .peek_n_at(&7, 2, Timestamp::UNIX_EPOCH)
                .expect("fits")
                .is_allowed(),
            "{KEYED_VIOLATION}: the admission was erased"
        );
        assert!(
            limiter
                .peek_n_at(&7, 2, Timestamp::from_nanos(ONE_SECOND))
                .expect("fits")
                .is_allowed(),
            "{KEYED_VIOLATION}: the refund was erased"
        );
    });
}

#[test]
fn keyed_refund_and_admission_never_erase_each_other() {
    keyed_refund_race(Faults::NONE);
}

/// The keyed twin: the shipped table whose slot updates store their word instead of a CAS
/// (`Faults::update_by_store`), the refund's and the admission's alike.
#[test]
fn keyed_refund_by_store_twin_is_rejected() {
    assert_violation(KEYED_VIOLATION, "the keyed update by store", || {
        keyed_refund_race(Faults {
            update_by_store: true,
            ..Faults::NONE
        });
    });
}

/// The twin: the same algorithm and state word, refunded with a load and a separate store.
#[test]
fn racy_refund_twin_is_rejected() {
    assert_violation("an admission was erased", "the load-then-store refund", || {
        loom::model(|| {
            let algorithm = bucket();
            let word = Arc::new(AtomicU64::new(ONE_SECOND));
            let refunder = {
                let word = Arc::clone(&word);
                thread::spawn(move || {
                    // Relaxed, as the shipped loop: the bug is the missing CAS, not the ordering.
                    let state = word.load(Ordering::Relaxed);
                    word.store(
                        algorithm.refund(state, Timestamp::UNIX_EPOCH, 1),
                        Ordering::Relaxed,
                    );
                })
            };
            // The admission, through a correct CAS loop.
            let admitter = {
                let word = Arc::clone(&word);
                thread::spawn(move || {
                    let decision = admit_by_cas(&word, &algorithm, Timestamp::UNIX_EPOCH);
                    assert!(decision.is_allowed());
                })
            };
            refunder.join().expect("no panic");
            admitter.join().expect("no panic");
            let state = word.load(Ordering::Relaxed);
            assert!(
                state == ONE_SECOND,
                "an admission was erased: TAT {state} ns, not {ONE_SECOND}"
            );
        });
    });
}
