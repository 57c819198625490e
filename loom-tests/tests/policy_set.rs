//! loom models of a `PolicySet`'s undo racing a decision on the same limiter: the undo runs in
//! the limiter's own compare-and-swap loop (`DirectLimiter::undo`, through `src/cell.rs`), so
//! neither erases the other.
//!
//! The set: a fixed window of 2 holding 1 unit, then a fixed window of 1 holding 1 (full). Thread
//! 1 asks the set: the first window admits (count 2), the second refuses, the first's unit is
//! undone (count 1). Thread 2 asks the first window directly: admitted if it comes before or after
//! thread 1's hold, refused while thread 1 holds the last unit (never an over-admission). In
//! every order the first window ends holding exactly 1 plus thread 2's admission. The broken
//! twin undoes with a load and a separate store, which loom catches erasing thread 2's unit.
//!
//! Every party runs on a spawned thread (tokio-rs/loom#392: see `refund.rs`).
//!
//! Compiled only under `--cfg tollgate_loom` (the attribute below comes after these docs so
//! that the crate keeps them, and `missing_docs` stays quiet, when the cfg strips it).
#![cfg(tollgate_loom)]

// A std `Arc`: the set owns its policies as `SetMember`s, which loom's `Arc` is not; what the
// model checks is the policies' own atomics, which are loom's.
use std::sync::Arc;

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::thread;
use loom_tests::{admit_by_cas, assert_violation, ms};
use tollgate::algorithm::{Admission, Algorithm, FRESH_STATE};
use tollgate::policy_set::SetMember;
use tollgate::{
    CostTooLarge, Decision, DirectLimiter, FixedWindow, ManualClock, PolicySet, Quota, Timestamp,
};

/// What the invariant panics with, so that the twin is rejected on it alone.
const SET_VIOLATION: &str = "VIOLATION (policy set undo)";

fn window(limit: u64) -> FixedWindow {
    FixedWindow::new(Quota::per_second(limit).expect("valid")).expect("valid")
}

/// The first window's count, read back from its state.
fn count(state: u64) -> u64 {
    tollgate::FixedWindowState::from_raw(state).count(&window(2))
}

/// A limiter the model's thread 2 also asks directly, and whose state it reads.
trait Shared: SetMember<u64> + 'static {
    fn check(&self, now: Timestamp) -> Decision;
    fn state(&self) -> u64;
}

impl Shared for DirectLimiter<FixedWindow, ManualClock> {
    fn check(&self, now: Timestamp) -> Decision {
        self.check_at(now)
    }

    fn state(&self) -> u64 {
        self.raw_state()
    }
}

/// The twin: the same window on a loom atomic, admitting through a correct CAS loop but undoing
/// with a load and a separate store.
struct UndoByStore {
    word: AtomicU64,
    window: FixedWindow,
}

impl SetMember<u64> for UndoByStore {
    fn capacity(&self) -> u64 {
        self.window.capacity()
    }

    fn decide(
        &self,
        _: &u64,
        cost: u64,
        now: Option<Timestamp>,
    ) -> Result<(Decision, Admission), CostTooLarge> {
        let now = now.unwrap_or(ms(0));
        let decision = admit_by_cas(&self.word, &self.window, now);
        Ok((decision, Admission::new(now, cost, &decision)))
    }

    fn peek(&self, _: &u64, cost: u64, now: Option<Timestamp>) -> Result<Decision, CostTooLarge> {
        // SeqCst: the twin's bug is its undo, not an ordering.
        let state = self.word.load(Ordering::SeqCst);
        Ok(self.window.decide(state, now.unwrap_or(ms(0)), cost).decision)
    }

    fn undo(&self, _: &u64, admission: &Admission) {
        let state = self.word.load(Ordering::SeqCst);
        self.word
            .store(self.window.undo(state, admission), Ordering::SeqCst);
    }
}

impl Shared for UndoByStore {
    fn check(&self, now: Timestamp) -> Decision {
        admit_by_cas(&self.word, &self.window, now)
    }

    fn state(&self) -> u64 {
        self.word.load(Ordering::SeqCst)
    }
}

/// Runs the model with `first` as the set's first policy (holding one unit).
fn model<S: Shared>(first: S) {
    let first = Arc::new(first);
    assert!(first.check(ms(0)).is_allowed(), "the setup's unit");
    let full = DirectLimiter::with_clock(window(1), ManualClock::new());
    assert!(full.check_at(ms(0)).is_allowed());
    let set = PolicySet::new("first", Arc::clone(&first))
        .and_then(|set| set.and("full", full))
        .expect("two policies");
    let asking = thread::spawn(move || set.check_at(&0, ms(0)));
    let direct = {
        let first = Arc::clone(&first);
        thread::spawn(move || first.check(ms(0)))
    };
    let refused = asking.join().expect("no panic");
    let admitted = direct.join().expect("no panic").is_allowed();
    assert!(!refused.is_allowed(), "{SET_VIOLATION}: the full window admitted");
    let expected = 1 + u64::from(admitted);
    let counted = count(first.state());
    assert!(
        counted == expected,
        "{SET_VIOLATION}: the first window counts {counted}, not {expected} (thread 2 admitted: {admitted})"
    );
}

/// Invariant: the first window ends holding its setup unit and thread 2's admission, exactly.
#[test]
fn an_undo_and_a_decision_never_erase_each_other() {
    loom::model(|| model(DirectLimiter::with_clock(window(2), ManualClock::new())));
}

/// The twin: an undo by load and store. loom must find the order where it erases thread 2's
/// admission.
#[test]
fn undo_by_store_twin_is_rejected() {
    assert_violation(SET_VIOLATION, "the undo by load and store", || {
        loom::model(|| {
            model(UndoByStore {
                word: AtomicU64::new(FRESH_STATE),
                window: window(2),
            })
        });
    });
}
