//! loom models of the leases' local side (`src/distributed/lease/ledger/`): each key's lease
//! in the locked keyed table (`src/keyed/locked.rs`), behind the key's lock, spent by requests
//! and changed by the installs of the replies Redis gives. The shipped `LeaseTable` runs on
//! loom's mutexes and atomics here (`--cfg tollgate_loom`).
//!
//! Invariants, in every execution loom explores:
//! 1. Two spends racing for the last unit of a lease: exactly one is admitted from it.
//! 2. A spend racing the install of a refresh (the next range, contiguous): the units admitted
//!    in all, the racing spend's and those spent once both are done, are exactly the lease's
//!    unit plus the refresh's two; none is spent twice.
//! 3. The install of one key's reply racing another key's taking over the first key's slot
//!    (the first was idle): the reply never lands on the other key, which is decided as a
//!    fresh key (a round trip), never refused on the first key's reply.
//!
//! Each has a broken twin (`tollgate::LeaseFaults`): the key's lock released between a spend's
//! decision and its store (`unlock_before_record`), an install onto the state its ask saw
//! (`install_from_snapshot`), an install that does not check under the slot's lock that the
//! slot is still its key's (`skip_key_recheck`); loom must find each one's violation.
//!
//! Every racing party runs on a spawned thread and the model's own thread only sets up, joins
//! and checks (tokio-rs/loom#392: see `breaker.rs`). Each table holds one key (2 slots, one
//! shard); the models pass hashes whose home is slot 0 (a hash's bit 31 picks the home of a
//! 2-slot shard: `TableLayout::home`).
//!
//! Compiled only under `--cfg tollgate_loom` (the attribute below comes after these docs so
//! that the crate keeps them, and `missing_docs` stays quiet, when the cfg strips it).
#![cfg(tollgate_loom)]

use std::time::Duration;

use loom::sync::Arc;
use loom::thread;
use loom_tests::assert_violation;
use tollgate::{Grant, LeaseFaults, LeaseRule, LeaseTable, Quota, Sizing, Spend, TokenBucket};

/// What the invariants' own panics start with, so that a twin is rejected on it alone.
const VIOLATION: &str = "VIOLATION";

/// `T` = 1 ms (µs), burst 100.
const T: u64 = 1_000;
/// Every request's local time, µs: a client's clock standing still (the timeline itself).
const NOW: u64 = 1_000_000;
/// Hashes homed at slot 0 of a 2-slot shard, with distinct fingerprints.
const A: u64 = 1;
const B: u64 = 2;
const FILLER: u64 = 3;

fn table(faults: LeaseFaults) -> LeaseTable {
    let quota = Quota::new(1, Duration::from_micros(T))
        .and_then(|quota| quota.with_burst(100))
        .expect("a valid quota");
    let rule = LeaseRule::Bucket {
        bucket: TokenBucket::new(quota).expect("a valid bucket"),
        interval: T,
        tolerance: 100 * T,
    };
    let sizing = Sizing {
        max_lease: 10,
        interval: 100_000,
        margin: false,
    };
    LeaseTable::new(rule, sizing, 1)
        .expect("a table for one key")
        .with_faults(faults)
}

/// Gives `hash`'s key a lease of `units` slots: its first request's round trip, answered with
/// the request's slot at `NOW` and `units` more after it.
fn lease(table: &LeaseTable, hash: u64, units: u64) {
    let ask = match table.spend(hash, NOW, 1) {
        Spend::Ask(ask) => ask,
        other => panic!("setup: a new key asks Redis, not {other:?}"),
    };
    let grant = Grant::Bucket {
        granted: 1 + units,
        start: NOW,
        now: NOW,
    };
    assert_eq!(
        table.install(hash, "key", &ask, &grant, NOW, NOW),
        Some(0),
        "setup: the lease is installed"
    );
}

fn admitted(spend: &Spend) -> bool {
    matches!(spend, Spend::Lease { decision, .. } if decision.is_allowed())
}

/// Invariant 1 on `faults`'s table: a lease of 2 slots, one spent; two threads spend one each.
fn two_spends_for_the_last_unit(faults: LeaseFaults) {
    loom::model(move || {
        let table = Arc::new(table(faults));
        lease(&table, A, 2);
        assert!(admitted(&table.spend(A, NOW, 1)), "setup: one unit spent");
        let spends: Vec<_> = (0..2)
            .map(|_| {
                let table = Arc::clone(&table);
                thread::spawn(move || table.spend(A, NOW, 1))
            })
            .collect();
        let admissions = spends
            .into_iter()
            .map(|spend| spend.join().expect("no panic"))
            .filter(admitted)
            .count();
        assert!(
            admissions == 1,
            "{VIOLATION}: {admissions} spends admitted from the lease's last unit"
        );
    });
}

