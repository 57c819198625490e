//! The leaky bucket shaper as a literal queue of slots.

use super::{first_true, BucketModel, Expected};

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
///
/// A slot given back ([`ShaperModel::refund_slot`]) leaves the queue only if it is its end (no
/// unit is scheduled after it): its units come off the end of the queue (those already begun
/// stay, and the queue then ends now). A slot in the middle stays where it is, unused: the
/// units behind it keep their places, and the next request still starts after the last.
#[derive(Clone, Debug)]
pub(crate) struct ShaperModel {
    interval: u64,
    burst: u64,
    /// Start times of the scheduled units still relevant (ascending; slots that ended before the
    /// latest decision's time are dropped, they can no longer matter).
    slots: Vec<u64>,
    /// When the queue ends: the end of the last slot scheduled, or earlier once a refund took
    /// the end back (never before the refund's time). `None`: nothing scheduled yet.
    end: Option<u64>,
    last: Option<u64>,
}

impl ShaperModel {
    pub(crate) fn new(interval: u64, burst: u64) -> Self {
        assert!(interval > 0 && burst > 0);
        ShaperModel {
            interval,
            burst,
            slots: Vec::new(),
            end: None,
            last: None,
        }
    }

    /// Changes the quota live at `now` to an emission interval `interval` and a burst `burst`:
    /// requests already given a slot keep it (the queue still ends where it did), and the queue
    /// counts from then on as the new interval's slots, laid back to back up to that end (as
    /// many as cover it), so that later requests queue after it and the new burst bounds it.
    pub(crate) fn retune(&mut self, now: u64, interval: u64, burst: u64) {
        assert!(interval > 0 && burst > 0);
        if let Some(last) = self.last {
            assert!(now >= last, "the shaper model needs monotone time");
        }
        self.last = Some(now);
        self.interval = interval;
        self.burst = burst;
        self.slots.clear();
        if let Some(end) = self.end.filter(|&end| end > now) {
            let units = (end - now).div_ceil(interval);
            // A slot that would start before the epoch starts there: it has begun either way.
            self.slots
                .extend((1..=units).rev().map(|k| end.saturating_sub(k * interval)));
        }
    }

    /// When the queue ends, if anything was scheduled.
    fn last_end(&self) -> Option<u64> {
        self.end
    }

    /// Gives back the slot of `cost` units that ended the queue at `end`, at `now`, if it still
    /// ends it (and is not over): returns whether anything was given back.
    pub(crate) fn refund_slot(&mut self, now: u64, cost: u64, end: u64) -> bool {
        if let Some(last) = self.last {
            assert!(now >= last, "the shaper model needs monotone time");
        }
        self.last = Some(now);
        if self.end != Some(end) || end <= now || cost == 0 {
            return false;
        }
        let back = end.saturating_sub(cost * self.interval).max(now);
        // Its units not begun by `now` come off the end of the queue.
        self.slots.retain(|&start| start < back);
        self.end = Some(back);
        true
    }

    /// Where a request of weight `cost` arriving at `now` would start, and how many units would
    /// then wait (have a slot starting strictly after `now`).
    fn schedule(&self, now: u64, cost: u64) -> (u64, u64) {
        let start = self.last_end().map_or(now, |end| end.max(now));
        let queued = self.slots.iter().filter(|&&s| s > now).count() as u64;
        let new = (0..cost).filter(|j| start + j * self.interval > now).count() as u64;
        (start, queued + new)
    }

    /// A weightless request takes no slot: always accepted (also behind a queue longer than
    /// a burst lowered live allows).
    fn accepts(&self, now: u64, cost: u64) -> bool {
        cost == 0 || self.schedule(now, cost).1 < self.burst
    }

    /// Decides a request of weight `cost` at `now` that may wait at most `max_delay` for its
    /// start: one that would wait longer is refused and nothing is scheduled; it is told that
    /// no request passes now within the maximum, and to come back at the first time its wait
    /// would fit (searched over the simulation). Any other answer is `decide`'s.
    pub(crate) fn decide_within(&mut self, now: u64, cost: u64, max_delay: u64) -> Expected {
        let mut tried = self.clone();
        let expected = tried.decide(now, cost);
        let backlog = self.schedule(now, 0).0 - now;
        if backlog <= max_delay {
            *self = tried;
            return expected;
        }
        self.last = Some(now);
        let wait = |d: u64| self.schedule(now + d, cost).0 - (now + d);
        let until_empty = self.last_end().map_or(0, |end| end.saturating_sub(now));
        // The first time the request both fits the queue and waits no longer than the maximum.
        let retry_after = match expected.allowed {
            true => first_true(0, until_empty, |d| wait(d) <= max_delay),
            false => expected
                .retry_after
                .max(first_true(0, until_empty, |d| wait(d) <= max_delay)),
        };
        Expected {
            allowed: false,
            remaining: 0,
            retry_after,
            reset_after: until_empty,
            delay: 0,
        }
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
        if allowed && cost > 0 {
            self.slots.extend((0..cost).map(|j| start + j * interval));
            self.end = Some(start + cost * interval);
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

impl BucketModel for ShaperModel {
    fn new(interval: u64, burst: u64) -> Self {
        ShaperModel::new(interval, burst)
    }

    fn decide(&mut self, now: u64, cost: u64) -> Expected {
        ShaperModel::decide(self, now, cost)
    }

    fn describe(&self) -> String {
        String::new()
    }
}
