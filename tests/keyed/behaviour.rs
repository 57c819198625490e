//! What a `KeyedLimiter` promises one caller at a time: keys of any `Hash + Eq` type, each with
//! its own state; requests that can never pass refused with a typed error and nothing stored;
//! peeks that store nothing; typed construction errors; the table's size; keys with debt never
//! forgotten to make room; and the width of the fingerprint that stands in for a key.

use std::fmt::Debug;
use std::hash::Hash;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::keyed_common::{
    fixed_window, fresh_run, leaky_bucket, same_numbers, sliding_window, token_bucket, ts, RECOVERY, SEC, T0,
};
use tollgate::algorithm::{Algorithm, FRESH_STATE};
use tollgate::{
    CapacityError, CostTooLarge, Decision, KeyedLimiter, ManualClock, Outcome, PreciseClock, TokenBucket,
    WhenFull,
};

const BURST: u64 = 3;

fn keyed<K: Hash + ?Sized, A: Algorithm>(algorithm: A, capacity: usize) -> KeyedLimiter<K, A, ManualClock> {
    KeyedLimiter::with_clock(algorithm, capacity, ManualClock::starting_at(ts(T0))).unwrap()
}

/// `a` admits exactly `BURST` and is then refused, while `b` is untouched by it and admits its
/// own `BURST`: two entries.
fn independent<K: Hash + ?Sized + Debug>(limiter: &KeyedLimiter<K, TokenBucket, ManualClock>, a: &K, b: &K) {
    assert!(limiter.is_empty());
    for n in 0..BURST {
        let d = limiter.check(a);
        assert_eq!(d.outcome(), Outcome::Allowed, "{a:?}, request {n}");
        assert_eq!(d.remaining(), BURST - 1 - n);
    }
    assert_eq!(limiter.check(a).outcome(), Outcome::Denied, "{a:?}");
    assert_eq!(limiter.len(), 1);
    let fresh = fresh_run(limiter.algorithm(), ts(T0), &[1])[0];
    assert_eq!(limiter.peek(b), fresh, "{b:?} is not fresh after {a:?} was used");
    for n in 0..BURST {
        assert_eq!(limiter.check(b).outcome(), Outcome::Allowed, "{b:?}, request {n}");
    }
    assert_eq!(limiter.check(b).outcome(), Outcome::Denied, "{b:?}");
    assert_eq!(limiter.check(a).outcome(), Outcome::Denied, "{a:?}");
    assert_eq!(limiter.len(), 2);
}

fn bucket() -> TokenBucket {
    token_bucket(BURST)
}

// ---------------------------------------------------------------------------------------------
// Key types
// ---------------------------------------------------------------------------------------------

#[test]
fn u64_keys() {
    independent(&keyed::<u64, _>(bucket(), 16), &7, &8);
    independent(&keyed::<u64, _>(bucket(), 16), &0, &u64::MAX);
}

#[test]
fn ip_address_keys() {
    let v4 = |s: &str| IpAddr::V4(s.parse::<Ipv4Addr>().unwrap());
    let v6 = |s: &str| IpAddr::V6(s.parse::<Ipv6Addr>().unwrap());
    independent(
        &keyed::<IpAddr, _>(bucket(), 16),
        &v4("192.0.2.1"),
        &v4("192.0.2.2"),
    );
    independent(
        &keyed::<IpAddr, _>(bucket(), 16),
        &v6("2001:db8::1"),
        &v6("2001:db8::2"),
    );
    // Another type, another key: an IPv4 address and the same address mapped into IPv6.
    independent(
        &keyed::<IpAddr, _>(bucket(), 16),
        &v4("192.0.2.1"),
        &v6("::ffff:192.0.2.1"),
    );
    independent(&keyed::<IpAddr, _>(bucket(), 16), &v4("0.0.0.0"), &v6("::"));
    // The bare address types work too.
    independent(
        &keyed::<Ipv6Addr, _>(bucket(), 16),
        &"2001:db8::1".parse().unwrap(),
        &"2001:db8::1:0".parse().unwrap(),
    );
}

#[test]
fn str_keys_borrowed_from_anywhere() {
    let limiter = keyed::<str, _>(bucket(), 16);
    independent(&limiter, "alice", "bob");
    // The same text from another allocation is the same key.
    let owned = String::from("ali") + "ce";
    assert_eq!(limiter.check(owned.as_str()).outcome(), Outcome::Denied);
    let boxed: Box<str> = "bob".into();
    assert_eq!(limiter.check(&boxed).outcome(), Outcome::Denied);
    assert_eq!(limiter.len(), 2);
    // Case and length matter.
    assert_eq!(limiter.check("Alice").outcome(), Outcome::Allowed);
    assert_eq!(limiter.check("alice ").outcome(), Outcome::Allowed);
    assert_eq!(limiter.check("").outcome(), Outcome::Allowed);
    assert_eq!(limiter.len(), 5);
}

#[test]
fn string_keys() {
    let limiter = keyed::<String, _>(bucket(), 16);
    independent(&limiter, &"alice".to_string(), &"bob".to_string());
    assert_eq!(
        limiter.check(&format!("{}{}", "al", "ice")).outcome(),
        Outcome::Denied
    );
}

#[test]
fn byte_slice_keys() {
    let limiter = keyed::<[u8], _>(bucket(), 16);
    independent(&limiter, b"alice".as_slice(), b"alicf".as_slice());
    let vec = b"alice".to_vec();
    assert_eq!(limiter.check(&vec).outcome(), Outcome::Denied);
    assert_eq!(limiter.check(&[][..]).outcome(), Outcome::Allowed);
    assert_eq!(limiter.check(&[0][..]).outcome(), Outcome::Allowed);
    assert_eq!(limiter.check(&[0, 0][..]).outcome(), Outcome::Allowed);
    assert_eq!(limiter.len(), 5);
}

