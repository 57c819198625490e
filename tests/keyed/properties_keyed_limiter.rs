//! Property tests of `KeyedLimiter` against a reference: a `HashMap` from key to state word,
//! run through the pure `Algorithm::decide` of the same algorithm, with `FRESH_STATE` for a key
//! never seen.
//!
//! Random traces of requests (a key from a set of 1 to 8, a step of the clock, never backwards,
//! a weight from 0 to the capacity, one request in ten preceded by a `reset` of its key) run
//! through a `KeyedLimiter` on a `ManualClock` and through the reference, where a reset makes
//! the key's state `FRESH_STATE` and answers whether the state it replaced was not idle:
//!
//! - in a table with room for every key, every decision equals the reference's exactly, and
//!   every peek equals the check after it;
//! - in a table for 1 to 4 keys, where keys must be forgotten to make room, a key is forgotten
//!   only when its state is reclaimable (idle, and for the fixed window a whole window past its
//!   own: `Algorithm::is_reclaimable`), and an idle state decides exactly like a fresh one, so every
//!   tracked decision still equals the reference's (on the key's own state, which being
//!   forgotten never resets); a key is refused for room (`TableFull`, or `AllowedUntracked` with
//!   `Admit`) only when it carries no debt itself and every slot holds another key that does.

use std::collections::HashMap;
use std::fmt::Debug;
use std::time::Duration;

use crate::keyed_common::{same_numbers, ts, SEC, T0};
use proptest::prelude::*;
use tollgate::algorithm::{Algorithm, FRESH_STATE};
use tollgate::{
    FixedWindow, KeyedLimiter, LeakyBucket, ManualClock, Outcome, Quota, SlidingWindow, Timestamp,
    TokenBucket, WhenFull,
};

/// Which algorithm, and its quota.
#[derive(Clone, Copy, Debug)]
enum Kind {
    TokenBucket,
    LeakyBucket,
    FixedWindow,
    SlidingWindow,
}

#[derive(Clone, Copy, Debug)]
struct Setup {
    kind: Kind,
    count: u64,
    period: u64,
    /// Buckets only.
    burst: Option<u64>,
    /// Nanoseconds after `T0` the trace starts.
    offset: u64,
}

/// One request: which key (an index into the trace's key set), how far the clock moves first
/// (in thousandths of the period), and a raw weight (reduced modulo capacity + 1).
#[derive(Clone, Copy, Debug)]
struct Op {
    key: u8,
    step: u64,
    weight: u64,
    /// Use the `_at` forms with an explicit time instead of the clock.
    at: bool,
    /// Reset the key first.
    reset: bool,
}

fn setup() -> impl Strategy<Value = Setup> {
    let kind = prop_oneof![
        Just(Kind::TokenBucket),
        Just(Kind::LeakyBucket),
        Just(Kind::FixedWindow),
        Just(Kind::SlidingWindow)
    ];
    let period = prop_oneof![Just(SEC), Just(60 * SEC), 1_000u64..=10 * SEC];
    (
        kind,
        1u64..=6,
        period,
        proptest::option::of(1u64..=6),
        0u64..=120 * SEC,
    )
        .prop_map(|(kind, count, period, burst, offset)| Setup {
            kind,
            count,
            period,
            burst: burst.filter(|_| matches!(kind, Kind::TokenBucket | Kind::LeakyBucket)),
            offset,
        })
}

fn ops(max_len: usize) -> impl Strategy<Value = Vec<Op>> {
    let step = prop_oneof![
        4 => Just(0u64),
        4 => 0u64..=500,
        2 => 0u64..=2_000,
        1 => 2_000u64..=5_000,
    ];
    proptest::collection::vec(
        (
            any::<u8>(),
            step,
            any::<u64>(),
            proptest::bool::weighted(0.2),
            proptest::bool::weighted(0.1),
        )
            .prop_map(|(key, step, weight, at, reset)| Op {
                key,
                step,
                weight,
                at,
                reset,
            }),
        1..=max_len,
    )
}

