//! What the sliding log promises one caller at a time: every typed error (construction, cost,
//! capacity), weight 0, and the keyed table's behaviour: keys of any `Hash` type, each with its
//! own log; peeks that store nothing; idle logs reused, logs with units in the window never; the
//! full-table policies.

use std::error::Error as _;
use std::time::Duration;

use tollgate::{
    CapacityError, CostTooLarge, KeyedLogLimiter, LogLimiter, ManualClock, Outcome, Quota, QuotaError,
    SlidingLog, Timestamp, WhenFull,
};

const SEC: u64 = 1_000_000_000;
const T0: u64 = 1_700_000_000 * SEC;

fn ts(nanos: u64) -> Timestamp {
    Timestamp::from_nanos(nanos)
}

fn log(text: &str) -> SlidingLog {
    SlidingLog::new(text.parse().unwrap()).unwrap()
}

fn keyed<K: std::hash::Hash + ?Sized>(text: &str, capacity: usize) -> KeyedLogLimiter<K, ManualClock> {
    KeyedLogLimiter::with_clock(log(text), capacity, ManualClock::starting_at(ts(T0))).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Typed errors
// ---------------------------------------------------------------------------------------------

#[test]
fn an_explicit_burst_other_than_the_count_is_refused() {
    let err = SlidingLog::new("10/s burst 20".parse().unwrap()).unwrap_err();
    assert_eq!(
        err,
        QuotaError::BurstNotSupported {
            algorithm: "sliding window log"
        }
    );
    assert!(
        err.to_string().contains("sliding window log has no burst"),
        "{err}"
    );
    // A burst equal to the count says nothing new, and is accepted.
    let same = SlidingLog::new("10/s burst 10".parse().unwrap()).unwrap();
    assert_eq!((same.limit(), same.window()), (10, Duration::from_secs(1)));
}

#[test]
fn a_limit_too_large_for_preallocated_memory_is_refused_with_the_maximum() {
    assert_eq!(SlidingLog::MAX_LIMIT, 1 << 24);
    let at_max = SlidingLog::new(Quota::per_second(SlidingLog::MAX_LIMIT).unwrap()).unwrap();
    assert_eq!(at_max.limit(), SlidingLog::MAX_LIMIT);
    for limit in [SlidingLog::MAX_LIMIT + 1, u64::MAX] {
        let err = SlidingLog::new(Quota::per_minute(limit).unwrap()).unwrap_err();
        assert_eq!(
            err,
            QuotaError::LogTooLarge {
                limit,
                max: SlidingLog::MAX_LIMIT
            }
        );
        let message = err.to_string();
        for needle in [
            limit.to_string().as_str(),
            "16777216",
            "8 bytes",
            "sliding window counter",
        ] {
            assert!(message.contains(needle), "{message:?} should mention {needle:?}");
        }
        assert!(err.source().is_none());
    }
}

#[test]
fn a_cost_above_the_limit_is_a_typed_error_and_touches_nothing() {
    let limiter = LogLimiter::with_clock(log("3/s"), ManualClock::starting_at(ts(T0)));
    assert_eq!(limiter.capacity(), 3);
    let too_large = CostTooLarge { cost: 4, capacity: 3 };
    assert_eq!(limiter.check_n(4), Err(too_large));
    assert_eq!(limiter.peek_n(4), Err(too_large));
    assert_eq!(limiter.check_n_at(u64::MAX, ts(T0)).unwrap_err().cost, u64::MAX);
    assert_eq!(limiter.peek_n_at(4, ts(T0)), Err(too_large));
    // A peek answers as if admitted: 2 left after one more unit, so nothing was recorded.
    assert_eq!(limiter.peek().remaining(), 2, "a refused cost recorded something");
    assert!(limiter.check_n(3).unwrap().is_allowed());

    let keyed = keyed::<u64>("3/s", 4);
    assert_eq!(keyed.check_n(&1, 4), Err(too_large));
    assert_eq!(keyed.peek_n(&1, 4), Err(too_large));
    assert_eq!(keyed.check_n_at(&1, 4, ts(T0)), Err(too_large));
    assert_eq!(keyed.peek_n_at(&1, 4, ts(T0)), Err(too_large));
    assert!(keyed.is_empty(), "a refused cost inserted a key");
}

#[test]
fn keyed_capacity_errors() {
    let zero = KeyedLogLimiter::<u64>::new(log("1/s"), 0).unwrap_err();
    assert_eq!(zero, CapacityError::Zero);
    let huge = KeyedLogLimiter::<u64>::new(log("1/s"), usize::MAX).unwrap_err();
    assert_eq!(huge, CapacityError::TooLarge { capacity: usize::MAX });
    // Few keys, but a log of 2^24 units (128 MiB) each: the bound exceeds the address space.
    let big_logs = SlidingLog::new(Quota::per_second(SlidingLog::MAX_LIMIT).unwrap()).unwrap();
    let capacity = 1 << 40;
    assert_eq!(
        KeyedLogLimiter::<u64>::new(big_logs, capacity).unwrap_err(),
        CapacityError::TooLarge { capacity }
    );
}

// ---------------------------------------------------------------------------------------------
// Weight 0
// ---------------------------------------------------------------------------------------------

#[test]
fn weight_zero_is_always_allowed_and_records_nothing() {
    let limiter = LogLimiter::with_clock(log("1/s"), ManualClock::starting_at(ts(T0)));
    let free = limiter.check_n(0).unwrap();
    assert!(free.is_allowed());
    assert_eq!((free.remaining(), free.reset_after()), (1, Duration::ZERO));
    assert!(limiter.check().is_allowed());
    let after = limiter.check_n(0).unwrap();
    assert!(after.is_allowed());
    assert_eq!(
        (after.remaining(), after.reset_after()),
        (0, Duration::from_secs(1))
    );
    assert!(!limiter.check().is_allowed());
}

// ---------------------------------------------------------------------------------------------
// Keyed behaviour
// ---------------------------------------------------------------------------------------------

#[test]
fn distinct_keys_have_distinct_logs_for_any_key_type() {
    let strings = keyed::<str>("2/s", 8);
    let bytes = keyed::<[u8]>("2/s", 8);
    let numbers = keyed::<u64>("2/s", 8);
    for _ in 0..2 {
        assert!(strings.check("alice").is_allowed());
        assert!(bytes.check(b"alice").is_allowed());
        assert!(numbers.check(&0).is_allowed());
    }
    assert_eq!(strings.check("alice").outcome(), Outcome::Denied);
    assert_eq!(bytes.check(b"alice").outcome(), Outcome::Denied);
    assert_eq!(numbers.check(&0).outcome(), Outcome::Denied);
    assert_eq!(strings.peek("bob").remaining(), 1, "bob was charged for alice");
    assert!(strings.check("bob").is_allowed());
    assert!(numbers.check(&u64::MAX).is_allowed());
    assert_eq!((strings.len(), bytes.len(), numbers.len()), (2, 1, 2));
}

#[test]
fn peek_inserts_nothing() {
    let limiter = keyed::<u64>("1/s", 4);
    assert!(limiter.peek(&7).is_allowed());
    assert!(limiter.peek_n(&7, 1).unwrap().is_allowed());
    assert!(limiter.is_empty());
    assert!(limiter.check(&7).is_allowed());
    assert_eq!(limiter.peek(&7).outcome(), Outcome::Denied);
    assert_eq!(limiter.len(), 1);
}

/// A table for 1 key has 2 slots. Two keys with units in the window fill it: a third is refused
/// (`TableFull`) until one of them is idle, at which point it takes that key's slot, without
/// the table growing; the forgotten key comes back fresh, as it would have been anyway.
#[test]
fn idle_logs_are_reused_and_logs_in_the_window_never() {
    let clock = ManualClock::starting_at(ts(T0));
    let limiter = KeyedLogLimiter::<u64, _>::with_clock(log("2/min"), 1, clock.clone()).unwrap();
    assert_eq!((limiter.capacity(), limiter.slots()), (1, 2));
    assert!(limiter.check(&1).is_allowed());
    clock.set(ts(T0 + 30 * SEC));
    assert!(limiter.check(&2).is_allowed());
    assert_eq!(limiter.check(&3).outcome(), Outcome::TableFull);
    assert_eq!(limiter.peek(&3).outcome(), Outcome::TableFull);
    // One nanosecond before key 1's unit leaves, it still blocks the slot.
    clock.set(ts(T0 + 60 * SEC - 1));
    assert_eq!(limiter.check(&3).outcome(), Outcome::TableFull);
    clock.set(ts(T0 + 60 * SEC));
    assert!(limiter.peek(&3).is_allowed());
    let third = limiter.check_n(&3, 2).unwrap();
    assert_eq!((third.outcome(), third.remaining()), (Outcome::Allowed, 0));
    assert_eq!(limiter.len(), 2);
    // Key 2 kept its unit (at +30 s) and its slot: one more fits, leaving none.
    assert_eq!(limiter.peek(&2).remaining(), 0);
    assert!(limiter.check(&2).is_allowed());
    assert_eq!(limiter.check(&2).outcome(), Outcome::Denied);
    // Key 1 is gone, and the table is full of keys with units in the window.
    assert_eq!(limiter.check(&1).outcome(), Outcome::TableFull);
}

/// `len()` counts held keys, idle ones included; `active()` only those whose log still records
/// a unit inside the window, until the nanosecond its newest unit leaves it; peeks hold nothing;
/// once new keys have reused the idle slots, `len()` stays at the slot count while `active()`
/// follows the logs with units.
#[test]
fn active_counts_the_keys_still_limited_and_len_the_keys_held() {
    let clock = ManualClock::starting_at(ts(T0));
    let limiter = KeyedLogLimiter::<u64, _>::with_clock(log("2/min"), 4, clock.clone()).unwrap();
    assert_eq!((limiter.len(), limiter.active()), (0, 0));
    for key in 0..3 {
        assert!(limiter.check(&key).is_allowed());
    }
    let _ = limiter.peek(&99);
    assert_eq!((limiter.len(), limiter.active()), (3, 3), "peeks hold nothing");
    clock.set(ts(T0 + 30 * SEC));
    assert!(limiter.check(&0).is_allowed());
    clock.set(ts(T0 + 60 * SEC - 1));
    assert_eq!((limiter.len(), limiter.active()), (3, 3));
    // Keys 1 and 2 are idle from their unit's last nanosecond in the window; key 0 holds a unit
    // from +30 s.
    clock.set(ts(T0 + 60 * SEC));
    assert_eq!((limiter.len(), limiter.active()), (3, 1));
    assert_eq!(limiter.active_at(ts(T0)), 3);
    assert_eq!(limiter.active_at(ts(T0 + 90 * SEC)), 0);
    // New keys take the free slots, then reuse the idle ones.
    let slots = limiter.slots() as u64;
    for key in 100..100 + slots - 1 {
        assert!(limiter.check(&key).is_allowed(), "key {key}");
    }
    assert_eq!(
        (limiter.len(), limiter.active()),
        (limiter.slots(), limiter.slots())
    );
    clock.set(ts(T0 + 180 * SEC));
    assert_eq!((limiter.len(), limiter.active()), (limiter.slots(), 0));
}

/// `max_memory` is the bound every slot's log would reach (8 bytes per unit of the limit, plus
/// a few words per slot), and a table whose bound is far beyond this machine is built without
/// allocating it: logs are allocated as slots are first used.
#[test]
fn max_memory_is_every_slot_with_a_full_log() {
    let limiter = keyed::<u64>("100/min", 1_000);
    let logs = limiter.slots() * 100 * 8;
    assert!(
        (logs..=logs + limiter.slots() * 72).contains(&limiter.max_memory()),
        "{} bytes for {} slots",
        limiter.max_memory(),
        limiter.slots()
    );
    let huge = keyed::<u64>("1000000/min", 1_000_000);
    assert!(huge.max_memory() >= 10 * (1 << 40), "{}", huge.max_memory());
    assert!(huge.check(&7).is_allowed());
    assert_eq!(huge.len(), 1);
}

#[test]
fn a_full_table_can_admit_untracked() {
    let clock = ManualClock::starting_at(ts(T0));
    let limiter = KeyedLogLimiter::<u64, _>::with_clock(log("2/min"), 1, clock)
        .unwrap()
        .when_full(WhenFull::Admit);
    assert_eq!(limiter.full_policy(), WhenFull::Admit);
    assert!(limiter.check(&1).is_allowed());
    assert!(limiter.check(&2).is_allowed());
    for _ in 0..5 {
        let untracked = limiter.check(&3);
        assert_eq!(untracked.outcome(), Outcome::AllowedUntracked);
        assert!(untracked.is_allowed());
        assert_eq!(untracked.remaining(), 1, "what a fresh key would have been told");
    }
    assert_eq!(limiter.peek(&3).outcome(), Outcome::AllowedUntracked);
    assert_eq!(limiter.len(), 2);
}

#[test]
fn weightless_requests_for_new_keys_take_no_slot_and_pass_a_full_table() {
    for policy in [WhenFull::Refuse, WhenFull::Admit] {
        let limiter = keyed::<u64>("2/min", 1).when_full(policy);
        let fresh = LogLimiter::with_clock(log("2/min"), ManualClock::starting_at(ts(T0)))
            .peek_n(0)
            .unwrap();
        assert_eq!(limiter.check_n(&7, 0).unwrap(), fresh, "{policy:?}");
        assert_eq!(limiter.len(), 0, "{policy:?}: a weightless request took a slot");
        let mut key = 0;
        while limiter.check_n(&key, 2).unwrap().outcome() == Outcome::Allowed {
            key += 1;
        }
        let len = limiter.len();
        assert_eq!(limiter.check_n(&key, 0).unwrap(), fresh, "{policy:?}: full table");
        assert_eq!(limiter.peek_n(&key, 0).unwrap(), fresh, "{policy:?}: full table");
        assert_eq!(limiter.len(), len, "{policy:?}");
    }
}

#[test]
fn debug_output_names_the_log() {
    let direct = LogLimiter::with_clock(log("5/s"), ManualClock::starting_at(ts(T0)));
    assert!(direct.check().is_allowed());
    let text = format!("{direct:?}");
    assert!(
        text.contains("LogLimiter") && text.contains("recorded: 1"),
        "{text}"
    );
    let keyed = keyed::<str>("5/s", 3);
    assert!(format!("{keyed:?}").contains("KeyedLogLimiter"));
}

/// Formatting a `LogLimiter` reads its count under the log's lock and writes it without: the
/// formatter's sink is the caller's code, and a decision must not wait on it (a stalled stderr
/// would stall every request; a sink that decides would deadlock).
#[test]
fn debug_output_does_not_hold_the_log_lock_while_writing() {
    use std::fmt::Write as _;
    use std::sync::{mpsc, Arc};

    /// A sink that, at every write, has another thread decide on the limiter.
    struct DecidingSink {
        limiter: Arc<LogLimiter<ManualClock>>,
        waited_at: Vec<String>,
    }

    impl std::fmt::Write for DecidingSink {
        fn write_str(&mut self, text: &str) -> std::fmt::Result {
            let (done, finished) = mpsc::channel();
            let limiter = Arc::clone(&self.limiter);
            std::thread::spawn(move || {
                let _ = limiter.peek();
                let _ = done.send(());
            });
            if finished.recv_timeout(Duration::from_secs(2)).is_err() {
                self.waited_at.push(text.to_owned());
            }
            Ok(())
        }
    }

    let limiter = Arc::new(LogLimiter::with_clock(
        log("5/s"),
        ManualClock::starting_at(ts(T0)),
    ));
    assert!(limiter.check().is_allowed());
    let mut sink = DecidingSink {
        limiter: Arc::clone(&limiter),
        waited_at: Vec::new(),
    };
    write!(sink, "{limiter:?}").unwrap();
    assert!(
        sink.waited_at.is_empty(),
        "a decision waited for the log's lock while the formatter wrote {:?}",
        sink.waited_at
    );
}

/// Keys come and go through a table kept near full for long enough that every slot has been
/// used (200 keys' room, 20,000 keys, each holding its two units for one second, a new key
/// every 5 ms: about 200 in the window at any time), so lookups must stop at their home's reach,
/// not at a never-used slot. Every key is found again while its units are in the window: asked
/// once more it is denied, never admitted as a fresh key; keys that found no room were never
/// counted.
#[test]
fn keys_are_found_again_after_every_slot_has_been_used() {
    let limiter = keyed::<u64>("2/s", 200);
    let mut stored = Vec::new();
    for key in 0..20_000u64 {
        let now = ts(T0 + key * 5_000_000);
        let first = limiter.check_n_at(&key, 2, now).unwrap();
        match first.outcome() {
            Outcome::Allowed => stored.push(key),
            Outcome::TableFull => continue,
            other => panic!("key {key}: {other:?}"),
        }
        // Every stored key of the last second, asked again now, is still full.
        for &earlier in stored.iter().rev().take_while(|&&k| k + 200 > key) {
            assert_eq!(
                limiter.check_at(&earlier, now).outcome(),
                Outcome::Denied,
                "key {earlier} asked at key {key}'s time"
            );
        }
    }
    assert!(stored.len() > 19_000, "{} keys stored", stored.len());
    assert_eq!(limiter.len(), limiter.slots());
}

/// A full table refuses a new key with the time until the first log it could reuse is idle:
/// with room for one key (2 slots), key 1's unit at `T0` and key 2's at `T0 + 20 s` leave a
/// 1-minute window at `T0 + 60 s` and `T0 + 80 s`; asked at `T0 + 30 s`, key 3 is told 30 s, by
/// `check` and `peek`, and gets in at exactly that time.
#[test]
fn a_full_table_says_when_room_is_due() {
    let clock = ManualClock::starting_at(ts(T0));
    let limiter = KeyedLogLimiter::<u64, _>::with_clock(log("2/min"), 1, clock.clone()).unwrap();
    assert!(limiter.check(&1).is_allowed());
    clock.set(ts(T0 + 20 * SEC));
    assert!(limiter.check(&2).is_allowed());
    clock.set(ts(T0 + 30 * SEC));
    for refused in [limiter.check(&3), limiter.peek(&3)] {
        assert_eq!(refused.outcome(), Outcome::TableFull);
        assert_eq!(refused.retry_after(), Duration::from_secs(30));
    }
    clock.set(ts(T0 + 60 * SEC - 1));
    assert_eq!(limiter.check(&3).retry_after().as_nanos(), 1);
    clock.set(ts(T0 + 60 * SEC));
    assert!(limiter.check(&3).is_allowed());
}
