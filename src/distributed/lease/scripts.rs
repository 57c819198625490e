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

/// `fixed_window_return.lua`: a fixed window's unspent units given back.
pub(super) static FIXED_WINDOW_RETURN: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(include_str!("fixed_window_return.lua")));

/// The script that leases for `rule`.
pub(super) fn lease_script(rule: &LeaseRule) -> &'static LuaScript {
    match rule {
        LeaseRule::Bucket { .. } => &GCRA_LEASE,
        LeaseRule::Window { .. } => &FIXED_WINDOW_LEASE,
    }
}

/// The script that gives units back for `rule`: the bucket's is `gcra_refund.lua` with the
/// range's end (given back only while it still ends the key's queue).
pub(super) fn give_back_script(rule: &LeaseRule) -> &'static LuaScript {
    match rule {
        LeaseRule::Bucket { .. } => &crate::distributed::algorithm::GCRA_REFUND,
        LeaseRule::Window { .. } => &FIXED_WINDOW_RETURN,
    }
}

/// A lease script's reply: `N` little-endian `i64`s, each at least 0.
fn naturals<const N: usize>(reply: &Value) -> Option<[u64; N]> {
    let Value::BulkString(bytes) = reply else {
        return None;
    };
    if bytes.len() != N * 8 {
        return None;
    }
    let mut numbers = [0; N];
    for (number, chunk) in numbers.iter_mut().zip(bytes.chunks_exact(8)) {
        *number = u64::try_from(i64::from_le_bytes(chunk.try_into().ok()?)).ok()?;
    }
    Some(numbers)
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
        LeaseRule::Window { .. } => {
            let [granted, count, end, now] = naturals(reply)?;
            (plausible(granted) && end > now).then_some(Grant::Window {
                granted,
                count,
                end,
                now,
            })
        }
    }
}
