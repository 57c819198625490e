//! The fixed window counter as a map from window to count.

use std::collections::BTreeMap;

use super::Expected;

/// A fixed window counter: windows `[k*w, (k+1)*w)` aligned to the UNIX epoch (`t = 0`), a map
/// `k -> units admitted in window k`. A request of weight `n` at `t` is admitted iff
/// `count[t / w] + n <= limit`.
///
/// - `remaining`: `limit - count[t / w]` after the decision;
/// - `retry_after` (refused): the time until the next window starts (nothing is admitted in it
///   yet, and any weight up to the limit fits an empty window);
/// - `reset_after`: zero if the current window is empty, else the time until it ends.
///
/// A limit changed live ([`FixedWindowModel::set_limit`]) keeps every count: a window holding
/// more than a lowered limit has nothing remaining until it ends.
#[derive(Clone, Debug)]
pub(crate) struct FixedWindowModel {
    window: u64,
    limit: u64,
    counts: BTreeMap<u64, u64>,
}

impl FixedWindowModel {
    pub(crate) fn new(window: u64, limit: u64) -> Self {
        FixedWindowModel {
            window,
            limit,
            counts: BTreeMap::new(),
        }
    }

    /// Changes the limit live; the counts stay.
    pub(crate) fn set_limit(&mut self, limit: u64) {
        self.limit = limit;
    }

    /// Units admitted in window `k`.
    pub(crate) fn count(&self, k: u64) -> u64 {
        self.counts.get(&k).copied().unwrap_or(0)
    }

    /// Decides a request of weight `cost` at `now`, and counts it if admitted. Time may go back:
    /// the map decides each request in the window its own timestamp falls in.
    pub(crate) fn decide(&mut self, now: u64, cost: u64) -> Expected {
        let k = now / self.window;
        let allowed = self.count(k) + cost <= self.limit;
        if allowed {
            *self.counts.entry(k).or_insert(0) += cost;
        }
        let count = self.count(k);
        let next_window =
            u64::try_from((u128::from(k) + 1) * u128::from(self.window) - u128::from(now)).expect("in range");
        Expected {
            allowed,
            remaining: self.limit.saturating_sub(count),
            retry_after: if allowed { 0 } else { next_window },
            reset_after: if count == 0 { 0 } else { next_window },
            delay: 0,
        }
    }
}
