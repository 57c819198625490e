//! The pure decision logic: `(state, now, cost) -> (new state, decision)`, one file per
//! algorithm, with no atomics and no clock.
//!
//! Every algorithm keeps its whole state in one `u64` whose bit layout its module documents,
//! and every algorithm's fresh state (a limiter never used) is `0`. The atomic cell
//! ([`DirectLimiter`](crate::DirectLimiter), and the keyed table) runs these functions inside a
//! compare-and-swap loop; tests run them on plain integers.

mod divisor;
mod fixed_window;
mod gcra;
mod leaky_bucket;
mod sliding_window;
pub(crate) mod steps;
mod token_bucket;
mod window;

pub use fixed_window::{FixedWindow, FixedWindowState};
pub use gcra::{GcraState, MAX_EMISSION_INTERVAL};
pub use leaky_bucket::LeakyBucket;
pub use sliding_window::{SlidingWindow, SlidingWindowState};
pub use token_bucket::TokenBucket;

use std::time::Duration;

use crate::{Decision, Timestamp};

/// The state word of a limiter (or key) that has never admitted anything, for every algorithm.
pub const FRESH_STATE: u64 = 0;

/// A rate-limiting algorithm as a pure function over a packed 64-bit state.
///
/// # Contract
/// - `decide` is pure: the same `(state, now, cost)` always gives the same transition.
/// - Only admitted requests are counted. A denied decision stores the state it was decided on,
///   so it needs no write, with one exception: [`SlidingWindow`] stores its state moved forward
///   to a later window than the stored one (the same counts, so a decision at a later time is
///   unchanged), once per window.
/// - A weightless request (`cost` 0) counts nothing and stores the state it was decided on.
/// - `cost <= capacity()` is the caller's precondition (the limiters check it and return
///   [`CostTooLarge`](crate::CostTooLarge)); a larger cost is denied, never a panic.
/// - Time may go backwards between calls; the algorithm must never admit more because of it:
///   what it admits, replayed at the running maximum of the times its counted decisions (weight
///   1 or more, admitted or refused) were made at, is admitted there too (`docs/design.md`,
///   "Time that goes backwards").
pub trait Algorithm: Send + Sync {
    /// The heaviest single request that can ever pass.
    fn capacity(&self) -> u64;

    /// Decides a request of weight `cost` arriving at `now`, given the current `state`.
    fn decide(&self, state: u64, now: Timestamp, cost: u64) -> Transition;

    /// Whether `state` carries nothing forward at `now`: every decision at `now` or later is the
    /// same as for [`FRESH_STATE`]. A keyed table may then forget the key; a key whose state
    /// still carries debt is never forgotten, so no client comes back with more than it had.
    fn is_idle(&self, state: u64, now: Timestamp) -> bool;

    /// Whether a keyed table may forget a key in `state` at `now` to make room for another. The
    /// default is [`is_idle`](Self::is_idle).
    ///
    /// A key forgotten at `now` and asked for again with an earlier reading of the clock
    /// (another thread's, taken a moment before the reclaim, or `check_at` with an earlier
    /// time) is decided as a fresh key. An algorithm whose idle state still weighs at instants
    /// just before `now` may keep the key longer, so that such a request gains no more than its
    /// step back: [`FixedWindow`] keeps a key until its window ended a whole window ago (at the
    /// boundary, forgetting it would give a reading from just before a whole limit more in the
    /// window it had used up). Must imply `is_idle`.
    fn is_reclaimable(&self, state: u64, now: Timestamp) -> bool {
        self.is_idle(state, now)
    }

    /// How long after `now` `state` becomes [reclaimable](Self::is_reclaimable) if nothing more
    /// is admitted: what a new key refused for a full table is told to wait. The default is the
    /// time until the state is full again (a weightless decision's reset-after), right for an
    /// algorithm that keeps the default `is_reclaimable`.
    fn reclaimable_in(&self, state: u64, now: Timestamp) -> Duration {
        self.decide(state, now, 0).decision.reset_after()
    }

