//! The local side of leases: what this process holds of each key's lease ([`Held`]), how a
//! request is spent from it, and how a lease Redis granted is installed, each under the key's
//! lock ([`LeaseTable`], the locked keyed table of `src/keyed/locked.rs`). No I/O and no async
//! here: the limiter (`../limiter.rs`) makes the round trips and hands their replies to
//! [`LeaseTable::install`].
//!
//! Times are integer microseconds. A process reads its *local* clock (a monotonic one on the
//! server's clock, the client's clock itself otherwise); each key keeps the anchor of its last
//! reply (the local time its request was sent, the time the script read), and maps a local
//! reading onto the lease's *timeline* (the script's `now`) from it, never behind the timeline
//! (`Held::line`). Every bound of `docs/distributed.md`, "Leases", rests on that.
//!
//! Compiled on its own under `--cfg tollgate_loom` (also without the `redis` feature), where
//! `loom-tests/tests/lease.rs` models a spend racing a refresh's install, two spends racing for
//! the last unit, and an install racing the reuse of its key's slot, each with a broken twin
//! ([`LeaseFaults`]).

// Public to the loom models only (re-exported under `--cfg tollgate_loom`).
#![cfg_attr(not(tollgate_loom), allow(unreachable_pub))]

mod bucket;
mod faults;
mod held;
mod table;
mod window;

pub use faults::LeaseFaults;
pub use held::{Held, Sizing};
pub use table::LeaseTable;

use crate::{Decision, SlidingWindow, TokenBucket};

/// A leased algorithm's parameters, in the integer microseconds and units of its script.
#[derive(Clone, Copy, Debug)]
pub enum LeaseRule {
    /// The token bucket (GCRA): a lease is a range of emission slots `T` apart.
    Bucket {
        /// The bucket at `interval`, which decides a spend's numbers (the core's arithmetic).
        bucket: TokenBucket,
        /// `T`, µs.
        interval: u64,
        /// `burst * T`, µs.
        tolerance: u64,
    },
    /// The fixed window, or the sliding window counter: a lease is units counted in one
    /// window, spent only within it.
    Window {
        /// The units a window admits.
        limit: u64,
        /// The window's length, µs.
        length: u64,
        /// The sliding window counter, which also weighs the previous window's count (the
        /// core's arithmetic); `None`: the fixed window.
        sliding: Option<SlidingWindow>,
    },
}

/// What a request's spend concluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spend {
    /// Decided on what this process holds: admitted from its lease, or a weightless request.
    /// With `refresh`, the lease ran low: ask for the next one off the decision path.
    Lease {
        /// The decision.
        decision: Decision,
        /// The lease to ask for now, if any.
        refresh: Option<Ask>,
    },
    /// Refused without a round trip: the key's last answer from Redis says Redis refuses it
    /// too, or (the bucket) that fewer units are left in the whole quota than this process
    /// leases at a time, which it waits for rather than take them one round trip each.
    Refused {
        /// The decision.
        decision: Decision,
    },
    /// Redis must decide: the lease does not hold the request.
    Ask(Ask),
}

/// A round trip for a lease: the request's own weight (`cost`, 0 for a refresh), and the units
/// to ask for in all (`want`, at least `cost`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ask {
    /// The weight of the request that waits for the answer (0: a refresh).
    pub cost: u64,
    /// The units asked for, the request's included.
    pub want: u64,
    /// Whether this is the key's one sized ask in flight (`Held::asking`): its install clears
    /// the flag. Other asks (made while one is in flight) ask for the request's weight only.
    pub sized: bool,
    /// The key's state when the ask was made: what the broken twin `install_from_snapshot`
    /// installs onto.
    #[cfg(tollgate_loom)]
    pub(crate) snapshot: Held,
}

/// What a lease script answered, on its timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grant {
    /// `gcra_lease.lua`: `granted` slots from `start` (`max(tat, now)`; for a refusal, where
    /// the key's queue ends), at `now`.
    Bucket {
        /// Units granted, the request's included (0: refused, or nothing asked).
        granted: u64,
        /// The first granted slot's start: the key's TAT before, or `now` if later.
        start: u64,
        /// The time the script read.
        now: u64,
    },
    /// `fixed_window_lease.lua` (or `sliding_window.lua`'s lease): `granted` units added to the
    /// window ending at `end`, whose count was `count` before, at `now`.
    Window {
        /// Units granted, the request's included (0: refused, or nothing asked).
        granted: u64,
        /// The window's count before the grant.
        count: u64,
        /// The previous window's count (the sliding window counter's; 0 for the fixed window).
        previous: u64,
        /// The end of the window the units were counted in.
        end: u64,
        /// The time the script read.
        now: u64,
    },
}

impl Grant {
    /// The time the script read.
    pub fn now(&self) -> u64 {
        match *self {
            Grant::Bucket { now, .. } | Grant::Window { now, .. } => now,
        }
    }
}

/// Unspent units to give back to Redis: the end of the range (the bucket: the slot `TAT` must
/// still equal; the window: the window's end) and how many.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GiveBack {
    /// The bucket's range end (µs), or the window's end (µs).
    pub end: u64,
    /// Units.
    pub units: u64,
}

/// The most of the units a key's quota has free that a sized ask's floor wants, however slowly
/// this process spends them (an eighth): the floor is one interval's share of the free quota
/// (`bucket.rs`, `window.rs`), and never more than this, so that the leases shrink with what is
/// left as the quota nears its limit.
pub(crate) const FREE_SHARE: u64 = 8;

