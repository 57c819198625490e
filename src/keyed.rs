//! Keyed limiters: one limiter per client (IP, API key, user) in a fixed-capacity, sharded,
//! lock-free table.

mod faults;
pub(crate) mod layout;
pub(crate) mod locked;
mod shard;
mod slot;
mod undo;
mod wide;

#[cfg(tollgate_loom)]
pub use faults::Faults;

use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;
use std::time::Duration;

use layout::TableLayout;
use locked::{slot_bytes, LockedShard, LogFaults, PerKey};
use shard::{Entry, Shard};
use slot::SLOT_BYTES;
use wide::WideStates;

use crate::algorithm::{steps, Algorithm, Transition, FRESH_STATE};
use crate::clock::{Clock, PreciseClock};
use crate::error::{CapacityError, CostTooLarge};
use crate::meter::{self, Metering};
use crate::time::duration_to_nanos_saturating;
use crate::{Decision, Timestamp};

/// What a keyed limiter does with a new key when every slot it could use holds a key that is
/// still being limited, or that it may not forget yet (none is
/// [reclaimable](Algorithm::is_reclaimable)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WhenFull {
    /// Refuse the request ([`Outcome::TableFull`](crate::Outcome::TableFull)): fail closed.
    /// No client gets more than its quota, but a new client waits for room.
    #[default]
    Refuse,
    /// Admit the request without tracking it
    /// ([`Outcome::AllowedUntracked`](crate::Outcome::AllowedUntracked)): fail open. New
    /// clients are served, unlimited, until room appears.
    Admit,
}

/// The decision methods of a keyed limiter, written once for [`KeyedLimiter`] and
/// [`KeyedLogLimiter`](crate::KeyedLogLimiter), inside each one's `impl<K: Hash + ?Sized, ..,
/// C: Clock>` (`$key` names its key type): `check`, `check_n`, `peek`, `peek_n`, each `_at` a
/// time the caller supplies, and `clock`, `when_full`, `full_policy`, `is_empty`. The limiter
/// has the fields `clock: C` and `when_full: WhenFull`, and four private methods:
///
/// - `fits(&self, cost: u64) -> Result<(), CostTooLarge>`: `cost` is at most the algorithm's
///   capacity;
/// - `decide(&self, key, now: impl FnOnce() -> Timestamp, cost: u64) -> Decision`: decides and
///   counts, inserting the key if it is absent, with the time `now` gives (read where the
///   limiter's decision path reads it: `KeyedLimiter` once the key's home slot is known);
/// - `peek_decision(..)`, with the same arguments: the same, counting and inserting nothing;
/// - `len(&self) -> usize`: the keys held.
///
/// Each method is the forwarding line it would be written by hand: the generated code is the
/// same (`docs/design.md`, "Sliding window log").
macro_rules! decision_methods {
    ($key:ty) => {
        /// Decides one request of weight 1 for `key` now, and counts it if admitted.
        #[inline]
        pub fn check(&self, key: &$key) -> $crate::Decision {
            self.decide(key, || self.clock.now(), 1)
        }

        /// Decides one request of weight `cost` for `key` now, and counts it if admitted.
        ///
        /// # Errors
        /// [`CostTooLarge`](crate::CostTooLarge) when `cost` exceeds the algorithm's capacity
        /// (the heaviest request it can ever pass; a log's limit). Nothing is inserted.
        #[inline]
        pub fn check_n(&self, key: &$key, cost: u64) -> Result<$crate::Decision, $crate::CostTooLarge> {
            self.fits(cost)?;
            Ok(self.decide(key, || self.clock.now(), cost))
        }

        /// What [`check`](Self::check) would answer now, without counting or inserting
        /// anything.
        #[inline]
        pub fn peek(&self, key: &$key) -> $crate::Decision {
            self.peek_decision(key, || self.clock.now(), 1)
        }

        /// What [`check_n`](Self::check_n) would answer now, without counting or inserting
        /// anything.
        ///
        /// # Errors
        /// [`CostTooLarge`](crate::CostTooLarge), as for `check_n`.
        #[inline]
        pub fn peek_n(&self, key: &$key, cost: u64) -> Result<$crate::Decision, $crate::CostTooLarge> {
            self.fits(cost)?;
            Ok(self.peek_decision(key, || self.clock.now(), cost))
        }

        /// [`check`](Self::check) at a time the caller supplies.
        #[inline]
        pub fn check_at(&self, key: &$key, now: $crate::Timestamp) -> $crate::Decision {
            // Every capacity is at least 1.
            self.decide(key, || now, 1)
        }

        /// [`check_n`](Self::check_n) at a time the caller supplies.
        ///
        /// # Errors
        /// [`CostTooLarge`](crate::CostTooLarge), as for `check_n`.
        #[inline]
        pub fn check_n_at(
            &self,
            key: &$key,
            cost: u64,
            now: $crate::Timestamp,
        ) -> Result<$crate::Decision, $crate::CostTooLarge> {
            self.fits(cost)?;
            Ok(self.decide(key, || now, cost))
        }

        /// [`peek`](Self::peek) at a time the caller supplies.
        #[inline]
        pub fn peek_at(&self, key: &$key, now: $crate::Timestamp) -> $crate::Decision {
            self.peek_decision(key, || now, 1)
        }

        /// [`peek_n`](Self::peek_n) at a time the caller supplies.
        ///
        /// # Errors
        /// [`CostTooLarge`](crate::CostTooLarge), as for `check_n`.
        #[inline]
        pub fn peek_n_at(
            &self,
            key: &$key,
            cost: u64,
            now: $crate::Timestamp,
        ) -> Result<$crate::Decision, $crate::CostTooLarge> {
            self.fits(cost)?;
            Ok(self.peek_decision(key, || now, cost))
        }

        /// The clock.
        pub fn clock(&self) -> &C {
            &self.clock
        }

        /// The same limiter with another policy for new keys when the table is full.
        pub fn when_full(self, policy: $crate::WhenFull) -> Self {
            Self {
                when_full: policy,
                ..self
            }
        }

        /// The policy for new keys when the table is full.
        pub fn full_policy(&self) -> $crate::WhenFull {
            self.when_full
        }

        /// Whether the table holds no key.
        pub fn is_empty(&self) -> bool {
            self.len() == 0
        }
    };
}
pub(crate) use decision_methods;

