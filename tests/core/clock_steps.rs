//! A clock that steps back never admits more: for every algorithm, direct and keyed, what a
//! limiter admits, replayed on a clock that never goes back (the running maximum of the times
//! its counted decisions were made at, refusals included), is admitted there too by the exact
//! reference model (`tests/reference/`).
//!
//! Random traces step the clock forwards and backwards ([`Op::any_direction`]), weigh requests
//! from 1 to the capacity, and slip in weightless checks and peeks at any time (earlier or far
//! later): those count nothing, move nothing, and are left out of the running maximum. The
//! keyed tables have room for every key and every key is inserted at the first instant of the
//! trace, so no key is ever forgotten (a key reclaimed while idle is the documented exception:
//! `docs/design.md`, "Keyed tables, forgotten keys").
//!
//! Both windows run in both layouts: the 64-bit state, and the 128-bit one
//! (`with_wide_state`, what a limit too large for one word takes: a 16-byte cell in the direct
//! limiter, the locked table in the keyed one).
//!
//! The two traces the sliding window log and the sliding window counter admitted too much on
//! before they kept the latest time they were shown are tests of their own, at the end.

use std::collections::HashMap;
use std::time::Duration;

use crate::reference::bucket_or_reject;
use crate::reference::fixed_window::FixedWindowModel;
use crate::reference::shaper::ShaperModel;
use crate::reference::sliding_log::SlidingLogModel;
use crate::reference::sliding_window::SlidingWindowModel;
use crate::reference::token_bucket::TokenBucketModel;
use crate::reference::trace::{bucket_period, ops, start, window_length, Op};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use tollgate::algorithm::Algorithm;
use tollgate::{
    DirectLimiter, FixedWindow, KeyedLimiter, KeyedLogLimiter, LeakyBucket, LogLimiter, ManualClock, Quota,
    SlidingLog, SlidingWindow, Timestamp, TokenBucket,
};

/// An exact reference model, asked whether it admits a request on a clock that never goes back.
trait Replay {
    fn admits(&mut self, now: u64, cost: u64) -> bool;
}

impl Replay for TokenBucketModel {
    fn admits(&mut self, now: u64, cost: u64) -> bool {
        self.decide(now, cost).allowed
    }
}

impl Replay for ShaperModel {
    fn admits(&mut self, now: u64, cost: u64) -> bool {
        self.decide(now, cost).allowed
    }
}

impl Replay for FixedWindowModel {
    fn admits(&mut self, now: u64, cost: u64) -> bool {
        self.decide(now, cost).allowed
    }
}

impl Replay for SlidingWindowModel {
    fn admits(&mut self, now: u64, cost: u64) -> bool {
        self.admit(now, cost)
    }
}

impl Replay for SlidingLogModel {
    fn admits(&mut self, now: u64, cost: u64) -> bool {
        self.decide(now, cost).allowed
    }
}

/// What a trace leaves to replay: each key's admitted requests, at the running maximum of the
/// times that key's counted decisions were made at.
type Admitted = HashMap<u64, Vec<(u64, u64)>>;

/// Runs `ops` through a limiter: `check(key, now, cost)` decides and counts (returns whether it
/// admitted), `uncounted(key, now, cost)` is a peek or a weightless check that must count
/// nothing. Keys are `0..keys`, every one first asked for one unit at the trace's start.
fn run(
    ops: &[Op],
    start: u64,
    unit: u64,
    capacity: u64,
    keys: u64,
    mut check: impl FnMut(u64, u64, u64) -> bool,
    mut uncounted: impl FnMut(u64, u64, u64),
) -> Admitted {
    let mut latest: HashMap<u64, u64> = HashMap::new();
    let mut admitted = Admitted::new();
    let mut counted = |key: u64, now: u64, cost: u64, check: &mut dyn FnMut(u64, u64, u64) -> bool| {
        let at = latest.entry(key).or_insert(now);
        *at = (*at).max(now);
        if check(key, now, cost) {
            admitted.entry(key).or_default().push((*at, cost));
        }
    };
    for key in 0..keys {
        counted(key, start, 1, &mut check);
    }
    let mut now = start;
    for op in ops {
        now = op.any_direction(now, unit);
        let key = op.raw() % keys;
        // One request in eight is a peek or a weightless check, at this time or one far from it.
        if op.raw() % 8 == 1 {
            let at = match op.raw() % 3 {
                0 => now,
                1 => now.saturating_add(40 * unit),
                _ => now.saturating_sub(3 * unit),
            };
            uncounted(key, at, op.cost(capacity));
            continue;
        }
        counted(key, now, op.cost(capacity).max(1), &mut check);
    }
    admitted
}

