//! loom models of concurrent inserts of one new key: the claims of one key race, and exactly one
//! becomes its `Member` (`src/keyed/shard.rs`, "Settling"); and, at an empty home, the CASes
//! from `Empty` that need no claim (`Shard::insert_at_empty_home`).
//!
//! Two claims of one key exist only when the inserting threads see the chain differently. Here
//! that comes from time: a filler key `F`, at the new key `K`'s home slot, has 1 s of debt from
//! 0, so it is busy for a request at 0.5 s and idle for one at 1 s. The 0.5 s request passes it
//! and claims the empty slot after it; the 1 s request claims `F`'s slot (reclaiming it). The
//! settle must kill one claim and make the other the only member.
//!
//! Quota: 1 per second, burst 1 (`T` = 1 s, one request at a time).
//!
//! Compiled only under `--cfg tollgate_loom` (the attribute below comes after these docs so
//! that the crate keeps them, and `missing_docs` stays quiet, when the cfg strips it).
#![cfg(tollgate_loom)]

use loom_tests::{ms, KeyedModel, KeyedRequest, Placement};
use tollgate::{Faults, Outcome, Quota, TokenBucket};

/// One key per table: 2 slots.
const CAPACITY: usize = 1;

/// The broken twin: the 0.5 s request claims the slot after `F`'s (one slot from `K`'s home)
/// without raising the home's reach from 0 first.
const CLAIM_OUT_OF_REACH: Faults = Faults {
    claim_out_of_reach: true,
    ..Faults::NONE
};

/// The broken twin: a claim is promoted at once, without settling against the key's other
/// claims.
const PROMOTE_UNSETTLED: Faults = Faults {
    promote_unsettled: true,
    ..Faults::NONE
};

/// The broken twin: a new key whose scan chose an empty slot becomes a member there at once even
/// past a used home (the reach raised first), as it does only at an empty home.
const INSERT_AT_ANY_EMPTY: Faults = Faults {
    insert_at_any_empty: true,
    ..Faults::NONE
};

/// The broken twin: a slot is taken by a plain store after reading it free, not by CAS (at an
/// empty home, by the insert that needs no claim).
const CLAIM_BY_STORE: Faults = Faults {
    claim_by_store: true,
    ..Faults::NONE
};

/// `F` and `K`, both homed at slot 0 (so `K`'s chain is `F`'s slot, then the empty slot 1).
fn keys() -> (u64, u64) {
    let placement = Placement::for_capacity(CAPACITY);
    let f = placement.key_at(0, &[]);
    (f, placement.key_at(0, &[f]))
}

/// `F` takes 1 s of debt at 0. Each thread then asks for `K` (at 0.5 s, at 1 s, and for three
/// threads at 1 s again); afterwards `F` is asked at 0.5 s (still in debt if it was kept).
fn model(threads: &[u64]) -> Result<KeyedModel<TokenBucket>, Box<dyn std::error::Error>> {
    let (f, k) = keys();
    let mut model = KeyedModel::new(TokenBucket::new(Quota::per_second(1)?)?, CAPACITY)
        .setup(&[KeyedRequest::at(f, ms(0))])
        .after(&[KeyedRequest::at(f, ms(500)), KeyedRequest::at(k, ms(1000))]);
    for &millis in threads {
        model = model.thread(&[KeyedRequest::at(k, ms(millis))]);
    }
    assert_invariant(&model, f, k);
    Ok(model)
}

/// What every allowed outcome satisfies, asserted on the specification's outcomes: `K` is
/// admitted exactly once (the first of its requests in any order: the 0.5 s one leaves its
/// bucket busy until 1.5 s, the 1 s one until 2 s), its other requests denied, never
/// `TableFull`; it has exactly one entry: `len()` is 2 if `F` was kept (then `F`, asked at 0.5 s,
/// is denied: its debt runs to 1 s) and 1 if `K` reclaimed `F` (then `F` comes back fresh and is
/// admitted); `K` asked again at 1 s is denied.
fn assert_invariant(model: &KeyedModel<TokenBucket>, f: u64, k: u64) {
    let allowed = model.allowed_outcomes();
    assert!(!allowed.is_empty());
    for outcome in &allowed {
        assert_eq!(outcome.setup_len, 1);
        assert_eq!(outcome.admitted(k), 1, "{outcome:#?}");
        assert!(outcome
            .outcomes(k)
            .iter()
            .all(|o| matches!(o, Outcome::Allowed | Outcome::Denied)));
        let f_kept = outcome.len == 2;
        assert!(f_kept || outcome.len == 1, "{outcome:#?}");
        let f_after = if f_kept { Outcome::Denied } else { Outcome::Allowed };
        assert_eq!(
            outcome.after_outcomes(),
            [f_after, Outcome::Denied],
            "{outcome:#?}"
        );
        assert_eq!(outcome.after[0].0, f);
    }
}