/// Runs `body` with the algorithm `setup` describes.
macro_rules! with_algorithm {
    ($setup:expr, |$algorithm:ident| $body:expr) => {{
        let setup: Setup = $setup;
        let mut quota = Quota::new(setup.count, Duration::from_nanos(setup.period)).unwrap();
        if let Some(burst) = setup.burst {
            quota = quota.with_burst(burst).unwrap();
        }
        match setup.kind {
            Kind::TokenBucket => {
                let $algorithm = TokenBucket::new(quota).unwrap();
                $body
            }
            Kind::LeakyBucket => {
                let $algorithm = LeakyBucket::new(quota).unwrap();
                $body
            }
            Kind::FixedWindow => {
                let $algorithm = FixedWindow::new(quota).unwrap();
                $body
            }
            Kind::SlidingWindow => {
                let $algorithm = SlidingWindow::new(quota).unwrap();
                $body
            }
        }
    }};
}

/// The reference: one state word per key, decided by the pure algorithm.
struct Reference<'a, A> {
    algorithm: &'a A,
    states: HashMap<u64, u64>,
}

impl<A: Algorithm> Reference<'_, A> {
    fn state(&self, key: u64) -> u64 {
        self.states.get(&key).copied().unwrap_or(FRESH_STATE)
    }

    fn decide(&self, key: u64, now: Timestamp, cost: u64) -> tollgate::algorithm::Transition {
        self.algorithm.decide(self.state(key), now, cost)
    }

    /// Keys whose state the table may not forget at `now` (it carries debt, or, for the fixed
    /// window, its window ended less than a window ago: `Algorithm::is_reclaimable`), other
    /// than `except`.
    fn with_debt(&self, now: Timestamp, except: Option<u64>) -> usize {
        self.states
            .iter()
            .filter(|&(&key, &state)| Some(key) != except && !self.algorithm.is_reclaimable(state, now))
            .count()
    }

    fn is_idle(&self, key: u64, now: Timestamp) -> bool {
        self.algorithm.is_idle(self.state(key), now)
    }
}

/// Resets `key` in the limiter and in the reference (`at`: with the explicit time): the limiter
/// answers whether the reference's state was still limiting, and both start afresh.
fn reset_both<A: Algorithm>(
    limiter: &KeyedLimiter<u64, A, ManualClock>,
    reference: &mut Reference<'_, A>,
    key: u64,
    now: u64,
    at: bool,
    i: usize,
) -> Result<(), TestCaseError> {
    let limiting = if at {
        limiter.reset_at(&key, ts(now))
    } else {
        limiter.reset(&key)
    };
    prop_assert_eq!(
        limiting,
        !reference.is_idle(key, ts(now)),
        "op {}: reset of key {}",
        i,
        key
    );
    reference.states.insert(key, FRESH_STATE);
    Ok(())
}

/// The trace's key set: `keys` distinct `u64`s, spread out.
fn key_of(op: &Op, keys: u8) -> u64 {
    u64::from(op.key % keys).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5eed
}

