//! Many OS threads on one `KeyedLimiter` at a frozen `ManualClock`.
//!
//! With time frozen, every key has a hard ceiling on the weight it may admit (the burst, or the
//! window's limit), and every scenario asks for more than that, ending each thread's requests
//! for a key with a weight-1 request: so every key's admitted weight must be *exactly* its
//! ceiling, on every run. A key charged twice (two members for one key, or a decision applied to
//! a slot another key took) shows as too many; a lost update as too few. The admissions of each
//! key must also be linearizable: sorted by `remaining`, they count down from the ceiling by
//! exactly the weight of each request.
//!
//! Threads start together on a `Barrier`; the machine may have two cores, so 8 to 16 threads
//! also means preemptions in the middle of inserts and settles. A watcher thread reads `len()`
//! throughout.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::Instant;

use crate::keyed_common::{
    fixed_window, fresh_run, leaky_bucket, same_numbers, sliding_window, token_bucket, ts, SplitMix,
    RECOVERY, T0,
};
use tollgate::algorithm::Algorithm;
use tollgate::{Decision, KeyedLimiter, ManualClock, Outcome, TokenBucket, WhenFull};

type Limiter<A> = KeyedLimiter<u64, A, ManualClock>;

fn limiter<A: Algorithm>(algorithm: A, capacity: usize, clock: &ManualClock) -> Limiter<A> {
    KeyedLimiter::with_clock(algorithm, capacity, clock.clone()).unwrap()
}

/// One request through the public API: `check` for weight 1, `check_n` otherwise.
fn request<A: Algorithm>(limiter: &Limiter<A>, key: u64, cost: u64) -> Decision {
    if cost == 1 {
        limiter.check(&key)
    } else {
        limiter.check_n(&key, cost).expect("weights stay within capacity")
    }
}

/// Runs `body` while a watcher thread samples `limiter.len()` as fast as it can; returns what
/// `body` returned and the largest length seen (and how many samples were taken).
fn watching_len<A: Algorithm, R>(limiter: &Limiter<A>, body: impl FnOnce() -> R) -> (R, usize, usize) {
    let stop = AtomicBool::new(false);
    thread::scope(|scope| {
        let watcher = scope.spawn(|| {
            let (mut max, mut samples) = (0, 0);
            while !stop.load(Ordering::Relaxed) {
                max = max.max(limiter.len());
                samples += 1;
                thread::yield_now();
            }
            (max.max(limiter.len()), samples + 1)
        });
        let result = body();
        stop.store(true, Ordering::Relaxed);
        let (max, samples) = watcher.join().unwrap();
        (result, max, samples)
    })
}

