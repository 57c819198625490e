//! A value that is read whole and replaced whole: what a changeable limiter keeps its
//! parameters in ([`crate::live::Live`]), so that each decision reads one snapshot of them,
//! never some fields of one version and some of another.
//!
//! Outside loom: `arc_swap::ArcSwap`, whose load touches no shared cache line (a reader
//! records the pointer it holds in a slot of its own thread), so that readers on many threads
//! do not contend with each other. Under `--cfg tollgate_loom`: a `loom::sync::Mutex` holding
//! an `Arc` (`loom_snapshot.rs`), whose every load and store loom sees as a step it schedules,
//! so that the loom models explore a decision's load racing a replacement.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

#[cfg(not(tollgate_loom))]
type Cell<T> = arc_swap::ArcSwap<T>;
#[cfg(not(tollgate_loom))]
type Held<T> = arc_swap::Guard<Arc<T>>;

#[cfg(tollgate_loom)]
type Cell<T> = super::loom_snapshot::LoomSnapshot<T>;
#[cfg(tollgate_loom)]
type Held<T> = Arc<T>;

/// A value read whole ([`load`](Self::load)) and replaced whole ([`store`](Self::store)).
pub(crate) struct Snapshot<T> {
    cell: Cell<T>,
}

/// One snapshot of a [`Snapshot`]'s value, held while it is read: a later
/// [`store`](Snapshot::store) does not change it.
pub(crate) struct Loaded<T> {
    held: Held<T>,
}

impl<T> Snapshot<T> {
    pub(crate) fn new(value: T) -> Self {
        Snapshot {
            cell: Cell::from_pointee(value),
        }
    }

    /// The value now, whole.
    #[inline(always)]
    pub(crate) fn load(&self) -> Loaded<T> {
        Loaded {
            held: self.cell.load(),
        }
    }

    /// Replaces the value: loads that follow read `value`; a snapshot loaded before keeps the
    /// value it read.
    pub(crate) fn store(&self, value: T) {
        self.cell.store(Arc::new(value));
    }
}

impl<T> Deref for Loaded<T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        &self.held
    }
}

impl<T: fmt::Debug> fmt::Debug for Snapshot<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Snapshot").field(&*self.load()).finish()
    }
}

impl<T: fmt::Debug> fmt::Debug for Loaded<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}
