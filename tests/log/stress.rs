//! Many OS threads on one `LogLimiter` or `KeyedLogLimiter`, counting admissions exactly.
//!
//! At a frozen instant the log admits exactly `limit` units in all (weight-1 requests keep
//! coming after every heavier one, so the ceiling is always reached): more would mean two
//! threads decided on the same log, fewer a lost record. The admitted decisions must also be
//! linearizable: sorted by `remaining`, each admission's `remaining` is the limit minus the
//! weight admitted up to and including it. A second kind of run moves the clock between rounds
//! (the workers parked at a barrier) by uneven steps, and checks each round's admitted weight
//! against the units the earlier rounds left in the window. Keyed runs check the same per key,
//! for keys racing to be inserted, and for a table too small for every key.
//!
//! Threads start together on a `Barrier`; with 8 and 16 threads on a machine that may have two
//! cores, many decisions are preempted while holding the lock.

use std::collections::HashMap;
use std::sync::Barrier;
use std::thread;
use std::time::Duration;

use tollgate::{
    Decision, KeyedLogLimiter, LogLimiter, ManualClock, Outcome, SlidingLog, Timestamp, WhenFull,
};

const SEC: u64 = 1_000_000_000;
/// A minute boundary plus 15 s and a few ns.
const T0: u64 = 1_700_000_040 * SEC + 15 * SEC + 7;
/// Calls per thread in a frozen-clock run; one in four weighs 2.
const CALLS: usize = 600;
/// Runs of each frozen-clock scenario.
const REPS: u64 = 10;
const LIMIT: u64 = 1_000;

fn log(limit: u64, window: Duration) -> SlidingLog {
    SlidingLog::new(tollgate::Quota::new(limit, window).unwrap()).unwrap()
}

/// The weight of call `j` of thread `i`: one in four is 2, staggered across threads.
fn weight(i: usize, j: usize) -> u64 {
    if (i + j) % 4 == 3 {
        2
    } else {
        1
    }
}

/// Runs `body(thread)` on `threads` threads released together; returns their results in
/// thread order.
fn together<R: Send>(threads: usize, body: impl Fn(usize) -> R + Sync) -> Vec<R> {
    let barrier = Barrier::new(threads);
    thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|i| {
                let (barrier, body) = (&barrier, &body);
                scope.spawn(move || {
                    barrier.wait();
                    body(i)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    })
}

/// Asserts the admissions `(weight, decision)` at one frozen instant are a sequence counting down
/// from `limit` and add up to exactly `limit`.
fn assert_exact(admitted: &mut [(u64, Decision)], limit: u64, name: &str) {
    admitted.sort_by_key(|(_, d)| std::cmp::Reverse(d.remaining()));
    let mut so_far = 0;
    for &(cost, d) in admitted.iter() {
        so_far += cost;
        assert_eq!(
            d.remaining(),
            limit - so_far,
            "{name}: admissions are not a sequence: weight {cost} left {} after {so_far}",
            d.remaining()
        );
    }
    assert_eq!(so_far, limit, "{name}: admitted weight");
}

#[test]
fn direct_frozen_clock_admits_exactly_the_limit() {
    for threads in [8, 16] {
        for rep in 0..REPS {
            let name = format!("{threads} threads, run {rep}");
            let clock = ManualClock::starting_at(Timestamp::from_nanos(T0));
            let limiter = LogLimiter::with_clock(log(LIMIT, Duration::from_secs(60)), clock);
            let results = together(threads, |i| {
                let mut admitted = Vec::new();
                for j in 0..CALLS {
                    let cost = weight(i, j);
                    let d = limiter.check_n(cost).unwrap();
                    if d.is_allowed() {
                        admitted.push((cost, d));
                    } else {
                        // Refused while full: the oldest unit (all are at T0) leaves in 60 s.
                        assert_eq!(d.retry_after(), Duration::from_secs(60), "{name}");
                    }
                }
                admitted
            });
            let mut admitted: Vec<_> = results.into_iter().flatten().collect();
            assert_exact(&mut admitted, LIMIT, &name);
            assert_eq!(limiter.peek().remaining(), 0, "{name}");
        }
    }
}

/// Light rounds (a few weight-1 requests per thread, all of which fit) and heavy rounds (far
/// more than the limit, mixed weights) at uneven steps (a nanosecond, fractions of the window,
/// exactly one window, more): each round admits exactly the smaller of its demand and the room
/// the earlier rounds' units leave in the window, `(t - w, t]`.
#[test]
fn direct_moving_clock_admits_what_the_window_leaves() {
    const LIGHT_CALLS: usize = 10;
    let window = 10 * SEC;
    // (step before the round, light?)
    let schedule = [
        (0, false),
        (10 * SEC, true), // exactly one window on: the first round's units have just left
        (3 * SEC, false),
        (7 * SEC, false),
        (1, true),
        (4 * SEC, false),
        (25 * SEC, true),
        (9 * SEC + 1, false),
        (2 * SEC, false),
    ];
    for threads in [8, 16] {
        let clock = ManualClock::starting_at(Timestamp::from_nanos(T0));
        let limiter = LogLimiter::with_clock(log(LIMIT, Duration::from_nanos(window)), clock.clone());
        let barrier = Barrier::new(threads + 1);
        let mut now = T0;
        let mut times = Vec::new();
        let per_thread: Vec<Vec<(u64, u64)>> = thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|i| {
                    let (limiter, barrier) = (&limiter, &barrier);
                    scope.spawn(move || {
                        let mut per_round = Vec::new(); // (demand, admitted)
                        for &(_, light) in &schedule {
                            barrier.wait();
                            let costs: Vec<u64> = if light {
                                vec![1; LIGHT_CALLS]
                            } else {
                                (0..CALLS / 4).map(|j| weight(i, j)).collect()
                            };
                            let admitted = costs
                                .iter()
                                .filter(|&&cost| limiter.check_n(cost).unwrap().is_allowed())
                                .sum();
                            per_round.push((costs.iter().sum(), admitted));
                            barrier.wait();
                        }
                        per_round
                    })
                })
                .collect();
            for &(step, _) in &schedule {
                now += step;
                clock.set(Timestamp::from_nanos(now));
                times.push(now);
                barrier.wait(); // release the round
                barrier.wait(); // every worker is done
            }
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let mut admitted_at: Vec<(u64, u64)> = Vec::new();
        for (r, &time) in times.iter().enumerate() {
            let demand: u64 = per_thread.iter().map(|rounds| rounds[r].0).sum();
            let admitted: u64 = per_thread.iter().map(|rounds| rounds[r].1).sum();
            let carried: u64 = admitted_at
                .iter()
                .filter(|&&(earlier, _)| time - earlier < window)
                .map(|&(_, weight)| weight)
                .sum();
            let name = format!("{threads} threads, round {r} at +{} ns", time - T0);
            assert_eq!(admitted, demand.min(LIMIT - carried), "{name}");
            admitted_at.push((time, admitted));
        }
        let admitted: Vec<u64> = admitted_at.iter().map(|&(_, weight)| weight).collect();
        assert!(admitted.contains(&LIMIT), "{admitted:?}");
        assert!(
            admitted
                .iter()
                .any(|&w| w > 0 && w < LIMIT && w != (threads * LIGHT_CALLS) as u64),
            "{admitted:?}"
        );
    }
}

