//! `reset`: forgetting what a limiter (or one key of a keyed limiter) has counted, so that its
//! next requests are decided exactly as a new limiter's (a new key's), and nothing else moves.

use crate::keyed_common::{
    fixed_window, fresh_run, leaky_bucket, sliding_window, token_bucket, ts, RECOVERY, SEC, T0,
};
use tollgate::algorithm::{Algorithm, FRESH_STATE};
use tollgate::{
    Decision, DirectLimiter, KeyedLimiter, KeyedLogLimiter, LogLimiter, ManualClock, Outcome, SlidingLog,
    WhenFull,
};

/// Weights that exhaust a limit of 3 and then ask for more.
const COSTS: [u64; 5] = [1, 2, 1, 3, 1];

fn run_direct<A: Algorithm>(limiter: &DirectLimiter<A, ManualClock>, at: u64) -> Vec<Decision> {
    COSTS
        .iter()
        .map(|&cost| limiter.check_n_at(cost, ts(at)).unwrap())
        .collect()
}

fn direct_reset_forgets_everything<A: Algorithm + Copy>(algorithm: A) {
    let name = std::any::type_name::<A>();
    let limiter = DirectLimiter::with_clock(algorithm, ManualClock::starting_at(ts(T0)));
    assert!(!limiter.reset_at(ts(T0)), "{name}: a new limiter limits nothing");

    let first = run_direct(&limiter, T0);
    assert!(
        first.iter().any(|d| !d.is_allowed()),
        "{name}: the run exhausts the limit"
    );
    assert!(limiter.reset_at(ts(T0)), "{name}: the limit was in force");
    assert_eq!(limiter.raw_state(), FRESH_STATE, "{name}");
    // Half a second later, the same run as a new limiter's at that time.
    let later = T0 + SEC / 2;
    assert_eq!(
        run_direct(&limiter, later),
        fresh_run(&algorithm, ts(later), &COSTS),
        "{name}"
    );

    // Idle again (everything recovered): nothing to forget, but the state is made fresh, so a
    // clock that then reads earlier finds a new limiter too.
    let recovered = later + RECOVERY.as_nanos() as u64;
    assert!(
        !limiter.reset_at(ts(recovered)),
        "{name}: an idle limiter limits nothing"
    );
    assert_eq!(limiter.raw_state(), FRESH_STATE, "{name}");
    assert_eq!(
        run_direct(&limiter, later),
        fresh_run(&algorithm, ts(later), &COSTS),
        "{name}"
    );
}

#[test]
fn a_direct_limiter_reset_decides_as_a_new_one() {
    direct_reset_forgets_everything(token_bucket(3));
    direct_reset_forgets_everything(leaky_bucket(3));
    direct_reset_forgets_everything(fixed_window(3));
    direct_reset_forgets_everything(sliding_window(3));
}

/// The clock-reading form judges "still limiting" at the clock's time.
#[test]
fn reset_reads_the_clock() {
    let clock = ManualClock::starting_at(ts(T0));
    let limiter = DirectLimiter::with_clock(token_bucket(3), clock.clone());
    assert!(limiter.check_n(3).unwrap().is_allowed());
    clock.set(ts(T0 + RECOVERY.as_nanos() as u64));
    assert!(!limiter.reset(), "refilled by the clock's time");
    clock.set(ts(T0));
    assert!(limiter.check_n(3).unwrap().is_allowed(), "and reset at that time");
    assert!(limiter.reset());
}

