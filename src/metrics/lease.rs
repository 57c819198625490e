//! A leased Redis limiter's own series (features `metrics` and `redis`), beside the Redis
//! series (`redis.rs`) it also has: its lease round trips, the size of each lease, and the units
//! it gave back unused.
//!
//! The round trips and the units given back count on shared atomics, as the Redis series do: a
//! lease round trip takes tens of microseconds, and a give-back is one per key at release, next
//! to which one locked add is nothing. A decision spent from a lease counts on the thread's
//! lane (`Meter::record`), as every limiter's decisions do: the local spend path pays no locked
//! instruction. The lease sizes go to the recorder as each lease is installed, after its round
//! trip, one histogram sample each (a histogram cannot be summed and handed over later as a
//! count can).

use metrics::{Key, Label, Recorder};

use super::meter::Meter;
use super::registry::METADATA;
use super::{REDIS_LEASE_CALLS, REDIS_LEASE_RETURNED_UNITS, REDIS_LEASE_UNITS};
use crate::sync::{AtomicU64, Ordering};

/// A leased limiter's counters, and the key of its lease-size histogram.
#[derive(Debug)]
pub(crate) struct LeaseSeries {
    calls: AtomicU64,
    returned: AtomicU64,
    units: Key,
}

impl LeaseSeries {
    /// Counters at 0 for the limiter `name`.
    pub(crate) fn new(name: &str) -> LeaseSeries {
        LeaseSeries {
            calls: AtomicU64::new(0),
            returned: AtomicU64::new(0),
            units: Key::from_parts(REDIS_LEASE_UNITS, vec![Label::new("limiter", name.to_owned())]),
        }
    }

    pub(crate) fn totals(&self) -> LeaseTotals {
        // Relaxed: counts read as they are; each only grows.
        let read = |count: &AtomicU64| count.load(Ordering::Relaxed);
        LeaseTotals {
            calls: read(&self.calls),
            returned: read(&self.returned),
        }
    }
}

/// [`LeaseSeries`], read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LeaseTotals {
    calls: u64,
    returned: u64,
}

impl LeaseTotals {
    pub(crate) fn add(&mut self, other: &LeaseTotals) {
        self.calls = self.calls.wrapping_add(other.calls);
        self.returned = self.returned.wrapping_add(other.returned);
    }
}

/// Adds `n` to `count`.
fn add(count: &AtomicU64, n: u64) {
    // Relaxed: a count read only by `publish`, as a sum; `fetch_add` keeps every increment.
    count.fetch_add(n, Ordering::Relaxed);
}

impl Meter {
    /// Counts one round trip of a lease script (a request's or a refresh's).
    pub(crate) fn lease_call(&self) {
        if let Some(lease) = &self.shared().lease {
            add(&lease.calls, 1);
        }
    }

    /// Records a lease of `units` (beyond the request that asked for it) as a sample of the
    /// lease-size histogram, through the recorder installed now.
    pub(crate) fn lease_granted(&self, units: u64) {
        if let Some(lease) = &self.shared().lease {
            // Precision: a sample is an f64; lease sizes stay far below 2^53.
            metrics::with_recorder(|recorder| {
                recorder
                    .register_histogram(&lease.units, &METADATA)
                    .record(units as f64)
            });
        }
    }

    /// Counts `units` given back to Redis unused.
    pub(crate) fn lease_returned(&self, units: u64) {
        if let Some(lease) = &self.shared().lease {
            if units > 0 {
                add(&lease.returned, units);
            }
        }
    }
}

/// The lease series of one name (the lease sizes are recorded as each lease is installed).
pub(super) fn emit(recorder: &dyn Recorder, limiter: impl Fn() -> Label, totals: &LeaseTotals) {
    let key = Key::from_parts(REDIS_LEASE_CALLS, vec![limiter()]);
    recorder.register_counter(&key, &METADATA).absolute(totals.calls);
    let key = Key::from_parts(REDIS_LEASE_RETURNED_UNITS, vec![limiter()]);
    recorder
        .register_counter(&key, &METADATA)
        .absolute(totals.returned);
}