#[test]
fn tuple_keys() {
    let v4 = |s: &str| s.parse::<IpAddr>().unwrap();
    independent(
        &keyed::<(IpAddr, u16), _>(bucket(), 16),
        &(v4("192.0.2.1"), 443),
        &(v4("192.0.2.1"), 80),
    );
    independent(&keyed::<(u64, u64), _>(bucket(), 16), &(1, 2), &(2, 1));
    // The split between the fields is part of the key.
    independent(
        &keyed::<(String, String), _>(bucket(), 16),
        &("ab".to_string(), "c".to_string()),
        &("a".to_string(), "bc".to_string()),
    );
    independent(
        &keyed::<(&str, u64, [u8; 2]), _>(bucket(), 16),
        &("tenant", 7, [1, 2]),
        &("tenant", 7, [2, 1]),
    );
}

/// A 10 KB key works like any other, and does not disturb its neighbours: keys that share all
/// but its last byte, or its first 10,239 bytes, are different keys, and 100 short keys keep
/// exactly the state they had.
#[test]
fn a_ten_kilobyte_key() {
    let limiter = keyed::<str, _>(bucket(), 256);
    let big = "k".repeat(10 * 1024);
    let others: Vec<String> = (0..100).map(|n| format!("client-{n}")).collect();
    for (n, key) in others.iter().enumerate() {
        for _ in 0..n % 4 {
            let _ = limiter.check(key);
        }
    }
    let before: Vec<Decision> = others.iter().map(|k| limiter.peek(k)).collect();
    let mut near = big.clone();
    near.pop();
    near.push('l');
    independent_among_others(&limiter, &big, &near);
    independent_among_others(&limiter, &big, &big[..big.len() - 1]);
    let after: Vec<Decision> = others.iter().map(|k| limiter.peek(k)).collect();
    assert_eq!(after, before);
    assert_eq!(limiter.len(), 100 - 25 + 3, "keys never asked for are not stored");
}

fn independent_among_others(limiter: &KeyedLimiter<str, TokenBucket, ManualClock>, a: &str, b: &str) {
    while limiter.check(a).is_allowed() {}
    assert_eq!(limiter.peek(a).outcome(), Outcome::Denied);
    let fresh = fresh_run(limiter.algorithm(), ts(T0), &[1])[0];
    assert_eq!(limiter.peek(b), fresh);
    assert_eq!(
        (0..BURST + 2).filter(|_| limiter.check(b).is_allowed()).count() as u64,
        BURST
    );
}

// ---------------------------------------------------------------------------------------------
// Keys never share state
// ---------------------------------------------------------------------------------------------

/// 5,000 keys, key `n` asked `n % 6` times: each is then told exactly what a key asked that many
/// times alone would be told.
fn no_sharing<A: Algorithm + Copy + Debug>(algorithm: A, name: &str) {
    const KEYS: u64 = 5_000;
    let limiter = keyed::<u64, _>(algorithm, KEYS as usize);
    let string_keyed = keyed::<str, _>(algorithm, KEYS as usize);
    for n in 0..KEYS {
        for _ in 0..n % 6 {
            let _ = limiter.check(&n);
            let _ = string_keyed.check(&format!("user-{n}"));
        }
    }
    let asked = (0..KEYS).filter(|n| n % 6 > 0).count();
    assert_eq!(limiter.len(), asked, "{name}");
    assert_eq!(string_keyed.len(), asked, "{name}");
    for n in 0..KEYS {
        let times = (n % 6) as usize;
        let expected = fresh_run(limiter.algorithm(), ts(T0), &vec![1; times + 1])[times];
        assert_eq!(limiter.peek(&n), expected, "{name}: key {n}");
        assert_eq!(
            string_keyed.peek(&format!("user-{n}")),
            expected,
            "{name}: key user-{n}"
        );
    }
}

#[test]
fn distinct_keys_never_share_state() {
    no_sharing(token_bucket(4), "token bucket");
    no_sharing(leaky_bucket(4), "leaky bucket");
    no_sharing(fixed_window(4), "fixed window");
    no_sharing(sliding_window(4), "sliding window");
}

// ---------------------------------------------------------------------------------------------
// Weights that can never pass; peeks
// ---------------------------------------------------------------------------------------------

fn cost_too_large<A: Algorithm + Copy + Debug>(algorithm: A, name: &str) {
    let limiter = keyed::<u64, _>(algorithm, 8);
    let capacity = limiter.algorithm().capacity();
    for cost in [capacity + 1, capacity * 2, u64::MAX] {
        let error = CostTooLarge { cost, capacity };
        assert_eq!(limiter.check_n(&1, cost), Err(error), "{name}");
        assert_eq!(limiter.peek_n(&1, cost), Err(error), "{name}");
        assert_eq!(limiter.check_n_at(&1, cost, ts(T0)), Err(error), "{name}");
        assert_eq!(limiter.peek_n_at(&1, cost, ts(T0)), Err(error), "{name}");
        assert!(limiter.is_empty(), "{name}: a refused weight inserted its key");
    }
    // The heaviest request that can pass does, and stores its key.
    assert!(limiter.check_n(&1, capacity).unwrap().is_allowed(), "{name}");
    assert_eq!(limiter.len(), 1);
    // On a present key, nothing changes either.
    let before = limiter.peek(&1);
    assert_eq!(
        limiter.check_n(&1, capacity + 1),
        Err(CostTooLarge {
            cost: capacity + 1,
            capacity
        })
    );
    assert_eq!(limiter.peek(&1), before, "{name}");
    // On a full table, the weight is refused before the table is looked at.
    let full = keyed::<u64, _>(algorithm, 1).when_full(WhenFull::Admit);
    let mut key = 100;
    while full.check_n(&key, capacity).unwrap().outcome() == Outcome::Allowed {
        key += 1;
    }
    let len = full.len();
    assert_eq!(
        full.check_n(&key, capacity + 1),
        Err(CostTooLarge {
            cost: capacity + 1,
            capacity
        })
    );
    assert_eq!(full.len(), len);
}

