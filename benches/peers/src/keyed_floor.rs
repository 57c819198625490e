//! The keyed floors: what no keyed decision of tollgate's design can skip (a clock read, the key's
//! hash, one load and one compare-and-swap of the key's 16-byte slot), with nothing a real table
//! adds (no probing, no fingerprint check, no insert, no algorithm).
//!
//! - [`KeyedFloor`]: a [`Keyed`] stand-in over a table laid out as tollgate's is for the same
//!   capacity (the same shards and slots), timed by the keyed loops as tollgate's keyed limiter is:
//!   the floor of each keyed row, at its size and in its key order.
//! - [`Direct`] stand-ins, timed by the direct loop on one fixed key: the slot at a fixed address
//!   ([`ClockReadHashLoadCas16`]) or placed by the hash in a table of 65,536 slots
//!   ([`ClockReadHashPlaceLoadCas16`]), and the same two for a slot of two 8-byte words, a design
//!   tollgate does not ship ([`ClockReadHashLoadTagCas8`], [`ClockReadHashPlaceLoadTagCas8`]),
//!   which price the 16-byte CAS against an 8-byte one.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use portable_atomic::AtomicU128;
use tollgate::Clock;

use crate::{Direct, Keyed, KeyedContender, KeyedLoops};

/// The keyed floor: one clock read, the key's hash (ahash, as tollgate's keyed table hashes), and
/// one uncontended 16-byte load and compare-and-swap of a cache-padded slot whose value changes
/// every call: the work no keyed decision of tollgate's design can skip (a keyed slot is one
/// 128-bit word, so that a decision can never charge a key that replaced the one it found).
#[derive(Debug)]
pub struct ClockReadHashLoadCas16<C> {
    clock: C,
    hasher: ahash::RandomState,
    key: u64,
    slot: CachePadded<AtomicU128>,
}

impl<C: Clock> ClockReadHashLoadCas16<C> {
    /// The keyed floor on `clock`.
    pub fn new(clock: C) -> ClockReadHashLoadCas16<C> {
        ClockReadHashLoadCas16 {
            clock,
            hasher: ahash::RandomState::new(),
            key: 42,
            slot: CachePadded::new(AtomicU128::new(0)),
        }
    }
}

impl<C: Clock> Direct for ClockReadHashLoadCas16<C> {
    type Answer = Result<u128, u128>;

    #[inline(always)]
    fn check(&self) -> Result<u128, u128> {
        let now = self.clock.now().as_nanos();
        let hash = self.hasher.hash_one(std::hint::black_box(self.key));
        // Relaxed: as tollgate's keyed decision loads its slot; the floor publishes nothing.
        let current = self.slot.load(Ordering::Relaxed);
        let next = (u128::from(hash) << 64) | u128::from((current as u64).wrapping_add(now | 1));
        // Relaxed, weak: the CAS tollgate's keyed decision makes.
        self.slot
            .compare_exchange_weak(current, next, Ordering::Relaxed, Ordering::Relaxed)
    }

    fn admitted(_: &Result<u128, u128>) -> bool {
        true
    }
}

/// The keyed floor of a design this crate does not ship: a slot of two 8-byte words, a tag (the
/// key's fingerprint) and a state, where a decision checks the tag and compare-and-swaps the state
/// word alone. One clock read, the key's hash, a load of each word, the tag comparison and one
/// uncontended 8-byte CAS. Set beside [`ClockReadHashLoadCas16`], it prices the 16-byte CAS
/// that keeps identity and state in one word; it does not show that such a slot can keep a key
/// from being charged for another's request.
#[derive(Debug)]
pub struct ClockReadHashLoadTagCas8<C> {
    clock: C,
    hasher: ahash::RandomState,
    key: u64,
    slot: CachePadded<[AtomicU64; 2]>,
}

impl<C: Clock> ClockReadHashLoadTagCas8<C> {
    /// The two-word keyed floor on `clock`.
    pub fn new(clock: C) -> ClockReadHashLoadTagCas8<C> {
        let hasher = ahash::RandomState::new();
        let key = 42;
        let tag = hasher.hash_one(key);
        ClockReadHashLoadTagCas8 {
            clock,
            hasher,
            key,
            slot: CachePadded::new([AtomicU64::new(tag), AtomicU64::new(0)]),
        }
    }
}