/// A rate limiter per key, for any `K: Hash + Eq` (`u64`, `IpAddr`, `str`, `[u8]`...).
///
/// Every key gets its own instance of the algorithm, all sharing one fixed-capacity table:
///
/// - deciding for a key already present is lock-free, allocates nothing, never clones or stores
///   the key (only a 53-bit fingerprint of its hash), and writes nothing but that key's slot;
/// - a new key claims a slot with one compare-and-swap (lock-free; two threads inserting the same
///   key end with one entry);
/// - memory never grows: the table is allocated once at construction (16 bytes a slot, about 23
///   bytes a key at full capacity). A key whose state has become idle (a full bucket, an expired
///   window; for a fixed window, one that ended a whole window ago:
///   [`Algorithm::is_reclaimable`]) is forgotten when a new key needs its slot, without any scan
///   or background thread; a key that still carries debt is never forgotten;
/// - when the table is full of keys it may not forget yet, a new key gets the [`WhenFull`]
///   policy chosen at construction.
///
/// Keys are hashed with ahash under a random seed chosen per limiter, so clients cannot aim their
/// keys at one shard or one probe chain.
///
/// A window whose limit does not fit one 64-bit word beside its window index keeps a 128-bit
/// state per key ([`Algorithm::is_wide`]), which does not fit beside a key's tag in a 16-byte
/// slot: its keys live in a table of 48-byte slots instead, each key's state behind a short lock
/// (taken for one read-decide-write; new keys inserted under their shard's lock), with the same
/// probing, reuse of idle keys and [`WhenFull`] policies (`docs/design.md`, "Wide states").
///
/// ```
/// use std::net::IpAddr;
/// use tollgate::{KeyedLimiter, ManualClock, TokenBucket};
///
/// let clock = ManualClock::new();
/// let limiter = KeyedLimiter::<IpAddr, _, _>::with_clock(TokenBucket::new("2/s".parse()?)?, 10_000, clock)?;
/// let alice: IpAddr = "192.0.2.1".parse()?;
/// let bob: IpAddr = "192.0.2.2".parse()?;
/// assert!(limiter.check(&alice).is_allowed());
/// assert!(limiter.check(&alice).is_allowed());
/// assert!(!limiter.check(&alice).is_allowed());
/// assert!(limiter.check(&bob).is_allowed()); // every key has its own quota
/// assert_eq!(limiter.len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct KeyedLimiter<K: ?Sized, A, C = PreciseClock> {
    /// The lock-free table of 16-byte slots; empty for a wide algorithm.
    shards: Box<[Shard]>,
    /// The locked table of a [wide](Algorithm::is_wide) algorithm's 128-bit states; empty for
    /// any other.
    wide: Box<[LockedShard<u128>]>,
    layout: TableLayout,
    hasher: ahash::RandomState,
    algorithm: A,
    clock: C,
    when_full: WhenFull,
    capacity: usize,
    /// Steps of the locked table's locking left out: loom's broken twins only.
    #[cfg(tollgate_loom)]
    locked_faults: LogFaults,
    /// Counts its decisions and its table's events once named (feature `metrics`).
    pub(crate) metering: Metering,
    key: PhantomData<fn(&K)>,
}

