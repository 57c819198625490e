//! Decisions allocate nothing: direct limiters of every algorithm, a keyed limiter deciding for
//! present keys, inserting new keys (up to a full table), reclaiming idle ones, and refusing when
//! the table is full; with `u64`, `str` and byte-slice keys. Also the sliding log's direct
//! limiter once built, and the tower layer's client-address walk over forwarding headers.
//!
//! Counted with `allocation-counter`, which replaces the global allocator in the `core` test
//! binary (the only one that links it) and counts per thread (`allocation_counter::measure`:
//! "only those allocations done by the current thread"): every allocation the closure's thread
//! makes while it runs, so the binary's other tests, running at the same time on other threads,
//! are not counted. Each test first checks that
//! the counter sees an allocation it is shown, so a count of zero is not a counter that counts
//! nothing.

use std::hint::black_box;
use std::time::Duration;

use allocation_counter::measure;
use tollgate::algorithm::Algorithm;
use tollgate::{
    DirectLimiter, FixedWindow, KeyedLimiter, LeakyBucket, LogLimiter, ManualClock, Outcome, Quota,
    SlidingLog, SlidingWindow, Timestamp, TokenBucket, WhenFull,
};

const SEC: u64 = 1_000_000_000;
/// Decisions per measured loop.
const DECISIONS: u64 = 10_000;

/// The buckets' quota: 100 a second, bursts of 10.
fn bucket_quota() -> Quota {
    "100/s burst 10".parse().expect("a valid quota")
}

/// The windows' and the log's quota (they take no burst): 100 a second.
fn window_quota() -> Quota {
    "100/s".parse().expect("a valid quota")
}

fn at(nanos: u64) -> Timestamp {
    Timestamp::from_nanos(nanos)
}

/// The counter counts: a `Box` made inside `measure` is seen.
fn counter_counts() {
    let seen = measure(|| {
        black_box(Box::new(7u64));
    });
    assert_eq!(seen.count_total, 1, "the counting allocator is not in place");
}

/// Allowed and refused decisions, weighted ones, peeks, refunds and a reset of a direct limiter,
/// over time that moves forwards and backwards.
fn direct_decisions<A: Algorithm>(algorithm: A) {
    let limiter = DirectLimiter::with_clock(algorithm, ManualClock::new());
    let info = measure(|| {
        for i in 0..DECISIONS {
            // 1 ms steps, with one step back in every 16.
            let now = at(SEC + i * 1_000_000 - (i % 16 == 15) as u64 * 5_000_000);
            let _ = black_box(limiter.check_at(now));
            let _ = black_box(limiter.check_n_at(2, now).ok());
            let _ = black_box(limiter.peek_at(now));
            let _ = black_box(limiter.check_n_within_at(1, Duration::from_millis(5), now).ok());
            if i % 100 == 0 {
                let _ = black_box(limiter.refund_n_at(1, now));
                let _ = black_box(limiter.reset_at(now));
            }
        }
        let _ = black_box(limiter.check());
    });
    assert_eq!(
        info.count_total, 0,
        "{} allocations in direct decisions",
        info.count_total
    );
}

#[test]
fn direct_decisions_allocate_nothing() {
    counter_counts();
    direct_decisions(TokenBucket::new(bucket_quota()).unwrap());
    direct_decisions(LeakyBucket::new(bucket_quota()).unwrap());
    direct_decisions(FixedWindow::new(window_quota()).unwrap());
    direct_decisions(SlidingWindow::new(window_quota()).unwrap());
}

/// The sliding log's direct limiter keeps its ring from construction on.
#[test]
fn log_decisions_allocate_nothing_once_built() {
    counter_counts();
    let limiter = LogLimiter::with_clock(SlidingLog::new(window_quota()).unwrap(), ManualClock::new());
    let info = measure(|| {
        for i in 0..DECISIONS {
            let now = at(SEC + i * 1_000_000);
            let _ = black_box(limiter.check_at(now));
            let _ = black_box(limiter.check_n_at(3, now).ok());
            let _ = black_box(limiter.peek_at(now));
        }
    });
    assert_eq!(
        info.count_total, 0,
        "{} allocations in log decisions",
        info.count_total
    );
}

