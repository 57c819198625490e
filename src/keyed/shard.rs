//! One shard of the keyed table: a fixed array of slots searched by linear probing, and the
//! lock-free protocol that inserts, settles and reclaims keys in it.
//!
//! # The protocol
//! A key lives in at most one `Member` slot, found by probing from its home slot until the key,
//! the first `Empty` slot, or the home's *reach*, whichever comes first. Slots never become
//! `Empty` again and reaches never shrink, so probe chains never break.
//!
//! - **Deciding** for a present key is one 128-bit compare-and-swap that keeps the tag (status
//!   and fingerprint) and changes the state: it fails, and the key is looked up again, if the slot
//!   was given to another key in between. No key is ever charged for another key's request.
//! - **Inserting** a key whose home is used claims one slot with a CAS, from `Empty`, `Dead`, or
//!   a `Member` whose state is idle (indistinguishable from a fresh key's), into `Inserting` with
//!   a unique nonce.
//!   Then the key is *settled*: the claims of one key race, and exactly one becomes `Member`.
//!   A claim further from the key's home than the home's reach first raises that reach (a CAS
//!   on the home slot that changes nothing else), so that every scan that begins after the
//!   claim covers it, however many idle or dead slots the chain has collected.
//! - **At an empty home** a key needs no claim: one CAS from `Empty` makes it a `Member` with
//!   the inserter's request applied. A slot is `Empty` only until its first write, and a scan for
//!   a key looks past its home only when the home is used, so no other claim or member of the key
//!   can exist when that CAS succeeds (`docs/design.md`, "An empty home").
//! - **Settling** scans the key's chain: if a `Member` exists, every `Inserting` claim of the key
//!   is killed (`Dead`) and the member is used. Otherwise the earliest claim in probe order wins:
//!   the later ones are killed, and the earliest is promoted to `Member`, but only by a scan that
//!   began after that claim was first seen and whose kills all succeeded. Anyone may settle
//!   (inserters help each other), so no thread ever waits for another, and whoever promotes
//!   applies its own request in the promoting CAS, so every promotion completes a request: the
//!   table is lock-free.
//!
//! Why at most one `Member` per key: `docs/design.md`, "The keyed table". The insert path uses
//! `SeqCst` (the argument needs one total order of claims, scans and promotions); the decision
//! path uses `Relaxed` (the 128-bit CAS covers identity and state together).

use crossbeam_utils::CachePadded;

use super::faults::Faults;
use super::slot::{Slot, Status, MAX_REACH};
use crate::algorithm::{Transition, FRESH_STATE};
use crate::sync::{yield_to_others, AtomicU128, AtomicU64, Ordering};
use crate::Decision;

/// The longest probe sequence: a key is stored within this many slots of its home.
pub(crate) const MAX_PROBE: usize = 512;
// Every displacement within the probe limit fits in a slot's reach.
const _: () = assert!(MAX_PROBE - 1 <= MAX_REACH);

/// Counters written only on the insert path, on their own cache line.
#[derive(Debug)]
struct ShardMeta {
    /// Slots in `Member` status, as a wrapping signed count: it is adjusted just before or just
    /// after the CAS it accounts for, so a reader racing those can see it one off, or below 0.
    live: AtomicU64,
    /// Source of claim nonces, so that no two claims are ever the same word.
    claims: AtomicU64,
}

/// A fixed array of slots and its counters.
#[derive(Debug)]
pub(crate) struct Shard {
    meta: CachePadded<ShardMeta>,
    slots: Box<[AtomicU128]>,
    #[cfg(tollgate_loom)]
    faults: Faults,
}

/// Where a key's state lives: the slot index and the word last read there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) index: usize,
    pub(crate) slot: Slot,
}

/// What `find_or_insert` found or did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    /// The key's member, which the caller decides on.
    Member(Found),
    /// This thread made the key's new member (by promoting a claim, or by the CAS at an empty
    /// home) with its request applied: the answer.
    Decided(Decision),
    /// No slot within the probe limit is free or idle, and no claim is in flight to wait for.
    Full,
}

/// The slots of a probe sequence, from the home on, wrapping at the shard's end, as far as the
/// probe limit: a plain counter, cheaper in the insert path's scans than a chain of ranges.
struct Probe {
    index: usize,
    len: usize,
    displacement: usize,
    end: usize,
}

impl Iterator for Probe {
    /// The slot's displacement from the home, and its index.
    type Item = (usize, usize);

