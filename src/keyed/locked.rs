//! A keyed table whose keys' states sit behind a short lock each, generic over what it keeps per
//! key ([`PerKey`]): the keyed sliding log's logs (`crate::sliding_log`), and a
//! [`KeyedLimiter`](crate::KeyedLimiter)'s states when they are 128 bits wide
//! ([`Algorithm::is_wide`](crate::algorithm::Algorithm::is_wide)), which do not fit beside a tag
//! in the lock-free table's 16-byte slot. One shard: a fixed array of slots, each a key's tag and
//! a value behind its own lock, found by linear probing; new keys are inserted under the shard's
//! insert lock.
//!
//! # The protocol
//! - A slot's **tag** says what it holds, `0` (empty: never used; probe chains end here, and a
//!   slot never becomes empty again) or `MEMBER | fingerprint`, and the slot's **reach**: the
//!   largest displacement of any key ever placed for the home that this slot is (as in the
//!   lock-free table), so that lookups stop there however many slots the table has used.
//!   What a slot holds changes only while its writer holds both the shard's insert lock and the
//!   slot's lock; its reach (which says nothing of what it holds) only grows, under the insert
//!   lock.
//! - **Deciding** for a present key: probe the tags (no lock) to the key's slot, lock that slot,
//!   check the tag is still the key's (it may have been reused for another key since it was
//!   read), decide and store, unlock. One lock, held for one value's read-decide-write.
//! - **Inserting** (the key was not found, or its slot was reused): take the insert lock, scan the
//!   chain again (no tag can change meanwhile, so this scan is exact); use the key's slot if it
//!   is there; else claim the first empty slot, or the first slot whose value is reclaimable at
//!   `now` (checked under that slot's lock: a log whose newest unit has left the window, a state
//!   as good as a fresh one's), for the key. The insert lock is released once the slot's lock is
//!   held and its tag is the key's, before the request is decided and stored (a log records
//!   `O(weight)` entries). Inserts are serialized per shard, so a key never has two slots; a
//!   value that still carries debt is never reused, so no debt is ever forgotten.
//!
//! Locks are always taken insert lock first, then one slot's lock, and a decision holds no slot
//! lock when it takes the insert lock: no deadlock.

mod faults;

use crossbeam_utils::CachePadded;

#[cfg(tollgate_loom)]
pub use faults::LogFaults;
#[cfg(not(tollgate_loom))]
pub(crate) use faults::LogFaults;

use super::layout::TableLayout;
use crate::sync::{lock, AtomicU64, Mutex, MutexGuard, Ordering};
use crate::Decision;

/// What a [`LockedShard`] keeps for each key behind the key's lock, and how a request is decided
/// on it. Times are nanoseconds since the UNIX epoch.
pub(crate) trait PerKey {
    /// The per-key value.
    type Value;
    /// What a decision stores, applied to the value under the same lock.
    type Change;

    /// A slot's value before its first key: nothing allocated yet.
    fn unused(&self) -> Self::Value;

    /// Makes a slot's value ready for its first key: the one allocation a slot makes, if its
    /// value allocates. `false` when the memory cannot be had.
    fn prepare(&self, value: &mut Self::Value) -> bool;

    /// Makes `value` a fresh key's (a reset, or a slot reused for another key), keeping its
    /// memory.
    fn forget(&self, value: &mut Self::Value);

    /// Whether `value` decides every request at `now` and later as a fresh key's.
    fn is_idle(&self, value: &Self::Value, now: u64) -> bool;

    /// Whether the slot may go to another key at `now` (implies [`is_idle`](Self::is_idle)).
    fn is_reclaimable(&self, value: &Self::Value, now: u64) -> bool;

    /// Nanoseconds from `now` until [`is_reclaimable`](Self::is_reclaimable) if nothing more is
    /// counted (`u64::MAX`: never, in representable time).
    fn reclaimable_in(&self, value: &Self::Value, now: u64) -> u64;

    /// Decides a request of weight `cost` at `now`: the answer, and what to store (`None`:
    /// nothing).
    fn decide(&self, value: &Self::Value, now: u64, cost: u64) -> (Decision, Option<Self::Change>);

    /// Stores what a decision of weight `cost` concluded.
    fn apply(&self, value: &mut Self::Value, change: &Self::Change, cost: u64);

    /// What a fresh key is told for a request of weight `cost` at `now` (counting nothing).
    fn fresh(&self, now: u64, cost: u64) -> Decision;
}