impl<K: Hash + ?Sized, A: Algorithm> KeyedLimiter<K, A, PreciseClock> {
    /// A limiter on the [`PreciseClock`], refusing new keys when full.
    /// Room for at least `capacity` keys still being limited; idle keys beyond it are kept until
    /// their slots are needed, up to [`slots`](Self::slots). (Whatever the keys in a table of at
    /// most 512 slots; for larger ones, what the randomly seeded hash guarantees:
    /// [`capacity`](Self::capacity).)
    ///
    /// The whole table is allocated and zeroed here, about 23 bytes per key (16 bytes a slot, 10
    /// slots for every 7 keys; a [wide](Algorithm::is_wide) state's slot is 48 bytes, about 69
    /// per key): check a configured capacity against the memory the process may
    /// use. A capacity the address space can hold but the machine cannot is not detected: with
    /// the usual memory overcommit the allocation succeeds and the process is killed for lack of
    /// memory while the table is zeroed.
    ///
    /// # Errors
    /// [`CapacityError`] when `capacity` is zero, when the table would not fit in the address
    /// space, or when the allocator refuses it.
    pub fn new(algorithm: A, capacity: usize) -> Result<Self, CapacityError> {
        KeyedLimiter::with_clock(algorithm, capacity, PreciseClock::new())
    }
}

impl<K: Hash + ?Sized, A: Algorithm, C: Clock> KeyedLimiter<K, A, C> {
    /// A limiter reading `clock`, refusing new keys when full.
    /// Room for at least `capacity` keys still being limited; idle keys beyond it are kept until
    /// their slots are needed, up to [`slots`](Self::slots). (Whatever the keys in a table of at
    /// most 512 slots; for larger ones, what the randomly seeded hash guarantees:
    /// [`capacity`](Self::capacity).)
    ///
    /// The whole table is allocated and zeroed here, about 23 bytes per key (16 bytes a slot, 10
    /// slots for every 7 keys; a [wide](Algorithm::is_wide) state's slot is 48 bytes, about 69
    /// per key): check a configured capacity against the memory the process may
    /// use. A capacity the address space can hold but the machine cannot is not detected: with
    /// the usual memory overcommit the allocation succeeds and the process is killed for lack of
    /// memory while the table is zeroed.
    ///
    /// # Errors
    /// [`CapacityError`] when `capacity` is zero, when the table would not fit in the address
    /// space, or when the allocator refuses it.
    pub fn with_clock(algorithm: A, capacity: usize, clock: C) -> Result<Self, CapacityError> {
        let too_large = || CapacityError::TooLarge { capacity };
        let (layout, shards, wide) = if algorithm.is_wide() {
            let layout = TableLayout::for_capacity(capacity, slot_bytes::<u128>())?;
            let wide = (0..layout.shards())
                .map(|_| {
                    LockedShard::new(layout.slots_per_shard(), || WideStates::new(&algorithm).unused())
                        .ok_or_else(too_large)
                })
                .collect::<Result<Vec<_>, _>>()?;
            (layout, Vec::new(), wide)
        } else {
            let layout = TableLayout::for_capacity(capacity, SLOT_BYTES)?;
            let shards = (0..layout.shards())
                .map(|_| Shard::new(layout.slots_per_shard()).ok_or_else(too_large))
                .collect::<Result<Vec<_>, _>>()?;
            (layout, shards, Vec::new())
        };
        Ok(KeyedLimiter {
            shards: shards.into_boxed_slice(),
            wide: wide.into_boxed_slice(),
            layout,
            hasher: ahash::RandomState::new(),
            algorithm,
            clock,
            when_full: WhenFull::default(),
            capacity,
            #[cfg(tollgate_loom)]
            locked_faults: LogFaults::NONE,
            metering: Metering::NONE,
            key: PhantomData,
        })
    }

