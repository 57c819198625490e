//! Each thread's lane (see `../lanes.rs`), claimed at its first count on a named limiter or a
//! leased limiter's local decision, and given back when it ends.

use std::cell::Cell;
use std::sync::OnceLock;

use super::{LaneClaims, Lanes, MAX_LANES};

/// The lanes claimed by the process's threads.
static CLAIMS: LaneClaims = LaneClaims::new();

/// A thread without a lane: none claimed yet, none was free, or given back as the thread ends.
const NO_LANE: usize = usize::MAX;

/// Lanes per meter when the CPU count is unknown, and the fewest there are.
const MIN_LANES: usize = 16;

thread_local! {
    /// This thread's lane, or `NO_LANE`. No destructor: reading it is one load.
    static LANE: Cell<usize> = const { Cell::new(NO_LANE) };
    /// Gives the lane back when the thread ends: touched once, when the lane is claimed (which
    /// registers its destructor).
    static GIVE_BACK: LaneGuard = const { LaneGuard };
}

/// Adds `n` to counter `counter` of `lanes`, on this thread's lane.
#[inline(always)]
pub(crate) fn add<const N: usize>(lanes: &Lanes<N>, counter: usize, n: u64) {
    if !lanes.add_on_lane(LANE.with(Cell::get), counter, n) {
        add_without_lane(lanes, counter, n);
    }
}

/// [`add`] for a thread whose lane `lanes` does not have: none claimed yet (claimed now), or
/// one past `lanes`' count, or none free (the shared line).
#[cold]
#[inline(never)]
fn add_without_lane<const N: usize>(lanes: &Lanes<N>, counter: usize, n: u64) {
    let lane = match LANE.with(Cell::get) {
        NO_LANE => claim(),
        lane => Some(lane),
    };
    if !lane.is_some_and(|lane| lanes.add_on_lane(lane, counter, n)) {
        lanes.add_shared(counter, n);
    }
}

/// Claims a lane for this thread; `None` when none is free, or when the thread's local storage
/// is being torn down (its lane could not be given back).
fn claim() -> Option<usize> {
    GIVE_BACK.try_with(|_| ()).ok()?;
    let lane = CLAIMS.claim()?;
    LANE.with(|own| own.set(lane));
    Some(lane)
}

/// Gives the thread's lane back when the thread ends.
struct LaneGuard;

impl Drop for LaneGuard {
    fn drop(&mut self) {
        let lane = LANE.with(|own| own.replace(NO_LANE));
        if lane != NO_LANE {
            CLAIMS.give_back(lane);
        }
    }
}

/// How many lanes a meter keeps: four per CPU, from 16 to [`MAX_LANES`] (threads past them
/// count on the meter's shared line, correctly but with a locked add).
pub(crate) fn lanes_per_meter() -> usize {
    static LANES: OnceLock<usize> = OnceLock::new();
    *LANES.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(MIN_LANES, |cpus| cpus.get().saturating_mul(4))
            .clamp(MIN_LANES, MAX_LANES)
    })
}