/// The longest probe sequence: a key is stored within this many slots of its home.
const MAX_PROBE: usize = 512;
/// The tag bit of a slot that holds a key.
const MEMBER: u64 = 1 << 62;
/// The tag of a slot never used.
const EMPTY: u64 = 0;
/// A tag's reach: bits 53 to 61, above the fingerprint.
const REACH_SHIFT: u32 = 53;
const REACH_MASK: u64 = 0x1ff << REACH_SHIFT;
// Every displacement within the probe limit fits in a reach, and no fingerprint bit is in it.
const _: () = assert!(MAX_PROBE - 1 <= (REACH_MASK >> REACH_SHIFT) as usize);
const _: () = assert!(TableLayout::fingerprint(u64::MAX) < 1 << REACH_SHIFT);

/// What a tag says the slot holds (`EMPTY` or a `member`), without the reach.
const fn held(tag: u64) -> u64 {
    tag & !REACH_MASK
}

/// How far from this slot the keys homed at it may lie.
const fn reach(tag: u64) -> usize {
    ((tag & REACH_MASK) >> REACH_SHIFT) as usize
}

/// The tag of the slot holding the key with `fingerprint` (53 bits: `TableLayout::fingerprint`).
const fn member(fingerprint: u64) -> u64 {
    MEMBER | fingerprint
}

/// Whether a used slot's `value` may go to a new key at `now` (checked under the slot's lock).
/// The broken twin `reclaim_busy` reuses any.
fn reclaimable<P: PerKey>(policy: &P, value: &P::Value, now: u64, faults: LogFaults) -> bool {
    faults.reclaims_busy() || policy.is_reclaimable(value, now)
}

/// One key's place: its tag, readable without a lock, and its value.
#[derive(Debug)]
struct LockedSlot<V> {
    tag: AtomicU64,
    value: Mutex<V>,
}

/// Written only by inserts, on its own cache line.
#[derive(Debug)]
struct ShardMeta {
    /// Serializes inserts (and reuses) of keys in this shard.
    insert: Mutex<()>,
    /// Slots that have ever held a key.
    live: AtomicU64,
}

/// A fixed array of slots, and the lock and counter of its inserts.
#[derive(Debug)]
pub(crate) struct LockedShard<V> {
    meta: CachePadded<ShardMeta>,
    slots: Box<[LockedSlot<V>]>,
}

/// The bytes of one slot holding `V`, before whatever `V` allocates.
pub(crate) const fn slot_bytes<V>() -> usize {
    std::mem::size_of::<LockedSlot<V>>()
}

