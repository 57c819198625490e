//! The sliding window counter as per-window counts and an exact rational estimate.

use std::collections::BTreeMap;

use num_rational::Ratio;

use super::{first_true, Expected};

/// A sliding window counter: per-window counts for windows `[k*w, (k+1)*w)` aligned to the
/// UNIX epoch. At time `t`, `elapsed` into window `k`, the estimate is
/// `count[k] + count[k-1] * (w - elapsed) / w` (an exact rational). A request of weight `n` is
/// admitted iff `estimate + n <= limit`, and is then counted in window `k`.
///
/// - `remaining`: `floor(limit - estimate)` after the decision;
/// - `retry_after` (refused): the first time the same request would pass, and `reset_after`:
///   the first time the estimate is zero. Both by binary search over whole nanoseconds: with
///   nothing admitted the estimate never increases with time, and two windows on it is zero.
///
/// Time may step back within the latest window counted in (the estimate is a function of the
/// counts and the time), but not into an earlier window (the model asserts it).
///
/// A limit changed live ([`SlidingWindowModel::set_limit`]) keeps every count: the estimate is
/// weighed against the new limit from then on.
#[derive(Clone, Debug)]
pub(crate) struct SlidingWindowModel {
    window: u64,
    limit: u64,
    counts: BTreeMap<u64, u64>,
}

impl SlidingWindowModel {
    pub(crate) fn new(window: u64, limit: u64) -> Self {
        SlidingWindowModel {
            window,
            limit,
            counts: BTreeMap::new(),
        }
    }

    /// Changes the limit live; the counts stay.
    pub(crate) fn set_limit(&mut self, limit: u64) {
        self.limit = limit;
    }

    /// Units counted in window `k`.
    pub(crate) fn count(&self, k: u64) -> u64 {
        self.counts.get(&k).copied().unwrap_or(0)
    }

    /// The estimate at time `t`.
    pub(crate) fn estimate(&self, t: u64) -> Ratio<u128> {
        let k = t / self.window;
        let elapsed = t - k * self.window;
        let previous = if k == 0 { 0 } else { self.count(k - 1) };
        let w = u128::from(self.window);
        Ratio::from_integer(u128::from(self.count(k)))
            + Ratio::new(u128::from(previous) * (w - u128::from(elapsed)), w)
    }

    /// A weightless request always passes (it asks for nothing, even when a step back in time
    /// puts the estimate above the limit); any other passes iff the estimate plus it fits.
    fn passes(&self, t: u64, cost: u64) -> bool {
        cost == 0
            || self.estimate(t) + Ratio::from_integer(u128::from(cost))
                <= Ratio::from_integer(u128::from(self.limit))
    }

    /// Decides a request of weight `cost` at `now` and counts it if admitted; returns whether it
    /// was (without the timings: usable up to the end of representable time).
    pub(crate) fn admit(&mut self, now: u64, cost: u64) -> bool {
        // The estimate only looks at windows up to `now`'s: nothing may be counted after it.
        assert!(
            self.counts.range(now / self.window + 1..).next().is_none(),
            "the sliding window model cannot go back to a window before one it has counted in"
        );
        let allowed = self.passes(now, cost);
        // A weightless request counts nothing (and marks no window as counted in).
        if allowed && cost > 0 {
            *self.counts.entry(now / self.window).or_insert(0) += cost;
        }
        allowed
    }

    /// Whole units that would pass at `now`: `floor(limit - estimate)`.
    pub(crate) fn remaining(&self, now: u64) -> u64 {
        let limit = Ratio::from_integer(u128::from(self.limit));
        let estimate = self.estimate(now);
        if estimate <= limit {
            u64::try_from((limit - estimate).floor().to_integer()).expect("at most limit")
        } else {
            0
        }
    }

    /// Decides a request of weight `cost` at `now`, and counts it if admitted.
    pub(crate) fn decide(&mut self, now: u64, cost: u64) -> Expected {
        let allowed = self.admit(now, cost);
        let remaining = self.remaining(now);
        // Two windows after `now` nothing admitted so far counts any more.
        let horizon = 2 * self.window;
        let retry_after = if allowed {
            0
        } else {
            first_true(0, horizon, |d| self.passes(now + d, cost))
        };
        let zero = Ratio::from_integer(0);
        let reset_after = first_true(0, horizon, |d| self.estimate(now + d) == zero);
        Expected {
            allowed,
            remaining,
            retry_after,
            reset_after,
            delay: 0,
        }
    }
}