#[test]
fn weights_above_capacity_are_refused_and_insert_nothing() {
    cost_too_large(token_bucket(BURST), "token bucket");
    cost_too_large(leaky_bucket(BURST), "leaky bucket");
    cost_too_large(fixed_window(BURST), "fixed window");
    cost_too_large(sliding_window(BURST), "sliding window");
}

/// Peeks insert nothing, and each equals what the check right after it answers, over a mixed
/// sequence of keys, weights and times, for every algorithm.
fn peek_then_check<A: Algorithm + Debug>(algorithm: A, name: &str) {
    let limiter = keyed::<u64, _>(algorithm, 64);
    let capacity = limiter.algorithm().capacity();
    for key in 0..1_000 {
        let _ = limiter.peek(&key);
        let _ = limiter.peek_n(&key, capacity).unwrap();
        let _ = limiter.peek_at(&key, ts(T0 + key * SEC));
    }
    assert!(limiter.is_empty(), "{name}: peeks inserted keys");
    assert_eq!(limiter.len(), 0);
    let mut now = T0;
    for step in 0..2_000u64 {
        let key = step % 7;
        let cost = step % (capacity + 1);
        now += (step % 5) * SEC / 8;
        let len = limiter.len();
        let peeked = limiter.peek_n_at(&key, cost, ts(now)).unwrap();
        assert_eq!(limiter.len(), len, "{name}: a peek inserted a key");
        let checked = limiter.check_n_at(&key, cost, ts(now)).unwrap();
        assert_eq!(peeked, checked, "{name}: step {step}, key {key}, weight {cost}");
        if cost == 1 {
            // `peek`/`check` on the limiter's own clock agree with the `_at` forms.
            limiter.clock().set(ts(now));
            let peeked = limiter.peek(&key);
            assert_eq!(peeked, limiter.peek_at(&key, ts(now)));
            assert_eq!(peeked, limiter.check(&key), "{name}: step {step}, key {key}");
        }
    }
    assert_eq!(limiter.len(), 7);
}

#[test]
fn peek_inserts_nothing_and_equals_the_next_check() {
    peek_then_check(token_bucket(BURST), "token bucket");
    peek_then_check(leaky_bucket(BURST), "leaky bucket");
    peek_then_check(fixed_window(BURST), "fixed window");
    peek_then_check(sliding_window(BURST), "sliding window");
}

/// `peek` is documented as "what `check` would answer now, without counting or inserting
/// anything". For a new key that finds no room, `check` answers `TableFull` (`Refuse`) or
/// `AllowedUntracked` (`Admit`): so must the peek.
#[test]
fn peek_of_a_key_that_finds_no_room_equals_the_check() {
    for policy in [WhenFull::Refuse, WhenFull::Admit] {
        let limiter = keyed::<u64, _>(bucket(), 4).when_full(policy);
        let mut key = 0;
        while limiter.check_n(&key, BURST).unwrap().outcome() == Outcome::Allowed {
            key += 1;
        }
        let len = limiter.len();
        for new in key..key + 10 {
            let peeked = limiter.peek(&new);
            assert_eq!(limiter.len(), len);
            let checked = limiter.check(&new);
            assert_eq!(
                peeked.outcome(),
                checked.outcome(),
                "{policy:?}: new key {new} peeked {peeked:?}, checked {checked:?}"
            );
            assert_eq!(peeked, checked, "{policy:?}: new key {new}");
        }
    }
}

/// A request of weight 0 asks for nothing: for a key the table does not hold it is told what a
/// fresh key would be, takes no slot, and is allowed even when the table has no room.
fn weightless_new_keys<A: Algorithm + Copy + Debug>(algorithm: A, name: &str) {
    for policy in [WhenFull::Refuse, WhenFull::Admit] {
        let limiter = keyed::<u64, _>(algorithm, 4).when_full(policy);
        let fresh = algorithm.decide(FRESH_STATE, ts(T0), 0).decision;
        assert_eq!(limiter.check_n(&1_000, 0).unwrap(), fresh, "{name} {policy:?}");
        assert_eq!(limiter.peek_n(&1_000, 0).unwrap(), fresh, "{name} {policy:?}");
        assert_eq!(
            limiter.len(),
            0,
            "{name} {policy:?}: a weightless request took a slot"
        );
        let capacity = algorithm.capacity();
        let mut key = 0;
        while limiter.check_n(&key, capacity).unwrap().outcome() == Outcome::Allowed {
            key += 1;
        }
        let len = limiter.len();
        assert_eq!(
            limiter.check_n(&key, 0).unwrap(),
            fresh,
            "{name} {policy:?}: full table"
        );
        assert_eq!(
            limiter.peek_n(&key, 0).unwrap(),
            fresh,
            "{name} {policy:?}: full table"
        );
        assert_eq!(limiter.len(), len, "{name} {policy:?}");
    }
}

