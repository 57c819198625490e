//! loom models of a new key meeting other keys' claims in flight (slots `Inserting`) in the keyed
//! table: each states the property it checks and the execution that breaks it.
//!
//! Both properties concern what a new key's scan (`Shard::find_or_insert`) makes of slots another
//! key is inserting into. The table keeps them with two rules: a scan that finds no room while
//! another key's claim is in flight waits for it (a bounded number of rescans) before calling the
//! table full; and whoever promotes a claim applies its own request in the promoting CAS, so a
//! member is never fresh (idle) before its first charge.
//!
//! - **A new key is refused room only when no slot it could use is free or idle.** A scan that
//!   passed over another key's `Inserting` claim as over a busy member (`Status::Member |
//!   Status::Inserting => {}`), and answered "full" (`target?`) when nothing else is free, would
//!   refuse it wrongly: that claim may be about to die (a losing claim becomes `Dead`: free; this
//!   needs no clock skew), or be a key whose state will be idle at the scanning request's time (a
//!   request stamped earlier than the scan's). The new key would get `TableFull` (or, with
//!   `WhenFull::Admit`, be admitted untracked, uncounted) while the table has room for it: no
//!   sequential order does that, and the documented contract is that the policy applies when
//!   "every slot it could use holds a key that is still being limited".
//! - **Two inserts never take one slot from each other forever.** If a promoted member held
//!   `FRESH_STATE` until its inserter's first decision landed, another key's inserter could
//!   reclaim it in between (a fresh state is idle at any time); the first inserter's decision
//!   would then fail (`Moved`), and it would reclaim the other's fresh member in turn. Each round
//!   needs each thread preempted between its promotion and its decision, so it would be vanishingly
//!   rare on hardware, but it is an infinite execution in which no request completes: insertion
//!   would be obstruction-free, not lock-free as `src/keyed/shard.rs` and `docs/design.md` say.
//!   Explored without a bound, loom stops on it with "Model exceeded maximum number of branches".
//!
//! Compiled only under `--cfg tollgate_loom` (the attribute below comes after these docs so
//! that the crate keeps them, and `missing_docs` stays quiet, when the cfg strips it).
#![cfg(tollgate_loom)]

use loom_tests::{ms, KeyedModel, KeyedRequest, Placement};
use tollgate::{Faults, Outcome, Quota, TokenBucket, WhenFull};

/// One key per table: 2 slots.
const CAPACITY: usize = 1;

/// Quota 1 per second, burst 1. Keys `a` and `b` homed at slot 0, `c` at slot 1. Setup: `a` at
/// 0 (slot 0, debt to 1 s), `b` at 0.5 s (slot 0 is busy: slot 1, debt to 1.5 s): the table is
/// full. Then thread 1 asks for `a` at 0 and thread 2 for `c` at 1 s, when `a` is idle. Then
/// `a`, `b` and `c` are asked at 1 s. Explored with 3 preemptions, whatever
/// `LOOM_MAX_PREEMPTIONS` says.
///
/// By hand: `c` always has room, since `a` (or a fresh `a` that a request at 0 put back: its
/// state runs to 1 s at most) is idle at 1 s and `c` may take its slot; so `c` is admitted in
/// every allowed outcome. A table with neither rule refuses it: `c` reclaims idle `a`'s slot and
/// is promoted;
/// before `c` decides, thread 1's `a` (absent now) reclaims `c`'s fresh member (fresh is idle at
/// 0 too); `c`'s decision fails, and its new scan meets `b` (busy) and `a`'s claim, which it
/// counts as busy: `TableFull`, though `a`, once in, decides at 0 and is idle at 1 s.
fn refused_beside_an_idle_claim(
    when_full: WhenFull,
) -> Result<KeyedModel<TokenBucket>, Box<dyn std::error::Error>> {
    let placement = Placement::for_capacity(CAPACITY);
    let a = placement.key_at(0, &[]);
    let b = placement.key_at(0, &[a]);
    let c = placement.key_at(1, &[a, b]);
    let model = KeyedModel::new(TokenBucket::new(Quota::per_second(1)?)?, CAPACITY)
        .when_full(when_full)
        .setup(&[KeyedRequest::at(a, ms(0)), KeyedRequest::at(b, ms(500))])
        .thread(&[KeyedRequest::at(a, ms(0))])
        .thread(&[KeyedRequest::at(c, ms(1000))])
        .after(&[
            KeyedRequest::at(a, ms(1000)),
            KeyedRequest::at(b, ms(1000)),
            KeyedRequest::at(c, ms(1000)),
        ])
        .fixed_preemption_bound(Some(3));
    let allowed = model.allowed_outcomes();
    assert!(!allowed.is_empty());
    for outcome in &allowed {
        assert_eq!(outcome.setup_len, 2, "{outcome:#?}");
        assert_eq!(outcome.outcomes(c), [Outcome::Allowed], "{outcome:#?}");
    }
    Ok(model)
}