/// A table with room for every key: every decision, and every peek, equals the reference's.
fn roomy<A: Algorithm + Debug>(
    algorithm: A,
    setup: &Setup,
    capacity: usize,
    keys: u8,
    trace: &[Op],
) -> Result<(), TestCaseError> {
    let clock = ManualClock::starting_at(ts(T0 + setup.offset));
    let limiter = KeyedLimiter::<u64, _, _>::with_clock(algorithm, capacity, clock.clone()).unwrap();
    let mut reference = Reference {
        algorithm: limiter.algorithm(),
        states: HashMap::new(),
    };
    let capacity_units = limiter.algorithm().capacity();
    let mut now = T0 + setup.offset;
    for (i, op) in trace.iter().enumerate() {
        now += u64::try_from(u128::from(setup.period) * u128::from(op.step) / 1_000).unwrap();
        clock.set(ts(now));
        let key = key_of(op, keys);
        let cost = op.weight % (capacity_units + 1);
        if op.reset {
            reset_both(&limiter, &mut reference, key, now, op.at, i)?;
        }
        let len = limiter.len();
        let expected = reference.decide(key, ts(now), cost);
        let peeked = if op.at {
            limiter.peek_n_at(&key, cost, ts(now)).unwrap()
        } else {
            limiter.peek_n(&key, cost).unwrap()
        };
        prop_assert_eq!(limiter.len(), len, "op {}: a peek inserted", i);
        let checked = if op.at {
            limiter.check_n_at(&key, cost, ts(now)).unwrap()
        } else {
            limiter.check_n(&key, cost).unwrap()
        };
        prop_assert_eq!(
            peeked,
            checked,
            "op {}: peek then check, key {} weight {} at {}",
            i,
            key,
            cost,
            now
        );
        prop_assert_eq!(
            checked,
            expected.decision,
            "op {}: key {} weight {} at {} (state {:#x})",
            i,
            key,
            cost,
            now,
            reference.state(key)
        );
        reference.states.insert(key, expected.state);
        // Every key with debt is held; nothing more than the keys seen.
        let len = limiter.len();
        prop_assert!(len <= reference.states.len(), "op {}: len {}", i, len);
        let with_debt = reference.with_debt(ts(now), None);
        prop_assert!(
            len >= with_debt,
            "op {}: {} entries, {} keys with debt",
            i,
            len,
            with_debt
        );
    }
    Ok(())
}