/// The round trip for a request that the lease does not hold: the key's sized ask (at least
/// `floor` units) if none is in flight, else one for the request's weight alone; a weightless
/// request asks for nothing.
fn ask(held: &mut Held, sizing: &Sizing, now: u64, cost: u64, floor: u64) -> Spend {
    #[cfg(tollgate_loom)]
    let snapshot = *held;
    let (want, sized) = if held.asking || cost == 0 {
        (cost, false)
    } else {
        (held.ask(sizing, now, cost, floor), true)
    };
    Spend::Ask(Ask {
        cost,
        want,
        sized,
        #[cfg(tollgate_loom)]
        snapshot,
    })
}

/// The refresh to start after a spend left the lease low: the key's sized ask (at least
/// `floor` units), for no request.
fn refresh(held: &mut Held, sizing: &Sizing, now: u64, floor: u64) -> Option<Ask> {
    #[cfg(tollgate_loom)]
    let snapshot = *held;
    (!held.asking).then(|| Ask {
        cost: 0,
        want: held.ask(sizing, now, 0, floor),
        sized: true,
        #[cfg(tollgate_loom)]
        snapshot,
    })
}

impl LeaseRule {
    /// The heaviest request: the burst, or the window's limit.
    pub fn capacity(&self) -> u64 {
        match *self {
            LeaseRule::Bucket {
                interval, tolerance, ..
            } => tolerance / interval,
            LeaseRule::Window { limit, .. } => limit,
        }
    }

    /// Spends a request of weight `cost` at local time `local` from `held`.
    pub fn spend(&self, held: &mut Held, sizing: &Sizing, local: u64, cost: u64) -> Spend {
        match *self {
            LeaseRule::Bucket {
                bucket,
                interval,
                tolerance,
            } => bucket::spend(&bucket, interval, tolerance, held, sizing, local, cost),
            LeaseRule::Window {
                limit,
                length,
                sliding,
            } => window::spend(limit, length, sliding.as_ref(), held, sizing, local, cost),
        }
    }

    /// Installs what the script answered to `ask` (sent at local time `sent`), read at local
    /// time `local`; returns the units granted that this process will never spend (a range it
    /// could not keep beside the two it holds, a window already past).
    pub fn install(
        &self,
        held: &mut Held,
        ask: &Ask,
        grant: &Grant,
        sent: u64,
        local: u64,
        sizing: &Sizing,
    ) -> u64 {
        held.anchor(sent, grant.now());
        if ask.sized {
            held.asking = false;
        }
        match (*self, *grant) {
            (
                LeaseRule::Bucket { interval, .. },
                Grant::Bucket {
                    granted,
                    start,
                    now: _,
                },
            ) => bucket::install(interval, held, ask.cost, granted, start, held.line(local, sizing)),
            (
                LeaseRule::Window { .. },
                Grant::Window {
                    granted,
                    count,
                    previous,
                    end,
                    ..
                },
            ) => window::install(held, ask.cost, granted, count, previous, end),
            // A reply of the other algorithm's shape: the reader never makes one.
            _ => 0,
        }
    }

    /// The decision the script's answer makes for the request that asked (weight `cost`):
    /// `None` when the core's arithmetic disagrees with the script's verdict (never expected:
    /// the decision then falls to the failure policy).
    pub fn answer(&self, grant: &Grant, cost: u64) -> Option<Decision> {
        match (*self, *grant) {
            (LeaseRule::Bucket { bucket, .. }, Grant::Bucket { granted, start, now }) => {
                bucket::answer(&bucket, granted, start, now, cost)
            }
            (
                LeaseRule::Window {
                    limit,
                    length,
                    sliding,
                },
                Grant::Window {
                    granted,
                    count,
                    previous,
                    end,
                    now,
                },
            ) => window::answer(
                limit,
                length,
                sliding.as_ref(),
                granted,
                count,
                previous,
                end,
                now,
                cost,
            ),
            _ => None,
        }
    }

    /// Takes out of `held` the unspent units Redis can still take back (the bucket: the last
    /// range, whose end may still be the key's TAT; the window: what is left of the window),
    /// so that nothing spends them, and says which.
    pub fn give_back(&self, held: &mut Held, sizing: &Sizing, local: u64) -> Option<GiveBack> {
        if !held.anchored {
            return None;
        }
        let now = held.line(local, sizing);
        match *self {
            LeaseRule::Bucket { interval, .. } => bucket::give_back(interval, held, now),
            LeaseRule::Window { .. } => window::give_back(held, now),
        }
    }

    /// Whether `held` decides nothing any more at local time `local` (no unit left to spend,
    /// no lease asked for): its slot may go to another key.
    pub fn is_idle(&self, held: &Held, sizing: &Sizing, local: u64) -> bool {
        !held.asking && self.units(held, sizing, local) == 0
    }

    /// The units `held` can still spend at local time `local`.
    pub fn units(&self, held: &Held, sizing: &Sizing, local: u64) -> u64 {
        if !held.anchored {
            return 0;
        }
        let now = held.line(local, sizing);
        match *self {
            LeaseRule::Bucket { interval, .. } => bucket::usable(interval, held, now),
            LeaseRule::Window { .. } if now < held.to => held.left,
            LeaseRule::Window { .. } => 0,
        }
    }
}

#[cfg(all(test, not(tollgate_loom)))]
mod tests;
