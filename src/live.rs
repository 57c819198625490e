//! Limiters whose quota changes while they run, without losing their state.
//!
//! [`Live<A>`] is an algorithm like `A` whose parameters can be replaced at any time
//! ([`Live::set_quota`]): it implements [`Algorithm`] by deciding each attempt on one snapshot
//! of `A`, so a [`DirectLimiter<Live<TokenBucket>>`](crate::DirectLimiter), a
//! [`KeyedLimiter<K, Live<SlidingWindow>>`](crate::KeyedLimiter) and the tower layer run it
//! unchanged, and keep every state across the change.
//!
//! ```
//! use tollgate::{DirectLimiter, Live, ManualClock, TokenBucket};
//!
//! let limiter = DirectLimiter::with_clock(Live::new(TokenBucket::new("10/s".parse()?)?), ManualClock::new());
//! for _ in 0..8 {
//!     assert!(limiter.check().is_allowed());
//! }
//! // 8 of 10 spent. The quota halves: the debt is kept in time (0.8 s), 4 of the new 5.
//! limiter.algorithm().set_quota("5/s".parse()?)?;
//! assert_eq!(limiter.check().remaining(), 0);
//! assert!(!limiter.check().is_allowed());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! - **No mix**: a decision reads the parameters once per compare-and-swap attempt, as one
//!   snapshot (`arc_swap`, a loom stand-in under `--cfg tollgate_loom`), so an attempt racing a
//!   change decides wholly under the old quota or wholly under the new one, and stores what
//!   that quota decided. `loom-tests/tests/live_quota.rs` checks it, against a twin that reads
//!   the parameters field by field and that loom rejects.
//! - **What is live** ([`Retune`]): every change of a bucket, and of a sliding log (its
//!   limiters' `set_quota`: [`LogLimiter::set_quota`](crate::LogLimiter::set_quota)); a window
//!   counter's limit within its state's width. A window counter's length is not
//!   ([`QuotaChangeError`]: build a new limiter).
//! - **What the states become**: each algorithm's rule is on its [`Retune`] implementation;
//!   in short, for a client that had spent 8 of `10/s` (`tests/core/live_changes.rs`,
//!   `eight_of_ten_spent_then_five_or_twenty`):
//!
//!   | algorithm | kept | at `5/s` | at `20/s` |
//!   |---|---|---|---|
//!   | token bucket | the debt, in time (its TAT) | 4 of 5 spent, 1 left | 16 of 20 spent, 4 left |
//!   | leaky bucket | when the queue is empty; granted slots keep their times, new ones queue at the new interval | as the token bucket | as the token bucket |
//!   | fixed window, sliding window | the counts of the window in progress (and the previous one) | 8 counted: none left until the window ends | 8 counted: 12 left |
//!   | sliding log | every admission, at its time | none left until they leave the window | 12 left |
//!
//!   A leased Redis limiter keeps the quota it was built with (`docs/distributed.md`, "Leases").
//! - **Cost**: a plain `DirectLimiter<TokenBucket>` runs exactly the instructions it ran
//!   before; a `Live` one adds one snapshot load per attempt (`docs/benchmarks.md`).

mod error;
mod log;
mod retune;

pub use error::QuotaChangeError;
pub use log::LogQuota;
pub use retune::Retune;

use std::fmt;
use std::ops::Deref;
use std::time::Duration;

use crate::algorithm::{Admission, Algorithm, Transition};
use crate::sync::{lock, AtomicU64, Loaded, Mutex, Ordering, Snapshot};
use crate::{Decision, Quota, Timestamp};

/// An algorithm whose parameters can be replaced while limiters run it, keeping their states:
/// see the [module](self).
///
/// Every method of [`Algorithm`] reads one snapshot of the current parameters and runs `A`'s
/// on it; a limiter's compare-and-swap loop calls `decide` once per attempt, so each attempt
/// decides under one quota, and the state it stores is that quota's decision.
pub struct Live<A> {
    current: Snapshot<A>,
    /// How many changes were made: a layer that announces the quota builds its fields again
    /// when this moves.
    changes: AtomicU64,
    /// Serializes the changes: each is read, checked against the running parameters and
    /// stored whole.
    changing: Mutex<()>,
}

/// One snapshot of a [`Live`] algorithm's parameters ([`Live::current`]): a change made while
/// it is held does not alter it.
pub struct Current<A>(Loaded<A>);

impl<A> Deref for Current<A> {
    type Target = A;

    #[inline(always)]
    fn deref(&self) -> &A {
        &self.0
    }
}

impl<A: fmt::Debug> fmt::Debug for Current<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

impl<A> Live<A> {
    /// `algorithm`, changeable from now on.
    pub fn new(algorithm: A) -> Live<A> {
        Live {
            current: Snapshot::new(algorithm),
            changes: AtomicU64::new(0),
            changing: Mutex::new(()),
        }
    }

    /// The parameters now, as one snapshot.
    #[inline(always)]
    pub fn current(&self) -> Current<A> {
        Current(self.current.load())
    }

    /// How many changes have been made since it was built.
    pub fn changes(&self) -> u64 {
        // Relaxed: a count, read to notice a change; the parameters themselves are read from
        // their snapshot.
        self.changes.load(Ordering::Relaxed)
    }

