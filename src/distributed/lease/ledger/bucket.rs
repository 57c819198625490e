//! The token bucket's lease: ranges of emission slots, spent by a local GCRA that may not pass
//! the range's end.
//!
//! A lease of `g` units taken at `now` from a key whose TAT is `tat` is the slot range
//! `[start, start + g*T)`, `start = max(tat, now)` (`gcra_lease.lua`, which moves the TAT to its
//! end). A request of weight `n` at timeline time `t` is spent from `[from, to)` iff
//! `end = max(from, t) + n*T <= to` and `end - t <= burst*T`, and then `from = end`: each unit
//! holds the slot `(e - T, e]` with `t <= e - T` and `e <= t + burst*T`, and the slots of the
//! whole fleet are disjoint (leases are disjoint ranges of one queue). So the units spent in any
//! `[a, b]` lie in `[a, b + burst*T]`, `T` apart: at most `burst + (b - a)/T`, the bound of the
//! bucket itself. A slot whose time passed unspent is lost: `t` only moves forward past it.

use super::{ask, refresh, Ask, GiveBack, Held, Sizing, Spend, FREE_SHARE};
use crate::algorithm::Algorithm;
use crate::{Decision, Timestamp, TokenBucket};

/// Nanoseconds per microsecond.
const MICROS: u64 = 1_000;

/// A process whose quota has fewer units free than it leases at a time waits for at most this
/// share of the burst to gather (a sixteenth) before asking: so the fleet's admissions lag
/// what the exact limiter would have admitted by at most that many units per process, while
/// the quota is spent faster than it refills, and the units still come a batch per round trip
/// (`docs/benchmarks.md`, "Leases", the hot key at 10x).
const MAX_WAIT_SHARE: u64 = 16;

/// The core's decision for a request of weight `cost` on a bucket whose TAT is `backlog` µs
/// ahead of now (the script's arithmetic, rebuilt as `reply.rs` does).
fn decision(bucket: &TokenBucket, backlog: u64, cost: u64) -> Decision {
    bucket
        .decide(backlog.saturating_mul(MICROS), Timestamp::UNIX_EPOCH, cost)
        .decision
}

/// The least a sized ask wants at `now`: the slots that pass in one lease interval
/// (`sizing.interval / T`: one interval of the quota's rate), at most an eighth of those the
/// key's quota had free at its last answer ([`FREE_SHARE`]). So a key spent slowly still holds
/// a lease that lasts an interval, and a process that stops spending holds no more than the
/// quota gives over one interval.
fn floor(interval: u64, tolerance: u64, held: &Held, sizing: &Sizing, now: u64) -> u64 {
    let backlog = held.known.max(now) - now;
    (sizing.interval / interval).min(tolerance.saturating_sub(backlog) / interval / FREE_SHARE)
}

/// Whole slots of `[from, to)` still to come at `now`.
fn units(interval: u64, from: u64, to: u64, now: u64) -> u64 {
    to.saturating_sub(from.max(now)) / interval
}

/// Whole slots `held` can still spend at `now`, in both ranges.
pub(super) fn usable(interval: u64, held: &Held, now: u64) -> u64 {
    units(interval, held.from, held.to, now) + units(interval, held.next_from, held.next_to, now)
}

pub(super) fn spend(
    bucket: &TokenBucket,
    interval: u64,
    tolerance: u64,
    held: &mut Held,
    sizing: &Sizing,
    local: u64,
    cost: u64,
) -> Spend {
    let now = held.line(local, sizing);
    // Every value here is below 2^53 (times) plus `burst * T` (below 2^51): no overflow.
    for _ in 0..2 {
        let start = held.from.max(now);
        let end = start + cost * interval;
        if end <= held.to && end - now <= tolerance {
            let decision = decision(bucket, start - now, cost);
            if !decision.is_allowed() {
                // The core disagrees (never expected): Redis decides.
                break;
            }
            if cost > 0 {
                held.from = end;
                held.spent += cost;
            }
            return Spend::Lease {
                decision,
                refresh: low_water(interval, tolerance, held, sizing, now),
            };
        }
        // The current range cannot hold it: move to the next range, if any (what is left of
        // the current one passes unused).
        if held.next_to <= held.next_from.max(now) {
            break;
        }
        held.from = held.next_from;
        held.to = held.next_to;
        held.next_from = 0;
        held.next_to = 0;
    }
    if !held.anchored {
        // Nothing known: Redis decides, and the key's first lease is the request's weight.
        return ask(held, sizing, now, cost, 0);
    }
    let queue = held.known.max(now);
    let backlog = queue - now;
    if cost == 0 {
        // Weightless: always admitted, on what is known of the whole quota.
        return Spend::Lease {
            decision: decision(bucket, backlog, 0),
            refresh: None,
        };
    }
    if backlog + cost * interval > tolerance {
        // The key's TAT was at least `known`: Redis refuses this too (unless units were
        // given back since).
        return Spend::Refused {
            decision: decision(bucket, backlog, cost),
        };
    }
    if !held.asking {
        // Fewer units left in the whole quota than this process leases at a time: wait until
        // that many are, rather than take them a round trip each.
        let available = (tolerance - backlog) / interval;
        // At most a sixteenth of the burst ([`MAX_WAIT_SHARE`]).
        let wanted = held
            .next_want(sizing, now, cost, 0)
            .min(sizing.max_lease)
            .min(tolerance / interval / MAX_WAIT_SHARE);
        if available < wanted {
            let mut waiting = decision(bucket, backlog, wanted);
            if waiting.is_allowed() {
                // Not expected (`available < wanted`); Redis decides then.
                return ask(held, sizing, now, cost, 0);
            }
            waiting = Decision::denied(
                available,
                nanos(waiting.retry_after()),
                nanos(waiting.reset_after()),
            );
            return Spend::Refused { decision: waiting };
        }
    }
    let floor = floor(interval, tolerance, held, sizing, now);
    ask(held, sizing, now, cost, floor)
}