/// Replays every key's admitted requests through a fresh `model` each: every one is admitted.
fn replay<M: Replay>(admitted: &Admitted, model: impl Fn() -> M) -> Result<(), TestCaseError> {
    for (key, requests) in admitted {
        let mut model = model();
        for (i, &(at, cost)) in requests.iter().enumerate() {
            prop_assert!(
                model.admits(at, cost),
                "key {}: admission {} of {:?} (at the running maximum {}, weight {}) is refused by the model",
                key,
                i,
                requests,
                at,
                cost
            );
        }
    }
    Ok(())
}

/// A direct limiter through the trace: checks through `check_n_at`, peeks through `peek_n_at`
/// (which must answer what the check would and change nothing), weightless checks through
/// `check_n_at` (which must change nothing either).
fn direct<A: Algorithm>(algorithm: A, ops: &[Op], start: u64, unit: u64) -> Admitted {
    let capacity = algorithm.capacity();
    let limiter = DirectLimiter::with_clock(algorithm, ManualClock::new());
    let at = Timestamp::from_nanos;
    run(
        ops,
        start,
        unit,
        capacity,
        1,
        |_, now, cost| limiter.check_n_at(cost, at(now)).unwrap().is_allowed(),
        |_, now, cost| {
            let before = limiter.raw_state_wide();
            let _ = limiter.peek_n_at(cost, at(now)).unwrap();
            let _ = limiter.check_n_at(0, at(now)).unwrap();
            assert_eq!(
                limiter.raw_state_wide(),
                before,
                "a peek or a weightless check changed the state"
            );
        },
    )
}

/// A keyed limiter with room for every key, through the trace.
fn keyed<A: Algorithm>(algorithm: A, ops: &[Op], start: u64, unit: u64, keys: u64) -> Admitted {
    let capacity = algorithm.capacity();
    let limiter = KeyedLimiter::<u64, _, _>::with_clock(algorithm, 64, ManualClock::new()).unwrap();
    let at = Timestamp::from_nanos;
    let admitted = run(
        ops,
        start,
        unit,
        capacity,
        keys,
        |key, now, cost| limiter.check_n_at(&key, cost, at(now)).unwrap().is_allowed(),
        |key, now, cost| {
            let _ = limiter.peek_n_at(&key, cost, at(now)).unwrap();
            let _ = limiter.check_n_at(&key, 0, at(now)).unwrap();
        },
    );
    assert_eq!(limiter.len() as u64, keys, "a key was forgotten or doubled");
    admitted
}

fn log_direct(log: SlidingLog, ops: &[Op], start: u64, unit: u64) -> Admitted {
    let capacity = log.limit();
    let limiter = LogLimiter::with_clock(log, ManualClock::new());
    let at = Timestamp::from_nanos;
    run(
        ops,
        start,
        unit,
        capacity,
        1,
        |_, now, cost| limiter.check_n_at(cost, at(now)).unwrap().is_allowed(),
        |_, now, cost| {
            let _ = limiter.peek_n_at(cost, at(now)).unwrap();
            let _ = limiter.check_n_at(0, at(now)).unwrap();
        },
    )
}

fn log_keyed(log: SlidingLog, ops: &[Op], start: u64, unit: u64, keys: u64) -> Admitted {
    let capacity = log.limit();
    let limiter = KeyedLogLimiter::<u64, _>::with_clock(log, 64, ManualClock::new()).unwrap();
    let at = Timestamp::from_nanos;
    let admitted = run(
        ops,
        start,
        unit,
        capacity,
        keys,
        |key, now, cost| limiter.check_n_at(&key, cost, at(now)).unwrap().is_allowed(),
        |key, now, cost| {
            let _ = limiter.peek_n_at(&key, cost, at(now)).unwrap();
            let _ = limiter.check_n_at(&key, 0, at(now)).unwrap();
        },
    );
    assert_eq!(limiter.len() as u64, keys, "a key was forgotten or doubled");
    admitted
}

