//! The un-keyed sliding log: one ring behind one lock, one clock.

use std::fmt;

use crossbeam_utils::CachePadded;

use super::faults::LogFaults;
use super::state::LogState;
use super::SlidingLog;
use crate::clock::{Clock, PreciseClock};
use crate::error::CostTooLarge;
use crate::meter::Metering;
use crate::sync::{lock, Mutex};
use crate::{Decision, Timestamp};

/// A [`SlidingLog`] for one stream of requests, shared by every thread that holds a reference
/// to it: the exact counterpart of a [`DirectLimiter`](crate::DirectLimiter), with the same
/// methods but for `refund_n`, `refund_n_at`, `refund_slot`, `refund_slot_at`, `check_n_within`
/// and `check_n_within_at` (the log never delays a request, so none waits for a slot or is
/// abandoned before it) and `raw_state` (its state is a ring, not a word), and the same
/// [`Decision`]s.
///
/// Its ring of timestamps (8 bytes per unit of the limit) is allocated once, here, and never
/// again. Each decision reads the clock once, then holds the log's lock only while it decides
/// (a search from the oldest entry still in the window) and records the admitted units; nothing else runs under it, and nothing
/// is allocated. The lock and ring are padded to their own cache line.
///
/// ```
/// use tollgate::{LogLimiter, ManualClock, SlidingLog, Timestamp};
///
/// let clock = ManualClock::starting_at(Timestamp::from_secs(10));
/// let limiter = LogLimiter::with_clock(SlidingLog::new("3/s".parse()?)?, clock.clone());
/// assert_eq!(limiter.check_n(2)?.remaining(), 1);
/// assert!(!limiter.check_n(2)?.is_allowed());
/// clock.set(Timestamp::from_nanos(10_999_999_999));
/// assert!(!limiter.check_n(2)?.is_allowed()); // the two units are still in the window
/// clock.set(Timestamp::from_secs(11));
/// assert!(limiter.check_n(3)?.is_allowed()); // and now they are not
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct LogLimiter<C = PreciseClock> {
    state: CachePadded<Mutex<LogState>>,
    log: SlidingLog,
    clock: C,
    #[cfg(tollgate_loom)]
    faults: LogFaults,
    /// Counts its decisions once named (feature `metrics`).
    pub(crate) metering: Metering,
}

impl LogLimiter<PreciseClock> {
    /// A limiter on the [`PreciseClock`].
    pub fn new(log: SlidingLog) -> Self {
        LogLimiter::with_clock(log, PreciseClock::new())
    }
}

impl<C: Clock> LogLimiter<C> {
    /// A limiter reading `clock`. Allocates the log's ring (8 bytes per unit of the limit).
    pub fn with_clock(log: SlidingLog, clock: C) -> Self {
        LogLimiter {
            state: CachePadded::new(Mutex::new(LogState::with_capacity(log.entries()))),
            log,
            clock,
            #[cfg(tollgate_loom)]
            faults: LogFaults::NONE,
            metering: Metering::NONE,
        }
    }

    /// The same limiter with steps of its locking left out: loom's broken twins only.
    #[cfg(tollgate_loom)]
    #[doc(hidden)]
    pub fn with_faults(self, faults: LogFaults) -> Self {
        LogLimiter { faults, ..self }
    }

    /// Decides one request of weight 1 now, and records it if admitted.
    #[inline]
    pub fn check(&self) -> Decision {
        self.check_at(self.clock.now())
    }

    /// Decides one request of weight `cost` now, and records it if admitted.
    ///
    /// # Errors
    /// [`CostTooLarge`] when `cost` exceeds the [capacity](Self::capacity) (the limit): such a
    /// request could never pass. The log is not touched.
    #[inline]
    pub fn check_n(&self, cost: u64) -> Result<Decision, CostTooLarge> {
        self.check_n_at(cost, self.clock.now())
    }

