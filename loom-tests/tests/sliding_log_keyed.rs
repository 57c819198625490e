//! loom models of the keyed sliding log ([`KeyedLogLimiter`](tollgate::KeyedLogLimiter)): every
//! race on a slot, with 2 and 3 threads, each model with broken twins loom must reject.
//!
//! The table is built for 1 key: 2 slots, one shard. Invariant (see `loom_tests::LogModel`): in
//! every execution, the threads' decisions, the answers of requests made once they are joined
//! (which read back each key's log) and `len()` are those of some sequential order of the same
//! requests on the shipped table: no key inserted twice, no key charged for another's request,
//! no log with a unit in the window reused, no record lost. Every slot of a new key's chain holds
//! a key or is the key's first free slot, so where the keys' homes are does not matter to the
//! invariant; it does to how many executions loom explores, so the keys are chosen with their
//! homes fixed (all at slot 0, see [`keys`]): every run explores the same table.
//!
//! Twins (`tollgate::LogFaults`), each the shipped table with one step of its locking left out:
//! `insert_unlocked` (new keys inserted without the shard's insert lock), `reclaim_busy` (a log
//! with a unit in the window reused), `skip_key_recheck` (a decision that found its key's slot
//! does not check, under the slot's lock, that the slot is still its key's; the same for a
//! `reset`, in its own model at the end), and `unlock_before_record` (the slot's lock released
//! between deciding and recording).
//!
//! Compiled only under `--cfg tollgate_loom` (the attribute below comes after these docs so
//! that the crate keeps them, and `missing_docs` stays quiet, when the cfg strips it).
#![cfg(tollgate_loom)]

use std::sync::OnceLock;

use loom::sync::Arc;
use loom::thread;
use loom_tests::{assert_violation, ms, LogModel, LogRequest, Placement};
use tollgate::{KeyedLogLimiter, LogFaults, ManualClock, Outcome, Quota, SlidingLog};

/// One key per table: 2 slots.
const CAPACITY: usize = 1;

/// The models' keys (`F`, `A`, `B`, `C`, `K` in the docs), all homed at slot 0. Which slot a
/// given number homes at follows ahash's keys, drawn once per process: keys chosen by home make
/// every run explore the same table, so that a change near loom's limits fails every run, not
/// one in a few.
#[derive(Clone, Copy, Debug)]
struct Keys {
    f: u64,
    a: u64,
    b: u64,
    c: u64,
    k: u64,
}

fn keys() -> Keys {
    static KEYS: OnceLock<Keys> = OnceLock::new();
    *KEYS.get_or_init(|| {
        let placement = Placement::for_capacity(CAPACITY);
        let mut chosen = Vec::new();
        for _ in 0..5 {
            let key = placement.key_at(0, &chosen);
            chosen.push(key);
        }
        Keys {
            f: chosen[0],
            a: chosen[1],
            b: chosen[2],
            c: chosen[3],
            k: chosen[4],
        }
    })
}

type Result = std::result::Result<(), Box<dyn std::error::Error>>;

fn per_second(limit: u64) -> std::result::Result<SlidingLog, Box<dyn std::error::Error>> {
    Ok(SlidingLog::new(Quota::per_second(limit)?)?)
}

// ---------------------------------------------------------------------------------------------
// Threads inserting one new key
// ---------------------------------------------------------------------------------------------

/// `threads` threads ask for the new key `K` (limit 1 per second) at 0.5 s: exactly one is
/// admitted, the others refused by its unit, one entry; afterwards `K` is still refused.
fn same_new_key(threads: usize) -> std::result::Result<LogModel, Box<dyn std::error::Error>> {
    let mut model = LogModel::keyed(per_second(1)?, CAPACITY).after(&[LogRequest::at(keys().k, ms(600))]);
    for _ in 0..threads {
        model = model.thread(&[LogRequest::at(keys().k, ms(500))]);
    }
    for outcome in model.sequential_outcomes() {
        assert_eq!((outcome.admitted(), outcome.len), (1, 1), "{outcome:#?}");
        assert_eq!(outcome.after[0].outcome(), Outcome::Denied);
    }
    Ok(model)
}

#[test]
fn two_threads_insert_one_key_once() -> Result {
    same_new_key(2)?.check();
    Ok(())
}

/// Without the insert lock both threads claim the empty slot: `K` admitted twice.
#[test]
fn two_threads_insert_unlocked_twin_is_rejected() -> Result {
    same_new_key(2)?.assert_rejected(LogFaults::NONE.insert_unlocked());
    Ok(())
}

#[test]
fn three_threads_insert_one_key_once() -> Result {
    same_new_key(3)?.check();
    Ok(())
}

