//! loom models of two new keys racing for the last free slot: a slot is claimed by a CAS from
//! the free word read, so of two claims of one slot exactly one succeeds and the other thread
//! looks again (`src/keyed/shard.rs`, `find_or_insert`).
//!
//! The table has 2 slots (one key's capacity): a filler `F` with debt throughout holds one, the
//! other is empty. Two threads each ask for a new key, `X` and `Y` (three threads: and `Z`), at
//! the same instant. Every chain reaches the empty slot (and `F`'s slot, busy), wherever the
//! homes are.
//!
//! Compiled only under `--cfg tollgate_loom` (the attribute below comes after these docs so
//! that the crate keeps them, and `missing_docs` stays quiet, when the cfg strips it).
#![cfg(tollgate_loom)]

use loom_tests::{ms, KeyedModel, KeyedRequest};
use tollgate::{Faults, Outcome, Quota, TokenBucket, WhenFull};

/// One key per table: 2 slots.
const CAPACITY: usize = 1;

const F: u64 = 1;
const X: u64 = 2;
const Y: u64 = 3;
const Z: u64 = 4;

/// The broken twin: a free slot is claimed by a plain store after reading it free.
const CLAIM_BY_STORE: Faults = Faults {
    claim_by_store: true,
    ..Faults::NONE
};

/// Quota 1 per second, burst 1. `F` takes 1 s of debt at 0. At 0.5 s one thread per key of
/// `contenders` asks for it; then each contender and `F` are asked again at 0.5 s. `when_full` is
/// what the table does with a new key when full; `full` the outcome it gives.
fn last_slot(
    when_full: WhenFull,
    full: Outcome,
    contenders: &[u64],
) -> Result<KeyedModel<TokenBucket>, Box<dyn std::error::Error>> {
    let mut model = KeyedModel::new(TokenBucket::new(Quota::per_second(1)?)?, CAPACITY)
        .when_full(when_full)
        .setup(&[KeyedRequest::at(F, ms(0))]);
    for &key in contenders {
        model = model.thread(&[KeyedRequest::at(key, ms(500))]);
    }
    let after: Vec<_> = contenders
        .iter()
        .chain(&[F])
        .map(|&key| KeyedRequest::at(key, ms(500)))
        .collect();
    let model = model.after(&after);
    // By hand: the first key to be charged holds the slot and is admitted (busy to 1.5 s); the
    // others find `F` and it busy: `full`. Afterwards the winner is denied (its own single
    // charge), the losers still get `full` (they were never stored), `F` is denied (its debt
    // kept).
    let allowed = model.allowed_outcomes();
    assert!(!allowed.is_empty());
    for outcome in &allowed {
        assert_eq!((outcome.setup_len, outcome.len), (1, 2), "{outcome:#?}");
        let winners = contenders
            .iter()
            .filter(|&&key| outcome.admitted(key) == 1)
            .count();
        assert_eq!(winners, 1, "{outcome:#?}");
        let mut after = Vec::new();
        for &key in contenders {
            let (now, later) = match outcome.admitted(key) {
                1 => (Outcome::Allowed, Outcome::Denied),
                _ => (full, full),
            };
            assert_eq!(outcome.outcomes(key), [now], "{outcome:#?}");
            after.push(later);
        }
        after.push(Outcome::Denied);
        assert_eq!(outcome.after_outcomes(), after, "{outcome:#?}");
    }
    Ok(model)
}

/// Invariant (refusing when full): in every execution exactly one of `X` and `Y` gets the slot
/// and is admitted, the other gets `TableFull`; the two never share the slot (the winner's later
/// answer is its own single charge's, the loser is still absent); `F` keeps its debt; `len()` is
/// 2, never more than the slots.
#[test]
fn one_key_gets_the_last_slot_refuse() -> Result<(), Box<dyn std::error::Error>> {
    last_slot(WhenFull::Refuse, Outcome::TableFull, &[X, Y])?.check();
    Ok(())
}

/// Its broken twin claims by store: loom finds an execution where a claim overwrites the other
/// key's claim or member (read free, or idle while fresh, then charged before the store): both
/// keys are admitted, and the overwritten key's charge is lost.
#[test]
fn one_key_gets_the_last_slot_refuse_claim_by_store_twin_is_rejected(
) -> Result<(), Box<dyn std::error::Error>> {
    last_slot(WhenFull::Refuse, Outcome::TableFull, &[X, Y])?.assert_rejected(CLAIM_BY_STORE);
    Ok(())
}

/// Invariant (admitting when full): as when refusing, but the loser is admitted untracked
/// (`AllowedUntracked`, with a fresh key's answer) and still untracked afterwards.
#[test]
fn one_key_gets_the_last_slot_admit() -> Result<(), Box<dyn std::error::Error>> {
    last_slot(WhenFull::Admit, Outcome::AllowedUntracked, &[X, Y])?.check();
    Ok(())
}

/// Its broken twin claims by store, as when refusing.
#[test]
fn one_key_gets_the_last_slot_admit_claim_by_store_twin_is_rejected() -> Result<(), Box<dyn std::error::Error>>
{
    last_slot(WhenFull::Admit, Outcome::AllowedUntracked, &[X, Y])?.assert_rejected(CLAIM_BY_STORE);
    Ok(())
}

/// Three keys, `X`, `Y` and `Z`, race for the last slot (refusing when full). Invariant: exactly
/// one is admitted, the other two get `TableFull`, as above.
#[test]
fn three_threads_one_key_gets_the_last_slot() -> Result<(), Box<dyn std::error::Error>> {
    last_slot(WhenFull::Refuse, Outcome::TableFull, &[X, Y, Z])?.check();
    Ok(())
}

/// Its broken twin claims by store, as for two threads.
#[test]
fn three_threads_claim_by_store_twin_is_rejected() -> Result<(), Box<dyn std::error::Error>> {
    last_slot(WhenFull::Refuse, Outcome::TableFull, &[X, Y, Z])?.assert_rejected(CLAIM_BY_STORE);
    Ok(())
}
