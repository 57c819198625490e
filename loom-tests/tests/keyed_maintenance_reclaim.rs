//! loom models of a keyed reset (`reset_at`) and refund (`refund_n_at`) racing a reclaim of the
//! key's slot by a new key: both run in the slot's CAS loop (`Shard::update`), whose CAS covers
//! the whole 128-bit word, so if another key took the slot between the read and the CAS the
//! update answers `Moved` and `src/keyed.rs` looks the key up again (`while let Some(found)`),
//! and no longer finds it. No key's state is ever reset, or given units back, for another key.
//!
//! `tests/reset.rs` and `tests/refund.rs` race these operations with an admission of the same
//! key only; `tests/keyed_update.rs` races a *decision* with a reclaim. This file covers the
//! retry loops of `reset_at` and `refund_n_at` themselves.
//!
//! The table has 2 slots (one key's capacity). Key `A` (home 0) is charged at 0 (quota 1 per
//! second, burst 1: TAT 1 s, busy at 0.5 s, idle at 1 s). Thread 1 resets (or refunds one unit
//! of) `A` at 0.5 s, when `A` is still limited, so the operation really writes; thread 2 asks
//! for new key `B`, also homed at 0, at 1 s: `B`'s scan meets `A` idle in slot 0
//! (in every order: a reset or refund only makes `A` idler) and reclaims it. In either
//! sequential order `B` is admitted as a fresh key, ends holding its one charge (TAT 2 s: denied
//! at 1 s, retry in 1 s), and `A` is absent (a fresh key again, with room in slot 1); the
//! operation answers `true` when it came first and `false` when `B` did. Both parties run on
//! spawned threads and the model's own thread only sets the table up, joins and checks: loom
//! 0.7.3 does not run a spawned thread ahead of the main thread's next access when the spawned
//! one starts with a load (tokio-rs/loom#392), so a party on the main thread explores fewer
//! orders.
//!
//! The broken twin is the shipped table with `Faults::update_ignores_key`: the failed CAS is
//! retried on whatever the slot now holds, so the reset (or refund) lands on `B`'s member, and
//! `B`'s charge is erased (`B` admitted again at 1 s). loom needs 1 preemption to find it
//! (the operation's read, then `B`'s whole insert, then the operation's CAS): rejected with
//! `LOOM_MAX_PREEMPTIONS` 1, 2, 3 or unset, not with 0. (With `B` on the model's own thread it
//! needed 2: one more to run the operation's read ahead of the main thread.) The shipped models
//! explore 196 executions with 3, both answers (`true`, `false`) occurring.
//!
//! Compiled only under `--cfg tollgate_loom` (the attribute below comes after these docs so
//! that the crate keeps them, and `missing_docs` stays quiet, when the cfg strips it).
#![cfg(tollgate_loom)]

use std::time::Duration;

use loom::sync::Arc;
use loom::thread;
use loom_tests::{assert_violation, ms, Placement};
use tollgate::{Faults, KeyedLimiter, ManualClock, Outcome, Quota, TokenBucket};

/// One key per table: 2 slots.
const CAPACITY: usize = 1;
/// What the invariant's own panics start with, so that a twin is rejected on it alone.
const VIOLATION: &str = "VIOLATION (keyed maintenance vs reclaim)";

/// The broken twin: a failed CAS retries on the slot's new word whichever key holds it.
const UPDATE_IGNORES_KEY: Faults = Faults {
    update_ignores_key: true,
    ..Faults::NONE
};

/// The operation thread 1 makes on `A` at 0.5 s.
#[derive(Clone, Copy, Debug)]
enum Op {
    Reset,
    Refund,
}

fn bucket() -> TokenBucket {
    TokenBucket::new(Quota::per_second(1).expect("a valid quota")).expect("a valid bucket")
}

/// Invariant, in every execution: `B` is admitted as a fresh key, keeps exactly its own charge
/// (denied at 1 s, retry in 1 s), `A` is absent (decided as fresh, room in slot 1), and `len()`
/// is 1. The operation's answer may be either (`true` before the reclaim, `false` after).
fn reclaim_race(op: Op, faults: Faults) {
    let placement = Placement::for_capacity(CAPACITY);
    let a = placement.key_at(0, &[]);
    let b = placement.key_at(0, &[a]);
    loom::model(move || {
        let limiter: Arc<KeyedLimiter<u64, _, _>> = Arc::new(
            KeyedLimiter::with_clock(bucket(), CAPACITY, ManualClock::new())
                .expect("a valid table")
                .with_faults(faults),
        );
        assert!(limiter.check_at(&a, ms(0)).is_allowed());
        let maintainer = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || match op {
                Op::Reset => limiter.reset_at(&a, ms(500)),
                Op::Refund => limiter.refund_n_at(&a, 1, ms(500)),
            })
        };
        let admitter = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || limiter.check_at(&b, ms(1000)))
        };
        let _answer = maintainer.join().expect("no panic");
        let admission = admitter.join().expect("no panic");
        assert!(
            admission.outcome() == Outcome::Allowed
                && (admission.remaining(), admission.reset_after()) == (0, Duration::from_secs(1)),
            "{VIOLATION}: B not admitted as a fresh key: {admission:?}"
        );
        let again = limiter.peek_at(&b, ms(1000));
        assert!(
            again.outcome() == Outcome::Denied && again.retry_after() == Duration::from_secs(1),
            "{VIOLATION}: B's own charge lost after A's {op:?}: {again:?}"
        );
        let a_now = limiter.peek_at(&a, ms(1000));
        assert!(
            a_now.outcome() == Outcome::Allowed && a_now.remaining() == 0,
            "{VIOLATION}: A not absent after B's reclaim: {a_now:?}"
        );
        assert!(
            limiter.len() == 1,
            "{VIOLATION}: len() {} with only B held",
            limiter.len()
        );
    });
}

#[test]
fn a_keyed_reset_never_resets_the_key_that_reclaimed_its_slot() {
    reclaim_race(Op::Reset, Faults::NONE);
}

#[test]
fn a_keyed_reset_update_ignores_key_twin_is_rejected() {
    assert_violation(VIOLATION, "the reset that ignores the key", || {
        reclaim_race(Op::Reset, UPDATE_IGNORES_KEY)
    });
}

#[test]
fn a_keyed_refund_never_refunds_the_key_that_reclaimed_its_slot() {
    reclaim_race(Op::Refund, Faults::NONE);
}

#[test]
fn a_keyed_refund_update_ignores_key_twin_is_rejected() {
    assert_violation(VIOLATION, "the refund that ignores the key", || {
        reclaim_race(Op::Refund, UPDATE_IGNORES_KEY)
    });
}