#[test]
fn weightless_requests_for_new_keys_take_no_slot_and_pass_a_full_table() {
    weightless_new_keys(token_bucket(3), "token bucket");
    weightless_new_keys(leaky_bucket(3), "leaky bucket");
    weightless_new_keys(fixed_window(3), "fixed window");
    weightless_new_keys(sliding_window(3), "sliding window");
}

// ---------------------------------------------------------------------------------------------
// Construction and size
// ---------------------------------------------------------------------------------------------

#[test]
fn capacity_errors_are_typed_and_never_abort() {
    let with =
        |capacity: usize| KeyedLimiter::<u64, _, _>::with_clock(bucket(), capacity, ManualClock::new());
    assert_eq!(with(0).unwrap_err(), CapacityError::Zero);
    assert_eq!(
        KeyedLimiter::<u64, _>::new(bucket(), 0).unwrap_err(),
        CapacityError::Zero
    );
    let too_large = [
        usize::MAX,
        usize::MAX / 10 + 1,                 // capacity * 10 overflows
        usize::MAX / 10,                     // the slots do not fit isize::MAX bytes
        (isize::MAX as usize / 16) / 10 * 7, // they do, but no allocator can give 2^63 bytes
        1 << 58,
    ];
    for capacity in too_large {
        let error = with(capacity).unwrap_err();
        assert_eq!(error, CapacityError::TooLarge { capacity });
        assert!(error.to_string().contains(&capacity.to_string()), "{error}");
        let error = KeyedLimiter::<str, _>::new(bucket(), capacity).unwrap_err();
        assert_eq!(error, CapacityError::TooLarge { capacity });
    }
    let error: Box<dyn std::error::Error> = Box::new(CapacityError::Zero);
    assert!(!error.to_string().is_empty());
    // The smallest table works.
    let one = with(1).unwrap();
    assert!(one.check(&1).is_allowed());
    assert_eq!(one.len(), 1);
    // A limiter on the precise clock.
    let precise: KeyedLimiter<u64, TokenBucket, PreciseClock> = KeyedLimiter::new(bucket(), 10).unwrap();
    assert!(precise.check(&1).is_allowed());
}

#[test]
fn capacity_slots_len_and_is_empty() {
    for capacity in [
        1, 2, 3, 6, 7, 10, 64, 100, 716, 717, 1_000, 1_434, 5_000, 100_000, 1_000_000,
    ] {
        let limiter = keyed::<u64, _>(bucket(), capacity);
        assert_eq!(limiter.capacity(), capacity);
        let slots = limiter.slots();
        let sized_for = (capacity * 10).div_ceil(7);
        assert!(slots >= capacity * 10 / 7, "{capacity}: {slots} slots");
        assert!(slots >= sized_for, "{capacity}: {slots} slots, load above 0.7");
        // Memory is what the capacity asks for, give or take one slot per shard (at most 64).
        assert!(slots < sized_for + 64, "{capacity}: {slots} slots");
        assert!(limiter.is_empty());
        assert_eq!(limiter.len(), 0);
        assert!(limiter.check(&1).is_allowed());
        assert!(!limiter.is_empty());
        assert_eq!(limiter.len(), 1);
        assert_eq!(limiter.capacity(), capacity);
        assert_eq!(limiter.slots(), slots, "the table never grows");
    }
    let limiter = keyed::<u64, _>(bucket(), 10);
    assert_eq!(limiter.full_policy(), WhenFull::Refuse);
    assert_eq!(WhenFull::default(), WhenFull::Refuse);
    assert_eq!(limiter.when_full(WhenFull::Admit).full_policy(), WhenFull::Admit);
    let debug = format!("{:?}", keyed::<str, _>(bucket(), 10));
    assert!(
        debug.contains("KeyedLimiter") && debug.contains("capacity: 10"),
        "{debug}"
    );
}

// ---------------------------------------------------------------------------------------------
// Reclaim takes only idle keys
// ---------------------------------------------------------------------------------------------

