//! `KeyedLimiter<K, Live<A>>`: a quota changed while keys are held keeps every key's state, in
//! the lock-free table (64-bit states) and in the locked one (a window's 128-bit states): every
//! decision equals a map of pure states decided by the plain algorithm of the quota in force.

use std::collections::HashMap;
use std::time::Duration;

use proptest::prelude::*;
use tollgate::algorithm::{Algorithm, FRESH_WIDE_STATE};
use tollgate::live::Retune;
use tollgate::{FixedWindow, KeyedLimiter, Live, ManualClock, Quota, SlidingWindow, Timestamp, TokenBucket};

/// A request of the trace: how far time moves (ns), which key, which weight, and whether the
/// quota changes first (to which of the trace's quotas).
type Step = (u64, u64, u64, Option<usize>);

fn steps(window: u64) -> impl Strategy<Value = Vec<Step>> {
    proptest::collection::vec(
        (
            prop_oneof![Just(0u64), 0..window, 0..4 * window],
            0..4u64,
            1..=3u64,
            proptest::option::weighted(0.25, 0..3usize),
        ),
        1..60,
    )
}

/// Runs `steps` through a live keyed table of `quotas[0]` and through the map, changing the
/// quota where the trace says (a change `Live` refuses leaves both as they were).
fn run<A: Algorithm + Retune + Clone>(quotas: &[A], steps: &[Step]) -> Result<(), TestCaseError> {
    let limiter = KeyedLimiter::<u64, _, _>::with_clock(Live::new(quotas[0].clone()), 16, ManualClock::new())
        .expect("valid");
    let mut running = quotas[0].clone();
    let mut states: HashMap<u64, u128> = HashMap::new();
    let mut now = 1_700_000_000_000_000_000u64;
    for (i, &(step, key, cost, change)) in steps.iter().enumerate() {
        now += step;
        if let Some(choice) = change {
            if limiter.algorithm().replace(quotas[choice].clone()).is_ok() {
                running = quotas[choice].clone();
            }
        }
        let cost = cost.min(running.capacity());
        let state = states.entry(key).or_insert(FRESH_WIDE_STATE);
        let expected = running.decide_wide(*state, Timestamp::from_nanos(now), cost);
        *state = expected.state;
        let got = limiter
            .check_n_at(&key, cost, Timestamp::from_nanos(now))
            .expect("fits");
        prop_assert_eq!(
            got,
            expected.decision,
            "request {} for key {} at {} weight {}",
            i,
            key,
            now,
            cost
        );
    }
    Ok(())
}

fn quota(count: u64, window: u64) -> Quota {
    Quota::new(count, Duration::from_nanos(window)).expect("valid")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn a_keyed_token_bucket_keeps_every_key_across_changes(counts in proptest::collection::vec(1..=20u64, 3), steps in steps(1_000_000)) {
        let quotas: Vec<TokenBucket> = counts.iter().map(|&count| TokenBucket::new(quota(count, 1_000_000)).expect("valid")).collect();
        run(&quotas, &steps)?;
    }

    #[test]
    fn a_keyed_fixed_window_keeps_every_key_across_changes(limits in proptest::collection::vec(1..=20u64, 3), steps in steps(1_000_000)) {
        let quotas: Vec<FixedWindow> = limits.iter().map(|&limit| FixedWindow::new(quota(limit, 1_000_000)).expect("valid")).collect();
        run(&quotas, &steps)?;
    }

    /// 128-bit states, in the locked table.
    #[test]
    fn a_keyed_wide_sliding_window_keeps_every_key_across_changes(limits in proptest::collection::vec(1..=20u64, 3), steps in steps(1_000_000)) {
        let quotas: Vec<SlidingWindow> = limits
            .iter()
            .map(|&limit| SlidingWindow::new(quota(limit, 1_000_000)).expect("valid").with_wide_state())
            .collect();
        run(&quotas, &steps)?;
    }
}

/// A change the running states cannot read leaves every key as it was.
#[test]
fn a_refused_change_leaves_the_keys_as_they_were() {
    let at = Timestamp::from_secs(1_700_000_000);
    let limiter = KeyedLimiter::<str, _, _>::with_clock(
        Live::new(FixedWindow::new("5/s".parse().expect("valid")).expect("valid")),
        8,
        ManualClock::new(),
    )
    .expect("valid");
    assert!(limiter.check_n_at("a", 4, at).expect("fits").is_allowed());
    assert!(limiter
        .algorithm()
        .set_quota("5/min".parse().expect("valid"))
        .is_err());
    assert_eq!(limiter.peek_n_at("a", 0, at).expect("fits").remaining(), 1);
    limiter
        .algorithm()
        .set_quota("3/s".parse().expect("valid"))
        .expect("live");
    assert!(!limiter.check_at("a", at).is_allowed(), "4 counted, 3 allowed");
    assert_eq!(limiter.check_n_at("b", 3, at).expect("fits").remaining(), 0);
    assert_eq!(limiter.len(), 2);
}
