//! loom models of the sliding window counter in a [`DirectLimiter`](tollgate::DirectLimiter), each
//! with a broken twin loom must reject. Quota: 2 per 1 s window.
//!
//! Invariant of every model here (see `loom_tests::Model`): in every execution, the threads'
//! decisions and the final state word are those of some sequential order of the same requests,
//! replayed with the pure algorithm. So no over-admission, and no lost update.
//!
//! Compiled only under `--cfg tollgate_loom` (the attribute below comes after these docs so
//! that the crate keeps them, and `missing_docs` stays quiet, when the cfg strips it).
#![cfg(tollgate_loom)]

use loom_tests::{ms, Model, RacyLimiter, Request, Shipped};
use tollgate::{Quota, SlidingWindow};

fn algorithm() -> Result<SlidingWindow, Box<dyn std::error::Error>> {
    Ok(SlidingWindow::new(Quota::per_second(2)?)?)
}

/// After one request at 0.5 s (window 0), requests at 1.0 s and 1.5 s (window 1): the
/// previous window still weighs 1 at 1.0 s and 0.5 at 1.5 s, so whichever comes first
/// passes and the other is refused.
fn two_threads() -> Result<Model<SlidingWindow>, Box<dyn std::error::Error>> {
    let model = Model::new(algorithm()?)
        .setup(&[Request::at(ms(500))])
        .thread(&[Request::at(ms(1000))])
        .thread(&[Request::at(ms(1500))]);
    assert_eq!(model.admitted_totals(), [1]);
    Ok(model)
}

/// Requests at 0.5 s and 0.9 s (window 0) and 1.2 s (window 1, where window 0 still weighs
/// 0.8 of its count): two pass in every order, but which two, and the final window, depend on
/// the order (the one at 1.2 s first moves the state to window 1, where the others are
/// decided at its start).
fn three_threads() -> Result<Model<SlidingWindow>, Box<dyn std::error::Error>> {
    let model = Model::new(algorithm()?)
        .thread(&[Request::at(ms(500))])
        .thread(&[Request::at(ms(900))])
        .thread(&[Request::at(ms(1200))]);
    assert_eq!(model.admitted_totals(), [2]);
    Ok(model)
}

/// The shipped limiter on the two-thread model. Invariant: in every execution loom explores,
/// the threads' decisions and the final `raw_state()` equal those of some sequential order of
/// the same requests, replayed with the pure `decide` (no over-admission, no lost update).
#[test]
fn two_threads_decide_as_some_sequential_order() -> Result<(), Box<dyn std::error::Error>> {
    two_threads()?.check::<Shipped<SlidingWindow>>();
    Ok(())
}

/// Its broken twin: the same model and invariant against `RacyLimiter` (load, decide, plain
/// store). loom must find an execution that breaks the invariant, and fail on its assertion.
#[test]
fn two_threads_racy_twin_is_rejected() -> Result<(), Box<dyn std::error::Error>> {
    two_threads()?.assert_rejected::<RacyLimiter<SlidingWindow>>();
    Ok(())
}

/// The shipped limiter on the three-thread model. Invariant: in every execution loom explores,
/// the threads' decisions and the final `raw_state()` equal those of some sequential order of
/// the same requests, replayed with the pure `decide` (no over-admission, no lost update).
#[test]
fn three_threads_decide_as_some_sequential_order() -> Result<(), Box<dyn std::error::Error>> {
    three_threads()?.check::<Shipped<SlidingWindow>>();
    Ok(())
}

/// Its broken twin: the same model and invariant against `RacyLimiter` (load, decide, plain
/// store). loom must find an execution that breaks the invariant, and fail on its assertion.
#[test]
fn three_threads_racy_twin_is_rejected() -> Result<(), Box<dyn std::error::Error>> {
    three_threads()?.assert_rejected::<RacyLimiter<SlidingWindow>>();
    Ok(())
}
