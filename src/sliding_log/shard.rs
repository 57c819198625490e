//! One shard of the keyed sliding log table: a fixed array of slots, each a key's tag and a
//! log behind its own lock, found by linear probing; new keys are inserted under the shard's
//! insert lock.
//!
//! # The protocol
//! - A slot's **tag** says what it holds, `0` (empty: never used; probe chains end here, and a
//!   slot never becomes empty again) or `MEMBER | fingerprint`, and the slot's **reach**: the
//!   largest displacement of any key ever placed for the home that this slot is (as in the
//!   `KeyedLimiter`'s table), so that lookups stop there however many slots the table has used.
//!   What a slot holds changes only while its writer holds both the shard's insert lock and the
//!   slot's lock; its reach (which says nothing of what it holds) only grows, under the insert
//!   lock.
//! - **Deciding** for a present key: probe the tags (no lock) to the key's slot, lock that slot,
//!   check the tag is still the key's (it may have been reused for another key since it was
//!   read), decide and record, unlock. One lock, held for one log's read-decide-write.
//! - **Inserting** (the key was not found, or its slot was reused): take the insert lock, scan the
//!   chain again (no tag can change meanwhile, so this scan is exact); use the key's slot if it
//!   is there; else claim the first empty slot, or the first slot whose log is idle at `now`
//!   (checked under that slot's lock: its newest unit has left the window), for the key. The
//!   insert lock is released once the slot's lock is held and its tag is the key's, before the
//!   request is decided and recorded (`O(weight)`). Inserts are serialized per shard, so a key
//!   never has two slots; a log with a unit in the window is never reused, so no debt is ever
//!   forgotten.
//!
//! Locks are always taken insert lock first, then one slot's lock, and a decision holds no slot
//! lock when it takes the insert lock: no deadlock.

use crossbeam_utils::CachePadded;

use super::faults::LogFaults;
use super::state::LogState;
use super::SlidingLog;
use crate::keyed::layout::TableLayout;
use crate::sync::{lock, AtomicU64, Mutex, MutexGuard, Ordering};
use crate::Decision;

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

/// One key's place: its tag, readable without a lock, and its log.
#[derive(Debug)]
struct LogSlot {
    tag: AtomicU64,
    ring: Mutex<LogState>,
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
pub(super) struct LogShard {
    meta: CachePadded<ShardMeta>,
    slots: Box<[LogSlot]>,
}

impl LogShard {
    /// A shard of `len` empty slots, each for a log of `entries` units (whose memory is allocated
    /// when the slot is first used); `None` if the slots' memory cannot be had.
    pub(super) fn new(len: usize, entries: usize) -> Option<LogShard> {
        let mut slots = Vec::new();
        slots.try_reserve_exact(len).ok()?;
        slots.extend((0..len).map(|_| LogSlot {
            tag: AtomicU64::new(EMPTY),
            ring: Mutex::new(LogState::unallocated(entries)),
        }));
        Some(LogShard {
            meta: CachePadded::new(ShardMeta {
                insert: Mutex::new(()),
                live: AtomicU64::new(0),
            }),
            slots: slots.into_boxed_slice(),
        })
    }

    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Slots that have ever held a key (exact once no insert is in flight).
    pub(super) fn live(&self) -> u64 {
        // Relaxed: a statistic; nothing is published through it.
        self.meta.live.load(Ordering::Relaxed)
    }