    /// What [`check`](Self::check) would answer now, without recording anything.
    #[inline]
    pub fn peek(&self) -> Decision {
        self.peek_at(self.clock.now())
    }

    /// What [`check_n`](Self::check_n) would answer now, without recording anything.
    ///
    /// # Errors
    /// [`CostTooLarge`], as for `check_n`.
    #[inline]
    pub fn peek_n(&self, cost: u64) -> Result<Decision, CostTooLarge> {
        self.peek_n_at(cost, self.clock.now())
    }

    /// [`check`](Self::check) at a time the caller supplies instead of the clock's.
    #[inline]
    pub fn check_at(&self, now: Timestamp) -> Decision {
        // The limit is at least 1.
        self.decide(now.as_nanos(), 1)
    }

    /// [`check_n`](Self::check_n) at a time the caller supplies.
    ///
    /// # Errors
    /// [`CostTooLarge`], as for `check_n`.
    #[inline]
    pub fn check_n_at(&self, cost: u64, now: Timestamp) -> Result<Decision, CostTooLarge> {
        self.fits(cost)?;
        Ok(self.decide(now.as_nanos(), cost))
    }

    /// [`peek`](Self::peek) at a time the caller supplies.
    #[inline]
    pub fn peek_at(&self, now: Timestamp) -> Decision {
        self.log.decide(&lock(&self.state), now.as_nanos(), 1).decision
    }

    /// [`peek_n`](Self::peek_n) at a time the caller supplies.
    ///
    /// # Errors
    /// [`CostTooLarge`], as for `check_n`.
    #[inline]
    pub fn peek_n_at(&self, cost: u64, now: Timestamp) -> Result<Decision, CostTooLarge> {
        self.fits(cost)?;
        Ok(self.log.decide(&lock(&self.state), now.as_nanos(), cost).decision)
    }

    /// Forgets every admission recorded so far: the log is empty again, as a new limiter's.
    /// Returns whether it was still limiting now (an admission still in the window). See
    /// [`DirectLimiter::reset`](crate::DirectLimiter::reset).
    pub fn reset(&self) -> bool {
        self.reset_at(self.clock.now())
    }

    /// [`reset`](Self::reset), with "still limiting" judged at a time the caller supplies.
    pub fn reset_at(&self, now: Timestamp) -> bool {
        let mut state = lock(&self.state);
        let limiting = !self.log.is_idle(&state, now.as_nanos());
        // Empty, not only idle: a clock that later reads earlier than `now` finds nothing either.
        state.clear();
        limiting
    }

    /// The heaviest request that can ever pass: the limit.
    pub fn capacity(&self) -> u64 {
        self.log.limit
    }

    /// The log's configuration.
    pub fn algorithm(&self) -> &SlidingLog {
        &self.log
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    #[inline(always)]
    fn faults(&self) -> LogFaults {
        #[cfg(tollgate_loom)]
        return self.faults;
        #[cfg(not(tollgate_loom))]
        LogFaults::NONE
    }

    #[inline]
    fn fits(&self, cost: u64) -> Result<(), CostTooLarge> {
        CostTooLarge::check(cost, self.log.limit)
    }

    /// The critical section: decide and record under one lock.
    #[inline]
    fn decide(&self, now: u64, cost: u64) -> Decision {
        let mut state = lock(&self.state);
        let verdict = self.log.decide(&state, now, cost);
        if verdict.record && self.faults().unlocks_before_record() {
            drop(state);
            state = lock(&self.state);
        }
        state.apply(&verdict, cost, self.log.window);
        self.metering.counted(verdict.decision)
    }
}

impl<C: fmt::Debug> fmt::Debug for LogLimiter<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Read under the lock, written without it: the formatter's sink is the caller's code.
        let recorded = lock(&self.state).ring.len();
        f.debug_struct("LogLimiter")
            .field("log", &self.log)
            .field("clock", &self.clock)
            .field("recorded", &recorded)
            .finish()
    }
}
