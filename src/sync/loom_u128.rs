//! A 128-bit atomic for loom, which has none: one `loom::sync::Mutex<u128>` per word.
//!
//! Every operation locks the word, so loom explores every interleaving of operations on these
//! words, and each operation is sequentially consistent, as `lock cmpxchg16b` is on x86_64 (a
//! full barrier whatever ordering is asked for). The orderings passed in are therefore not
//! checked by loom for these words; `docs/design.md` says why the ones used are enough.

use loom::sync::Mutex;

use super::Ordering;

/// Stand-in for `portable_atomic::AtomicU128` under loom.
#[derive(Debug)]
pub(crate) struct AtomicU128(Mutex<u128>);

impl AtomicU128 {
    pub(crate) fn new(value: u128) -> Self {
        AtomicU128(Mutex::new(value))
    }

    fn word(&self) -> loom::sync::MutexGuard<'_, u128> {
        // A poisoned lock means a model already panicked; keep the value and let that panic report.
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn load(&self, _order: Ordering) -> u128 {
        *self.word()
    }

    pub(crate) fn store(&self, value: u128, _order: Ordering) {
        *self.word() = value;
    }

    pub(crate) fn compare_exchange(
        &self,
        current: u128,
        new: u128,
        _success: Ordering,
        _failure: Ordering,
    ) -> Result<u128, u128> {
        let mut word = self.word();
        if *word == current {
            *word = new;
            Ok(current)
        } else {
            Err(*word)
        }
    }

    pub(crate) fn compare_exchange_weak(
        &self,
        current: u128,
        new: u128,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u128, u128> {
        self.compare_exchange(current, new, success, failure)
    }
}
