//! loom models of the shaper's refund (`refund_slot_at`: a slot given back only while it is
//! still the end of the queue) racing an admission on the same cell, direct and keyed.
//!
//! The shaper: one slot a second, burst 4, with A admitted at 0 (its slot 0 to 1 s, so it
//! leaves at once) and B given the slot 1 s to 2 s (the queue ends at 2 s). At 0, thread 1 gives
//! B's slot back (B's client hung up) and thread 2 admits C. The two sequential orders:
//! - refund first: B's slot is the end, the queue ends at 1 s again, and C is given 1 s to 2 s;
//! - admission first: C is given 2 s to 3 s, B's slot is no longer the end, nothing comes back
//!   (B's slot passes unused).
//!
//! Invariants, in every execution: what the threads saw (whether the refund gave back, C's
//! decision) and the final state are those of one of the two orders, replayed with the pure
//! `Algorithm::decide` and `Algorithm::refund_slot`; and the spacing: C's slot starts no earlier
//! than A's ends, and the queue ends no earlier than C's slot (so no later request can be given
//! a slot overlapping it). The broken twin gives B's slot back unconditionally
//! (`refund_n_at`, through the same correct CAS loop): when C is admitted first, the queue's end
//! moves back into C's slot, and loom must reject it on the spacing invariant. That twin is
//! wrong in a sequential order too; the second, direct only, is right in both orders and wrong
//! only when interleaved: it checks the end with a load, then refunds unconditionally in a loop
//! of its own (check-then-act), and loom must find C admitted between the two.
//!
//! Both parties run on spawned threads and the model's own thread only sets the queue up,
//! joins and checks: loom 0.7.3 does not run a spawned thread ahead of the main thread's next
//! access when the spawned one starts with a load (tokio-rs/loom#392), so a party on the main
//! thread explores fewer orders.
//!
//! Compiled only under `--cfg tollgate_loom` (the attribute below comes after these docs so
//! that the crate keeps them, and `missing_docs` stays quiet, when the cfg strips it).
#![cfg(tollgate_loom)]

use loom::sync::Arc;
use loom::thread;
use loom_tests::assert_violation;
use tollgate::algorithm::Algorithm;
use tollgate::{Decision, DirectLimiter, KeyedLimiter, LeakyBucket, ManualClock, Quota, Timestamp};

const SECOND: u64 = 1_000_000_000;
const AT_ZERO: Timestamp = Timestamp::UNIX_EPOCH;
/// The end of B's slot: the TAT its admission stored.
const B_END: Timestamp = Timestamp::from_nanos(2 * SECOND);
const SPACING: &str = "SPACING VIOLATION";
const ORDER: &str = "ORDER VIOLATION";

fn shaper() -> LeakyBucket {
    LeakyBucket::new(
        Quota::per_second(1)
            .and_then(|q| q.with_burst(4))
            .expect("a valid quota"),
    )
    .expect("a valid shaper")
}

/// The state both threads start from: A, then B, admitted at 0.
fn queue_of_two() -> u64 {
    let shaper = shaper();
    let a = shaper.decide(0, AT_ZERO, 1).state;
    shaper.decide(a, AT_ZERO, 1).state
}

/// What one execution saw: whether the refund gave back, C's decision, and the queue's end
/// after both (how long a request at 0 would wait).
type Seen = (bool, Decision, u64);

/// The two sequential orders, replayed on a plain `u64`.
fn sequential_orders() -> [Seen; 2] {
    let shaper = shaper();
    let start = queue_of_two();
    let refunded = shaper.refund_slot(start, AT_ZERO, 1, B_END);
    let after = shaper.decide(refunded, AT_ZERO, 1);
    let refund_first = (refunded != start, after.decision, after.state);
    let admitted = shaper.decide(start, AT_ZERO, 1);
    let refunded = shaper.refund_slot(admitted.state, AT_ZERO, 1, B_END);
    let admission_first = (refunded != admitted.state, admitted.decision, refunded);
    [refund_first, admission_first]
}

