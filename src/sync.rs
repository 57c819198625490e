//! The one place tollgate takes its atomics from.
//!
//! Under `--cfg tollgate_loom` the atomics are loom's, so that the `loom-tests` crate model-checks
//! the very compare-and-swap loops that ship. A crate-specific cfg (rather than a bare `loom`) keeps
//! the switch from leaking into dependencies that also look at `cfg(loom)`.

#[cfg(tollgate_loom)]
mod loom_u128;

#[cfg(tollgate_loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(tollgate_loom)]
pub(crate) use loom_u128::AtomicU128;

#[cfg(not(tollgate_loom))]
pub(crate) use portable_atomic::AtomicU128;
#[cfg(not(tollgate_loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};

/// Lets other threads run while this one waits for them: a scheduling point under loom (which
/// must see it to explore the others' progress), a CPU hint otherwise.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(tollgate_loom)]
    loom::thread::yield_now();
    #[cfg(not(tollgate_loom))]
    std::hint::spin_loop();
}