    /// The same limiter with steps of its protocol left out: loom's broken twins only.
    #[cfg(tollgate_loom)]
    #[doc(hidden)]
    pub fn with_faults(mut self, faults: Faults) -> Self {
        for shard in self.shards.iter_mut() {
            shard.set_faults(faults);
        }
        self
    }

    /// The same limiter with steps of its locked table's locking left out (a wide algorithm's
    /// table): loom's broken twins only.
    #[cfg(tollgate_loom)]
    #[doc(hidden)]
    pub fn with_locked_faults(self, locked_faults: LogFaults) -> Self {
        KeyedLimiter {
            locked_faults,
            ..self
        }
    }

    decision_methods!(K);

    /// Gives back `cost` units admitted earlier for `key` and never used, unconditionally.
    /// Returns whether anything was given back; an absent key has nothing to give back. See
    /// [`DirectLimiter::refund_n`](crate::DirectLimiter::refund_n) for which algorithms can; a
    /// shaped request whose client left before its slot gives it back with
    /// [`refund_slot`](Self::refund_slot), which keeps the shaper's spacing.
    #[inline]
    pub fn refund_n(&self, key: &K, cost: u64) -> bool {
        self.refund_n_at(key, cost, self.clock.now())
    }

    /// [`refund_n`](Self::refund_n) at a time the caller supplies.
    pub fn refund_n_at(&self, key: &K, cost: u64, now: Timestamp) -> bool {
        // A wide state (a window's, a bucket's) gives nothing back: see `Algorithm::is_wide`.
        let Some((shard, home, fingerprint)) = self.locate(key) else {
            return false;
        };
        // A key moved away mid-update (reclaimed, so idle) is looked up again; once absent it
        // has nothing outstanding.
        while let Some(found) = shard.find(fingerprint, home) {
            let mut gave_back = false;
            let refund = |state| steps::refund(&self.algorithm, state, now, cost, &mut gave_back);
            if shard.update(found, refund).is_ok() {
                return gave_back;
            }
        }
        false
    }

    /// Forgets everything counted for `key`: its next request is decided as a new key's (a full
    /// bucket, empty windows). Returns whether the key was still being limited now; an absent or
    /// idle key has nothing to forget (`false`). The key's slot becomes free for another key,
    /// as an idle key's is.
    ///
    /// For an operator's or an application's decision (a user who logged in successfully, a
    /// client unblocked by hand), not for the request path. A decision racing it is counted
    /// either before the reset (and forgotten) or after it (and kept).
    ///
    /// A slot admitted before the reset must not be given back after it with
    /// [`refund_slot`](Self::refund_slot): its end names no slot any more, and when a slot
    /// admitted after the reset ends at the same instant (one time base, a coarse or manual
    /// clock), that slot is given back instead, and two requests are given the same instant.
    pub fn reset(&self, key: &K) -> bool {
        self.reset_at(key, self.clock.now())
    }

    /// [`reset`](Self::reset), with "still being limited" judged at a time the caller supplies.
    pub fn reset_at(&self, key: &K, now: Timestamp) -> bool {
        let Some((shard, home, fingerprint)) = self.locate(key) else {
            return match self.locate_wide(key) {
                Some((shard, home, fingerprint)) => shard.reset(
                    &WideStates::new(&self.algorithm),
                    fingerprint,
                    home,
                    now.as_nanos(),
                    self.locked_faults(),
                ),
                None => false,
            };
        };
        // As in `refund_n_at`: a key moved away mid-update was reclaimed, so idle; it is looked
        // up again, and once absent there is nothing to forget.
        while let Some(found) = shard.find(fingerprint, home) {
            let mut limiting = false;
            let reset = |state| steps::reset(&self.algorithm, state, now, &mut limiting);
            if shard.update(found, reset).is_ok() {
                return limiting;
            }
        }
        false
    }

    /// [`check_n`](Self::check_n) for a request that will wait at most `max_delay` for its
    /// slot: see [`DirectLimiter::check_n_within`](crate::DirectLimiter::check_n_within).
    ///
    /// # Errors
    /// [`CostTooLarge`], as for `check_n`. Nothing is inserted.
    #[inline]
    pub fn check_n_within(&self, key: &K, cost: u64, max_delay: Duration) -> Result<Decision, CostTooLarge> {
        self.fits(cost)?;
        Ok(self.decide_within(key, || self.clock.now(), cost, max_delay).0)
    }

