//! The un-keyed limiter: one algorithm, one cache-padded state word (128 bits for a wide
//! state), one clock.

mod undo;

use std::fmt;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::algorithm::{steps, Algorithm, Transition, FRESH_STATE, FRESH_WIDE_STATE};
use crate::clock::{Clock, PreciseClock};
use crate::error::CostTooLarge;
use crate::meter::Metering;
use crate::sync::{AtomicU128, AtomicU64};
use crate::time::duration_to_nanos_saturating;
use crate::{cell, Decision, Timestamp};

/// The decision methods of an un-keyed limiter, written once for [`DirectLimiter`] and
/// [`LogLimiter`](crate::LogLimiter), inside each one's `impl<.., C: Clock>`: `check`, `check_n`,
/// `peek`, `peek_n`, each `_at` a time the caller supplies, and `clock`. The limiter has a field
/// `clock: C` and three private methods:
///
/// - `fits(&self, cost: u64) -> Result<(), CostTooLarge>`: `cost` is at most its capacity;
/// - `decide(&self, now: Timestamp, cost: u64) -> Decision`: decides and counts;
/// - `peek_decision(&self, now: Timestamp, cost: u64) -> Decision`: the same, counting nothing.
///
/// Each method is the forwarding line it would be written by hand: the generated code is the
/// same (`docs/design.md`, "Sliding window log").
macro_rules! decision_methods {
    () => {
        /// Decides one request of weight 1 now, and counts it if admitted.
        #[inline]
        pub fn check(&self) -> $crate::Decision {
            self.check_at(self.clock.now())
        }

        /// Decides one request of weight `cost` now, and counts it if admitted.
        ///
        /// # Errors
        /// [`CostTooLarge`](crate::CostTooLarge) when `cost` exceeds the
        /// [capacity](Self::capacity): such a request could never pass. The state is not
        /// touched.
        #[inline]
        pub fn check_n(&self, cost: u64) -> Result<$crate::Decision, $crate::CostTooLarge> {
            self.check_n_at(cost, self.clock.now())
        }

        /// What [`check`](Self::check) would answer now, without counting anything.
        #[inline]
        pub fn peek(&self) -> $crate::Decision {
            self.peek_at(self.clock.now())
        }

        /// What [`check_n`](Self::check_n) would answer now, without counting anything.
        ///
        /// # Errors
        /// [`CostTooLarge`](crate::CostTooLarge), as for `check_n`.
        #[inline]
        pub fn peek_n(&self, cost: u64) -> Result<$crate::Decision, $crate::CostTooLarge> {
            self.peek_n_at(cost, self.clock.now())
        }

        /// [`check`](Self::check) at a time the caller supplies instead of the clock's.
        #[inline]
        pub fn check_at(&self, now: $crate::Timestamp) -> $crate::Decision {
            // Every capacity is at least 1.
            self.decide(now, 1)
        }

        /// [`check_n`](Self::check_n) at a time the caller supplies.
        ///
        /// # Errors
        /// [`CostTooLarge`](crate::CostTooLarge), as for `check_n`.
        #[inline]
        pub fn check_n_at(
            &self,
            cost: u64,
            now: $crate::Timestamp,
        ) -> Result<$crate::Decision, $crate::CostTooLarge> {
            self.fits(cost)?;
            Ok(self.decide(now, cost))
        }

        /// [`peek`](Self::peek) at a time the caller supplies.
        #[inline]
        pub fn peek_at(&self, now: $crate::Timestamp) -> $crate::Decision {
            self.peek_decision(now, 1)
        }

        /// [`peek_n`](Self::peek_n) at a time the caller supplies.
        ///
        /// # Errors
        /// [`CostTooLarge`](crate::CostTooLarge), as for `check_n`.
        #[inline]
        pub fn peek_n_at(
            &self,
            cost: u64,
            now: $crate::Timestamp,
        ) -> Result<$crate::Decision, $crate::CostTooLarge> {
            self.fits(cost)?;
            Ok(self.peek_decision(now, cost))
        }

        /// The clock.
        pub fn clock(&self) -> &C {
            &self.clock
        }
    };
}
pub(crate) use decision_methods;