    /// Replaces the parameters with what `next` makes of the running ones, if it accepts them:
    /// under the change lock, so that two changes never interleave.
    pub(crate) fn change<E>(&self, next: impl FnOnce(&A) -> Result<A, E>) -> Result<(), E> {
        let _changing = lock(&self.changing);
        let next = next(&self.current.load())?;
        self.current.store(next);
        // Relaxed: see `changes`.
        self.changes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

impl<A: Retune> Live<A> {
    /// Changes the quota: decisions from now on are made under `quota`, on the states kept
    /// from before (each algorithm's rule: [`Retune`]). A decision in flight is made under
    /// the old quota or the new one, never a mix.
    ///
    /// # Errors
    /// [`QuotaChangeError`] when `quota` is refused by the algorithm or cannot read the running
    /// states (a window counter's new length, or a limit past its 64-bit state): the quota stays
    /// as it was.
    pub fn set_quota(&self, quota: Quota) -> Result<(), QuotaChangeError> {
        self.change(|running| running.retune(quota))
    }

    /// Replaces the parameters with `next`, built by the caller (a window counter's with its
    /// state in 128 bits, say): as [`set_quota`](Self::set_quota).
    ///
    /// # Errors
    /// [`QuotaChangeError`] when `next` cannot read the running states.
    pub fn replace(&self, next: A) -> Result<(), QuotaChangeError> {
        self.change(|running| running.can_become(&next).map(|()| next))
    }
}

impl<A: fmt::Debug> fmt::Debug for Live<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Live")
            .field("current", &*self.current.load())
            .field("changes", &self.changes())
            .finish()
    }
}

/// The policy of the parameters in force now.
#[cfg(feature = "tower")]
impl<A: crate::policy::AnnouncedPolicy> crate::policy::AnnouncedPolicy for Live<A> {
    fn policy(&self) -> crate::policy::Policy {
        self.current().policy()
    }
}

/// Every method decides on one snapshot of the parameters, loaded at the call.
impl<A: Algorithm> Algorithm for Live<A> {
    fn capacity(&self) -> u64 {
        self.current().capacity()
    }

    #[inline(always)]
    fn decide(&self, state: u64, now: Timestamp, cost: u64) -> Transition {
        self.current().decide(state, now, cost)
    }

    fn is_idle(&self, state: u64, now: Timestamp) -> bool {
        self.current().is_idle(state, now)
    }

    fn is_reclaimable(&self, state: u64, now: Timestamp) -> bool {
        self.current().is_reclaimable(state, now)
    }

    fn reclaimable_in(&self, state: u64, now: Timestamp) -> Duration {
        self.current().reclaimable_in(state, now)
    }

    fn refund(&self, state: u64, now: Timestamp, cost: u64) -> u64 {
        self.current().refund(state, now, cost)
    }

    #[inline(always)]
    fn decide_within(&self, state: u64, now: Timestamp, cost: u64, max_delay: u64) -> Transition {
        self.current().decide_within(state, now, cost, max_delay)
    }

    fn refund_slot(&self, state: u64, now: Timestamp, cost: u64, end: Timestamp) -> u64 {
        self.current().refund_slot(state, now, cost, end)
    }

    fn undo(&self, state: u64, admission: &Admission) -> u64 {
        self.current().undo(state, admission)
    }

    /// The running parameters' width, which no change alters ([`Retune`] refuses one that
    /// would).
    fn is_wide(&self) -> bool {
        self.current().is_wide()
    }

    fn decide_wide(&self, state: u128, now: Timestamp, cost: u64) -> Transition<u128> {
        self.current().decide_wide(state, now, cost)
    }

    fn decide_within_wide(&self, state: u128, now: Timestamp, cost: u64, max_delay: u64) -> Transition<u128> {
        self.current().decide_within_wide(state, now, cost, max_delay)
    }

    fn is_idle_wide(&self, state: u128, now: Timestamp) -> bool {
        self.current().is_idle_wide(state, now)
    }

    fn is_reclaimable_wide(&self, state: u128, now: Timestamp) -> bool {
        self.current().is_reclaimable_wide(state, now)
    }

    fn reclaimable_in_wide(&self, state: u128, now: Timestamp) -> Duration {
        self.current().reclaimable_in_wide(state, now)
    }

    fn undo_wide(&self, state: u128, admission: &Admission) -> u128 {
        self.current().undo_wide(state, admission)
    }

    fn changes(&self) -> u64 {
        Live::changes(self)
    }

    #[cfg(feature = "tower")]
    fn announced(&self) -> Option<crate::policy::Policy> {
        self.current().announced()
    }

    /// `A`'s, on one snapshot: a wide configuration's `wide` decides on the limiter's 128-bit
    /// cell, where each attempt loads its own snapshot ([`decide_wide`](Self::decide_wide));
    /// the width, which the snapshot here reads, never changes.
    #[inline(always)]
    fn decide_in_cells(
        &self,
        state: u64,
        now: Timestamp,
        cost: u64,
        wide: impl FnOnce(Timestamp, u64) -> Decision,
    ) -> Transition {
        self.current().decide_in_cells(state, now, cost, wide)
    }
}
