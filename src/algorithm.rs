//! The pure decision logic: `(state, now, cost) -> (new state, decision)`, one file per
//! algorithm, with no atomics and no clock.
//!
//! Every algorithm keeps its whole state in one `u64` whose bit layout its module documents,
//! but a window whose limit does not fit one word beside its window index, and a token bucket
//! whose rate whole nanoseconds cannot hold within 1%: its state then takes 128 bits
//! ([`Algorithm::is_wide`], chosen at construction from the quota), and it is decided by the
//! `_wide` methods. Every algorithm's fresh state (a limiter never used) is `0`. The
//! atomic cell ([`DirectLimiter`](crate::DirectLimiter), and the keyed table) runs these
//! functions inside a compare-and-swap loop; tests run them on plain integers.

mod admission;
#[cfg(feature = "tower")]
mod announced;
mod divisor;
mod fixed_window;
mod gcra;
mod leaky_bucket;
mod sliding_window;
pub(crate) mod steps;
mod token_bucket;
mod wide_gcra;
mod window;

pub use admission::Admission;
pub use fixed_window::{FixedWindow, FixedWindowState};
pub use gcra::{GcraState, MAX_EMISSION_INTERVAL};
pub use leaky_bucket::LeakyBucket;
pub use sliding_window::{SlidingWindow, SlidingWindowState};
pub use token_bucket::TokenBucket;

use std::time::Duration;

use crate::{Decision, Timestamp};

/// The state word of a limiter (or key) that has never admitted anything, for every algorithm.
pub const FRESH_STATE: u64 = 0;

/// The 128-bit state of a limiter (or key) that has never admitted anything, for every
/// algorithm whose state is [wide](Algorithm::is_wide).
pub const FRESH_WIDE_STATE: u128 = 0;