/// A table for 8 keys (12 slots, one shard) holds 6 keys charged to their limit at `T0 + 2 s`
/// ("debt") and 6 keys charged one unit at `T0` and not since ("idle" by `T0 + 2 s`: a bucket
/// refilled, a window two windows old). Then 1,000 new keys arrive: exactly 6 get in (the idle keys' slots),
/// the rest find no room; every key with debt is still refused exactly as before, and comes back
/// to full exactly when a key alone would.
fn debt_is_never_evicted<A: Algorithm + Copy + Debug>(algorithm: A, name: &str) {
    for policy in [WhenFull::Refuse, WhenFull::Admit] {
        let name = format!("{name}, {policy:?}");
        let clock = ManualClock::starting_at(ts(T0));
        let limiter = KeyedLimiter::<u64, _, _>::with_clock(algorithm, 8, clock.clone())
            .unwrap()
            .when_full(policy);
        assert_eq!(limiter.slots(), 12);
        let limit = algorithm.capacity();
        let idle: Vec<u64> = (100..106).collect();
        let debt: Vec<u64> = (200..206).collect();
        // All twelve keys are stored at `T0`; two seconds later all are idle, and the keys of
        // `debt` are charged again (found where they are: nothing new is inserted).
        for key in idle.iter().chain(&debt) {
            assert!(limiter.check(key).is_allowed());
        }
        let later = T0 + 2 * SEC;
        clock.set(ts(later));
        for key in &debt {
            assert!(limiter.check_n(key, limit).unwrap().is_allowed());
        }
        assert_eq!(limiter.len(), 12);
        // The premises, on the algorithm itself.
        let one = algorithm.decide(FRESH_STATE, ts(T0), 1).state;
        let full = algorithm.decide(one, ts(later), limit).state;
        let now = later + SEC / 4;
        assert!(algorithm.is_idle(one, ts(now)), "{name}");
        assert!(!algorithm.is_idle(full, ts(now)), "{name}");
        clock.set(ts(now));
        let before: Vec<Decision> = debt.iter().map(|k| limiter.peek(k)).collect();
        assert!(before.iter().all(|d| !d.is_allowed()), "{name}");

        let mut admitted = 0;
        for key in 1_000..2_000u64 {
            let d = limiter.check(&key);
            match d.outcome() {
                Outcome::Allowed => admitted += 1,
                Outcome::TableFull => assert_eq!(policy, WhenFull::Refuse),
                Outcome::AllowedUntracked => assert_eq!(policy, WhenFull::Admit),
                other => panic!("{name}: new key {key}: {other:?}"),
            }
            let after: Vec<Decision> = debt.iter().map(|k| limiter.peek(k)).collect();
            assert_eq!(
                after, before,
                "{name}: a key with debt changed after new key {key}"
            );
        }
        assert_eq!(
            admitted,
            idle.len(),
            "{name}: new keys take exactly the idle keys' slots"
        );
        assert_eq!(limiter.len(), 12);
        for (key, before) in debt.iter().zip(&before) {
            assert_eq!(limiter.check(key), *before, "{name}: key {key}");
        }
        // Each key with debt recovers exactly when a key alone would: its state was kept.
        for t in [
            now,
            later + SEC / 2,
            later + SEC - 1,
            later + SEC,
            later + 2 * SEC,
            later + 3 * SEC,
        ] {
            let alone = algorithm.decide(full, ts(t), 1).decision;
            for key in &debt {
                assert_eq!(limiter.peek_at(key, ts(t)), alone, "{name}: key {key} at {t}");
            }
        }
    }
}

#[test]
fn idle_reclaim_never_evicts_a_key_with_debt() {
    debt_is_never_evicted(token_bucket(BURST), "token bucket");
    debt_is_never_evicted(leaky_bucket(BURST), "leaky bucket");
    debt_is_never_evicted(fixed_window(BURST), "fixed window");
    debt_is_never_evicted(sliding_window(BURST), "sliding window");
}

// ---------------------------------------------------------------------------------------------
// The fingerprint
// ---------------------------------------------------------------------------------------------

/// The bound `docs/design.md` states ("Key identity"): a key shares state with another only if
/// their hashes agree on the 53 stored fingerprint bits and on the bits that choose the shard,
/// none of which is a fingerprint bit (`src/keyed/layout.rs`'s
/// `the_shard_is_chosen_by_bits_the_fingerprint_does_not_hold`): 6 of them in a table of 64
/// shards, as every table for 45,875 keys or more has. So among `n` live keys the chance is at
/// most `n / 2^59`: about `1.7e-12` at a million keys, below the `1e-9` the design holds itself to
/// up to about 576 million. Exact integer arithmetic, no floats.
#[test]
fn the_fingerprint_collision_bound() {
    const FINGERPRINT_BITS: u32 = 53;
    const SHARD_BITS: u32 = 6;
    let at_a_million = keyed::<u64, _>(token_bucket(1), 1_000_000);
    assert!(
        at_a_million.slots() >= 64 * 1024,
        "64 shards of at least 1,024 slots"
    );
    let n: u128 = 1_000_000;
    let space: u128 = 1 << (FINGERPRINT_BITS + SHARD_BITS);
    // n / 2^59 < 1e-9  <=>  n * 10^9 < 2^59
    assert!(n * 1_000_000_000 < space);
    // 1.7e-12 < n / 2^59 < 1.8e-12  <=>  17 * 2^59 < n * 10^13 < 18 * 2^59
    assert!(17 * space < n * 10_000_000_000_000 && n * 10_000_000_000_000 < 18 * space);
    // The bound holds up to about 576 million live keys, not to 577 million.
    assert!(576_000_000 * 1_000_000_000 < space && 577_000_000 * 1_000_000_000 > space);
    // Counting the fingerprint's bits alone, without the shard's: about 9 million.
    let fingerprints = space >> SHARD_BITS;
    assert!(9_000_000 * 1_000_000_000 < fingerprints);
    // A table of s < 64 shards has fewer than 2,048 * s slots, so fewer keys than that, and
    // n / (2^53 * s) < 2,048 / 2^53 < 2.3e-13  <=>  2,048 * 10^13 < 23 * 2^53.
    assert!(2_048 * 10_000_000_000_000 < 23 * fingerprints);
    // A 16-bit tag would not do: n / 2^16 >= 1 at a million keys.
    assert!(n >= 1 << 16);
    // Narrower than 44 bits of fingerprint, even with the shard's 6 bits the bound is broken at
    // a million keys: n * 10^9 >= 2^(43 + 6).
    assert!(n * 1_000_000_000 >= 1 << (43 + SHARD_BITS));
}

