//! A [wide](crate::algorithm::Algorithm::is_wide) state as what the locked keyed table keeps per
//! key ([`PerKey`]): a 128-bit state does not fit beside a 64-bit tag in the lock-free table's
//! 16-byte slot, so a [`KeyedLimiter`](crate::KeyedLimiter) of wide states keeps each behind a
//! short lock, in the table the keyed sliding log uses (`docs/design.md`, "Wide states").

use super::locked::PerKey;
use crate::algorithm::{Algorithm, FRESH_WIDE_STATE};
use crate::time::duration_to_nanos_saturating;
use crate::{Decision, Timestamp};

/// `algorithm`'s wide states, as the locked table's per-key values, decided for requests that
/// wait at most `max_delay` ns ([`Algorithm::decide_within_wide`]; `u64::MAX`, no maximum, for
/// every decision but `check_n_within`'s).
#[derive(Debug)]
pub(crate) struct WideStates<'a, A> {
    algorithm: &'a A,
    max_delay: u64,
}

impl<'a, A> WideStates<'a, A> {
    /// `algorithm`'s states, decided with no maximum wait.
    pub(crate) const fn new(algorithm: &'a A) -> Self {
        WideStates::within(algorithm, u64::MAX)
    }

    /// `algorithm`'s states, decided for requests that wait at most `max_delay` ns.
    pub(crate) const fn within(algorithm: &'a A, max_delay: u64) -> Self {
        WideStates { algorithm, max_delay }
    }
}

impl<A: Algorithm> PerKey for WideStates<'_, A> {
    type Value = u128;
    type Change = u128;

    fn unused(&self) -> u128 {
        FRESH_WIDE_STATE
    }

    fn prepare(&self, _: &mut u128) -> bool {
        // Nothing to allocate: the state is in the slot.
        true
    }

    fn forget(&self, state: &mut u128) {
        *state = FRESH_WIDE_STATE;
    }

    fn is_idle(&self, state: &u128, now: u64) -> bool {
        self.algorithm.is_idle_wide(*state, Timestamp::from_nanos(now))
    }

    fn is_reclaimable(&self, state: &u128, now: u64) -> bool {
        self.algorithm
            .is_reclaimable_wide(*state, Timestamp::from_nanos(now))
    }

    fn reclaimable_in(&self, state: &u128, now: u64) -> u64 {
        duration_to_nanos_saturating(
            self.algorithm
                .reclaimable_in_wide(*state, Timestamp::from_nanos(now)),
        )
    }

    #[inline]
    fn decide(&self, state: &u128, now: u64, cost: u64) -> (Decision, Option<u128>) {
        let transition =
            self.algorithm
                .decide_within_wide(*state, Timestamp::from_nanos(now), cost, self.max_delay);
        (
            transition.decision,
            (transition.state != *state).then_some(transition.state),
        )
    }

    #[inline]
    fn apply(&self, state: &mut u128, change: &u128, _: u64) {
        *state = *change;
    }

    fn fresh(&self, now: u64, cost: u64) -> Decision {
        self.algorithm
            .decide_within_wide(FRESH_WIDE_STATE, Timestamp::from_nanos(now), cost, self.max_delay)
            .decision
    }
}