/// A limiter for one stream of requests (the whole service, one upstream, one tenant), shared
/// by every thread that holds a reference to it.
///
/// Each decision reads the clock once and runs one compare-and-swap loop on one `AtomicU64`: no
/// lock, no allocation. The word is padded to its own cache line so that neighbouring data never
/// shares its line. A window whose limit does not fit one word ([`Algorithm::is_wide`], chosen
/// by the algorithm from its quota) keeps its state in a 128-bit atomic in the same line
/// instead, with the same loop; the 64-bit path runs the same instructions whether or not that
/// word is there (`docs/design.md`, "Wide states").
///
/// ```
/// use std::sync::Arc;
/// use tollgate::{DirectLimiter, Quota, TokenBucket};
///
/// let limiter = Arc::new(DirectLimiter::new(TokenBucket::new(Quota::per_second(1000)?)?));
/// let workers: Vec<_> = (0..4)
///     .map(|_| {
///         let limiter = Arc::clone(&limiter);
///         std::thread::spawn(move || (0..100).filter(|_| limiter.check().is_allowed()).count())
///     })
///     .collect();
/// let admitted: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
/// assert_eq!(admitted, 400); // a fresh bucket of 1000 admits all of them
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct DirectLimiter<A, C = PreciseClock> {
    state: CachePadded<Cells>,
    algorithm: A,
    clock: C,
    /// Counts its decisions once named (feature `metrics`).
    pub(crate) metering: Metering,
}

/// A direct limiter's state: a 64-bit word, and a 128-bit one for a [wide](Algorithm::is_wide)
/// state. The algorithm decides which one is used, at construction; the other stays fresh.
/// Both share one cache line: only one of them is ever written.
#[derive(Debug)]
struct Cells {
    narrow: AtomicU64,
    wide: AtomicU128,
}

impl<A: Algorithm> DirectLimiter<A, PreciseClock> {
    /// A limiter on the [`PreciseClock`].
    pub fn new(algorithm: A) -> Self {
        DirectLimiter::with_clock(algorithm, PreciseClock::new())
    }
}

impl<A: Algorithm, C: Clock> DirectLimiter<A, C> {
    /// A limiter reading `clock`.
    pub fn with_clock(algorithm: A, clock: C) -> Self {
        DirectLimiter {
            state: CachePadded::new(Cells {
                narrow: AtomicU64::new(FRESH_STATE),
                wide: AtomicU128::new(FRESH_WIDE_STATE),
            }),
            algorithm,
            clock,
            metering: Metering::NONE,
        }
    }

    decision_methods!();

    /// Gives back `cost` units admitted earlier and never used: the next request may take their
    /// place. Returns whether anything was given back. For a shaped request whose client left
    /// before its slot, [`refund_slot`](Self::refund_slot) keeps the shaper's spacing; this one
    /// gives back even a slot in the middle of the queue, whose interval then goes to the next
    /// request, which leaves with the last one waiting.
    ///
    /// Only the buckets ([`TokenBucket`](crate::TokenBucket), [`LeakyBucket`](crate::LeakyBucket))
    /// can give units back; the windows cannot tell when their units were admitted, so they keep
    /// their count and return `false`. Never gives back more than is outstanding: a full bucket
    /// stays full.
    #[inline]
    pub fn refund_n(&self, cost: u64) -> bool {
        self.refund_n_at(cost, self.clock.now())
    }

    /// [`refund_n`](Self::refund_n) at a time the caller supplies.
    #[inline]
    pub fn refund_n_at(&self, cost: u64, now: Timestamp) -> bool {
        // A wide state (a window's, a bucket's) gives nothing back: see `Algorithm::is_wide`.
        if self.algorithm.is_wide() {
            return false;
        }
        let mut gave_back = false;
        let _ = cell::update(&self.state.narrow, |state| {
            steps::refund(&self.algorithm, state, now, cost, &mut gave_back)
        });
        gave_back
    }

    /// Forgets everything counted so far: the limiter is back to a fresh one's state (a full
    /// bucket, empty windows), as if it had just been built. Returns whether it was still
    /// limiting now, that is whether its state was not already as good as a fresh one's.
    ///
    /// For an operator's or an application's decision (a user who logged in successfully, an
    /// account whose quota was raised), not for the request path. A decision racing it is
    /// counted either before the reset (and forgotten) or after it (and kept).
    ///
    /// A slot admitted before the reset must not be given back after it with
    /// [`refund_slot`](Self::refund_slot): its end names no slot any more, and when a slot
    /// admitted after the reset ends at the same instant (one time base, a coarse or manual
    /// clock), that slot is given back instead, and two requests are given the same instant.
    pub fn reset(&self) -> bool {
        self.reset_at(self.clock.now())
    }

