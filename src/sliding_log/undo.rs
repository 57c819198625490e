//! An admission of a sliding log given back exactly, a moment after it was made (a
//! [`PolicySet`](crate::PolicySet) whose later policy refused the request): its units are
//! removed from the log if they are still there ([`Ring::unrecord`](super::ring::Ring)), and
//! the log decides from then on as if the request had been refused.

use std::cell::Cell;
use std::hash::Hash;

use super::decide::Verdict;
use super::state::LogState;
use super::{KeyedLogLimiter, LogLimiter, SlidingLog};
use crate::algorithm::Admission;
use crate::clock::Clock;
use crate::error::CostTooLarge;
use crate::keyed::locked::PerKey;
use crate::live::LogQuota;
use crate::sync::lock;
use crate::{Decision, Timestamp};

impl<C: Clock, L: LogQuota> LogLimiter<C, L> {
    /// Decides `cost` units at `now` and counts them if admitted, with the [`Admission`] that
    /// [`undo`](Self::undo) takes back: its time is the one the units were recorded at (later
    /// than `now` when the clock stepped back).
    ///
    /// # Errors
    /// [`CostTooLarge`], as for [`check_n`](Self::check_n).
    pub fn check_n_undoable_at(
        &self,
        cost: u64,
        now: Timestamp,
    ) -> Result<(Decision, Admission), CostTooLarge> {
        self.fits(cost)?;
        let (decision, at) = self.decide_recorded(now.as_nanos(), cost);
        Ok((
            decision,
            Admission::new(Timestamp::from_nanos(at), cost, &decision),
        ))
    }

    /// Undoes `admission` (made by [`check_n_undoable_at`](Self::check_n_undoable_at) a moment
    /// ago): its units are removed from the log if they are still there, and later decisions
    /// are made as if the request had been refused. Returns whether anything was removed.
    pub fn undo(&self, admission: &Admission) -> bool {
        lock(&self.state)
            .ring
            .unrecord(admission.at().as_nanos(), admission.cost())
            > 0
    }
}

/// A log as the locked table's per-key value ([`PerKey`]), noting the time each decision it
/// stores was made at, which the locked table does not hand back.
struct Recording<'a> {
    log: &'a SlidingLog,
    at: Cell<Option<u64>>,
}

impl PerKey for Recording<'_> {
    type Value = LogState;
    type Change = Verdict;

    fn unused(&self) -> LogState {
        self.log.unused()
    }

    fn prepare(&self, state: &mut LogState) -> bool {
        self.log.prepare(state)
    }

    fn forget(&self, state: &mut LogState) {
        self.log.forget(state);
    }

    fn is_idle(&self, state: &LogState, now: u64) -> bool {
        PerKey::is_idle(self.log, state, now)
    }

    fn is_reclaimable(&self, state: &LogState, now: u64) -> bool {
        self.log.is_reclaimable(state, now)
    }

    fn reclaimable_in(&self, state: &LogState, now: u64) -> u64 {
        self.log.reclaimable_in(state, now)
    }

    fn decide(&self, state: &LogState, now: u64, cost: u64) -> (Decision, Option<Verdict>) {
        PerKey::decide(self.log, state, now, cost)
    }

    fn apply(&self, state: &mut LogState, verdict: &Verdict, cost: u64) {
        self.at.set(Some(verdict.at));
        self.log.apply(state, verdict, cost);
    }

    fn fresh(&self, now: u64, cost: u64) -> Decision {
        self.log.fresh(now, cost)
    }
}

impl<K: Hash + ?Sized, C: Clock, L: LogQuota> KeyedLogLimiter<K, C, L> {
    /// Decides `cost` units for `key` at `now` and counts them if admitted, with the
    /// [`Admission`] that [`undo`](Self::undo) takes back: see
    /// [`LogLimiter::check_n_undoable_at`].
    ///
    /// # Errors
    /// [`CostTooLarge`], as for [`check_n`](Self::check_n). Nothing is inserted.
    pub fn check_n_undoable_at(
        &self,
        key: &K,
        cost: u64,
        now: Timestamp,
    ) -> Result<(Decision, Admission), CostTooLarge> {
        self.fits(cost)?;
        let (shard, home, fingerprint) = self.locate(key);
        let log = self.log.current();
        let recording = Recording {
            log: &log,
            at: Cell::new(None),
        };
        let decision = shard
            .decide(&recording, fingerprint, home, now.as_nanos(), cost, self.faults())
            .unwrap_or_else(|| self.when_table_full(&log, shard, home, now, cost));
        let at = recording.at.get().map_or(now, Timestamp::from_nanos);
        Ok((decision, Admission::new(at, cost, &decision)))
    }

    /// Undoes `admission`, made for `key` by [`check_n_undoable_at`](Self::check_n_undoable_at)
    /// a moment ago: see [`LogLimiter::undo`]. An absent key has nothing to give back.
    pub fn undo(&self, key: &K, admission: &Admission) -> bool {
        let (shard, home, fingerprint) = self.locate(key);
        shard
            .with_key(fingerprint, home, self.faults(), |state| {
                state.ring.unrecord(admission.at().as_nanos(), admission.cost())
            })
            .is_some_and(|removed| removed > 0)
    }
}
