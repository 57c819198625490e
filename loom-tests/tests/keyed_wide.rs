//! loom models of a [`KeyedLimiter`](tollgate::KeyedLimiter) of wide states: a sliding window
//! built wide (`with_wide_state`, the layout of a limit too large for one word), whose keys live
//! in the locked table the keyed sliding log uses (`src/keyed/locked.rs`, generic over what it
//! keeps per key), each with broken twins loom must reject. The same protocol as the keyed log's
//! models (`sliding_log_keyed.rs`), on the other value it is built for.
//!
//! The table is built for 1 key: 2 slots, one shard. Invariant (see `loom_tests::LogModel`): in
//! every execution, the threads' decisions, the answers of requests made once they are joined
//! (which read back each key's state) and `len()` are those of some sequential order of the same
//! requests on the shipped table: no key inserted twice, no key charged for another's request,
//! no state with a unit in its window reused, no admission lost. The keys are chosen with their
//! homes at slot 0, as in `sliding_log_keyed.rs`.
//!
//! Twins (`tollgate::LogFaults`, set with `KeyedLimiter::with_locked_faults`):
//! `insert_unlocked`, `reclaim_busy`, `skip_key_recheck` and `unlock_before_record` (here: the
//! slot's lock released between deciding and storing the new state).
//!
//! Compiled only under `--cfg tollgate_loom` (the attribute below comes after these docs so
//! that the crate keeps them, and `missing_docs` stays quiet, when the cfg strips it).
#![cfg(tollgate_loom)]

use std::sync::OnceLock;

use loom_tests::{ms, LogModel, LogRequest, Placement};
use tollgate::algorithm::Algorithm;
use tollgate::{LogFaults, Outcome, Quota, SlidingWindow};

/// One key per table: 2 slots.
const CAPACITY: usize = 1;

/// The models' keys (`F`, `A`, `B`, `K`), all homed at slot 0 (see `sliding_log_keyed.rs`).
#[derive(Clone, Copy, Debug)]
struct Keys {
    f: u64,
    a: u64,
    b: u64,
    k: u64,
}

fn keys() -> Keys {
    static KEYS: OnceLock<Keys> = OnceLock::new();
    *KEYS.get_or_init(|| {
        let placement = Placement::for_capacity(CAPACITY);
        let mut chosen = Vec::new();
        for _ in 0..4 {
            let key = placement.key_at(0, &chosen);
            chosen.push(key);
        }
        Keys {
            f: chosen[0],
            a: chosen[1],
            b: chosen[2],
            k: chosen[3],
        }
    })
}

type Result = std::result::Result<(), Box<dyn std::error::Error>>;

/// A sliding window of `limit` per second, wide.
fn per_second(limit: u64) -> std::result::Result<SlidingWindow, Box<dyn std::error::Error>> {
    let window = SlidingWindow::new(Quota::per_second(limit)?)?.with_wide_state();
    assert!(window.is_wide());
    Ok(window)
}

/// Two threads ask for the new key `K` (limit 1 per second) at 0.5 s: exactly one is
/// admitted, one slot; afterwards `K` is still refused.
fn same_new_key() -> std::result::Result<LogModel, Box<dyn std::error::Error>> {
    let model = LogModel::keyed_wide(per_second(1)?, CAPACITY)
        .thread(&[LogRequest::at(keys().k, ms(500))])
        .thread(&[LogRequest::at(keys().k, ms(500))])
        .after(&[LogRequest::at(keys().k, ms(600))]);
    for outcome in model.sequential_outcomes() {
        assert_eq!((outcome.admitted(), outcome.len), (1, 1), "{outcome:#?}");
        assert_eq!(outcome.after[0].outcome(), Outcome::Denied);
    }
    Ok(model)
}

#[test]
fn two_threads_insert_one_wide_key_once() -> Result {
    same_new_key()?.check();
    Ok(())
}