/// Two threads insert `K`. Invariant (see `assert_invariant`): in every execution, `K` ends with
/// exactly one entry and exactly one of its requests is admitted, as the specification allows.
#[test]
fn two_inserts_of_one_key_make_one_entry() -> Result<(), Box<dyn std::error::Error>> {
    model(&[500, 1000])?.check();
    Ok(())
}

/// Its broken twin promotes each claim at once: loom finds the execution where the 0.5 s thread
/// claims the empty slot and the 1 s thread `F`'s slot, and both become `K`'s members: `K` is
/// admitted twice.
#[test]
fn two_inserts_promote_unsettled_twin_is_rejected() -> Result<(), Box<dyn std::error::Error>> {
    model(&[500, 1000])?.assert_rejected(PROMOTE_UNSETTLED);
    Ok(())
}

/// Its broken twin claims slot 1 without raising the reach of `K`'s home: loom finds the
/// executions where the 1 s thread's scans stop at the home (reach 0), never see the 0.5 s
/// thread's claim or member in slot 1, and promote a second member for `K` in `F`'s slot: `K`
/// is admitted twice. (Sequentially too: that is what the reach is for.)
#[test]
fn two_inserts_claim_out_of_reach_twin_is_rejected() -> Result<(), Box<dyn std::error::Error>> {
    model(&[500, 1000])?.assert_rejected(CLAIM_OUT_OF_REACH);
    Ok(())
}

/// Its broken twin inserts without a claim past a used home: loom finds the execution where the
/// 1 s thread claims `F`'s idle slot and settles before the 0.5 s thread, which read `F` busy,
/// puts `K`'s member in the empty slot 1 by a CAS from `Empty`: `K` has two members and is admitted twice. (The
/// shipped table inserts without a claim only at an empty home, where no other claim of the key
/// can exist: `Shard::insert_at_empty_home`.)
#[test]
fn two_inserts_insert_at_any_empty_twin_is_rejected() -> Result<(), Box<dyn std::error::Error>> {
    model(&[500, 1000])?.assert_rejected(INSERT_AT_ANY_EMPTY);
    Ok(())
}

/// Threads that each ask for `K` at `at` (milliseconds) in an empty table of two slots, then `K`
/// is asked again at 0.5 s. A thread that reads `K`'s home empty inserts `K` without a claim,
/// racing the others' CASes from `Empty`; one that loses, or comes later, finds the winner's
/// member. Invariant: `K` is admitted exactly once (quota 1 per
/// second, burst 1: a second request before 1 s is refused), never `TableFull`, and ends with
/// exactly one entry: asked again at 0.5 s, it is denied.
fn empty_home_model(at: &[u64]) -> Result<KeyedModel<TokenBucket>, Box<dyn std::error::Error>> {
    let (_, k) = keys();
    let mut model = KeyedModel::new(TokenBucket::new(Quota::per_second(1)?)?, CAPACITY)
        .after(&[KeyedRequest::at(k, ms(500))]);
    for &millis in at {
        model = model.thread(&[KeyedRequest::at(k, ms(millis))]);
    }
    let allowed = model.allowed_outcomes();
    assert!(!allowed.is_empty());
    for outcome in &allowed {
        assert_eq!(outcome.admitted(k), 1, "{outcome:#?}");
        assert!(outcome
            .outcomes(k)
            .iter()
            .all(|o| matches!(o, Outcome::Allowed | Outcome::Denied)));
        assert_eq!(outcome.len, 1, "{outcome:#?}");
        assert_eq!(outcome.after_outcomes(), [Outcome::Denied], "{outcome:#?}");
    }
    Ok(model)
}

/// Two threads insert `K` at its empty home at the same instant: one entry, one admission.
#[test]
fn two_inserts_at_an_empty_home_make_one_entry() -> Result<(), Box<dyn std::error::Error>> {
    empty_home_model(&[0, 0])?.check();
    Ok(())
}

/// Its broken twin takes the empty home by a plain store: loom finds the execution where both
/// threads read it empty and both store a member: `K` is admitted twice.
#[test]
fn two_inserts_at_an_empty_home_claim_by_store_twin_is_rejected() -> Result<(), Box<dyn std::error::Error>> {
    empty_home_model(&[0, 0])?.assert_rejected(CLAIM_BY_STORE);
    Ok(())
}

