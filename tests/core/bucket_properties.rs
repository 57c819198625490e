//! The properties the token bucket and the leaky bucket shaper share, written once over
//! [`Bucket`]: every decision equals the bucket's reference model while time moves forward, and,
//! with the clock also stepping backwards or running into the end of representable time, nothing
//! panics, peek agrees with check and the admitted requests keep the GCRA bound. What only one
//! bucket promises is its [`Bucket::check_spacing`] (the shaper's slots, the token bucket's
//! absence of delay); the shaper's slot refunds are its own (`properties_leaky_bucket`).

use std::fmt::Debug;
use std::time::Duration;

use proptest::prelude::*;
use tollgate::algorithm::Algorithm;
use tollgate::{DirectLimiter, LeakyBucket, ManualClock, Quota, QuotaError, TokenBucket};

use crate::reference::shaper::ShaperModel;
use crate::reference::token_bucket::TokenBucketModel;
use crate::reference::trace::{peek_then_check, Op, Start};
use crate::reference::{bucket_or_reject, gcra_violation, BucketModel, Expected};

/// A bucket the shared properties run on, with the reference model its decisions must equal.
pub(crate) trait Bucket: Algorithm + Copy + Debug {
    /// The exact model of this bucket (`reference`).
    type Model: BucketModel;

    /// The bucket for `quota` (its `new`).
    fn build(quota: Quota) -> Result<Self, QuotaError>;

    /// Its emission interval `T`.
    fn emission_interval(&self) -> Duration;

    /// Checks what the bucket documents about its construction beyond `T` (the shaper: a queue of
    /// `burst - 1`).
    fn check_built(&self, quota: &Quota);

    /// Checks when the request `i`, of weight `cost` at `now`, admitted as `got`, is served,
    /// given the end of the slot admitted before it (`previous_end`, which it updates): the
    /// shaper's slots never overlap and never overflow the queue or the end of time; the token
    /// bucket never delays. Called for every answer, admitted or not, of a trace whose clock may
    /// step back.
    fn check_spacing(
        i: usize,
        now: u64,
        cost: u64,
        got: &Expected,
        interval: u64,
        burst: u64,
        previous_end: &mut Option<u128>,
    ) -> Result<(), TestCaseError>;
}

impl Bucket for TokenBucket {
    type Model = TokenBucketModel;

    fn build(quota: Quota) -> Result<Self, QuotaError> {
        TokenBucket::new(quota)
    }

    fn emission_interval(&self) -> Duration {
        TokenBucket::emission_interval(self)
    }

    fn check_built(&self, _quota: &Quota) {}

    fn check_spacing(
        _i: usize,
        _now: u64,
        _cost: u64,
        got: &Expected,
        _interval: u64,
        _burst: u64,
        _previous_end: &mut Option<u128>,
    ) -> Result<(), TestCaseError> {
        prop_assert_eq!(got.delay, 0);
        Ok(())
    }
}

impl Bucket for LeakyBucket {
    type Model = ShaperModel;

    fn build(quota: Quota) -> Result<Self, QuotaError> {
        LeakyBucket::new(quota)
    }

    fn emission_interval(&self) -> Duration {
        LeakyBucket::emission_interval(self)
    }

    fn check_built(&self, quota: &Quota) {
        assert_eq!(self.max_queue(), quota.burst() - 1);
    }

    fn check_spacing(
        i: usize,
        now: u64,
        cost: u64,
        got: &Expected,
        interval: u64,
        burst: u64,
        previous_end: &mut Option<u128>,
    ) -> Result<(), TestCaseError> {
        // A weightless request takes no slot and counts nothing: it is not part of the schedule
        // these properties are about; a refused one takes none either.
        if !got.allowed || cost == 0 {
            return Ok(());
        }
        let slot = u128::from(now) + u128::from(got.delay);
        let end = slot + u128::from(cost * interval);
        if let Some(previous_end) = *previous_end {
            prop_assert!(
                slot >= previous_end,
                "request {} starts at {} before the previous slot ends at {}",
                i,
                slot,
                previous_end
            );
        }
        prop_assert!(
            got.delay + cost * interval <= burst * interval,
            "queue overflow at request {}",
            i
        );
        prop_assert!(
            end <= u128::from(u64::MAX),
            "request {} scheduled past the end of time",
            i
        );
        *previous_end = Some(end);
        Ok(())
    }
}

