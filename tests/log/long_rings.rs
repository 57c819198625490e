//! The ring's count of expired entries (`src/sliding_log/ring.rs`) on long
//! rings: the ring's own proptest has at most 8 entries and the limiter proptests limits up to
//! 20, so the gallop from `expired` never crosses more than a few entries. Here limits up to 400,
//! traces of up to 400 requests mostly a small step apart (so hundreds of entries leave the
//! window between two decisions, or one at a time), clocks that step back, and `reset` (a
//! `clear` of the ring): every decision is the plain list's, decided at the latest time a
//! weighted request was decided at when the clock is behind it.

use std::time::Duration;

use crate::reference::sliding_log::SlidingLogModel;
use crate::reference::trace::{ops, start, window_length};
use crate::reference::Expected;
use proptest::prelude::*;
use tollgate::{LogLimiter, ManualClock, Quota, SlidingLog, Timestamp};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn long_rings_decide_as_the_list(
        limit in 1..=400u64,
        window in window_length(),
        start in start(),
        ops in ops(400),
    ) {
        let log = SlidingLog::new(Quota::new(limit, Duration::from_nanos(window)).unwrap()).unwrap();
        let limiter = LogLimiter::with_clock(log, ManualClock::new());
        let mut model = SlidingLogModel::new(window, limit);
        // The latest time a weighted request was decided at, admitted or refused.
        let mut latest_counted = None;
        let mut now = start.at(window);
        for (i, op) in ops.iter().enumerate() {
            if i > 0 {
                now = op.any_direction(now, window);
            }
            if op.raw() % 97 == 0 {
                limiter.reset_at(Timestamp::from_nanos(now));
                model = SlidingLogModel::new(window, limit);
                latest_counted = None;
            }
            // Mostly weight 1, so that the ring fills with distinct times.
            let cost = if op.raw() % 8 == 0 { op.cost(limit) } else { u64::from(op.raw() % 16 != 0) };
            let at = latest_counted.map_or(now, |latest: u64| latest.max(now));
            if cost > 0 {
                latest_counted = Some(at);
            }
            let got = Expected::of(&limiter.check_n_at(cost, Timestamp::from_nanos(now)).unwrap());
            let expected = model.decide(at, cost);
            let context = format!("request {i} at {now} (decided at {at}), weight {cost}, w {window}, limit {limit}");
            prop_assert_eq!(got.allowed, expected.allowed, "{}", &context);
            prop_assert_eq!(got.remaining, expected.remaining, "{}", &context);
            for (got, expected) in [(got.retry_after, expected.retry_after), (got.reset_after, expected.reset_after)] {
                if expected == 0 || expected == u64::MAX {
                    prop_assert_eq!(got, expected, "{}", &context);
                } else {
                    prop_assert_eq!(u128::from(now) + u128::from(got), u128::from(at) + u128::from(expected), "{}", &context);
                }
            }
        }
    }
}
