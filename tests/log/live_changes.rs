//! `LogLimiter` and `KeyedLogLimiter` on a `Live<SlidingLog>`: a limit raised while logs are
//! full grows every log before it is read, so that each key's decisions equal the list of its
//! admitted requests under every limit and shorter window in turn.

use std::time::Duration;

use proptest::prelude::*;
use tollgate::{
    KeyedLogLimiter, Live, LogLimiter, ManualClock, Quota, QuotaChangeError, SlidingLog, Timestamp,
};

use crate::reference::sliding_log::SlidingLogModel;
use crate::reference::Expected;

/// A request: how far time moves (ns), which key, which weight, and whether the quota changes
/// first (to which of the trace's quotas).
type Step = (u64, u64, u64, Option<usize>);

fn steps() -> impl Strategy<Value = Vec<Step>> {
    proptest::collection::vec(
        (
            prop_oneof![Just(0u64), 0..100u64, 0..400u64],
            0..3u64,
            0..=4u64,
            proptest::option::weighted(0.2, 0..4usize),
        ),
        1..80,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    /// Three keys of a keyed log, limits from 1 to 30 and windows of 10 to 300 ns in turn
    /// (a longer window refused): every decision equals the key's list of admissions, under the
    /// quota in force; a direct log driven by key 0's requests decides the same.
    #[test]
    fn every_key_keeps_its_admissions_across_changes(
        quotas in proptest::collection::vec((1..=30u64, 10..=300u64), 4),
        steps in steps(),
    ) {
        let quota = |(limit, window): (u64, u64)| Quota::new(limit, Duration::from_nanos(window)).expect("valid");
        let first = SlidingLog::new(quota(quotas[0])).expect("valid");
        let keyed = KeyedLogLimiter::<u64, _, _>::with_clock(Live::new(first), 8, ManualClock::new()).expect("valid");
        let direct = LogLimiter::with_clock(Live::new(first), ManualClock::new());
        let (mut limit, mut window) = quotas[0];
        let mut models: Vec<SlidingLogModel> = (0..3).map(|_| SlidingLogModel::new(window, limit)).collect();
        let mut largest = limit;
        let mut now = 1_000_000u64;
        for (i, &(step, key, cost, change)) in steps.iter().enumerate() {
            now += step;
            if let Some(choice) = change {
                let (next_limit, next_window) = quotas[choice];
                let keyed_change = keyed.set_quota(quota(quotas[choice]));
                prop_assert_eq!(&keyed_change, &direct.set_quota(quota(quotas[choice])));
                match keyed_change {
                    Ok(()) => {
                        (limit, window) = (next_limit, next_window);
                        largest = largest.max(limit);
                        for model in &mut models {
                            model.set_quota(window, limit);
                        }
                    }
                    Err(QuotaChangeError::WindowLengthened { .. }) => prop_assert!(next_window > window),
                    Err(other) => prop_assert!(false, "{}", other),
                }
            }
            let cost = cost.min(limit);
            let at = Timestamp::from_nanos(now);
            let expected = models[key as usize].decide(now, cost);
            let got = keyed.check_n_at(&key, cost, at).expect("fits");
            prop_assert_eq!(Expected::of(&got), expected, "request {} key {} at {} weight {} (w={}, limit={})", i, key, now, cost, window, limit);
            if key == 0 {
                prop_assert_eq!(Expected::of(&direct.check_n_at(cost, at).expect("fits")), expected);
            }
        }
        // Every slot's log keeps room for the largest limit it has had.
        prop_assert!(keyed.max_memory() >= largest as usize * 8 * keyed.slots());
    }
}