#[test]
fn three_threads_insert_unlocked_twin_is_rejected() -> Result {
    same_new_key(3)?.assert_rejected(LogFaults::NONE.insert_unlocked());
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// A new key reusing an idle log while its key is charged
// ---------------------------------------------------------------------------------------------

/// Limit 1 per second. `A` admitted at 0 s, the filler `F` at 0.9 s: both slots held. At 1.2 s
/// `A` is idle (its unit left at 1 s), `F` is not. Thread 1 charges `A` while new keys `B` (and
/// `C`) ask for a slot, which only `A`'s can give, and only while `A` is idle: exactly one of
/// them is admitted, the others get `TableFull`; the admitted one is then refused (its own unit),
/// and `F` keeps its unit.
fn reuse_idle(threads: &[u64]) -> std::result::Result<LogModel, Box<dyn std::error::Error>> {
    let mut model = LogModel::keyed(per_second(1)?, CAPACITY)
        .setup(&[LogRequest::at(keys().a, ms(0)), LogRequest::at(keys().f, ms(900))])
        .after(&[
            LogRequest::at(keys().f, ms(1300)),
            LogRequest::at(keys().a, ms(1300)),
            LogRequest::at(keys().b, ms(1300)),
        ]);
    for &key in threads {
        model = model.thread(&[LogRequest::at(key, ms(1200))]);
    }
    let outcomes = model.sequential_outcomes();
    assert_eq!(outcomes.len(), threads.len(), "one outcome per key that wins");
    for outcome in outcomes {
        assert_eq!((outcome.admitted(), outcome.len), (1, 2), "{outcome:#?}");
        let refused = outcome
            .decisions
            .iter()
            .flatten()
            .filter(|d| d.outcome() == Outcome::TableFull);
        assert_eq!(refused.count(), threads.len() - 1, "{outcome:#?}");
        assert_eq!(outcome.after[0].outcome(), Outcome::Denied, "F lost its unit");
    }
    Ok(model)
}

#[test]
fn two_threads_reuse_only_an_idle_log() -> Result {
    reuse_idle(&[keys().a, keys().b])?.check();
    Ok(())
}

/// Reusing `A`'s log after thread 1 charged it: `A` and `B` both admitted, `A`'s unit lost.
#[test]
fn two_threads_reclaim_busy_twin_is_rejected() -> Result {
    reuse_idle(&[keys().a, keys().b])?.assert_rejected(LogFaults::NONE.reclaim_busy());
    Ok(())
}

/// `A`'s request decided on the log `B` just took: `A` refused by `B`'s unit (or charged to it).
#[test]
fn two_threads_skip_key_recheck_twin_is_rejected() -> Result {
    reuse_idle(&[keys().a, keys().b])?.assert_rejected(LogFaults::NONE.skip_key_recheck());
    Ok(())
}

#[test]
fn three_threads_reuse_only_an_idle_log() -> Result {
    reuse_idle(&[keys().a, keys().b, keys().c])?.check();
    Ok(())
}

#[test]
fn three_threads_reclaim_busy_twin_is_rejected() -> Result {
    reuse_idle(&[keys().a, keys().b, keys().c])?.assert_rejected(LogFaults::NONE.reclaim_busy());
    Ok(())
}

#[test]
fn three_threads_skip_key_recheck_twin_is_rejected() -> Result {
    reuse_idle(&[keys().a, keys().b, keys().c])?.assert_rejected(LogFaults::NONE.skip_key_recheck());
    Ok(())
}

/// As above, but `A`'s unit is at 0.5 s, still in the window at 1.2 s: `A` is refused and `B`
/// gets `TableFull` in every order; afterwards `A` is still refused (it kept its log).
fn keep_busy() -> std::result::Result<LogModel, Box<dyn std::error::Error>> {
    let model = LogModel::keyed(per_second(1)?, CAPACITY)
        .setup(&[
            LogRequest::at(keys().a, ms(500)),
            LogRequest::at(keys().f, ms(900)),
        ])
        .thread(&[LogRequest::at(keys().a, ms(1200))])
        .thread(&[LogRequest::at(keys().b, ms(1200))])
        .after(&[LogRequest::at(keys().a, ms(1300))]);
    for outcome in model.sequential_outcomes() {
        let outcomes: Vec<_> = outcome.decisions.iter().flatten().map(|d| d.outcome()).collect();
        assert_eq!(outcomes, [Outcome::Denied, Outcome::TableFull]);
        assert_eq!(outcome.after[0].outcome(), Outcome::Denied);
    }
    Ok(model)
}

#[test]
fn a_log_in_the_window_is_never_reused() -> Result {
    keep_busy()?.check();
    Ok(())
}

#[test]
fn a_log_in_the_window_reclaim_busy_twin_is_rejected() -> Result {
    keep_busy()?.assert_rejected(LogFaults::NONE.reclaim_busy());
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Threads charging one present key
// ---------------------------------------------------------------------------------------------

/// Limit 2 per second, `K` admitted at 0 s; `threads` threads charge it at 0.5 s, 0.6 s (and
/// 0.7 s): exactly one more is admitted; afterwards `K` is refused until its first unit leaves.
fn same_present_key(threads: u64) -> std::result::Result<LogModel, Box<dyn std::error::Error>> {
    let mut model = LogModel::keyed(per_second(2)?, CAPACITY)
        .setup(&[LogRequest::at(keys().k, ms(0))])
        .after(&[
            LogRequest::at(keys().k, ms(900)),
            LogRequest::at(keys().k, ms(1000)),
        ]);
    for t in 0..threads {
        model = model.thread(&[LogRequest::at(keys().k, ms(500 + 100 * t))]);
    }
    for outcome in model.sequential_outcomes() {
        assert_eq!((outcome.admitted(), outcome.len), (1, 1), "{outcome:#?}");
        assert_eq!(outcome.after[0].outcome(), Outcome::Denied);
        assert_eq!(outcome.after[1].outcome(), Outcome::Allowed);
    }
    Ok(model)
}

#[test]
fn two_threads_charge_one_key_as_some_sequential_order() -> Result {
    same_present_key(2)?.check();
    Ok(())
}

/// The slot's lock released between deciding and recording: both decided on one unit, both
/// admitted.
#[test]
fn two_threads_unlocked_record_twin_is_rejected() -> Result {
    same_present_key(2)?.assert_rejected(LogFaults::NONE.unlock_before_record());
    Ok(())
}

#[test]
fn three_threads_charge_one_key_as_some_sequential_order() -> Result {
    same_present_key(3)?.check();
    Ok(())
}

#[test]
fn three_threads_unlocked_record_twin_is_rejected() -> Result {
    same_present_key(3)?.assert_rejected(LogFaults::NONE.unlock_before_record());
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// A reset racing the reuse of the key's slot
// ---------------------------------------------------------------------------------------------

/// Limit 1 per second; `A` admitted at 0 s (slot 0), `F` at 0.9 s (slot 1). At 1.2 s `A` is
/// idle: thread 1 resets `A` while thread 2's new key `B` takes `A`'s slot and records a unit in
/// it. The reset finds nothing of `A` to forget in either order, and must not empty `B`'s log:
/// afterwards `B` is refused at 1.3 s (its own unit), `F` too. Without the reset's check, under
/// the slot's lock, that the slot is still `A`'s, loom finds the reset emptying `B`'s log.
/// Both run on spawned threads and the model's own thread only sets the table up, joins and
/// checks, as in the `LogModel`s: loom 0.7.3 does not run a spawned thread ahead of the main
/// thread's next access when the spawned one starts with a load (tokio-rs/loom#392).
fn reset_during_reuse(faults: LogFaults) {
    let keys = keys();
    let log = per_second(1).expect("a valid log");
    let limiter = Arc::new(
        KeyedLogLimiter::with_clock(log, CAPACITY, ManualClock::new())
            .expect("a valid table")
            .with_faults(faults),
    );
    assert!(limiter.check_at(&keys.a, ms(0)).is_allowed());
    assert!(limiter.check_at(&keys.f, ms(900)).is_allowed());
    let resetter = {
        let limiter = Arc::clone(&limiter);
        thread::spawn(move || limiter.reset_at(&keys.a, ms(1200)))
    };
    let taker = {
        let limiter = Arc::clone(&limiter);
        thread::spawn(move || limiter.check_at(&keys.b, ms(1200)).is_allowed())
    };
    let forgot = resetter.join().expect("no panic");
    assert!(taker.join().expect("no panic"), "B takes A's idle slot");
    assert!(
        !limiter.check_at(&keys.b, ms(1300)).is_allowed(),
        "{RESET_VIOLATION}: B's unit is gone"
    );
    assert!(!forgot, "A was idle: nothing to forget");
    assert!(
        !limiter.check_at(&keys.f, ms(1300)).is_allowed(),
        "F lost its unit"
    );
}

/// What the reset model's twin must break.
const RESET_VIOLATION: &str = "the reset emptied another key's log";

#[test]
fn a_reset_never_empties_the_log_of_the_key_that_took_the_slot() {
    loom::model(|| reset_during_reuse(LogFaults::NONE));
}

#[test]
fn a_reset_skip_key_recheck_twin_is_rejected() {
    assert_violation(RESET_VIOLATION, "skip_key_recheck (reset)", || {
        loom::model(|| reset_during_reuse(LogFaults::NONE.skip_key_recheck()));
    });
}
