//! The leaky bucket shaper with slots of exactly `period / count` ns: a rational slot length.

use num_rational::Ratio;

use super::{first_true, Expected};

/// A leaky bucket shaper whose unit slots are exactly `T = period / count` ns long (a rational
/// number): the model of a shaper whose rate whole nanoseconds cannot hold.
///
/// Slots are laid back to back, as in the slot-by-slot [`ShaperModel`](super::shaper::ShaperModel):
/// a request of weight `n` arriving at `now` starts at `max(now, end)`, `end` the end of the
/// last slot scheduled, and takes the next `n` slots. It is accepted iff, once scheduled, at
/// most `burst - 1` units have a slot that starts strictly after `now`. Instead of one entry
/// per slot (bursts here reach `u32::MAX`), the queue is its end: the run of back-to-back slots
/// that ends at `end` began at the time of the request that began it, not after `now`, so the
/// slots that start after `now` are the ones at `end - k*T`, `k >= 1`, with `k*T < end - now`:
/// `ceil((end - now) / T) - 1` of them while `end > now`, none after.
///
/// Every answer is in whole nanoseconds, rounded up where it is a wait (a request never
/// proceeds before its slot, nor is told to come back before it fits):
///
/// - `delay` (accepted): its start minus `now`, rounded up;
/// - `remaining`: the largest `k` such that a request of weight `k` would be accepted at `now`
///   (binary search: accepting is monotone in `k`);
/// - `retry_after` (refused): the first whole nanosecond at which the same request would be
///   accepted (binary search over the model, which only gets more permissive as time passes);
/// - `reset_after`: the time until the queue is empty (the last slot has ended), rounded up.
///
/// A slot is never given back: the wide shaper gives nothing back (`refund_slot`, `refund_n`,
/// `undo` return `false`).
#[derive(Clone, Debug)]
pub(crate) struct ExactShaperModel {
    interval: Ratio<i128>,
    burst: u64,
    /// When the queue ends; `None`: nothing scheduled yet.
    end: Option<Ratio<i128>>,
    last: Option<u64>,
}

fn at(now: u64) -> Ratio<i128> {
    Ratio::from_integer(i128::from(now))
}

/// `span` ns rounded up to whole nanoseconds (0 for a span not after now).
fn nanos_up(span: Ratio<i128>) -> u64 {
    u64::try_from(span.ceil().to_integer().max(0)).expect("waits fit in u64 ns")
}

impl ExactShaperModel {
    /// A shaper draining exactly `count` per `period` ns, accepting `burst` at one instant.
    pub(crate) fn new(count: u64, period: u64, burst: u64) -> Self {
        assert!(count > 0 && period > 0 && burst > 0);
        ExactShaperModel {
            interval: Ratio::new(i128::from(period), i128::from(count)),
            burst,
            end: None,
            last: None,
        }
    }

    fn advance(&mut self, now: u64) {
        if let Some(last) = self.last {
            assert!(now >= last, "the shaper model needs monotone time");
        }
        self.last = Some(now);
    }

    /// Where a request arriving at `now` starts. (Times are rationals here: a search may look
    /// past `u64::MAX` ns, where a queue near the end of time ends.)
    fn start(&self, now: Ratio<i128>) -> Ratio<i128> {
        self.end.map_or(now, |end| end.max(now))
    }

    /// Units whose slot starts strictly after `now`, once a request of weight `cost` arriving
    /// at `now` is scheduled.
    fn waiting(&self, now: Ratio<i128>, cost: u64) -> u64 {
        let queued = match self.end {
            Some(end) if end > now => {
                u64::try_from(((end - now) / self.interval).ceil().to_integer() - 1).expect("a count")
            }
            _ => 0,
        };
        // Its units start at `start + j*T`: all after `now` if it waits, all but the first if not.
        let new = match self.start(now) > now {
            true => cost,
            false => cost.saturating_sub(1),
        };
        queued + new
    }

    /// A weightless request takes no slot: always accepted.
    fn accepts(&self, now: Ratio<i128>, cost: u64) -> bool {
        cost == 0 || self.waiting(now, cost) < self.burst
    }

    /// Nanoseconds from `now` until the queue is empty.
    fn until_empty(&self, now: u64) -> u64 {
        self.end.map_or(0, |end| nanos_up(end - at(now)))
    }

    /// Decides a request of weight `cost` at `now`, and schedules it if accepted.
    pub(crate) fn decide(&mut self, now: u64, cost: u64) -> Expected {
        self.advance(now);
        let start = self.start(at(now));
        let allowed = self.accepts(at(now), cost);
        if allowed && cost > 0 {
            self.end = Some(start + self.interval * Ratio::from_integer(i128::from(cost)));
        }
        // The first weight refused, less one (a weight of `burst + 1` never fits).
        let remaining = first_true(0, self.burst + 1, |k| !self.accepts(at(now), k)) - 1;
        let until_empty = self.until_empty(now);
        let retry_after = match allowed {
            true => 0,
            // By the time the queue is empty the request starts at once; search below that.
            false => first_true(0, until_empty, |d| self.accepts(at(now) + at(d), cost)),
        };
        Expected {
            allowed,
            remaining,
            retry_after,
            reset_after: until_empty,
            delay: if allowed { nanos_up(start - at(now)) } else { 0 },
        }
    }

    /// Decides a request of weight `cost` at `now` that may wait at most `max_delay` ns for
    /// its start (its delay, rounded up, at most `max_delay`): one that would wait longer is
    /// refused and nothing is scheduled; it is told that no request passes now within the
    /// maximum, and to come back at the first whole nanosecond its wait fits (and, if the queue
    /// is full too, it fits the queue). Any other answer is `decide`'s.
    pub(crate) fn decide_within(&mut self, now: u64, cost: u64, max_delay: u64) -> Expected {
        let mut tried = self.clone();
        let expected = tried.decide(now, cost);
        if nanos_up(self.start(at(now)) - at(now)) <= max_delay {
            *self = tried;
            return expected;
        }
        self.advance(now);
        let until_empty = self.until_empty(now);
        let wait = |d: u64| {
            let then = at(now) + at(d);
            nanos_up(self.start(then) - then)
        };
        let fits = first_true(0, until_empty, |d| wait(d) <= max_delay);
        Expected {
            allowed: false,
            remaining: 0,
            retry_after: match expected.allowed {
                true => fits,
                false => expected.retry_after.max(fits),
            },
            reset_after: until_empty,
            delay: 0,
        }
    }
}
