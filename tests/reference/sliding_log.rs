//! The sliding window log as a plain list of every admitted request.

use super::Expected;

/// A sliding window log: every admitted request `(time, weight)`, in the order admitted. A
/// request of weight `n` at `t` is admitted iff the weight admitted in `(t - w, t]` plus `n` is
/// at most `limit` (computed in `i128`, so `t - w` may be negative).
///
/// - `remaining`: `limit` minus the weight in `(t - w, t]` after the decision;
/// - `retry_after` (refused): the first instant `t' >= t` at which the weight in
///   `(t' - w, t']` plus `n` is at most `limit`, found by trying `t` and every instant an
///   admitted request leaves the window (`time + w`, the only instants the weight drops),
///   minus `t`; `u64::MAX` when that instant is past `u64::MAX`, or the weight exceeds `limit`;
/// - `reset_after`: zero if nothing is in the window, else when the latest request in it
///   leaves (`time + w - t`, or `u64::MAX` past the end of representable time).
///
/// A limit and window changed live ([`SlidingLogModel::set_quota`]) keep every admitted
/// request: each counts while it is inside the new window, against the new limit (a weight
/// above a lowered limit leaves nothing remaining).
#[derive(Clone, Debug)]
pub(crate) struct SlidingLogModel {
    window: u64,
    limit: u64,
    admitted: Vec<(u64, u64)>,
}

impl SlidingLogModel {
    pub(crate) fn new(window: u64, limit: u64) -> Self {
        SlidingLogModel {
            window,
            limit,
            admitted: Vec::new(),
        }
    }

    /// Changes the limit and the window live; the admitted requests stay.
    pub(crate) fn set_quota(&mut self, window: u64, limit: u64) {
        self.window = window;
        self.limit = limit;
    }

    /// The latest time a request was admitted at (with a weight), if any.
    pub(crate) fn latest(&self) -> Option<u64> {
        self.admitted.iter().map(|&(time, _)| time).max()
    }

    /// The weight admitted in `(at - w, at]`.
    pub(crate) fn weight_in_window(&self, at: u64) -> u64 {
        let start = i128::from(at) - i128::from(self.window);
        self.admitted
            .iter()
            .filter(|&&(time, _)| i128::from(time) > start && time <= at)
            .map(|&(_, weight)| weight)
            .sum()
    }

    /// Nanoseconds from `at` until `instant` (which is at or after `at`), `u64::MAX` past the end
    /// of representable time.
    fn until(instant: u128, at: u64) -> u64 {
        if instant > u128::from(u64::MAX) {
            u64::MAX
        } else {
            u64::try_from(instant - u128::from(at)).expect("at or after `at`")
        }
    }

    /// Decides a request of weight `cost` at `now` (never before an earlier admission), and
    /// records it if admitted with a weight.
    pub(crate) fn decide(&mut self, now: u64, cost: u64) -> Expected {
        assert!(
            self.latest().is_none_or(|latest| latest <= now),
            "the model takes time in order"
        );
        // A weightless request asks for nothing: it passes even above a limit lowered live.
        let allowed = cost == 0 || self.weight_in_window(now) + cost <= self.limit;
        if allowed && cost > 0 {
            self.admitted.push((now, cost));
        }
        let weight = self.weight_in_window(now);
        let window = u128::from(self.window);
        let retry_after = if allowed {
            0
        } else if cost > self.limit {
            u64::MAX
        } else {
            // The weight in the window only drops when a request leaves it: try those instants.
            let mut leaving: Vec<u128> = self
                .admitted
                .iter()
                .map(|&(time, _)| u128::from(time) + window)
                .filter(|&leaves| leaves > u128::from(now))
                .collect();
            leaving.sort_unstable();
            let fits = |instant: u128| {
                let weight: u64 = self
                    .admitted
                    .iter()
                    .filter(|&&(time, _)| u128::from(time) + window > instant)
                    .map(|&(_, weight)| weight)
                    .sum();
                weight + cost <= self.limit
            };
            let first = leaving
                .into_iter()
                .find(|&instant| fits(instant))
                .expect("once every request has left, any weight up to the limit fits");
            Self::until(first, now)
        };
        let latest_in_window = self
            .admitted
            .iter()
            .filter(|&&(time, _)| u128::from(time) + window > u128::from(now))
            .map(|&(time, _)| time)
            .max();
        Expected {
            allowed,
            remaining: self.limit.saturating_sub(weight),
            retry_after,
            reset_after: latest_in_window.map_or(0, |time| Self::until(u128::from(time) + window, now)),
            delay: 0,
        }
    }
}