/// A rate-limiting algorithm as a pure function over a packed 64-bit state (or, for a window
/// whose limit does not fit one word, a 128-bit one: [`is_wide`](Self::is_wide)).
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

    /// Undoes `admission`, made a moment ago on this state's key, exactly: returns the state to
    /// store, which decides every later request (at the admission's time or after it) as if
    /// the request had been refused instead. Used by a [`PolicySet`](crate::PolicySet) to give
    /// back what the policies before a refusing one took.
    ///
    /// Unlike [`refund`](Self::refund), every algorithm can: the admission says when its units
    /// were counted. A fixed window subtracts them from its count while the stored window is
    /// still the one they were counted in (after that they count no more); a sliding window from
    /// its current count, or from its previous one once the window has moved on once; the
    /// buckets move their TAT back as [`refund_slot`](Self::refund_slot) does, only while the
    /// admission still ends the queue (otherwise nothing is given back, so that no request
    /// scheduled behind it gains). Never gives back more than the admission took.
    ///
    /// The default is `refund_slot` with the admission's time, weight and end: right for the
    /// buckets, and for an algorithm whose `refund_slot` gives nothing back (its units are then
    /// kept: never an over-admission).
    fn undo(&self, state: u64, admission: &Admission) -> u64 {
        self.refund_slot(state, admission.at(), admission.cost(), admission.end())
    }

    /// Whether this configuration keeps its state in 128 bits, decided by the `_wide` methods:
    /// a window whose limit does not fit one 64-bit word beside its window index
    /// ([`SlidingWindow::max_narrow_limit`], [`FixedWindow::max_narrow_limit`]), or a bucket
    /// ([`TokenBucket`], [`LeakyBucket`]) whose emission interval whole nanoseconds would run
    /// over 1% slow (its TAT in units of `1 / count` ns: see the token bucket's "Rounding").
    /// Chosen at
    /// construction, from the quota; the limiters then hold a 128-bit cell instead of a 64-bit
    /// one (the direct limiter a 16-byte atomic, the keyed table a slot with a short lock per
    /// key: `docs/design.md`, "Wide states"). The default is `false`: every other algorithm's
    /// state is one `u64`, and its `_wide` methods decide it in the low 64 bits.
    ///
    /// A wide configuration's 64-bit methods decide the state zero-extended to 128 bits (a
    /// window index of 0) and return the low 64 bits of what they store: meaningful only for
    /// such states; the limiters never call them for it. A wide bucket's ([`TokenBucket`],
    /// [`LeakyBucket`]) are safe rather than meaningful: its 64-bit `decide` and
    /// `decide_within` refuse every request, its `is_idle` is true only where `is_idle_wide`
    /// is, and its refunds give nothing back.
    fn is_wide(&self) -> bool {
        false
    }

    /// [`decide`](Self::decide) on a 128-bit state: for a [wide](Self::is_wide) configuration,
    /// its decision; for any other, `decide` on the low 64 bits (its states never set the
    /// others). A wide shaper's ([`LeakyBucket`]) decisions carry their delay, rounded up to
    /// whole nanoseconds; no other wide configuration's do.
    fn decide_wide(&self, state: u128, now: Timestamp, cost: u64) -> Transition<u128> {
        Transition::widened(self.decide(low_half(state), now, cost))
    }

    /// [`decide_within`](Self::decide_within) on a 128-bit state (see
    /// [`decide_wide`](Self::decide_wide)): what the limiters decide a wide state's
    /// `check_n_within` with. The default is, for a wide configuration, `decide_wide` (right
    /// for every one whose decisions carry no delay; the shaper overrides it), and for any
    /// other `decide_within` on the low 64 bits. As for `decide_within`, an override must
    /// decide as `decide_wide` when `max_delay` is `u64::MAX`.
    fn decide_within_wide(&self, state: u128, now: Timestamp, cost: u64, max_delay: u64) -> Transition<u128> {
        match self.is_wide() {
            true => self.decide_wide(state, now, cost),
            false => Transition::widened(self.decide_within(low_half(state), now, cost, max_delay)),
        }
    }

    /// [`is_idle`](Self::is_idle) on a 128-bit state (see [`decide_wide`](Self::decide_wide)).
    /// A wide configuration overrides it, as it does `decide_wide`.
    fn is_idle_wide(&self, state: u128, now: Timestamp) -> bool {
        self.is_idle(low_half(state), now)
    }

    /// [`is_reclaimable`](Self::is_reclaimable) on a 128-bit state (see
    /// [`decide_wide`](Self::decide_wide)). Must imply `is_idle_wide`. The default is, for a
    /// wide configuration, `is_idle_wide` (as `is_reclaimable`'s is `is_idle`), and for any
    /// other `is_reclaimable` on the low 64 bits.
    fn is_reclaimable_wide(&self, state: u128, now: Timestamp) -> bool {
        match self.is_wide() {
            true => self.is_idle_wide(state, now),
            false => self.is_reclaimable(low_half(state), now),
        }
    }

    /// How many times this configuration's parameters have been changed live: 0 for every
    /// algorithm but [`Live`](crate::Live), which counts its changes. A tower layer that
    /// announces the quota builds its fields again when this moves.
    fn changes(&self) -> u64 {
        0
    }

    /// The policy the tower layer announces for this configuration (feature `tower`):
    /// tollgate's algorithms announce their
    /// [`AnnouncedPolicy`](crate::middleware::AnnouncedPolicy); the default announces none (a
    /// [`PolicySet`](crate::PolicySet) member without one is left out of the fields).
    #[cfg(feature = "tower")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
    fn announced(&self) -> Option<crate::policy::Policy> {
        None
    }

    /// [`undo`](Self::undo) on a 128-bit state (see [`decide_wide`](Self::decide_wide)). A
    /// wide configuration overrides it; the default undoes the low 64 bits of any other, and
    /// keeps a wide state as it is.
    fn undo_wide(&self, state: u128, admission: &Admission) -> u128 {
        match self.is_wide() {
            true => state,
            false => u128::from(self.undo(low_half(state), admission)),
        }
    }

    /// [`reclaimable_in`](Self::reclaimable_in) on a 128-bit state (see
    /// [`decide_wide`](Self::decide_wide)). The default is, for a wide configuration, the time
    /// until the state is full again (a weightless decision's reset-after, as for
    /// `reclaimable_in`), and for any other `reclaimable_in` on the low 64 bits.
    fn reclaimable_in_wide(&self, state: u128, now: Timestamp) -> Duration {
        match self.is_wide() {
            true => self.decide_wide(state, now, 0).decision.reset_after(),
            false => self.reclaimable_in(low_half(state), now),
        }
    }

    /// [`decide`](Self::decide) as a limiter runs it: `wide(now, cost)` decides the request on
    /// the limiter's 128-bit cell instead, and a [wide](Self::is_wide) configuration calls it
    /// (and returns `state` unchanged, with its decision) where every other decides on `state`.
    /// (`now` and `cost` are passed to it, not captured: a closure that captured them kept them
    /// in memory on every decision.)
    ///
    /// The limiters reach the wide cell this way, through the window's own branch to its
    /// general path (never taken by a 64-bit configuration's common decisions), rather than
    /// through a branch of their own: a 64-bit decision runs the same instructions as without
    /// wide states (`docs/design.md`, "Wide states"). Not for callers outside tollgate.
    #[doc(hidden)]
    #[inline(always)]
    fn decide_in_cells(
        &self,
        state: u64,
        now: Timestamp,
        cost: u64,
        wide: impl FnOnce(Timestamp, u64) -> Decision,
    ) -> Transition
    where
        Self: Sized,
    {
        let _ = wide;
        self.decide(state, now, cost)
    }
}

/// The low 64 bits of a 128-bit state: a 64-bit algorithm's whole state.
#[inline(always)]
pub(crate) const fn low_half(state: u128) -> u64 {
    state as u64
}

/// The result of [`Algorithm::decide`] (and, with a `u128` state, of
/// [`Algorithm::decide_wide`]): the state to store and the answer to give.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transition<S = u64> {
    /// The state after the decision: the input state when denied, but for a sliding window
    /// moved forward to a later window (see [`Algorithm`]'s contract).
    pub state: S,
    /// The answer.
    pub decision: Decision,
}

impl<S> Transition<S> {
    /// A refusal, which counts nothing and stores `state`: the state it was decided on, or (the
    /// sliding window) that state moved forward to a later window.
    pub(crate) const fn refuse(state: S, decision: Decision) -> Self {
        Transition { state, decision }
    }

    /// The transition an out-of-line path returned as [`OutOfLine`] parts.
    #[inline(always)]
    pub(crate) fn from_out_of_line((state, decision): OutOfLine<S>) -> Self {
        Transition { state, decision }
    }
}

impl Transition<u128> {
    /// A 64-bit transition in a 128-bit state (its high half 0).
    #[inline(always)]
    pub(crate) const fn widened(narrow: Transition) -> Self {
        Transition {
            state: narrow.state as u128,
            decision: narrow.decision,
        }
    }

    /// The low 64 bits of this transition (a wide configuration's 64-bit methods: see
    /// [`Algorithm::is_wide`]).
    #[inline(always)]
    pub(crate) const fn low_half(self) -> Transition {
        Transition {
            state: low_half(self.state),
            decision: self.decision,
        }
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
pub(crate) type OutOfLine<S = u64> = (S, Decision);
