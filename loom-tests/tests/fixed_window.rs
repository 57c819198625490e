//! loom models of the fixed window counter in a [`DirectLimiter`](tollgate::DirectLimiter), each
//! with a broken twin loom must reject. Windows are 1 s long and aligned on the epoch.
//!
//! Invariant of every model here (see `loom_tests::Model`): in every execution, the threads'
//! decisions and the final state word are those of some sequential order of the same requests,
//! replayed with the pure algorithm. So no over-admission, and no lost update.
//!
//! Compiled only under `--cfg tollgate_loom` (the attribute below comes after these docs so
//! that the crate keeps them, and `missing_docs` stays quiet, when the cfg strips it).
#![cfg(tollgate_loom)]

use loom_tests::{ms, Model, RacyLimiter, Request, Shipped};
use tollgate::{FixedWindow, Quota};

/// Limit 1 per second; requests at 0.9 s (window 0) and 1.1 s (window 1). In time order
/// both pass (the boundary spike); the later one first moves the state to window 1, where the
/// earlier one is decided and refused.
fn two_threads() -> Result<Model<FixedWindow>, Box<dyn std::error::Error>> {
    let model = Model::new(FixedWindow::new(Quota::per_second(1)?)?)
        .thread(&[Request::at(ms(900))])
        .thread(&[Request::at(ms(1100))]);
    assert_eq!(model.admitted_totals(), [1, 2]);
    Ok(model)
}

/// Limit 2 per second; requests of weight 1 at 0.2 s and 0.4 s and a weighted one (cost 2)
/// at 0.6 s, all in window 0: the weighted one first takes the whole window, otherwise it
/// is refused and both light ones pass.
fn three_threads() -> Result<Model<FixedWindow>, Box<dyn std::error::Error>> {
    let model = Model::new(FixedWindow::new(Quota::per_second(2)?)?)
        .thread(&[Request::at(ms(200))])
        .thread(&[Request::at(ms(400))])
        .thread(&[Request::weighted(2, ms(600))]);
    assert_eq!(model.admitted_totals(), [1, 2]);
    Ok(model)
}

/// The shipped limiter on the two-thread model. Invariant: in every execution loom explores,
/// the threads' decisions and the final `raw_state()` equal those of some sequential order of
/// the same requests, replayed with the pure `decide` (no over-admission, no lost update).
#[test]
fn two_threads_decide_as_some_sequential_order() -> Result<(), Box<dyn std::error::Error>> {
    two_threads()?.check::<Shipped<FixedWindow>>();
    Ok(())
}

/// Its broken twin: the same model and invariant against `RacyLimiter` (load, decide, plain
/// store). loom must find an execution that breaks the invariant, and fail on its assertion.
#[test]
fn two_threads_racy_twin_is_rejected() -> Result<(), Box<dyn std::error::Error>> {
    two_threads()?.assert_rejected::<RacyLimiter<FixedWindow>>();
    Ok(())
}

/// The shipped limiter on the three-thread model. Invariant: in every execution loom explores,
/// the threads' decisions and the final `raw_state()` equal those of some sequential order of
/// the same requests, replayed with the pure `decide` (no over-admission, no lost update).
#[test]
fn three_threads_decide_as_some_sequential_order() -> Result<(), Box<dyn std::error::Error>> {
    three_threads()?.check::<Shipped<FixedWindow>>();
    Ok(())
}

/// Its broken twin: the same model and invariant against `RacyLimiter` (load, decide, plain
/// store). loom must find an execution that breaks the invariant, and fail on its assertion.
#[test]
fn three_threads_racy_twin_is_rejected() -> Result<(), Box<dyn std::error::Error>> {
    three_threads()?.assert_rejected::<RacyLimiter<FixedWindow>>();
    Ok(())
}