/// Three threads insert `K` at its empty home (at 0, 0 and 0.5 s): whichever CAS from `Empty`
/// loses finds the winner's member.
#[test]
fn three_inserts_at_an_empty_home_make_one_entry() -> Result<(), Box<dyn std::error::Error>> {
    empty_home_model(&[0, 0, 500])?.check();
    Ok(())
}

/// Three threads insert `K` (at 0.5 s, 1 s, 1 s): the same invariant, with a third claim or a
/// helper settling the others' claims.
#[test]
fn three_inserts_of_one_key_make_one_entry() -> Result<(), Box<dyn std::error::Error>> {
    model(&[500, 1000, 1000])?.check();
    Ok(())
}

/// Its broken twin, as for two threads.
#[test]
fn three_inserts_promote_unsettled_twin_is_rejected() -> Result<(), Box<dyn std::error::Error>> {
    model(&[500, 1000, 1000])?.assert_rejected(PROMOTE_UNSETTLED);
    Ok(())
}

/// The broken twin of the three-slot model: a kill that fails because its claim was promoted
/// first counts as done.
const KILL_IGNORES_FAILURE: Faults = Faults {
    kill_ignores_failure: true,
    ..Faults::NONE
};

/// Three slots: fillers `F1` (slot 0, debt to 1.5 s) and `F2` (slot 1, debt to 1 s), and `K`,
/// all homed at slot 0; slot 2 empty. Then each thread asks for `K` (at 0.5 s, at 1 s, and for
/// three threads at 1 s again), and `K` is asked again at 1 s.
///
/// Unlike the two-slot model above, the claim in `F2`'s slot (idle at 1 s) is not at `K`'s home,
/// so the other claim's raise of the home's reach does not touch it: the settle can meet the
/// race the two-slot model never reaches, a kill that fails because the claim it targets was
/// just promoted by the other thread (`Shard::kill`, then a rescan). Invariant: `K` is admitted
/// exactly once and ends with one entry (asked again at 1 s, denied).
fn three_slot_model(threads: &[u64]) -> Result<KeyedModel<TokenBucket>, Box<dyn std::error::Error>> {
    let placement = Placement::for_capacity(2);
    assert_eq!(placement.slots(), 3);
    let f1 = placement.key_at(0, &[]);
    let f2 = placement.key_at(0, &[f1]);
    let k = placement.key_at(0, &[f1, f2]);
    let mut model = KeyedModel::new(TokenBucket::new(Quota::per_second(1)?)?, 2)
        .setup(&[KeyedRequest::at(f1, ms(500)), KeyedRequest::at(f2, ms(0))])
        .after(&[KeyedRequest::at(k, ms(1000))]);
    for &millis in threads {
        model = model.thread(&[KeyedRequest::at(k, ms(millis))]);
    }
    let allowed = model.allowed_outcomes();
    assert!(!allowed.is_empty());
    for outcome in &allowed {
        assert_eq!(outcome.admitted(k), 1, "{outcome:#?}");
        assert_eq!(outcome.after_outcomes(), [Outcome::Denied], "{outcome:#?}");
    }
    Ok(model)
}

/// Two threads insert `K` along a three-slot chain: one entry, one admission.
#[test]
fn two_inserts_along_three_slots_make_one_entry() -> Result<(), Box<dyn std::error::Error>> {
    three_slot_model(&[500, 1000])?.check();
    Ok(())
}

/// Its broken twin takes a failed kill for a done one: loom finds the execution where both
/// claims become members, `K` admitted twice and held in two slots. That execution needs 3
/// preemptions, so the twin's bound is fixed at 3 whatever `LOOM_MAX_PREEMPTIONS` says.
#[test]
fn two_inserts_along_three_slots_kill_ignores_failure_twin_is_rejected(
) -> Result<(), Box<dyn std::error::Error>> {
    three_slot_model(&[500, 1000])?
        .fixed_preemption_bound(Some(3))
        .assert_rejected(KILL_IGNORES_FAILURE);
    Ok(())
}

/// Three threads insert `K` along the three-slot chain (at 0.5 s, 1 s, 1 s).
#[test]
fn three_inserts_along_three_slots_make_one_entry() -> Result<(), Box<dyn std::error::Error>> {
    three_slot_model(&[500, 1000, 1000])?.check();
    Ok(())
}