type Keyed = KeyedLogLimiter<u64, ManualClock>;

fn keyed(limit: u64, capacity: usize) -> Keyed {
    let clock = ManualClock::starting_at(Timestamp::from_nanos(T0));
    KeyedLogLimiter::with_clock(log(limit, Duration::from_secs(60)), capacity, clock).unwrap()
}

/// Every `(key, weight, decision)` of every thread, each thread asking for `plan(thread)`.
fn run_keyed(
    limiter: &Keyed,
    threads: usize,
    plan: impl Fn(usize) -> Vec<(u64, u64)> + Sync,
) -> Vec<(u64, u64, Decision)> {
    together(threads, |i| {
        plan(i)
            .into_iter()
            .map(|(key, cost)| (key, cost, limiter.check_n(&key, cost).unwrap()))
            .collect::<Vec<_>>()
    })
    .into_iter()
    .flatten()
    .collect()
}

fn admitted_per_key(decisions: &[(u64, u64, Decision)]) -> HashMap<u64, Vec<(u64, Decision)>> {
    let mut per_key: HashMap<u64, Vec<(u64, Decision)>> = HashMap::new();
    for &(key, cost, d) in decisions {
        let entry = per_key.entry(key).or_default();
        if d.outcome() == Outcome::Allowed {
            entry.push((cost, d));
        }
    }
    per_key
}

/// Threads share 24 keys, each asked for far more than its limit by several threads: every key
/// admits exactly its limit, and the table holds exactly 24 keys.
#[test]
fn keyed_shared_keys_admit_exactly_the_limit_each() {
    const KEYS: u64 = 24;
    for threads in [8, 16] {
        for rep in 0..REPS / 2 {
            let name = format!("{threads} threads, run {rep}");
            let limiter = keyed(20, 64);
            let decisions = run_keyed(&limiter, threads, |i| {
                (0..CALLS)
                    .map(|j| ((i as u64 * 7 + j as u64) % KEYS, weight(i, j)))
                    .collect()
            });
            assert!(
                decisions
                    .iter()
                    .all(|(_, _, d)| d.outcome() != Outcome::TableFull),
                "{name}"
            );
            for (key, mut admitted) in admitted_per_key(&decisions) {
                assert_exact(&mut admitted, 20, &format!("{name}, key {key}"));
            }
            assert_eq!(limiter.len(), KEYS as usize, "{name}");
        }
    }
}

