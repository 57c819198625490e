//! The one place tollgate takes its atomics (and the sliding log's mutex, and the snapshot cell
//! of a changeable limiter's parameters) from.
//!
//! Under `--cfg tollgate_loom` the atomics and the mutex are loom's, so that the `loom-tests`
//! crate model-checks the very compare-and-swap loops (and sliding-log critical sections) that
//! ship. A crate-specific cfg (rather than a bare `loom`) keeps the switch from leaking into
//! dependencies that also look at `cfg(loom)`.

#[cfg(tollgate_loom)]
mod loom_snapshot;
#[cfg(tollgate_loom)]
mod loom_u128;
mod snapshot;

#[cfg(tollgate_loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(tollgate_loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};
#[cfg(tollgate_loom)]
pub(crate) use loom_u128::AtomicU128;

pub(crate) use snapshot::{Loaded, Snapshot};

#[cfg(not(tollgate_loom))]
pub(crate) use portable_atomic::AtomicU128;
#[cfg(not(tollgate_loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(tollgate_loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};

/// Locks `mutex` for the sliding log, the one algorithm that keeps more than a word of state.
///
/// A poisoned lock is taken as it is. Nothing tollgate runs while holding one of these locks can
/// panic (integer arithmetic without overflow, in-bounds writes after the decision), so poison is
/// not expected; were it to happen, the log would still be ordered and bounded (entries are
/// written one by one, each at or after the newest), so the decision path goes on rather than
/// panicking.
#[inline]
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Lets other threads run while this one waits for them: a scheduling point under loom (which
/// must see it to explore the others' progress), the OS scheduler's otherwise, so that a thread
/// this one waits on gets the CPU even where threads outnumber cores (a spin hint would not give
/// it). Only on paths that wait for another thread's claim, never on a decision's.
#[inline]
pub(crate) fn yield_to_others() {
    #[cfg(tollgate_loom)]
    loom::thread::yield_now();
    #[cfg(not(tollgate_loom))]
    std::thread::yield_now();
}
