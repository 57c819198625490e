//! Property tests of the sliding window log against a plain list of admitted requests
//! ([`reference::sliding_log::SlidingLogModel`]), direct and keyed, and of its behaviour when
//! the clock steps backwards or runs into the end of representable time.

use std::collections::HashMap;
use std::time::Duration;

use crate::reference::sliding_log::SlidingLogModel;
use crate::reference::trace::{ops, start, window_length, Op};
use crate::reference::Expected;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use tollgate::{
    Clock, KeyedLogLimiter, LogLimiter, ManualClock, Outcome, Quota, SlidingLog, Timestamp, WhenFull,
};

fn log(limit: u64, window: u64) -> SlidingLog {
    SlidingLog::new(Quota::new(limit, Duration::from_nanos(window)).unwrap()).unwrap()
}

/// Decides one request at `now`: first peeks (which must not record), then checks, through the
/// explicit-timestamp API or the manual clock set to `now` (and, for weight 1, sometimes through
/// the unweighted calls). Fails the case unless the peek and the check agree.
fn peek_then_check(
    limiter: &LogLimiter<ManualClock>,
    op: &Op,
    now: u64,
    cost: u64,
) -> Result<Expected, TestCaseError> {
    let at = Timestamp::from_nanos(now);
    let (via_clock, unweighted) = (op_bit(op, now, 0), cost == 1 && op_bit(op, now, 1));
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

/// A pseudo-random bit per request, from its weight and time (`Op`'s fields are private).
fn op_bit(op: &Op, now: u64, bit: u32) -> bool {
    (op.cost(255) ^ now.rotate_left(7 * bit + 3)) & 1 == 1
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// With time never going backwards, every decision (allowed, remaining, retry-after,
    /// reset-after, delay) equals the list's, and peeking first changes nothing.
    #[test]
    fn decisions_match_the_list_of_admissions(
        limit in 1..=20u64,
        window in window_length(),
        start in start(),
        ops in ops(64),
    ) {
        run_against_model(log(limit, window), start.at(window), &ops)?;
    }

    /// The same for traces that run into the end of representable time (`u64::MAX` ns), where a
    /// unit that would leave the window past it reports `u64::MAX` ("never"), as the list does.
    #[test]
    fn the_end_of_time_matches_the_list(
        limit in 1..=20u64,
        window in window_length(),
        start in start(),
        ops in ops(64),
    ) {
        run_against_model(log(limit, window), start.near_the_end(window), &ops)?;
    }

    /// With the clock stepping backwards as well, nothing panics, peek agrees with check, and the
    /// limiter decides exactly as the list fed the latest time a weighted request was decided at
    /// (admitted or refused) whenever `now` is before it (a clock that stood still): the same
    /// requests are admitted with the same
    /// `remaining`, and retry-after and reset-after point at the same instants, measured from the
    /// real, earlier, `now`. So no window of the recorded times ever holds more than the limit.
    #[test]
    fn backward_steps_decide_as_at_the_latest_admission(
        limit in 1..=20u64,
        window in window_length(),
        start in start(),
        near_the_end: bool,
        ops in ops(64),
    ) {
        let log = log(limit, window);
        let limiter = LogLimiter::with_clock(log, ManualClock::new());
        let mut model = SlidingLogModel::new(window, limit);
        // The latest time a weighted request was decided at, admitted or refused.
        let mut latest_counted = None;
        let mut now = if near_the_end { start.near_the_end(window) } else { start.at(window) };
        for (i, op) in ops.iter().enumerate() {
            if i > 0 {
                now = op.any_direction(now, window);
            }
            let cost = op.cost(limit);
            let at = latest_counted.map_or(now, |latest: u64| latest.max(now));
            if cost > 0 {
                latest_counted = Some(at);
            }
            let got = peek_then_check(&limiter, op, now, cost)?;
            let expected = model.decide(at, cost);
            let context = format!("request {i} at t={now} (decided at {at}) weight {cost} (w={window}, limit={limit})");
            prop_assert_eq!(got.allowed, expected.allowed, "{}", &context);
            prop_assert_eq!(got.remaining, expected.remaining, "{}", &context);
            prop_assert_eq!(got.delay, 0, "{}", &context);
            for (got, expected) in [(got.retry_after, expected.retry_after), (got.reset_after, expected.reset_after)] {
                if expected == 0 || expected == u64::MAX {
                    prop_assert_eq!(got, expected, "{}", &context);
                } else {
                    prop_assert_eq!(u128::from(now) + u128::from(got), u128::from(at) + u128::from(expected), "{}", &context);
                }
            }
            prop_assert!(model.weight_in_window(at) <= limit, "{}", &context);
        }
    }

    /// A keyed limiter over a few keys (with room for all) decides every request exactly as one
    /// list per key: no key is charged for another's requests, and a key whose slot was reused
    /// while idle comes back deciding as it would have.
    #[test]
    fn keyed_decisions_match_one_list_per_key(
        limit in 1..=8u64,
        window in window_length(),
        start in start(),
        keys in proptest::collection::vec(0u64..5, 64),
        ops in ops(64),
    ) {
        let limiter = KeyedLogLimiter::<u64, _>::with_clock(log(limit, window), 16, ManualClock::new()).unwrap();
        let mut models: HashMap<u64, SlidingLogModel> = HashMap::new();
        let mut weighted = std::collections::HashSet::new();
        let mut now = start.at(window);
        for (i, (op, key)) in ops.iter().zip(&keys).enumerate() {
            if i > 0 {
                now = op.forward(now, window);
            }
            let cost = op.cost(limit);
            if cost > 0 {
                weighted.insert(*key);
            }
            let at = Timestamp::from_nanos(now);
            let peeked = Expected::of(&limiter.peek_n_at(key, cost, at).unwrap());
            let got = Expected::of(&limiter.check_n_at(key, cost, at).unwrap());
            prop_assert_eq!(peeked, got, "peek and check disagree for key {} at t={}", key, now);
            let model = models.entry(*key).or_insert_with(|| SlidingLogModel::new(window, limit));
            prop_assert_eq!(got, model.decide(now, cost), "key {} request {} at t={} weight {}", key, i, now, cost);
        }
        // Every key asked for a weight took a slot, unless it reused the slot of an idle one; a
        // weightless request takes none.
        let held = if weighted.is_empty() { 0..=0 } else { 1..=weighted.len() };
        prop_assert!(held.contains(&limiter.len()), "{} held, {} keys weighed", limiter.len(), weighted.len());
    }

    /// A table with room for one key (two slots) and five keys in play, so that slots are reused
    /// all the time: every request decides exactly as one list per key, or, refused for room, is
    /// a weighted request of a key with nothing in the window (a log with a unit in the window is
    /// never forgotten), and the table never holds more keys than slots.
    #[test]
    fn tight_keyed_tables_forget_only_idle_logs(
        limit in 1..=4u64,
        window in window_length(),
        start in start(),
        keys in proptest::collection::vec(0u64..5, 96),
        ops in ops(96),
    ) {
        let limiter = KeyedLogLimiter::<u64, _>::with_clock(log(limit, window), 1, ManualClock::new())
            .unwrap()
            .when_full(WhenFull::Refuse);
        let slots = limiter.slots();
        let mut models: HashMap<u64, SlidingLogModel> = HashMap::new();
        let mut now = start.at(window);
        for (i, (op, key)) in ops.iter().zip(&keys).enumerate() {
            if i > 0 {
                now = op.forward(now, window);
            }
            let cost = op.cost(limit);
            let decision = limiter.check_n_at(key, cost, Timestamp::from_nanos(now)).unwrap();
            let model = models.entry(*key).or_insert_with(|| SlidingLogModel::new(window, limit));
            if decision.outcome() == Outcome::TableFull {
                prop_assert!(cost > 0, "request {} for key {}: a weightless request refused for room", i, key);
                prop_assert_eq!(
                    model.weight_in_window(now), 0,
                    "request {} for key {} at t={}: a key with units in the window was forgotten", i, key, now
                );
                continue;
            }
            prop_assert_eq!(Expected::of(&decision), model.decide(now, cost), "key {} request {} at t={} weight {}", key, i, now, cost);
            prop_assert!(limiter.len() <= slots, "{} keys held in {} slots", limiter.len(), slots);
        }
    }
}

fn run_against_model(log: SlidingLog, start: u64, ops: &[Op]) -> Result<(), TestCaseError> {
    let (limit, window) = (log.limit(), u64::try_from(log.window().as_nanos()).unwrap());
    let limiter = LogLimiter::with_clock(log, ManualClock::new());
    prop_assert_eq!(limiter.capacity(), limit);
    let mut model = SlidingLogModel::new(window, limit);
    let mut now = start;
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            now = op.forward(now, window);
        }
        let cost = op.cost(limit);
        let got = peek_then_check(&limiter, op, now, cost)?;
        let expected = model.decide(now, cost);
        prop_assert_eq!(
            got,
            expected,
            "request {} at t={} weight {} (w={}, limit={})",
            i,
            now,
            cost,
            window,
            limit
        );
    }
    Ok(())
}