/// Every thread asks for the same new key at once: one entry, exactly the limit admitted.
#[test]
fn keyed_same_new_key_is_inserted_once() {
    for threads in [8, 16] {
        for rep in 0..REPS * 2 {
            let name = format!("{threads} threads, run {rep}");
            let limiter = keyed(5, 4);
            let decisions = run_keyed(&limiter, threads, |i| {
                (0..8).map(|j| (42, weight(i, j))).collect()
            });
            let mut admitted = admitted_per_key(&decisions).remove(&42).unwrap_or_default();
            assert_exact(&mut admitted, 5, &name);
            assert_eq!(limiter.len(), 1, "{name}");
        }
    }
}

/// A table for 4 keys (6 slots) and 40 keys asked for at one frozen instant, so nothing is idle:
/// a key either got a slot and admitted exactly its limit, or got none and every answer was
/// `TableFull` (`WhenFull::Refuse`) or untracked (`WhenFull::Admit`); exactly `slots()` keys
/// got in.
#[test]
fn keyed_full_table_refuses_or_admits_untracked_but_never_overcounts() {
    for policy in [WhenFull::Refuse, WhenFull::Admit] {
        for threads in [8, 16] {
            let name = format!("{policy:?}, {threads} threads");
            let limiter = keyed(3, 4).when_full(policy);
            let decisions = run_keyed(&limiter, threads, |i| {
                (0..200).map(|j| (((i * 13 + j) % 40) as u64, 1)).collect()
            });
            let mut tracked = 0;
            for key in 0..40u64 {
                let answers: Vec<_> = decisions
                    .iter()
                    .filter(|(k, _, _)| *k == key)
                    .map(|(_, _, d)| *d)
                    .collect();
                let counted = answers
                    .iter()
                    .filter(|d| matches!(d.outcome(), Outcome::Allowed | Outcome::Denied))
                    .count();
                if counted > 0 {
                    tracked += 1;
                    assert_eq!(
                        counted,
                        answers.len(),
                        "{name}: key {key} was both tracked and not"
                    );
                    let mut admitted: Vec<_> = answers
                        .iter()
                        .filter(|d| d.outcome() == Outcome::Allowed)
                        .map(|d| (1, *d))
                        .collect();
                    assert_exact(&mut admitted, 3, &format!("{name}, key {key}"));
                } else {
                    let expected = match policy {
                        WhenFull::Refuse => Outcome::TableFull,
                        WhenFull::Admit => Outcome::AllowedUntracked,
                        other => panic!("a policy this test does not know: {other:?}"),
                    };
                    assert!(
                        answers.iter().all(|d| d.outcome() == expected),
                        "{name}: key {key}"
                    );
                }
            }
            // Nothing is idle at one instant, and one shard of 6 slots is in every key's reach: all fill.
            assert_eq!(tracked, limiter.slots(), "{name}");
            assert_eq!(limiter.len(), tracked, "{name}");
        }
    }
}

/// A new key's heavy first request records its units (O(weight)) under its own log's lock only:
/// the shard's insert lock, which every new key of the shard takes, is released once the key
/// holds its slot. A weight-1 request for another new key, made while a weight-2^23 one records,
/// must not wait for it. The table has one shard of 2,000 slots; the light key's probe passes the
/// heavy key's slot (whose lock the recording holds, so that it waits there) only if both keys
/// share a home slot, 1 in 2,000 for a table's random hash seed: of two tables (two seeds), one
/// light request must be fast. (Timed: the heavy request takes about 100 ms in a debug build
/// here, a light one µs; the assertion leaves a factor of 3.)
#[test]
fn a_heavy_first_request_does_not_hold_up_other_new_keys() {
    let limit = 1u64 << 23;
    let log = SlidingLog::new(tollgate::Quota::new(limit, Duration::from_secs(60)).unwrap()).unwrap();
    let round = || {
        let limiter = KeyedLogLimiter::<u64, _>::with_clock(
            log,
            1_400,
            ManualClock::starting_at(Timestamp::from_nanos(T0)),
        )
        .unwrap();
        assert_eq!(limiter.slots(), 2_000);
        thread::scope(|scope| {
            let heavy = scope.spawn(|| {
                let start = std::time::Instant::now();
                assert!(limiter.check_n(&1, limit).unwrap().is_allowed());
                start.elapsed()
            });
            // Let the heavy request take its slot and start recording.
            thread::sleep(Duration::from_millis(10));
            let start = std::time::Instant::now();
            assert!(limiter.check(&2).is_allowed());
            let light = start.elapsed();
            (heavy.join().unwrap(), light)
        })
    };
    let rounds = [round(), round()];
    assert!(
        rounds.iter().any(|&(heavy, light)| light * 3 < heavy),
        "a weight-1 request for a new key waited while a heavy one recorded: (heavy, light) {rounds:?}"
    );
}
