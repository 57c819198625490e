//! The leaky bucket shaper at rates whole nanoseconds cannot hold within 1% (`3` per `10 ns`,
//! `u32::MAX` per millisecond or second): its state is 128 bits, the end of its queue in units
//! of `1 / count` ns, and it is exact. Against the shaper whose slots are exactly `period /
//! count` ns long ([`ExactShaperModel`], rational arithmetic, waits rounded up to whole ns):
//!
//! - forward traces, direct: every decision (allowed, remaining, retry-after, reset-after,
//!   delay) is the model's, a peek first changes nothing, and some requests wait at most a
//!   maximum (`check_n_within`): refused past it as the model refuses them, storing nothing;
//! - forward traces, keyed: several keys in a table with room for all (the locked table of wide
//!   states), each decided exactly as its own model, with and without a maximum wait;
//! - traces stepping back: nothing panics, the admitted requests keep the exact GCRA bound,
//!   each admitted request's slot starts (rounded up) no earlier than a nanosecond before the
//!   previous one's ended, and no admitted request waits past its queue's room.

use std::collections::HashMap;
use std::time::Duration;

use crate::properties_wide_token_bucket::{fine_rate, large_share, refill};
use crate::reference::exact_shaper::ExactShaperModel;
use crate::reference::trace::{ops, peek_then_check, start, Op, Start};
use crate::reference::{too_fine, Expected};
use proptest::prelude::*;
use tollgate::algorithm::Algorithm;
use tollgate::{DirectLimiter, KeyedLimiter, LeakyBucket, ManualClock, Quota, Timestamp};

/// A wide shaper for `count` per `period` ns with `burst`; a rejected case when the rate is one
/// whole nanoseconds hold (the 64-bit shaper, tested against the slot simulation elsewhere).
fn wide(count: u64, period: u64, burst: u64) -> Result<LeakyBucket, TestCaseError> {
    let quota = Quota::new(count, Duration::from_nanos(period))
        .and_then(|quota| quota.with_burst(burst))
        .unwrap();
    let shaper = LeakyBucket::new(quota).unwrap();
    prop_assert_eq!(shaper.is_wide(), too_fine(count, period), "{}", quota);
    if !shaper.is_wide() {
        return Err(TestCaseError::reject("whole nanoseconds hold this rate"));
    }
    prop_assert_eq!(
        shaper.emission_interval(),
        Duration::from_nanos(period.div_ceil(count)),
        "reported rounded up"
    );
    prop_assert_eq!(shaper.max_queue(), burst - 1);
    Ok(shaper)
}

/// The maximum wait of a request, if it has one: none for half of them, 0 for an eighth, and
/// otherwise anything up to a full queue's wait (`unit`).
fn max_wait(op: &Op, unit: u64) -> Option<u64> {
    let r = op.raw();
    match (r >> 40) % 8 {
        0..=3 => None,
        4 => Some(0),
        _ => Some((r >> 8) % (unit + 1)),
    }
}

/// A forward trace through a direct limiter: every decision is the exact model's; a refusal
/// for the maximum wait stores nothing.
fn forward((count, period, burst): (u64, u64, u64), start: Start, ops: &[Op]) -> Result<(), TestCaseError> {
    let shaper = wide(count, period, burst)?;
    let unit = refill(count, period, burst);
    let limiter = DirectLimiter::with_clock(shaper, ManualClock::new());
    let mut model = ExactShaperModel::new(count, period, burst);
    let mut now = start.at(unit);
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            now = op.forward(now, unit);
        }
        let cost = large_share(op, burst);
        let (got, expected) = match max_wait(op, unit) {
            None => (peek_then_check(&limiter, op, now, cost)?, model.decide(now, cost)),
            Some(max) => {
                let before = limiter.raw_state_wide();
                let max_delay = Duration::from_nanos(max);
                let got = limiter
                    .check_n_within_at(cost, max_delay, Timestamp::from_nanos(now))
                    .unwrap();
                if !got.is_allowed() {
                    prop_assert_eq!(limiter.raw_state_wide(), before, "a refusal stores nothing");
                }
                (Expected::of(&got), model.decide_within(now, cost, max))
            }
        };
        prop_assert_eq!(
            got,
            expected,
            "request {} at t={} weight {} within {:?} ({} per {} ns, burst {})",
            i,
            now,
            cost,
            max_wait(op, unit),
            count,
            period,
            burst
        );
    }
    Ok(())
}