    #[inline]
    fn next(&mut self) -> Option<(usize, usize)> {
        if self.displacement == self.end {
            return None;
        }
        let item = (self.displacement, self.index);
        self.displacement += 1;
        self.index += 1;
        if self.index == self.len {
            self.index = 0;
        }
        Some(item)
    }
}

/// How many times a new key rescans while other keys' claims block every slot it could use,
/// before it is told the table is full. Under loom each wait is a scheduling point that
/// multiplies the executions to explore, and two waits already let a blocking claim finish.
const MAX_WAITS_FOR_CLAIMS: u32 = if cfg!(tollgate_loom) { 2 } else { 64 };

/// The slot was given to another key while a decision was being made for this one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Moved;

/// What [`Shard::claim`] did with the slot it was given.
enum Claimed {
    /// The slot holds this thread's claim, to settle.
    Claim(Found),
    /// The slot changed before the CAS: scan again.
    Lost,
    /// The key became a member without a claim, this thread's request applied: only the broken
    /// twin `insert_at_any_empty` does this past a used home.
    Unclaimed(Entry),
}

impl Shard {
    /// A shard of `len` empty slots; `None` if the memory cannot be had.
    pub(crate) fn new(len: usize) -> Option<Shard> {
        let mut slots = Vec::new();
        slots.try_reserve_exact(len).ok()?;
        slots.extend((0..len).map(|_| AtomicU128::new(Slot::EMPTY.word())));
        Some(Shard {
            meta: CachePadded::new(ShardMeta {
                live: AtomicU64::new(0),
                claims: AtomicU64::new(0),
            }),
            slots: slots.into_boxed_slice(),
            #[cfg(tollgate_loom)]
            faults: Faults::NONE,
        })
    }

    /// Leaves steps of the protocol out, for loom's broken twins.
    #[cfg(tollgate_loom)]
    pub(crate) fn set_faults(&mut self, faults: Faults) {
        self.faults = faults;
    }

