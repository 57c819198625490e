//! Counters that one thread at a time writes: the counting half of `tollgate::metrics`, and
//! of a leased limiter's local decisions.
//!
//! A thread that counts claims a *lane*, a small number (the lowest free one), from a
//! [`LaneClaims`], and gives it back when it ends. A [`Lanes`] keeps one cache line of counters
//! per lane, so that a count is a plain load and store on the counting thread's own line: no
//! locked instruction, and no line that two cores write. A thread without a lane (more threads
//! than lanes, or a thread past the end of its thread-local storage) counts on one shared line,
//! with a locked add. The counts are summed when read.
//!
//! Why this is exact: a lane has one owner at a time, because a claim sets the lane's bit with
//! one atomic read-modify-write (two claimers cannot both see it clear); and a new owner
//! continues from the last count the previous one wrote, because the previous owner clears the
//! bit with `Release` after its last store and the claimer sets it with `Acquire` before its
//! first load. loom checks both, with a broken twin of each (`loom-tests/tests/metric_lanes.rs`).
//!
//! Compiled under loom (`--cfg tollgate_loom`) for those models, without the `metrics`
//! feature: it takes its atomics from `crate::sync`, and its items are public there. The
//! threads' own lanes ([`thread`]) are not (loom's atomics are not built in a `static`).
#![cfg_attr(not(tollgate_loom), allow(unreachable_pub))]

#[cfg(not(tollgate_loom))]
pub(crate) mod thread;

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicU64, Ordering};

/// The most lanes there are at once: threads past them count on a shared line.
pub const MAX_LANES: usize = 256;
/// Bits of `MAX_LANES`, 64 to a word.
const WORDS: usize = MAX_LANES / 64;

/// Which lanes are claimed: bit `lane % 64` of word `lane / 64`.
#[derive(Debug)]
pub struct LaneClaims {
    words: [AtomicU64; WORDS],
}

impl LaneClaims {
    /// No lane claimed.
    #[cfg(not(tollgate_loom))]
    pub const fn new() -> LaneClaims {
        LaneClaims {
            words: [const { AtomicU64::new(0) }; WORDS],
        }
    }

    /// No lane claimed (loom's atomics are not built in a constant).
    #[cfg(tollgate_loom)]
    pub fn new() -> LaneClaims {
        LaneClaims {
            words: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Claims the lowest free lane; `None` when all [`MAX_LANES`] are taken.
    pub fn claim(&self) -> Option<usize> {
        for (at, word) in self.words.iter().enumerate() {
            // Relaxed: a hint of which bit to try; the `fetch_or` below decides.
            let mut seen = word.load(Ordering::Relaxed);
            while seen != u64::MAX {
                let bit = 1u64 << (!seen).trailing_zeros();
                // Acquire: pairs with the `Release` of `give_back`, so that the lane's last
                // counts, written by its previous owner, are seen before this thread adds to
                // them.
                let before = word.fetch_or(bit, Ordering::Acquire);
                if before & bit == 0 {
                    return Some(at * 64 + bit.trailing_zeros() as usize);
                }
                seen = before | bit;
            }
        }
        None
    }

    /// Gives `lane` back (a lane past [`MAX_LANES`] was never claimed: nothing to do).
    pub fn give_back(&self, lane: usize) {
        if let Some(word) = self.words.get(lane / 64) {
            // Release: this thread's counts on the lane happen before the next owner's claim.
            word.fetch_and(!(1u64 << (lane % 64)), Ordering::Release);
        }
    }
}

impl Default for LaneClaims {
    fn default() -> Self {
        LaneClaims::new()
    }
}

/// `N` counters per lane, each lane on its own cache line, and a shared line for threads
/// without one.
#[derive(Debug)]
pub struct Lanes<const N: usize> {
    lanes: Box<[CachePadded<[AtomicU64; N]>]>,
    shared: CachePadded<[AtomicU64; N]>,
}

impl<const N: usize> Lanes<N> {
    /// Counters at 0 for lanes `0..lanes`.
    pub fn new(lanes: usize) -> Lanes<N> {
        Lanes {
            lanes: (0..lanes).map(|_| CachePadded::new(zeros())).collect(),
            shared: CachePadded::new(zeros()),
        }
    }

    /// Adds `n` to counter `counter` (below `N`) on `lane`, which the calling thread owns;
    /// `false`, and nothing added, when this has no such lane.
    #[inline(always)]
    pub fn add_on_lane(&self, lane: usize, counter: usize, n: u64) -> bool {
        match self.lanes.get(lane) {
            Some(counters) => {
                let count = &counters[counter];
                // Relaxed, the load and the store: only the lane's owner writes it, and its
                // previous owners' stores happen before this one's claim (see `LaneClaims`); a
                // reader sums the counters and needs no order with anything else.
                count.store(count.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    /// Adds `n` to counter `counter` on the shared line, for a thread without a lane here.
    #[cold]
    #[inline(never)]
    pub fn add_shared(&self, counter: usize, n: u64) {
        // Relaxed: a count read only as part of a sum; `fetch_add` keeps every thread's
        // increment.
        self.shared[counter].fetch_add(n, Ordering::Relaxed);
    }

    /// Every counter summed over the lanes and the shared line: each lane's count as it was at
    /// some instant of the call, so a later sum is never below an earlier one.
    pub fn sum(&self) -> [u64; N] {
        let mut sums = [0u64; N];
        for counters in self.lanes.iter().chain(std::iter::once(&self.shared)) {
            for (sum, count) in sums.iter_mut().zip(counters.iter()) {
                // Relaxed: see `add_on_lane`; each counter only grows.
                *sum = sum.wrapping_add(count.load(Ordering::Relaxed));
            }
        }
        sums
    }
}

fn zeros<const N: usize>() -> [AtomicU64; N] {
    std::array::from_fn(|_| AtomicU64::new(0))
}