impl<C: Clock> Direct for ClockReadHashLoadTagCas8<C> {
    type Answer = Result<u64, u64>;

    #[inline(always)]
    fn check(&self) -> Result<u64, u64> {
        let now = self.clock.now().as_nanos();
        let hash = self.hasher.hash_one(std::hint::black_box(self.key));
        let [tag, state] = &*self.slot;
        // Relaxed: a floor; the design it stands for would need at least Acquire here (free on
        // x86_64).
        if tag.load(Ordering::Relaxed) != hash {
            return Err(0);
        }
        // Relaxed: as the 16-byte floor loads its slot.
        let current = state.load(Ordering::Relaxed);
        // Relaxed, weak: the CAS tollgate's direct cell makes.
        state.compare_exchange_weak(
            current,
            current.wrapping_add(now | 1),
            Ordering::Relaxed,
            Ordering::Relaxed,
        )
    }

    fn admitted(answer: &Result<u64, u64>) -> bool {
        answer.is_ok()
    }
}

/// Shards of slots as a keyed table lays them out: the hash's top bits choose a shard, whose
/// length is read from the shard, and a multiplication of the hash by that length chooses the
/// home slot. The placed floors decide through it, so that their slot's address depends on the
/// key's hash, as in a real table (the unplaced floors above CAS a slot at a fixed address, whose
/// load can start before the hash is known).
#[derive(Debug)]
struct PlacedSlots<S> {
    hasher: ahash::RandomState,
    /// `64 - log2(shards)`: the hash's top bits choose the shard (none for one shard).
    shard_shift: u32,
    shards: Box<[PlacedShard<S>]>,
}

#[derive(Debug)]
struct PlacedShard<S> {
    len: usize,
    slots: Box<[S]>,
}

/// Shards in the direct placed floors' table, and slots in each: the layout of a tollgate table
/// built for 45,875 keys or a little more.
const PLACED_SHARDS: usize = 16;
const PLACED_SLOTS: usize = 4096;

/// tollgate's table sizing (`src/keyed/layout.rs`): 10 slots for every 7 keys, in a power of two
/// of shards of at least 1,024 slots each, at most 64 shards.
const LOAD_NUMERATOR: usize = 7;
const LOAD_DENOMINATOR: usize = 10;
const MIN_SHARD_SLOTS: usize = 1024;
const MAX_SHARDS: usize = 64;

impl<S> PlacedSlots<S> {
    /// `shards` (a power of two) of `slots_per_shard` slots each, made by `slot`.
    fn new(shards: usize, slots_per_shard: usize, slot: impl Fn() -> S) -> PlacedSlots<S> {
        debug_assert!(shards.is_power_of_two());
        let shards: Box<[PlacedShard<S>]> = (0..shards)
            .map(|_| PlacedShard {
                len: slots_per_shard,
                slots: (0..slots_per_shard).map(|_| slot()).collect(),
            })
            .collect();
        PlacedSlots {
            hasher: ahash::RandomState::new(),
            shard_shift: u64::BITS - shards.len().ilog2(),
            shards,
        }
    }

    /// The layout tollgate's keyed table has when built for `capacity` keys (at least 1).
    fn for_keys(capacity: usize, slot: impl Fn() -> S) -> PlacedSlots<S> {
        let slots = (capacity.max(1) * LOAD_DENOMINATOR).div_ceil(LOAD_NUMERATOR);
        let shards = 1 << (slots / MIN_SHARD_SLOTS).clamp(1, MAX_SHARDS).ilog2();
        PlacedSlots::new(shards, slots.div_ceil(shards), slot)
    }

    /// Slots in the table.
    fn len(&self) -> usize {
        self.shards.iter().map(|shard| shard.len).sum()
    }