impl<V> LockedShard<V> {
    /// A shard of `len` empty slots, each holding `unused()` (a value whose memory, if any, is
    /// allocated when the slot is first used); `None` if the slots' memory cannot be had.
    pub(crate) fn new(len: usize, unused: impl Fn() -> V) -> Option<LockedShard<V>> {
        let mut slots = Vec::new();
        slots.try_reserve_exact(len).ok()?;
        slots.extend((0..len).map(|_| LockedSlot {
            tag: AtomicU64::new(EMPTY),
            value: Mutex::new(unused()),
        }));
        Some(LockedShard {
            meta: CachePadded::new(ShardMeta {
                insert: Mutex::new(()),
                live: AtomicU64::new(0),
            }),
            slots: slots.into_boxed_slice(),
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Slots that have ever held a key (exact once no insert is in flight).
    pub(crate) fn live(&self) -> u64 {
        // Relaxed: a statistic; nothing is published through it.
        self.meta.live.load(Ordering::Relaxed)
    }

    /// Slots holding a value that is not idle at `now` (`PerKey::is_idle` false): the keys
    /// still being limited. Locks each used slot's value in turn; a value that changes meanwhile
    /// is counted as it was read.
    pub(crate) fn busy<P: PerKey<Value = V>>(&self, policy: &P, now: u64) -> usize {
        self.slots
            .iter()
            .filter(|slot| {
                // Relaxed: an empty tag is final for this count (a key inserted meanwhile is
                // counted as the moment before it); a used slot is judged under its lock.
                held(slot.tag.load(Ordering::Relaxed)) != EMPTY && !policy.is_idle(&lock(&slot.value), now)
            })
            .count()
    }

    /// The probe sequence of a key whose home is `home`.
    #[inline]
    fn probe(&self, home: usize) -> impl Iterator<Item = usize> {
        let len = self.slots.len();
        (home..len).chain(0..home).take(MAX_PROBE.min(len))
    }

    #[inline]
    fn tag(&self, index: usize) -> u64 {
        // Relaxed: outside a lock the tag is a hint (every use rechecks it under the slot's lock
        // or the insert lock). What a slot holds (`held`) is written only holding both its lock
        // and the insert lock, so under either lock the lock's acquire orders this read after
        // every such write; its reach is raised holding the insert lock (and another slot's
        // lock), so a read under the slot's lock alone may miss a raise, which no check made
        // there reads (they compare `held` only).
        self.slots[index].tag.load(Ordering::Relaxed)
    }

    /// The slot whose tag says it holds the key, if the probe meets it before an empty slot and
    /// within the home's reach.
    #[inline]
    fn find(&self, fingerprint: u64, home: usize) -> Option<usize> {
        let wanted = member(fingerprint);
        let span = reach(self.tag(home)) + 1;
        for index in self.probe(home).take(span) {
            match held(self.tag(index)) {
                tag if tag == wanted => return Some(index),
                EMPTY => return None,
                _ => {}
            }
        }
        None
    }

    /// Decides a request of weight `cost` at `now` for the key, inserting it if absent. `None`
    /// when the key is absent and no slot in its probe range is empty or reclaimable (or a
    /// first-used slot's value could not be allocated): the table is full for it.
    #[inline]
    pub(crate) fn decide<P: PerKey<Value = V>>(
        &self,
        policy: &P,
        fingerprint: u64,
        home: usize,
        now: u64,
        cost: u64,
        faults: LogFaults,
    ) -> Option<Decision> {
        if let Some(index) = self.find(fingerprint, home) {
            let value = lock(&self.slots[index].value);
            if self.still_holds(index, fingerprint, faults) {
                return Some(self.decide_locked(index, value, policy, now, cost, faults));
            }
            // The slot was reused for another key after the probe read its tag: insert path.
        }
        self.decide_inserting(policy, fingerprint, home, now, cost, faults)
    }

    /// The insert path: under the insert lock, find the key exactly, or give it a slot.
    #[cold]
    #[inline(never)]
    fn decide_inserting<P: PerKey<Value = V>>(
        &self,
        policy: &P,
        fingerprint: u64,
        home: usize,
        now: u64,
        cost: u64,
        faults: LogFaults,
    ) -> Option<Decision> {
        let inserting = self.lock_inserts(faults);
        // No tag changes while the insert lock is held, so this scan is exact.
        if let Some(index) = self.find(fingerprint, home) {
            let value = lock(&self.slots[index].value);
            // The slot's lock is held: the insert lock is not needed to decide and store.
            drop(inserting);
            return Some(self.decide_locked(index, value, policy, now, cost, faults));
        }
        // A weightless request stores nothing: an absent key is told what a fresh one would
        // be, and takes no slot (nor a refusal when there is none).
        if cost == 0 {
            return Some(policy.fresh(now, cost));
        }
        for (displacement, index) in self.probe(home).enumerate() {
            let tag = self.tag(index);
            let mut value = lock(&self.slots[index].value);
            if held(tag) != EMPTY && !reclaimable(policy, &value, now, faults) {
                continue;
            }
            // The only allocation a slot ever makes, the first time it is used.
            if !policy.prepare(&mut value) {
                return None;
            }
            if held(tag) == EMPTY {
                // Relaxed: a statistic.
                self.meta.live.fetch_add(1, Ordering::Relaxed);
            }
            crate::meter::slot_taken(held(tag) != EMPTY);
            policy.forget(&mut value);
            let home_tag = self.tag(home);
            if reach(home_tag) < displacement {
                // Relaxed: see `tag`; the insert lock is held, and the home's content is kept.
                self.slots[home].tag.store(
                    held(home_tag) | ((displacement as u64) << REACH_SHIFT),
                    Ordering::Relaxed,
                );
            }
            // Relaxed: see `tag`; both locks are held. The slot's own reach is kept.
            self.slots[index]
                .tag
                .store(member(fingerprint) | (tag & REACH_MASK), Ordering::Relaxed);
            // The key is placed and its slot's lock held: decide and store (a log records
            // `O(cost)` entries) without the insert lock, which every new key of the shard takes.
            drop(inserting);
            return Some(self.decide_locked(index, value, policy, now, cost, faults));
        }
        None
    }

    /// The critical section: decide and store on a slot's value whose lock the caller holds.
    #[inline]
    fn decide_locked<'a, P: PerKey<Value = V>>(
        &'a self,
        index: usize,
        value: MutexGuard<'a, V>,
        policy: &P,
        now: u64,
        cost: u64,
        faults: LogFaults,
    ) -> Decision {
        let (decision, change) = policy.decide(&value, now, cost);
        if let Some(change) = change {
            let mut value = self.keep_locked(index, value, faults);
            policy.apply(&mut value, &change, cost);
        }
        decision
    }

    /// The lock a decision holds, `value` of slot `index`, kept to record what it decided. The
    /// broken twin `unlock_before_record` releases it and takes it again in between.
    #[inline(always)]
    fn keep_locked<'a>(
        &'a self,
        index: usize,
        value: MutexGuard<'a, V>,
        faults: LogFaults,
    ) -> MutexGuard<'a, V> {
        if faults.unlocks_before_record() {
            drop(value);
            return lock(&self.slots[index].value);
        }
        value
    }

