//! Every key's lease in this process: the locked keyed table (`src/keyed/locked.rs`), each
//! key's [`Held`] behind the key's own lock, held for one spend or one install.
//!
//! A key's state is 13 integers (more than the lock-free table's 64-bit slot holds), and the
//! spend and the install are each one read-decide-write of all of them: a short lock per key,
//! as the keyed sliding log and the wide states take. A spend (`LeaseTable::spend`) decides and
//! stores under one acquisition; an install (`LeaseTable::install`) applies the reply to the
//! state as it is when the reply comes (not as it was when the ask left: spends happen
//! meanwhile), under the slot's lock and after checking that the slot is still the key's. A key
//! with units left or an ask in flight is never reused for another key.

use std::cell::Cell;

use super::{Ask, GiveBack, Grant, Held, LeaseFaults, LeaseRule, Sizing, Spend};
use crate::error::CapacityError;
use crate::keyed::layout::TableLayout;
use crate::keyed::locked::{slot_bytes, LockedShard, PerKey};
use crate::Decision;

/// One key's value in the table: its lease, and its client key (kept from the first install,
/// to give the lease back: `LeaseTable::give_back`).
#[derive(Debug, Default)]
pub(crate) struct KeyLease {
    held: Held,
    key: Option<Box<str>>,
}

/// The leases of up to `capacity` keys.
#[derive(Debug)]
pub struct LeaseTable {
    shards: Box<[LockedShard<KeyLease>]>,
    layout: TableLayout,
    hasher: ahash::RandomState,
    rule: LeaseRule,
    sizing: Sizing,
    #[cfg(tollgate_loom)]
    faults: LeaseFaults,
}

/// One call's view of the table's values (`PerKey`): `now` is the local time in µs, and what a
/// spend concluded is kept here (the table's decision type carries only a `Decision`).
struct Call<'a> {
    rule: &'a LeaseRule,
    sizing: &'a Sizing,
    /// Whether a spend that needs a round trip stores its ask (`false`: it stores nothing,
    /// and the caller asks later through the committing path).
    commits_asks: bool,
    outcome: Cell<Option<Spend>>,
}

/// What the table's `Decision` stands for while the outcome is in [`Call::outcome`].
const PLACEHOLDER: Decision = Decision::allowed(0, 0, 0);

impl PerKey for Call<'_> {
    type Value = KeyLease;
    type Change = Held;

    fn unused(&self) -> KeyLease {
        KeyLease::default()
    }

    fn prepare(&self, _: &mut KeyLease) -> bool {
        // Nothing to allocate before the first install.
        true
    }

    fn forget(&self, value: &mut KeyLease) {
        *value = KeyLease::default();
    }

    fn is_idle(&self, value: &KeyLease, now: u64) -> bool {
        self.rule.is_idle(&value.held, self.sizing, now)
    }

    fn is_reclaimable(&self, value: &KeyLease, now: u64) -> bool {
        self.is_idle(value, now)
    }

    fn reclaimable_in(&self, value: &KeyLease, now: u64) -> u64 {
        // Only a new key refused for a full table asks this, and a leased limiter decides such
        // a key through Redis instead.
        if self.is_idle(value, now) {
            0
        } else {
            u64::MAX
        }
    }

    fn decide(&self, value: &KeyLease, now: u64, cost: u64) -> (Decision, Option<Held>) {
        let mut held = value.held;
        let spend = self.rule.spend(&mut held, self.sizing, now, cost);
        let stores = held != value.held && (self.commits_asks || !matches!(spend, Spend::Ask(_)));
        self.outcome.set(Some(spend));
        (PLACEHOLDER, stores.then_some(held))
    }

    fn apply(&self, value: &mut KeyLease, change: &Held, _: u64) {
        value.held = *change;
    }

    fn fresh(&self, _: u64, cost: u64) -> Decision {
        // A weightless request for a key this process holds nothing of: Redis answers.
        self.outcome.set(Some(direct_ask(cost)));
        PLACEHOLDER
    }
}

/// A round trip for the request alone, with nothing held for its key.
fn direct_ask(cost: u64) -> Spend {
    Spend::Ask(Ask {
        cost,
        want: cost,
        sized: false,
        #[cfg(tollgate_loom)]
        snapshot: Held::default(),
    })
}

impl LeaseTable {
    /// A table for `capacity` keys, leasing by `rule`, sized by `sizing`.
    ///
    /// # Errors
    /// [`CapacityError`] for a capacity of 0 or one past memory.
    pub fn new(rule: LeaseRule, sizing: Sizing, capacity: usize) -> Result<LeaseTable, CapacityError> {
        let layout = TableLayout::for_capacity(capacity, slot_bytes::<KeyLease>())?;
        let shards = (0..layout.shards())
            .map(|_| LockedShard::new(layout.slots_per_shard(), KeyLease::default))
            .collect::<Option<Box<[_]>>>()
            .ok_or(CapacityError::TooLarge { capacity })?;
        Ok(LeaseTable {
            shards,
            layout,
            hasher: ahash::RandomState::new(),
            rule,
            sizing,
            #[cfg(tollgate_loom)]
            faults: LeaseFaults::NONE,
        })
    }

    /// The same table with steps of its protocol left out (the loom models' broken twins).
    #[cfg(tollgate_loom)]
    pub fn with_faults(self, faults: LeaseFaults) -> LeaseTable {
        LeaseTable { faults, ..self }
    }

    #[inline(always)]
    fn faults(&self) -> LeaseFaults {
        #[cfg(tollgate_loom)]
        return self.faults;
        #[cfg(not(tollgate_loom))]
        LeaseFaults::NONE
    }

