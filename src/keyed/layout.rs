//! How a keyed table is sized and where a key lives in it: shared by every keyed limiter
//! ([`KeyedLimiter`](crate::KeyedLimiter) and [`KeyedLogLimiter`](crate::KeyedLogLimiter)), so
//! that both size, shard and place keys alike.

use crate::error::CapacityError;

use super::slot::FINGERPRINT_MASK;

/// Keys per slot the table is sized for: a table for `n` keys has `ceil(n * 10 / 7)` slots.
const LOAD_NUMERATOR: usize = 7;
const LOAD_DENOMINATOR: usize = 10;
/// Shards are at least this many slots (unless the whole table is smaller) and at most
/// `MAX_SHARDS` in number.
const MIN_SHARD_SLOTS: usize = 1024;
const MAX_SHARDS: usize = 64;

/// A table's shape: a power of two of shards, each of `slots_per_shard` slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TableLayout {
    shards: usize,
    slots_per_shard: usize,
    /// `64 - log2(shards)`: the top bits of a hash choose the shard.
    shard_shift: u32,
}

impl TableLayout {
    /// The layout for `capacity` keys, each slot taking up to `slot_bytes` bytes.
    ///
    /// # Errors
    /// [`CapacityError::Zero`]; [`CapacityError::TooLarge`] when the slots would not fit in the
    /// address space.
    pub(crate) fn for_capacity(capacity: usize, slot_bytes: usize) -> Result<TableLayout, CapacityError> {
        if capacity == 0 {
            return Err(CapacityError::Zero);
        }
        let slots = capacity
            .checked_mul(LOAD_DENOMINATOR)
            .map(|n| n.div_ceil(LOAD_NUMERATOR))
            .filter(|&slots| {
                slots
                    .checked_mul(slot_bytes)
                    .is_some_and(|bytes| bytes <= isize::MAX as usize)
            })
            .ok_or(CapacityError::TooLarge { capacity })?;
        let shards = (slots / MIN_SHARD_SLOTS).clamp(1, MAX_SHARDS);
        let shards = 1 << shards.ilog2();
        Ok(TableLayout {
            shards,
            slots_per_shard: slots.div_ceil(shards),
            shard_shift: u64::BITS - shards.ilog2(),
        })
    }

    /// How many shards.
    pub(crate) const fn shards(&self) -> usize {
        self.shards
    }

    /// Slots in each shard.
    pub(crate) const fn slots_per_shard(&self) -> usize {
        self.slots_per_shard
    }

    /// The shard of a key with this `hash`: its top bits (a shift by 64 for one shard is
    /// avoided by `checked_shr`).
    #[inline]
    pub(crate) fn shard(&self, hash: u64) -> usize {
        hash.checked_shr(self.shard_shift).unwrap_or(0) as usize
    }

    /// The home slot of a key with this `hash` in a shard of `shard_len` slots: the other bits,
    /// scaled to the shard's length without a division.
    #[inline]
    pub(crate) fn home(hash: u64, shard_len: usize) -> usize {
        ((u128::from(hash.rotate_left(32)) * shard_len as u128) >> 64) as usize
    }

    /// The fingerprint that stands for a key with this `hash`: its low 53 bits.
    #[inline]
    pub(crate) const fn fingerprint(hash: u64) -> u64 {
        hash & FINGERPRINT_MASK
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_have_ten_slots_for_seven_keys_in_a_power_of_two_of_shards() {
        let small = TableLayout::for_capacity(7, 16).unwrap();
        assert_eq!((small.shards(), small.slots_per_shard()), (1, 10));
        let large = TableLayout::for_capacity(1_000_000, 16).unwrap();
        assert_eq!(large.shards(), 64);
        assert!(large.shards() * large.slots_per_shard() >= 1_428_572);
        assert_eq!(large.shard(u64::MAX), 63);
        assert_eq!(small.shard(u64::MAX), 0);
    }

    #[test]
    fn capacities_that_do_not_fit_are_typed_errors() {
        assert_eq!(TableLayout::for_capacity(0, 16), Err(CapacityError::Zero));
        assert_eq!(
            TableLayout::for_capacity(usize::MAX / 4, 16),
            Err(CapacityError::TooLarge {
                capacity: usize::MAX / 4
            })
        );
    }

    /// The collision bound in `docs/design.md` ("Key identity") multiplies the chance of the
    /// same shard by that of the same fingerprint: it needs the bits that choose the shard to be
    /// none of the fingerprint's.
    #[test]
    fn the_shard_is_chosen_by_bits_the_fingerprint_does_not_hold() {
        for capacity in [1, 1_000, 45_874, 45_875, 100_000, 1_000_000, 1 << 40] {
            let layout = TableLayout::for_capacity(capacity, 16).unwrap();
            let choosing: Vec<u32> = (0..u64::BITS)
                .filter(|&bit| layout.shard(1 << bit) != 0)
                .collect();
            assert_eq!(
                choosing.len() as u32,
                layout.shards().ilog2(),
                "capacity {capacity}"
            );
            for bit in choosing {
                assert_eq!((1 << bit) & FINGERPRINT_MASK, 0, "capacity {capacity}, bit {bit}");
            }
        }
        // 64 shards from 65,536 slots on: ceil(45,875 * 10 / 7) = 65,536.
        assert_eq!(TableLayout::for_capacity(45_874, 16).unwrap().shards(), 32);
        assert_eq!(TableLayout::for_capacity(45_875, 16).unwrap().shards(), 64);
    }

    #[test]
    fn homes_stay_inside_the_shard() {
        for hash in [0, 1, u64::MAX, 0x8000_0000_0000_0000, 0x1234_5678_9abc_def0] {
            assert!(TableLayout::home(hash, 1024) < 1024);
            assert!(TableLayout::fingerprint(hash) < 1 << 53);
        }
    }
}