/// Keys that differ in a single bit are different keys, for integer and byte-string keys.
#[test]
fn keys_one_bit_apart_are_independent() {
    for base in [
        0u64,
        1,
        0x5555_5555_5555_5555,
        u64::MAX,
        0x8000_0000_0000_0000,
        1 << 62,
    ] {
        let limiter = keyed::<u64, _>(bucket(), 128);
        assert!(limiter.check_n(&base, BURST).unwrap().is_allowed());
        for bit in 0..64 {
            let other = base ^ (1 << bit);
            assert_eq!(
                limiter.check_n(&other, BURST).unwrap().outcome(),
                Outcome::Allowed,
                "{base:#x} and {other:#x}"
            );
        }
        assert_eq!(limiter.len(), 65);
        assert!(!limiter.check(&base).is_allowed());
    }
    let bytes = keyed::<[u8], _>(bucket(), 1_024);
    let base = *b"the same thirty-two byte key....";
    assert!(bytes.check_n(&base, BURST).unwrap().is_allowed());
    for byte in 0..base.len() {
        for bit in 0..8 {
            let mut other = base;
            other[byte] ^= 1 << bit;
            assert_eq!(bytes.check_n(&other, BURST).unwrap().outcome(), Outcome::Allowed);
        }
    }
    assert_eq!(bytes.len(), 1 + 32 * 8);
}

/// The stored fingerprint is wide: a table whose 512 slots (one shard, one probe chain of 512)
/// all hold keys with debt is asked about 40,000 other keys. Each lookup compares the key's
/// fingerprint with all 512 stored ones, 20 million comparisons in all; any match would answer
/// with that key's debt (a refusal). With a fingerprint of 20 bits or fewer, about 19 matches
/// would be expected (the chance of none is below 1e-8); at 53 bits, about 2.3e-9.
#[test]
fn no_fingerprint_matches_among_twenty_million_comparisons() {
    // ceil(358 * 10 / 7) = 512 slots, under the 1,024 of one shard and within the probe limit.
    let limiter = keyed::<u64, _>(token_bucket(1), 358);
    assert_eq!(limiter.slots(), 512);
    let mut held = 0;
    while limiter.check(&held).outcome() == Outcome::Allowed {
        held += 1;
    }
    assert_eq!(held, 512, "a full one-shard table holds one key per slot");
    assert_eq!(limiter.len(), 512);
    for key in held..held + 40_000 {
        let d = limiter.peek(&key);
        assert_ne!(
            d.outcome(),
            Outcome::Denied,
            "key {key} shares a slot with a key with debt"
        );
    }
    assert_eq!(limiter.len(), 512);
}

/// With `Admit`, a new key that finds no room is told what a fresh key would be, marked
/// untracked (unless it weighs nothing), and is never counted: asked again and again, it gets
/// the same answer.
#[test]
fn admit_policy_answers_like_a_fresh_key() {
    // Two slots, both holding keys with debt.
    let limiter = keyed::<u64, _>(bucket(), 1).when_full(WhenFull::Admit);
    assert_eq!(limiter.slots(), 2);
    assert!(limiter.check_n(&1, BURST).unwrap().is_allowed());
    assert!(limiter.check_n(&2, BURST).unwrap().is_allowed());
    assert_eq!(limiter.len(), 2);
    for _ in 0..3 {
        for cost in 0..=BURST {
            let d = limiter.check_n(&3, cost).unwrap();
            let alone = fresh_run(limiter.algorithm(), ts(T0), &[cost])[0];
            // A weightless request counts nothing and needs no room: simply allowed.
            let expected = if cost == 0 {
                Outcome::Allowed
            } else {
                Outcome::AllowedUntracked
            };
            assert_eq!(d.outcome(), expected, "weight {cost}");
            assert!(d.is_allowed());
            assert!(same_numbers(&d, &alone), "weight {cost}: {d:?} vs {alone:?}");
        }
    }
    assert_eq!(limiter.len(), 2);
}

// ---------------------------------------------------------------------------------------------
// When a full table has room again
// ---------------------------------------------------------------------------------------------

/// What the `TableFull` hint rests on, for every algorithm: a weightless decision's reset-after
/// is exactly how long the state has until it is idle, idle then and not a nanosecond before;
/// and `reclaimable_in` (the hint) exactly how long until it is reclaimable. States come from random requests (deterministic stream) at times spread
/// over several windows, and are asked about at later times.
#[test]
fn a_weightless_reset_after_is_the_time_until_idle_and_the_hint_until_reclaimable() {
    fn check<A: Algorithm + Debug>(algorithm: A) {
        let mut stream = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            stream ^= stream << 13;
            stream ^= stream >> 7;
            stream ^= stream << 17;
            stream
        };
        let mut state = FRESH_STATE;
        let mut now = T0;
        for _ in 0..20_000 {
            now += next() % (SEC / 2);
            let cost = next() % (algorithm.capacity() + 1);
            state = algorithm.decide(state, ts(now), cost).state;
            let at = now + next() % (SEC / 4);
            let wait = algorithm.decide(state, ts(at), 0).decision.reset_after();
            let wait = u64::try_from(wait.as_nanos()).unwrap();
            assert!(
                algorithm.is_idle(state, ts(at + wait)),
                "{algorithm:?}: {state} at {at} + {wait}"
            );
            if wait > 0 {
                assert!(
                    !algorithm.is_idle(state, ts(at + wait - 1)),
                    "{algorithm:?}: {state} at {at} + {wait}"
                );
            }
            // The hint itself: the time until reclaimable (idle, and for the fixed window a
            // window more), exactly.
            let wait = algorithm.reclaimable_in(state, ts(at));
            let wait = u64::try_from(wait.as_nanos()).unwrap();
            assert!(
                algorithm.is_reclaimable(state, ts(at + wait)),
                "{algorithm:?}: {state} reclaimable at {at} + {wait}"
            );
            if wait > 0 {
                assert!(
                    !algorithm.is_reclaimable(state, ts(at + wait - 1)),
                    "{algorithm:?}: {state} not reclaimable at {at} + {wait} - 1"
                );
            }
        }
    }
    check(token_bucket(BURST));
    check(leaky_bucket(BURST));
    check(fixed_window(BURST));
    check(sliding_window(BURST));
}