    /// The key's hash and its slot.
    #[inline(always)]
    fn place(&self, key: u64) -> (u64, &S) {
        let hash = self.hasher.hash_one(key);
        let shard = &self.shards[hash.checked_shr(self.shard_shift).unwrap_or(0) as usize];
        let home = ((u128::from(hash.rotate_left(32)) * shard.len as u128) >> 64) as usize;
        (hash, &shard.slots[home])
    }
}

/// [`ClockReadHashLoadCas16`] with the slot placed by the hash (shard, then home slot, as a table places it): the keyed
/// floor of tollgate's table, address computation included.
#[derive(Debug)]
pub struct ClockReadHashPlaceLoadCas16<C> {
    clock: C,
    key: u64,
    table: PlacedSlots<AtomicU128>,
}

impl<C: Clock> ClockReadHashPlaceLoadCas16<C> {
    /// The placed keyed floor on `clock`.
    pub fn new(clock: C) -> ClockReadHashPlaceLoadCas16<C> {
        ClockReadHashPlaceLoadCas16 {
            clock,
            key: 42,
            table: PlacedSlots::new(PLACED_SHARDS, PLACED_SLOTS, || AtomicU128::new(0)),
        }
    }
}

impl<C: Clock> Direct for ClockReadHashPlaceLoadCas16<C> {
    type Answer = Result<u128, u128>;

    #[inline(always)]
    fn check(&self) -> Result<u128, u128> {
        let now = self.clock.now().as_nanos();
        let (hash, slot) = self.table.place(std::hint::black_box(self.key));
        // Relaxed: as tollgate's keyed decision loads its slot; the floor publishes nothing.
        let current = slot.load(Ordering::Relaxed);
        let next = (u128::from(hash) << 64) | u128::from((current as u64).wrapping_add(now | 1));
        // Relaxed, weak: the CAS tollgate's keyed decision makes.
        slot.compare_exchange_weak(current, next, Ordering::Relaxed, Ordering::Relaxed)
    }

    fn admitted(_: &Result<u128, u128>) -> bool {
        true
    }
}

/// [`ClockReadHashLoadTagCas8`] with the slot placed by the hash (shard, then home slot), and the tag
/// read again after the state (as a two-word slot must, to know the state is still the key's).
#[derive(Debug)]
pub struct ClockReadHashPlaceLoadTagCas8<C> {
    clock: C,
    key: u64,
    table: PlacedSlots<[AtomicU64; 2]>,
}

impl<C: Clock> ClockReadHashPlaceLoadTagCas8<C> {
    /// The placed two-word keyed floor on `clock`.
    pub fn new(clock: C) -> ClockReadHashPlaceLoadTagCas8<C> {
        let key = 42;
        let table = PlacedSlots::new(PLACED_SHARDS, PLACED_SLOTS, || {
            [AtomicU64::new(0), AtomicU64::new(0)]
        });
        let (hash, slot) = table.place(key);
        // Relaxed: set before the floor is shared.
        slot[0].store(hash, Ordering::Relaxed);
        ClockReadHashPlaceLoadTagCas8 { clock, key, table }
    }
}

impl<C: Clock> Direct for ClockReadHashPlaceLoadTagCas8<C> {
    type Answer = Result<u64, u64>;

    #[inline(always)]
    fn check(&self) -> Result<u64, u64> {
        let now = self.clock.now().as_nanos();
        let (hash, slot) = self.table.place(std::hint::black_box(self.key));
        let [tag, state] = slot;
        // Acquire, the three loads: as a two-word decision must read tag, state, tag in order.
        if tag.load(Ordering::Acquire) != hash {
            return Err(0);
        }
        let current = state.load(Ordering::Acquire);
        if tag.load(Ordering::Acquire) != hash {
            return Err(0);
        }
        // Relaxed, weak: the CAS such a decision makes.
        state.compare_exchange_weak(
            current,
            current.wrapping_add(now | 1),
            Ordering::Relaxed,
            Ordering::Relaxed,
        )
    }

    fn admitted(answer: &Result<u64, u64>) -> bool {
        answer.is_ok()
    }
}

