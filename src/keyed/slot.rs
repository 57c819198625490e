//! One slot of the keyed table: a key's fingerprint, the slot's status, the reach of the chain
//! that starts at this slot, and the key's state, in one 128-bit word that a single
//! compare-and-swap changes as a whole.

/// The status of a slot, in the top two bits of the tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// Never used. Probe chains end here; a slot never becomes empty again.
    Empty = 0,
    /// Claimed for a key whose insertion is not settled yet; its state half holds a claim nonce.
    Inserting = 1,
    /// Holds a key's state. The only status a decision charges.
    Member = 2,
    /// A claim that lost to another claim of the same key; free for reuse.
    Dead = 3,
}

/// A slot is one 128-bit word.
pub(crate) const SLOT_BYTES: usize = 16;

const STATUS_SHIFT: u32 = 62;
const REACH_SHIFT: u32 = 53;
/// The largest reach a slot records: displacements run from 0 to the probe limit less one.
pub(crate) const MAX_REACH: usize = (1 << (STATUS_SHIFT - REACH_SHIFT)) - 1;
const REACH_MASK: u64 = (MAX_REACH as u64) << REACH_SHIFT;
/// The fingerprint: the low 53 bits of the key's 64-bit hash.
pub(crate) const FINGERPRINT_MASK: u64 = (1 << REACH_SHIFT) - 1;

/// A slot's word, unpacked.
///
/// ```text
///  127   126 125     117 116               64 63                          0
/// +---------+-----------+-------------------+-----------------------------+
/// | status  | reach (9) | fingerprint (53)  |  state (the algorithm's u64) |
/// +---------+-----------+-------------------+-----------------------------+
/// ```
///
/// The status and the fingerprint say what the slot holds. The reach belongs to the slot's
/// *position*, not to its content: it is the largest displacement (distance from this home) of
/// any slot ever claimed for a key whose home is this slot, so a key homed here is never further
/// than `reach` slots on. It only grows, and every change of the slot's content keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    pub(crate) tag: u64,
    pub(crate) state: u64,
}

impl Slot {
    pub(crate) const EMPTY: Slot = Slot { tag: 0, state: 0 };

    /// A slot with reach 0: for words whose reach is not kept (tests, and the empty slot).
    pub(crate) const fn new(status: Status, fingerprint: u64, state: u64) -> Slot {
        Slot {
            tag: ((status as u64) << STATUS_SHIFT) | (fingerprint & FINGERPRINT_MASK),
            state,
        }
    }

    pub(crate) const fn from_word(word: u128) -> Slot {
        Slot {
            tag: (word >> 64) as u64,
            state: word as u64,
        }
    }

    pub(crate) const fn word(self) -> u128 {
        ((self.tag as u128) << 64) | self.state as u128
    }

    pub(crate) const fn status(self) -> Status {
        match self.tag >> STATUS_SHIFT {
            0 => Status::Empty,
            1 => Status::Inserting,
            2 => Status::Member,
            _ => Status::Dead,
        }
    }

    pub(crate) const fn fingerprint(self) -> u64 {
        self.tag & FINGERPRINT_MASK
    }

    /// How far from this slot the keys homed at it may lie (0: only here).
    pub(crate) const fn reach(self) -> usize {
        ((self.tag & REACH_MASK) >> REACH_SHIFT) as usize
    }

    /// The same content with the reach raised to `reach` (at most [`MAX_REACH`]).
    pub(crate) const fn with_reach(self, reach: usize) -> Slot {
        debug_assert!(reach <= MAX_REACH);
        Slot {
            tag: (self.tag & !REACH_MASK) | ((reach as u64) << REACH_SHIFT),
            state: self.state,
        }
    }

    /// What the slot holds, without its reach: status and fingerprint.
    pub(crate) const fn identity(self) -> u64 {
        self.tag & !REACH_MASK
    }

    /// Whether this slot holds `fingerprint` with `status`.
    pub(crate) const fn is(self, status: Status, fingerprint: u64) -> bool {
        self.identity() == Slot::new(status, fingerprint, 0).tag
    }

    /// New content for this slot (another status, key or state), keeping its reach.
    pub(crate) const fn replaced(self, status: Status, fingerprint: u64, state: u64) -> Slot {
        Slot::new(status, fingerprint, state).with_reach(self.reach())
    }

    /// The same key and status with another state.
    pub(crate) const fn with_state(self, state: u64) -> Slot {
        Slot { tag: self.tag, state }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn packs_and_unpacks(status in 0u8..4, fingerprint: u64, state: u64, reach in 0..=MAX_REACH) {
            let status = [Status::Empty, Status::Inserting, Status::Member, Status::Dead][status as usize];
            let slot = Slot::new(status, fingerprint, state).with_reach(reach);
            let back = Slot::from_word(slot.word());
            prop_assert_eq!(back, slot);
            prop_assert_eq!(back.status(), status);
            prop_assert_eq!(back.fingerprint(), fingerprint & FINGERPRINT_MASK);
            prop_assert_eq!(back.state, state);
            prop_assert_eq!(back.reach(), reach);
            prop_assert!(back.is(status, fingerprint));
            prop_assert_eq!(back.identity(), Slot::new(status, fingerprint, 0).tag);
        }

        #[test]
        fn new_content_keeps_the_reach(
            old_status in 0u8..4, new_status in 0u8..4, old_fp: u64, new_fp: u64, state: u64,
            reach in 0..=MAX_REACH,
        ) {
            let statuses = [Status::Empty, Status::Inserting, Status::Member, Status::Dead];
            let old = Slot::new(statuses[old_status as usize], old_fp, 7).with_reach(reach);
            let new = old.replaced(statuses[new_status as usize], new_fp, state);
            prop_assert_eq!(new.reach(), reach);
            prop_assert!(new.is(statuses[new_status as usize], new_fp));
            prop_assert_eq!(new.state, state);
            prop_assert_eq!(old.with_state(state).reach(), reach);
        }
    }

    #[test]
    fn empty_is_all_zero() {
        assert_eq!(Slot::EMPTY.word(), 0);
        assert_eq!(Slot::EMPTY.status(), Status::Empty);
    }
}
