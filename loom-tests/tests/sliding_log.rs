//! loom models of the sliding window log in a [`LogLimiter`](tollgate::LogLimiter): 2 and 3
//! threads deciding on one log, each model with a broken twin loom must reject.
//!
//! Invariant (see `loom_tests::LogModel`): in every execution, the threads' decisions and the
//! answers of requests made once they are joined (which read the final log back) are those of
//! some sequential order of the same requests on the shipped log. So no over-admission and no
//! lost record. The twin releases the log's lock between deciding and recording
//! (`LogFaults::unlock_before_record`): two requests can then be decided on the same log.
//!
//! Compiled only under `--cfg tollgate_loom` (the attribute below comes after these docs so
//! that the crate keeps them, and `missing_docs` stays quiet, when the cfg strips it).
#![cfg(tollgate_loom)]

use loom_tests::{ms, LogModel, LogRequest};
use tollgate::{LogFaults, Quota, SlidingLog};

/// Direct models have no keys.
const NO_KEY: u64 = 0;

/// Limit 1 per second; requests at 0.9 s and 1.1 s. Whichever is decided first is admitted and
/// the other refused (the one at 0.9 s, decided after 1.1 s was recorded, is decided at 1.1 s:
/// time never goes back in the log). A request after the join at 1.95 s passes only if the unit
/// was recorded at 0.9 s, so it tells which one was.
fn two_threads() -> Result<LogModel, Box<dyn std::error::Error>> {
    let model = LogModel::direct(SlidingLog::new(Quota::per_second(1)?)?)
        .thread(&[LogRequest::at(NO_KEY, ms(900))])
        .thread(&[LogRequest::at(NO_KEY, ms(1100))])
        .after(&[LogRequest::at(NO_KEY, ms(1950))]);
    assert_eq!(model.admitted_totals(), [1]);
    assert_eq!(model.sequential_outcomes().len(), 2);
    Ok(model)
}

/// Limit 3 per second, one unit recorded at 0.1 s; then a weight-2 request at 0.7 s, a weight-1
/// one at 0.5 s and another at 1.2 s (after the setup's unit has left). Every order admits two
/// of them, but which two, and when their units were recorded, depends on the order; afterwards,
/// weight-3 and weight-1 requests at 1.6 s read back the log.
fn three_threads() -> Result<LogModel, Box<dyn std::error::Error>> {
    let model = LogModel::direct(SlidingLog::new(Quota::per_second(3)?)?)
        .setup(&[LogRequest::at(NO_KEY, ms(100))])
        .thread(&[LogRequest::weighted(NO_KEY, 2, ms(700))])
        .thread(&[LogRequest::at(NO_KEY, ms(500))])
        .thread(&[LogRequest::at(NO_KEY, ms(1200))])
        .after(&[
            LogRequest::weighted(NO_KEY, 3, ms(1600)),
            LogRequest::at(NO_KEY, ms(1600)),
        ]);
    assert_eq!(model.admitted_totals(), [2]);
    assert!(model.sequential_outcomes().len() >= 3);
    Ok(model)
}

/// The shipped log on the two-thread model: every execution is some sequential order.
#[test]
fn two_threads_decide_as_some_sequential_order() -> Result<(), Box<dyn std::error::Error>> {
    two_threads()?.check();
    Ok(())
}

/// Its broken twin (the lock released between deciding and recording): both requests are
/// decided on the empty log and admitted; loom must find it.
#[test]
fn two_threads_unlocked_record_twin_is_rejected() -> Result<(), Box<dyn std::error::Error>> {
    two_threads()?.assert_rejected(LogFaults::NONE.unlock_before_record());
    Ok(())
}

/// The shipped log on the three-thread model: every execution is some sequential order.
#[test]
fn three_threads_decide_as_some_sequential_order() -> Result<(), Box<dyn std::error::Error>> {
    three_threads()?.check();
    Ok(())
}

/// Its broken twin (the lock released between deciding and recording); loom must reject it.
#[test]
fn three_threads_unlocked_record_twin_is_rejected() -> Result<(), Box<dyn std::error::Error>> {
    three_threads()?.assert_rejected(LogFaults::NONE.unlock_before_record());
    Ok(())
}