/// `plans[i]` is thread `i`'s list of `(key, cost)` requests. All threads are released together
/// on a barrier; returns every `(key, cost, decision)`, over all threads, and the largest
/// `len()` any of them read: each reads it after every request, as well as a watcher thread
/// that reads it as fast as it can.
fn run_plans<A: Algorithm>(
    limiter: &Limiter<A>,
    plans: &[Vec<(u64, u64)>],
) -> (Vec<(u64, u64, Decision)>, usize) {
    let barrier = Barrier::new(plans.len());
    let ((decisions, seen), watched, _) = watching_len(limiter, || {
        thread::scope(|scope| {
            let workers: Vec<_> = plans
                .iter()
                .map(|plan| {
                    let barrier = &barrier;
                    scope.spawn(move || {
                        let mut out = Vec::with_capacity(plan.len());
                        let mut max_len = 0;
                        barrier.wait();
                        for (n, &(key, cost)) in plan.iter().enumerate() {
                            out.push((key, cost, request(limiter, key, cost)));
                            max_len = max_len.max(limiter.len());
                            if n % 16 == 0 {
                                // Peeks interleaved with the writes never change anything.
                                let _ = limiter.peek(&key);
                            }
                        }
                        (out, max_len)
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).fold(
                (Vec::new(), 0),
                |(mut all, max), (out, seen)| {
                    all.extend(out);
                    (all, max.max(seen))
                },
            )
        })
    });
    (decisions, seen.max(watched))
}

/// Every decision is `Allowed` or `Denied` (the table had room), and for every key the admitted
/// weight is exactly `ceiling` and linearizable: sorted by `remaining`, each admission leaves the
/// ceiling minus the weight admitted up to and including it. Refusals leave less than they ask.
/// Returns the keys seen.
fn assert_exact_per_key(decisions: &[(u64, u64, Decision)], ceiling: u64, name: &str) -> usize {
    let mut admitted: HashMap<u64, Vec<(u64, Decision)>> = HashMap::new();
    for &(key, cost, d) in decisions {
        match d.outcome() {
            Outcome::Allowed => admitted.entry(key).or_default().push((cost, d)),
            Outcome::Denied => {
                admitted.entry(key).or_default();
                assert!(
                    d.remaining() < cost,
                    "{name}: key {key} refused weight {cost} with {} remaining",
                    d.remaining()
                );
            }
            other => panic!("{name}: key {key} got {other:?} from a table with room: {d:?}"),
        }
    }
    for (key, list) in &mut admitted {
        let total: u64 = list.iter().map(|(c, _)| c).sum();
        assert_eq!(total, ceiling, "{name}: admitted weight of key {key}");
        list.sort_by_key(|(_, d)| std::cmp::Reverse(d.remaining()));
        let mut so_far = 0;
        for (cost, d) in list.iter() {
            so_far += cost;
            assert_eq!(
                d.remaining(),
                ceiling - so_far,
                "{name}: key {key}'s admissions are not a sequence (weight {cost} after {so_far})"
            );
        }
    }
    admitted.len()
}

/// What a key that has admitted exactly its ceiling at `now` is told for one more unit.
fn exhausted<A: Algorithm>(algorithm: &A, ceiling: u64) -> Decision {
    let mut costs = vec![1; ceiling as usize];
    costs.push(1);
    fresh_run(algorithm, ts(T0), &costs)[ceiling as usize]
}

// ---------------------------------------------------------------------------------------------
// Hot and cold keys
// ---------------------------------------------------------------------------------------------

/// Units each key may admit in the hot/cold runs.
const LIMIT: u64 = 32;
const HOT: u64 = 4;
const COLD: u64 = 400;
/// Runs of each hot/cold scenario (per thread count).
const REPS: u64 = 10;
/// Requests per hot key per thread; one in four weighs 2.
const HOT_CALLS: u64 = 20;
/// Each cold key is asked for by three threads, `COLD_CALLS` units each: 33 > `LIMIT`.
const COLD_CALLS: u64 = 11;

/// Thread `i`'s plan: its cold keys in ascending order (so the three threads that share a cold
/// key reach it at about the same time and race to insert it), `COLD_CALLS` weight-1 requests
/// each, with the hot keys' requests scattered among them, each thread's last request for a hot
/// key weighing 1.
fn hot_cold_plan(i: u64, threads: u64, rng: &mut SplitMix) -> Vec<(u64, u64)> {
    let owners = |j: u64| {
        [
            j % threads,
            (j + threads / 3) % threads,
            (j + 2 * threads / 3) % threads,
        ]
    };
    let mut hot: Vec<(u64, u64)> = (0..HOT * HOT_CALLS)
        .map(|n| (n % HOT, if (i + n) % 4 == 3 { 2 } else { 1 }))
        .collect();
    rng.shuffle(&mut hot);
    for key in 0..HOT {
        let last = hot.iter().rposition(|&(k, _)| k == key).unwrap();
        hot[last].1 = 1;
    }
    let cold: Vec<u64> = (0..COLD).filter(|&j| owners(j).contains(&i)).collect();
    // One hot request about every `stride` cold ones, at random points.
    let stride = (cold.len() as u64 * COLD_CALLS).div_ceil(hot.len() as u64);
    let mut plan = Vec::new();
    let mut hot = hot.into_iter();
    for j in cold {
        for _ in 0..COLD_CALLS {
            plan.push((HOT + j, 1));
            if rng.next_u64().is_multiple_of(stride) {
                plan.extend(hot.next());
            }
        }
    }
    plan.extend(hot);
    plan
}

fn hot_and_cold<A: Algorithm + Copy + Debug>(algorithm: A, name: &str) {
    assert_eq!(algorithm.capacity(), LIMIT);
    let keys = (HOT + COLD) as usize;
    let done = exhausted(&algorithm, LIMIT);
    for threads in [8, 16] {
        assert!(
            (0..COLD).all(|j| {
                let o = [
                    j % threads,
                    (j + threads / 3) % threads,
                    (j + 2 * threads / 3) % threads,
                ];
                o[0] != o[1] && o[1] != o[2] && o[0] != o[2]
            }),
            "three distinct owners per cold key"
        );
        let mut max_len = 0;
        for rep in 0..REPS {
            let name = format!("{name}, {threads} threads, run {rep}");
            let mut rng = SplitMix(rep * 1000 + threads);
            let plans: Vec<_> = (0..threads)
                .map(|i| hot_cold_plan(i, threads, &mut rng))
                .collect();
            let clock = ManualClock::starting_at(ts(T0));
            // Exactly as many keys as the table is built for.
            let limiter = limiter(algorithm, keys, &clock);
            let (decisions, max) = run_plans(&limiter, &plans);
            assert!(
                max <= keys,
                "{name}: len() read {max} during the run, capacity {keys}"
            );
            max_len = max_len.max(max);
            assert_eq!(assert_exact_per_key(&decisions, LIMIT, &name), keys, "{name}");
            assert_eq!(limiter.len(), keys, "{name}: one entry per distinct key");
            for key in 0..HOT + COLD {
                assert_eq!(limiter.peek(&key), done, "{name}: key {key} after the run");
            }
            assert_eq!(limiter.len(), keys, "{name}: peeks insert nothing");
        }
        eprintln!("{name}, {threads} threads: largest len() seen during runs {max_len} of {keys}");
    }
}

#[test]
fn hot_and_cold_keys_token_bucket() {
    hot_and_cold(token_bucket(LIMIT), "token bucket");
}

#[test]
fn hot_and_cold_keys_leaky_bucket() {
    hot_and_cold(leaky_bucket(LIMIT), "leaky bucket");
}

#[test]
fn hot_and_cold_keys_fixed_window() {
    hot_and_cold(fixed_window(LIMIT), "fixed window");
}

#[test]
fn hot_and_cold_keys_sliding_window() {
    hot_and_cold(sliding_window(LIMIT), "sliding window");
}

// ---------------------------------------------------------------------------------------------
// Many threads inserting the same new key
// ---------------------------------------------------------------------------------------------

/// Units per key in the insert races.
const RACE_LIMIT: u64 = 8;

/// `threads` threads, released together, each asking for the same new key `RACE_LIMIT + 2`
/// times: one entry, exactly `RACE_LIMIT` admitted, whatever the table's size (a table for one
/// key has two slots, so the racing claims fight over both).
fn same_new_key<A: Algorithm + Copy + Debug>(algorithm: A, name: &str) {
    for capacity in [1, 64] {
        for threads in [2, 3, 4, 8, 16] {
            let reps = if threads <= 4 { 60 } else { 20 };
            for rep in 0..reps {
                let name = format!("{name}, capacity {capacity}, {threads} threads, run {rep}");
                let clock = ManualClock::starting_at(ts(T0));
                let limiter = limiter(algorithm, capacity, &clock);
                let key = 0xdead_beef ^ rep;
                let plans = vec![vec![(key, 1); RACE_LIMIT as usize + 2]; threads];
                let (decisions, max) = run_plans(&limiter, &plans);
                assert!(max <= 1, "{name}: len() read {max}");
                assert_eq!(assert_exact_per_key(&decisions, RACE_LIMIT, &name), 1);
                assert_eq!(limiter.len(), 1, "{name}: one entry for one key");
            }
        }
    }
}

#[test]
fn same_new_key_token_bucket() {
    same_new_key(token_bucket(RACE_LIMIT), "token bucket");
}

#[test]
fn same_new_key_leaky_bucket() {
    same_new_key(leaky_bucket(RACE_LIMIT), "leaky bucket");
}

#[test]
fn same_new_key_fixed_window() {
    same_new_key(fixed_window(RACE_LIMIT), "fixed window");
}

#[test]
fn same_new_key_sliding_window() {
    same_new_key(sliding_window(RACE_LIMIT), "sliding window");
}

/// 16 threads walk the same new keys in the same order, one request each per key, so every
/// key's first insert is raced by many threads, next to other keys' races in the same chains.
/// The table is built for exactly that many keys: none is refused for room, every key admits
/// exactly `RACE_LIMIT`, and there is one entry per key.
fn same_order<A: Algorithm + Copy + Debug>(algorithm: A, name: &str) {
    const THREADS: usize = 16;
    for keys in [1u64, 2, 3, 4, 8, 64, 256] {
        let reps = if keys <= 8 { 30 } else { 5 };
        for rep in 0..reps {
            let name = format!("{name}, {keys} keys in a table for {keys}, run {rep}");
            let clock = ManualClock::starting_at(ts(T0));
            let limiter = limiter(algorithm, keys as usize, &clock);
            let plan: Vec<(u64, u64)> = (0..keys).map(|k| (k * 7919 + rep, 1)).collect();
            let plans = vec![plan; THREADS];
            let (decisions, max) = run_plans(&limiter, &plans);
            assert!(max <= keys as usize, "{name}: len() read {max}");
            // 16 requests per key, RACE_LIMIT admitted.
            assert_eq!(assert_exact_per_key(&decisions, RACE_LIMIT, &name), keys as usize);
            assert_eq!(limiter.len(), keys as usize, "{name}");
        }
    }
}

#[test]
fn same_order_new_keys_token_bucket() {
    same_order(token_bucket(RACE_LIMIT), "token bucket");
}

#[test]
fn same_order_new_keys_leaky_bucket() {
    same_order(leaky_bucket(RACE_LIMIT), "leaky bucket");
}

#[test]
fn same_order_new_keys_fixed_window() {
    same_order(fixed_window(RACE_LIMIT), "fixed window");
}

#[test]
fn same_order_new_keys_sliding_window() {
    same_order(sliding_window(RACE_LIMIT), "sliding window");
}

/// The same race, while other keys churn through the table around it: besides walking the
/// counted keys in the same order (one request each per thread, 16 per key), every thread sends
/// two requests of weight 0 for keys of its own after each one. Weight 0 leaves a key idle, so
/// those keys are reclaimed for one another all the time, and so is a counted key's fresh entry
/// before its first charge: the slots a racing insert sees as free keep changing under it. Each
/// counted key still admits exactly `RACE_LIMIT`, is never refused for room (the keys with debt
/// and the claims in flight never fill the table), and is held once at the end.
fn inserts_amid_churn<A: Algorithm + Copy + Debug>(algorithm: A, name: &str) {
    const THREADS: u64 = 16;
    const COUNTED: u64 = 64;
    for rep in 0..20u64 {
        let name = format!("{name}, run {rep}");
        let clock = ManualClock::starting_at(ts(T0));
        // Room for every counted key and one claim in flight per thread.
        let limiter = limiter(algorithm, (COUNTED + THREADS) as usize, &clock);
        let counted = |k: u64| (k << 8) | rep;
        let plans: Vec<Vec<(u64, u64)>> = (0..THREADS)
            .map(|i| {
                (0..COUNTED)
                    .flat_map(|k| {
                        let churn = |n: u64| (1 << 63) | (i << 40) | (k << 2) | n;
                        [(counted(k), 1), (churn(0), 0), (churn(1), 0)]
                    })
                    .collect()
            })
            .collect();
        let (decisions, max) = run_plans(&limiter, &plans);
        assert!(max <= limiter.slots(), "{name}: len() read {max}");
        let (counted_decisions, churn): (Vec<_>, Vec<_>) =
            decisions.into_iter().partition(|&(key, _, _)| key >> 63 == 0);
        assert_eq!(
            assert_exact_per_key(&counted_decisions, RACE_LIMIT, &name),
            COUNTED as usize
        );
        for (key, _, d) in churn {
            assert!(
                matches!(d.outcome(), Outcome::Allowed | Outcome::TableFull),
                "{name}: churn key {key:#x}: {d:?}"
            );
        }
        let done = exhausted(&algorithm, RACE_LIMIT);
        for k in 0..COUNTED {
            assert_eq!(limiter.peek(&counted(k)), done, "{name}: counted key {k}");
        }
        let len = limiter.len();
        assert!(
            len >= COUNTED as usize && len <= limiter.slots(),
            "{name}: {len} entries"
        );
    }
}

#[test]
fn inserts_amid_churn_token_bucket() {
    inserts_amid_churn(token_bucket(RACE_LIMIT), "token bucket");
}

#[test]
fn inserts_amid_churn_leaky_bucket() {
    inserts_amid_churn(leaky_bucket(RACE_LIMIT), "leaky bucket");
}

#[test]
fn inserts_amid_churn_fixed_window() {
    inserts_amid_churn(fixed_window(RACE_LIMIT), "fixed window");
}

#[test]
fn inserts_amid_churn_sliding_window() {
    inserts_amid_churn(sliding_window(RACE_LIMIT), "sliding window");
}

/// 16 threads insert 65,536 distinct keys at once, one request each, into a table built for
/// exactly that many, with a limit of one per hour. A key's entry is idle from its promotion to
/// its first charge, so another new key may take its slot in between: the first key's decision
/// must then fail and look again, never land on the newcomer's entry. So every key is admitted
/// exactly once (a charge that landed on another key would show as that key refused at its
/// first request), and asked again, every key is refused.
#[test]
fn every_first_charge_lands_on_its_own_key() {
    const THREADS: u64 = 16;
    const KEYS: u64 = 1 << 16;
    for rep in 0..3u64 {
        let clock = ManualClock::starting_at(ts(T0));
        let limiter = limiter(one_per_hour(), KEYS as usize, &clock);
        let plans: Vec<Vec<(u64, u64)>> = (0..THREADS)
            .map(|i| {
                (0..KEYS / THREADS)
                    .map(|n| ((n * THREADS + i) ^ (rep << 32), 1))
                    .collect()
            })
            .collect();
        let (decisions, max) = run_plans(&limiter, &plans);
        assert!(max <= KEYS as usize, "run {rep}: len() read {max}");
        assert_eq!(
            assert_exact_per_key(&decisions, 1, &format!("run {rep}")),
            KEYS as usize
        );
        assert_eq!(limiter.len(), KEYS as usize);
        let (again, _) = run_plans(&limiter, &plans);
        for (key, _, d) in again {
            assert_eq!(
                d.outcome(),
                Outcome::Denied,
                "run {rep}: key {key:#x} asked again"
            );
        }
        assert_eq!(limiter.len(), KEYS as usize);
    }
}

// ---------------------------------------------------------------------------------------------
// Idle keys make room for new ones
// ---------------------------------------------------------------------------------------------

/// Units per key in the small-table scenarios.
const SMALL_LIMIT: u64 = 4;
/// The small table: built for 64 keys (92 slots, one shard).
const SMALL: usize = 64;
const WAVE_THREADS: usize = 8;

/// Every thread asks once for every key of `keys`, each thread in its own order.
fn wave_plans(keys: &[u64], seed: u64) -> Vec<Vec<(u64, u64)>> {
    (0..WAVE_THREADS as u64)
        .map(|i| {
            let mut plan: Vec<(u64, u64)> = keys.iter().map(|&k| (k, 1)).collect();
            SplitMix(seed * 100 + i).shuffle(&mut plan);
            plan
        })
        .collect()
}

/// A table for 64 keys holds 64 live keys (8 threads, each asking every key once: exactly
/// `SMALL_LIMIT` admitted each). The clock moves past their refill, so all are idle; then a new
/// wave of 64 different keys arrives, together with 8 keys of the first wave coming back. Every
/// new key is admitted exactly `SMALL_LIMIT` (idle keys are reclaimed or empty slots used, never a
/// refusal for room), every returning key gets exactly a fresh key's allowance, never more, and
/// the table never holds more than its slots. Then 30 more waves of new keys go through the same
/// table: memory never grows and nothing is refused.
///
/// During the first wave `len()` stays within the capacity (64 distinct keys). After it, the
/// bound is the slots (92), not the capacity: `len()` counts idle keys not yet reclaimed, and a
/// new key takes the first free slot of its chain, which may be an empty one rather than an idle
/// key's, so up to 92 entries (64 with debt) are expected.
fn idle_reuse<A: Algorithm + Copy + Debug>(algorithm: A, name: &str) {
    for rep in 0..5u64 {
        let name = format!("{name}, run {rep}");
        let clock = ManualClock::starting_at(ts(T0));
        let limiter = limiter(algorithm, SMALL, &clock);
        let slots = limiter.slots();
        let first: Vec<u64> = (0..SMALL as u64).map(|k| 1_000_000 + k).collect();
        let (decisions, max) = run_plans(&limiter, &wave_plans(&first, rep));
        assert!(
            max <= SMALL,
            "{name}: len() read {max} with {SMALL} keys in a table for {SMALL}"
        );
        assert_eq!(assert_exact_per_key(&decisions, SMALL_LIMIT, &name), SMALL);
        assert_eq!(limiter.len(), SMALL, "{name}: first wave");

        let mut now = T0;
        for wave in 1..=30u64 {
            now += u64::try_from(RECOVERY.as_nanos()).unwrap();
            clock.set(ts(now));
            let mut keys: Vec<u64> = (0..SMALL as u64).map(|k| 1_000_000 * (wave + 1) + k).collect();
            // Eight keys of the first wave come back on the second wave.
            let returning: Vec<u64> = if wave == 1 {
                first.iter().copied().step_by(8).collect()
            } else {
                vec![]
            };
            keys.extend(&returning);
            let (decisions, max) = run_plans(&limiter, &wave_plans(&keys, rep * 1000 + wave));
            assert!(
                max <= slots,
                "{name}, wave {wave}: len() read {max}, {slots} slots"
            );
            // Returning keys get exactly a fresh allowance too: never more than fresh.
            let seen = assert_exact_per_key(&decisions, SMALL_LIMIT, &format!("{name}, wave {wave}"));
            assert_eq!(seen, keys.len());
            let len = limiter.len();
            assert!(
                len >= keys.len() && len <= slots,
                "{name}, wave {wave}: {len} entries, {} keys with debt, {slots} slots",
                keys.len()
            );
            // Every key with debt is still held, with exactly its debt.
            let done = fresh_run(&algorithm, ts(now), &[1; SMALL_LIMIT as usize + 1])[SMALL_LIMIT as usize];
            for key in &keys {
                assert_eq!(limiter.peek(key), done, "{name}, wave {wave}: key {key}");
            }
        }
    }
}

#[test]
fn idle_keys_are_reclaimed_token_bucket() {
    idle_reuse(token_bucket(SMALL_LIMIT), "token bucket");
}

#[test]
fn idle_keys_are_reclaimed_leaky_bucket() {
    idle_reuse(leaky_bucket(SMALL_LIMIT), "leaky bucket");
}

#[test]
fn idle_keys_are_reclaimed_fixed_window() {
    idle_reuse(fixed_window(SMALL_LIMIT), "fixed window");
}

#[test]
fn idle_keys_are_reclaimed_sliding_window() {
    idle_reuse(sliding_window(SMALL_LIMIT), "sliding window");
}

// ---------------------------------------------------------------------------------------------
// A table full of keys with debt
// ---------------------------------------------------------------------------------------------

/// Fills a 64-key table: 64 keys by 8 threads at once (each asked 8 times, `SMALL_LIMIT`
/// admitted, so each carries debt), then more keys one at a time until the first refusal for
/// room, which must come exactly when every slot holds a key with debt (one shard of 92 slots,
/// within the probe limit, so a new key is refused only when no slot is empty, dead or idle).
/// Returns the keys.
fn fill_with_debt<A: Algorithm + Copy + Debug>(limiter: &Limiter<A>, name: &str) -> Vec<u64> {
    let mut keys: Vec<u64> = (0..SMALL as u64).map(|k| 5_000 + k).collect();
    let plans: Vec<Vec<(u64, u64)>> = (0..WAVE_THREADS as u64)
        .map(|i| {
            let mut plan: Vec<(u64, u64)> = keys.iter().map(|&k| (k, 1)).collect();
            SplitMix(i).shuffle(&mut plan);
            plan
        })
        .collect();
    let (decisions, max) = run_plans(limiter, &plans);
    assert!(max <= SMALL, "{name}: len() read {max} with {SMALL} keys");
    assert_eq!(assert_exact_per_key(&decisions, SMALL_LIMIT, name), SMALL);
    assert_eq!(limiter.len(), SMALL);
    let algorithm = *limiter.algorithm();
    let mut next = 10_000;
    loop {
        let d = limiter.check_n(&next, SMALL_LIMIT).unwrap();
        match d.outcome() {
            Outcome::Allowed => keys.push(next),
            Outcome::TableFull | Outcome::AllowedUntracked => break,
            Outcome::Denied => panic!("{name}: a new key was denied: {d:?}"),
            other => panic!("{name}: {other:?}"),
        }
        next += 1;
        assert!(keys.len() <= limiter.slots(), "{name}: more keys than slots");
    }
    assert_eq!(
        keys.len(),
        limiter.slots(),
        "{name}: a one-shard table refused a new key before every slot held a key with debt"
    );
    assert_eq!(limiter.len(), keys.len());
    // Every key is charged to its limit.
    let done = exhausted(&algorithm, SMALL_LIMIT);
    for key in &keys {
        assert_eq!(limiter.peek(key), done, "{name}: key {key}");
    }
    keys
}

/// With every slot holding a key with debt, 8 threads bring 200 new keys each: with `Refuse`
/// every one is `TableFull` (not allowed), with `Admit` every one is `AllowedUntracked` (allowed,
/// with a fresh key's numbers, and not stored: asking again gives the same answer). Nothing is
/// inserted (len unchanged), no old key loses its debt. Once the old keys are idle, new keys get
/// in.
fn full_of_debt<A: Algorithm + Copy + Debug>(algorithm: A, name: &str) {
    for policy in [WhenFull::Refuse, WhenFull::Admit] {
        let name = format!("{name}, {policy:?}");
        let clock = ManualClock::starting_at(ts(T0));
        let limiter = limiter(algorithm, SMALL, &clock).when_full(policy);
        assert_eq!(limiter.full_policy(), policy);
        let old = fill_with_debt(&limiter, &name);
        let len = limiter.len();
        let before: Vec<Decision> = old.iter().map(|k| limiter.peek(k)).collect();
        let fresh = fresh_run(&algorithm, ts(T0), &[1])[0];
        let plans: Vec<Vec<(u64, u64)>> = (0..WAVE_THREADS as u64)
            .map(|i| (0..200).map(|n| (1_000_000 + i * 1_000 + n % 100, 1)).collect())
            .collect();
        let (decisions, max) = run_plans(&limiter, &plans);
        assert_eq!(max, len, "{name}: len() moved while nothing could be inserted");
        for (key, _, d) in &decisions {
            match policy {
                WhenFull::Refuse => {
                    assert_eq!(d.outcome(), Outcome::TableFull, "{name}: key {key}: {d:?}");
                    assert!(!d.is_allowed());
                }
                WhenFull::Admit => {
                    assert_eq!(d.outcome(), Outcome::AllowedUntracked, "{name}: key {key}: {d:?}");
                    assert!(d.is_allowed());
                    assert!(
                        same_numbers(d, &fresh),
                        "{name}: {d:?} is not a fresh key's {fresh:?}"
                    );
                }
                other => panic!("a policy this test does not know: {other:?}"),
            }
        }
        assert_eq!(limiter.len(), len, "{name}: nothing was stored");
        // Asked again, a new key gets the same answer: it was not stored (a stored key would now
        // be charged), nor counted.
        for key in 1_000_000..1_000_100 {
            let again = limiter.check(&key);
            match policy {
                WhenFull::Refuse => assert_eq!(again.outcome(), Outcome::TableFull, "{name}: key {key}"),
                WhenFull::Admit => {
                    assert_eq!(again.outcome(), Outcome::AllowedUntracked, "{name}: key {key}");
                    assert!(
                        same_numbers(&again, &fresh),
                        "{name}: key {key} was counted: {again:?}"
                    );
                }
                other => panic!("a policy this test does not know: {other:?}"),
            }
        }
        assert_eq!(limiter.len(), len, "{name}: nothing was stored");
        let after: Vec<Decision> = old.iter().map(|k| limiter.peek(k)).collect();
        assert_eq!(after, before, "{name}: an old key lost its debt");
        for key in &old {
            assert!(!limiter.check(key).is_allowed(), "{name}: key {key}");
        }

        // Once the old keys are idle, their slots are reclaimed for new keys.
        clock.set(ts(T0 + u64::try_from(RECOVERY.as_nanos()).unwrap()));
        for key in 2_000_000..2_000_000 + SMALL as u64 {
            assert_eq!(
                limiter.check(&key).outcome(),
                Outcome::Allowed,
                "{name}: key {key}"
            );
        }
        assert!(limiter.len() <= limiter.slots());
    }
}

#[test]
fn full_of_debt_token_bucket() {
    full_of_debt(token_bucket(SMALL_LIMIT), "token bucket");
}

#[test]
fn full_of_debt_leaky_bucket() {
    full_of_debt(leaky_bucket(SMALL_LIMIT), "leaky bucket");
}

#[test]
fn full_of_debt_fixed_window() {
    full_of_debt(fixed_window(SMALL_LIMIT), "fixed window");
}

#[test]
fn full_of_debt_sliding_window() {
    full_of_debt(sliding_window(SMALL_LIMIT), "sliding window");
}

// ---------------------------------------------------------------------------------------------
// Churn: the length under constant reclaim
// ---------------------------------------------------------------------------------------------

/// 16 threads push distinct keys through tiny tables with requests of weight 0, which leave
/// every key idle, so nearly every insert reclaims another key's slot, often one promoted an
/// instant before. `len()`, read throughout, never exceeds the slots: the count of entries never
/// goes below zero (wrapping to `usize::MAX`), nor above the table's size, whatever order the
/// claims, promotions and reclaims of different threads fall in.
#[test]
fn len_stays_within_the_slots_under_reclaim_churn() {
    const THREADS: u64 = 16;
    for (capacity, reps) in [(1, 10), (2, 10), (4, 10), (64, 3)] {
        for rep in 0..reps {
            let clock = ManualClock::starting_at(ts(T0));
            let limiter = limiter(token_bucket(4), capacity, &clock);
            let slots = limiter.slots();
            let plans: Vec<Vec<(u64, u64)>> = (0..THREADS)
                .map(|i| (0..1_000).map(|n| ((i << 32) | n, 0)).collect())
                .collect();
            let (decisions, max) = run_plans(&limiter, &plans);
            assert!(
                max <= slots,
                "capacity {capacity}, run {rep}: len() read {max} ({max:#x}) with {slots} slots"
            );
            for (key, _, d) in &decisions {
                assert!(
                    matches!(d.outcome(), Outcome::Allowed | Outcome::TableFull),
                    "key {key}: {d:?}"
                );
            }
            assert!(limiter.len() <= slots);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A table for a million keys
// ---------------------------------------------------------------------------------------------

const MILLION: usize = 1_000_000;

/// A bucket of one per hour: one admission leaves a key with debt for an hour.
fn one_per_hour() -> TokenBucket {
    TokenBucket::new(crate::keyed_common::quota("1/h")).unwrap()
}

/// A table built for 1,000,000 keys holds 1,000,000 keys with debt: every one admitted, none
/// refused for room, one entry each; asked again, every key is refused (its state is its own,
/// shared with no other key).
#[test]
fn a_table_for_a_million_keys_holds_a_million() {
    let start = Instant::now();
    let clock = ManualClock::starting_at(ts(T0));
    let limiter = limiter(one_per_hour(), MILLION, &clock);
    let mut counts: HashMap<Outcome, usize> = HashMap::new();
    for key in 0..MILLION as u64 {
        *counts.entry(limiter.check(&key).outcome()).or_default() += 1;
    }
    assert_eq!(counts.get(&Outcome::TableFull), None, "{counts:?}");
    assert_eq!(counts, HashMap::from([(Outcome::Allowed, MILLION)]));
    assert_eq!(limiter.len(), MILLION);
    let inserted = start.elapsed();
    let refused = (0..MILLION as u64)
        .filter(|key| limiter.check(key).outcome() == Outcome::Denied)
        .count();
    assert_eq!(refused, MILLION);
    assert_eq!(limiter.len(), MILLION);
    eprintln!(
        "a million keys: inserted in {inserted:?}, all refused again by {:?} ({} slots)",
        start.elapsed(),
        limiter.slots()
    );
}

/// The same with four threads inserting disjoint quarters at once, and a watcher on `len()`.
#[test]
fn a_table_for_a_million_keys_holds_a_million_inserted_concurrently() {
    const THREADS: u64 = 4;
    let start = Instant::now();
    let clock = ManualClock::starting_at(ts(T0));
    let limiter = limiter(one_per_hour(), MILLION, &clock);
    let barrier = Barrier::new(THREADS as usize);
    let allowed = AtomicUsize::new(0);
    let (outcomes, max, samples) = watching_len(&limiter, || {
        thread::scope(|scope| {
            let workers: Vec<_> = (0..THREADS)
                .map(|i| {
                    let (limiter, barrier, allowed) = (&limiter, &barrier, &allowed);
                    scope.spawn(move || {
                        let mut other = Vec::new();
                        barrier.wait();
                        for key in (i..MILLION as u64).step_by(THREADS as usize) {
                            let d = limiter.check(&key);
                            if d.outcome() == Outcome::Allowed {
                                allowed.fetch_add(1, Ordering::Relaxed);
                            } else {
                                other.push((key, d));
                            }
                        }
                        other
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap())
                .collect::<Vec<_>>()
        })
    });
    assert_eq!(outcomes, vec![], "keys not admitted");
    assert_eq!(allowed.into_inner(), MILLION);
    assert!(max <= MILLION, "len() read {max}");
    assert_eq!(limiter.len(), MILLION);
    eprintln!(
        "a million keys on {THREADS} threads: {:?} ({samples} len() samples)",
        start.elapsed()
    );
}
