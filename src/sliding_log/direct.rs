//! The un-keyed sliding log: one ring behind one lock, one clock.

use std::fmt;

use crossbeam_utils::CachePadded;

use super::state::LogState;
use super::SlidingLog;
use crate::clock::{Clock, PreciseClock};
use crate::direct::decision_methods;
use crate::error::CostTooLarge;
use crate::keyed::locked::LogFaults;
use crate::live::LogQuota;
use crate::meter::Metering;
use crate::sync::{lock, Mutex, MutexGuard};
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
/// Its limit and window are a [`SlidingLog`] fixed for its life, or a
/// [`Live<SlidingLog>`](crate::Live) that [`set_quota`](Self::set_quota) changes while it runs
/// ([`LogQuota`]).
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
pub struct LogLimiter<C = PreciseClock, L = SlidingLog> {
    pub(super) state: CachePadded<Mutex<LogState>>,
    pub(super) log: L,
    clock: C,
    #[cfg(tollgate_loom)]
    faults: LogFaults,
    /// Counts its decisions once named (feature `metrics`).
    pub(crate) metering: Metering,
}

impl<L: LogQuota> LogLimiter<PreciseClock, L> {
    /// A limiter on the [`PreciseClock`].
    pub fn new(log: L) -> Self {
        LogLimiter::with_clock(log, PreciseClock::new())
    }
}

impl<C: Clock, L: LogQuota> LogLimiter<C, L> {
    /// A limiter reading `clock`. Allocates the log's ring (8 bytes per unit of the limit).
    pub fn with_clock(log: L, clock: C) -> Self {
        let entries = log.current().entries();
        LogLimiter {
            state: CachePadded::new(Mutex::new(LogState::with_capacity(entries))),
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

    decision_methods!();

    /// Forgets every admission recorded so far: the log is empty again, as a new limiter's.
    /// Returns whether it was still limiting now (an admission still in the window). See
    /// [`DirectLimiter::reset`](crate::DirectLimiter::reset).
    pub fn reset(&self) -> bool {
        self.reset_at(self.clock.now())
    }

    /// [`reset`](Self::reset), with "still limiting" judged at a time the caller supplies.
    pub fn reset_at(&self, now: Timestamp) -> bool {
        let log = self.log.current();
        let mut state = lock(&self.state);
        let limiting = !log.is_idle(&state, now.as_nanos());
        // Empty, not only idle: a clock that later reads earlier than `now` finds nothing either.
        state.clear();
        limiting
    }

    /// The heaviest request that can ever pass: the limit.
    pub fn capacity(&self) -> u64 {
        self.log.current().limit
    }

    /// The log's configuration: a [`SlidingLog`], or a [`Live<SlidingLog>`](crate::Live)
    /// (read it with `current()`).
    pub fn algorithm(&self) -> &L {
        &self.log
    }

    #[inline(always)]
    fn faults(&self) -> LogFaults {
        #[cfg(tollgate_loom)]
        return self.faults;
        #[cfg(not(tollgate_loom))]
        LogFaults::NONE
    }

    #[inline]
    pub(super) fn fits(&self, cost: u64) -> Result<(), CostTooLarge> {
        CostTooLarge::check(cost, self.capacity())
    }

    /// The critical section: decide and record under one lock (the configuration read once,
    /// before it).
    #[inline]
    fn decide(&self, now: Timestamp, cost: u64) -> Decision {
        self.metering
            .counted(self.decide_recorded(now.as_nanos(), cost).0)
    }

    /// [`decide`](Self::decide), with the time the request was decided at: where an admission
    /// recorded its units.
    #[inline(always)]
    pub(crate) fn decide_recorded(&self, now: u64, cost: u64) -> (Decision, u64) {
        let log = self.log.current();
        let state = lock(&self.state);
        let verdict = log.decide(&state, now, cost);
        let mut state = self.keep_locked(state, verdict.record);
        state.apply(&verdict, cost, log.window);
        (verdict.decision, verdict.at)
    }

    /// What [`decide`](Self::decide) would answer, recording nothing.
    #[inline]
    fn peek_decision(&self, now: Timestamp, cost: u64) -> Decision {
        let log = self.log.current();
        log.decide(&lock(&self.state), now.as_nanos(), cost).decision
    }

    /// The lock a decision holds, kept to record what it decided (`record`: its units). The
    /// broken twin `unlock_before_record` releases it and takes it again in between.
    #[inline(always)]
    fn keep_locked<'a>(&'a self, state: MutexGuard<'a, LogState>, record: bool) -> MutexGuard<'a, LogState> {
        if record && self.faults().unlocks_before_record() {
            drop(state);
            return lock(&self.state);
        }
        state
    }
}

impl<C: fmt::Debug, L: fmt::Debug> fmt::Debug for LogLimiter<C, L> {
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