    #[inline(always)]
    fn faults(&self) -> Faults {
        #[cfg(tollgate_loom)]
        return self.faults;
        #[cfg(not(tollgate_loom))]
        Faults::NONE
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Slots in `Member` status (approximate while inserts race: clamped to `0..=len`).
    pub(crate) fn live(&self) -> u64 {
        // Relaxed: a statistic; nothing is published through it.
        let live = self.meta.live.load(Ordering::Relaxed) as i64;
        live.clamp(0, self.slots.len() as i64) as u64
    }

    /// Members whose state is not idle (`is_idle` false): the keys still being limited. Reads
    /// every slot once; a slot that changes meanwhile is counted as it was read.
    pub(crate) fn busy(&self, is_idle: impl Fn(u64) -> bool) -> usize {
        (0..self.slots.len())
            .filter(|&index| {
                // Relaxed: a statistic about a moment, like `live`.
                let slot = self.load(index, Ordering::Relaxed);
                slot.status() == Status::Member && !is_idle(slot.state)
            })
            .count()
    }

    /// Whether a new key homed at `home` would find a slot (read-only: for `peek`).
    pub(crate) fn has_room(&self, home: usize, is_idle: impl Fn(u64) -> bool) -> bool {
        self.probe(home).any(|(_, index)| {
            // Relaxed: an answer about a moment, like every peek.
            let slot = self.load(index, Ordering::Relaxed);
            match slot.status() {
                Status::Empty | Status::Dead => true,
                Status::Member => is_idle(slot.state),
                // A claim in flight may die or turn idle: `check` would wait for it.
                Status::Inserting => true,
            }
        })
    }

    /// For a new key homed at `home` that found no room: the least `idle_after` of the members
    /// in its probe range (how long until one of them is idle and its slot can be reclaimed), 0
    /// if a slot is free or a claim is in flight (room may appear at once). Read-only, and only
    /// a hint: the slots are read one by one while others may change them.
    pub(crate) fn soonest_room(&self, home: usize, idle_after: impl Fn(u64) -> u64) -> u64 {
        let mut soonest = u64::MAX;
        for (_, index) in self.probe(home) {
            // Relaxed: a hint about a moment, like every peek.
            let slot = self.load(index, Ordering::Relaxed);
            let wait = match slot.status() {
                Status::Member => idle_after(slot.state),
                Status::Empty | Status::Dead | Status::Inserting => 0,
            };
            soonest = soonest.min(wait);
            if soonest == 0 {
                break;
            }
        }
        soonest
    }

    /// The probe sequence of a key whose home is `home`: `(displacement, index)` pairs.
    #[inline]
    fn probe(&self, home: usize) -> Probe {
        let len = self.slots.len();
        Probe {
            index: home,
            len,
            displacement: 0,
            end: MAX_PROBE.min(len),
        }
    }

    #[inline]
    fn load(&self, index: usize, order: Ordering) -> Slot {
        Slot::from_word(self.slots[index].load(order))
    }

    /// The insert path's CAS on a slot. SeqCst on success and failure: claims, kills and
    /// promotions, and the failed attempts that read a slot, fall in one total order with the
    /// settle scans (`docs/design.md`, "At most one member per key").
    fn cas(&self, index: usize, current: Slot, new: Slot) -> Result<(), Slot> {
        self.slots[index]
            .compare_exchange(current.word(), new.word(), Ordering::SeqCst, Ordering::SeqCst)
            .map(drop)
            .map_err(Slot::from_word)
    }

    /// The key's `Member` slot, if the key is present: the decision path's only search.
    #[inline]
    pub(crate) fn find(&self, fingerprint: u64, home: usize) -> Option<Found> {
        // Relaxed, here and below: a stale read only sends the caller down the insert path,
        // whose SeqCst settle scan finds the member.
        let slot = self.load(home, Ordering::Relaxed);
        if slot.is(Status::Member, fingerprint) {
            return Some(Found { index: home, slot });
        }
        // The same sequence as `probe`, written out and cut at the home's reach: this loop is
        // the whole lookup of a decision.
        let len = self.slots.len();
        let mut index = home;
        let mut next = slot;
        for _ in 0..slot.reach() {
            if next.status() == Status::Empty {
                return None;
            }
            index += 1;
            if index == len {
                index = 0;
            }
            next = self.load(index, Ordering::Relaxed);
            if next.is(Status::Member, fingerprint) {
                return Some(Found { index, slot: next });
            }
        }
        None
    }

    /// Raises the reach of the slot at `home` to at least `displacement`, before a claim that far
    /// from it. SeqCst: the raise must come before the claim in the total order of the insert
    /// path, so that a scan that sees the claim's effects reads the raised reach. The broken twin
    /// `claim_out_of_reach` raises nothing.
    fn extend_reach(&self, home: usize, displacement: usize) {
        if self.faults().claim_out_of_reach {
            return;
        }
        // SeqCst even when the reach is already enough (the scan's `Relaxed` read may have said
        // so): this load then orders the raise it reads before the claim that follows it.
        let mut current = self.load(home, Ordering::SeqCst);
        while current.reach() < displacement {
            match self.cas(home, current, current.with_reach(displacement)) {
                Ok(()) => return,
                Err(actual) => current = actual,
            }
        }
    }

    /// The key's `Member` slot, inserting the key if it is absent.
    ///
    /// A thread that promotes a claim applies its own request in the same CAS (`decide` on the
    /// fresh state), so a new member is never left fresh, and so reclaimable, before its first
    /// charge: otherwise two inserters could take one slot from each other forever.
    pub(crate) fn find_or_insert(
        &self,
        fingerprint: u64,
        home: usize,
        is_idle: impl Fn(u64) -> bool,
        mut decide: impl FnMut(u64) -> Transition,
    ) -> Entry {
        if let Some(decided) = self.insert_at_empty_home(fingerprint, home, &mut decide) {
            return decided;
        }
        let mut waited = 0;
        // Set once settling found no claim of this key within its home's reach although the scan
        // had seen one with its fingerprint: that claim lies past the reach, so it is another
        // key's (homed elsewhere, with the same fingerprint), and this thread must not wait on it
        // as on its own key's (its thread may be descheduled for as long as it likes).
        let mut foreign_claim = false;
        loop {
            let mut target = None;
            let mut pending = false;
            let mut others_claiming = false;
            // The home's reach, read with the home: past it no slot is this key's, and the scan
            // goes on only to find a free slot.
            let mut reach = 0;
            for (displacement, index) in self.probe(home) {
                if displacement > reach && target.is_some() {
                    break;
                }
                // Relaxed: the claim below is a SeqCst CAS that checks what was read here (and
                // a stale reach only makes this key look absent: settling finds its member).
                let slot = self.load(index, Ordering::Relaxed);
                if displacement == 0 {
                    reach = slot.reach();
                }
                match slot.status() {
                    Status::Empty => {
                        target = target.or(Some((displacement, index, slot)));
                        break;
                    }
                    Status::Member if slot.fingerprint() == fingerprint => {
                        return Entry::Member(Found { index, slot })
                    }
                    Status::Inserting
                        if slot.fingerprint() == fingerprint && (displacement <= reach || !foreign_claim) =>
                    {
                        pending = true
                    }
                    Status::Member if self.reclaimable(slot, &is_idle) => {
                        target = target.or(Some((displacement, index, slot)))
                    }
                    Status::Dead => target = target.or(Some((displacement, index, slot))),
                    Status::Inserting => others_claiming = true,
                    Status::Member => {}
                }
            }
            if pending {
                // Another thread is inserting this key: help it settle rather than race it.
                if let Some(entry) = self.settle(fingerprint, home, None, &mut decide) {
                    return entry;
                }
                foreign_claim = true;
                continue;
            }
            let Some((displacement, index, old)) = target else {
                // Another key's claim may be about to die (and free its slot) or to become a
                // member that is idle at this request's time: wait for it, a bounded number of
                // times, before calling the table full.
                if others_claiming && self.waits_for_claims(waited) {
                    waited += 1;
                    yield_to_others();
                    continue;
                }
                return Entry::Full;
            };
            self.extend_reach(home, displacement);
            let ours = match self.claim(index, old, fingerprint, &mut decide) {
                Claimed::Claim(ours) => ours,
                Claimed::Lost => continue,
                Claimed::Unclaimed(entry) => return entry,
            };
            if let Some(entry) = self.settle_claim(ours, fingerprint, home, &mut decide) {
                return entry;
            }
        }
    }

    /// Whether a member the scan read as `slot` may go to a new key: its state is idle (the
    /// broken twin `reclaim_busy` takes any member).
    #[inline]
    fn reclaimable(&self, slot: Slot, is_idle: &impl Fn(u64) -> bool) -> bool {
        self.faults().reclaim_busy || is_idle(slot.state)
    }

    /// Whether a new key that found every usable slot claimed by other keys, `waited` times so
    /// far, waits for those claims once more before it is told the table is full (the broken
    /// twin `no_wait_for_claims` never waits).
    fn waits_for_claims(&self, waited: u32) -> bool {
        waited < MAX_WAITS_FOR_CLAIMS && !self.faults().no_wait_for_claims
    }

    /// Claims the slot at `index`, last read as `old` (`Empty`, `Dead` or an idle member), for
    /// the key: a CAS into `Inserting` with a fresh nonce, which [`settle`](Self::settle) then
    /// makes a member or kills. [`Claimed::Lost`] if the slot changed first.
    ///
    /// The broken twins: `claim_by_store` writes the claim with a plain store;
    /// `insert_at_any_empty` makes an `Empty` slot the key's member at once, without a claim
    /// ([`Claimed::Unclaimed`], as [`insert_unclaimed`](Self::insert_unclaimed) does at an
    /// empty home).
    fn claim(
        &self,
        index: usize,
        old: Slot,
        fingerprint: u64,
        decide: &mut impl FnMut(u64) -> Transition,
    ) -> Claimed {
        if self.faults().insert_at_any_empty && old.status() == Status::Empty {
            return match self.insert_unclaimed(index, old, fingerprint, decide) {
                Some(entry) => Claimed::Unclaimed(entry),
                None => Claimed::Lost,
            };
        }
        // Forgetting an idle key: count it out before the CAS that forgets it, so that a reader
        // never sees more members than slots (back in if the CAS fails).
        let forgets = old.status() == Status::Member;
        if forgets {
            // Relaxed: a statistic.
            self.meta.live.fetch_sub(1, Ordering::Relaxed);
        }
        // Relaxed: the nonce only needs to be unique, which fetch_add guarantees.
        let nonce = self.meta.claims.fetch_add(1, Ordering::Relaxed);
        let claim = old.replaced(Status::Inserting, fingerprint, nonce);
        if !self.take_free(index, old, claim) {
            if forgets {
                // Relaxed: a statistic.
                self.meta.live.fetch_add(1, Ordering::Relaxed);
            }
            return Claimed::Lost;
        }
        crate::meter::reclaimed(forgets);
        Claimed::Claim(Found { index, slot: claim })
    }

    /// Writes `new` (a claim, or a member made without one) over the free slot at `index`, last
    /// read as `free`; `false` if the slot changed first. SeqCst, the CAS and the broken twin's
    /// store (`claim_by_store`: no compare) alike: claims, settle scans and promotions must fall
    /// in one total order.
    fn take_free(&self, index: usize, free: Slot, new: Slot) -> bool {
        if self.faults().claim_by_store {
            self.slots[index].store(new.word(), Ordering::SeqCst);
            return true;
        }
        self.cas(index, free, new).is_ok()
    }

    /// Settles the claim this thread just made (see [`settle`](Self::settle)): it saw its claim
    /// when it made it, so its first scan may promote it. The broken twin `promote_unsettled`
    /// promotes it at once, without settling against the key's other claims.
    fn settle_claim(
        &self,
        ours: Found,
        fingerprint: u64,
        home: usize,
        decide: &mut impl FnMut(u64) -> Transition,
    ) -> Option<Entry> {
        if self.faults().promote_unsettled {
            if let Some(entry) = self.promote(ours, fingerprint, decide) {
                return Some(entry);
            }
        }
        self.settle(fingerprint, home, Some(ours), decide)
    }

    /// Inserts the key as a member at once, with the caller's request applied, if its home slot
    /// has never been used; `None` if the home is used (or was taken first), and the key goes
    /// through the claim protocol.
    ///
    /// No settling is needed: slots never become `Empty` again, and a scan for this key reads its
    /// home first and claims elsewhere only past a used home, so while the home is `Empty` the key
    /// has no claim and no member anywhere. The CAS from `Empty` checks that at the instant it
    /// succeeds; after it, a scan for the key reads this member at the home (or, once the member
    /// has been reclaimed, whatever replaced it) and claims nothing while the member is there.
    /// Proof: `docs/design.md`, "An empty home"; loom: `keyed_insert.rs`, `keyed_empty_home.rs`.
    fn insert_at_empty_home(
        &self,
        fingerprint: u64,
        home: usize,
        decide: &mut impl FnMut(u64) -> Transition,
    ) -> Option<Entry> {
        // Relaxed: the CAS below checks what was read.
        let slot = self.load(home, Ordering::Relaxed);
        if slot.status() != Status::Empty {
            return None;
        }
        self.insert_unclaimed(home, slot, fingerprint, decide)
    }

    /// Makes the free slot at `index`, last read as `free`, the key's member with the caller's
    /// request applied, without a claim; `None` if the slot changed first.
    fn insert_unclaimed(
        &self,
        index: usize,
        free: Slot,
        fingerprint: u64,
        decide: &mut impl FnMut(u64) -> Transition,
    ) -> Option<Entry> {
        let Transition { state, decision } = decide(FRESH_STATE);
        let member = free.replaced(Status::Member, fingerprint, state);
        if !self.take_free(index, free, member) {
            return None;
        }
        // Relaxed: a statistic.
        self.meta.live.fetch_add(1, Ordering::Relaxed);
        Some(Entry::Decided(decision))
    }

    /// Makes exactly one `Member` slot of the key's claims, or finds the member that already
    /// exists; `None` if the key has neither a member nor a claim (every claim was killed and
    /// the member, if one was made, has since been reclaimed).
    ///
    /// `seen` is a claim the caller observed before calling (its own): only a scan that began
    /// after a claim was observed may promote it. Whoever promotes applies its own request.
    fn settle(
        &self,
        fingerprint: u64,
        home: usize,
        mut seen: Option<Found>,
        decide: &mut impl FnMut(u64) -> Transition,
    ) -> Option<Entry> {
        let own = self.unraised_reach(home, seen);
        loop {
            let mut member = None;
            let mut earliest: Option<Found> = None;
            let mut kills_held = true;
            let mut reach = 0;
            for (displacement, index) in self.probe(home) {
                if displacement > reach {
                    break;
                }
                // SeqCst: see `find_or_insert`.
                let slot = self.load(index, Ordering::SeqCst);
                if displacement == 0 {
                    // Every claim of this key made before this load is within it.
                    reach = slot.reach().max(own);
                }
                match slot.status() {
                    Status::Empty => break,
                    Status::Member if slot.fingerprint() == fingerprint => {
                        member = member.or(Some(Found { index, slot }))
                    }
                    Status::Inserting if slot.fingerprint() == fingerprint => {
                        if earliest.is_none() && member.is_none() {
                            earliest = Some(Found { index, slot });
                        } else {
                            kills_held &= self.kill(index, slot);
                        }
                    }
                    _ => {}
                }
            }
            if let Some(member) = member {
                if let Some(claim) = earliest {
                    kills_held &= self.kill(claim.index, claim.slot);
                }
                if kills_held {
                    return Some(Entry::Member(member));
                }
                continue;
            }
            let claim = earliest?;
            if kills_held && seen == Some(claim) {
                if let Some(entry) = self.promote(claim, fingerprint, decide) {
                    return Some(entry);
                }
                seen = None;
                continue;
            }
            seen = Some(claim);
        }
    }

    /// How far past its home a settle scan must look beyond the home's reach, for the caller's
    /// own claim `seen`: nowhere in the shipped table (the claim raised the reach first: 0). The
    /// broken twin that skips the raise (`claim_out_of_reach`) still covers the caller's own
    /// claim, so that it fails on what the raise is for (other requests' scans), not by never
    /// seeing its own claim.
    fn unraised_reach(&self, home: usize, seen: Option<Found>) -> usize {
        match (self.faults().claim_out_of_reach, seen) {
            (true, Some(claim)) => (claim.index + self.slots.len() - home) % self.slots.len(),
            _ => 0,
        }
    }

    /// Promotes a settled claim to `Member`, with the promoting thread's request already applied
    /// to the fresh state; `None` if the claim changed first.
    fn promote(
        &self,
        claim: Found,
        fingerprint: u64,
        decide: &mut impl FnMut(u64) -> Transition,
    ) -> Option<Entry> {
        let Transition { state, decision } = decide(FRESH_STATE);
        let member = claim.slot.replaced(Status::Member, fingerprint, state);
        // SeqCst: see `find_or_insert`.
        self.cas(claim.index, claim.slot, member).ok()?;
        // Relaxed: a statistic.
        self.meta.live.fetch_add(1, Ordering::Relaxed);
        Some(Entry::Decided(decision))
    }

    /// Turns a losing claim into a free `Dead` slot; `false` if the claim changed first (it was
    /// promoted or killed by someone else), in which case the caller must scan again.
    fn kill(&self, index: usize, claim: Slot) -> bool {
        let dead = claim.replaced(Status::Dead, claim.fingerprint(), FRESH_STATE);
        // SeqCst: see `find_or_insert`.
        match self.cas(index, claim, dead) {
            Ok(()) => true,
            Err(now) => self.killed_already(now),
        }
    }

    /// Whether a kill that found `now` in place of its claim may count as done: the claim is
    /// dead already (another settle killed it). The broken twin `kill_ignores_failure` counts
    /// every failed kill as done.
    fn killed_already(&self, now: Slot) -> bool {
        self.faults().kill_ignores_failure || now.status() == Status::Dead
    }

    /// Runs `decide` on the member's state in a CAS loop, as `cell::update` does for a direct
    /// limiter, but on the whole slot so that the key cannot change under the decision.
    ///
    /// Always inlined: it is the decision path's CAS loop, and where the whole keyed decision is
    /// inlined into its caller the compiler had left it out of line, its `Decision` returned
    /// through memory and copied twice (21 more instructions per hot-key decision, callgrind).
    #[inline(always)]
    pub(crate) fn update(
        &self,
        found: Found,
        mut decide: impl FnMut(u64) -> Transition,
    ) -> Result<Decision, Moved> {
        let mut current = found.slot;
        loop {
            let Transition { state, decision } = decide(current.state);
            if state == current.state {
                return Ok(decision);
            }
            match self.store_state(found.index, current, state) {
                Ok(()) => return Ok(decision),
                Err(actual) => {
                    // A raised reach changes the word but not the key: try again.
                    if !self.same_key(actual, current) {
                        return Err(Moved);
                    }
                    current = actual;
                }
            }
        }
    }

    /// The decision's CAS: `current` with its state replaced by `state`, if the slot at `index`
    /// still holds `current`; else the word it holds. The broken twin `update_by_store` stores
    /// the new word over whatever the slot holds (never in a build without the loom cfg).
    #[inline(always)]
    fn store_state(&self, index: usize, current: Slot, state: u64) -> Result<(), Slot> {
        if self.faults().update_by_store {
            // Relaxed, as the CAS below: the flaw is the missing compare.
            self.slots[index].store(current.with_state(state).word(), Ordering::Relaxed);
            return Ok(());
        }
        // Relaxed: the word is self-contained (tag and state together); see `cell.rs`.
        match self.slots[index].compare_exchange_weak(
            current.word(),
            current.with_state(state).word(),
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => Ok(()),
            Err(actual) => Err(Slot::from_word(actual)),
        }
    }

    /// Whether the word a failed decision CAS found, `actual`, is still the key's that `current`
    /// held (a raised reach changes the word, not the key). The broken twin
    /// `update_ignores_key` takes every word for the key's.
    #[inline(always)]
    fn same_key(&self, actual: Slot, current: Slot) -> bool {
        self.faults().update_ignores_key || actual.identity() == current.identity()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// A deterministic xorshift stream: the same churn every run.
    struct Stream(u64);

    impl Stream {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    /// Charges the key `fingerprint`, homed at `home`, at `now`: it carries debt until
    /// `now + hold` (a state is the time it is idle again; `FRESH_STATE`, 0, is idle). `false`
    /// when the shard has no room.
    fn charge(shard: &Shard, fingerprint: u64, home: usize, now: u64, hold: u64) -> bool {
        let decide = |_| Transition {
            state: now + hold,
            decision: Decision::allowed(0, 0, 0),
        };
        loop {
            let entry = match shard.find(fingerprint, home) {
                Some(found) => Entry::Member(found),
                None => shard.find_or_insert(fingerprint, home, |state| state <= now, decide),
            };
            match entry {
                Entry::Member(found) => {
                    if shard.update(found, decide).is_ok() {
                        return true;
                    }
                }
                Entry::Decided(_) => return true,
                Entry::Full => return false,
            }
        }
    }

    /// The claim nonces drawn so far: one per claim the insert path made.
    fn claims(shard: &Shard) -> u64 {
        shard.meta.claims.load(Ordering::Relaxed)
    }

    /// A key whose home slot was never used becomes its member at once, with no claim; a key
    /// whose home is used (by another key, or by an idle member it reclaims) goes through a claim
    /// and a settle. Either way it is found afterwards, once, and counted live.
    #[test]
    fn a_key_at_an_empty_home_is_inserted_without_a_claim() {
        let shard = Shard::new(16).expect("memory");
        // Key 5 at its empty home 3: no claim.
        assert!(charge(&shard, 5, 3, 1, 100));
        assert_eq!(claims(&shard), 0);
        assert_eq!(shard.find(5, 3).map(|found| found.index), Some(3));
        assert_eq!(shard.load(3, Ordering::Relaxed).state, 101);
        // Key 6, also homed at 3, while 5 is busy: a claim of slot 4, settled, then promoted.
        assert!(charge(&shard, 6, 3, 1, 100));
        assert_eq!(claims(&shard), 1);
        assert_eq!(shard.find(6, 3).map(|found| found.index), Some(4));
        assert_eq!(shard.load(3, Ordering::Relaxed).reach(), 1);
        // Key 7 homed at 3 once 5 is idle: it reclaims slot 3 through a claim (the home is used).
        assert!(charge(&shard, 7, 3, 200, 100));
        assert_eq!(claims(&shard), 2);
        assert_eq!(shard.find(7, 3).map(|found| found.index), Some(3));
        assert_eq!(shard.find(5, 3), None);
        assert_eq!(shard.live(), 2);
        // Every slot but 3 and 4 is still empty.
        let used: Vec<usize> = (0..shard.len())
            .filter(|&index| shard.load(index, Ordering::Relaxed).status() != Status::Empty)
            .collect();
        assert_eq!(used, [3, 4]);
    }

    /// A claim with the key's fingerprint that lies past the key's home's reach is another key's
    /// (homed elsewhere): the insert does not wait on it as on its own key's claim, which it once
    /// did for as long as that claim's thread stayed descheduled (settling, which looks only
    /// within the reach, found nothing, and the next scan saw the claim again). Once this key's
    /// own claim past it raises the reach, the two share a fingerprint within one chain: the
    /// collision case of `docs/design.md`, "Key identity", where they are one key.
    #[test]
    fn a_claim_with_the_same_fingerprint_past_the_reach_is_not_waited_on() {
        let shard = std::sync::Arc::new(Shard::new(1024).expect("memory"));
        // Key 100 at home 0, with debt until 1,000.
        assert!(charge(&shard, 100, 0, 1, 999));
        // A key with fingerprint 7 but homed at 1 has claimed slot 1; its thread never returns.
        let foreign = Slot::new(Status::Inserting, 7, u64::MAX);
        assert!(shard.cas(1, Slot::EMPTY, foreign).is_ok());
        // Key 7 homed at 0: slot 0 busy, slot 1 the other key's claim, slot 2 free.
        let (done, finished) = std::sync::mpsc::channel();
        let inserter = std::sync::Arc::clone(&shard);
        std::thread::spawn(move || {
            let _ = done.send(charge(&inserter, 7, 0, 1, 999));
        });
        let charged = finished.recv_timeout(std::time::Duration::from_secs(20));
        assert_eq!(charged, Ok(true), "the insert waited on another key's claim");
    }

    /// Keys whose hashes all name one home (what a client that knew the hash seed could send): a
    /// key is stored within 512 slots of its home, so a shard of at most 512 slots holds as many
    /// such keys as it has slots, and a larger one 512 of them, with its other slots free for
    /// keys homed elsewhere. What a table's `capacity` can promise against chosen hashes:
    /// `docs/design.md`, "Capacity".
    #[test]
    fn keys_of_one_home_fill_a_small_shard_and_512_slots_of_a_large_one() {
        for len in [1, 10, 512] {
            let shard = Shard::new(len).expect("memory");
            for fingerprint in 0..len as u64 {
                assert!(
                    charge(&shard, fingerprint, 0, 1, 1_000),
                    "{len} slots, key {fingerprint}"
                );
            }
            assert!(!charge(&shard, len as u64, 0, 1, 1_000), "{len} slots: one more");
            assert_eq!(shard.live(), len as u64);
        }
        let shard = Shard::new(1_024).expect("memory");
        for fingerprint in 0..MAX_PROBE as u64 {
            assert!(charge(&shard, fingerprint, 0, 1, 1_000), "key {fingerprint}");
        }
        assert!(!charge(&shard, 10_000, 0, 1, 1_000), "a 513th key of home 0");
        assert!(charge(&shard, 10_001, 700, 1, 1_000), "a key of another home");
    }

    /// Every member lies within its home's reach and is found from its home; returns the
    /// largest reach and the number of `Empty` slots.
    fn check_reaches(shard: &Shard, homes: &HashMap<u64, usize>) -> (usize, usize) {
        let len = shard.len();
        let mut largest = 0;
        let mut empty = 0;
        for index in 0..len {
            let slot = shard.load(index, Ordering::Relaxed);
            largest = largest.max(slot.reach());
            match slot.status() {
                Status::Empty => empty += 1,
                Status::Member => {
                    let home = homes[&slot.fingerprint()];
                    let displacement = (index + len - home) % len;
                    let reach = shard.load(home, Ordering::Relaxed).reach();
                    assert!(
                        displacement <= reach,
                        "member at {index}, home {home}: displacement {displacement} past reach {reach}"
                    );
                    assert_eq!(
                        shard.find(slot.fingerprint(), home).map(|found| found.index),
                        Some(index)
                    );
                }
                Status::Inserting | Status::Dead => {}
            }
        }
        (largest, empty)
    }

    /// Keys come and go (new keys, keys asked again, debts of 0 to 600 steps) in a 256-slot
    /// shard kept about full: after every 100 steps, every member is within its home's reach.
    #[test]
    fn every_member_lies_within_its_homes_reach() {
        let shard = Shard::new(256).expect("memory");
        let mut stream = Stream(0x9e37_79b9_7f4a_7c15);
        let mut homes = HashMap::new();
        let mut refused = 0;
        for now in 1..=20_000u64 {
            let fingerprint = match stream.next() % 4 {
                0 if !homes.is_empty() => stream.next() % homes.len() as u64,
                _ => homes.len() as u64,
            };
            let home = *homes
                .entry(fingerprint)
                .or_insert_with(|| (stream.next() % 256) as usize);
            if !charge(&shard, fingerprint, home, now, stream.next() % 600) {
                refused += 1;
            }
            if now % 100 == 0 {
                check_reaches(&shard, &homes);
            }
        }
        // The shard was full at times (so displacements were long), but not always.
        assert!(refused > 0 && refused < 10_000, "{refused} refusals");
    }

    /// Churn: 200,000 keys pass through a 1,024-slot shard, each with debt for 700 steps (about
    /// 700 keys, load 0.68, hold debt at any time). Every slot is used up (no `Empty` slot is
    /// left, so a lookup that scanned to the first `Empty` slot would walk the whole probe limit,
    /// 512 slots, for every absent key), yet no home's reach passes a quarter of that limit and
    /// the mean reach stays under 48 (this stream gives 110 and 40.7).
    #[test]
    fn churn_keeps_every_reach_short() {
        let shard = Shard::new(1024).expect("memory");
        let mut stream = Stream(0x2545_f491_4f6c_dd1d);
        let mut homes = HashMap::new();
        for now in 0..200_000u64 {
            let home = (stream.next() % 1024) as usize;
            homes.insert(now, home);
            assert!(charge(&shard, now, home, now, 700), "key {now} found no room");
        }
        let (largest, empty) = check_reaches(&shard, &homes);
        assert_eq!(empty, 0);
        assert!(largest <= MAX_PROBE / 4, "largest reach {largest}");
        let total: usize = (0..1024)
            .map(|home| shard.load(home, Ordering::Relaxed).reach())
            .sum();
        assert!(total <= 48 * 1024, "mean reach {}", total as f64 / 1024.0);
    }
}