fn keyed_reset_forgets_only_that_key<A: Algorithm + Copy>(algorithm: A) {
    let name = std::any::type_name::<A>();
    let limiter =
        KeyedLimiter::<u64, _, _>::with_clock(algorithm, 16, ManualClock::starting_at(ts(T0))).unwrap();
    assert!(!limiter.reset_at(&1, ts(T0)), "{name}: an absent key");
    assert_eq!(limiter.len(), 0, "{name}: a reset inserts nothing");

    for key in [1, 2] {
        for &cost in &COSTS {
            let _ = limiter.check_n_at(&key, cost, ts(T0)).unwrap();
        }
    }
    let refused_before = limiter.peek_at(&2, ts(T0));
    assert!(!refused_before.is_allowed(), "{name}");
    assert!(limiter.reset_at(&1, ts(T0)), "{name}: key 1 was limited");
    assert!(!limiter.reset_at(&1, ts(T0)), "{name}: and now is not");

    let later = T0 + SEC / 2;
    let again: Vec<_> = COSTS
        .iter()
        .map(|&cost| limiter.check_n_at(&1, cost, ts(later)).unwrap())
        .collect();
    assert_eq!(
        again,
        fresh_run(&algorithm, ts(later), &COSTS),
        "{name}: key 1 as a new key"
    );
    assert_eq!(
        limiter.peek_at(&2, ts(T0)),
        refused_before,
        "{name}: key 2 untouched"
    );
}

#[test]
fn a_keyed_reset_decides_the_key_as_a_new_one_and_leaves_the_others() {
    keyed_reset_forgets_only_that_key(token_bucket(3));
    keyed_reset_forgets_only_that_key(leaky_bucket(3));
    keyed_reset_forgets_only_that_key(fixed_window(3));
    keyed_reset_forgets_only_that_key(sliding_window(3));
}

/// A reset key's slot is free for another key: in a table full of keys in debt, a new key is
/// refused for room until one of them is reset.
#[test]
fn a_reset_key_gives_its_slot_to_a_new_key() {
    let limiter = KeyedLimiter::<u64, _, _>::with_clock(token_bucket(3), 1, ManualClock::starting_at(ts(T0)))
        .unwrap()
        .when_full(WhenFull::Refuse);
    let slots = limiter.slots() as u64;
    for key in 0..slots {
        assert!(limiter.check_at(&key, ts(T0)).is_allowed());
    }
    let newcomer = slots;
    assert_eq!(limiter.check_at(&newcomer, ts(T0)).outcome(), Outcome::TableFull);
    assert!(limiter.reset_at(&0, ts(T0)));
    assert_eq!(limiter.check_at(&newcomer, ts(T0)).outcome(), Outcome::Allowed);
    assert_eq!(limiter.len() as u64, slots);
}

fn log(text: &str) -> SlidingLog {
    SlidingLog::new(text.parse().unwrap()).unwrap()
}

#[test]
fn a_log_reset_empties_it() {
    let limiter = LogLimiter::with_clock(log("3/s"), ManualClock::starting_at(ts(T0)));
    assert!(!limiter.reset_at(ts(T0)));
    assert!(limiter.check_n_at(3, ts(T0)).unwrap().is_allowed());
    assert!(!limiter.check_at(ts(T0 + SEC / 2)).is_allowed());
    assert!(limiter.reset_at(ts(T0 + SEC / 2)));
    assert!(limiter.check_n_at(3, ts(T0 + SEC / 2)).unwrap().is_allowed());
    // Past the window nothing limits, but the log is emptied: an earlier clock finds it empty.
    assert!(!limiter.reset_at(ts(T0 + 2 * SEC)));
    assert!(limiter.check_n_at(3, ts(T0)).unwrap().is_allowed());
}

#[test]
fn a_keyed_log_reset_forgets_only_that_key_and_frees_its_slot() {
    let limiter = KeyedLogLimiter::<u64, _>::with_clock(log("3/s"), 1, ManualClock::starting_at(ts(T0)))
        .unwrap()
        .when_full(WhenFull::Refuse);
    assert!(!limiter.reset_at(&0, ts(T0)), "an absent key");
    assert_eq!(limiter.len(), 0);
    let slots = limiter.slots() as u64;
    for key in 0..slots {
        assert!(limiter.check_n_at(&key, 3, ts(T0)).unwrap().is_allowed());
    }
    let newcomer = slots;
    assert_eq!(limiter.check_at(&newcomer, ts(T0)).outcome(), Outcome::TableFull);
    assert!(limiter.reset_at(&1, ts(T0)));
    assert!(!limiter.reset_at(&1, ts(T0)));
    assert!(!limiter.check_at(&0, ts(T0)).is_allowed(), "key 0 untouched");
    assert_eq!(limiter.check_at(&newcomer, ts(T0)).outcome(), Outcome::Allowed);
}