/// The exactness the counters lack: limit 100 per minute, 100 admitted at 0:59, then nothing
/// passes until each of them leaves the window, one minute after it was admitted (a fixed window
/// would admit 100 more at 1:00, a sliding window counter some).
#[test]
fn no_boundary_spike() {
    let limiter = LogLimiter::with_clock(
        SlidingLog::new("100/min".parse().unwrap()).unwrap(),
        ManualClock::new(),
    );
    let at = Timestamp::from_secs;
    assert_eq!(
        (0..150).filter(|_| limiter.check_at(at(59)).is_allowed()).count(),
        100
    );
    for secs in [60, 61, 90, 118] {
        let refused = limiter.check_at(at(secs));
        assert!(!refused.is_allowed(), "at {secs} s");
        assert_eq!(refused.retry_after(), Duration::from_secs(119 - secs));
    }
    assert_eq!(
        (0..150)
            .filter(|_| limiter.check_at(at(119)).is_allowed())
            .count(),
        100
    );
}

/// A step back in time is decided at the newest admission and recorded there (the ring stays in
/// order): limit 2 per minute, one at 1:00, one at 0:30 (recorded at 1:00), then a third at
/// 1:59 is refused, although a log of the *timestamps* (0:30, 1:00) would have let 0:30 go.
#[test]
fn a_step_back_is_recorded_at_the_newest_admission() {
    let limiter = LogLimiter::with_clock(
        SlidingLog::new("2/min".parse().unwrap()).unwrap(),
        ManualClock::new(),
    );
    let at = Timestamp::from_secs;
    assert!(limiter.check_at(at(60)).is_allowed());
    let back = limiter.check_at(at(30));
    assert!(back.is_allowed());
    assert_eq!(back.reset_after(), Duration::from_secs(90)); // 2:00, from 0:30
    assert!(!limiter.check_at(at(119)).is_allowed());
    assert!(!limiter.check_at(at(0)).is_allowed());
    let both_left = limiter.check_n_at(2, at(120)).unwrap();
    assert!(both_left.is_allowed());
}