/// Both invariants; spacing first, so that the twin is rejected on it.
fn check((gave_back, c, end): Seen) {
    assert!(c.is_allowed(), "C fits the queue in either order");
    let c_start = c.delay().as_nanos() as u64;
    assert!(
        c_start >= SECOND && end >= c_start + SECOND,
        "{SPACING}: C's slot starts at {c_start} ns (A's ends at 1 s), the queue ends at {end} ns"
    );
    assert!(
        sequential_orders().contains(&(gave_back, c, end)),
        "{ORDER}: saw {:?}, the sequential orders give {:?}",
        (gave_back, c, end),
        sequential_orders()
    );
}

/// How a model gives B's slot back: the shipped conditional refund, or the twin's.
#[derive(Clone, Copy)]
enum Refund {
    Slot,
    Unconditional,
    /// A plausible racy implementation: the end checked by a load, then an unconditional
    /// refund in its own loop (check-then-act). Unlike `Unconditional`, it is right in every
    /// sequential order, so only an interleaving can reject it.
    CheckThenAct,
}

fn direct_model(refund: Refund) {
    loom::model(move || {
        let limiter = Arc::new(DirectLimiter::with_clock(shaper(), ManualClock::new()));
        assert!(limiter.check_at(AT_ZERO).is_allowed());
        assert_eq!(limiter.check_at(AT_ZERO).delay().as_nanos(), u128::from(SECOND));
        let refunder = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || match refund {
                Refund::Slot => limiter.refund_slot_at(1, B_END, AT_ZERO),
                Refund::Unconditional => limiter.refund_n_at(1, AT_ZERO),
                Refund::CheckThenAct => {
                    limiter.raw_state() == B_END.as_nanos() && limiter.refund_n_at(1, AT_ZERO)
                }
            })
        };
        let admitter = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || limiter.check_at(AT_ZERO))
        };
        let gave_back = refunder.join().expect("no panic");
        let c = admitter.join().expect("no panic");
        check((gave_back, c, limiter.raw_state()));
    });
}

fn keyed_model(refund: Refund) {
    loom::model(move || {
        let limiter: Arc<KeyedLimiter<u64, _, _>> =
            Arc::new(KeyedLimiter::with_clock(shaper(), 1, ManualClock::new()).expect("a valid table"));
        assert!(limiter.check_at(&7, AT_ZERO).is_allowed());
        assert!(limiter.check_at(&7, AT_ZERO).is_allowed());
        let refunder = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || match refund {
                Refund::Slot => limiter.refund_slot_at(&7, 1, B_END, AT_ZERO),
                Refund::Unconditional => limiter.refund_n_at(&7, 1, AT_ZERO),
                Refund::CheckThenAct => unreachable!("direct only"),
            })
        };
        let admitter = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || limiter.check_at(&7, AT_ZERO))
        };
        let gave_back = refunder.join().expect("no panic");
        let c = admitter.join().expect("no panic");
        // The queue's end: a weightless request at 0 waits until it.
        let end = limiter.peek_n_at(&7, 0, AT_ZERO).expect("fits").delay();
        check((gave_back, c, end.as_nanos() as u64));
    });
}

#[test]
fn the_sequential_orders_differ() {
    // Not a model: the two orders really are different, so the invariant tells them apart.
    let [refund_first, admission_first] = sequential_orders();
    assert_eq!(refund_first.2, 2 * SECOND);
    assert_eq!(admission_first.2, 3 * SECOND);
    assert!(refund_first.0 && !admission_first.0);
}

#[test]
fn direct_slot_refund_and_admission_keep_the_spacing() {
    direct_model(Refund::Slot);
}

#[test]
fn keyed_slot_refund_and_admission_keep_the_spacing() {
    keyed_model(Refund::Slot);
}

#[test]
fn direct_unconditional_refund_twin_is_rejected() {
    assert_violation(SPACING, "the unconditional refund", || {
        direct_model(Refund::Unconditional)
    });
}

#[test]
fn keyed_unconditional_refund_twin_is_rejected() {
    assert_violation(SPACING, "the unconditional refund", || {
        keyed_model(Refund::Unconditional)
    });
}

#[test]
fn direct_check_then_refund_twin_is_rejected() {
    assert_violation(SPACING, "the check-then-refund", || {
        direct_model(Refund::CheckThenAct)
    });
}