/// A table for 1 to 4 keys (2 to 6 slots, one shard, probed whole): keys are forgotten to make
/// room, but only idle ones, so every tracked decision equals the reference's on the key's own
/// state; a refusal for room comes only when the key itself carries no debt and every slot holds
/// a key that does.
fn tight<A: Algorithm + Debug>(
    algorithm: A,
    setup: &Setup,
    capacity: usize,
    policy: WhenFull,
    keys: u8,
    trace: &[Op],
) -> Result<(), TestCaseError> {
    let clock = ManualClock::starting_at(ts(T0 + setup.offset));
    let limiter = KeyedLimiter::<u64, _, _>::with_clock(algorithm, capacity, clock.clone())
        .unwrap()
        .when_full(policy);
    let slots = limiter.slots();
    prop_assert!(slots >= capacity && slots <= 6);
    let mut reference = Reference {
        algorithm: limiter.algorithm(),
        states: HashMap::new(),
    };
    let capacity_units = limiter.algorithm().capacity();
    let mut now = T0 + setup.offset;
    for (i, op) in trace.iter().enumerate() {
        now += u64::try_from(u128::from(setup.period) * u128::from(op.step) / 1_000).unwrap();
        clock.set(ts(now));
        let key = key_of(op, keys);
        let cost = op.weight % (capacity_units + 1);
        if op.reset {
            reset_both(&limiter, &mut reference, key, now, op.at, i)?;
        }
        let len = limiter.len();
        let expected = reference.decide(key, ts(now), cost);
        let peeked = if op.at {
            limiter.peek_n_at(&key, cost, ts(now)).unwrap()
        } else {
            limiter.peek_n(&key, cost).unwrap()
        };
        prop_assert_eq!(limiter.len(), len, "op {}: a peek inserted", i);
        let checked = if op.at {
            limiter.check_n_at(&key, cost, ts(now)).unwrap()
        } else {
            limiter.check_n(&key, cost).unwrap()
        };
        match checked.outcome() {
            Outcome::TableFull | Outcome::AllowedUntracked => {
                // A weightless request needs no room: it is told a fresh key's numbers.
                prop_assert!(
                    cost > 0,
                    "op {}: a weightless request was refused for room: {:?}",
                    i,
                    checked
                );
                let untracked = checked.outcome() == Outcome::AllowedUntracked;
                prop_assert_eq!(untracked, policy == WhenFull::Admit, "op {}: {:?}", i, checked);
                // The key itself had no debt: a key with debt is never forgotten.
                prop_assert!(
                    reference.is_idle(key, ts(now)),
                    "op {}: key {} with debt (state {:#x}) was refused for room: {:?}",
                    i,
                    key,
                    reference.state(key),
                    checked
                );
                // Every slot holds another key with debt (at least `capacity` of them, and in
                // a one-shard table probed whole, one per slot).
                let with_debt = reference.with_debt(ts(now), Some(key));
                prop_assert!(
                    with_debt >= capacity && with_debt >= slots,
                    "op {}: refused for room with only {} keys with debt ({} slots)",
                    i,
                    with_debt,
                    slots
                );
                if untracked {
                    let fresh = limiter.algorithm().decide(FRESH_STATE, ts(now), cost).decision;
                    prop_assert!(
                        same_numbers(&checked, &fresh),
                        "op {}: {:?} vs {:?}",
                        i,
                        checked,
                        fresh
                    );
                }
                prop_assert_eq!(limiter.len(), len, "op {}: an untracked key was stored", i);
                // The reference does not count it either.
            }
            _ => {
                prop_assert_eq!(
                    checked,
                    expected.decision,
                    "op {}: key {} weight {} at {} (state {:#x})",
                    i,
                    key,
                    cost,
                    now,
                    reference.state(key)
                );
                // What the check answered, the peek before it answered too. (A peek of a key
                // that then finds no room is the subject of
                // `behaviour::peek_of_a_key_that_finds_no_room_equals_the_check`.)
                prop_assert_eq!(peeked, checked, "op {}: peek then check", i);
                reference.states.insert(key, expected.state);
            }
        }
        let len = limiter.len();
        prop_assert!(len <= slots, "op {}: len {} with {} slots", i, len, slots);
        let with_debt = reference.with_debt(ts(now), None);
        prop_assert!(
            len >= with_debt,
            "op {}: {} entries but {} keys with debt",
            i,
            len,
            with_debt
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_decision_equals_the_reference_when_there_is_room(
        setup in setup(),
        capacity in prop_oneof![Just(8usize), Just(64), Just(5_000)],
        keys in 1u8..=8,
        trace in ops(200),
    ) {
        with_algorithm!(setup, |algorithm| roomy(algorithm, &setup, capacity, keys, &trace))?;
    }

    #[test]
    fn tiny_tables_forget_only_idle_keys(
        setup in setup(),
        capacity in 1usize..=4,
        admit in any::<bool>(),
        keys in 1u8..=8,
        trace in ops(200),
    ) {
        let policy = if admit { WhenFull::Admit } else { WhenFull::Refuse };
        with_algorithm!(setup, |algorithm| tight(algorithm, &setup, capacity, policy, keys, &trace))?;
    }
}

/// The tiny-table property is not vacuous: with 8 keys, a table for one key, and a clock that
/// barely moves, most new keys find no room, and idle keys are forgotten for new ones.
#[test]
fn tight_tables_do_fill_up() {
    let bucket = TokenBucket::new("1/s burst 2".parse().unwrap()).unwrap();
    let clock = ManualClock::starting_at(ts(T0));
    let limiter = KeyedLimiter::<u64, _, _>::with_clock(bucket, 1, clock.clone()).unwrap();
    assert_eq!(limiter.slots(), 2);
    let outcomes: Vec<Outcome> = (0..8u64).map(|k| limiter.check(&k).outcome()).collect();
    assert_eq!(outcomes[..2], [Outcome::Allowed, Outcome::Allowed]);
    assert!(
        outcomes[2..].iter().all(|&o| o == Outcome::TableFull),
        "{outcomes:?}"
    );
    clock.set(ts(T0 + SEC));
    // Keys 0 and 1 are idle again: keys 2 and 3 take their slots.
    assert_eq!(limiter.check(&2).outcome(), Outcome::Allowed);
    assert_eq!(limiter.check(&3).outcome(), Outcome::Allowed);
    assert_eq!(limiter.check(&0).outcome(), Outcome::TableFull);
    assert_eq!(limiter.len(), 2);
}