/// The bucket for a quota, its emission interval `T` (checked against its documented
/// definition: `period / count` rounded up to whole nanoseconds), and its burst.
pub(crate) fn bucket<B: Bucket>(
    count: u64,
    period: u64,
    burst: Option<u64>,
) -> Result<(B, u64, u64), TestCaseError> {
    let mut quota = Quota::new(count, Duration::from_nanos(period)).unwrap();
    if let Some(burst) = burst {
        quota = quota.with_burst(burst).unwrap();
    }
    let bucket = bucket_or_reject(count, period, B::build(quota))?;
    let interval = u64::try_from(bucket.emission_interval().as_nanos()).unwrap();
    assert!(
        interval * count >= period && (interval - 1) * count < period,
        "T = ceil(period / count)"
    );
    bucket.check_built(&quota);
    Ok((bucket, interval, quota.burst()))
}

/// With time never going backwards, every decision (allowed, remaining, retry-after,
/// reset-after, delay) equals the model's, and peeking first changes nothing.
pub(crate) fn run_against_model<B: Bucket>(
    count: u64,
    period: u64,
    burst: Option<u64>,
    start: Start,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let (bucket, interval, burst) = bucket::<B>(count, period, burst)?;
    let limiter = DirectLimiter::with_clock(bucket, ManualClock::new());
    prop_assert_eq!(limiter.capacity(), burst);
    let mut model = B::Model::new(interval, burst);
    let mut now = start.at(interval);
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            now = op.forward(now, interval);
        }
        let cost = op.cost(burst);
        let got = peek_then_check(&limiter, op, now, cost)?;
        let before = model.describe();
        let expected = model.decide(now, cost);
        prop_assert_eq!(
            got,
            expected,
            "request {} at t={} weight {} (T={}, burst={}{})",
            i,
            now,
            cost,
            interval,
            burst,
            before
        );
    }
    Ok(())
}

/// With the clock stepping backwards as well (and, with `near_the_end`, running into the end of
/// representable time, `u64::MAX` ns, where a request whose slot would end past it is refused):
/// nothing panics, peek agrees with check, no answer says more units remain than the burst, an
/// admission has no retry-after and a refusal no delay, the bucket's own spacing holds
/// ([`Bucket::check_spacing`]), and the admitted requests keep the GCRA bound:
/// `sum(weights i..=j) * T <= t_j - t_i + burst * T` for any admitted `i <= j` (stricter when
/// `t_j < t_i`).
pub(crate) fn run_with_backward_steps<B: Bucket>(
    count: u64,
    period: u64,
    burst: Option<u64>,
    start: Start,
    near_the_end: bool,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let (bucket, interval, burst) = bucket::<B>(count, period, burst)?;
    let limiter = DirectLimiter::with_clock(bucket, ManualClock::new());
    let mut now = if near_the_end {
        start.near_the_end(interval)
    } else {
        start.at(interval)
    };
    let mut admitted = Vec::new();
    let mut previous_end: Option<u128> = None;
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            now = op.any_direction(now, interval);
        }
        let cost = op.cost(burst);
        let got = peek_then_check(&limiter, op, now, cost)?;
        prop_assert!(got.remaining <= burst);
        B::check_spacing(i, now, cost, &got, interval, burst, &mut previous_end)?;
        if got.allowed {
            prop_assert_eq!(got.retry_after, 0);
            // A weightless request counts nothing, so it is no endpoint of the GCRA bound.
            if cost > 0 {
                admitted.push((now, cost));
            }
        } else {
            prop_assert_eq!(got.delay, 0);
        }
    }
    prop_assert_eq!(
        gcra_violation(&admitted, interval, burst),
        None,
        "admitted: {:?}",
        admitted
    );
    Ok(())
}
