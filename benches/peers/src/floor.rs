//! The floors every direct decision is compared with, as [`Direct`] stand-ins so that they run
//! through the very same timed loop: a clock read alone, and a clock read plus one uncontended
//! load and compare-and-swap (what a decision cannot do without). [`Nothing`] measures the loop.
//! The keyed floors are in `src/keyed_floor.rs`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crossbeam_utils::CachePadded;
use tollgate::Clock;

use crate::Direct;

/// One clock read, nothing else.
#[derive(Debug)]
pub struct ClockRead<C>(pub C);

impl<C: Clock> Direct for ClockRead<C> {
    type Answer = u64;

    #[inline(always)]
    fn check(&self) -> u64 {
        self.0.now().as_nanos()
    }

    fn admitted(_: &u64) -> bool {
        true
    }
}

/// One clock read, one load and one compare-and-swap that succeeds, on a cache-padded word whose
/// value changes every call (as a decision's state does): the work no decision can skip.
#[derive(Debug)]
pub struct ClockReadLoadCas<C> {
    clock: C,
    word: CachePadded<AtomicU64>,
}

impl<C: Clock> ClockReadLoadCas<C> {
    /// The floor on `clock`.
    pub fn new(clock: C) -> ClockReadLoadCas<C> {
        ClockReadLoadCas {
            clock,
            word: CachePadded::new(AtomicU64::new(0)),
        }
    }
}

impl<C: Clock> Direct for ClockReadLoadCas<C> {
    type Answer = Result<u64, u64>;

    #[inline(always)]
    fn check(&self) -> Result<u64, u64> {
        let now = self.clock.now().as_nanos();
        // Relaxed: as tollgate's cell loads its state word; the floor publishes nothing.
        let current = self.word.load(Ordering::Relaxed);
        // Relaxed, weak: exactly the CAS tollgate's cell makes.
        self.word.compare_exchange_weak(
            current,
            current.wrapping_add(now | 1),
            Ordering::Relaxed,
            Ordering::Relaxed,
        )
    }

    fn admitted(_: &Result<u64, u64>) -> bool {
        true
    }
}

/// One `std::time::Instant::now()`: the clock read of the `Mutex` bucket and of `ratelimit_std`.
#[derive(Debug)]
pub struct InstantRead;

impl Direct for InstantRead {
    type Answer = Instant;

    #[inline(always)]
    fn check(&self) -> Instant {
        Instant::now()
    }

    fn admitted(_: &Instant) -> bool {
        true
    }
}

/// No work at all: what the timed loop itself costs.
#[derive(Debug)]
pub struct Nothing;

impl Direct for Nothing {
    type Answer = ();

    #[inline(always)]
    fn check(&self) {}

    fn admitted(_: &()) -> bool {
        true
    }
}

/// One read of a governor clock, as nanoseconds since the clock's first read (what governor's
/// own decision starts with: `clock.now()`, then `duration_since(start)`), to set beside
/// tollgate's [`ClockRead`].
#[derive(Debug)]
pub struct GovernorClockRead<C: governor::clock::Clock> {
    clock: C,
    start: C::Instant,
}

impl<C: governor::clock::Clock> GovernorClockRead<C> {
    /// Reads `clock` once, as the reference point.
    pub fn new(clock: C) -> GovernorClockRead<C> {
        let start = clock.now();
        GovernorClockRead { clock, start }
    }
}

impl<C: governor::clock::Clock + Sync> Direct for GovernorClockRead<C> {
    type Answer = u64;

    #[inline(always)]
    fn check(&self) -> u64 {
        use governor::clock::Reference;
        self.clock.now().duration_since(self.start).as_u64()
    }

    fn admitted(_: &u64) -> bool {
        true
    }
}
