//! The transitions of a refund and a reset, shared by the direct limiter and the keyed table:
//! each runs inside its caller's compare-and-swap loop, and records in a flag what the caller
//! answers.

use super::{Algorithm, Transition, FRESH_STATE};
use crate::{Decision, Timestamp};

/// One run of a refund inside a CAS loop (direct or keyed): the state to store, and whether it
/// gives anything back. The loop may run it several times; the last run is the one stored.
#[inline]
pub(crate) fn refund<A: Algorithm>(
    algorithm: &A,
    state: u64,
    now: Timestamp,
    cost: u64,
    gave_back: &mut bool,
) -> Transition {
    given_back(state, algorithm.refund(state, now, cost), gave_back)
}

/// A refund's transition from `state` to `after` inside a CAS loop, recording in `gave_back`
/// whether it gives anything back. The loop may run it several times; the last run is stored.
#[inline]
pub(crate) fn given_back(state: u64, after: u64, gave_back: &mut bool) -> Transition {
    *gave_back = after != state;
    // The decision is not used by a refund; `table_full` is the cheapest one to build.
    Transition::refuse(after, Decision::table_full(0))
}

/// One run of a reset inside a CAS loop (direct or keyed): the fresh state, and whether the
/// state it replaces still limited at `now`. The loop may run it several times; the last run is
/// the one stored.
#[inline]
pub(crate) fn reset<A: Algorithm>(
    algorithm: &A,
    state: u64,
    now: Timestamp,
    limiting: &mut bool,
) -> Transition {
    *limiting = !algorithm.is_idle(state, now);
    // Always the fresh state, even for an idle one: a clock that later reads earlier than `now`
    // must find a new limiter's state too, as the caller asked. (No write when it is fresh
    // already.) The decision is not used by a reset; `table_full` is the cheapest one to build.
    Transition::refuse(FRESH_STATE, Decision::table_full(0))
}
