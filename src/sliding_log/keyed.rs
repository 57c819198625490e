//! The keyed sliding log: one log per key, in a fixed-capacity, sharded table.

use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;

use super::state::LogState;
use super::SlidingLog;
use crate::clock::{Clock, PreciseClock};
use crate::error::{CapacityError, CostTooLarge};
use crate::keyed::decision_methods;
use crate::keyed::layout::TableLayout;
use crate::keyed::locked::LogFaults;
use crate::keyed::locked::{slot_bytes, LockedShard, PerKey};
use crate::live::LogQuota;
use crate::meter::Metering;
use crate::sync::{AtomicU64, Ordering};
use crate::{Decision, Timestamp, WhenFull};

/// A [`SlidingLog`] per key, for any `K: Hash` (`u64`, `IpAddr`, `str`, `[u8]`...): the exact
/// counterpart of a [`KeyedLimiter`](crate::KeyedLimiter), with the same methods but for
/// `refund_n`, `refund_n_at`, `refund_slot`, `refund_slot_at`, `check_n_within` and
/// `check_n_within_at` (the log never delays a request, so none waits for a slot or is
/// abandoned before it), the same
/// [`WhenFull`] policies and the same [`Decision`]s.
///
/// - Memory is bounded at construction: `ceil(capacity * 10 / 7)` slots, each with a log of
///   8 bytes per unit of the limit, allocated the first time the slot is used and reused for
///   every later key that takes the slot ([`max_memory`](Self::max_memory) gives the bound: a
///   limit of 1,000,000 for 1,000,000 keys comes to about 10 TiB). Nothing is allocated per request.
/// - Keys are never stored or cloned: a key is its 53-bit ahash fingerprint, under a random seed
///   chosen per limiter (as in the `KeyedLimiter`).
/// - A decision for a present key locks that key's log only, for one read-decide-record.
///   New keys are inserted under a per-shard lock (up to 64 shards).
/// - A key whose newest unit has left the window is forgotten when a new key probing its
///   slot needs room: no scan, no background thread. A key with a unit in the window is never
///   forgotten; when no slot in reach is free or idle, a new key gets the [`WhenFull`] policy.
///
/// Its limit and window are a [`SlidingLog`] fixed for its life, or a
/// [`Live<SlidingLog>`](crate::Live) that [`set_quota`](Self::set_quota) changes while it runs
/// ([`LogQuota`]).
///
/// ```
/// use tollgate::{KeyedLogLimiter, ManualClock, Outcome, SlidingLog, Timestamp};
///
/// let clock = ManualClock::starting_at(Timestamp::from_secs(1));
/// let limiter = KeyedLogLimiter::<str, _>::with_clock(SlidingLog::new("1/s".parse()?)?, 100, clock)?;
/// assert!(limiter.check("alice").is_allowed());
/// assert_eq!(limiter.check("alice").outcome(), Outcome::Denied);
/// assert!(limiter.check("bob").is_allowed()); // every key has its own log
/// assert_eq!(limiter.len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct KeyedLogLimiter<K: ?Sized, C = PreciseClock, L = SlidingLog> {
    pub(super) shards: Box<[LockedShard<LogState>]>,
    layout: TableLayout,
    hasher: ahash::RandomState,
    pub(super) log: L,
    /// Entries in every slot's log: the largest limit it has had (a lowered limit keeps the
    /// room).
    pub(super) entries: AtomicU64,
    clock: C,
    when_full: WhenFull,
    capacity: usize,
    #[cfg(tollgate_loom)]
    faults: LogFaults,
    /// Counts its decisions and its table's events once named (feature `metrics`).
    pub(crate) metering: Metering,
    key: PhantomData<fn(&K)>,
}

impl<K: Hash + ?Sized, L: LogQuota> KeyedLogLimiter<K, PreciseClock, L> {
    /// A limiter on the [`PreciseClock`], refusing new keys when full.
    /// Room for at least `capacity` keys still being limited; idle keys beyond it are kept until
    /// their slots are needed, up to [`slots`](Self::slots). (See [`capacity`](Self::capacity).)
    ///
    /// The slots are allocated here and each slot's log when the slot is first used, so memory
    /// grows up to [`max_memory`](Self::max_memory): check that against the memory the process
    /// may use. Only the address space is checked; a bound the machine cannot hold is not
    /// detected, and the process is killed for lack of memory when it gets there.
    ///
    /// # Errors
    /// [`CapacityError`] when `capacity` is zero, when the table (with a log of the limit in
    /// every slot) would not fit in the address space, or when the allocator refuses the slots.
    pub fn new(log: L, capacity: usize) -> Result<Self, CapacityError> {
        KeyedLogLimiter::with_clock(log, capacity, PreciseClock::new())
    }
}

