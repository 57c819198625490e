//! loom models of an insert reclaiming a slot while the key in it is charged: a member may be
//! claimed for a new key only while its state is idle, and a decision for it that lands first
//! makes it busy, so the claim fails (`src/keyed/shard.rs`: "Inserting", the idle check in
//! `find_or_insert`; the claim is a CAS on the whole word, so it fails if the state changed).
//!
//! The table has 2 slots (one key's capacity), both full: key `A`, and a filler `F` that carries
//! debt throughout (a request at 1 s takes it to 2 s). Thread 1 charges `A` while thread 2 asks
//! for a new key `B` (and, in the three-thread model, thread 3 for a new key `C`), which can
//! have only `A`'s slot, and only while `A` is idle. Every slot of a new key's chain holds a key,
//! so where the keys' homes are does not matter.
//!
//! Compiled only under `--cfg tollgate_loom` (the attribute below comes after these docs so
//! that the crate keeps them, and `missing_docs` stays quiet, when the cfg strips it).
#![cfg(tollgate_loom)]

use loom_tests::{ms, KeyedModel, KeyedOutcome, KeyedRequest};
use tollgate::{Faults, Outcome, Quota, TokenBucket};

/// One key per table: 2 slots.
const CAPACITY: usize = 1;

const F: u64 = 1;
const A: u64 = 2;
const B: u64 = 3;
const C: u64 = 4;

/// The broken twin: a member may be reclaimed while it still carries debt.
const RECLAIM_BUSY: Faults = Faults {
    reclaim_busy: true,
    ..Faults::NONE
};

/// Checks, on every outcome the specification allows, what `setup` must leave: both slots
/// held, every setup request admitted.
fn assert_full_after_setup(allowed: &[KeyedOutcome]) {
    assert!(!allowed.is_empty());
    for outcome in allowed {
        assert_eq!(outcome.setup_len, 2, "{outcome:#?}");
        assert!(outcome
            .setup
            .iter()
            .all(|(_, answer)| answer.outcome == Outcome::Allowed));
    }
}

/// Quota 1 per second, burst 1. `F` takes debt at 1 s (to 2 s), `A` at 0 (to 1 s): at 1 s `A`
/// is idle, its bucket full again. Thread 1 asks for `A` at 1 s, and one more thread for each
/// of `new_keys` at 1 s. Then `A`, each new key and `F` are asked again at 1 s.
fn idle_key(new_keys: &[u64]) -> Result<KeyedModel<TokenBucket>, Box<dyn std::error::Error>> {
    let mut model = KeyedModel::new(TokenBucket::new(Quota::per_second(1)?)?, CAPACITY)
        .setup(&[KeyedRequest::at(F, ms(1000)), KeyedRequest::at(A, ms(0))])
        .thread(&[KeyedRequest::at(A, ms(1000))]);
    for &key in new_keys {
        model = model.thread(&[KeyedRequest::at(key, ms(1000))]);
    }
    let contenders: Vec<u64> = [A].iter().chain(new_keys).copied().collect();
    let after: Vec<_> = contenders
        .iter()
        .chain(&[F])
        .map(|&key| KeyedRequest::at(key, ms(1000)))
        .collect();
    let model = model.after(&after);
    // By hand: one slot can be had, `A`'s, and only while `A` is idle. If `A` is charged first
    // it is busy (to 2 s) and the new keys find no room (`TableFull`); if a new key reclaims
    // `A`'s slot first and is charged, `A`, now absent, and the other new keys find no room. So
    // exactly one contender is admitted, the others get `TableFull`; afterwards the admitted one
    // is denied (its own single charge), the others still find no room; `F` keeps its debt.
    let allowed = model.allowed_outcomes();
    assert_full_after_setup(&allowed);
    for outcome in &allowed {
        assert_eq!(outcome.len, 2, "{outcome:#?}");
        let winners: Vec<_> = contenders
            .iter()
            .filter(|&&key| outcome.admitted(key) == 1)
            .collect();
        assert_eq!(winners.len(), 1, "{outcome:#?}");
        let mut after = Vec::new();
        for &key in &contenders {
            let (now, later) = match outcome.admitted(key) {
                1 => (Outcome::Allowed, Outcome::Denied),
                _ => (Outcome::TableFull, Outcome::TableFull),
            };
            assert_eq!(outcome.outcomes(key), [now], "{outcome:#?}");
            after.push(later);
        }
        after.push(Outcome::Denied);
        assert_eq!(outcome.after_outcomes(), after, "{outcome:#?}");
    }
    Ok(model)
}