#[test]
fn two_spends_racing_for_the_last_unit_admit_one() {
    two_spends_for_the_last_unit(LeaseFaults::NONE);
}

#[test]
fn a_spend_stored_under_another_acquisition_of_the_lock_is_rejected() {
    assert_violation(VIOLATION, "unlock_before_record", || {
        two_spends_for_the_last_unit(LeaseFaults::NONE.unlock_before_record());
    });
}

/// Invariant 2 on `faults`'s table: a lease of 2 slots; the spend of the first asks for a
/// refresh (half of the lease is left); one thread spends the last unit while another installs
/// the refresh's reply, 2 slots right after the lease. Then the key spends until refused.
fn a_spend_and_an_install(faults: LeaseFaults) {
    loom::model(move || {
        let table = Arc::new(table(faults));
        lease(&table, A, 2);
        let refresh = match table.spend(A, NOW, 1) {
            Spend::Lease {
                decision,
                refresh: Some(refresh),
            } if decision.is_allowed() => refresh,
            other => panic!("setup: a spend that asks for a refresh, not {other:?}"),
        };
        let spend = {
            let table = Arc::clone(&table);
            thread::spawn(move || table.spend(A, NOW, 1))
        };
        let install = {
            let table = Arc::clone(&table);
            thread::spawn(move || {
                let grant = Grant::Bucket {
                    granted: 2,
                    start: NOW + 3 * T,
                    now: NOW,
                };
                table.install(A, "key", &refresh, &grant, NOW, NOW)
            })
        };
        let mut admissions = usize::from(admitted(&spend.join().expect("no panic")));
        assert_eq!(
            install.join().expect("no panic"),
            Some(0),
            "the install keeps its range"
        );
        while admitted(&table.spend(A, NOW, 1)) {
            admissions += 1;
            assert!(
                admissions <= 4,
                "{VIOLATION}: more than the 3 units leased are spent"
            );
        }
        assert!(
            admissions == 3,
            "{VIOLATION}: {admissions} units spent of the 3 leased"
        );
    });
}

#[test]
fn a_spend_racing_a_refresh_keeps_both() {
    a_spend_and_an_install(LeaseFaults::NONE);
}

#[test]
fn an_install_onto_the_state_its_ask_saw_is_rejected() {
    assert_violation(VIOLATION, "install_from_snapshot", || {
        a_spend_and_an_install(LeaseFaults::NONE.install_from_snapshot());
    });
}

/// Invariant 3 on `faults`'s table: the filler holds a lease (its slot is busy); key `A` asked
/// twice, its sized ask ended without a reply (so `A` is idle, holding nothing) and its other
/// ask's reply, Redis's refusal (the bucket is empty), is installed while new key `B`, homed at
/// `A`'s slot, takes it over. Then `B` is asked for again.
fn an_install_and_a_reuse(faults: LeaseFaults) {
    loom::model(move || {
        let table = Arc::new(table(faults));
        lease(&table, FILLER, 5);
        let sized = match table.spend(A, NOW, 1) {
            Spend::Ask(ask) if ask.sized => ask,
            other => panic!("setup: the key's sized ask, not {other:?}"),
        };
        let other = match table.spend(A, NOW, 1) {
            Spend::Ask(ask) if !ask.sized => ask,
            other => panic!("setup: an ask of the request alone, not {other:?}"),
        };
        let _ = sized;
        table.abandon(A);
        let install = {
            let table = Arc::clone(&table);
            thread::spawn(move || {
                let refused = Grant::Bucket {
                    granted: 0,
                    start: NOW + 100 * T,
                    now: NOW,
                };
                table.install(A, "a", &other, &refused, NOW, NOW)
            })
        };
        let reuse = {
            let table = Arc::clone(&table);
            thread::spawn(move || table.spend(B, NOW, 1))
        };
        let _ = install.join().expect("no panic");
        assert!(
            matches!(reuse.join().expect("no panic"), Spend::Ask(_)),
            "setup: a new key asks Redis"
        );
        let again = table.spend(B, NOW, 1);
        assert!(
            matches!(again, Spend::Ask(_)),
            "{VIOLATION}: the new key was decided on the other key's reply: {again:?}"
        );
    });
}

#[test]
fn an_install_never_lands_on_the_key_that_took_its_slot() {
    an_install_and_a_reuse(LeaseFaults::NONE);
}

#[test]
fn an_install_that_does_not_recheck_its_slot_is_rejected() {
    assert_violation(VIOLATION, "skip_key_recheck", || {
        an_install_and_a_reuse(LeaseFaults::NONE.skip_key_recheck());
    });
}
