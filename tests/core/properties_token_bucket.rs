//! Property tests of the token bucket against the classic token-count model
//! ([`reference::token_bucket::TokenBucketModel`]), and of the GCRA bound when the clock steps
//! backwards: the buckets' shared properties (`bucket_properties`), run on `TokenBucket`.

use proptest::prelude::*;
use tollgate::TokenBucket;

use crate::bucket_properties::{run_against_model, run_with_backward_steps};
use crate::reference::token_bucket::TokenBucketModel;
use crate::reference::trace::{bucket_period, ops, start};
use crate::reference::Expected;

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
        run_against_model::<TokenBucket>(count, period, burst, start, &ops)?;
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
        run_with_backward_steps::<TokenBucket>(count, period, burst, start, false, &ops)?;
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
        run_with_backward_steps::<TokenBucket>(count, period, burst, start, true, &ops)?;
    }
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