    /// [`check_n_within`](Self::check_n_within) at a time the caller supplies.
    ///
    /// # Errors
    /// [`CostTooLarge`], as for `check_n`. Nothing is inserted.
    #[inline]
    pub fn check_n_within_at(
        &self,
        key: &K,
        cost: u64,
        max_delay: Duration,
        now: Timestamp,
    ) -> Result<Decision, CostTooLarge> {
        self.fits(cost)?;
        Ok(self.decide_within(key, || now, cost, max_delay).0)
    }

    /// [`check_n_within`](Self::check_n_within) (or [`check_n`](Self::check_n) when `max_delay`
    /// is `None`), with the end of the slot an admission was given, for
    /// [`refund_slot`](Self::refund_slot): see
    /// [`DirectLimiter::check_slot`](crate::DirectLimiter::check_slot). The end is computed
    /// from the very time the decision read, once.
    ///
    /// # Errors
    /// [`CostTooLarge`], as for `check_n`.
    pub fn check_slot(
        &self,
        key: &K,
        cost: u64,
        max_delay: Option<Duration>,
    ) -> Result<(Decision, Option<Timestamp>), CostTooLarge> {
        self.fits(cost)?;
        let now = || self.clock.now();
        let (decision, now) = match max_delay {
            Some(max) => self.decide_within(key, now, cost, max),
            None => self.decide_timed(key, now, cost),
        };
        Ok((decision, decision.slot_end(now)))
    }

    /// Gives back the slot of `cost` units for `key` that ended its queue at `end`, only if it
    /// still does; returns whether anything was given back. An absent key has nothing to give
    /// back. See [`DirectLimiter::refund_slot`](crate::DirectLimiter::refund_slot): this is
    /// the shaper's refund, which never lets two requests of a key leave less than one interval
    /// apart.
    #[inline]
    pub fn refund_slot(&self, key: &K, cost: u64, end: Timestamp) -> bool {
        self.refund_slot_at(key, cost, end, self.clock.now())
    }

    /// [`refund_slot`](Self::refund_slot) at a time the caller supplies.
    pub fn refund_slot_at(&self, key: &K, cost: u64, end: Timestamp, now: Timestamp) -> bool {
        // A wide state (a window's, a bucket's) gives nothing back: see `Algorithm::is_wide`.
        let Some((shard, home, fingerprint)) = self.locate(key) else {
            return false;
        };
        // As `refund_n_at`: a key moved away mid-update is looked up again.
        while let Some(found) = shard.find(fingerprint, home) {
            let mut gave_back = false;
            let refund = |state| {
                let after = self.algorithm.refund_slot(state, now, cost, end);
                steps::given_back(state, after, &mut gave_back)
            };
            if shard.update(found, refund).is_ok() {
                return gave_back;
            }
        }
        false
    }

    /// Keys currently held in the table, including idle ones not yet reclaimed. Exact when no
    /// insert is in flight; while inserts race it may be off by the number in flight (it is
    /// never above the number of slots). Constant time.
    ///
    /// Idle keys stay until a new key needs their slot, so once many more keys have come and
    /// gone than the table holds, `len()` stays near [`slots`](Self::slots): to count the keys
    /// still being limited, use [`active`](Self::active).
    pub fn len(&self) -> usize {
        let narrow: usize = self.shards.iter().map(|shard| shard.live() as usize).sum();
        let wide: usize = self.wide.iter().map(|shard| shard.live() as usize).sum();
        narrow + wide
    }

    /// Keys still being limited now: held keys whose state is not yet the same as a fresh key's
    /// (a bucket not yet full again, a count still in its window). Reads every slot once, so it
    /// costs time in proportion to [`slots`](Self::slots) (2.4 ms for a table built for
    /// 1,000,000 keys on the machine of `docs/benchmarks.md`, section "Churn"): a metric to
    /// sample, not a per-request call. Slots that change meanwhile are counted as they were
    /// read.
    pub fn active(&self) -> usize {
        self.active_at(self.clock.now())
    }

    /// [`active`](Self::active) at a time the caller supplies.
    pub fn active_at(&self, now: Timestamp) -> usize {
        let narrow: usize = self
            .shards
            .iter()
            .map(|shard| shard.busy(|state| self.algorithm.is_idle(state, now)))
            .sum();
        let states = WideStates::new(&self.algorithm);
        let wide: usize = self
            .wide
            .iter()
            .map(|shard| shard.busy(&states, now.as_nanos()))
            .sum();
        narrow + wide
    }

