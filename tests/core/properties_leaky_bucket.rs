//! Property tests of the leaky bucket shaper against a literal slot-by-slot queue simulation
//! ([`reference::shaper::ShaperModel`]), and of its guarantees when the clock steps backwards:
//! the buckets' shared properties (`bucket_properties`), run on `LeakyBucket`, and the shaper's
//! own, slots given back.

use std::time::Duration;

use proptest::prelude::*;
use tollgate::{DirectLimiter, LeakyBucket, ManualClock, Timestamp};

use crate::bucket_properties::{bucket, run_against_model, run_with_backward_steps};
use crate::reference::shaper::ShaperModel;
use crate::reference::trace::{bucket_period, ops, peek_then_check, start, Op, Start};
use crate::reference::Expected;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// With time never going backwards, every decision (allowed, remaining, retry-after,
    /// reset-after, delay) equals the queue simulation's, and peeking first changes nothing.
    #[test]
    fn decisions_match_the_slot_simulation(
        count in 1..=20u64,
        period in bucket_period(),
        burst in proptest::option::of(1..=20u64),
        start in start(),
        ops in ops(64),
    ) {
        run_against_model::<LeakyBucket>(count, period, burst, start, &ops)?;
    }

    /// With the clock stepping backwards as well, nothing panics, peek agrees with check, and
    /// - the admitted requests keep the GCRA bound (`sum(weights i..=j) * T <= t_j - t_i +
    ///   burst * T` for admitted `i <= j`);
    /// - slots never overlap: each admitted request starts (`t + delay`) no earlier than the
    ///   previous admitted one ends (its start plus `weight * T`);
    /// - the queue never overflows: `delay + weight * T <= burst * T`.
    #[test]
    fn backward_steps_keep_slots_apart_and_the_gcra_bound(
        count in 1..=20u64,
        period in bucket_period(),
        burst in proptest::option::of(1..=20u64),
        start in start(),
        ops in ops(64),
    ) {
        run_with_backward_steps::<LeakyBucket>(count, period, burst, start, false, &ops)?;
    }

    /// With slots given back (`refund_slot_at`, the shaper's refund) between the requests, and
    /// some requests allowed to wait only so long (`check_n_within_at`): every answer, and
    /// whether each refund gave anything back, equals the queue simulation's,
    /// in which a slot leaves the queue only from its end; and the slots of the requests that
    /// leave never overlap (the spacing a shaper exists for).
    #[test]
    fn slots_given_back_match_the_slot_simulation_and_keep_the_spacing(
        count in 1..=20u64,
        period in bucket_period(),
        burst in proptest::option::of(1..=20u64),
        start in start(),
        steps in steps(64),
    ) {
        run_with_slot_refunds(count, period, burst, start, &steps)?;
    }

    /// The same, for traces that run into the end of representable time (`u64::MAX` ns): no
    /// slot ends past it (such a request is refused).
    #[test]
    fn the_end_of_time_keeps_slots_apart_and_the_gcra_bound(
        count in 1..=20u64,
        period in bucket_period(),
        burst in proptest::option::of(1..=20u64),
        start in start(),
        ops in ops(64),
    ) {
        run_with_backward_steps::<LeakyBucket>(count, period, burst, start, true, &ops)?;
    }
}

/// One step of a trace with refunds: a request, or (when `refund` is `Some` and a slot is
/// still held) the refund of one of the slots held, picked by `refund`, at the step's time.
type Step = (Op, Option<u8>);

fn steps(max_len: usize) -> impl Strategy<Value = Vec<Step>> {
    (
        ops(max_len),
        proptest::collection::vec(proptest::option::weighted(0.4, any::<u8>()), max_len),
    )
        .prop_map(|(ops, refunds)| ops.into_iter().zip(refunds).collect())
}

