//! loom models of the token bucket (GCRA) in a [`DirectLimiter`](tollgate::DirectLimiter), each
//! with a broken twin loom must reject. Quota: 1 per second, burst 2, so `T` is 1 s and the TAT may
//! run 2 s ahead.
//!
//! Invariant of every model here (see `loom_tests::Model`): in every execution, the threads'
//! decisions and the final state word are those of some sequential order of the same requests,
//! replayed with the pure algorithm. So no over-admission, and no lost update.
//!
//! Compiled only under `--cfg tollgate_loom` (the attribute below comes after these docs so
//! that the crate keeps them, and `missing_docs` stays quiet, when the cfg strips it).
#![cfg(tollgate_loom)]

use loom_tests::{ms, Model, RacyLimiter, Request, Shipped};
use tollgate::{Quota, TokenBucket};

fn algorithm() -> Result<TokenBucket, Box<dyn std::error::Error>> {
    Ok(TokenBucket::new(Quota::per_second(1)?.with_burst(2)?)?)
}

/// A weighted request (cost 2, through `check_n_at`) at 0 and one of weight 1 at 0.5 s:
/// either order admits exactly one (the first empties the bucket for the second).
fn two_threads() -> Result<Model<TokenBucket>, Box<dyn std::error::Error>> {
    let model = Model::new(algorithm()?)
        .thread(&[Request::weighted(2, ms(0))])
        .thread(&[Request::at(ms(500))]);
    assert_eq!(model.admitted_totals(), [1]);
    Ok(model)
}

/// Three requests of weight 1, at 0, 0 and 0.5 s, with room for two at one instant: the
/// later one admitted first leaves room for only one of the others, so one or two pass.
fn three_threads() -> Result<Model<TokenBucket>, Box<dyn std::error::Error>> {
    let model = Model::new(algorithm()?)
        .thread(&[Request::at(ms(0))])
        .thread(&[Request::at(ms(0))])
        .thread(&[Request::at(ms(500))]);
    assert_eq!(model.admitted_totals(), [1, 2]);
    Ok(model)
}

/// The shipped limiter on the two-thread model. Invariant: in every execution loom explores,
/// the threads' decisions and the final `raw_state()` equal those of some sequential order of
/// the same requests, replayed with the pure `decide` (no over-admission, no lost update).
#[test]
fn two_threads_decide_as_some_sequential_order() -> Result<(), Box<dyn std::error::Error>> {
    two_threads()?.check::<Shipped<TokenBucket>>();
    Ok(())
}

/// Its broken twin: the same model and invariant against `RacyLimiter` (load, decide, plain
/// store). loom must find an execution that breaks the invariant, and fail on its assertion.
#[test]
fn two_threads_racy_twin_is_rejected() -> Result<(), Box<dyn std::error::Error>> {
    two_threads()?.assert_rejected::<RacyLimiter<TokenBucket>>();
    Ok(())
}

/// The shipped limiter on the three-thread model. Invariant: in every execution loom explores,
/// the threads' decisions and the final `raw_state()` equal those of some sequential order of
/// the same requests, replayed with the pure `decide` (no over-admission, no lost update).
#[test]
fn three_threads_decide_as_some_sequential_order() -> Result<(), Box<dyn std::error::Error>> {
    three_threads()?.check::<Shipped<TokenBucket>>();
    Ok(())
}

/// Its broken twin: the same model and invariant against `RacyLimiter` (load, decide, plain
/// store). loom must find an execution that breaks the invariant, and fail on its assertion.
#[test]
fn three_threads_racy_twin_is_rejected() -> Result<(), Box<dyn std::error::Error>> {
    three_threads()?.assert_rejected::<RacyLimiter<TokenBucket>>();
    Ok(())
}