/// A full table refuses a new key with the time until the first slot it could use is due to
/// be free: keys `1` and `2` (of a 2-slot table) carry debt until `T0 + 1 s` and
/// `T0 + 1.3 s`; asked at `T0 + 0.5 s`, a new key is told 0.5 s; then it gets in at exactly that
/// time, not a nanosecond before. `peek` gives the same hint.
#[test]
fn a_full_table_says_when_room_is_due() {
    let clock = ManualClock::starting_at(ts(T0));
    let limiter = KeyedLimiter::<u64, _, _>::with_clock(token_bucket(1), 1, clock.clone()).unwrap();
    assert_eq!(limiter.slots(), 2);
    assert!(limiter.check(&1).is_allowed());
    clock.set(ts(T0 + 3 * SEC / 10));
    assert!(limiter.check(&2).is_allowed());
    clock.set(ts(T0 + SEC / 2));
    for refused in [limiter.check(&3), limiter.peek(&3)] {
        assert_eq!(refused.outcome(), Outcome::TableFull);
        assert_eq!(refused.retry_after().as_nanos(), u128::from(SEC / 2));
        assert_eq!((refused.remaining(), refused.reset_after().as_nanos()), (0, 0));
    }
    clock.set(ts(T0 + SEC - 1));
    assert_eq!(limiter.check(&3).retry_after().as_nanos(), 1);
    clock.set(ts(T0 + SEC));
    assert_eq!(limiter.check(&3).outcome(), Outcome::Allowed);
    // Fail open: the untracked answer is a fresh key's, as before.
    let open = KeyedLimiter::<u64, _, _>::with_clock(token_bucket(1), 1, ManualClock::starting_at(ts(T0)))
        .unwrap()
        .when_full(WhenFull::Admit);
    assert!(open.check(&1).is_allowed() && open.check(&2).is_allowed());
    assert_eq!(open.check(&3).outcome(), Outcome::AllowedUntracked);
    assert_eq!(open.check(&3).retry_after().as_nanos(), 0);
}

/// A fixed window's key is kept until its window ended a whole window ago, not forgotten at
/// the boundary where it becomes idle: a request whose time was read just before the boundary
/// (another thread's reading, or `check_at`) must find the key's count, not decide it as a fresh
/// key in the window it has used up. Forgotten at the boundary, key 1 would get 5 + 5 units
/// stamped in one window of limit 5, then 5 more in the next.
#[test]
fn a_fixed_window_key_is_kept_a_window_past_its_own() {
    let limiter = keyed::<u64, _>(fixed_window(5), 1);
    assert_eq!(limiter.slots(), 2);
    // The window I holding T0, and the boundary B where it ends.
    let boundary = (T0 / SEC + 1) * SEC;
    assert!(limiter
        .check_n_at(&1, 5, ts(boundary - SEC / 2))
        .unwrap()
        .is_allowed());
    assert!(limiter
        .check_n_at(&2, 5, ts(boundary - SEC / 2))
        .unwrap()
        .is_allowed());
    // Both keys are idle just past B: new keys may not take their slots yet.
    for new in [3, 4] {
        let refused = limiter.check_at(&new, ts(boundary + 1_000));
        assert_eq!(refused.outcome(), Outcome::TableFull, "key {new}");
        // Room is due when window I + 2 starts.
        assert_eq!(
            refused.retry_after().as_nanos(),
            u128::from(SEC - 1_000),
            "key {new}"
        );
    }
    // A reading from a microsecond before B still finds key 1's window used up.
    let stale = limiter.check_at(&1, ts(boundary - 1_000));
    assert_eq!(stale.outcome(), Outcome::Denied, "{stale:?}");
    // In window I + 1 key 1 has its whole limit again, once.
    assert!(limiter
        .check_n_at(&1, 5, ts(boundary + 2_000))
        .unwrap()
        .is_allowed());
    assert!(!limiter.check_at(&1, ts(boundary + 3_000)).is_allowed());
    // Key 2's window ended a whole window ago at B + 1 s: a new key takes its slot then.
    assert_eq!(
        limiter.check_at(&3, ts(boundary + SEC - 1)).outcome(),
        Outcome::TableFull
    );
    assert_eq!(
        limiter.check_at(&3, ts(boundary + SEC)).outcome(),
        Outcome::Allowed
    );
    // The direct answer of the same algorithm: idle at B already (a fresh key's decisions).
    let state = fixed_window(5)
        .decide(FRESH_STATE, ts(boundary - SEC / 2), 5)
        .state;
    assert!(fixed_window(5).is_idle(state, ts(boundary)));
    assert!(!fixed_window(5).is_reclaimable(state, ts(boundary + SEC - 1)));
    assert!(fixed_window(5).is_reclaimable(state, ts(boundary + SEC)));
    // The full table's hint counts down to that instant, and is zero from it on.
    for (at, wait) in [
        (boundary, SEC),
        (boundary + SEC - 1, 1),
        (boundary + SEC, 0),
        (boundary + 10 * SEC, 0),
    ] {
        let hint = fixed_window(5).reclaimable_in(state, ts(at));
        assert_eq!(hint.as_nanos(), u128::from(wait), "at B + {}", at - boundary);
    }
}

