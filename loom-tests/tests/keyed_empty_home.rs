//! loom models of the insert at an empty home (`Shard::insert_at_empty_home`) in races the
//! two-slot models of `keyed_insert.rs` do not reach, where the empty home is also a slot on
//! another key's chain, and where the member made there is reclaimed while another request of
//! its key is still inserting.
//!
//! Quota: 1 per second, burst 1. Three slots (two keys' capacity).
#![cfg(tollgate_loom)]

use loom_tests::{ms, KeyedModel, KeyedRequest, Placement};
use tollgate::{Outcome, Quota, TokenBucket};

const CAPACITY: usize = 2;

/// `F` homed at slot 0 with debt to 1 s; `L` homed at 0 too (so its chain is `F`'s slot, then
/// slot 1); `K` homed at slot 1, empty. At 0.5 s `L`'s scan passes `F` and claims slot 1 while
/// `K`'s requests try to take slot 1 by the CAS from `Empty`: whichever loses goes on to slot 2.
fn crossed(k_threads: usize) -> Result<KeyedModel<TokenBucket>, Box<dyn std::error::Error>> {
    let placement = Placement::for_capacity(CAPACITY);
    assert_eq!(placement.slots(), 3);
    let f = placement.key_at(0, &[]);
    let l = placement.key_at(0, &[f]);
    let k = placement.key_at(1, &[f, l]);
    let mut model = KeyedModel::new(TokenBucket::new(Quota::per_second(1)?)?, CAPACITY)
        .setup(&[KeyedRequest::at(f, ms(0))])
        .thread(&[KeyedRequest::at(l, ms(500))]);
    for _ in 0..k_threads {
        model = model.thread(&[KeyedRequest::at(k, ms(500))]);
    }
    let model = model.after(&[
        KeyedRequest::at(k, ms(500)),
        KeyedRequest::at(l, ms(500)),
        KeyedRequest::at(f, ms(500)),
    ]);
    let allowed = model.allowed_outcomes();
    assert!(!allowed.is_empty());
    for outcome in &allowed {
        assert_eq!(outcome.admitted(k), 1, "{outcome:#?}");
        assert_eq!(outcome.admitted(l), 1, "{outcome:#?}");
        assert_eq!(outcome.len, 3, "{outcome:#?}");
        assert_eq!(
            outcome.after_outcomes(),
            [Outcome::Denied, Outcome::Denied, Outcome::Denied],
            "{outcome:#?}"
        );
    }
    Ok(model)
}

/// One thread for `K`, one for `L`: each key admitted once, three entries, all denied afterwards.
#[test]
fn an_empty_home_on_another_keys_chain_two_threads() -> Result<(), Box<dyn std::error::Error>> {
    crossed(1)?.check();
    Ok(())
}

/// Two threads for `K`, one for `L`: the same invariant.
#[test]
fn an_empty_home_on_another_keys_chain_three_threads() -> Result<(), Box<dyn std::error::Error>> {
    crossed(2)?.check();
    Ok(())
}

/// `F` homed at slot 0 with debt to 3 s; `K` and `M` homed at slot 1 (empty). Two requests for
/// `K` at 0.5 s (the first to land takes slot 1 by the CAS from `Empty`, busy to 1.5 s) race a
/// request for `M` at 2 s, which may reclaim `K`'s idle member at slot 1 while `K`'s other request
/// is still inserting (it then comes back fresh in slot 2). Checked against the specification
/// only (it allows `K` forgotten while idle and admitted again).
#[test]
fn an_empty_home_member_reclaimed_while_its_key_inserts() -> Result<(), Box<dyn std::error::Error>> {
    let placement = Placement::for_capacity(CAPACITY);
    let f = placement.key_at(0, &[]);
    let k = placement.key_at(1, &[f]);
    let m = placement.key_at(1, &[f, k]);
    let model = KeyedModel::new(TokenBucket::new(Quota::per_second(1)?)?, CAPACITY)
        .setup(&[KeyedRequest::at(f, ms(2000))])
        .thread(&[KeyedRequest::at(k, ms(500))])
        .thread(&[KeyedRequest::at(k, ms(500))])
        .thread(&[KeyedRequest::at(m, ms(2000))])
        .after(&[
            KeyedRequest::at(k, ms(500)),
            KeyedRequest::at(m, ms(2000)),
            KeyedRequest::at(f, ms(2000)),
        ]);
    assert!(!model.allowed_outcomes().is_empty());
    model.check();
    Ok(())
}

/// The crossed model is not vacuous: with claims and the empty-home insert made by plain
/// stores, `L`'s claim and `K`'s member overwrite each other in slot 1.
#[test]
fn an_empty_home_on_another_keys_chain_claim_by_store_twin_is_rejected(
) -> Result<(), Box<dyn std::error::Error>> {
    crossed(1)?.assert_rejected(tollgate::Faults {
        claim_by_store: true,
        ..tollgate::Faults::NONE
    });
    Ok(())
}
