//! What a keyed table's `capacity` promises: room for at least `capacity` keys still being
//! limited; idle keys beyond them are kept until their slots are needed, up to `slots()`.
//!
//! Keys are hashed with a seed drawn for each limiter, so every table built here places its keys
//! afresh. A table of at most 512 slots (`capacity` up to 358) has room for that many keys
//! whatever their hashes: every key's probe covers its whole (only) shard. A larger table
//! places keys across shards and within 512 slots of their home, at a load of 0.7 when
//! `capacity` keys are held: `capacity` keys still being limited find room unless the hash seed puts
//! far more of them in one shard, or in one run of 512 slots, than the load gives it
//! (`docs/design.md`, "Capacity"). The tests fill tables built for 1 to 200,000 keys with that
//! many keys kept busy (each refused for an hour after its one admission), under many seeds,
//! for the three keyed tables: every key is admitted, none is told the table is full.

use std::time::Duration;

use tollgate::algorithm::Algorithm;
use tollgate::{
    KeyedLimiter, KeyedLogLimiter, ManualClock, Outcome, Quota, SlidingLog, SlidingWindow, Timestamp,
    TokenBucket,
};

const T0: u64 = 1_700_000_000_000_000_000;

/// One unit per hour: a key admitted once is still being limited for an hour.
fn hourly() -> Quota {
    Quota::new(1, Duration::from_secs(3_600)).unwrap()
}

/// Capacities, each with how many tables (each with its own hash seed) are filled.
const CAPACITIES: [(usize, usize); 12] = [
    (1, 200),
    (2, 200),
    (7, 200),
    (100, 100),
    (358, 100),
    (359, 100),
    (1_000, 50),
    (1_433, 50),
    (1_434, 50),
    (10_000, 10),
    (45_875, 4),
    (200_000, 2),
];

/// `capacity` distinct keys, each asked for once at one instant through `check`: every one is
/// admitted and counted (none is refused for room), and the table then holds them all, every one
/// still being limited (`len`, `active`).
fn holds_capacity_active_keys(
    name: &str,
    capacity: usize,
    check: impl Fn(u64) -> Outcome,
    len: impl Fn() -> usize,
    active: impl Fn() -> usize,
    slots: usize,
) {
    for key in 0..capacity as u64 {
        // Keys spread over the whole `u64` range, as client keys are.
        let key = key.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        assert_eq!(check(key), Outcome::Allowed, "{name}: key {key} of {capacity}");
    }
    assert_eq!((len(), active()), (capacity, capacity), "{name}");
    assert!(slots >= capacity, "{name}: {slots} slots");
}

fn keyed_table<A: Algorithm + Copy>(algorithm: A, name: &str) {
    for (capacity, tables) in CAPACITIES {
        for table in 0..tables {
            let clock = ManualClock::starting_at(Timestamp::from_nanos(T0));
            let limiter = KeyedLimiter::<u64, _, _>::with_clock(algorithm, capacity, clock).unwrap();
            holds_capacity_active_keys(
                &format!("{name}, table {table} for {capacity}"),
                capacity,
                |key| limiter.check(&key).outcome(),
                || limiter.len(),
                || limiter.active(),
                limiter.slots(),
            );
            assert_eq!(limiter.capacity(), capacity);
        }
    }
}

#[test]
fn a_lock_free_table_for_n_keys_holds_n_keys_still_being_limited() {
    keyed_table(TokenBucket::new(hourly()).unwrap(), "token bucket");
}

#[test]
fn a_locked_table_of_wide_states_for_n_keys_holds_n_keys_still_being_limited() {
    let wide = SlidingWindow::new(hourly()).unwrap().with_wide_state();
    keyed_table(wide, "wide sliding window");
}

#[test]
fn a_log_table_for_n_keys_holds_n_keys_still_being_limited() {
    let log = SlidingLog::new(hourly()).unwrap();
    for (capacity, tables) in CAPACITIES {
        for table in 0..tables.div_ceil(4) {
            let clock = ManualClock::starting_at(Timestamp::from_nanos(T0));
            let limiter = KeyedLogLimiter::<u64, _>::with_clock(log, capacity, clock).unwrap();
            holds_capacity_active_keys(
                &format!("log, table {table} for {capacity}"),
                capacity,
                |key| limiter.check(&key).outcome(),
                || limiter.len(),
                || limiter.active(),
                limiter.slots(),
            );
            assert_eq!(limiter.capacity(), capacity);
        }
    }
}

/// Beyond `capacity`: more keys than promised are held while slots are free (a table for 1,000
/// keys has 1,429 slots, and held 1,428 keys in the gateway's run), never more than `slots()`;
/// and once the keys held are idle, new keys take their slots, so a table for `n` keys serves
/// any number of keys over time, `n` of them (at least) at once.
#[test]
fn keys_beyond_capacity_are_held_as_slots_allow_and_idle_ones_give_way() {
    let bucket = TokenBucket::new(hourly()).unwrap();
    let clock = ManualClock::starting_at(Timestamp::from_nanos(T0));
    let limiter = KeyedLimiter::<u64, _, _>::with_clock(bucket, 1_000, clock.clone()).unwrap();
    assert_eq!(limiter.slots(), 1_429);
    let admitted = (0..2_000u64)
        .filter(|key| limiter.check(key).outcome() == Outcome::Allowed)
        .count();
    assert!(
        (1_000..=1_429).contains(&admitted),
        "{admitted} keys admitted in a table for 1,000"
    );
    assert_eq!(limiter.len(), admitted);
    // An hour later every key is idle: 1,000 new ones take the slots of the old.
    clock.set(Timestamp::from_nanos(T0 + 3_600_000_000_000));
    for key in 10_000..11_000u64 {
        assert_eq!(limiter.check(&key).outcome(), Outcome::Allowed, "key {key}");
    }
    assert!(limiter.len() <= limiter.slots());
    assert_eq!(limiter.active(), 1_000);
}