    /// [`reset`](Self::reset), with "still limiting" judged at a time the caller supplies.
    pub fn reset_at(&self, now: Timestamp) -> bool {
        let mut limiting = false;
        if self.algorithm.is_wide() {
            let _ = cell::update_wide(&self.state.wide, |state| {
                limiting = !self.algorithm.is_idle_wide(state, now);
                Transition::refuse(FRESH_WIDE_STATE, Decision::table_full(0))
            });
        } else {
            let _ = cell::update(&self.state.narrow, |state| {
                steps::reset(&self.algorithm, state, now, &mut limiting)
            });
        }
        limiting
    }

    /// [`check_n`](Self::check_n) for a request that will wait at most `max_delay` for its
    /// slot: a shaper's admission whose [`delay`](Decision::delay) would be longer is refused
    /// instead, in the same compare-and-swap, with nothing counted, so that no slot has to be
    /// given back (the refusal's [`retry_after`](Decision::retry_after) is when the wait fits,
    /// its `remaining` 0). Every other decision is `check_n`'s; for the algorithms whose
    /// decisions never wait, it is `check_n`.
    ///
    /// # Errors
    /// [`CostTooLarge`], as for `check_n`.
    #[inline]
    pub fn check_n_within(&self, cost: u64, max_delay: Duration) -> Result<Decision, CostTooLarge> {
        self.check_n_within_at(cost, max_delay, self.clock.now())
    }

    /// [`check_n_within`](Self::check_n_within) at a time the caller supplies.
    ///
    /// # Errors
    /// [`CostTooLarge`], as for `check_n`.
    #[inline]
    pub fn check_n_within_at(
        &self,
        cost: u64,
        max_delay: Duration,
        now: Timestamp,
    ) -> Result<Decision, CostTooLarge> {
        self.fits(cost)?;
        let max_delay = duration_to_nanos_saturating(max_delay);
        if self.algorithm.is_wide() {
            return Ok(self
                .metering
                .counted(cell::update_wide(&self.state.wide, |state| {
                    self.algorithm.decide_within_wide(state, now, cost, max_delay)
                })));
        }
        Ok(self.metering.counted(cell::update(&self.state.narrow, |state| {
            self.algorithm.decide_within(state, now, cost, max_delay)
        })))
    }

    /// [`check_n_within`](Self::check_n_within) (or [`check_n`](Self::check_n) when `max_delay`
    /// is `None`), with the end of the slot an admission was given: the `end` that
    /// [`refund_slot`](Self::refund_slot) names to give that slot back if its request is
    /// abandoned before it (a shaped request whose client left). `None` unless the request was
    /// admitted. The end is computed from the very time the decision read, once.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{DirectLimiter, LeakyBucket, ManualClock};
    ///
    /// let limiter = DirectLimiter::with_clock(LeakyBucket::new("1/s burst 3".parse()?)?, ManualClock::new());
    /// let (first, _) = limiter.check_slot(1, None)?;
    /// let (second, end) = limiter.check_slot(1, Some(Duration::from_secs(5)))?;
    /// assert_eq!(second.delay(), Duration::from_secs(1));
    /// // The second request's client leaves before its slot: its slot ends the queue, so it
    /// // goes back, and the next request takes it.
    /// assert!(limiter.refund_slot(1, end.expect("admitted")));
    /// assert_eq!(limiter.check().delay(), Duration::from_secs(1));
    /// # let _ = first;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`CostTooLarge`], as for `check_n`.
    pub fn check_slot(
        &self,
        cost: u64,
        max_delay: Option<Duration>,
    ) -> Result<(Decision, Option<Timestamp>), CostTooLarge> {
        let now = self.clock.now();
        let decision = match max_delay {
            Some(max) => self.check_n_within_at(cost, max, now),
            None => self.check_n_at(cost, now),
        }?;
        Ok((decision, decision.slot_end(now)))
    }