    /// Slots holding a log that is not idle at `now` (`SlidingLog::is_idle` false): the keys
    /// still being limited. Locks each used slot's log in turn; a log that changes meanwhile is
    /// counted as it was read.
    pub(super) fn busy(&self, log: &SlidingLog, now: u64) -> usize {
        self.slots
            .iter()
            .filter(|slot| {
                // Relaxed: an empty tag is final for this count (a key inserted meanwhile is
                // counted as the moment before it); a used slot is judged under its lock.
                held(slot.tag.load(Ordering::Relaxed)) != EMPTY && !log.is_idle(&lock(&slot.ring), now)
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
    /// when the key is absent and no slot in its probe range is empty or idle (or a first-used
    /// slot's log could not be allocated): the table is full for it.
    pub(super) fn decide(
        &self,
        log: &SlidingLog,
        fingerprint: u64,
        home: usize,
        now: u64,
        cost: u64,
        faults: LogFaults,
    ) -> Option<Decision> {
        if let Some(index) = self.find(fingerprint, home) {
            let ring = lock(&self.slots[index].ring);
            if faults.skips_key_recheck() || held(self.tag(index)) == member(fingerprint) {
                return Some(self.decide_locked(index, ring, log, now, cost, faults));
            }
            // The slot was reused for another key after the probe read its tag: insert path.
        }
        self.decide_inserting(log, fingerprint, home, now, cost, faults)
    }

    /// The insert path: under the insert lock, find the key exactly, or give it a slot.
    #[cold]
    #[inline(never)]
    fn decide_inserting(
        &self,
        log: &SlidingLog,
        fingerprint: u64,
        home: usize,
        now: u64,
        cost: u64,
        faults: LogFaults,
    ) -> Option<Decision> {
        let inserting = (!faults.inserts_unlocked()).then(|| lock(&self.meta.insert));
        // No tag changes while the insert lock is held, so this scan is exact.
        if let Some(index) = self.find(fingerprint, home) {
            let ring = lock(&self.slots[index].ring);
            // The slot's lock is held: the insert lock is not needed to decide and record.
            drop(inserting);
            return Some(self.decide_locked(index, ring, log, now, cost, faults));
        }
        // A weightless request records nothing: an absent key is told what a fresh one would
        // be, and takes no slot (nor a refusal when there is none).
        if cost == 0 {
            return Some(log.decide(&LogState::unallocated(0), now, cost).decision);
        }
        for (displacement, index) in self.probe(home).enumerate() {
            let tag = self.tag(index);
            let mut ring = lock(&self.slots[index].ring);
            if held(tag) != EMPTY && !faults.reclaims_busy() && !log.is_idle(&ring, now) {
                continue;
            }
            // The only allocation a slot ever makes, the first time it is used.
            ring.ring.reserve().ok()?;
            if held(tag) == EMPTY {
                // Relaxed: a statistic.
                self.meta.live.fetch_add(1, Ordering::Relaxed);
            }
            ring.clear();
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
            // The key is placed and its slot's lock held: record (O(cost)) without the insert
            // lock, which every new key of the shard takes.
            drop(inserting);
            return Some(self.decide_locked(index, ring, log, now, cost, faults));
        }
        None
    }

    /// The critical section: decide and record on a slot's log whose lock the caller holds.
    #[inline]
    fn decide_locked<'a>(
        &'a self,
        index: usize,
        mut ring: MutexGuard<'a, LogState>,
        log: &SlidingLog,
        now: u64,
        cost: u64,
        faults: LogFaults,
    ) -> Decision {
        let verdict = log.decide(&ring, now, cost);
        if verdict.record_at.is_some() && faults.unlocks_before_record() {
            drop(ring);
            ring = lock(&self.slots[index].ring);
        }
        ring.apply(&verdict, cost, log.window);
        verdict.decision
    }

    /// For a new key homed at `home` that found no room at `now`: the least time until a log in
    /// its probe range is idle (its slot can then be reused), 0 if a slot is empty or idle by
    /// now. A hint: each slot is locked and read in turn, while others may change the rest.
    pub(super) fn soonest_room(&self, log: &SlidingLog, home: usize, now: u64) -> u64 {
        let mut soonest = u64::MAX;
        for index in self.probe(home) {
            if held(self.tag(index)) == EMPTY {
                return 0;
            }
            let ring = lock(&self.slots[index].ring);
            soonest = soonest.min(log.idle_in(&ring, now));
            if soonest == 0 {
                break;
            }
        }
        soonest
    }

    /// Empties the key's log if the key is present; whether it still limited at `now` (`false`
    /// for an absent key). The emptied log is idle: its slot may go to another key.
    pub(super) fn reset(
        &self,
        log: &SlidingLog,
        fingerprint: u64,
        home: usize,
        now: u64,
        faults: LogFaults,
    ) -> bool {
        while let Some(index) = self.find(fingerprint, home) {
            let mut ring = lock(&self.slots[index].ring);
            // Under the slot's lock what the tag holds cannot change (every write of it holds
            // both locks; only the reach, which this does not compare, may be raised).
            // Another key's now: this one was reclaimed (so idle) or moved; look again.
            if faults.skips_key_recheck() || held(self.tag(index)) == member(fingerprint) {
                let limiting = !log.is_idle(&ring, now);
                ring.clear();
                return limiting;
            }
        }
        false
    }

    /// What `decide` would answer, recording and inserting nothing: the key's log's answer if
    /// present, else a fresh log's if the key would find room, else `None` (the table is full
    /// for it).
    pub(super) fn peek(
        &self,
        log: &SlidingLog,
        fingerprint: u64,
        home: usize,
        now: u64,
        cost: u64,
    ) -> Option<Decision> {
        if let Some(index) = self.find(fingerprint, home) {
            let ring = lock(&self.slots[index].ring);
            if held(self.tag(index)) == member(fingerprint) {
                return Some(log.decide(&ring, now, cost).decision);
            }
        }
        let fresh = || log.decide(&LogState::unallocated(0), now, cost).decision;
        // A weightless request needs no slot (see `decide_inserting`).
        if cost == 0 {
            return Some(fresh());
        }
        for index in self.probe(home) {
            if held(self.tag(index)) == EMPTY || log.is_idle(&lock(&self.slots[index].ring), now) {
                return Some(fresh());
            }
        }
        None
    }
}

#[cfg(all(test, not(tollgate_loom)))]
mod tests {
    use super::LogSlot;

    /// The slot size `docs/design.md` ("Sliding window log") gives, before the ring's entries.
    #[test]
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn a_slot_is_64_bytes_before_its_entries() {
        assert_eq!(std::mem::size_of::<LogSlot>(), 64);
    }
}