    /// The shard's insert lock, held while a key is found exactly or placed. The broken twin
    /// `insert_unlocked` inserts without it.
    fn lock_inserts(&self, faults: LogFaults) -> Option<MutexGuard<'_, ()>> {
        (!faults.inserts_unlocked()).then(|| lock(&self.meta.insert))
    }

    /// Whether slot `index`, whose lock the caller holds, still holds the key: its tag may have
    /// been given to another key since the probe read it. Under the slot's lock what the tag
    /// holds cannot change (every write of it holds both locks; only the reach, which this does
    /// not compare, may be raised). The broken twin `skip_key_recheck` takes it for the key's.
    #[inline]
    fn still_holds(&self, index: usize, fingerprint: u64, faults: LogFaults) -> bool {
        faults.skips_key_recheck() || held(self.tag(index)) == member(fingerprint)
    }

    /// Runs `f` on the value of every slot that ever held a key, under that slot's lock, one
    /// slot at a time (a value that changes meanwhile is seen as it is when its slot is locked).
    #[cfg(any(feature = "redis", tollgate_loom))]
    pub(crate) fn visit(&self, mut f: impl FnMut(&mut V)) {
        for slot in self.slots.iter() {
            // Relaxed: an empty tag is final for this walk (a key inserted meanwhile is left
            // out, as one inserted after it); a used slot is read under its lock.
            if held(slot.tag.load(Ordering::Relaxed)) != EMPTY {
                f(&mut lock(&slot.value));
            }
        }
    }

    /// For a new key homed at `home` that found no room at `now`: the least time until a value
    /// in its probe range is reclaimable (its slot can then be reused), 0 if a slot is empty or
    /// reclaimable by now. A hint: each slot is locked and read in turn, while others may change
    /// the rest.
    pub(crate) fn soonest_room<P: PerKey<Value = V>>(&self, policy: &P, home: usize, now: u64) -> u64 {
        let mut soonest = u64::MAX;
        for index in self.probe(home) {
            if held(self.tag(index)) == EMPTY {
                return 0;
            }
            let value = lock(&self.slots[index].value);
            soonest = soonest.min(policy.reclaimable_in(&value, now));
            if soonest == 0 {
                break;
            }
        }
        soonest
    }

    /// Runs `change` on every slot's value in turn, each under its lock, stopping at the first
    /// error (a sliding log's rings grown for a raised limit, before the limit is read).
    pub(crate) fn try_for_each_value<E>(
        &self,
        mut change: impl FnMut(&mut V) -> Result<(), E>,
    ) -> Result<(), E> {
        self.slots
            .iter()
            .try_for_each(|slot| change(&mut lock(&slot.value)))
    }

    /// Runs `change` on the key's value under its lock if the key is present: its answer, or
    /// `None` for an absent key (a reset, a refund).
    pub(crate) fn with_key<R>(
        &self,
        fingerprint: u64,
        home: usize,
        faults: LogFaults,
        change: impl FnOnce(&mut V) -> R,
    ) -> Option<R> {
        while let Some(index) = self.find(fingerprint, home) {
            let mut value = lock(&self.slots[index].value);
            // Another key's now: this one was reclaimed (so idle) or moved; look again.
            if self.still_holds(index, fingerprint, faults) {
                return Some(change(&mut value));
            }
        }
        None
    }

    /// Forgets the key's state if the key is present; whether it still limited at `now`
    /// (`false` for an absent key). The fresh value is idle: its slot may go to another key.
    pub(crate) fn reset<P: PerKey<Value = V>>(
        &self,
        policy: &P,
        fingerprint: u64,
        home: usize,
        now: u64,
        faults: LogFaults,
    ) -> bool {
        self.with_key(fingerprint, home, faults, |value| {
            let limiting = !policy.is_idle(value, now);
            policy.forget(value);
            limiting
        })
        .unwrap_or(false)
    }

    /// What `decide` would answer, storing and inserting nothing: the key's value's answer if
    /// present, else a fresh key's if the key would find room, else `None` (the table is full
    /// for it).
    pub(crate) fn peek<P: PerKey<Value = V>>(
        &self,
        policy: &P,
        fingerprint: u64,
        home: usize,
        now: u64,
        cost: u64,
    ) -> Option<Decision> {
        if let Some(index) = self.find(fingerprint, home) {
            let value = lock(&self.slots[index].value);
            if held(self.tag(index)) == member(fingerprint) {
                return Some(policy.decide(&value, now, cost).0);
            }
        }
        // A weightless request needs no slot (see `decide_inserting`).
        if cost == 0 {
            return Some(policy.fresh(now, cost));
        }
        for index in self.probe(home) {
            if held(self.tag(index)) == EMPTY || policy.is_reclaimable(&lock(&self.slots[index].value), now) {
                return Some(policy.fresh(now, cost));
            }
        }
        None
    }
}