    /// The number of keys the table was built for, as passed to [`new`](Self::new).
    /// Room for at least `capacity` keys still being limited; idle keys beyond it are kept until
    /// their slots are needed, up to [`slots`](Self::slots).
    ///
    /// A key is stored within 512 slots of its home, in its shard, and the table has 10 slots for
    /// every 7 keys of capacity. So a table of at most 512 slots (a capacity up to 358) holds
    /// `capacity` keys still being limited whatever they are. A larger one places keys by a hash
    /// with a seed drawn for each limiter, which clients cannot aim at: it holds them unless that
    /// seed puts far more of them in one shard, or in one run of 512 slots, than the load of 0.7
    /// does on average (about `e^-33` for a key at that load; `tests/keyed/capacity.rs` fills tables for
    /// 1 to 200,000 keys under many seeds, and every key finds room). Keys chosen by someone who
    /// knew the hash seed could fill one home's 512 slots and be refused past them: `docs/design.md`,
    /// "Capacity".
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Slots in the table (16 bytes each; 48 for a [wide](Algorithm::is_wide) state).
    pub fn slots(&self) -> usize {
        self.shards.iter().map(Shard::len).sum::<usize>()
            + self.wide.iter().map(LockedShard::len).sum::<usize>()
    }

    /// The algorithm and its parameters.
    pub fn algorithm(&self) -> &A {
        &self.algorithm
    }

    #[inline]
    fn fits(&self, cost: u64) -> Result<(), CostTooLarge> {
        CostTooLarge::check(cost, self.algorithm.capacity())
    }

    /// The key's shard, home slot and fingerprint; `None` for a [wide](Algorithm::is_wide)
    /// algorithm, which has no 64-bit shard (its keys are in `wide`: [`locate_wide`]). Finding
    /// that out is the bounds check indexing the shards makes anyway, so the 64-bit table's
    /// decisions run the instructions they ran before there were wide states.
    ///
    /// [`locate_wide`]: Self::locate_wide
    #[inline]
    fn locate(&self, key: &K) -> Option<(&Shard, usize, u64)> {
        let hash = self.hasher.hash_one(key);
        let shard = self.shards.get(self.layout.shard(hash))?;
        Some((
            shard,
            TableLayout::home(hash, shard.len()),
            TableLayout::fingerprint(hash),
        ))
    }

    /// [`locate`](Self::locate) in the locked table of a wide algorithm; `None` for any other.
    fn locate_wide(&self, key: &K) -> Option<(&LockedShard<u128>, usize, u64)> {
        let hash = self.hasher.hash_one(key);
        let shard = self.wide.get(self.layout.shard(hash))?;
        Some((
            shard,
            TableLayout::home(hash, shard.len()),
            TableLayout::fingerprint(hash),
        ))
    }

    #[inline(always)]
    fn locked_faults(&self) -> LogFaults {
        #[cfg(tollgate_loom)]
        return self.locked_faults;
        #[cfg(not(tollgate_loom))]
        LogFaults::NONE
    }

    /// The decision path: one lookup and one CAS loop, small enough to inline; everything
    /// else (a new key, a full table, a slot given away mid-decision) is out of line. `now`
    /// reads the time (the clock, or a time the caller supplied).
    #[inline]
    fn decide(&self, key: &K, now: impl FnOnce() -> Timestamp, cost: u64) -> Decision {
        self.decide_timed(key, now, cost).0
    }

    /// [`decide`](Self::decide), with the time it was decided at.
    #[inline]
    fn decide_timed(&self, key: &K, now: impl FnOnce() -> Timestamp, cost: u64) -> (Decision, Timestamp) {
        self.metering
            .counted_at(self.decide_by(key, now, cost, u64::MAX, |state, now| {
                self.algorithm.decide(state, now, cost)
            }))
    }

    /// [`decide`](Self::decide) for a request that waits at most `max_delay`, with the time it
    /// was decided at.
    #[inline]
    fn decide_within(
        &self,
        key: &K,
        now: impl FnOnce() -> Timestamp,
        cost: u64,
        max_delay: Duration,
    ) -> (Decision, Timestamp) {
        let max_delay = duration_to_nanos_saturating(max_delay);
        self.metering
            .counted_at(self.decide_by(key, now, cost, max_delay, |state, now| {
                self.algorithm.decide_within(state, now, cost, max_delay)
            }))
    }

