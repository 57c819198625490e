//! Named keyed limiters' series (feature `metrics`): decisions by outcome (allowed, refused,
//! table full, untracked), the keys held (equal to `len()` after every step), the capacity and
//! the reclaims, for the lock-free table, the locked table of a wide window and the keyed
//! sliding log; and threads racing inserts, reclaims and decisions, counted exactly.

use std::sync::{Arc, Barrier};
use std::thread;

use tollgate::algorithm::Algorithm;
use tollgate::{
    Decision, KeyedLimiter, KeyedLogLimiter, ManualClock, Outcome, SlidingLog, SlidingWindow, Timestamp,
    TokenBucket, WhenFull,
};

use crate::keyed_common::{ts, SEC, T0};
use crate::metrics_common::{expected, name, Recorder};

/// What the tests need of a keyed table: a decision, its size, its policy when full.
trait Table {
    fn check(&self, key: u64, now: Timestamp) -> Decision;
    fn len(&self) -> usize;
}

impl<A: Algorithm> Table for KeyedLimiter<u64, A, ManualClock> {
    fn check(&self, key: u64, now: Timestamp) -> Decision {
        self.check_at(&key, now)
    }

    fn len(&self) -> usize {
        KeyedLimiter::len(self)
    }
}

impl Table for KeyedLogLimiter<u64, ManualClock> {
    fn check(&self, key: u64, now: Timestamp) -> Decision {
        self.check_at(&key, now)
    }

    fn len(&self) -> usize {
        KeyedLogLimiter::len(self)
    }
}

/// A table built for 3 keys (5 slots, one shard: every key can use every slot) whose algorithm
/// admits 1 request per key per second, named `name`, going through: five keys admitted (the
/// table's every slot), one refused (over quota), a sixth key that finds no room; a second
/// later, when every key is idle, five new keys, each reclaiming an idle key's slot. After each
/// step the keys held equal `len()`.
fn table_sequence(table: &impl Table, recorder: &Recorder, name: &str, when_full: WhenFull) {
    let keys_held = |recorder: &Recorder| recorder.published(name).values["tollgate_keys_held"];
    let outcomes: Vec<Outcome> = (0..5).map(|key| table.check(key, ts(T0)).outcome()).collect();
    assert_eq!(outcomes, [Outcome::Allowed; 5]);
    assert_eq!(keys_held(recorder), table.len() as f64);
    assert_eq!(table.check(0, ts(T0)).outcome(), Outcome::Denied);
    let full = match when_full {
        WhenFull::Refuse => Outcome::TableFull,
        _ => Outcome::AllowedUntracked,
    };
    assert_eq!(table.check(5, ts(T0)).outcome(), full);
    assert_eq!(table.len(), 5);
    let later = ts(T0 + 3 * SEC);
    let outcomes: Vec<Outcome> = (10..15).map(|key| table.check(key, later).outcome()).collect();
    assert_eq!(outcomes, [Outcome::Allowed; 5]);
    assert_eq!(table.len(), 5);
    let full_label = match when_full {
        WhenFull::Refuse => "tollgate_decisions_total{outcome=table_full}",
        _ => "tollgate_decisions_total{outcome=untracked}",
    };
    assert_eq!(
        recorder.published(name).values,
        expected(&[
            ("tollgate_decisions_total{outcome=allowed}", 10.0),
            ("tollgate_decisions_total{outcome=refused}", 1.0),
            (full_label, 1.0),
            ("tollgate_keys_capacity", 3.0),
            ("tollgate_keys_held", 5.0),
            ("tollgate_keys_reclaimed_total", 5.0),
        ])
    );
}

fn one_per_second() -> TokenBucket {
    TokenBucket::new("1/s".parse().unwrap()).unwrap()
}

#[test]
fn the_lock_free_table_counts_outcomes_keys_and_reclaims() {
    for when_full in [WhenFull::Refuse, WhenFull::Admit] {
        let recorder = Recorder::new();
        let name = name("keyed");
        let table = KeyedLimiter::with_clock(one_per_second(), 3, ManualClock::new())
            .unwrap()
            .when_full(when_full)
            .named(name.clone());
        assert_eq!(table.meter().map(|meter| meter.name()), Some(&name));
        table_sequence(&table, &recorder, name.as_str(), when_full);
    }
}

