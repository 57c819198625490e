//! The in-memory limiters of a route, over `tollgate::Live` so that a reload changes their
//! quota without losing their keys' states.

use std::hash::Hash;

use tollgate::algorithm::Algorithm;
use tollgate::live::Retune;
use tollgate::metrics::LimiterName;
use tollgate::{
    CapacityError, KeyedLimiter, KeyedLogLimiter, Live, PreciseClock, Quota, SlidingLog, WhenFull,
};

/// An in-memory limiter whose quota changes live: the keys it holds, its name in the library's
/// series, and the quota change.
pub(crate) trait TableLimiter: Sized {
    fn held_keys(&self) -> usize;
    fn with_name(self, name: LimiterName) -> Self;
    /// `Ok` when the limiter takes `quota` live; why not otherwise.
    fn can_take(&self, quota: Quota) -> Result<(), String>;
    fn take(&self, quota: Quota) -> Result<(), String>;
}

impl<K: Hash, A: Algorithm + Retune> TableLimiter for KeyedLimiter<K, Live<A>> {
    fn held_keys(&self) -> usize {
        self.len()
    }

    fn with_name(self, name: LimiterName) -> Self {
        self.named(name)
    }

    fn can_take(&self, quota: Quota) -> Result<(), String> {
        self.algorithm()
            .current()
            .retune(quota)
            .map(drop)
            .map_err(|e| e.to_string())
    }

    fn take(&self, quota: Quota) -> Result<(), String> {
        self.algorithm().set_quota(quota).map_err(|e| e.to_string())
    }
}

impl<K: Hash> TableLimiter for KeyedLogLimiter<K, PreciseClock, Live<SlidingLog>> {
    fn held_keys(&self) -> usize {
        self.len()
    }

    fn with_name(self, name: LimiterName) -> Self {
        self.named(name)
    }

    /// The log's rule (`KeyedLogLimiter::set_quota`): any limit, the same window or a shorter
    /// one.
    fn can_take(&self, quota: Quota) -> Result<(), String> {
        let next = SlidingLog::new(quota).map_err(|e| e.to_string())?;
        let running = self.algorithm().current().window();
        if next.window() > running {
            return Err(format!(
                "the sliding log's window lengthened from {running:?} to {:?}",
                next.window()
            ));
        }
        Ok(())
    }

    fn take(&self, quota: Quota) -> Result<(), String> {
        self.set_quota(quota).map_err(|e| e.to_string())
    }
}

/// A keyed table of `algorithm`, its quota changeable live.
pub(crate) fn keyed<K: Hash, A: Algorithm>(
    algorithm: A,
    table: Table,
) -> Result<KeyedLimiter<K, Live<A>>, String> {
    let capacity = table.capacity;
    let limiter = KeyedLimiter::new(Live::new(algorithm), capacity)
        .map_err(|e: CapacityError| format!("capacity {capacity}: {e}"))?;
    Ok(limiter.when_full(table.when_full))
}

/// A keyed table of sliding logs, their quota changeable live.
pub(crate) fn logged<K: Hash>(
    log: SlidingLog,
    table: Table,
) -> Result<KeyedLogLimiter<K, PreciseClock, Live<SlidingLog>>, String> {
    let capacity = table.capacity;
    let limiter = KeyedLogLimiter::new(Live::new(log), capacity)
        .map_err(|e: CapacityError| format!("capacity {capacity}: {e}"))?;
    Ok(limiter.when_full(table.when_full))
}

/// Where a route's in-memory limiters keep their keys.
#[derive(Clone, Copy)]
pub(crate) struct Table {
    pub(crate) capacity: usize,
    pub(crate) when_full: WhenFull,
}