    /// Gives back `cost` units admitted earlier and never used (a shaped request abandoned
    /// before its slot), returning the state to store. Returning `state` unchanged means nothing
    /// is given back, which is what the default does.
    ///
    /// It must never give back more than is outstanding: the result is never better than a
    /// fresh state, and an implementation that cannot tell which units are outstanding (the
    /// windows: a count does not say when its units were admitted) keeps the default.
    fn refund(&self, state: u64, now: Timestamp, cost: u64) -> u64 {
        let _ = (now, cost);
        state
    }

    /// [`decide`](Self::decide) for a request that will wait at most `max_delay` ns for its
    /// [`delay`](Decision::delay): one whose delay would be longer is refused (not counted)
    /// instead, so that the caller never has to give back a slot it cannot use. The default is
    /// `decide`, right for every algorithm whose decisions carry no delay; the shaper
    /// ([`LeakyBucket`]) overrides it. An override must decide as `decide` when `max_delay` is
    /// `u64::MAX` (no wait is longer): a [`KeyedLimiter`](crate::KeyedLimiter) decides a new
    /// key's plain `check_n` so.
    // Always inlined, as every algorithm's `decide`: the keyed table's insert path calls this
    // default for every algorithm but the shaper, and returning the transition through memory
    // cost an insert 38 instructions (callgrind, `keyed/*/insert/tollgate`).
    #[inline(always)]
    fn decide_within(&self, state: u64, now: Timestamp, cost: u64, max_delay: u64) -> Transition {
        let _ = max_delay;
        self.decide(state, now, cost)
    }

    /// Gives back the slot of `cost` units whose admission left the queue ending at `end` (for
    /// the buckets: the TAT it stored, `now + reset_after` of its decision), only if no other
    /// admission has been scheduled after it since (other than ones given back in their turn).
    /// Otherwise nothing is given back: the slot passes unused, and the requests scheduled
    /// behind it keep their places, one interval apart. Returns the state to store, as
    /// [`refund`](Self::refund). The default is `refund` itself, unconditional (an algorithm
    /// that does not know where its queue ends gives back as it always did, rather than never:
    /// the tower layer refunds a shaped request's slot through this method).
    fn refund_slot(&self, state: u64, now: Timestamp, cost: u64, end: Timestamp) -> u64 {
        let _ = end;
        self.refund(state, now, cost)
    }
}

/// The result of [`Algorithm::decide`]: the state to store and the answer to give.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transition {
    /// The state after the decision: the input state when denied, but for a sliding window
    /// moved forward to a later window (see [`Algorithm`]'s contract).
    pub state: u64,
    /// The answer.
    pub decision: Decision,
}

impl Transition {
    /// A refusal, which counts nothing and stores `state`: the state it was decided on, or (the
    /// sliding window) that state moved forward to a later window.
    pub(crate) const fn refuse(state: u64, decision: Decision) -> Self {
        Transition { state, decision }
    }

    /// The transition an out-of-line path returned as [`OutOfLine`] parts.
    #[inline(always)]
    pub(crate) const fn from_out_of_line((state, decision): OutOfLine) -> Self {
        Transition { state, decision }
    }
}

/// A [`Transition`] as an out-of-line (`#[cold]`, `#[inline(never)]`) path of an inlined
/// `decide` returns it: `(state, decision)`, which
/// [`Transition::from_out_of_line`] rebuilds.
///
/// Not a `Transition` itself: the caller's rebuild of one from the two parts is then a copy
/// field by field, which the compiler does not turn into the call writing its result straight
/// into the transition the inlined fast path builds. When the call wrote there, that one stack
/// slot held every decision's transition, and each decision stored and reloaded its six words
/// (callgrind, `direct/precise/tollgate_{sliding,fixed}_window/allowed`: 23 instructions of 120, 18 of 92).
pub(crate) type OutOfLine = (u64, Decision);
