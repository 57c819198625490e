//! A keyed limiter of token buckets at a rate whole nanoseconds cannot hold (kept exactly, in
//! 128 bits: the locked table of wide states): when a key is idle and reclaimable, and what a
//! full table tells a new key.

use std::time::Duration;

use tollgate::algorithm::{Algorithm, FRESH_WIDE_STATE};
use tollgate::{KeyedLimiter, ManualClock, Outcome, Quota, Timestamp, TokenBucket};

const T0: u64 = 1_700_000_000_000_000_000;

fn ts(nanos: u64) -> Timestamp {
    Timestamp::from_nanos(nanos)
}

/// `count` per `period` ns, burst `burst`: wide.
fn wide(count: u64, period: u64, burst: u64) -> TokenBucket {
    let bucket = TokenBucket::new(
        Quota::new(count, Duration::from_nanos(period))
            .and_then(|quota| quota.with_burst(burst))
            .unwrap(),
    )
    .unwrap();
    assert!(bucket.is_wide(), "{count} per {period} ns");
    bucket
}

/// A weightless decision's reset-after, and the table-full hint, are exactly the time until a
/// wide state is idle (and reclaimable): rounded up to whole ns, idle then and not a nanosecond
/// before. States from random requests (a deterministic stream) at times spread over a few
/// refills.
#[test]
fn a_wide_bucket_is_idle_exactly_at_its_reset_after() {
    for bucket in [
        wide(3, 10, 5),
        wide(300_000_000, 1_000_000_000, 1_000),
        wide(u32::MAX.into(), 1_000_000, 7),
    ] {
        let mut stream = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            stream ^= stream << 13;
            stream ^= stream >> 7;
            stream ^= stream << 17;
            stream
        };
        let mut state = FRESH_WIDE_STATE;
        let mut now = T0;
        for _ in 0..20_000 {
            now += next() % 8;
            let cost = next() % (bucket.capacity() + 1);
            state = bucket.decide_wide(state, ts(now), cost).state;
            let at = now + next() % 4;
            for wait in [
                bucket.decide_wide(state, ts(at), 0).decision.reset_after(),
                bucket.reclaimable_in_wide(state, ts(at)),
            ] {
                let wait = u64::try_from(wait.as_nanos()).unwrap();
                assert!(
                    bucket.is_reclaimable_wide(state, ts(at + wait)),
                    "{bucket:?}: {state} at {at} + {wait}"
                );
                if wait > 0 {
                    assert!(
                        !bucket.is_idle_wide(state, ts(at + wait - 1)),
                        "{bucket:?}: {state} at {at} + {wait} - 1"
                    );
                }
            }
        }
    }
}

/// Keys that spent their whole burst fill the table; a new key is told when the first of them
/// is full again (3 units of 10/3 ns: 10 ns after it spent them), and gets in then, not a
/// nanosecond before.
#[test]
fn a_full_table_of_wide_buckets_says_when_room_is_due() {
    let clock = ManualClock::starting_at(ts(T0));
    let limiter = KeyedLimiter::<u64, _, _>::with_clock(wide(3, 10, 3), 1, clock.clone()).unwrap();
    let mut key = 0;
    while limiter.len() < limiter.slots() {
        assert!(limiter.check_n(&key, 3).unwrap().is_allowed(), "key {key}");
        key += 1;
    }
    clock.set(ts(T0 + 4));
    let refused = limiter.check(&key);
    assert_eq!(refused.outcome(), Outcome::TableFull);
    assert_eq!(refused.retry_after(), Duration::from_nanos(6));
    clock.set(ts(T0 + 9));
    assert_eq!(limiter.check(&key).outcome(), Outcome::TableFull);
    clock.set(ts(T0 + 10));
    assert_eq!(limiter.check(&key).outcome(), Outcome::Allowed);
}
