//! One slot of the keyed table: a key's fingerprint, the slot's status and the key's state, in
//! one 128-bit word that a single compare-and-swap changes as a whole.

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
/// The fingerprint: the low 62 bits of the key's 64-bit hash.
pub(crate) const FINGERPRINT_MASK: u64 = (1 << STATUS_SHIFT) - 1;

/// A slot's word, unpacked.
///
/// ```text
///  127   126 125                       64 63                          0
/// +---------+----------------------------+-----------------------------+
/// | status  |  fingerprint (62 bits)     |  state (the algorithm's u64) |
/// +---------+----------------------------+-----------------------------+
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    pub(crate) tag: u64,
    pub(crate) state: u64,
}

impl Slot {
    pub(crate) const EMPTY: Slot = Slot { tag: 0, state: 0 };

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

    /// Whether this slot holds `fingerprint` with `status`.
    pub(crate) const fn is(self, status: Status, fingerprint: u64) -> bool {
        self.tag == Slot::new(status, fingerprint, 0).tag
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
        fn packs_and_unpacks(status in 0u8..4, fingerprint: u64, state: u64) {
            let status = [Status::Empty, Status::Inserting, Status::Member, Status::Dead][status as usize];
            let slot = Slot::new(status, fingerprint, state);
            let back = Slot::from_word(slot.word());
            prop_assert_eq!(back, slot);
            prop_assert_eq!(back.status(), status);
            prop_assert_eq!(back.fingerprint(), fingerprint & FINGERPRINT_MASK);
            prop_assert_eq!(back.state, state);
            prop_assert!(back.is(status, fingerprint));
        }
    }

    #[test]
    fn empty_is_all_zero() {
        assert_eq!(Slot::EMPTY.word(), 0);
        assert_eq!(Slot::EMPTY.status(), Status::Empty);
    }
}