    /// The hash a key's bytes are found by.
    #[inline]
    pub fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// How the leases are spent.
    pub fn rule(&self) -> &LeaseRule {
        &self.rule
    }

    /// How the leases are sized.
    pub fn sizing(&self) -> &Sizing {
        &self.sizing
    }

    #[inline]
    fn locate(&self, hash: u64) -> (&LockedShard<KeyLease>, usize, u64) {
        let shard = &self.shards[self.layout.shard(hash)];
        (
            shard,
            TableLayout::home(hash, shard.len()),
            TableLayout::fingerprint(hash),
        )
    }

    fn call(&self, commits_asks: bool) -> Call<'_> {
        Call {
            rule: &self.rule,
            sizing: &self.sizing,
            commits_asks,
            outcome: Cell::new(None),
        }
    }

    /// Spends a request of weight `cost` at local time `local` (µs) from the lease of the key
    /// whose hash is `hash`, inserting the key if new. A key that finds no room in a full table
    /// holds nothing here: Redis decides its every request.
    #[inline]
    pub fn spend(&self, hash: u64, local: u64, cost: u64) -> Spend {
        let (shard, home, fingerprint) = self.locate(hash);
        let call = self.call(true);
        match shard.decide(&call, fingerprint, home, local, cost, self.faults().table()) {
            Some(_) => call.outcome.take().unwrap_or_else(|| direct_ask(cost)),
            None => direct_ask(cost),
        }
    }

    /// [`spend`](Self::spend) when it decides without a round trip; `None`, with nothing
    /// stored, when it needs one (the caller then spends through `spend`, which asks). The tower
    /// layer's synchronous path.
    #[cfg_attr(not(any(feature = "tower", tollgate_loom)), allow(dead_code))]
    #[inline]
    pub fn spend_locally(&self, hash: u64, local: u64, cost: u64) -> Option<Spend> {
        let (shard, home, fingerprint) = self.locate(hash);
        let call = self.call(false);
        let _placeholder = shard.decide(&call, fingerprint, home, local, cost, self.faults().table())?;
        match call.outcome.take()? {
            Spend::Ask(_) => None,
            spend => Some(spend),
        }
    }

    /// What [`spend`](Self::spend) would conclude, changing nothing (no refresh is started).
    pub fn peek(&self, hash: u64, local: u64, cost: u64) -> Spend {
        let (shard, home, fingerprint) = self.locate(hash);
        let call = self.call(false);
        match shard.peek(&call, fingerprint, home, local, cost) {
            Some(_) => match call.outcome.take() {
                Some(Spend::Lease { decision, .. }) => Spend::Lease {
                    decision,
                    refresh: None,
                },
                Some(Spend::Refused { decision }) => Spend::Refused { decision },
                _ => direct_ask(cost),
            },
            None => direct_ask(cost),
        }
    }

    /// Installs the script's answer to `ask` for `key` (whose hash is `hash`), sent at local
    /// time `sent` and read at local time `local`, if the table still holds the key: the units
    /// granted that this process will never spend (counted as given up), or `None` when the key
    /// is not held (the grant's lease passes unused).
    pub fn install(
        &self,
        hash: u64,
        key: &str,
        ask: &Ask,
        grant: &Grant,
        sent: u64,
        local: u64,
    ) -> Option<u64> {
        let (shard, home, fingerprint) = self.locate(hash);
        let faults = self.faults();
        shard.with_key(fingerprint, home, faults.table(), |value| {
            #[cfg(tollgate_loom)]
            if faults.installs_from_snapshot() {
                value.held = ask.snapshot;
            }
            let unused = self
                .rule
                .install(&mut value.held, ask, grant, sent, local, &self.sizing);
            if value.key.as_deref() != Some(key) {
                value.key = Some(key.into());
            }
            unused
        })
    }

    /// Ends the key's sized ask without a reply (Redis did not answer, or the caller left):
    /// another ask may start.
    pub fn abandon(&self, hash: u64) {
        let (shard, home, fingerprint) = self.locate(hash);
        let _ = shard.with_key(fingerprint, home, self.faults().table(), |value| {
            value.held.asking = false;
        });
    }

    /// Forgets the key's lease (a reset): whether it held anything.
    pub fn forget(&self, hash: u64, local: u64) -> bool {
        let (shard, home, fingerprint) = self.locate(hash);
        shard.reset(&self.call(false), fingerprint, home, local, self.faults().table())
    }

    /// Takes out of every key's lease what can still go back to Redis at local time `local`
    /// (see [`LeaseRule::give_back`]), so that nothing spends it: each key's client key and
    /// what to give back.
    pub fn give_back(&self, local: u64) -> Vec<(Box<str>, GiveBack)> {
        let mut given = Vec::new();
        for shard in self.shards.iter() {
            shard.visit(|value| {
                if let Some(key) = value.key.as_ref() {
                    if let Some(back) = self.rule.give_back(&mut value.held, &self.sizing, local) {
                        given.push((key.clone(), back));
                    }
                }
            });
        }
        given
    }

    /// The units every key's lease can still spend at local time `local`.
    pub fn units(&self, local: u64) -> u64 {
        let mut units = 0;
        for shard in self.shards.iter() {
            shard.visit(|value| units += self.rule.units(&value.held, &self.sizing, local));
        }
        units
    }

    /// The key's lease as this process holds it (for tests and the loom models).
    #[cfg(any(test, tollgate_loom))]
    pub fn held(&self, hash: u64) -> Option<Held> {
        let (shard, home, fingerprint) = self.locate(hash);
        shard.with_key(fingerprint, home, self.faults().table(), |value| value.held)
    }
}
