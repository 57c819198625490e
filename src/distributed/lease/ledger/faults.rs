//! Deliberate flaws for the broken twins of the leases' loom models (`loom-tests/tests/lease.rs`).
//!
//! Each flag leaves out one step of the protocol, so that the models can show that loom finds
//! the bug that step prevents. Only `--cfg tollgate_loom` builds can set them; in every other
//! build the table holds no faults and the compiler removes the checks.

use crate::keyed::locked::LogFaults;

/// Steps of the leases' locking that a broken twin leaves out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(not(tollgate_loom), allow(unreachable_pub, dead_code))]
pub struct LeaseFaults {
    /// The locked table's own steps (`src/keyed/locked.rs`): `unlock_before_record` (a spend
    /// decided under the key's lock is stored under another acquisition of it) and
    /// `skip_key_recheck` (an install does not check, once it holds the slot's lock, that the
    /// slot is still its key's).
    table: LogFaults,
    /// A reply is installed onto the key's state as it was when its ask was made, not as it is
    /// when the reply comes: the spends made meanwhile are undone.
    install_from_snapshot: bool,
}

#[cfg_attr(not(tollgate_loom), allow(unreachable_pub, dead_code))]
impl LeaseFaults {
    /// The shipped protocol: no step left out.
    pub const NONE: LeaseFaults = LeaseFaults {
        table: LogFaults::NONE,
        install_from_snapshot: false,
    };

    /// Releases the key's lock between deciding a spend and storing it.
    pub const fn unlock_before_record(self) -> LeaseFaults {
        LeaseFaults {
            table: self.table.unlock_before_record(),
            ..self
        }
    }

    /// Skips the check, under the slot's lock, that the slot is still the key's.
    pub const fn skip_key_recheck(self) -> LeaseFaults {
        LeaseFaults {
            table: self.table.skip_key_recheck(),
            ..self
        }
    }

    /// Installs a reply onto the state its ask saw.
    pub const fn install_from_snapshot(self) -> LeaseFaults {
        LeaseFaults {
            install_from_snapshot: true,
            ..self
        }
    }

    pub(crate) const fn table(self) -> LogFaults {
        self.table
    }

    pub(crate) const fn installs_from_snapshot(self) -> bool {
        self.install_from_snapshot
    }
}