    /// Gives back the slot of `cost` units that ended the queue at `end`, only if it still
    /// does: no other admission has been scheduled after it since (other than ones given back
    /// in their turn). Otherwise nothing is given back: the slot passes unused, and the
    /// requests scheduled behind it keep their places. Returns whether anything was given back.
    ///
    /// `end` is the end of the admission's slot: `decided_at.saturating_add(decision.reset_after())`,
    /// with `decided_at` the time the admission was decided at (the `now` of
    /// [`check_n_at`](Self::check_n_at)) and `decision` its answer (a bucket's reset-after is
    /// exactly its new TAT minus `now`, in whole nanoseconds, so this is the TAT it stored).
    ///
    /// This is the refund for a shaper ([`LeakyBucket`](crate::LeakyBucket)): the unconditional
    /// [`refund_n`](Self::refund_n) of a slot in the middle of the queue gives its interval to
    /// the next request, which then leaves at the same instant as the last one waiting; this
    /// one keeps every forwarded request at least one interval from the next. For the windows,
    /// as for `refund_n`, nothing is given back.
    #[inline]
    pub fn refund_slot(&self, cost: u64, end: Timestamp) -> bool {
        self.refund_slot_at(cost, end, self.clock.now())
    }

    /// [`refund_slot`](Self::refund_slot) at a time the caller supplies.
    #[inline]
    pub fn refund_slot_at(&self, cost: u64, end: Timestamp, now: Timestamp) -> bool {
        // A wide state (a window's, a bucket's) gives nothing back: see `Algorithm::is_wide`.
        if self.algorithm.is_wide() {
            return false;
        }
        let mut gave_back = false;
        let _ = cell::update(&self.state.narrow, |state| {
            let after = self.algorithm.refund_slot(state, now, cost, end);
            steps::given_back(state, after, &mut gave_back)
        });
        gave_back
    }

    /// The heaviest request that can ever pass.
    pub fn capacity(&self) -> u64 {
        self.algorithm.capacity()
    }

    /// The algorithm and its parameters.
    pub fn algorithm(&self) -> &A {
        &self.algorithm
    }

    /// The raw packed state word (for diagnostics and tests); for a
    /// [wide](Algorithm::is_wide) state, its low 64 bits ([`raw_state_wide`](Self::raw_state_wide)
    /// gives it whole).
    pub fn raw_state(&self) -> u64 {
        match self.algorithm.is_wide() {
            true => cell::load_wide(&self.state.wide) as u64,
            false => cell::load(&self.state.narrow),
        }
    }

    /// The raw packed state, 128 bits: a [wide](Algorithm::is_wide) state, or the 64-bit one
    /// zero-extended (for diagnostics and tests).
    pub fn raw_state_wide(&self) -> u128 {
        match self.algorithm.is_wide() {
            true => cell::load_wide(&self.state.wide),
            false => u128::from(cell::load(&self.state.narrow)),
        }
    }

    #[inline]
    fn fits(&self, cost: u64) -> Result<(), CostTooLarge> {
        CostTooLarge::check(cost, self.algorithm.capacity())
    }

    /// Decides and counts `cost` units at `now`: the CAS loop on the 64-bit word, which a wide
    /// configuration's algorithm leaves for the 128-bit one from its general path (see
    /// [`Algorithm::decide_in_cells`]).
    #[inline(always)]
    fn decide(&self, now: Timestamp, cost: u64) -> Decision {
        self.metering.counted(cell::update(&self.state.narrow, |state| {
            self.algorithm
                .decide_in_cells(state, now, cost, |now, cost| self.decide_wide(now, cost))
        }))
    }

    /// What [`decide`](Self::decide) would answer, counting nothing.
    #[inline(always)]
    fn peek_decision(&self, now: Timestamp, cost: u64) -> Decision {
        let state = cell::load(&self.state.narrow);
        self.algorithm
            .decide_in_cells(state, now, cost, |now, cost| self.peek_wide(now, cost))
            .decision
    }

    /// [`decide`](Self::decide) on the 128-bit word.
    fn decide_wide(&self, now: Timestamp, cost: u64) -> Decision {
        cell::update_wide(&self.state.wide, |state| {
            self.algorithm.decide_wide(state, now, cost)
        })
    }

    /// [`peek_decision`](Self::peek_decision) on the 128-bit word.
    fn peek_wide(&self, now: Timestamp, cost: u64) -> Decision {
        let state = cell::load_wide(&self.state.wide);
        self.algorithm.decide_wide(state, now, cost).decision
    }
}

impl<A: fmt::Debug, C: fmt::Debug> fmt::Debug for DirectLimiter<A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DirectLimiter")
            .field("algorithm", &self.algorithm)
            .field("clock", &self.clock)
            // The word in use: the other one stays fresh (0).
            .field(
                "state",
                &(u128::from(cell::load(&self.state.narrow)) | cell::load_wide(&self.state.wide)),
            )
            .finish()
    }
}