    /// A decision for `key` with `decide` as the algorithm's step on the hot path: the
    /// algorithm's `decide_within(.., max_delay)`, which `decide` is for `max_delay = u64::MAX`
    /// (no wait is longer). The slow path rebuilds that step from `max_delay`, a plain integer:
    /// handing it the closure itself would keep `now` and `cost` in memory on the hot path (12
    /// more instructions per hot-key decision, counted with callgrind). Returns the decision
    /// and the time `now` gave.
    ///
    /// The time is read once the key's home slot is known and before that slot is loaded: a
    /// decision needs it only for the algorithm's step, and finding the home (the hash, the
    /// shard, its length) is a chain of dependent loads that the read held back when it came
    /// first; read after the slot's load, it sat between that load and the CAS and lost more
    /// CASes to a contended key (`docs/design.md`, "Performance notes").
    #[inline(always)]
    fn decide_by(
        &self,
        key: &K,
        now: impl FnOnce() -> Timestamp,
        cost: u64,
        max_delay: u64,
        decide: impl Fn(u64, Timestamp) -> Transition,
    ) -> (Decision, Timestamp) {
        let Some((shard, home, fingerprint)) = self.locate(key) else {
            let now = now();
            return (self.decide_wide(key, now, cost, max_delay), now);
        };
        let now = now();
        if let Some(found) = shard.find(fingerprint, home) {
            if let Ok(decision) = shard.update(found, |state| decide(state, now)) {
                return (decision, now);
            }
        }
        (
            self.decide_slow(shard, home, fingerprint, now, cost, max_delay),
            now,
        )
    }

    #[cold]
    #[inline(never)]
    fn decide_slow(
        &self,
        shard: &Shard,
        home: usize,
        fingerprint: u64,
        now: Timestamp,
        cost: u64,
        max_delay: u64,
    ) -> Decision {
        let decide = |state| self.algorithm.decide_within(state, now, cost, max_delay);
        // A weightless request counts nothing. Here the key is absent, or its slot was just
        // reclaimed (which only an idle key's is, whose state decides as a fresh one's): it is
        // told what a fresh key would be, and takes no slot (nor a refusal when there is none).
        if cost == 0 {
            return decide(FRESH_STATE).decision;
        }
        let _events = self.metering.table_events();
        loop {
            match shard.find_or_insert(
                fingerprint,
                home,
                |state| self.algorithm.is_reclaimable(state, now),
                decide,
            ) {
                Entry::Member(found) => {
                    if let Ok(decision) = shard.update(found, decide) {
                        return decision;
                    }
                }
                Entry::Decided(decision) => return meter::inserted(decision),
                Entry::Full => return self.when_table_full(shard, home, now, cost),
            }
        }
    }

    /// [`decide`](Self::decide) for a [wide](Algorithm::is_wide) algorithm, in its locked
    /// table: the key's state locked, decided for a request that waits at most `max_delay` ns
    /// ([`Algorithm::decide_within_wide`]) and stored, a new key inserted under its shard's
    /// insert lock.
    #[cold]
    #[inline(never)]
    fn decide_wide(&self, key: &K, now: Timestamp, cost: u64, max_delay: u64) -> Decision {
        let _events = self.metering.table_events();
        let states = WideStates::within(&self.algorithm, max_delay);
        let Some((shard, home, fingerprint)) = self.locate_wide(key) else {
            // Never: an algorithm has one table or the other. A table without slots has no
            // room.
            return self.when_no_slot(now, cost);
        };
        let decided = shard.decide(
            &states,
            fingerprint,
            home,
            now.as_nanos(),
            cost,
            self.locked_faults(),
        );
        decided.unwrap_or_else(|| self.when_wide_table_full(shard, home, now, cost))
    }

    /// [`peek_decision`](Self::peek_decision) for a wide algorithm.
    #[cold]
    #[inline(never)]
    fn peek_wide(&self, key: &K, now: Timestamp, cost: u64) -> Decision {
        let states = WideStates::new(&self.algorithm);
        let Some((shard, home, fingerprint)) = self.locate_wide(key) else {
            return self.when_no_slot(now, cost);
        };
        let peeked = shard.peek(&states, fingerprint, home, now.as_nanos(), cost);
        peeked.unwrap_or_else(|| self.when_wide_table_full(shard, home, now, cost))
    }

