//! What a leased limiter counts of its leases: round trips, sizes, units given back. Relaxed
//! atomics, read for reports (the place for a metrics exporter to read them). The local
//! decisions, one per request a lease decides, are counted on the deciding thread's own cache
//! line (`crate::lanes`), so that threads deciding on different keys write no line in common.

use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(not(tollgate_loom))]
use crate::lanes::{thread as lane, Lanes};

/// The counts of a [`LeasedLimiter`](super::LeasedLimiter) since it was built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseCounts {
    /// Decisions made on what this process held, without a round trip (admissions from a
    /// lease, weightless requests, refusals on what Redis last said).
    pub local_decisions: u64,
    /// Round trips of the lease scripts: a request's (it waited for the answer) or a refresh's.
    pub round_trips: u64,
    /// Refreshes started (on a task, no request waiting; each makes one round trip, unless
    /// Redis was found down less than a probe interval ago).
    pub refreshes: u64,
    /// Leases granted (units beyond the asking request's).
    pub leases: u64,
    /// Units granted in those leases.
    pub units_leased: u64,
    /// Leased units this process could not keep (a third range, a window already past): they
    /// pass unused.
    pub units_dropped: u64,
    /// Units given back to Redis by [`release`](super::LeasedLimiter::release).
    pub units_given_back: u64,
}

/// The live counters behind [`LeaseCounts`].
#[derive(Debug)]
pub(super) struct LeaseCounters {
    #[cfg(not(tollgate_loom))]
    local_decisions: Lanes<1>,
    /// Under loom the threads' lanes are not built (`crate::lanes`): a shared counter.
    #[cfg(tollgate_loom)]
    local_decisions: AtomicU64,
    round_trips: AtomicU64,
    refreshes: AtomicU64,
    leases: AtomicU64,
    units_leased: AtomicU64,
    units_dropped: AtomicU64,
    units_given_back: AtomicU64,
}

/// Relaxed: each counter is self-contained (read only for reports; nothing is published
/// through it).
fn add(counter: &AtomicU64, value: u64) {
    if value > 0 {
        counter.fetch_add(value, Ordering::Relaxed);
    }
}

impl Default for LeaseCounters {
    fn default() -> Self {
        LeaseCounters {
            #[cfg(not(tollgate_loom))]
            local_decisions: Lanes::new(lane::lanes_per_meter()),
            #[cfg(tollgate_loom)]
            local_decisions: AtomicU64::new(0),
            round_trips: AtomicU64::new(0),
            refreshes: AtomicU64::new(0),
            leases: AtomicU64::new(0),
            units_leased: AtomicU64::new(0),
            units_dropped: AtomicU64::new(0),
            units_given_back: AtomicU64::new(0),
        }
    }
}

impl LeaseCounters {
    #[inline]
    pub(super) fn local_decision(&self) {
        #[cfg(not(tollgate_loom))]
        lane::add(&self.local_decisions, 0, 1);
        #[cfg(tollgate_loom)]
        add(&self.local_decisions, 1);
    }

    pub(super) fn round_trip(&self) {
        add(&self.round_trips, 1);
    }

    pub(super) fn refresh(&self) {
        add(&self.refreshes, 1);
    }

    pub(super) fn leased(&self, units: u64, dropped: u64) {
        add(&self.leases, u64::from(units > 0));
        add(&self.units_leased, units);
        add(&self.units_dropped, dropped);
    }

    pub(super) fn given_back(&self, units: u64) {
        add(&self.units_given_back, units);
    }

    pub(super) fn snapshot(&self) -> LeaseCounts {
        // Relaxed: as in `add`; the counts are each exact, not a consistent cut.
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        #[cfg(not(tollgate_loom))]
        let [local_decisions] = self.local_decisions.sum();
        #[cfg(tollgate_loom)]
        let local_decisions = read(&self.local_decisions);
        LeaseCounts {
            local_decisions,
            round_trips: read(&self.round_trips),
            refreshes: read(&self.refreshes),
            leases: read(&self.leases),
            units_leased: read(&self.units_leased),
            units_dropped: read(&self.units_dropped),
            units_given_back: read(&self.units_given_back),
        }
    }
}
