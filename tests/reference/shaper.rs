//! The leaky bucket shaper as a literal queue of slots.

use super::{first_true, Expected};

/// A leaky bucket shaper simulated slot by slot. Every admitted unit occupies one slot of
/// length `T`; slots are laid back to back: a request of weight `n` arriving at `now` starts at
/// `max(now, end of the last scheduled slot)` and takes the next `n` slots. It is accepted iff,
/// once scheduled, at most `burst - 1` (the queue size) units have a slot that starts strictly
/// after `now` (one may be served now; the others wait). Its `delay` is its start minus `now`.
///
/// - `remaining`: the largest `k` such that a request of weight `k` would be accepted at `now`
///   (found by trying every `k`);
/// - `retry_after` (refused): the first time the same request would be accepted (binary search
///   over the simulation, which only gets more permissive as time passes);
/// - `reset_after`: the time until the queue is empty (the last slot has ended).
#[derive(Clone, Debug)]
pub(crate) struct ShaperModel {
    interval: u64,
    burst: u64,
    /// Start times of the scheduled units still relevant (ascending; slots that ended before the
    /// latest decision's time are dropped, they can no longer matter).
    slots: Vec<u64>,
    last: Option<u64>,
}

impl ShaperModel {
    pub(crate) fn new(interval: u64, burst: u64) -> Self {
        assert!(interval > 0 && burst > 0);
        ShaperModel {
            interval,
            burst,
            slots: Vec::new(),
            last: None,
        }
    }

    /// When the last scheduled slot ends, if any slot is kept.
    fn last_end(&self) -> Option<u64> {
        self.slots.last().map(|start| start + self.interval)
    }

    /// Where a request of weight `cost` arriving at `now` would start, and how many units would
    /// then wait (have a slot starting strictly after `now`).
    fn schedule(&self, now: u64, cost: u64) -> (u64, u64) {
        let start = self.last_end().map_or(now, |end| end.max(now));
        let queued = self.slots.iter().filter(|&&s| s > now).count() as u64;
        let new = (0..cost).filter(|j| start + j * self.interval > now).count() as u64;
        (start, queued + new)
    }

    fn accepts(&self, now: u64, cost: u64) -> bool {
        self.schedule(now, cost).1 < self.burst
    }

    /// Decides a request of weight `cost` at `now`, and schedules it if accepted.
    pub(crate) fn decide(&mut self, now: u64, cost: u64) -> Expected {
        if let Some(last) = self.last {
            assert!(now >= last, "the shaper model needs monotone time");
        }
        self.last = Some(now);
        let interval = self.interval;
        self.slots.retain(|&start| start + interval > now);

        let (start, _) = self.schedule(now, cost);
        let allowed = self.accepts(now, cost);
        if allowed {
            self.slots.extend((0..cost).map(|j| start + j * interval));
        }
        let remaining = (0..=self.burst)
            .rev()
            .find(|&k| self.accepts(now, k))
            .expect("k = 0 always fits");
        let until_empty = self.last_end().map_or(0, |end| end.saturating_sub(now));
        let retry_after = if allowed {
            0
        } else {
            // By the time the queue is empty the request starts at once; search below that.
            first_true(0, until_empty, |d| self.accepts(now + d, cost))
        };
        Expected {
            allowed,
            remaining,
            retry_after,
            reset_after: until_empty,
            delay: if allowed { start - now } else { 0 },
        }
    }
}
