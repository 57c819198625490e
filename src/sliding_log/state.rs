//! One log's whole state: the ring of admitted units and the latest time a decision counted at.

use super::decide::Verdict;
use super::ring::Ring;

/// What a log's lock guards: the timestamps of the newest admitted units ([`Ring`]), and the
/// latest time a decision of weight 1 or more was made at, admitted or refused.
///
/// Every decision is made at `max(now, latest)`: a refusal records no unit, but it still moves
/// `latest`, so that a request stamped before it (a clock that stepped back) is decided at that
/// later time, as a clock that never goes back would have decided it (`docs/design.md`, "Time
/// that goes backwards"). A weightless request and a peek move nothing.
#[derive(Clone, Debug, Default)]
pub(crate) struct LogState {
    pub(crate) ring: Ring,
    /// The latest time a counted decision was made at; 0 before the first (and after a reset).
    /// At or after the newest entry of the ring: units are recorded at the time decided at.
    pub(crate) latest: u64,
}

impl LogState {
    /// A log for `capacity` units, allocating nothing yet (see [`Ring::reserve`]).
    pub(crate) const fn unallocated(capacity: usize) -> LogState {
        LogState {
            ring: Ring::unallocated(capacity),
            latest: 0,
        }
    }

    /// A log for `capacity` units, with its memory allocated.
    pub(crate) fn with_capacity(capacity: usize) -> LogState {
        LogState {
            ring: Ring::with_capacity(capacity),
            latest: 0,
        }
    }

    /// The time a decision at `now` is made at: `now`, or the latest time a counted decision
    /// was made at if the clock is behind it. (The newest unit is never later: units are
    /// recorded at the time their decision was made at, which [`apply`](Self::apply) stores as
    /// the latest.)
    #[inline]
    pub(crate) fn decided_at(&self, now: u64) -> u64 {
        self.latest.max(now)
    }

    /// Stores what a decision of weight `cost` concluded: the time it was made at, if it weighs
    /// anything (a weightless request moves nothing), and its units if it was admitted.
    #[inline]
    pub(crate) fn apply(&mut self, verdict: &Verdict, cost: u64, window: u64) {
        if cost == 0 {
            return;
        }
        // At least `latest` (`decided_at`): decided and applied under one lock.
        self.latest = verdict.at;
        if verdict.record {
            self.ring.record(verdict.at, cost, window);
        }
    }

    /// Forgets everything, keeping the ring's memory (a reset, or a keyed slot reused for
    /// another key): the state of a log never used.
    pub(crate) fn clear(&mut self) {
        self.ring.clear();
        self.latest = 0;
    }
}
