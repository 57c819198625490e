//! The fixed window's lease: units added to one window's count in Redis, spent only within
//! that window.
//!
//! A lease of `g` units at `now` adds `g` to the count of the window `k` holding `now`
//! (`fixed_window_lease.lua`: only if `count + g <= limit`). This process spends them while its
//! timeline reading is before `k`'s end; since that reading is never behind the timeline, every
//! unit spent in window `k` was counted in `k` before it was spent, and no window's spent units
//! pass its count in Redis, at most the limit. Units left when the window ends pass unused;
//! while it lasts they can be given back (`fixed_window_return.lua`: subtracted while the key
//! still holds window `k`).

use super::{ask, refresh, GiveBack, Held, Sizing, Spend};
use crate::Decision;

/// Nanoseconds per microsecond.
const MICROS: u64 = 1_000;

/// An admission's numbers, as the per-decision script's reader makes them: `count` is the
/// window's count after it as this process knows it (its unspent units not counted).
fn admitted(limit: u64, count: u64, until_end: u64) -> Decision {
    let reset = if count > 0 {
        until_end.saturating_mul(MICROS)
    } else {
        0
    };
    Decision::allowed(limit.saturating_sub(count), reset, 0)
}

fn refused(limit: u64, count: u64, until_end: u64) -> Decision {
    let until_end = until_end.saturating_mul(MICROS);
    let reset = if count > 0 { until_end } else { 0 };
    Decision::denied(limit.saturating_sub(count), until_end, reset)
}

pub(super) fn spend(limit: u64, held: &mut Held, sizing: &Sizing, local: u64, cost: u64) -> Spend {
    let now = held.line(local, sizing);
    if held.anchored && now < held.to {
        let until_end = held.to - now;
        if held.left >= cost {
            held.left -= cost;
            held.spent += cost;
            let decision = admitted(limit, held.known.saturating_sub(held.left), until_end);
            let refresh =
                if !held.asking && held.granted > 0 && held.left * 2 <= held.granted && held.known < limit {
                    refresh(held, sizing, now)
                } else {
                    None
                };
            return Spend::Lease { decision, refresh };
        }
        if held.known + cost > limit {
            // The window's count was at least `known`: Redis refuses this too (unless units
            // were given back since).
            return Spend::Refused {
                decision: refused(limit, held.known.saturating_sub(held.left), until_end),
            };
        }
    }
    ask(held, sizing, now, cost)
}

/// Installs `granted` units added to the window ending at `end` whose count was `count` (the
/// first `cost` of them the asking request's, if it was admitted); returns the units this
/// process will never spend (granted in a window older than the one it holds).
pub(super) fn install(held: &mut Held, cost: u64, granted: u64, count: u64, end: u64) -> u64 {
    let own = if granted > 0 { cost.min(granted) } else { 0 };
    held.spent += own;
    let lease = granted - own;
    if end > held.to {
        // A later window: what was left of the earlier one passed with it.
        held.to = end;
        held.left = lease;
        held.known = count + granted;
    } else if end == held.to {
        held.left += lease;
        held.known = held.known.max(count + granted);
    } else {
        return lease;
    }
    if lease > 0 {
        held.granted = lease;
    }
    0
}

/// The decision the script's answer makes for the request that asked.
pub(super) fn answer(
    limit: u64,
    granted: u64,
    count: u64,
    end: u64,
    now: u64,
    cost: u64,
) -> Option<Decision> {
    let until_end = end.checked_sub(now)?;
    if cost == 0 || granted >= cost {
        let total = count.checked_add(cost).filter(|&total| total <= limit)?;
        Some(admitted(limit, total, until_end))
    } else if count + cost > limit {
        Some(refused(limit, count, until_end))
    } else {
        None
    }
}

/// What is left of the lease at `now`, taken out, while its window lasts.
pub(super) fn give_back(held: &mut Held, now: u64) -> Option<GiveBack> {
    if now >= held.to || held.left == 0 {
        return None;
    }
    let units = std::mem::take(&mut held.left);
    held.known -= units;
    Some(GiveBack { end: held.to, units })
}
