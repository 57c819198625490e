//! Deliberate flaws for the broken twins of the locked table's loom models: the sliding log's
//! (`loom-tests/tests/sliding_log*.rs`), a keyed wide window's (`loom-tests/tests/keyed_wide.rs`)
//! and the leases' (`src/distributed/lease/ledger/faults.rs`).
//!
//! Each flag removes one step of the locking, so that the models can show loom finds the
//! bug that step prevents. Only `--cfg tollgate_loom` builds can set them; in every other build
//! they are the constant [`LogFaults::NONE`] and the compiler removes the checks.

/// Steps of the locked table's locking (and the direct sliding log's) that a broken twin leaves
/// out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(not(tollgate_loom), allow(unreachable_pub, dead_code))]
pub struct LogFaults {
    /// The lock is released between the decision and the recording of its units, and taken
    /// again to record: two requests may be decided on the same log.
    unlock_before_record: bool,
    /// A keyed log still carrying units in the window may be reused for another key.
    reclaim_busy: bool,
    /// A keyed decision does not check, once it holds the slot's lock, that the slot still
    /// belongs to its key.
    skip_key_recheck: bool,
    /// New keys are inserted without the shard's insert lock.
    insert_unlocked: bool,
}

#[cfg_attr(not(tollgate_loom), allow(unreachable_pub, dead_code))]
impl LogFaults {
    /// The shipped locking: no step left out.
    pub const NONE: LogFaults = LogFaults {
        unlock_before_record: false,
        reclaim_busy: false,
        skip_key_recheck: false,
        insert_unlocked: false,
    };

    /// Releases the lock between deciding and recording (direct and keyed).
    pub const fn unlock_before_record(self) -> LogFaults {
        LogFaults {
            unlock_before_record: true,
            ..self
        }
    }

    /// Reuses keyed logs that still carry units in the window.
    pub const fn reclaim_busy(self) -> LogFaults {
        LogFaults {
            reclaim_busy: true,
            ..self
        }
    }

    /// Skips the keyed decision's (and reset's) check, under the slot's lock, that the slot is still
    /// its key's.
    pub const fn skip_key_recheck(self) -> LogFaults {
        LogFaults {
            skip_key_recheck: true,
            ..self
        }
    }

    /// Inserts new keys without the shard's insert lock.
    pub const fn insert_unlocked(self) -> LogFaults {
        LogFaults {
            insert_unlocked: true,
            ..self
        }
    }

    pub(crate) const fn unlocks_before_record(self) -> bool {
        self.unlock_before_record
    }

    pub(crate) const fn reclaims_busy(self) -> bool {
        self.reclaim_busy
    }

    pub(crate) const fn skips_key_recheck(self) -> bool {
        self.skip_key_recheck
    }

    pub(crate) const fn inserts_unlocked(self) -> bool {
        self.insert_unlocked
    }
}