fn nanos(duration: std::time::Duration) -> u64 {
    crate::time::duration_to_nanos_saturating(duration)
}

/// After a spend: the refresh to start when at most half of the last lease is left, none is
/// in flight, and the last answer left at least a unit in the quota.
fn low_water(interval: u64, tolerance: u64, held: &mut Held, sizing: &Sizing, now: u64) -> Option<Ask> {
    if held.asking || held.granted == 0 || usable(interval, held, now) * 2 > held.granted {
        return None;
    }
    let backlog = held.known.max(now) - now;
    if backlog + interval > tolerance {
        return None;
    }
    let floor = floor(interval, tolerance, held, sizing, now);
    refresh(held, sizing, now, floor)
}

/// Installs `granted` slots from `start` (the first `cost` of them the asking request's, if it
/// was admitted), at timeline time `now`; returns the units this process will never spend.
pub(super) fn install(interval: u64, held: &mut Held, cost: u64, granted: u64, start: u64, now: u64) -> u64 {
    let own = if granted > 0 { cost.min(granted) } else { 0 };
    held.spent += own;
    held.known = held.known.max(start + granted * interval);
    let (from, to) = (start + own * interval, start + granted * interval);
    let lease = granted - own;
    if start == held.to && held.from >= held.to && held.next_to == 0 {
        // Right after the current range, spent to its end: the request's slots and the lease
        // continue it (so that it still ends the key's queue, for a later grant or a give-back).
        held.from = from;
        held.to = to;
        if lease > 0 {
            held.granted = lease;
        }
        return 0;
    }
    if lease == 0 {
        return 0;
    }
    held.granted = lease;
    if units(interval, held.from, held.to, now) == 0 {
        // Nothing left of the current range (less than a slot): the next one, if any, is
        // spent first (its slots pass sooner), and the new one becomes the next.
        (held.from, held.to) = (held.next_from, held.next_to);
        (held.next_from, held.next_to) = (0, 0);
    }
    if units(interval, held.from, held.to, now) == 0 {
        held.from = from;
        held.to = to;
        return 0;
    }
    if from == held.to {
        held.to = to;
        return 0;
    }
    let next = units(interval, held.next_from, held.next_to, now);
    if next > 0 && from == held.next_to {
        held.next_to = to;
        return 0;
    }
    if next >= lease {
        // Two ranges held already, the second at least as large: this one passes unused.
        return lease;
    }
    held.next_from = from;
    held.next_to = to;
    next
}

/// The decision the script's answer makes for the request that asked: admitted iff the script
/// granted (a weightless request always is), the numbers the core's on the TAT before.
pub(super) fn answer(
    bucket: &TokenBucket,
    granted: u64,
    start: u64,
    now: u64,
    cost: u64,
) -> Option<Decision> {
    let backlog = start.checked_sub(now)?;
    let decision = decision(bucket, backlog, cost);
    let admitted = cost == 0 || granted >= cost;
    (decision.is_allowed() == admitted).then_some(decision)
}

/// The last range's unspent slots at `now`, taken out: `end` is the range's end as the script
/// left the TAT, `units` whole slots before it.
pub(super) fn give_back(interval: u64, held: &mut Held, now: u64) -> Option<GiveBack> {
    let last = if held.next_to > 0 {
        (&mut held.next_from, &mut held.next_to)
    } else {
        (&mut held.from, &mut held.to)
    };
    let units = units(interval, *last.0, *last.1, now);
    if units == 0 {
        return None;
    }
    let end = *last.1;
    *last.1 = end - units * interval;
    // Redis's TAT is now that, or later (another lease after this one): still a lower bound.
    held.known = *last.1;
    Some(GiveBack { end, units })
}