/// Property (refusing when full): a new key is refused only when no slot it could use is free
/// or idle. A table with neither rule fails it: loom finds `c` refused with `TableFull` (see
/// `refused_beside_an_idle_claim`).
#[test]
fn a_new_key_is_refused_only_when_every_key_has_debt() -> Result<(), Box<dyn std::error::Error>> {
    refused_beside_an_idle_claim(WhenFull::Refuse)?.check();
    Ok(())
}

/// Property (admitting when full): a new key is admitted untracked only when no slot it could
/// use is free or idle. A table with neither rule fails it: loom finds `c` admitted untracked,
/// so uncounted.
#[test]
fn a_new_key_is_untracked_only_when_every_key_has_debt() -> Result<(), Box<dyn std::error::Error>> {
    refused_beside_an_idle_claim(WhenFull::Admit)?.check();
    Ok(())
}

/// Quota 1 per second, burst 1. Keys `A` and `B` homed at slot 0. Setup: `A` at 0 (slot 0, debt
/// to 1 s). Threads ask for `A` at 1 s, `A` at 1 s again and `B` at 1 s, all at the same instant:
/// no clock skew. Then `A` and `B` are asked at 1 s. Explored with 5 preemptions, whatever
/// `LOOM_MAX_PREEMPTIONS` says (the failing execution needs 5).
///
/// By hand: two slots and two keys, so `B` always has room and is admitted in every allowed
/// outcome (and `A` exactly once). A table with neither rule refuses it: `B` reclaims idle `A`'s
/// slot 0;
/// one `A` thread reads slot 0 as `B`'s claim (busy) and picks the empty slot 1; `B` is
/// promoted; the other `A` thread reads slot 0 as `B`'s fresh member (idle) and claims it; the
/// first claims slot 1. `B`'s decision fails (`Moved`), and its new scan finds two `Inserting`
/// claims of `A`: `TableFull`. `A`'s settle then kills the claim in slot 1 (`Dead`: free).
fn refused_beside_a_losing_claim() -> Result<KeyedModel<TokenBucket>, Box<dyn std::error::Error>> {
    let placement = Placement::for_capacity(CAPACITY);
    let a = placement.key_at(0, &[]);
    let b = placement.key_at(0, &[a]);
    let model = KeyedModel::new(TokenBucket::new(Quota::per_second(1)?)?, CAPACITY)
        .setup(&[KeyedRequest::at(a, ms(0))])
        .thread(&[KeyedRequest::at(a, ms(1000))])
        .thread(&[KeyedRequest::at(a, ms(1000))])
        .thread(&[KeyedRequest::at(b, ms(1000))])
        .after(&[KeyedRequest::at(a, ms(1000)), KeyedRequest::at(b, ms(1000))])
        .fixed_preemption_bound(Some(5));
    let allowed = model.allowed_outcomes();
    assert!(!allowed.is_empty());
    for outcome in &allowed {
        assert_eq!(outcome.admitted(a), 1, "{outcome:#?}");
        assert_eq!(outcome.outcomes(b), [Outcome::Allowed], "{outcome:#?}");
    }
    Ok(model)
}

/// Property: a losing claim, which is about to die, does not make a new key's request find the
/// table full. A table with neither rule fails it: loom finds `B` refused with `TableFull` (see
/// `refused_beside_a_losing_claim`), in about 10 s.
#[test]
fn a_losing_claim_does_not_fill_the_table() -> Result<(), Box<dyn std::error::Error>> {
    refused_beside_a_losing_claim()?.check();
    Ok(())
}

