//! What a policy set asks of each of its limiters ([`SetMember`]), and tollgate's limiters
//! answering it.

use std::hash::Hash;
use std::sync::Arc;

use crate::algorithm::{Admission, Algorithm};
use crate::clock::Clock;
use crate::error::CostTooLarge;
use crate::live::LogQuota;
use crate::{Decision, DirectLimiter, KeyedLimiter, KeyedLogLimiter, LogLimiter, Timestamp};

/// A limiter a [`PolicySet`](super::PolicySet) decides with: one that counts an admission and
/// can undo it exactly a moment later. Implemented for every [`DirectLimiter`] (the key is not
/// read: one quota for every request of the set, a global one), [`KeyedLimiter`],
/// [`LogLimiter`] and [`KeyedLogLimiter`], and an `Arc` of any.
pub trait SetMember<K: ?Sized>: Send + Sync {
    /// The heaviest request that can ever pass.
    fn capacity(&self) -> u64;

    /// Decides `cost` units for `key` at `now` (the limiter's own clock's time when `None`), and
    /// counts them if admitted; with the [`Admission`] that [`undo`](Self::undo) takes back.
    ///
    /// # Errors
    /// [`CostTooLarge`] when `cost` exceeds the limiter's capacity.
    fn decide(
        &self,
        key: &K,
        cost: u64,
        now: Option<Timestamp>,
    ) -> Result<(Decision, Admission), CostTooLarge>;

    /// What [`decide`](Self::decide) would answer, counting nothing.
    ///
    /// # Errors
    /// [`CostTooLarge`], as for `decide`.
    fn peek(&self, key: &K, cost: u64, now: Option<Timestamp>) -> Result<Decision, CostTooLarge>;

    /// Gives back, exactly, what `admission` (a counted admission this limiter made for `key` a
    /// moment ago) took: see [`Algorithm::undo`].
    fn undo(&self, key: &K, admission: &Admission);

    /// How many times its quota has been changed live ([`Live`](crate::Live)); 0 by default.
    fn changes(&self) -> u64 {
        0
    }

    /// The policy the tower layer announces for it (feature `tower`); none by default (it is
    /// then left out of the fields).
    #[cfg(feature = "tower")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
    fn announced(&self) -> Option<crate::policy::Policy> {
        None
    }
}

impl<K: ?Sized, A: Algorithm, C: Clock> SetMember<K> for DirectLimiter<A, C> {
    fn capacity(&self) -> u64 {
        DirectLimiter::capacity(self)
    }

    fn decide(
        &self,
        _: &K,
        cost: u64,
        now: Option<Timestamp>,
    ) -> Result<(Decision, Admission), CostTooLarge> {
        self.check_n_undoable_at(cost, now.unwrap_or_else(|| self.clock().now()))
    }

    fn peek(&self, _: &K, cost: u64, now: Option<Timestamp>) -> Result<Decision, CostTooLarge> {
        self.peek_n_at(cost, now.unwrap_or_else(|| self.clock().now()))
    }

    fn undo(&self, _: &K, admission: &Admission) {
        let _ = DirectLimiter::undo(self, admission);
    }

    fn changes(&self) -> u64 {
        self.algorithm().changes()
    }

    #[cfg(feature = "tower")]
    fn announced(&self) -> Option<crate::policy::Policy> {
        self.algorithm().announced()
    }
}

impl<K: Hash + ?Sized, A: Algorithm, C: Clock> SetMember<K> for KeyedLimiter<K, A, C> {
    fn capacity(&self) -> u64 {
        self.algorithm().capacity()
    }

    fn decide(
        &self,
        key: &K,
        cost: u64,
        now: Option<Timestamp>,
    ) -> Result<(Decision, Admission), CostTooLarge> {
        self.check_n_undoable_at(key, cost, now.unwrap_or_else(|| self.clock().now()))
    }

    fn peek(&self, key: &K, cost: u64, now: Option<Timestamp>) -> Result<Decision, CostTooLarge> {
        self.peek_n_at(key, cost, now.unwrap_or_else(|| self.clock().now()))
    }

    fn undo(&self, key: &K, admission: &Admission) {
        let _ = KeyedLimiter::undo(self, key, admission);
    }

    fn changes(&self) -> u64 {
        self.algorithm().changes()
    }

    #[cfg(feature = "tower")]
    fn announced(&self) -> Option<crate::policy::Policy> {
        self.algorithm().announced()
    }
}

impl<K: ?Sized, C: Clock, L: LogQuota> SetMember<K> for LogLimiter<C, L> {
    fn capacity(&self) -> u64 {
        LogLimiter::capacity(self)
    }

    fn decide(
        &self,
        _: &K,
        cost: u64,
        now: Option<Timestamp>,
    ) -> Result<(Decision, Admission), CostTooLarge> {
        self.check_n_undoable_at(cost, now.unwrap_or_else(|| self.clock().now()))
    }

    fn peek(&self, _: &K, cost: u64, now: Option<Timestamp>) -> Result<Decision, CostTooLarge> {
        self.peek_n_at(cost, now.unwrap_or_else(|| self.clock().now()))
    }

    fn undo(&self, _: &K, admission: &Admission) {
        let _ = LogLimiter::undo(self, admission);
    }

    fn changes(&self) -> u64 {
        self.algorithm().changes()
    }

    #[cfg(feature = "tower")]
    fn announced(&self) -> Option<crate::policy::Policy> {
        Some(crate::policy::AnnouncedPolicy::policy(
            &*self.algorithm().current(),
        ))
    }
}

impl<K: Hash + ?Sized, C: Clock, L: LogQuota> SetMember<K> for KeyedLogLimiter<K, C, L> {
    fn capacity(&self) -> u64 {
        self.algorithm().current().limit()
    }

    fn decide(
        &self,
        key: &K,
        cost: u64,
        now: Option<Timestamp>,
    ) -> Result<(Decision, Admission), CostTooLarge> {
        self.check_n_undoable_at(key, cost, now.unwrap_or_else(|| self.clock().now()))
    }

    fn peek(&self, key: &K, cost: u64, now: Option<Timestamp>) -> Result<Decision, CostTooLarge> {
        self.peek_n_at(key, cost, now.unwrap_or_else(|| self.clock().now()))
    }

    fn undo(&self, key: &K, admission: &Admission) {
        let _ = KeyedLogLimiter::undo(self, key, admission);
    }

    fn changes(&self) -> u64 {
        self.algorithm().changes()
    }

    #[cfg(feature = "tower")]
    fn announced(&self) -> Option<crate::policy::Policy> {
        Some(crate::policy::AnnouncedPolicy::policy(
            &*self.algorithm().current(),
        ))
    }
}

impl<K: ?Sized, M: SetMember<K> + ?Sized> SetMember<K> for Arc<M> {
    fn capacity(&self) -> u64 {
        (**self).capacity()
    }

    fn decide(
        &self,
        key: &K,
        cost: u64,
        now: Option<Timestamp>,
    ) -> Result<(Decision, Admission), CostTooLarge> {
        (**self).decide(key, cost, now)
    }

    fn peek(&self, key: &K, cost: u64, now: Option<Timestamp>) -> Result<Decision, CostTooLarge> {
        (**self).peek(key, cost, now)
    }

    fn undo(&self, key: &K, admission: &Admission) {
        (**self).undo(key, admission);
    }

    fn changes(&self) -> u64 {
        (**self).changes()
    }

    #[cfg(feature = "tower")]
    fn announced(&self) -> Option<crate::policy::Policy> {
        (**self).announced()
    }
}