/// The bucket of `count` per `period` ns with `burst`, or a rejected case for a rate too fine.
fn bucket<B: Algorithm + std::fmt::Debug>(
    count: u64,
    period: u64,
    burst: u64,
    build: impl Fn(Quota) -> Result<B, tollgate::QuotaError>,
) -> Result<B, TestCaseError> {
    let quota = Quota::new(count, Duration::from_nanos(period))
        .and_then(|quota| quota.with_burst(burst))
        .unwrap();
    bucket_or_reject(count, period, build(quota))
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap()
}

fn quota(limit: u64, window: u64) -> Quota {
    Quota::new(limit, Duration::from_nanos(window)).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_token_bucket_admits_only_what_a_clock_that_never_goes_back_admits(
        count in 1..=10u64,
        period in bucket_period(),
        burst in 1..=10u64,
        start in start(),
        keys in 1..=4u64,
        ops in ops(64),
    ) {
        let bucket = bucket(count, period, burst, TokenBucket::new)?;
        let interval = nanos(bucket.emission_interval());
        let at = start.at(interval);
        let model = || TokenBucketModel::new(interval, burst);
        replay(&direct(bucket, &ops, at, interval), model)?;
        replay(&keyed(bucket, &ops, at, interval, keys), model)?;
    }

    #[test]
    fn a_leaky_bucket_admits_only_what_a_clock_that_never_goes_back_admits(
        count in 1..=10u64,
        period in bucket_period(),
        burst in 1..=10u64,
        start in start(),
        keys in 1..=4u64,
        ops in ops(64),
    ) {
        let shaper = bucket(count, period, burst, LeakyBucket::new)?;
        let interval = nanos(shaper.emission_interval());
        let at = start.at(interval);
        let model = || ShaperModel::new(interval, burst);
        replay(&direct(shaper, &ops, at, interval), model)?;
        replay(&keyed(shaper, &ops, at, interval, keys), model)?;
    }

    #[test]
    fn a_fixed_window_admits_only_what_a_clock_that_never_goes_back_admits(
        limit in 1..=20u64,
        window in window_length(),
        start in start(),
        keys in 1..=4u64,
        ops in ops(64),
    ) {
        let fixed = FixedWindow::new(quota(limit, window)).unwrap();
        let at = start.at(window);
        let model = || FixedWindowModel::new(window, limit);
        replay(&direct(fixed, &ops, at, window), model)?;
        replay(&keyed(fixed, &ops, at, window, keys), model)?;
        // The 128-bit state: the same decisions, in a 16-byte cell and a locked keyed table.
        let wide = fixed.with_wide_state();
        replay(&direct(wide, &ops, at, window), model)?;
        replay(&keyed(wide, &ops, at, window, keys), model)?;
    }

    #[test]
    fn a_sliding_window_admits_only_what_a_clock_that_never_goes_back_admits(
        limit in 1..=20u64,
        window in window_length(),
        start in start(),
        keys in 1..=4u64,
        ops in ops(64),
    ) {
        let sliding = SlidingWindow::new(quota(limit, window)).unwrap();
        let at = start.at(window);
        let model = || SlidingWindowModel::new(window, limit);
        replay(&direct(sliding, &ops, at, window), model)?;
        replay(&keyed(sliding, &ops, at, window, keys), model)?;
        // The 128-bit state: the same decisions, in a 16-byte cell and a locked keyed table.
        let wide = sliding.with_wide_state();
        replay(&direct(wide, &ops, at, window), model)?;
        replay(&keyed(wide, &ops, at, window, keys), model)?;
    }

    #[test]
    fn a_sliding_log_admits_only_what_a_clock_that_never_goes_back_admits(
        limit in 1..=20u64,
        window in window_length(),
        start in start(),
        keys in 1..=4u64,
        ops in ops(64),
    ) {
        let log = SlidingLog::new(quota(limit, window)).unwrap();
        let at = start.at(window);
        let model = || SlidingLogModel::new(window, limit);
        replay(&log_direct(log, &ops, at, window), model)?;
        replay(&log_keyed(log, &ops, at, window, keys), model)?;
    }
}