#[cfg(all(test, not(tollgate_loom)))]
mod tests {
    use super::{slot_bytes, LockedShard, LogFaults, PerKey, MAX_PROBE};
    use crate::sliding_log::LogState;
    use crate::Decision;

    /// A key's value is the time it is idle again; each request admitted makes it `now + 1_000`.
    struct BusyUntil;

    impl PerKey for BusyUntil {
        type Value = u64;
        type Change = u64;

        fn unused(&self) -> u64 {
            0
        }

        fn prepare(&self, _: &mut u64) -> bool {
            true
        }

        fn forget(&self, value: &mut u64) {
            *value = 0;
        }

        fn is_idle(&self, value: &u64, now: u64) -> bool {
            *value <= now
        }

        fn is_reclaimable(&self, value: &u64, now: u64) -> bool {
            *value <= now
        }

        fn reclaimable_in(&self, value: &u64, now: u64) -> u64 {
            value.saturating_sub(now)
        }

        fn decide(&self, _: &u64, now: u64, _: u64) -> (Decision, Option<u64>) {
            (Decision::allowed(0, 1_000, 0), Some(now + 1_000))
        }

        fn apply(&self, value: &mut u64, change: &u64, _: u64) {
            *value = *change;
        }

        fn fresh(&self, _: u64, _: u64) -> Decision {
            Decision::allowed(1, 0, 0)
        }
    }

    /// As the lock-free shard (`shard.rs`, `keys_of_one_home_fill_a_small_shard_and_512_slots_of_a_large_one`):
    /// keys that all name one home fill a shard of at most 512 slots, and 512 slots of a larger
    /// one, whose other slots stay free for keys homed elsewhere.
    #[test]
    fn keys_of_one_home_fill_a_small_shard_and_512_slots_of_a_large_one() {
        let charge = |shard: &LockedShard<u64>, fingerprint: u64, home: usize| {
            shard
                .decide(&BusyUntil, fingerprint, home, 1, 1, LogFaults::NONE)
                .is_some()
        };
        for len in [1, 10, 512] {
            let shard = LockedShard::new(len, || 0).expect("memory");
            for fingerprint in 0..len as u64 {
                assert!(charge(&shard, fingerprint, 0), "{len} slots, key {fingerprint}");
            }
            assert!(!charge(&shard, len as u64, 0), "{len} slots: one more");
            assert_eq!(shard.live(), len as u64);
        }
        let shard = LockedShard::new(1_024, || 0).expect("memory");
        for fingerprint in 0..MAX_PROBE as u64 {
            assert!(charge(&shard, fingerprint, 0), "key {fingerprint}");
        }
        assert!(!charge(&shard, 10_000, 0), "a 513th key of home 0");
        assert!(charge(&shard, 10_001, 700), "a key of another home");
    }

    /// The slot sizes `docs/design.md` gives: a log's ("Sliding window log"), before the ring's
    /// entries, and a wide state's ("Wide states").
    #[test]
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn a_slot_is_64_bytes_before_its_entries_and_48_for_a_wide_state() {
        assert_eq!(slot_bytes::<LogState>(), 64);
        assert_eq!(slot_bytes::<u128>(), 48);
    }
}
