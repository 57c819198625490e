//! The loom stand-in for `arc_swap::ArcSwap` (`snapshot.rs`): one `loom::sync::Mutex` holding
//! an `Arc`. A load locks, clones the `Arc` and unlocks; a store locks and replaces it. Each is
//! one step loom schedules, so the models explore every order of loads and stores; what a
//! decision then reads is the value of one of them, whole, as with `ArcSwap`.

use std::sync::Arc;

use loom::sync::Mutex;

/// Stand-in for `arc_swap::ArcSwap<T>` under loom.
#[derive(Debug)]
pub(crate) struct LoomSnapshot<T>(Mutex<Arc<T>>);

impl<T> LoomSnapshot<T> {
    pub(crate) fn from_pointee(value: T) -> Self {
        LoomSnapshot(Mutex::new(Arc::new(value)))
    }

    pub(crate) fn load(&self) -> Arc<T> {
        // A poisoned lock means a model already panicked; keep the value and let that panic
        // report.
        Arc::clone(&self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    pub(crate) fn store(&self, value: Arc<T>) {
        *self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = value;
    }
}