/// Decides `(time in ms, weight)` requests in order on `check`, and returns which it admitted.
fn admissions(trace: &[(u64, u64)], mut check: impl FnMut(Timestamp, u64) -> bool) -> Vec<bool> {
    trace
        .iter()
        .map(|&(millis, cost)| check(Timestamp::from_nanos(millis * 1_000_000), cost))
        .collect()
}

/// A log of 2 per second: 1 unit at 10.0 s admitted, 2 at 10.9 s refused, 1 at 9.9 s admitted
/// (decided at 10.9 s, the latest time the log was shown), 2 at 11.0 s refused: the unit
/// admitted for 9.9 s counts at 10.9 s, as on a clock that never went back. Decided at the
/// newest unit (10.0 s) instead, that unit left the window at 11.0 s and the last request was
/// admitted: three units at readings within one second of each other, after the clock had read
/// 10.9 s.
#[test]
fn a_log_decides_a_step_back_at_the_latest_time_it_was_shown() {
    let trace = [(10_000, 1), (10_900, 2), (9_900, 1), (11_000, 2)];
    let log = SlidingLog::new("2/s".parse().unwrap()).unwrap();
    let direct = LogLimiter::with_clock(log, ManualClock::new());
    let got = admissions(&trace, |at, cost| {
        direct.check_n_at(cost, at).unwrap().is_allowed()
    });
    assert_eq!(got, [true, false, true, false]);
    let keyed = KeyedLogLimiter::<str, _>::with_clock(log, 4, ManualClock::new()).unwrap();
    let got = admissions(&trace, |at, cost| {
        keyed.check_n_at("k", cost, at).unwrap().is_allowed()
    });
    assert_eq!(got, [true, false, true, false]);
}

/// A sliding window of 2 per minute: 1 unit at 0 s admitted, 2 at 119.999999999 s refused (the
/// previous window still weighs almost all of its unit), 1 at 30 s admitted (decided at the start
/// of window 1, where the refusal moved the state: the estimate there is `0 + 1 * 1 = 1`), 1 at
/// 119.999999999 s refused (window 1 holds 1, window 0 weighs a nanosecond's share of 1). Before
/// a refusal stored the moved window, the unit for 30 s was counted in window 0, and the last
/// request admitted: three units in a span the clock had read past, where a clock that never
/// goes back admits two.
#[test]
fn a_sliding_window_refusal_in_a_later_window_moves_the_window() {
    let late = 119_999_999_999;
    let trace = [(0, 1), (late, 2), (30_000_000_000, 1), (late, 1)];
    let sliding = SlidingWindow::new("2/min".parse().unwrap()).unwrap();
    let at = Timestamp::from_nanos;
    let decide = |check: &mut dyn FnMut(Timestamp, u64) -> bool| -> Vec<bool> {
        trace
            .iter()
            .map(|&(nanos, cost)| check(at(nanos), cost))
            .collect()
    };
    let direct = DirectLimiter::with_clock(sliding, ManualClock::new());
    let got = decide(&mut |at, cost| direct.check_n_at(cost, at).unwrap().is_allowed());
    assert_eq!(got, [true, false, true, false]);
    let keyed = KeyedLimiter::<str, _, _>::with_clock(sliding, 4, ManualClock::new()).unwrap();
    let got = decide(&mut |at, cost| keyed.check_n_at("k", cost, at).unwrap().is_allowed());
    assert_eq!(got, [true, false, true, false]);
    // On the running maximum (0, late, late, late) the model admits the first and the third.
    let mut model = SlidingWindowModel::new(60_000_000_000, 2);
    assert_eq!(
        [(0, 1), (late, 1)].map(|(t, cost)| model.admit(t, cost)),
        [true, true]
    );
    // A refusal in the window it is stored in writes nothing, however many come.
    let stored = direct.raw_state();
    assert!(!direct.check_n_at(2, at(late)).unwrap().is_allowed());
    assert_eq!(direct.raw_state(), stored);
}
