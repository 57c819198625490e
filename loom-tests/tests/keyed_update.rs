//! loom models of a decision racing a reclaim of its key's slot: the decision's CAS covers the
//! whole 128-bit word (tag and state), so if another key took the slot in between the CAS fails
//! and the key is looked up again (`src/keyed/shard.rs`, `Shard::update`). No key is ever
//! charged for another key's request.
//!
//! The table has 2 slots (one key's capacity). Key `A` holds slot 0 and is idle; key `B` is
//! chosen with its home at slot 0 too, so its chain is `A`'s slot (idle: reclaimable) before
//! the empty slot 1. Thread 1 decides for `A` while thread 2 inserts `B`, which reclaims `A`'s
//! slot if it gets there before `A`'s charge; `A` then comes back fresh in slot 1. In the
//! three-thread model, thread 3 inserts `C`, also homed at slot 0.
//!
//! Compiled only under `--cfg tollgate_loom` (the attribute below comes after these docs so
//! that the crate keeps them, and `missing_docs` stays quiet, when the cfg strips it).
#![cfg(tollgate_loom)]

use std::time::Duration;

use loom_tests::{ms, KeyedModel, KeyedRequest, Placement};
use tollgate::{Faults, Outcome, Quota, TokenBucket};

/// One key per table: 2 slots.
const CAPACITY: usize = 1;

/// The broken twin: a decision's CAS that fails retries on whatever the slot now holds, without
/// checking that it is still the same key.
const UPDATE_IGNORES_KEY: Faults = Faults {
    update_ignores_key: true,
    ..Faults::NONE
};

/// Quota 1 per second, burst 1. `A` (home 0) takes 1 s of debt at 0: idle at 1 s. Thread 1
/// asks for `A` at 1 s, and one more thread for each of `new_keys` new keys, all homed at 0, at
/// 1 s. Then every key is asked again at 1 s.
fn update_against_reclaim(new_keys: usize) -> Result<KeyedModel<TokenBucket>, Box<dyn std::error::Error>> {
    let placement = Placement::for_capacity(CAPACITY);
    let mut keys = vec![placement.key_at(0, &[])];
    for _ in 0..new_keys {
        keys.push(placement.key_at(0, &keys));
    }
    let mut model = KeyedModel::new(TokenBucket::new(Quota::per_second(1)?)?, CAPACITY)
        .setup(&[KeyedRequest::at(keys[0], ms(0))]);
    for &key in &keys {
        model = model.thread(&[KeyedRequest::at(key, ms(1000))]);
    }
    let after: Vec<_> = keys.iter().map(|&key| KeyedRequest::at(key, ms(1000))).collect();
    let model = model.after(&after);
    // By hand: two slots, and `A` at 1 s with a full bucket decides exactly as a fresh key. The
    // first two keys to be charged hold the two slots (a new key reclaims idle `A`'s slot, and
    // `A` comes back fresh in the other; or `A` is charged first and a new key takes the empty
    // slot); a third finds both busy (`TableFull`). Each admitted request is answered as a fresh
    // key's (nothing left, full again in 1 s), each admitted key asked again at 1 s is denied as
    // a key with one charge is (retry in 1 s), a refused key is still refused.
    let allowed = model.allowed_outcomes();
    assert!(!allowed.is_empty());
    for outcome in &allowed {
        assert_eq!((outcome.setup_len, outcome.len), (1, 2), "{outcome:#?}");
        let admitted = keys.iter().filter(|&&key| outcome.admitted(key) == 1).count();
        assert_eq!(admitted, 2.min(keys.len()), "{outcome:#?}");
        for ((_, now), (_, later)) in outcome.threads.iter().flatten().zip(&outcome.after) {
            if now.outcome == Outcome::Allowed {
                assert_eq!((now.remaining, now.reset_after), (0, Duration::from_secs(1)));
                assert_eq!(
                    (later.outcome, later.retry_after),
                    (Outcome::Denied, Duration::from_secs(1))
                );
            } else {
                assert_eq!(
                    (now.outcome, later.outcome),
                    (Outcome::TableFull, Outcome::TableFull)
                );
            }
        }
    }
    Ok(model)
}

/// Invariant: in every execution, thread 1's charge lands on `A` (in its slot, or in a fresh
/// entry if `B` reclaimed the slot first), never on `B`: both keys are admitted, each answered
/// as a fresh key and afterwards as a key with exactly one charge; `len()` is 2.
#[test]
fn a_decision_never_charges_the_key_that_reclaimed_its_slot() -> Result<(), Box<dyn std::error::Error>> {
    update_against_reclaim(1)?.check();
    Ok(())
}

/// Its broken twin retries a failed decision CAS on whatever word the slot holds: loom finds
/// the execution where `B` has reclaimed and been promoted in `A`'s slot between `A`'s read and
/// `A`'s CAS, and `A`'s request is charged to `B` (or decided on `B`'s debt).
#[test]
fn update_ignores_key_twin_is_rejected() -> Result<(), Box<dyn std::error::Error>> {
    update_against_reclaim(1)?.assert_rejected(UPDATE_IGNORES_KEY);
    Ok(())
}

/// The same with three threads: `A` decided while new keys `B` and `C`, both homed at `A`'s
/// slot, insert. Invariant: exactly two of the three are admitted, each charged once with its
/// own request (answered as fresh, then as once charged); the third gets `TableFull`.
#[test]
fn three_threads_a_decision_never_charges_another_key() -> Result<(), Box<dyn std::error::Error>> {
    update_against_reclaim(2)?.check();
    Ok(())
}

/// Its broken twin, as for two threads.
#[test]
fn three_threads_update_ignores_key_twin_is_rejected() -> Result<(), Box<dyn std::error::Error>> {
    update_against_reclaim(2)?.assert_rejected(UPDATE_IGNORES_KEY);
    Ok(())
}
