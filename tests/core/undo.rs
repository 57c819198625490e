//! `Algorithm::undo` through the limiters (`DirectLimiter::undo`, `KeyedLimiter::undo`,
//! `LogLimiter::undo`, `KeyedLogLimiter::undo`): an admission undone at once leaves every later
//! decision as if the request had never come, for every algorithm (the windows and the log
//! included, which cannot `refund`), in 64-bit and 128-bit states, against the reference
//! models fed only the requests that stayed. An undo never gives back more than the admission
//! took.

use std::time::Duration;

use proptest::prelude::*;
use tollgate::algorithm::{Admission, Algorithm};
use tollgate::{
    DirectLimiter, FixedWindow, KeyedLimiter, KeyedLogLimiter, LeakyBucket, LogLimiter, ManualClock, Outcome,
    Quota, SlidingLog, SlidingWindow, Timestamp, TokenBucket,
};

use crate::reference::fixed_window::FixedWindowModel;
use crate::reference::shaper::ShaperModel;
use crate::reference::sliding_log::SlidingLogModel;
use crate::reference::sliding_window::SlidingWindowModel;
use crate::reference::token_bucket::TokenBucketModel;
use crate::reference::trace::{bucket_period, ops, start, window_length, Op, Start};
use crate::reference::{bucket_or_reject, Expected};

/// A limiter under test, direct or keyed (one key), deciding with an undoable admission.
trait Undoable {
    fn decide(&self, now: u64, cost: u64) -> (Expected, Admission, Outcome);
    fn undo(&self, admission: &Admission) -> bool;
}

impl<A: Algorithm> Undoable for DirectLimiter<A, ManualClock> {
    fn decide(&self, now: u64, cost: u64) -> (Expected, Admission, Outcome) {
        let (decision, admission) = self
            .check_n_undoable_at(cost, Timestamp::from_nanos(now))
            .expect("fits");
        (Expected::of(&decision), admission, decision.outcome())
    }

    fn undo(&self, admission: &Admission) -> bool {
        DirectLimiter::undo(self, admission)
    }
}

impl<A: Algorithm> Undoable for KeyedLimiter<u64, A, ManualClock> {
    fn decide(&self, now: u64, cost: u64) -> (Expected, Admission, Outcome) {
        let (decision, admission) = self
            .check_n_undoable_at(&7, cost, Timestamp::from_nanos(now))
            .expect("fits");
        (Expected::of(&decision), admission, decision.outcome())
    }

    fn undo(&self, admission: &Admission) -> bool {
        KeyedLimiter::undo(self, &7, admission)
    }
}

impl Undoable for LogLimiter<ManualClock> {
    fn decide(&self, now: u64, cost: u64) -> (Expected, Admission, Outcome) {
        let (decision, admission) = self
            .check_n_undoable_at(cost, Timestamp::from_nanos(now))
            .expect("fits");
        (Expected::of(&decision), admission, decision.outcome())
    }

    fn undo(&self, admission: &Admission) -> bool {
        LogLimiter::undo(self, admission)
    }
}

impl Undoable for KeyedLogLimiter<u64, ManualClock> {
    fn decide(&self, now: u64, cost: u64) -> (Expected, Admission, Outcome) {
        let (decision, admission) = self
            .check_n_undoable_at(&7, cost, Timestamp::from_nanos(now))
            .expect("fits");
        (Expected::of(&decision), admission, decision.outcome())
    }

    fn undo(&self, admission: &Admission) -> bool {
        KeyedLogLimiter::undo(self, &7, admission)
    }
}

/// Whether request `op` is undone at once if admitted (about one in three).
fn undone(op: &Op) -> bool {
    op.raw().is_multiple_of(3)
}

