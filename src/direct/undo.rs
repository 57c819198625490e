//! An admission given back exactly, a moment after it was made ([`Algorithm::undo`]): what a
//! [`PolicySet`](crate::PolicySet) does with the units the policies before a refusing one took.

use crate::algorithm::{steps, Admission, Algorithm, Transition};
use crate::clock::Clock;
use crate::error::CostTooLarge;
use crate::{cell, Decision, DirectLimiter, Timestamp};

impl<A: Algorithm, C: Clock> DirectLimiter<A, C> {
    /// [`check_n_at`](Self::check_n_at), with the [`Admission`] that [`undo`](Self::undo)
    /// takes back.
    ///
    /// # Errors
    /// [`CostTooLarge`], as for `check_n`.
    #[inline]
    pub fn check_n_undoable_at(
        &self,
        cost: u64,
        now: Timestamp,
    ) -> Result<(Decision, Admission), CostTooLarge> {
        let decision = self.check_n_at(cost, now)?;
        Ok((decision, Admission::new(now, cost, &decision)))
    }

    /// Undoes `admission`, made a moment ago ([`check_n_undoable_at`](Self::check_n_undoable_at)),
    /// exactly: every algorithm gives its units back ([`Algorithm::undo`]: a window while they
    /// still count, a bucket while the admission still ends its queue), and decisions from then
    /// on are made as if the request had been refused. Returns whether anything was given back.
    /// Run in the same compare-and-swap loop as a decision, so neither erases the other.
    pub fn undo(&self, admission: &Admission) -> bool {
        let mut gave_back = false;
        if self.algorithm.is_wide() {
            let _ = cell::update_wide(&self.state.wide, |state| {
                let after = self.algorithm.undo_wide(state, admission);
                gave_back = after != state;
                // The decision is not used by an undo; `table_full` is the cheapest to build.
                Transition::refuse(after, Decision::table_full(0))
            });
        } else {
            let _ = cell::update(&self.state.narrow, |state| {
                steps::given_back(state, self.algorithm.undo(state, admission), &mut gave_back)
            });
        }
        gave_back
    }
}
