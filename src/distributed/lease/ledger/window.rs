//! The window's lease (the fixed window, and the sliding window counter): units added to one
//! window's count in Redis, spent only within that window.
//!
//! A lease of `g` units at `now` adds `g` to the count of the window `k` holding `now`
//! (`fixed_window_lease.lua`: only if `count + g <= limit`; `sliding_window.lua`'s lease: only
//! if `previous * (w - e) + (count + g) * w <= limit * w`, `e` the time into `k`). This process
//! spends them while its timeline reading is before `k`'s end; since that reading is never
//! behind the timeline, every unit spent in window `k` was counted in `k` before it was spent,
//! and no window's spent units pass its count in Redis, at most the limit. For the sliding
//! window counter, a unit spent at `t` in `k` meets the same counts as its grant, or larger
//! ones counted since (every grant in `k` was checked against all counted before it), and a
//! smaller weight of the previous window (`w - e` only shrinks): the count it is spent under
//! passes the limit no more than its grant's did. Units left when the window ends pass unused;
//! while it lasts they can be given back (`window_return.lua`: subtracted while the key
//! still holds window `k`).

use super::{ask, refresh, GiveBack, Held, Sizing, Spend, FREE_SHARE};
use crate::{Decision, SlidingWindow};

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

/// The least a sized ask wants at `now`: the units the window the lease is asked in had free at
/// the key's last answer, spread evenly over what is left of that window, one lease interval's
/// share (`free * interval / left`; a window past `held`'s: the whole limit over a whole
/// window), and at most an eighth of them ([`FREE_SHARE`]). So a key spent slowly still holds a
/// lease that lasts an interval, and a process that stops spending holds no more than the quota
/// would give it over one interval.
fn floor(limit: u64, length: u64, held: &Held, sizing: &Sizing, now: u64) -> u64 {
    let (free, left) = if now < held.to {
        (limit.saturating_sub(held.known), held.to - now)
    } else {
        (limit, length)
    };
    // No overflow in 128 bits: `free` is at most 2^51 units and the interval at most 2^51 µs.
    let share = u128::from(free) * u128::from(sizing.interval) / u128::from(left.max(1));
    u64::try_from(share).unwrap_or(u64::MAX).min(free / FREE_SHARE)
}

/// The sliding window counter's decision for `cost` units on `current` counted in the window
/// of `length` µs ending at `held.to`, at `now`, if the core's verdict is `admitted`.
fn weighed(
    window: &SlidingWindow,
    length: u64,
    held: &Held,
    current: u64,
    now: u64,
    cost: u64,
    admitted: bool,
) -> Option<Decision> {
    let start = held.to.checked_sub(length)?;
    let (ahead, elapsed) = (start.saturating_sub(now), now.saturating_sub(start));
    let decision = window.decide_placed(
        held.previous,
        current,
        ahead.checked_mul(MICROS)?,
        elapsed.checked_mul(MICROS)?,
        cost,
    )?;
    (decision.is_allowed() == admitted).then_some(decision)
}

pub(super) fn spend(
    limit: u64,
    length: u64,
    sliding: Option<&SlidingWindow>,
    held: &mut Held,
    sizing: &Sizing,
    local: u64,
    cost: u64,
) -> Spend {
    let now = held.line(local, sizing);
    if held.anchored && now < held.to {
        let until_end = held.to - now;
        // The window's count as this process knows it, its unspent units not counted.
        let counted = held.known.saturating_sub(held.left);
        if held.left >= cost {
            let decision = match sliding {
                None => Some(admitted(limit, counted + cost, until_end)),
                Some(window) => weighed(window, length, held, counted, now, cost, true),
            };
            // `None`: the core disagrees (never expected), and Redis decides.
            if let Some(decision) = decision {
                held.left -= cost;
                held.spent += cost;
                // A refresh only while Redis, on what it last said, has a unit to grant (the
                // sliding window's estimate is computed only once the lease runs low).
                let low = !held.asking && held.granted > 0 && held.left * 2 <= held.granted;
                let grants = || match sliding {
                    None => held.known < limit,
                    Some(window) => weighed(window, length, held, held.known, now, 1, true).is_some(),
                };
                let refresh = if low && grants() {
                    refresh(held, sizing, now, floor(limit, length, held, sizing, now))
                } else {
                    None
                };
                return Spend::Lease { decision, refresh };
            }
        } else {
            // The window's count was at least `known`: Redis refuses this too (unless units
            // were given back since).
            let refusal = match sliding {
                None => (held.known + cost > limit).then(|| refused(limit, counted, until_end)),
                Some(window) => weighed(window, length, held, held.known, now, cost, false),
            };
            if let Some(decision) = refusal {
                return Spend::Refused { decision };
            }
        }
    }
    let floor = floor(limit, length, held, sizing, now);
    ask(held, sizing, now, cost, floor)
}

/// Installs `granted` units added to the window ending at `end` whose count was `count`, after
/// a previous window of `previous` (the first `cost` of them the asking request's, if it was
/// admitted); returns the units this process will never spend (granted in a window older than
/// the one it holds).
pub(super) fn install(held: &mut Held, cost: u64, granted: u64, count: u64, previous: u64, end: u64) -> u64 {
    let own = if granted > 0 { cost.min(granted) } else { 0 };
    held.spent += own;
    let lease = granted - own;
    if end > held.to {
        // A later window: what was left of the earlier one passed with it.
        held.to = end;
        held.left = lease;
        held.known = count + granted;
        held.previous = previous;
    } else if end == held.to {
        held.left += lease;
        held.known = held.known.max(count + granted);
        held.previous = held.previous.max(previous);
    } else {
        return lease;
    }
    if lease > 0 {
        held.granted = lease;
    }
    0
}

/// The decision the script's answer makes for the request that asked.
#[allow(clippy::too_many_arguments)] // the grant's fields, as `Grant::Window` holds them
pub(super) fn answer(
    limit: u64,
    length: u64,
    sliding: Option<&SlidingWindow>,
    granted: u64,
    count: u64,
    previous: u64,
    end: u64,
    now: u64,
    cost: u64,
) -> Option<Decision> {
    let until_end = end.checked_sub(now)?;
    let admitted_here = cost == 0 || granted >= cost;
    if let Some(window) = sliding {
        let held = Held {
            to: end,
            previous,
            ..Held::default()
        };
        return weighed(window, length, &held, count, now, cost, admitted_here);
    }
    if admitted_here {
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