    /// What a decision would answer, the time read where [`decide_by`](Self::decide_by) reads
    /// it.
    fn peek_decision(&self, key: &K, now: impl FnOnce() -> Timestamp, cost: u64) -> Decision {
        let Some((shard, home, fingerprint)) = self.locate(key) else {
            return self.peek_wide(key, now(), cost);
        };
        let now = now();
        let found = shard.find(fingerprint, home);
        match found {
            Some(found) => self.algorithm.decide(found.slot.state, now, cost).decision,
            // Absent: what a fresh key gets, if the key would find room.
            // A weightless request needs no room (see `decide_slow`).
            None if cost == 0 || shard.has_room(home, |state| self.algorithm.is_reclaimable(state, now)) => {
                self.algorithm.decide(FRESH_STATE, now, cost).decision
            }
            None => self.when_table_full(shard, home, now, cost),
        }
    }

    #[cold]
    fn when_table_full(&self, shard: &Shard, home: usize, now: Timestamp, cost: u64) -> Decision {
        match self.when_full {
            WhenFull::Refuse => Decision::table_full(shard.soonest_room(home, |state| {
                duration_to_nanos_saturating(self.algorithm.reclaimable_in(state, now))
            })),
            WhenFull::Admit => Decision::untracked(self.algorithm.decide(FRESH_STATE, now, cost).decision),
        }
    }

    /// [`when_table_full`](Self::when_table_full) in a wide algorithm's locked table.
    #[cold]
    fn when_wide_table_full(
        &self,
        shard: &LockedShard<u128>,
        home: usize,
        now: Timestamp,
        cost: u64,
    ) -> Decision {
        let states = WideStates::new(&self.algorithm);
        match self.when_full {
            WhenFull::Refuse => Decision::table_full(shard.soonest_room(&states, home, now.as_nanos())),
            WhenFull::Admit => Decision::untracked(states.fresh(now.as_nanos(), cost)),
        }
    }

    /// The full-table policy's answer where a key has no slot to look for (see
    /// [`decide_wide`](Self::decide_wide)): no room, and none to come.
    #[cold]
    fn when_no_slot(&self, now: Timestamp, cost: u64) -> Decision {
        match self.when_full {
            WhenFull::Refuse => Decision::table_full(u64::MAX),
            WhenFull::Admit => {
                Decision::untracked(WideStates::new(&self.algorithm).fresh(now.as_nanos(), cost))
            }
        }
    }
}

impl<K: ?Sized, A: fmt::Debug, C: fmt::Debug> fmt::Debug for KeyedLimiter<K, A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedLimiter")
            .field("algorithm", &self.algorithm)
            .field("clock", &self.clock)
            .field("capacity", &self.capacity)
            .field("shards", &(self.shards.len() + self.wide.len()))
            .field("when_full", &self.when_full)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;
    use crate::{LeakyBucket, Quota};

    /// A clock one microsecond later at every read.
    struct Stepping(AtomicU64);

    impl Clock for Stepping {
        fn now(&self) -> Timestamp {
            Timestamp::from_nanos(self.0.fetch_add(1_000, Ordering::Relaxed))
        }
    }

    /// `check_slot` names the slot its own decision stored, on a clock that moves at every read:
    /// the end is computed from the time the decision read (once, during the lookup), so the
    /// shaper's refund finds that slot. An end computed from a second read would be a
    /// microsecond off, and the refund would give nothing back.
    #[test]
    fn a_slot_end_is_the_one_its_decision_stored() {
        let quota = Quota::per_second(10)
            .and_then(|quota| quota.with_burst(5))
            .unwrap();
        let shaper = LeakyBucket::new(quota).unwrap();
        let limiter = KeyedLimiter::with_clock(shaper, 4, Stepping(AtomicU64::new(1 << 40))).unwrap();
        for max_delay in [None, Some(Duration::from_secs(1))] {
            let ends: Vec<Timestamp> = (0..3)
                .map(|_| {
                    let (decision, end) = limiter.check_slot(&7, 1, max_delay).unwrap();
                    assert!(decision.is_allowed(), "{max_delay:?}");
                    end.expect("an admission names its slot")
                })
                .collect();
            // Given back from the last: each is where the key's queue ends at that point.
            for end in ends.iter().rev() {
                assert!(limiter.refund_slot(&7, 1, *end), "{max_delay:?}: {end:?}");
            }
        }
    }
}
