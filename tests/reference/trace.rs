//! Random request traces, and driving a limiter through one request.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use tollgate::algorithm::Algorithm;
use tollgate::{Clock, DirectLimiter, ManualClock, Timestamp};

use super::Expected;

/// Half of representable time: traces start safely below it.
pub(crate) const HALF: u64 = u64::MAX / 2;

/// Where a trace starts: a raw offset, and whether to move it onto (or just before) a multiple
/// of the trace's time unit.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Start {
    raw: u64,
    align: u8,
}

impl Start {
    /// The first request's time for a trace whose time unit (emission interval or window) is
    /// `unit`.
    pub(crate) fn at(self, unit: u64) -> u64 {
        let aligned = self.raw / unit * unit;
        match self.align % 3 {
            0 => self.raw,
            1 => aligned,
            _ => aligned.saturating_sub(1),
        }
    }

    /// The first request's time for a trace that runs into the end of representable time: within
    /// `100 * unit` ns of `u64::MAX` (unaligned, aligned, or just before a boundary).
    pub(crate) fn near_the_end(self, unit: u64) -> u64 {
        let raw = u64::MAX - self.raw % (100 * unit + 1);
        Start {
            raw,
            align: self.align,
        }
        .at(unit)
    }
}

/// The epoch itself, small offsets, and large ones (up to 2^52 ns below `u64::MAX / 2`, far more
/// than any trace advances), each unaligned, aligned, or one nanosecond before a boundary.
pub(crate) fn start() -> impl Strategy<Value = Start> {
    (
        prop_oneof![
            Just(0u64),
            0..(1u64 << 40),
            (HALF - (1u64 << 52))..(HALF - (1u64 << 49)),
        ],
        any::<u8>(),
    )
        .prop_map(|(raw, align)| Start { raw, align })
}

/// One request of a trace: how far time moves before it, and its weight.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Op {
    step: u8,
    raw: u64,
    cost: u8,
}

/// Traces of 1 to `max_len` requests.
pub(crate) fn ops(max_len: usize) -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(
        (any::<u8>(), any::<u64>(), any::<u8>()).prop_map(|(step, raw, cost)| Op { step, raw, cost }),
        1..=max_len,
    )
}

impl Op {
    /// This request's time, never before the previous request's `now`, on the scale of `unit`
    /// ns: often the same instant (bursts), a few ns, a fraction of a unit, whole units, a long
    /// idle time, or to one nanosecond around the next multiple of `unit`; saturating at
    /// `u64::MAX`.
    pub(crate) fn forward(&self, now: u64, unit: u64) -> u64 {
        let r = self.raw;
        let step = match self.step % 10 {
            0..=2 => 0,
            3 => r % 3,
            4 => r % (unit / 4 + 1),
            5 => r % (unit + 1),
            6 => unit * (1 + r % 3),
            7 => r % (3 * unit + 1),
            8 => r % (40 * unit + 1),
            _ => {
                let boundary = (now / unit).saturating_add(1).saturating_mul(unit);
                return boundary.saturating_add(r % 3).saturating_sub(1).max(now);
            }
        };
        now.saturating_add(step)
    }

    /// Like [`forward`](Self::forward), but about one request in four steps backwards instead:
    /// a few ns, up to one or three units, or to just before the current multiple of `unit`
    /// (saturating at the epoch).
    pub(crate) fn any_direction(&self, now: u64, unit: u64) -> u64 {
        if self.step < 192 {
            return self.forward(now, unit);
        }
        let r = self.raw;
        match self.step % 4 {
            0 => now.saturating_sub(1 + r % 3),
            1 => now.saturating_sub(r % (unit + 1)),
            2 => now.saturating_sub(r % (3 * unit + 1)),
            _ => (now / unit * unit).saturating_sub(1 + r % 2),
        }
    }

    /// The op's raw random word, for a test's own choices.
    pub(crate) fn raw(&self) -> u64 {
        self.raw
    }

    /// The weight, in `0..=capacity`: often 1, otherwise uniform.
    pub(crate) fn cost(&self, capacity: u64) -> u64 {
        if self.cost < 96 {
            1
        } else {
            u64::from(self.cost) % (capacity + 1)
        }
    }
}

/// Decides one request at `now` through `limiter`: first peeks (which must not count), then
/// checks, through the explicit-timestamp API or through the limiter's manual clock set to
/// `now` (and, for weight 1, sometimes through the unweighted calls). Fails the case unless the
/// peek and the check agree; returns the check's answer.
pub(crate) fn peek_then_check<A: Algorithm>(
    limiter: &DirectLimiter<A, ManualClock>,
    op: &Op,
    now: u64,
    cost: u64,
) -> Result<Expected, TestCaseError> {
    let at = Timestamp::from_nanos(now);
    let via_clock = op.raw & (1 << 63) != 0;
    let unweighted = cost == 1 && op.raw & (1 << 62) != 0;
    if via_clock {
        limiter.clock().set(at);
        prop_assert_eq!(limiter.clock().now(), at);
    }
    let (peeked, checked) = match (via_clock, unweighted) {
        (false, false) => (
            limiter.peek_n_at(cost, at).unwrap(),
            limiter.check_n_at(cost, at).unwrap(),
        ),
        (true, false) => (limiter.peek_n(cost).unwrap(), limiter.check_n(cost).unwrap()),
        (false, true) => (limiter.peek_at(at), limiter.check_at(at)),
        (true, true) => (limiter.peek(), limiter.check()),
    };
    let (peeked, checked) = (Expected::of(&peeked), Expected::of(&checked));
    prop_assert_eq!(
        peeked,
        checked,
        "peek and check disagree at t={}, cost={}",
        now,
        cost
    );
    Ok(checked)
}

/// Bucket periods: 1 ns to 10 µs (often not a multiple of the count), or 1 to 5 ms.
pub(crate) fn bucket_period() -> impl Strategy<Value = u64> {
    prop_oneof![1..=10_000u64, 1_000_000..=5_000_000u64]
}

/// Window lengths: 1 ns to 10 µs, 1 to 5 ms, or one minute.
pub(crate) fn window_length() -> impl Strategy<Value = u64> {
    prop_oneof![1..=10_000u64, 1_000_000..=5_000_000u64, Just(60_000_000_000u64)]
}