/// Quota 1 per second, burst 2 (`A` may run 2 s ahead). `F` takes 2 s of debt at 0, `A` 1 s at
/// 0. At 0.5 s both still carry debt: thread 1 charges `A` once more (to 2 s, admitted), thread
/// 2 asks for `B`. Then `A`, `B` and `F` are each asked again at 0.5 s.
fn key_with_debt() -> Result<KeyedModel<TokenBucket>, Box<dyn std::error::Error>> {
    let model = KeyedModel::new(TokenBucket::new(Quota::per_second(1)?.with_burst(2)?)?, CAPACITY)
        .setup(&[KeyedRequest::weighted(F, 2, ms(0)), KeyedRequest::at(A, ms(0))])
        .thread(&[KeyedRequest::at(A, ms(500))])
        .thread(&[KeyedRequest::at(B, ms(500))])
        .after(&[
            KeyedRequest::at(A, ms(500)),
            KeyedRequest::at(B, ms(500)),
            KeyedRequest::at(F, ms(500)),
        ]);
    // By hand: whatever the order, `B` finds both keys in debt (`TableFull`, before and after
    // the threads), `A` is admitted and then, 1.5 s in debt, denied; `F`, 1.5 s in debt, denied.
    let allowed = model.allowed_outcomes();
    assert_full_after_setup(&allowed);
    for outcome in &allowed {
        assert_eq!(outcome.len, 2, "{outcome:#?}");
        assert_eq!(outcome.outcomes(A), [Outcome::Allowed], "{outcome:#?}");
        assert_eq!(outcome.outcomes(B), [Outcome::TableFull], "{outcome:#?}");
        assert_eq!(
            outcome.after_outcomes(),
            [Outcome::Denied, Outcome::TableFull, Outcome::Denied],
            "{outcome:#?}"
        );
    }
    Ok(model)
}

/// Invariant: in every execution, exactly one of `A` (charged) and `B` (inserted) is admitted,
/// the other gets `TableFull`; each key's later answers are its own (the admitted one carries
/// exactly its one charge, `F` its debt); `len()` is 2, the table's slots. No key is charged for
/// another's request and none admitted more than it alone would be.
#[test]
fn insert_reclaims_only_an_idle_key() -> Result<(), Box<dyn std::error::Error>> {
    idle_key(&[B])?.check();
    Ok(())
}

/// Its broken twin reclaims busy members too: loom finds an execution where `B` takes a slot
/// whose key carries debt (`A`'s once charged, or `F`'s): both `A` and `B` are admitted, and the
/// evicted key's debt is lost.
#[test]
fn insert_reclaims_only_an_idle_key_reclaim_busy_twin_is_rejected() -> Result<(), Box<dyn std::error::Error>>
{
    idle_key(&[B])?.assert_rejected(RECLAIM_BUSY);
    Ok(())
}

/// The same with three threads: `A` charged while `B` and `C` both try to insert. Invariant:
/// exactly one of `A`, `B`, `C` is admitted, the others get `TableFull`, as above.
#[test]
fn three_threads_insert_reclaims_only_an_idle_key() -> Result<(), Box<dyn std::error::Error>> {
    idle_key(&[B, C])?.check();
    Ok(())
}

/// Its broken twin, as for two threads.
#[test]
fn three_threads_reclaim_busy_twin_is_rejected() -> Result<(), Box<dyn std::error::Error>> {
    idle_key(&[B, C])?.assert_rejected(RECLAIM_BUSY);
    Ok(())
}

/// Invariant: in every execution, `B` gets `TableFull` and `A` keeps its debt (admitted once,
/// then denied); `F` keeps its debt; `len()` is 2.
#[test]
fn insert_never_reclaims_a_key_with_debt() -> Result<(), Box<dyn std::error::Error>> {
    key_with_debt()?.check();
    Ok(())
}

/// Its broken twin reclaims a key with debt: `B` is admitted, and the evicted key's debt is
/// lost.
#[test]
fn insert_never_reclaims_a_key_with_debt_reclaim_busy_twin_is_rejected(
) -> Result<(), Box<dyn std::error::Error>> {
    key_with_debt()?.assert_rejected(RECLAIM_BUSY);
    Ok(())
}
