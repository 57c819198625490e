//! A loom model of the denial path: a refused request returns without writing the state word,
//! so it can never erase another thread's admission.
//!
//! Compiled only under `--cfg tollgate_loom` (the attribute below comes after these docs so
//! that the crate keeps them, and `missing_docs` stays quiet, when the cfg strips it).
#![cfg(tollgate_loom)]

use loom_tests::{ms, Model, Request, Shipped, WritingDenialLimiter};
use tollgate::{Quota, TokenBucket};

/// A token bucket of 1 per second, burst 2, holding one admission from 0 (TAT 1 s). At 0, one
/// thread asks for 2 units, which never fit whatever the order (3 s of backlog or more, against
/// 2 s allowed); the other asks for 1, which always fits. Every order refuses the heavy one
/// and admits the light one, ending at TAT 2 s (only the refusal's retry-after depends on the
/// order).
fn one_always_denied() -> Result<Model<TokenBucket>, Box<dyn std::error::Error>> {
    let model = Model::new(TokenBucket::new(Quota::per_second(1)?.with_burst(2)?)?)
        .setup(&[Request::at(ms(0))])
        .thread(&[Request::weighted(2, ms(0))])
        .thread(&[Request::at(ms(0))]);
    for outcome in model.sequential_outcomes() {
        assert!(!outcome.decisions[0][0].is_allowed() && outcome.decisions[1][0].is_allowed());
        assert_eq!(outcome.state, u128::from(ms(2000).as_nanos()));
    }
    Ok(model)
}

/// Invariant: in every execution, the shipped limiter's decisions and final state are those of
/// some sequential order (so the denial left no trace, and the admission is in the final
/// state).
#[test]
fn denial_does_not_write() -> Result<(), Box<dyn std::error::Error>> {
    one_always_denied()?.check::<Shipped<TokenBucket>>();
    Ok(())
}

/// Its twin admits through a correct compare-and-swap loop but writes back the state it read
/// when it refuses: loom finds the execution where that write erases the other thread's
/// admission.
#[test]
fn writing_denial_twin_is_rejected() -> Result<(), Box<dyn std::error::Error>> {
    one_always_denied()?.assert_rejected::<WritingDenialLimiter<TokenBucket>>();
    Ok(())
}