/// A forward trace over several keys of a keyed limiter: each key decided as its own model.
fn keyed(
    (count, period, burst): (u64, u64, u64),
    start: Start,
    keys: &[u64],
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let shaper = wide(count, period, burst)?;
    let unit = refill(count, period, burst);
    let limiter = KeyedLimiter::<u64, _, _>::with_clock(shaper, 64, ManualClock::new()).unwrap();
    let mut models: HashMap<u64, ExactShaperModel> = HashMap::new();
    let mut now = start.at(unit);
    for (i, (op, key)) in ops.iter().zip(keys.iter().cycle()).enumerate() {
        if i > 0 {
            now = op.forward(now, unit);
        }
        let cost = large_share(op, burst);
        let at = Timestamp::from_nanos(now);
        let model = models
            .entry(*key)
            .or_insert_with(|| ExactShaperModel::new(count, period, burst));
        let (got, expected) = match max_wait(op, unit) {
            None => {
                let peeked = Expected::of(&limiter.peek_n_at(key, cost, at).unwrap());
                let got = Expected::of(&limiter.check_n_at(key, cost, at).unwrap());
                prop_assert_eq!(peeked, got, "request {} key {} at t={}", i, key, now);
                (got, model.decide(now, cost))
            }
            Some(max) => (
                Expected::of(
                    &limiter
                        .check_n_within_at(key, cost, Duration::from_nanos(max), at)
                        .unwrap(),
                ),
                model.decide_within(now, cost, max),
            ),
        };
        prop_assert_eq!(
            got,
            expected,
            "request {} key {} at t={} weight {} within {:?} ({} per {} ns, burst {})",
            i,
            key,
            now,
            cost,
            max_wait(op, unit),
            count,
            period,
            burst
        );
    }
    Ok(())
}

/// A trace stepping back as well: the admitted requests keep the exact GCRA bound, an admission
/// has no retry-after, a refusal no delay, and no answer says more than the burst remains. The
/// slots keep their spacing: each admitted request starts (`t + delay`, its start rounded up)
/// less than a nanosecond before the previous one ended (its exact start plus its weight's
/// slots), `(S_j - S_i + 1) * count > w_i * period`; and waits within its queue's room,
/// `(delay - 1) * count + w * period < burst * period`.
fn backward((count, period, burst): (u64, u64, u64), start: Start, ops: &[Op]) -> Result<(), TestCaseError> {
    let shaper = wide(count, period, burst)?;
    let unit = refill(count, period, burst);
    let limiter = DirectLimiter::with_clock(shaper, ManualClock::new());
    let mut admitted: Vec<(u64, u64, u64)> = Vec::new();
    let mut now = start.at(unit);
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            now = op.any_direction(now, unit);
        }
        let cost = large_share(op, burst);
        let got = peek_then_check(&limiter, op, now, cost)?;
        prop_assert!(got.remaining <= burst, "request {}: {:?}", i, got);
        match got.allowed {
            true => prop_assert_eq!(got.retry_after, 0, "request {}", i),
            false => prop_assert_eq!(got.delay, 0, "request {}", i),
        }
        if got.allowed && cost > 0 {
            admitted.push((now, cost, got.delay));
        }
    }
    let (count, period, burst) = (i128::from(count), i128::from(period), i128::from(burst));
    for (i, &(at, cost, delay)) in admitted.iter().enumerate() {
        let (cost, delay) = (i128::from(cost), i128::from(delay));
        prop_assert!(
            (delay - 1) * count + cost * period < burst * period,
            "admission {} waits {} ns",
            i,
            delay
        );
        if let Some(&(next_at, _, next_delay)) = admitted.get(i + 1) {
            let (start, next_start) = (
                i128::from(at) + delay,
                i128::from(next_at) + i128::from(next_delay),
            );
            prop_assert!(
                (next_start - start + 1) * count > cost * period,
                "admission {} starts at {} after {} at {} of weight {}",
                i + 1,
                next_start,
                i,
                start,
                cost
            );
        }
    }
    for i in 0..admitted.len() {
        let mut weights = 0i128;
        for j in i..admitted.len() {
            weights += i128::from(admitted[j].1);
            let elapsed = i128::from(admitted[j].0) - i128::from(admitted[i].0);
            prop_assert!(
                weights * period <= elapsed * count + burst * period,
                "admissions {}..={} take {} units in {} ns",
                i,
                j,
                weights,
                elapsed
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn wide_shaper_decisions_and_waits_match_the_exact_model(rate in fine_rate(), start in start(), ops in ops(64)) {
        forward(rate, start, &ops)?;
    }

    #[test]
    fn wide_shaper_keys_decide_as_their_own_exact_models(
        rate in fine_rate(),
        start in start(),
        keys in proptest::collection::vec(0u64..6, 1..8),
        ops in ops(64),
    ) {
        keyed(rate, start, &keys, &ops)?;
    }

    #[test]
    fn wide_shaper_keeps_its_spacing_and_the_exact_bound_when_time_steps_back(
        rate in fine_rate(),
        start in start(),
        ops in ops(64),
    ) {
        backward(rate, start, &ops)?;
    }
}
