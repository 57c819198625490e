//! The floors every direct decision is compared with, as [`Direct`] stand-ins so that they run
//! through the very same timed loop: a clock read alone, and a clock read plus one uncontended
//! load and compare-and-swap (what a decision cannot do without). [`Nothing`] measures the loop.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crossbeam_utils::CachePadded;
use portable_atomic::AtomicU128;
use tollgate::Clock;

use crate::Direct;

/// One clock read, nothing else.
#[derive(Debug)]
pub struct ClockRead<C>(pub C);

impl<C: Clock> Direct for ClockRead<C> {
    type Answer = u64;

    #[inline(always)]
    fn check(&self) -> u64 {
        self.0.now().as_nanos()
    }

    fn admitted(_: &u64) -> bool {
        true
    }
}

/// One clock read, one load and one compare-and-swap that succeeds, on a cache-padded word whose
/// value changes every call (as a decision's state does): the work no decision can skip.
#[derive(Debug)]
pub struct ClockReadLoadCas<C> {
    clock: C,
    word: CachePadded<AtomicU64>,
}

impl<C: Clock> ClockReadLoadCas<C> {
    /// The floor on `clock`.
    pub fn new(clock: C) -> ClockReadLoadCas<C> {
        ClockReadLoadCas {
            clock,
            word: CachePadded::new(AtomicU64::new(0)),
        }
    }
}

impl<C: Clock> Direct for ClockReadLoadCas<C> {
    type Answer = Result<u64, u64>;

    #[inline(always)]
    fn check(&self) -> Result<u64, u64> {
        let now = self.clock.now().as_nanos();
        // Relaxed: as tollgate's cell loads its state word; the floor publishes nothing.
        let current = self.word.load(Ordering::Relaxed);
        // Relaxed, weak: exactly the CAS tollgate's cell makes.
        self.word.compare_exchange_weak(
            current,
            current.wrapping_add(now | 1),
            Ordering::Relaxed,
            Ordering::Relaxed,
        )
    }

    fn admitted(_: &Result<u64, u64>) -> bool {
        true
    }
}

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
/// that keeps identity and state in one word (`docs/benchmarks.md`, "Keyed limiters"); it does not
/// show that such a slot can keep a key from being charged for another's request.
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
/// home slot. The placed floors below decide through it, so that their slot's address depends on
/// the key's hash, as in a real table (the unplaced floors above CAS a slot at a fixed address,
/// whose load can start before the hash is known).
#[derive(Debug)]
struct PlacedSlots<S> {
    hasher: ahash::RandomState,
    shards: Box<[PlacedShard<S>]>,
}

#[derive(Debug)]
struct PlacedShard<S> {
    len: usize,
    slots: Box<[S]>,
}

/// Shards in a placed floor's table, and slots in each.
const PLACED_SHARDS: usize = 16;
const PLACED_SLOTS: usize = 4096;

impl<S> PlacedSlots<S> {
    fn new(slot: impl Fn() -> S) -> PlacedSlots<S> {
        let shards = (0..PLACED_SHARDS)
            .map(|_| PlacedShard {
                len: PLACED_SLOTS,
                slots: (0..PLACED_SLOTS).map(|_| slot()).collect(),
            })
            .collect();
        PlacedSlots {
            hasher: ahash::RandomState::new(),
            shards,
        }
    }

    /// The key's hash and its slot.
    #[inline(always)]
    fn place(&self, key: u64) -> (u64, &S) {
        let hash = self.hasher.hash_one(key);
        let shard = &self.shards[(hash >> (u64::BITS - PLACED_SHARDS.trailing_zeros())) as usize];
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
            table: PlacedSlots::new(|| AtomicU128::new(0)),
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
        let table = PlacedSlots::new(|| [AtomicU64::new(0), AtomicU64::new(0)]);
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

/// Not a limiter: the least a GCRA decision that reports what is left can do, to show how much
/// of a decision's cost over [`ClockReadLoadCas`] no implementation avoids. One clock read, one
/// load of the theoretical arrival time, `max(tat, now) + T`, one comparison with the tolerance,
/// one successful CAS, and the remaining count by one multiply-high with a reciprocal (not exact,
/// as a real limiter's must be), answered in five words as tollgate's `Decision` is. Its quota
/// (one per ns, a tolerance of 10^18 ns) admits every call, since the clock moves more than 1 ns
/// per call.
#[derive(Debug)]
pub struct MinimalGcra<C> {
    clock: C,
    tat: CachePadded<AtomicU64>,
    interval: u64,
    tolerance: u64,
    reciprocal: u64,
}

impl<C: Clock> MinimalGcra<C> {
    /// The reference decision on `clock`.
    pub fn new(clock: C) -> MinimalGcra<C> {
        MinimalGcra {
            clock,
            tat: CachePadded::new(AtomicU64::new(0)),
            interval: std::hint::black_box(1),
            tolerance: std::hint::black_box(1_000_000_000_000_000_000),
            reciprocal: std::hint::black_box(u64::MAX),
        }
    }
}

impl<C: Clock> Direct for MinimalGcra<C> {
    /// Admitted (1 or 0), remaining, retry-after, reset-after, delay.
    type Answer = [u64; 5];

    #[inline(always)]
    fn check(&self) -> [u64; 5] {
        let now = self.clock.now().as_nanos();
        // Relaxed: as tollgate's cell loads its state word.
        let mut tat = self.tat.load(Ordering::Relaxed);
        loop {
            let start = tat.max(now);
            let after = start - now + self.interval;
            if after > self.tolerance {
                return [0, 0, after - self.tolerance, start - now, 0];
            }
            let remaining = ((u128::from(self.tolerance - after) * u128::from(self.reciprocal)) >> 64) as u64;
            // Relaxed, weak: the CAS tollgate's cell makes.
            match self.tat.compare_exchange_weak(
                tat,
                start + self.interval,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return [1, remaining, 0, after, 0],
                Err(actual) => tat = actual,
            }
        }
    }

    fn admitted(answer: &[u64; 5]) -> bool {
        answer[0] == 1
    }
}

/// One `std::time::Instant::now()`: the clock read of the seed baseline and of `ratelimit_std`.
#[derive(Debug)]
pub struct InstantRead;

impl Direct for InstantRead {
    type Answer = Instant;

    #[inline(always)]
    fn check(&self) -> Instant {
        Instant::now()
    }

    fn admitted(_: &Instant) -> bool {
        true
    }
}

/// No work at all: what the timed loop itself costs.
#[derive(Debug)]
pub struct Nothing;

impl Direct for Nothing {
    type Answer = ();

    #[inline(always)]
    fn check(&self) {}

    fn admitted(_: &()) -> bool {
        true
    }
}

/// One read of a governor clock, as nanoseconds since the clock's first read (what governor's
/// own decision starts with: `clock.now()`, then `duration_since(start)`), to set beside
/// tollgate's [`ClockRead`].
#[derive(Debug)]
pub struct GovernorClockRead<C: governor::clock::Clock> {
    clock: C,
    start: C::Instant,
}

impl<C: governor::clock::Clock> GovernorClockRead<C> {
    /// Reads `clock` once, as the reference point.
    pub fn new(clock: C) -> GovernorClockRead<C> {
        let start = clock.now();
        GovernorClockRead { clock, start }
    }
}

impl<C: governor::clock::Clock + Sync> Direct for GovernorClockRead<C> {
    type Answer = u64;

    #[inline(always)]
    fn check(&self) -> u64 {
        use governor::clock::Reference;
        self.clock.now().duration_since(self.start).as_u64()
    }

    fn admitted(_: &u64) -> bool {
        true
    }
}