/// A slot the limiter gave: when it starts, its weight, and when it ends (its decision's time
/// plus its reset-after, the end `refund_slot` names).
#[derive(Clone, Copy, Debug)]
struct Held {
    start: u64,
    cost: u64,
    end: u64,
}

fn run_with_slot_refunds(
    count: u64,
    period: u64,
    burst: Option<u64>,
    start: Start,
    steps: &[Step],
) -> Result<(), TestCaseError> {
    let (shaper, interval, burst) = bucket::<LeakyBucket>(count, period, burst)?;
    let limiter = DirectLimiter::with_clock(shaper, ManualClock::new());
    let mut model = ShaperModel::new(interval, burst);
    let mut now = start.at(interval);
    // Slots still held (their request may still leave, or give its slot back), and slots used
    // (their time came: their request left).
    let (mut held, mut used): (Vec<Held>, Vec<Held>) = (Vec::new(), Vec::new());
    for (i, (op, refund)) in steps.iter().enumerate() {
        if i > 0 {
            now = op.forward(now, interval);
        }
        match refund {
            Some(pick) if !held.is_empty() => {
                let slot = held.remove(usize::from(*pick) % held.len());
                let at = Timestamp::from_nanos(now);
                let gave_back = limiter.refund_slot_at(slot.cost, Timestamp::from_nanos(slot.end), at);
                prop_assert_eq!(
                    gave_back,
                    model.refund_slot(now, slot.cost, slot.end),
                    "refund {} at t={} of {:?} (T={}, burst={})",
                    i,
                    now,
                    slot,
                    interval,
                    burst
                );
            }
            _ => {
                let cost = op.cost(burst);
                // Some requests may wait at most a few intervals (the layer's `max_delay`).
                let max_delay = (op.raw() % 4 == 0).then(|| (op.raw() >> 2) % (burst * interval + 1));
                let (got, expected) = match max_delay {
                    Some(max) => {
                        let at = Timestamp::from_nanos(now);
                        let got = limiter
                            .check_n_within_at(cost, Duration::from_nanos(max), at)
                            .unwrap();
                        (Expected::of(&got), model.decide_within(now, cost, max))
                    }
                    None => (peek_then_check(&limiter, op, now, cost)?, model.decide(now, cost)),
                };
                prop_assert_eq!(got, expected, "request {} at t={} weight {}", i, now, cost);
                if got.allowed && cost > 0 {
                    let end = now + got.reset_after;
                    prop_assert_eq!(end, limiter.raw_state(), "the slot's end is the stored TAT");
                    held.push(Held {
                        start: now + got.delay,
                        cost,
                        end,
                    });
                }
            }
        }
        // The requests whose slot has come leave.
        let (left, waiting) = held.iter().partition(|slot| slot.start <= now);
        used.extend::<Vec<Held>>(left);
        held = waiting;
    }
    // Every request that left (or still holds its slot) has a slot of its own: no two overlap.
    used.extend(held);
    used.sort_by_key(|slot| slot.start);
    for pair in used.windows(2) {
        let (first, second) = (pair[0], pair[1]);
        prop_assert!(
            second.start >= first.start + first.cost * interval,
            "{:?} starts before {:?} ends (T={})",
            second,
            first,
            interval
        );
    }
    Ok(())
}

/// The model itself, on the crate's documented example (`2/s burst 3`: delays 0, 500 ms,
/// 1 s, then refused).
#[test]
fn model_reproduces_the_documented_example() {
    let mut model = ShaperModel::new(500_000_000, 3);
    let decisions: Vec<Expected> = (0..4).map(|_| model.decide(0, 1)).collect();
    let delays: Vec<(bool, u64)> = decisions.iter().map(|d| (d.allowed, d.delay)).collect();
    assert_eq!(
        delays,
        [(true, 0), (true, 500_000_000), (true, 1_000_000_000), (false, 0)]
    );
    assert_eq!(decisions[3].retry_after, 500_000_000);
    assert_eq!(decisions[3].reset_after, 1_500_000_000);
}