/// A sliding window whose previous window still weighs is not idle, even with nothing in its
/// current window (a state no decision stores, but `Algorithm::is_idle` is public): reclaiming
/// it would forget the previous count's weight.
#[test]
fn a_sliding_window_whose_previous_window_weighs_is_not_idle() {
    let window = sliding_window(100);
    let state = window.state(T0 / SEC, 80, 0).raw();
    let now = ts(T0 + SEC / 4);
    let fresh = window.decide(FRESH_STATE, now, 1).decision;
    assert!(!same_numbers(&window.decide(state, now, 1).decision, &fresh));
    assert!(!window.is_idle(state, now));
    assert!(!window.is_reclaimable(state, now));
}

/// `len()` counts held keys, idle ones included; `active()` only those still being limited:
/// keys with debt at `T0` are active until they are idle again, then only held; once new keys
/// have taken every slot, `len()` stays at the slot count while `active()` follows the keys
/// with debt. For a bucket and a window (whose idle times differ).
#[test]
fn active_counts_the_keys_still_limited_and_len_the_keys_held() {
    fn exercise<A: Algorithm + Debug>(algorithm: A) {
        let limiter = keyed::<u64, _>(algorithm, 8);
        let name = format!("{:?}", limiter.algorithm());
        let recovered = T0 + u64::try_from(RECOVERY.as_nanos()).unwrap();
        assert_eq!((limiter.len(), limiter.active()), (0, 0), "{name}");
        for key in 0..5 {
            assert!(limiter.check(&key).is_allowed(), "{name}");
        }
        let _ = limiter.peek(&99);
        assert_eq!(
            (limiter.len(), limiter.active()),
            (5, 5),
            "{name}: peeks hold nothing"
        );
        limiter.clock().set(ts(recovered));
        assert_eq!((limiter.len(), limiter.active()), (5, 0), "{name}");
        assert_eq!(limiter.active_at(ts(T0)), 5, "{name}");
        // New keys take the 7 free slots and reclaim the 5 idle ones.
        for key in 100..112 {
            assert!(limiter.check(&key).is_allowed(), "{name}");
        }
        assert_eq!(limiter.slots(), 12);
        assert_eq!((limiter.len(), limiter.active()), (12, 12), "{name}");
        limiter
            .clock()
            .set(ts(recovered + u64::try_from(RECOVERY.as_nanos()).unwrap()));
        assert_eq!((limiter.len(), limiter.active()), (12, 0), "{name}");
    }
    exercise(token_bucket(2));
    exercise(leaky_bucket(2));
    exercise(fixed_window(2));
    exercise(sliding_window(2));
}

// ---------------------------------------------------------------------------------------------
// The clock
// ---------------------------------------------------------------------------------------------

/// A clock that counts its reads and always says `T0`.
#[derive(Default)]
struct CountingClock {
    reads: std::sync::atomic::AtomicU64,
}

impl tollgate::Clock for CountingClock {
    fn now(&self) -> tollgate::Timestamp {
        self.reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        ts(T0)
    }
}

/// Every decision reads its limiter's clock exactly once, wherever it goes: a key present or
/// absent, a new key inserted, a weightless request, a full table under either policy. (A
/// decision reads the clock in the middle of its lookup; a second read on some path would decide
/// with two different times.)
#[test]
fn every_decision_reads_the_clock_once() {
    let once = |limiter: &KeyedLimiter<u64, TokenBucket, CountingClock>, what: &str, decide: &dyn Fn()| {
        let before = limiter.clock().reads.load(std::sync::atomic::Ordering::Relaxed);
        decide();
        let after = limiter.clock().reads.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(after - before, 1, "{what}");
    };
    for policy in [WhenFull::Refuse, WhenFull::Admit] {
        // A table for one key: key 1, then keys up to `slots`, fill its slots with debt, and the
        // next key finds it full.
        let limiter = KeyedLimiter::with_clock(bucket(), 1, CountingClock::default())
            .unwrap()
            .when_full(policy);
        let slots = limiter.slots() as u64;
        let within = std::time::Duration::from_secs(1);
        once(&limiter, "peek, absent", &|| {
            assert!(limiter.peek(&1).is_allowed())
        });
        once(&limiter, "check_n(0), absent", &|| {
            assert!(limiter.check_n(&1, 0).unwrap().is_allowed())
        });
        once(&limiter, "check, inserted", &|| {
            assert!(limiter.check(&1).is_allowed())
        });
        once(&limiter, "check, present", &|| {
            assert!(limiter.check(&1).is_allowed())
        });
        once(&limiter, "check_n, present", &|| {
            assert!(limiter.check_n(&1, 1).unwrap().is_allowed())
        });
        once(&limiter, "peek, present", &|| {
            assert!(!limiter.peek(&1).is_allowed())
        });
        once(&limiter, "peek_n, present", &|| {
            assert!(!limiter.peek_n(&1, 1).unwrap().is_allowed())
        });
        once(&limiter, "check_n_within, present", &|| {
            let _ = limiter.check_n_within(&1, 1, within).unwrap();
        });
        // The other slots (a table for one key has more than one slot).
        for key in 2..=slots {
            assert!(limiter.check(&key).is_allowed(), "{policy:?}");
        }
        let full = slots + 1;
        let expected = policy == WhenFull::Admit;
        once(&limiter, "check, table full", &|| {
            assert_eq!(limiter.check(&full).is_allowed(), expected, "{policy:?}")
        });
        once(&limiter, "peek, table full", &|| {
            assert_eq!(limiter.peek(&full).is_allowed(), expected, "{policy:?}")
        });
        once(&limiter, "check_n_within, table full", &|| {
            let _ = limiter.check_n_within(&full, 1, within).unwrap();
        });
    }
}
