//! The lease scripts, their arguments and their replies.

use std::sync::LazyLock;

use redis::Value;

use super::ledger::{Grant, LeaseRule};
use crate::distributed::script::LuaScript;

/// `gcra_lease.lua`: a lease of a token bucket's slots.
pub(super) static GCRA_LEASE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(include_str!("gcra_lease.lua")));

/// `fixed_window_lease.lua`: a lease of a fixed window's units.
pub(super) static FIXED_WINDOW_LEASE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(include_str!("fixed_window_lease.lua")));

/// `sliding_window.lua`, whose `'lease'` mode leases a sliding window counter's units.
pub(super) static SLIDING_WINDOW_LEASE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(crate::distributed::algorithm::SLIDING_WINDOW_SCRIPT));

/// `window_return.lua`: a fixed window's (or a sliding window counter's) unspent units
/// given back.
pub(super) static WINDOW_RETURN: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(include_str!("window_return.lua")));

/// The script that leases for `rule`.
pub(super) fn lease_script(rule: &LeaseRule) -> &'static LuaScript {
    match rule {
        LeaseRule::Bucket { .. } => &GCRA_LEASE,
        LeaseRule::Window { sliding: None, .. } => &FIXED_WINDOW_LEASE,
        LeaseRule::Window { sliding: Some(_), .. } => &SLIDING_WINDOW_LEASE,
    }
}

/// The argument that puts the lease script in its lease mode, before the units asked for: the
/// sliding window counter's script decides requests too.
pub(super) fn lease_mode(rule: &LeaseRule) -> Option<&'static [u8]> {
    match rule {
        LeaseRule::Window { sliding: Some(_), .. } => Some(b"lease"),
        _ => None,
    }
}

/// The script that gives units back for `rule`: the bucket's is `gcra_refund.lua` with the
/// range's end (given back only while it still ends the key's queue).
pub(super) fn give_back_script(rule: &LeaseRule) -> &'static LuaScript {
    match rule {
        LeaseRule::Bucket { .. } => &crate::distributed::algorithm::GCRA_REFUND,
        LeaseRule::Window { .. } => &WINDOW_RETURN,
    }
}

/// A lease script's reply: `N` little-endian `i64`s.
fn integers<const N: usize>(reply: &Value) -> Option<[i64; N]> {
    let Value::BulkString(bytes) = reply else {
        return None;
    };
    if bytes.len() != N * 8 {
        return None;
    }
    let mut numbers = [0; N];
    for (number, chunk) in numbers.iter_mut().zip(bytes.chunks_exact(8)) {
        *number = i64::from_le_bytes(chunk.try_into().ok()?);
    }
    Some(numbers)
}

/// A lease script's reply: `N` little-endian `i64`s, each at least 0.
fn naturals<const N: usize>(reply: &Value) -> Option<[u64; N]> {
    let numbers = integers::<N>(reply)?;
    let mut naturals = [0; N];
    for (natural, number) in naturals.iter_mut().zip(numbers) {
        *natural = u64::try_from(number).ok()?;
    }
    Some(naturals)
}

/// What a lease script answered to an ask of `want` units for a request of weight `cost`:
/// `None` for a reply of another shape, or one no script of ours makes (more than asked, less
/// than the request when granting, a window that ended before `now`).
pub(super) fn grant(rule: &LeaseRule, reply: &Value, cost: u64, want: u64) -> Option<Grant> {
    let plausible = |granted: u64| granted <= want && (granted == 0 || granted >= cost);
    match rule {
        LeaseRule::Bucket { .. } => {
            let [granted, start, now] = naturals(reply)?;
            (plausible(granted) && start >= now).then_some(Grant::Bucket { granted, start, now })
        }
        LeaseRule::Window { sliding: None, .. } => {
            let [granted, count, end, now] = naturals(reply)?;
            (plausible(granted) && end > now).then_some(Grant::Window {
                granted,
                count,
                previous: 0,
                end,
                now,
            })
        }
        LeaseRule::Window {
            length,
            sliding: Some(_),
            ..
        } => {
            // `sliding_window.lua`'s reply, then the time it read: the window's start is
            // `start - now` from it (after it only if a client's clock went back).
            let [granted, previous, count, start, now] = integers(reply)?;
            let [granted, previous, count, now] =
                [granted, previous, count, now].map(|n| u64::try_from(n).ok());
            let (granted, previous, count, now) = (granted?, previous?, count?, now?);
            let end = now.checked_add_signed(start)?.checked_add(*length)?;
            (plausible(granted) && end > now).then_some(Grant::Window {
                granted,
                count,
                previous,
                end,
                now,
            })
        }
    }
}