/// The bytes one slot comes to with a log of `entries` allocated; `None` past the address
/// space.
pub(super) fn max_slot_bytes(entries: usize) -> Option<usize> {
    entries
        .checked_mul(8)
        .and_then(|ring| ring.checked_add(slot_bytes::<LogState>()))
}

impl<K: Hash + ?Sized, C: Clock, L: LogQuota> KeyedLogLimiter<K, C, L> {
    /// A limiter reading `clock`, refusing new keys when full.
    /// Room for at least `capacity` keys still being limited; idle keys beyond it are kept until
    /// their slots are needed, up to [`slots`](Self::slots). (See [`capacity`](Self::capacity).)
    ///
    /// The slots are allocated here and each slot's log when the slot is first used, so memory
    /// grows up to [`max_memory`](Self::max_memory): check that against the memory the process
    /// may use. Only the address space is checked; a bound the machine cannot hold is not
    /// detected, and the process is killed for lack of memory when it gets there.
    ///
    /// # Errors
    /// [`CapacityError`] when `capacity` is zero, when the table (with a log of the limit in
    /// every slot) would not fit in the address space, or when the allocator refuses the slots.
    pub fn with_clock(log: L, capacity: usize, clock: C) -> Result<Self, CapacityError> {
        let (shards, layout, entries) = {
            let current = log.current();
            // Every slot may end up with a full log: the bound must fit the address space.
            let slot_bytes = max_slot_bytes(current.entries()).ok_or(CapacityError::TooLarge { capacity })?;
            let layout = TableLayout::for_capacity(capacity, slot_bytes)?;
            let shards = (0..layout.shards())
                .map(|_| {
                    LockedShard::new(layout.slots_per_shard(), || current.unused())
                        .ok_or(CapacityError::TooLarge { capacity })
                })
                .collect::<Result<Vec<_>, _>>()?;
            (shards, layout, current.limit)
        };
        Ok(KeyedLogLimiter {
            shards: shards.into_boxed_slice(),
            layout,
            hasher: ahash::RandomState::new(),
            log,
            entries: AtomicU64::new(entries),
            clock,
            when_full: WhenFull::default(),
            capacity,
            #[cfg(tollgate_loom)]
            faults: LogFaults::NONE,
            metering: Metering::NONE,
            key: PhantomData,
        })
    }

    /// The same limiter with steps of its locking left out: loom's broken twins only.
    #[cfg(tollgate_loom)]
    #[doc(hidden)]
    pub fn with_faults(self, faults: LogFaults) -> Self {
        KeyedLogLimiter { faults, ..self }
    }

    decision_methods!(K);

    /// Forgets every admission recorded for `key`: its next request is decided as a new key's.
    /// Returns whether the key was still being limited now; an absent or idle key has nothing
    /// to forget (`false`). The emptied log's slot becomes free for another key, as an idle
    /// key's is. See [`KeyedLimiter::reset`](crate::KeyedLimiter::reset).
    pub fn reset(&self, key: &K) -> bool {
        self.reset_at(key, self.clock.now())
    }

    /// [`reset`](Self::reset), with "still being limited" judged at a time the caller supplies.
    pub fn reset_at(&self, key: &K, now: Timestamp) -> bool {
        let (shard, home, fingerprint) = self.locate(key);
        let log = self.log.current();
        shard.reset(&*log, fingerprint, home, now.as_nanos(), self.faults())
    }