/// The keyed floor at a table's size: a table of 16-byte slots laid out as tollgate's keyed
/// table is for the same capacity, and a decision that hashes the key, places it (shard, home
/// slot), reads the clock, loads the slot and compare-and-swaps it once (in that order, as
/// tollgate's keyed decision does). Every key has its home slot and no other: no probing, no
/// fingerprint check, no insert.
#[derive(Debug)]
pub struct KeyedFloor<C> {
    clock: C,
    capacity: usize,
    table: PlacedSlots<AtomicU128>,
}

impl<C: Clock> KeyedFloor<C> {
    /// The floor of a tollgate table built for `capacity` keys, on `clock`.
    pub fn new(capacity: usize, clock: C) -> KeyedFloor<C> {
        KeyedFloor {
            clock,
            capacity,
            table: PlacedSlots::for_keys(capacity, || AtomicU128::new(0)),
        }
    }

    /// Slots in its table.
    pub fn slots(&self) -> usize {
        self.table.len()
    }
}

impl<C: Clock> Keyed for KeyedFloor<C> {
    type Answer = Result<u128, u128>;

    #[inline(always)]
    fn check(&self, key: &u64) -> Result<u128, u128> {
        let (hash, slot) = self.table.place(*key);
        let now = self.clock.now().as_nanos();
        // Relaxed: as tollgate's keyed decision loads its slot; the floor publishes nothing.
        let current = slot.load(Ordering::Relaxed);
        let next = (u128::from(hash) << 64) | u128::from((current as u64).wrapping_add(now | 1));
        // Relaxed, weak: the CAS tollgate's keyed decision makes.
        slot.compare_exchange_weak(current, next, Ordering::Relaxed, Ordering::Relaxed)
    }

    fn admitted(_: &Result<u128, u128>) -> bool {
        true
    }

    /// The capacity it was built for: every key has its place, and none is ever refused.
    fn keys(&self) -> usize {
        self.capacity
    }
}

/// The keyed floor as a contender of the keyed benchmarks, row name `floor`, on clock `C`.
#[derive(Debug)]
pub struct KeyedFloorContender<C>(pub C);

impl<C: Clock + Clone> KeyedContender for KeyedFloorContender<C>
where
    KeyedFloor<C>: KeyedLoops,
{
    type Limiter = KeyedFloor<C>;
    const NAME: &'static str = "floor";

    fn build(&self, capacity: usize) -> KeyedFloor<C> {
        KeyedFloor::new(capacity, self.0.clone())
    }

    /// The floor built for `capacity` keys, with the slots of keys `0..keys` written once (as a
    /// fill writes them; the floor holds no keys to count).
    fn filled(&self, capacity: usize, keys: u64) -> KeyedFloor<C> {
        let floor = self.build(capacity);
        for key in 0..keys {
            let _ = floor.check(&key);
        }
        floor
    }
}

#[cfg(test)]
mod tests {
    use tollgate::PreciseClock;

    use super::*;

    /// The floor's table has as many slots as tollgate's for the same capacity, at every size the
    /// benchmarks build (and at the edges of tollgate's shard counts).
    #[test]
    fn the_floor_table_is_the_size_of_tollgates() {
        for capacity in [1, 7, 1_000, 10_000, 45_874, 45_875, 100_000, 1_000_000] {
            let floor = KeyedFloor::new(capacity, PreciseClock::new());
            let table = crate::tollgate(capacity, PreciseClock::new());
            assert_eq!(floor.slots(), table.slots(), "capacity {capacity}");
        }
    }

    /// A decision writes the key's home slot: its hash in the high half, as a keyed slot holds
    /// the key's identity beside its state.
    #[test]
    fn a_decision_writes_the_keys_home_slot() {
        let floor = KeyedFloorContender(PreciseClock::new()).filled(1_000, 1_000);
        for key in [0, 17, 999] {
            // A weak CAS may fail spuriously (never on x86_64): decide until one succeeds.
            while floor.check(&key).is_err() {}
            let (hash, slot) = floor.table.place(key);
            // Relaxed: one thread reads back its own write.
            assert_eq!((slot.load(Ordering::Relaxed) >> 64) as u64, hash);
        }
    }
}