/// A keyed limiter for `capacity` keys: inserts `capacity` new keys, decides again for each
/// (present keys), lets them go idle and inserts as many others (reclaiming their slots) with
/// their whole burst, then inserts twice as many more until the table is full of keys in debt and
/// new keys are refused (or admitted untracked), all without an allocation.
fn keyed_decisions<K: ?Sized + std::hash::Hash>(
    policy: WhenFull,
    capacity: usize,
    key: impl Fn(u64) -> Box<K>,
) {
    let limiter = KeyedLimiter::<K, _, _>::with_clock(
        TokenBucket::new(bucket_quota()).unwrap(),
        capacity,
        ManualClock::new(),
    )
    .unwrap()
    .when_full(policy);
    let n = capacity as u64;
    // The keys are made before counting: making them allocates, deciding must not.
    let first: Vec<Box<K>> = (0..n).map(&key).collect();
    let second: Vec<Box<K>> = (n..2 * n).map(&key).collect();
    let third: Vec<Box<K>> = (2 * n..4 * n).map(&key).collect();
    let mut full = 0;
    let info = measure(|| {
        // New keys, then present ones, at one instant.
        for k in &first {
            assert!(limiter.check_at(k, at(SEC)).is_allowed());
        }
        for k in &first {
            let _ = black_box(limiter.check_n_at(k, 2, at(SEC)).ok());
            let _ = black_box(limiter.peek_at(k, at(SEC)));
        }
        // A minute later every key is idle: new keys reclaim their slots.
        for k in &second {
            assert!(limiter.check_n_at(k, 10, at(61 * SEC)).unwrap().is_allowed());
        }
        // New keys with their whole burst, until the table holds only keys in debt.
        let when_full = match policy {
            WhenFull::Refuse => Outcome::TableFull,
            _ => Outcome::AllowedUntracked,
        };
        for k in &third {
            let outcome = limiter.check_n_at(k, 10, at(61 * SEC)).unwrap().outcome();
            assert!(outcome == Outcome::Allowed || outcome == when_full, "{outcome:?}");
            full += usize::from(outcome == when_full);
            let _ = black_box(limiter.peek_at(k, at(61 * SEC)));
        }
        for k in &second {
            let _ = black_box(limiter.refund_n_at(k, 1, at(61 * SEC)));
            let _ = black_box(limiter.reset_at(k, at(61 * SEC)));
        }
    });
    assert!(full > 0, "the table never filled");
    assert_eq!(
        info.count_total, 0,
        "{} allocations in keyed decisions",
        info.count_total
    );
}

#[test]
fn keyed_decisions_allocate_nothing() {
    counter_counts();
    keyed_decisions::<u64>(WhenFull::Refuse, 1_000, Box::new);
    keyed_decisions::<u64>(WhenFull::Admit, 1_000, Box::new);
    keyed_decisions::<str>(WhenFull::Refuse, 500, |i| format!("client-{i}").into_boxed_str());
    // A 10 KB key hashes more bytes, but stores none: the table keeps only its fingerprint.
    keyed_decisions::<[u8]>(WhenFull::Refuse, 100, |i| {
        let mut bytes = vec![0u8; 10 * 1024];
        bytes[..8].copy_from_slice(&i.to_le_bytes());
        bytes.into_boxed_slice()
    });
}

/// Inserting a million keys into a table built for them allocates nothing: the table was
/// allocated whole when it was built.
#[test]
fn a_million_inserts_allocate_nothing() {
    counter_counts();
    let limiter = KeyedLimiter::<u64, _, _>::with_clock(
        TokenBucket::new(bucket_quota()).unwrap(),
        1_000_000,
        ManualClock::new(),
    )
    .unwrap();
    let info = measure(|| {
        for key in 0..1_000_000u64 {
            let _ = black_box(limiter.check_at(&key, at(SEC)));
        }
    });
    assert_eq!(limiter.len(), 1_000_000);
    assert_eq!(
        info.count_total, 0,
        "{} allocations in 1,000,000 inserts",
        info.count_total
    );
}