/// Property: every execution ends (insertion is lock-free), checked by exploring the
/// update-versus-reclaim model of `tests/keyed_update.rs` without a preemption bound. Without
/// the promotion rule, loom stops with "Model exceeded maximum number of branches" on an
/// execution where `A` and `B` take slot 0 from each other's fresh member over and over.
#[test]
fn every_execution_of_an_insert_racing_a_reclaim_ends() -> Result<(), Box<dyn std::error::Error>> {
    let placement = Placement::for_capacity(CAPACITY);
    let a = placement.key_at(0, &[]);
    let b = placement.key_at(0, &[a]);
    KeyedModel::new(TokenBucket::new(Quota::per_second(1)?)?, CAPACITY)
        .setup(&[KeyedRequest::at(a, ms(0))])
        .thread(&[KeyedRequest::at(a, ms(1000))])
        .thread(&[KeyedRequest::at(b, ms(1000))])
        .fixed_preemption_bound(None)
        .check();
    Ok(())
}

/// Quota 1 per second, burst 1. Keys `F`, `K` and `B` homed at slot 0. Setup: `F` at 0 (slot 0,
/// debt to 1 s). Threads ask for `K` at 0.5 s, `K` at 1 s and `B` at 1 s. Then `K` and `B` are
/// asked at 1 s. Explored with 3 preemptions, whatever `LOOM_MAX_PREEMPTIONS` says: loom lets
/// a new key wait for claims twice (`MAX_WAITS_FOR_CLAIMS`), and with 4 preemptions the claims
/// can stay in flight longer than that (the documented limit: an inserter descheduled for
/// longer than the waits is told the table is full).
///
/// By hand: `K` ends with one entry, so one of the two slots is always free or idle at 1 s for
/// `B` (`F` is idle at 1 s): `B` is admitted in every allowed outcome, `K` exactly once. The
/// table without the wait refuses it: `K`'s two claims (one reclaiming `F`'s slot, one in the
/// empty slot) hold both slots while `B` scans, and `B` is told `TableFull` though one of them
/// is about to die. Independent of the promotion rule (the models above fail only without both
/// rules); this one fails without the wait alone.
fn new_key_beside_two_claims_of_one_key() -> Result<KeyedModel<TokenBucket>, Box<dyn std::error::Error>> {
    let placement = Placement::for_capacity(CAPACITY);
    let f = placement.key_at(0, &[]);
    let k = placement.key_at(0, &[f]);
    let b = placement.key_at(0, &[f, k]);
    let model = KeyedModel::new(TokenBucket::new(Quota::per_second(1)?)?, CAPACITY)
        .setup(&[KeyedRequest::at(f, ms(0))])
        .thread(&[KeyedRequest::at(k, ms(500))])
        .thread(&[KeyedRequest::at(k, ms(1000))])
        .thread(&[KeyedRequest::at(b, ms(1000))])
        .after(&[KeyedRequest::at(k, ms(1000)), KeyedRequest::at(b, ms(1000))])
        .fixed_preemption_bound(Some(3));
    let allowed = model.allowed_outcomes();
    assert!(!allowed.is_empty());
    for outcome in &allowed {
        assert_eq!(outcome.outcomes(b), [Outcome::Allowed], "{outcome:#?}");
        assert_eq!(outcome.admitted(k), 1, "{outcome:#?}");
    }
    Ok(model)
}

/// Property: a new key is not refused room while the only claims in its way are two claims of
/// one other key, one of which must die (the wait for claims in flight, on its own).
#[test]
fn a_new_key_waits_for_another_keys_racing_claims() -> Result<(), Box<dyn std::error::Error>> {
    new_key_beside_two_claims_of_one_key()?.check();
    Ok(())
}

/// Its broken twin calls the table full at once instead of waiting for the claims: loom finds
/// `B` refused with `TableFull` while one of `K`'s claims is about to die.
#[test]
fn a_new_key_waits_no_wait_twin_is_rejected() -> Result<(), Box<dyn std::error::Error>> {
    new_key_beside_two_claims_of_one_key()?.assert_rejected(Faults {
        no_wait_for_claims: true,
        ..Faults::NONE
    });
    Ok(())
}