/// Without the insert lock both threads claim the empty slot: `K` admitted twice.
#[test]
fn two_threads_insert_unlocked_twin_is_rejected() -> Result {
    same_new_key()?.assert_rejected(LogFaults::NONE.insert_unlocked());
    Ok(())
}

/// Limit 1 per second. `A` admitted at 0 s, the filler `F` at 1.5 s: both slots held. At 2.5 s
/// `A`'s state is reclaimable (its unit's window and the next have ended), `F`'s is not. One
/// thread charges `A` while the new key `B` asks for a slot, which only `A`'s can give, and only
/// while `A` is idle: exactly one of them is admitted, the other gets `TableFull`; `F` keeps its
/// unit.
fn reuse_idle() -> std::result::Result<LogModel, Box<dyn std::error::Error>> {
    let model = LogModel::keyed_wide(per_second(1)?, CAPACITY)
        .setup(&[
            LogRequest::at(keys().a, ms(0)),
            LogRequest::at(keys().f, ms(1500)),
        ])
        .thread(&[LogRequest::at(keys().a, ms(2500))])
        .thread(&[LogRequest::at(keys().b, ms(2500))])
        .after(&[LogRequest::at(keys().f, ms(2600))]);
    let outcomes = model.sequential_outcomes();
    assert_eq!(outcomes.len(), 2, "one outcome per key that wins");
    for outcome in outcomes {
        assert_eq!((outcome.admitted(), outcome.len), (1, 2), "{outcome:#?}");
        let refused = outcome
            .decisions
            .iter()
            .flatten()
            .filter(|d| d.outcome() == Outcome::TableFull);
        assert_eq!(refused.count(), 1, "{outcome:#?}");
        assert_eq!(outcome.after[0].outcome(), Outcome::Denied, "F lost its unit");
    }
    Ok(model)
}

#[test]
fn two_threads_reuse_only_an_idle_state() -> Result {
    reuse_idle()?.check();
    Ok(())
}

/// Reusing `A`'s slot after the thread charged it: `A` and `B` both admitted, `A`'s unit lost.
#[test]
fn two_threads_reclaim_busy_twin_is_rejected() -> Result {
    reuse_idle()?.assert_rejected(LogFaults::NONE.reclaim_busy());
    Ok(())
}

/// `A`'s request decided on the state `B` just took: `A` refused by `B`'s unit (or charged to it).
#[test]
fn two_threads_skip_key_recheck_twin_is_rejected() -> Result {
    reuse_idle()?.assert_rejected(LogFaults::NONE.skip_key_recheck());
    Ok(())
}

/// Limit 2 per second, `K` admitted at 0 s; two threads charge it at 0.5 s and 0.6 s: exactly
/// one more is admitted; afterwards `K` is refused at 0.9 s.
fn same_present_key() -> std::result::Result<LogModel, Box<dyn std::error::Error>> {
    let model = LogModel::keyed_wide(per_second(2)?, CAPACITY)
        .setup(&[LogRequest::at(keys().k, ms(0))])
        .thread(&[LogRequest::at(keys().k, ms(500))])
        .thread(&[LogRequest::at(keys().k, ms(600))])
        .after(&[LogRequest::at(keys().k, ms(900))]);
    for outcome in model.sequential_outcomes() {
        assert_eq!((outcome.admitted(), outcome.len), (1, 1), "{outcome:#?}");
        assert_eq!(outcome.after[0].outcome(), Outcome::Denied);
    }
    Ok(model)
}

#[test]
fn two_threads_charge_one_wide_key_as_some_sequential_order() -> Result {
    same_present_key()?.check();
    Ok(())
}

/// The slot's lock released between deciding and storing: both decided on one state, both
/// admitted.
#[test]
fn two_threads_unlocked_store_twin_is_rejected() -> Result {
    same_present_key()?.assert_rejected(LogFaults::NONE.unlock_before_record());
    Ok(())
}