/// The tower layer's client address: walking `X-Forwarded-For` and `Forwarded` right to left
/// past trusted proxies allocates nothing (the requests are built before counting).
#[cfg(feature = "tower")]
#[test]
fn client_ip_walks_forwarding_headers_without_allocating() {
    use std::num::NonZeroUsize;

    use tollgate::middleware::{ClientIp, ForwardedHeader, KeyExtractor, PeerAddr};

    counter_counts();
    let request = |name: &str, value: &str| {
        let mut request = http::Request::builder()
            .header(name, value)
            .body(())
            .expect("a valid request")
            .into_parts()
            .0;
        request
            .extensions
            .insert(PeerAddr("10.0.0.5:443".parse().unwrap()));
        request
    };
    let xff = request("x-forwarded-for", "198.51.100.7, 203.0.113.9, 10.1.2.3, 10.4.5.6");
    let forwarded = request(
        "forwarded",
        "for=198.51.100.7;proto=https, for=\"[2001:db8::1]:4711\", for=10.1.2.3;by=10.0.0.5, for=10.4.5.6",
    );
    let trusted = || ["10.0.0.0/8".parse().unwrap()];
    let by_range = ClientIp::new(trusted());
    let rfc_7239 = ClientIp::new(trusted()).header(ForwardedHeader::Forwarded);
    let by_hops = ClientIp::new(trusted()).hops(NonZeroUsize::new(3).unwrap());
    let info = measure(|| {
        for _ in 0..1_000 {
            assert_eq!(
                by_range.extract(&xff).unwrap(),
                "203.0.113.9".parse::<std::net::IpAddr>().unwrap()
            );
            assert_eq!(
                rfc_7239.extract(&forwarded).unwrap(),
                "2001:db8::1".parse::<std::net::IpAddr>().unwrap()
            );
            assert_eq!(
                by_hops.extract(&xff).unwrap(),
                "203.0.113.9".parse::<std::net::IpAddr>().unwrap()
            );
        }
    });
    assert_eq!(
        info.count_total, 0,
        "{} allocations in the walks",
        info.count_total
    );
}

/// The keyed sliding log allocates a slot's log the first time the slot is used, and never per
/// request: deciding again for present keys allocates nothing, and keys that reclaim used slots
/// reuse their logs.
#[test]
fn keyed_log_allocates_once_per_slot() {
    use tollgate::KeyedLogLimiter;

    counter_counts();
    // 100 keys: 143 slots (ten for every seven keys).
    let limiter = KeyedLogLimiter::<u64, _>::with_clock(
        SlidingLog::new(window_quota()).unwrap(),
        100,
        ManualClock::new(),
    )
    .unwrap();
    let first = measure(|| {
        for key in 0..100u64 {
            assert!(limiter.check_at(&key, at(SEC)).is_allowed());
        }
    });
    assert_eq!(first.count_total, 100, "one log for each slot first used");
    let again = measure(|| {
        for key in 0..100u64 {
            let _ = black_box(limiter.check_n_at(&key, 5, at(SEC)));
            let _ = black_box(limiter.peek_at(&key, at(SEC)));
        }
    });
    assert_eq!(
        again.count_total, 0,
        "{} allocations deciding for present keys",
        again.count_total
    );
    // Two seconds later every key is idle: 100 new keys fit only by reclaiming at least 57 of
    // the used slots, whose logs they reuse; at most the 43 slots never used allocate.
    let reclaiming = measure(|| {
        for key in 100..200u64 {
            assert!(limiter.check_at(&key, at(3 * SEC)).is_allowed());
        }
    });
    assert!(
        reclaiming.count_total <= 43,
        "{} allocations for 100 new keys in a table with 43 unused slots",
        reclaiming.count_total
    );
}
