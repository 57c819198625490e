//! Property tests of the token bucket against the classic token-count model
//! ([`reference::token_bucket::TokenBucketModel`]), and of the GCRA bound when the clock steps
//! backwards.

use std::time::Duration;

use crate::reference::token_bucket::TokenBucketModel;
use crate::reference::trace::{bucket_period, ops, peek_then_check, start, Op, Start};
use crate::reference::{bucket_or_reject, gcra_violation, Expected};
use proptest::prelude::*;
use tollgate::{DirectLimiter, ManualClock, Quota, TokenBucket};

/// The bucket for a quota, and its emission interval `T` (checked against its documented
/// definition: `period / count` rounded up to whole nanoseconds).
fn bucket(count: u64, period: u64, burst: Option<u64>) -> Result<(TokenBucket, u64, u64), TestCaseError> {
    let mut quota = Quota::new(count, Duration::from_nanos(period)).unwrap();
    if let Some(burst) = burst {
        quota = quota.with_burst(burst).unwrap();
    }
    let bucket = bucket_or_reject(count, period, TokenBucket::new(quota))?;
    let interval = u64::try_from(bucket.emission_interval().as_nanos()).unwrap();
    assert!(
        interval * count >= period && (interval - 1) * count < period,
        "T = ceil(period / count)"
    );
    Ok((bucket, interval, quota.burst()))
}

fn run_against_model(
    count: u64,
    period: u64,
    burst: Option<u64>,
    start: Start,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let (bucket, interval, burst) = bucket(count, period, burst)?;
    let limiter = DirectLimiter::with_clock(bucket, ManualClock::new());
    prop_assert_eq!(limiter.capacity(), burst);
    let mut model = TokenBucketModel::new(interval, burst);
    let mut now = start.at(interval);
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            now = op.forward(now, interval);
        }
        let cost = op.cost(burst);
        let got = peek_then_check(&limiter, op, now, cost)?;
        let tokens = model.tokens();
        let expected = model.decide(now, cost);
        prop_assert_eq!(
            got,
            expected,
            "request {} at t={} weight {} (T={}, burst={}, model tokens before refill {})",
            i,
            now,
            cost,
            interval,
            burst,
            tokens
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// With time never going backwards, every decision (allowed, remaining, retry-after,
    /// reset-after, delay) equals the classic token bucket's, and peeking first changes nothing.
    #[test]
    fn decisions_match_the_token_count_model(
        count in 1..=20u64,
        period in bucket_period(),
        burst in proptest::option::of(1..=20u64),
        start in start(),
        ops in ops(64),
    ) {
        run_against_model(count, period, burst, start, &ops)?;
    }

    /// With the clock stepping backwards as well, nothing panics, peek agrees with check, and
    /// the admitted requests keep the GCRA bound: `sum(weights i..=j) * T <= t_j - t_i + burst
    /// * T` for any admitted `i <= j` (stricter when `t_j < t_i`).
    #[test]
    fn backward_steps_keep_the_gcra_bound(
        count in 1..=20u64,
        period in bucket_period(),
        burst in proptest::option::of(1..=20u64),
        start in start(),
        ops in ops(64),
    ) {
        run_with_backward_steps(count, period, burst, start, false, &ops)?;
    }

    /// The same, for traces that run into the end of representable time (`u64::MAX` ns), where
    /// a request whose slot would end past it is refused.
    #[test]
    fn the_end_of_time_keeps_the_gcra_bound(
        count in 1..=20u64,
        period in bucket_period(),
        burst in proptest::option::of(1..=20u64),
        start in start(),
        ops in ops(64),
    ) {
        run_with_backward_steps(count, period, burst, start, true, &ops)?;
    }
}

fn run_with_backward_steps(
    count: u64,
    period: u64,
    burst: Option<u64>,
    start: Start,
    near_the_end: bool,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let (bucket, interval, burst) = bucket(count, period, burst)?;
    let limiter = DirectLimiter::with_clock(bucket, ManualClock::new());
    let mut now = if near_the_end {
        start.near_the_end(interval)
    } else {
        start.at(interval)
    };
    let mut admitted = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            now = op.any_direction(now, interval);
        }
        let cost = op.cost(burst);
        let got = peek_then_check(&limiter, op, now, cost)?;
        prop_assert_eq!(got.delay, 0);
        if got.allowed {
            prop_assert_eq!(got.retry_after, 0);
            // A weightless request counts nothing, so it is no endpoint of the GCRA bound.
            if cost > 0 {
                admitted.push((now, cost));
            }
        }
        prop_assert!(got.remaining <= burst);
    }
    prop_assert_eq!(
        gcra_violation(&admitted, interval, burst),
        None,
        "admitted: {:?}",
        admitted
    );
    Ok(())
}

/// The model itself, on the crate's documented example (`2/s`: two at once, then refused with
/// 500 ms to wait and 1 s to full).
#[test]
fn model_reproduces_the_documented_example() {
    let mut model = TokenBucketModel::new(500_000_000, 2);
    let decisions: Vec<Expected> = (0..3).map(|_| model.decide(0, 1)).collect();
    assert!(decisions[0].allowed && decisions[0].remaining == 1);
    assert!(decisions[1].allowed && decisions[1].remaining == 0);
    assert_eq!(
        decisions[2],
        Expected {
            allowed: false,
            remaining: 0,
            retry_after: 500_000_000,
            reset_after: 1_000_000_000,
            delay: 0
        }
    );
}