/// A sliding window whose limit needs a 128-bit state: its keys are in the locked table.
#[test]
fn the_locked_table_of_a_wide_window_counts_the_same() {
    let recorder = Recorder::new();
    let name = name("wide");
    // A limit past what 64 bits pack beside the window's index: each key sends one request.
    let window = SlidingWindow::new("4294967295/s".parse().unwrap()).unwrap();
    assert!(window.is_wide());
    let table = KeyedLimiter::with_clock(window, 3, ManualClock::new())
        .unwrap()
        .named(name.clone());
    // Five keys fill the five slots; none is idle until its window has passed.
    for key in 0..5 {
        assert_eq!(table.check_at(&key, ts(T0)).outcome(), Outcome::Allowed);
    }
    assert_eq!(table.check_at(&5, ts(T0)).outcome(), Outcome::TableFull);
    for key in 10..15 {
        assert_eq!(table.check_at(&key, ts(T0 + 3 * SEC)).outcome(), Outcome::Allowed);
    }
    assert_eq!(table.len(), 5);
    assert_eq!(
        recorder.published(name.as_str()).values,
        expected(&[
            ("tollgate_decisions_total{outcome=allowed}", 10.0),
            ("tollgate_decisions_total{outcome=refused}", 0.0),
            ("tollgate_decisions_total{outcome=table_full}", 1.0),
            ("tollgate_keys_capacity", 3.0),
            ("tollgate_keys_held", 5.0),
            ("tollgate_keys_reclaimed_total", 5.0),
        ])
    );
}

#[test]
fn the_keyed_sliding_log_counts_the_same() {
    let recorder = Recorder::new();
    let name = name("log");
    let log = SlidingLog::new("1/s".parse().unwrap()).unwrap();
    let table = KeyedLogLimiter::with_clock(log, 3, ManualClock::new())
        .unwrap()
        .named(name.clone());
    table_sequence(&table, &recorder, name.as_str(), WhenFull::Refuse);
}

/// A table named once it holds keys counts them from the start.
#[test]
fn a_table_named_late_counts_the_keys_it_already_holds() {
    let recorder = Recorder::new();
    let name = name("late");
    let table = KeyedLimiter::<u64, _, _>::with_clock(one_per_second(), 100, ManualClock::new()).unwrap();
    for key in 0..7 {
        let _ = table.check_at(&key, ts(T0));
    }
    let table = table.named(name.clone());
    let _ = table.check_at(&7, ts(T0));
    assert_eq!(
        recorder.published(name.as_str()).values["tollgate_keys_held"],
        8.0
    );
}

/// Threads racing on a small table: each its own keys and one key they all share, with the
/// clock moved between rounds so that idle keys are reclaimed by new ones. Every thread tallies
/// the outcomes it was told; the published counts must equal the tallies summed, and the keys
/// held `len()`.
#[test]
fn threads_racing_on_a_table_are_counted_exactly() {
    const THREADS: u64 = 4;
    const ROUNDS: u64 = 6;
    const KEYS_PER_THREAD: u64 = 40;
    let recorder = Recorder::new();
    let name = name("racing");
    let clock = ManualClock::starting_at(ts(T0));
    let bucket = TokenBucket::new("5/s".parse().unwrap()).unwrap();
    // Room for 100 keys (143 slots), fewer than the 161 each round brings: some find no room.
    let table = Arc::new(
        KeyedLimiter::<u64, _, _>::with_clock(bucket, 100, clock.clone())
            .unwrap()
            .named(name.clone()),
    );
    let mut tallies = [0u64; 4];
    for round in 0..ROUNDS {
        let barrier = Arc::new(Barrier::new(THREADS as usize));
        let workers: Vec<_> = (0..THREADS)
            .map(|thread| {
                let (table, barrier) = (Arc::clone(&table), Arc::clone(&barrier));
                thread::spawn(move || {
                    let mut tally = [0u64; 4];
                    barrier.wait();
                    for i in 0..KEYS_PER_THREAD * 3 {
                        // A key of this round and thread, each asked three times, and the shared
                        // key between them.
                        let own = 1 + round * 1_000 + thread * KEYS_PER_THREAD + i % KEYS_PER_THREAD;
                        for key in [own, 0] {
                            let index = match table.check(&key).outcome() {
                                Outcome::Allowed => 0,
                                Outcome::Denied => 1,
                                Outcome::TableFull => 2,
                                _ => 3,
                            };
                            tally[index] += 1;
                        }
                    }
                    tally
                })
            })
            .collect();
        for worker in workers {
            for (total, count) in tallies.iter_mut().zip(worker.join().unwrap()) {
                *total += count;
            }
        }
        // Every key idle again: the next round's keys reclaim their slots.
        clock.advance(std::time::Duration::from_secs(2));
    }
    assert_eq!(tallies[3], 0, "no untracked admission under WhenFull::Refuse");
    assert!(tallies[2] > 0, "the table was full at times");
    let published = recorder.published(name.as_str()).values;
    let mut wanted = expected(&[
        ("tollgate_decisions_total{outcome=allowed}", tallies[0] as f64),
        ("tollgate_decisions_total{outcome=refused}", tallies[1] as f64),
        ("tollgate_decisions_total{outcome=table_full}", tallies[2] as f64),
        ("tollgate_keys_capacity", 100.0),
        ("tollgate_keys_held", table.len() as f64),
    ]);
    let reclaimed = published["tollgate_keys_reclaimed_total"];
    assert!(reclaimed > 0.0, "idle keys were reclaimed");
    wanted.insert("tollgate_keys_reclaimed_total".to_owned(), reclaimed);
    assert_eq!(published, wanted);
}
