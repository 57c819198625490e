//! A key's admission given back exactly, a moment after it was made ([`Algorithm::undo`]):
//! what a [`PolicySet`](crate::PolicySet) does with the units the policies before a refusing
//! one took.

use std::hash::Hash;

use crate::algorithm::{steps, Admission, Algorithm};
use crate::clock::Clock;
use crate::error::CostTooLarge;
use crate::{Decision, KeyedLimiter, Timestamp};

impl<K: Hash + ?Sized, A: Algorithm, C: Clock> KeyedLimiter<K, A, C> {
    /// [`check_n_at`](Self::check_n_at), with the [`Admission`] that [`undo`](Self::undo)
    /// takes back.
    ///
    /// # Errors
    /// [`CostTooLarge`], as for `check_n`. Nothing is inserted.
    #[inline]
    pub fn check_n_undoable_at(
        &self,
        key: &K,
        cost: u64,
        now: Timestamp,
    ) -> Result<(Decision, Admission), CostTooLarge> {
        let decision = self.check_n_at(key, cost, now)?;
        Ok((decision, Admission::new(now, cost, &decision)))
    }

    /// Undoes `admission`, made for `key` a moment ago
    /// ([`check_n_undoable_at`](Self::check_n_undoable_at)), exactly: see
    /// [`DirectLimiter::undo`](crate::DirectLimiter::undo). Returns whether anything was given
    /// back; an absent key (or one reclaimed since, which only an idle key is) has nothing to
    /// give back.
    pub fn undo(&self, key: &K, admission: &Admission) -> bool {
        let Some((shard, home, fingerprint)) = self.locate(key) else {
            let Some((shard, home, fingerprint)) = self.locate_wide(key) else {
                return false;
            };
            return shard
                .with_key(fingerprint, home, self.locked_faults(), |state| {
                    let after = self.algorithm.undo_wide(*state, admission);
                    let gave_back = after != *state;
                    *state = after;
                    gave_back
                })
                .unwrap_or(false);
        };
        // As `refund_n_at`: a key moved away mid-update is looked up again.
        while let Some(found) = shard.find(fingerprint, home) {
            let mut gave_back = false;
            let undo =
                |state| steps::given_back(state, self.algorithm.undo(state, admission), &mut gave_back);
            if shard.update(found, undo).is_ok() {
                return gave_back;
            }
        }
        false
    }
}