/// Workers in a stress run, each making `STRESS_CALLS` weight-1 requests; runs per limiter.
const STRESS_WORKERS: usize = 6;
const STRESS_CALLS: usize = 2_000;
const STRESS_RUNS: usize = 20;
/// The burst of the stressed bucket.
const STRESS_BURST: u64 = 50;

/// Six threads make weight-1 requests on one bucket (or key) at a frozen time while a seventh
/// resets it whenever a peek finds it exhausted. Time is frozen, so nothing can be admitted
/// between that peek and the reset: every epoch before the last admits exactly the burst, and the
/// admissions of all threads together are exactly `burst * resets` plus what the last epoch
/// used. An admission lost or counted twice among many threads, a reset that does not give the
/// whole burst back or says the exhausted bucket was not limiting, breaks the count. (A reset
/// here never races an admission, which cannot happen while the bucket is exhausted; that race
/// is `loom-tests/tests/reset.rs`'.) Returns how many resets the run made.
fn stress(
    check: impl Fn() -> bool + Sync,
    exhausted: impl Fn() -> bool + Sync,
    reset: impl Fn() -> bool + Sync,
    left: impl Fn() -> u64,
) -> u64 {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let admitted = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let mut resets = 0;
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..STRESS_WORKERS)
            .map(|_| {
                scope.spawn(|| {
                    let mine = (0..STRESS_CALLS).filter(|_| check()).count() as u64;
                    // Relaxed: read after the scope joins every thread.
                    admitted.fetch_add(mine, Ordering::Relaxed);
                })
            })
            .collect();
        let resetter = scope.spawn(|| {
            let mut resets = 0;
            // Relaxed: a stop flag; the count is read after the joins.
            while !done.load(Ordering::Relaxed) {
                if exhausted() {
                    assert!(reset(), "an exhausted bucket is still limiting");
                    resets += 1;
                }
                std::thread::yield_now();
            }
            resets
        });
        for worker in workers {
            worker.join().expect("a worker panicked");
        }
        done.store(true, Ordering::Relaxed);
        resets = resetter.join().expect("the resetter panicked");
    });
    let used_last = STRESS_BURST - left();
    assert_eq!(
        admitted.into_inner(),
        STRESS_BURST * resets + used_last,
        "{resets} resets"
    );
    resets
}

#[test]
fn concurrent_checks_and_resets_of_a_direct_limiter_count_exactly() {
    let mut resets = 0;
    for _ in 0..STRESS_RUNS {
        let clock = ManualClock::starting_at(ts(T0));
        let limiter = DirectLimiter::with_clock(token_bucket(STRESS_BURST), clock);
        let left = || {
            let peek = limiter.peek();
            if peek.is_allowed() {
                peek.remaining() + 1
            } else {
                0
            }
        };
        resets += stress(
            || limiter.check().is_allowed(),
            || !limiter.peek().is_allowed(),
            || limiter.reset(),
            left,
        );
    }
    eprintln!("direct: {resets} resets over {STRESS_RUNS} runs");
    assert!(resets > 0, "the resetter never ran while the workers did");
}

#[test]
fn concurrent_checks_and_resets_of_a_key_count_exactly() {
    let mut resets = 0;
    for _ in 0..STRESS_RUNS {
        let clock = ManualClock::starting_at(ts(T0));
        let limiter = KeyedLimiter::<u64, _, _>::with_clock(token_bucket(STRESS_BURST), 16, clock).unwrap();
        // Another key in debt beside it: a reset of one key must not touch another.
        assert!(limiter.check_n_at(&8, STRESS_BURST, ts(T0)).unwrap().is_allowed());
        let left = || {
            let peek = limiter.peek(&7);
            if peek.is_allowed() {
                peek.remaining() + 1
            } else {
                0
            }
        };
        resets += stress(
            || limiter.check(&7).is_allowed(),
            || !limiter.peek(&7).is_allowed(),
            || limiter.reset(&7),
            left,
        );
        assert!(!limiter.peek(&8).is_allowed(), "the other key keeps its count");
    }
    eprintln!("keyed: {resets} resets over {STRESS_RUNS} runs");
    assert!(resets > 0, "the resetter never ran while the workers did");
}