/// Runs `ops` through `limiter` and `model`: every decision equals the model's, and every
/// admission undone at once is given back (the model never sees it).
fn run<L: Undoable, M: Clone>(
    limiter: &L,
    mut model: M,
    decide: impl Fn(&mut M, u64, u64) -> Expected,
    (start, unit, capacity): (Start, u64, u64),
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let mut now = start.at(unit);
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            now = op.forward(now, unit);
        }
        let cost = op.cost(capacity);
        let (got, admission, outcome) = limiter.decide(now, cost);
        if undone(op) {
            // What the request was answered: the model's, on a copy the undo throws away.
            prop_assert_eq!(
                got,
                decide(&mut model.clone(), now, cost),
                "request {} at t={} weight {}",
                i,
                now,
                cost
            );
            // A refusal counted nothing, so its undo gives nothing back.
            let gave_back = limiter.undo(&admission);
            prop_assert_eq!(
                gave_back,
                outcome == Outcome::Allowed && cost > 0,
                "undo of request {}",
                i
            );
        } else {
            prop_assert_eq!(
                got,
                decide(&mut model, now, cost),
                "request {} at t={} weight {}",
                i,
                now,
                cost
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Token bucket: the TAT moves back by exactly the admission's intervals.
    #[test]
    fn a_token_bucket_undoes_exactly(count in 1..=20u64, period in bucket_period(), burst in 1..=20u64, start in start(), ops in ops(48), keyed in any::<bool>()) {
        let quota = Quota::new(count, Duration::from_nanos(period)).and_then(|q| q.with_burst(burst)).expect("valid");
        let bucket = bucket_or_reject(count, period, TokenBucket::new(quota))?;
        let t = u64::try_from(bucket.emission_interval().as_nanos()).expect("fits");
        let model = TokenBucketModel::new(t, burst);
        if keyed {
            let limiter = KeyedLimiter::with_clock(bucket, 4, ManualClock::new()).expect("valid");
            run(&limiter, model, TokenBucketModel::decide, (start, t, burst), &ops)?;
        } else {
            let limiter = DirectLimiter::with_clock(bucket, ManualClock::new());
            run(&limiter, model, TokenBucketModel::decide, (start, t, burst), &ops)?;
        }
    }

    /// Shaper: the slot given back ends the queue, so the next request takes it.
    #[test]
    fn a_shaper_undoes_exactly(count in 1..=20u64, period in bucket_period(), burst in 1..=20u64, start in start(), ops in ops(48)) {
        let quota = Quota::new(count, Duration::from_nanos(period)).and_then(|q| q.with_burst(burst)).expect("valid");
        let shaper = bucket_or_reject(count, period, LeakyBucket::new(quota))?;
        let t = u64::try_from(shaper.emission_interval().as_nanos()).expect("fits");
        let limiter = DirectLimiter::with_clock(shaper, ManualClock::new());
        run(&limiter, ShaperModel::new(t, burst), ShaperModel::decide, (start, t, burst), &ops)?;
    }

    /// Fixed window, 64-bit and 128-bit states, direct and keyed: the units come off the count.
    #[test]
    fn a_fixed_window_undoes_exactly(limit in 1..=20u64, window in window_length(), start in start(), ops in ops(48), wide in any::<bool>(), keyed in any::<bool>()) {
        let fixed = FixedWindow::new(Quota::new(limit, Duration::from_nanos(window)).expect("valid")).expect("valid");
        let fixed = if wide { fixed.with_wide_state() } else { fixed };
        let model = FixedWindowModel::new(window, limit);
        if keyed {
            let limiter = KeyedLimiter::with_clock(fixed, 4, ManualClock::new()).expect("valid");
            run(&limiter, model, FixedWindowModel::decide, (start, window, limit), &ops)?;
        } else {
            let limiter = DirectLimiter::with_clock(fixed, ManualClock::new());
            run(&limiter, model, FixedWindowModel::decide, (start, window, limit), &ops)?;
        }
    }

    /// Sliding window, 64-bit and 128-bit states, direct and keyed: off the current count, or
    /// the previous one once the window has moved.
    #[test]
    fn a_sliding_window_undoes_exactly(limit in 1..=20u64, window in window_length(), start in start(), ops in ops(40), wide in any::<bool>(), keyed in any::<bool>()) {
        let sliding = SlidingWindow::new(Quota::new(limit, Duration::from_nanos(window)).expect("valid")).expect("valid");
        let sliding = if wide { sliding.with_wide_state() } else { sliding };
        let model = SlidingWindowModel::new(window, limit);
        if keyed {
            let limiter = KeyedLimiter::with_clock(sliding, 4, ManualClock::new()).expect("valid");
            run(&limiter, model, SlidingWindowModel::decide, (start, window, limit), &ops)?;
        } else {
            let limiter = DirectLimiter::with_clock(sliding, ManualClock::new());
            run(&limiter, model, SlidingWindowModel::decide, (start, window, limit), &ops)?;
        }
    }

    /// Sliding log, direct and keyed: the entries recorded are removed, in a ring full or not.
    #[test]
    fn a_sliding_log_undoes_exactly(limit in 1..=20u64, window in window_length(), start in start(), ops in ops(64), keyed in any::<bool>()) {
        let log = SlidingLog::new(Quota::new(limit, Duration::from_nanos(window)).expect("valid")).expect("valid");
        let model = SlidingLogModel::new(window, limit);
        if keyed {
            let limiter = KeyedLogLimiter::with_clock(log, 4, ManualClock::new()).expect("valid");
            run(&limiter, model, SlidingLogModel::decide, (start, window, limit), &ops)?;
        } else {
            let limiter = LogLimiter::with_clock(log, ManualClock::new());
            run(&limiter, model, SlidingLogModel::decide, (start, window, limit), &ops)?;
        }
    }
}

/// An undo that comes after another admission: a window still gives its units back exactly
/// (the count says how many), a bucket does not (the admission no longer ends its queue: giving
/// it back would move the later request's slot), and nothing ever gives back more than is
/// counted.
#[test]
fn an_undo_after_another_admission_gives_back_no_more_than_it_took() {
    let at = Timestamp::from_secs(1_000);
    let left =
        |decision: Result<tollgate::Decision, tollgate::CostTooLarge>| decision.expect("fits").remaining();
    let bucket = DirectLimiter::with_clock(
        TokenBucket::new("10/s".parse().expect("valid")).expect("valid"),
        ManualClock::new(),
    );
    let (_, first) = bucket.check_n_undoable_at(3, at).expect("fits");
    assert!(bucket.check_n_at(2, at).expect("fits").is_allowed());
    assert!(
        !bucket.undo(&first),
        "a bucket gives back only the end of its queue"
    );
    assert_eq!(left(bucket.peek_n_at(0, at)), 5);
    let fixed = DirectLimiter::with_clock(
        FixedWindow::new("10/s".parse().expect("valid")).expect("valid"),
        ManualClock::new(),
    );
    let (_, first) = fixed.check_n_undoable_at(3, at).expect("fits");
    let (_, second) = fixed.check_n_undoable_at(2, at).expect("fits");
    assert!(fixed.undo(&first));
    assert_eq!(left(fixed.peek_n_at(0, at)), 8);
    // An admission of 5 claimed where 2 are counted: 2 come back, never more.
    let claimed = Admission::new(second.at(), 5, &fixed.check_n_at(0, at).expect("fits"));
    assert!(fixed.undo(&claimed));
    assert_eq!(left(fixed.peek_n_at(0, at)), 10);
    // A window that has moved on: the units count no more, nothing to give back.
    let (_, late) = fixed.check_n_undoable_at(4, at).expect("fits");
    assert!(fixed
        .check_at(at.saturating_add(Duration::from_secs(1)))
        .is_allowed());
    assert!(!fixed.undo(&late));
    let log = LogLimiter::with_clock(
        SlidingLog::new("10/s".parse().expect("valid")).expect("valid"),
        ManualClock::new(),
    );
    let (_, first) = log.check_n_undoable_at(3, at).expect("fits");
    let later = at.saturating_add(Duration::from_millis(1));
    assert!(log.check_n_at(2, later).expect("fits").is_allowed());
    assert!(log.undo(&first), "the entries recorded at 1000 s come out");
    assert_eq!(left(log.peek_n_at(0, later)), 8);
    assert!(!log.undo(&first), "and only once: none is left at 1000 s");
}