    /// Keys held in the table (including idle ones not yet reused; a slot reused for another key
    /// counts once). Exact when no insert is in flight.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|shard| shard.live() as usize).sum()
    }

    /// Keys still being limited now: held keys whose log still records a unit inside the
    /// window. Locks and reads every used slot's log once, so it costs time in proportion to
    /// [`slots`](Self::slots): a metric to sample, not a per-request call. Logs that change
    /// meanwhile are counted as they were read.
    pub fn active(&self) -> usize {
        self.active_at(self.clock.now())
    }

    /// [`active`](Self::active) at a time the caller supplies.
    pub fn active_at(&self, now: Timestamp) -> usize {
        let log = self.log.current();
        self.shards
            .iter()
            .map(|shard| shard.busy(&*log, now.as_nanos()))
            .sum()
    }

    /// The number of keys the table was built for, as passed to [`new`](Self::new).
    /// Room for at least `capacity` keys still being limited; idle keys beyond it are kept until
    /// their slots are needed, up to [`slots`](Self::slots). Guaranteed as for
    /// [`KeyedLimiter::capacity`](crate::KeyedLimiter::capacity): whatever the keys in a table of
    /// at most 512 slots, as the hash's random seed allows in a larger one.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Slots in the table (each with a log of the limit once used).
    pub fn slots(&self) -> usize {
        self.shards.iter().map(LockedShard::len).sum()
    }

    /// The most memory the table can come to, in bytes: every slot with its log allocated (8
    /// bytes per unit of the limit, the largest it has had), as after enough distinct keys, and
    /// each shard's fixed block. Logs are allocated when a slot is first used, so a new table
    /// takes far less; a log that cannot be allocated then leaves its key to the [`WhenFull`]
    /// policy, never a panic. Check this figure against the machine before choosing a large
    /// limit and capacity together.
    pub fn max_memory(&self) -> usize {
        // Relaxed: a size, raised before a larger limit is published.
        let entries = usize::try_from(self.entries.load(Ordering::Relaxed)).unwrap_or(usize::MAX);
        max_slot_bytes(entries).map_or(usize::MAX, |bytes| {
            bytes.saturating_mul(self.slots()).saturating_add(
                self.shards
                    .len()
                    .saturating_mul(std::mem::size_of::<LockedShard<LogState>>()),
            )
        })
    }

    /// The log's configuration: a [`SlidingLog`], or a [`Live<SlidingLog>`](crate::Live)
    /// (read it with `current()`).
    pub fn algorithm(&self) -> &L {
        &self.log
    }

    #[inline(always)]
    pub(super) fn faults(&self) -> LogFaults {
        #[cfg(tollgate_loom)]
        return self.faults;
        #[cfg(not(tollgate_loom))]
        LogFaults::NONE
    }

    #[inline]
    pub(super) fn fits(&self, cost: u64) -> Result<(), CostTooLarge> {
        CostTooLarge::check(cost, self.log.current().limit)
    }

    /// The key's shard, home slot and fingerprint, as `KeyedLimiter` computes them.
    #[inline]
    pub(super) fn locate(&self, key: &K) -> (&LockedShard<LogState>, usize, u64) {
        let hash = self.hasher.hash_one(key);
        let shard = &self.shards[self.layout.shard(hash)];
        (
            shard,
            TableLayout::home(hash, shard.len()),
            TableLayout::fingerprint(hash),
        )
    }

    /// Decides and records `cost` units for `key` (inserting it if absent) at the time `now`
    /// gives, read before the key is hashed.
    #[inline]
    fn decide(&self, key: &K, now: impl FnOnce() -> Timestamp, cost: u64) -> Decision {
        let now = now();
        let (shard, home, fingerprint) = self.locate(key);
        let log = self.log.current();
        let _events = self.metering.table_events();
        let decided = shard.decide(&*log, fingerprint, home, now.as_nanos(), cost, self.faults());
        self.metering
            .counted(decided.unwrap_or_else(|| self.when_table_full(&log, shard, home, now, cost)))
    }

    /// What [`decide`](Self::decide) would answer, recording and inserting nothing.
    fn peek_decision(&self, key: &K, now: impl FnOnce() -> Timestamp, cost: u64) -> Decision {
        let now = now();
        let (shard, home, fingerprint) = self.locate(key);
        let log = self.log.current();
        shard
            .peek(&*log, fingerprint, home, now.as_nanos(), cost)
            .unwrap_or_else(|| self.when_table_full(&log, shard, home, now, cost))
    }

    #[cold]
    pub(super) fn when_table_full(
        &self,
        log: &SlidingLog,
        shard: &LockedShard<LogState>,
        home: usize,
        now: Timestamp,
        cost: u64,
    ) -> Decision {
        match self.when_full {
            WhenFull::Refuse => Decision::table_full(shard.soonest_room(log, home, now.as_nanos())),
            WhenFull::Admit => Decision::untracked(log.fresh(now.as_nanos(), cost)),
        }
    }
}

impl<K: ?Sized, C: fmt::Debug, L: fmt::Debug> fmt::Debug for KeyedLogLimiter<K, C, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedLogLimiter")
            .field("log", &self.log)
            .field("clock", &self.clock)
            .field("capacity", &self.capacity)
            .field("shards", &self.shards.len())
            .field("when_full", &self.when_full)
            .finish_non_exhaustive()
    }
}
