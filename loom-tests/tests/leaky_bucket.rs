//! loom models of the leaky bucket shaper in a [`DirectLimiter`](tollgate::DirectLimiter), each
//! with a broken twin loom must reject. Quota: 1 per second, burst 2 (one proceeds, one may wait).
//! The decisions compared include each admitted request's delay.
//!
//! Invariant of every model here (see `loom_tests::Model`): in every execution, the threads'
//! decisions and the final state word are those of some sequential order of the same requests,
//! replayed with the pure algorithm. So no over-admission, and no lost update.
//!
//! Compiled only under `--cfg tollgate_loom` (the attribute below comes after these docs so
//! that the crate keeps them, and `missing_docs` stays quiet, when the cfg strips it).
#![cfg(tollgate_loom)]

use loom_tests::{ms, Model, RacyLimiter, Request, Shipped};
use tollgate::{LeakyBucket, Quota};

fn algorithm() -> Result<LeakyBucket, Box<dyn std::error::Error>> {
    Ok(LeakyBucket::new(Quota::per_second(1)?.with_burst(2)?)?)
}

/// After one request at 0 (the queue is busy until 1 s), requests at 0 and at 0.5 s:
/// whichever comes first waits for the last slot (1 s or 0.5 s of delay), the other is
/// refused; the final state is the same either way, the decisions are not.
fn two_threads() -> Result<Model<LeakyBucket>, Box<dyn std::error::Error>> {
    let model = Model::new(algorithm()?)
        .setup(&[Request::at(ms(0))])
        .thread(&[Request::at(ms(0))])
        .thread(&[Request::at(ms(500))]);
    assert_eq!(model.admitted_totals(), [1]);
    Ok(model)
}

/// Three requests at the same instant with room for two: one proceeds, one waits 1 s,
/// one is refused.
fn three_threads() -> Result<Model<LeakyBucket>, Box<dyn std::error::Error>> {
    let model = Model::new(algorithm()?)
        .thread(&[Request::at(ms(0))])
        .thread(&[Request::at(ms(0))])
        .thread(&[Request::at(ms(0))]);
    assert_eq!(model.admitted_totals(), [2]);
    Ok(model)
}

/// The shipped limiter on the two-thread model. Invariant: in every execution loom explores,
/// the threads' decisions and the final `raw_state()` equal those of some sequential order of
/// the same requests, replayed with the pure `decide` (no over-admission, no lost update).
#[test]
fn two_threads_decide_as_some_sequential_order() -> Result<(), Box<dyn std::error::Error>> {
    two_threads()?.check::<Shipped<LeakyBucket>>();
    Ok(())
}

/// Its broken twin: the same model and invariant against `RacyLimiter` (load, decide, plain
/// store). loom must find an execution that breaks the invariant, and fail on its assertion.
#[test]
fn two_threads_racy_twin_is_rejected() -> Result<(), Box<dyn std::error::Error>> {
    two_threads()?.assert_rejected::<RacyLimiter<LeakyBucket>>();
    Ok(())
}

/// The shipped limiter on the three-thread model. Invariant: in every execution loom explores,
/// the threads' decisions and the final `raw_state()` equal those of some sequential order of
/// the same requests, replayed with the pure `decide` (no over-admission, no lost update).
#[test]
fn three_threads_decide_as_some_sequential_order() -> Result<(), Box<dyn std::error::Error>> {
    three_threads()?.check::<Shipped<LeakyBucket>>();
    Ok(())
}

/// Its broken twin: the same model and invariant against `RacyLimiter` (load, decide, plain
/// store). loom must find an execution that breaks the invariant, and fail on its assertion.
#[test]
fn three_threads_racy_twin_is_rejected() -> Result<(), Box<dyn std::error::Error>> {
    three_threads()?.assert_rejected::<RacyLimiter<LeakyBucket>>();
    Ok(())
}
