//! The token bucket at rates whole nanoseconds cannot hold within 1% (`3` per `10 ns`, `u32::MAX`
//! per millisecond or second): its state is 128 bits, its TAT in units of `1 / count` ns, and it
//! is exact. Against the classic token bucket refilled at exactly `count / period`
//! (`TokenBucketModel::exact`, rational arithmetic, waits rounded up to whole ns):
//!
//! - forward traces, direct: every decision (allowed, remaining, retry-after, reset-after,
//!   delay) is the model's, and a peek first changes nothing;
//! - forward traces, keyed: several keys in a table with room for all (the locked table of wide
//!   states), each decided exactly as its own model;
//! - traces stepping back: nothing panics, and the admitted requests keep the exact GCRA bound,
//!   `sum(weights i..=j) * period <= (t_j - t_i) * count + burst * period` for any admitted
//!   `i <= j`.

use std::collections::HashMap;
use std::time::Duration;

use crate::reference::token_bucket::TokenBucketModel;
use crate::reference::trace::{ops, peek_then_check, start, Op, Start};
use crate::reference::{too_fine, Expected};
use proptest::prelude::*;
use tollgate::algorithm::Algorithm;
use tollgate::{DirectLimiter, KeyedLimiter, ManualClock, Quota, Timestamp, TokenBucket};

/// A wide bucket for `count` per `period` ns with `burst`; a rejected case when the rate is one
/// whole nanoseconds hold (the 64-bit bucket, tested against the rounded model elsewhere).
fn wide(count: u64, period: u64, burst: u64) -> Result<TokenBucket, TestCaseError> {
    let quota = Quota::new(count, Duration::from_nanos(period))
        .and_then(|quota| quota.with_burst(burst))
        .unwrap();
    let bucket = TokenBucket::new(quota).unwrap();
    prop_assert_eq!(bucket.is_wide(), too_fine(count, period), "{}", quota);
    if !bucket.is_wide() {
        return Err(TestCaseError::reject("whole nanoseconds hold this rate"));
    }
    prop_assert_eq!(
        bucket.emission_interval(),
        Duration::from_nanos(period.div_ceil(count)),
        "reported rounded up"
    );
    Ok(bucket)
}

/// The trace's time unit: a full bucket's refill time, `burst * period / count`, rounded up.
pub(crate) fn refill(count: u64, period: u64, burst: u64) -> u64 {
    u64::try_from((u128::from(burst) * u128::from(period)).div_ceil(u128::from(count))).unwrap()
}

/// A weight of 0 to `burst`, mostly a large share of it (so that large bursts empty within a
/// trace).
pub(crate) fn large_share(op: &Op, burst: u64) -> u64 {
    let share = match op.cost(4) {
        0 => burst / 10,
        1 => burst / 3,
        2 => burst / 2,
        3 => burst,
        _ => op.cost(burst),
    };
    (share + op.cost(2)).saturating_sub(1).min(burst)
}

/// Rates whole nanoseconds cannot hold: few units per a few ns, or up to `u32::MAX` per 1 ms,
/// per 1 s, or per 1 to 10^6 ns; with a burst of a few, of the count, or up to `u32::MAX`.
pub(crate) fn fine_rate() -> impl Strategy<Value = (u64, u64, u64)> {
    prop_oneof![
        (1..=200u64, 1..=64u64, 1..=20u64),
        (
            prop_oneof![(1u64 << 32) - 64..=(1u64 << 32) - 1, 100_000_000u64..(1 << 32)],
            prop_oneof![Just(1_000_000u64), Just(1_000_000_000), 1..=1_000_000u64],
            prop_oneof![Just(0u64), 1..=1_000u64, 1..=(1u64 << 32) - 1],
        )
            .prop_map(|(count, period, burst)| (
                count,
                period,
                if burst == 0 { count } else { burst }
            )),
    ]
}

