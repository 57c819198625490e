//! The sliding log as what a locked keyed table keeps per key ([`PerKey`]): a log of the limit's
//! entries, allocated when its slot is first used.

use super::decide::Verdict;
use super::state::LogState;
use super::SlidingLog;
use crate::keyed::locked::PerKey;
use crate::Decision;

impl PerKey for SlidingLog {
    type Value = LogState;
    type Change = Verdict;

    fn unused(&self) -> LogState {
        LogState::unallocated(self.entries())
    }

    fn prepare(&self, state: &mut LogState) -> bool {
        state.ring.reserve().is_ok()
    }

    fn forget(&self, state: &mut LogState) {
        state.clear();
    }

    fn is_idle(&self, state: &LogState, now: u64) -> bool {
        SlidingLog::is_idle(self, state, now)
    }

    fn is_reclaimable(&self, state: &LogState, now: u64) -> bool {
        SlidingLog::is_idle(self, state, now)
    }

    fn reclaimable_in(&self, state: &LogState, now: u64) -> u64 {
        self.idle_in(state, now)
    }

    #[inline]
    fn decide(&self, state: &LogState, now: u64, cost: u64) -> (Decision, Option<Verdict>) {
        let verdict = SlidingLog::decide(self, state, now, cost);
        // A weightless request stores nothing; any other stores at least the time it was
        // decided at.
        (verdict.decision, (cost > 0).then_some(verdict))
    }

    #[inline]
    fn apply(&self, state: &mut LogState, verdict: &Verdict, cost: u64) {
        state.apply(verdict, cost, self.window);
    }

    fn fresh(&self, now: u64, cost: u64) -> Decision {
        SlidingLog::decide(self, &LogState::unallocated(0), now, cost).decision
    }
}
