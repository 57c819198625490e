//! Exact reference models of the five algorithms, written from their documented semantics (not
//! from the implementation's formulas), plus the random traces the property tests feed them.
//!
//! Every model works in exact integer or rational arithmetic (`u64`/`u128`, and
//! [`num_rational::Ratio<u128>`]); none uses floats. Each model answers an [`Expected`]: the five
//! numbers a [`Decision`] carries, in nanoseconds.
//!
//! The models assume time never goes backwards (they assert it; the sliding window model only
//! asserts that time never goes back past a window it has counted in); the tests that step the
//! clock backwards feed them timestamps clamped as each test describes.

// Each test binary uses only the models it compares against.
#![allow(dead_code)]

pub(crate) mod exact_shaper;
pub(crate) mod fixed_window;
pub(crate) mod shaper;
pub(crate) mod sliding_log;
pub(crate) mod sliding_window;
pub(crate) mod token_bucket;
pub(crate) mod trace;

use tollgate::{Decision, QuotaError};

/// Whether whole nanoseconds would run `count` per `period` ns more than 1% slower, `100 * (T *
/// count - period) > T * count` with `T = ceil(period / count)`: both buckets then keep it
/// exactly in a 128-bit state (`Algorithm::is_wide`), or refuse it past a count of `u32::MAX`
/// (`QuotaError::RateTooFine`).
pub(crate) fn too_fine(count: u64, period: u64) -> bool {
    let run = u128::from(period.div_ceil(count)) * u128::from(count);
    100 * (run - u128::from(period)) > run
}

/// A bucket's construction, checked against [`too_fine`]: the bucket when the quota is fine
/// enough (a 64-bit one); a rejected test case when it is too fine, and refused for it (a count
/// past `u32::MAX`) or built wide (whose exact properties
/// `tests/core/properties_wide_token_bucket.rs` and `tests/core/properties_wide_shaper.rs`
/// test).
pub(crate) fn bucket_or_reject<B: tollgate::algorithm::Algorithm + std::fmt::Debug>(
    count: u64,
    period: u64,
    built: Result<B, QuotaError>,
) -> Result<B, proptest::test_runner::TestCaseError> {
    let reject = |why| Err(proptest::test_runner::TestCaseError::reject(why));
    match built {
        Err(QuotaError::RateTooFine { .. }) if too_fine(count, period) => {
            reject("refused: whole nanoseconds run it over 1% slow")
        }
        Ok(bucket) if too_fine(count, period) => {
            assert!(bucket.is_wide(), "{count} per {period} ns is kept exactly");
            reject("kept exactly, in 128 bits")
        }
        built => {
            assert!(
                !too_fine(count, period),
                "{count} per {period} ns must be refused or kept exactly"
            );
            let bucket = built.expect("a bucket fine enough is built");
            assert!(!bucket.is_wide(), "{count} per {period} ns fits 64 bits");
            Ok(bucket)
        }
    }
}

/// A bucket's exact model (the token bucket's [`token_bucket::TokenBucketModel`], the shaper's
/// [`shaper::ShaperModel`]): built from the emission interval `T` and the burst, it decides one
/// request at a time, in time that never goes backwards.
pub(crate) trait BucketModel {
    /// A model of a bucket with emission interval `interval` ns and burst `burst`, as new.
    fn new(interval: u64, burst: u64) -> Self;

    /// Decides a request of weight `cost` at `now`, and counts it if admitted.
    fn decide(&mut self, now: u64, cost: u64) -> Expected;

    /// The model's state before a decision, as a suffix for a failure's message (empty when the
    /// decisions say all of it).
    fn describe(&self) -> String;
}

/// Everything a [`Decision`] says, durations in whole nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Expected {
    pub(crate) allowed: bool,
    pub(crate) remaining: u64,
    pub(crate) retry_after: u64,
    pub(crate) reset_after: u64,
    pub(crate) delay: u64,
}

impl Expected {
    /// What the implementation answered, in the reference's terms.
    pub(crate) fn of(decision: &Decision) -> Expected {
        let nanos = |d: std::time::Duration| u64::try_from(d.as_nanos()).expect("durations fit in u64 ns");
        Expected {
            allowed: decision.is_allowed(),
            remaining: decision.remaining(),
            retry_after: nanos(decision.retry_after()),
            reset_after: nanos(decision.reset_after()),
            delay: nanos(decision.delay()),
        }
    }
}

/// The smallest `x` in `lo..=hi` with `pred(x)`, for a predicate that is monotone (false, then
/// true) on that range and true at `hi`. Plain binary search; panics if `pred(hi)` is false.
pub(crate) fn first_true(mut lo: u64, mut hi: u64, pred: impl Fn(u64) -> bool) -> u64 {
    assert!(pred(hi), "first_true: predicate false at the upper bound {hi}");
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

/// The GCRA guarantee over a run of admitted requests `(time, weight)` in processing order,
/// times signed (the clock may have stepped back): for any two admitted requests `i <= j`, the
/// weight admitted from `i` through `j` satisfies `sum * T <= t_j - t_i + burst * T`. Returns the
/// first violating pair, if any.
pub(crate) fn gcra_violation(admitted: &[(u64, u64)], interval: u64, burst: u64) -> Option<(usize, usize)> {
    let mut prefix = vec![0i128];
    for &(_, cost) in admitted {
        prefix.push(prefix.last().unwrap() + i128::from(cost));
    }
    let (interval, burst) = (i128::from(interval), i128::from(burst));
    for i in 0..admitted.len() {
        for j in i..admitted.len() {
            let sum = prefix[j + 1] - prefix[i];
            let span = i128::from(admitted[j].0) - i128::from(admitted[i].0);
            if sum * interval > span + burst * interval {
                return Some((i, j));
            }
        }
    }
    None
}