/// A forward trace through a direct limiter: every decision is the exact model's.
fn forward((count, period, burst): (u64, u64, u64), start: Start, ops: &[Op]) -> Result<(), TestCaseError> {
    let bucket = wide(count, period, burst)?;
    let unit = refill(count, period, burst);
    let limiter = DirectLimiter::with_clock(bucket, ManualClock::new());
    let mut model = TokenBucketModel::exact(count, period, burst);
    let mut now = start.at(unit);
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            now = op.forward(now, unit);
        }
        let cost = large_share(op, burst);
        let got = peek_then_check(&limiter, op, now, cost)?;
        let expected = model.decide(now, cost);
        prop_assert_eq!(
            got,
            expected,
            "request {} at t={} weight {} ({} per {} ns, burst {})",
            i,
            now,
            cost,
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
    let bucket = wide(count, period, burst)?;
    let unit = refill(count, period, burst);
    let limiter = KeyedLimiter::<u64, _, _>::with_clock(bucket, 64, ManualClock::new()).unwrap();
    let mut models: HashMap<u64, TokenBucketModel> = HashMap::new();
    let mut now = start.at(unit);
    for (i, (op, key)) in ops.iter().zip(keys.iter().cycle()).enumerate() {
        if i > 0 {
            now = op.forward(now, unit);
        }
        let cost = large_share(op, burst);
        let at = Timestamp::from_nanos(now);
        let peeked = Expected::of(&limiter.peek_n_at(key, cost, at).unwrap());
        let got = Expected::of(&limiter.check_n_at(key, cost, at).unwrap());
        let expected = models
            .entry(*key)
            .or_insert_with(|| TokenBucketModel::exact(count, period, burst))
            .decide(now, cost);
        prop_assert_eq!(peeked, got, "request {} key {} at t={}", i, key, now);
        prop_assert_eq!(
            got,
            expected,
            "request {} key {} at t={} weight {} ({} per {} ns, burst {})",
            i,
            key,
            now,
            cost,
            count,
            period,
            burst
        );
    }
    Ok(())
}

/// A trace stepping back as well: the admitted requests keep the exact GCRA bound, an admission
/// has no retry-after, a refusal no delay, and no answer says more than the burst remains.
fn backward((count, period, burst): (u64, u64, u64), start: Start, ops: &[Op]) -> Result<(), TestCaseError> {
    let bucket = wide(count, period, burst)?;
    let unit = refill(count, period, burst);
    let limiter = DirectLimiter::with_clock(bucket, ManualClock::new());
    let mut admitted: Vec<(u64, u64)> = Vec::new();
    let mut now = start.at(unit);
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            now = op.any_direction(now, unit);
        }
        let cost = large_share(op, burst);
        let got = peek_then_check(&limiter, op, now, cost)?;
        prop_assert!(got.remaining <= burst, "request {}: {:?}", i, got);
        prop_assert_eq!(got.delay, 0);
        if got.allowed {
            prop_assert_eq!(got.retry_after, 0, "request {}", i);
            if cost > 0 {
                admitted.push((now, cost));
            }
        }
    }
    let (count, period, burst) = (i128::from(count), i128::from(period), i128::from(burst));
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
    fn wide_token_bucket_decisions_match_the_exact_model(rate in fine_rate(), start in start(), ops in ops(64)) {
        forward(rate, start, &ops)?;
    }

    #[test]
    fn wide_token_bucket_keys_decide_as_their_own_exact_models(
        rate in fine_rate(),
        start in start(),
        keys in proptest::collection::vec(0u64..6, 1..8),
        ops in ops(64),
    ) {
        keyed(rate, start, &keys, &ops)?;
    }

    #[test]
    fn wide_token_bucket_never_admits_past_the_exact_bound_when_time_steps_back(
        rate in fine_rate(),
        start in start(),
        ops in ops(64),
    ) {
        backward(rate, start, &ops)?;
    }
}
