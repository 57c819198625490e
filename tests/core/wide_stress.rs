//! Many OS threads hammering the 128-bit state of the windows and of the buckets (token bucket
//! and shaper) at a rate whole nanoseconds cannot hold: a `DirectLimiter`'s 16-byte cell (one compare-and-swap loop)
//! and a `KeyedLimiter`'s locked table (a short lock per key), on a frozen `ManualClock`.
//!
//! With time frozen a window admits exactly its limit, and a bucket its burst, whatever the
//! requests: threads keep
//! asking (weights 1 and 2, or large shares of a `u32::MAX` limit) until nothing more fits, so
//! the admitted weight must be *exactly* the limit on every run (two threads admitted on the
//! same state would show as too many; a lost update as too few, once the last request is
//! refused). The admitted decisions must also be linearizable: sorted by `remaining`, each is
//! the limit less the weight admitted up to and including it. The machine may have only two
//! cores, so many threads also means many preemptions inside a decision.

use std::sync::{Arc, Barrier};
use std::thread;

use tollgate::algorithm::Algorithm;
use tollgate::{
    Decision, DirectLimiter, FixedWindow, KeyedLimiter, LeakyBucket, ManualClock, Quota, SlidingWindow,
    Timestamp, TokenBucket,
};

const SEC: u64 = 1_000_000_000;
/// A minute boundary plus 15 s and a few ns: inside a second, a quarter into a minute.
const T0: u64 = 1_700_000_040 * SEC + 15 * SEC + 7;
/// Runs of each scenario.
const REPS: usize = 20;
/// A window of 2 ns: its index takes 63 bits of a word, so every limit of it is wide. Time is
/// frozen here, so the window's length does not matter to what is admitted.
const TWO_NS: std::time::Duration = std::time::Duration::from_nanos(2);

fn per_two_ns(limit: u64) -> Quota {
    Quota::new(limit, TWO_NS).unwrap()
}

fn quota(text: &str) -> Quota {
    text.parse().unwrap()
}

/// The admissions of one run, `(weight, decision)`, sorted by `remaining` from the largest:
/// each must leave the limit less the weight admitted up to and including it, and all together
/// the whole limit when `exhausted` (the run went on until nothing more fitted).
fn assert_linearizable(admitted: &mut [(u64, Decision)], limit: u64, exhausted: bool, name: &str) -> u64 {
    admitted.sort_by_key(|(_, decision)| std::cmp::Reverse(decision.remaining()));
    let mut so_far = 0;
    for &(cost, decision) in admitted.iter() {
        so_far += cost;
        assert_eq!(
            decision.remaining(),
            limit - so_far,
            "{name}: weight {cost} left {} after {so_far} admitted",
            decision.remaining()
        );
    }
    if exhausted {
        assert_eq!(so_far, limit, "{name}: admitted weight");
    }
    so_far
}

/// `threads` threads each ask `calls` times for `weight(thread, call)` units of `algorithm` at
/// one frozen instant through one direct limiter; returns every admission.
fn direct_run<A: Algorithm + Copy + Send + 'static>(
    algorithm: A,
    threads: usize,
    calls: usize,
    weight: fn(usize, usize) -> u64,
) -> (Vec<(u64, Decision)>, u128) {
    let limiter = Arc::new(DirectLimiter::with_clock(
        algorithm,
        ManualClock::starting_at(Timestamp::from_nanos(T0)),
    ));
    let barrier = Arc::new(Barrier::new(threads));
    let workers: Vec<_> = (0..threads)
        .map(|i| {
            let (limiter, barrier) = (Arc::clone(&limiter), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                (0..calls)
                    .map(|j| {
                        let cost = weight(i, j);
                        (cost, limiter.check_n(cost).expect("weights within the limit"))
                    })
                    .filter(|(_, decision)| decision.is_allowed())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let admitted = workers
        .into_iter()
        .flat_map(|worker| worker.join().expect("a worker panicked"))
        .collect();
    (admitted, limiter.raw_state_wide())
}

/// One in four calls weighs 2, staggered across threads.
fn ones_and_twos(i: usize, j: usize) -> u64 {
    if (i + j) % 4 == 3 {
        2
    } else {
        1
    }
}

/// A direct limiter of `algorithm` (wide) under 8 and 16 threads asking for about three times
/// its limit: exactly the limit is admitted, as a sequence, and the final state is the one a
/// sequential run admitting that weight leaves.
fn direct_exactly<A: Algorithm + Copy + Send + 'static>(algorithm: A, name: &str) {
    assert!(algorithm.is_wide(), "{name} must be wide");
    let limit = algorithm.capacity();
    // The units come in any order, weights 1 and 2: the state is the one admitting them all at
    // once leaves.
    let sequential = algorithm.decide_wide(0, Timestamp::from_nanos(T0), limit).state;
    for threads in [8, 16] {
        let calls = usize::try_from(3 * limit).unwrap() / threads;
        for rep in 0..REPS {
            let name = format!("{name}, {threads} threads, run {rep}");
            let (mut admitted, state) = direct_run(algorithm, threads, calls, ones_and_twos);
            assert_linearizable(&mut admitted, limit, true, &name);
            assert_eq!(state, sequential, "{name}: final state");
        }
    }
}

#[test]
fn a_wide_sliding_window_admits_exactly_its_limit() {
    // 2,000 per 2 ns does not fit that window's 64-bit state (no count at all): wide by itself.
    direct_exactly(
        SlidingWindow::new(per_two_ns(2_000)).unwrap(),
        "sliding 2000 per 2 ns",
    );
    direct_exactly(
        SlidingWindow::new(quota("300/min")).unwrap().with_wide_state(),
        "sliding 300/min, wide",
    );
}

#[test]
fn a_wide_fixed_window_admits_exactly_its_limit() {
    direct_exactly(
        FixedWindow::new(per_two_ns(2_000)).unwrap(),
        "fixed 2000 per 2 ns",
    );
    direct_exactly(
        FixedWindow::new(quota("300/min")).unwrap().with_wide_state(),
        "fixed 300/min, wide",
    );
}

#[test]
fn a_wide_token_bucket_admits_exactly_its_burst() {
    direct_exactly(
        TokenBucket::new(quota("300000000/s burst 2000")).unwrap(),
        "token 300000000/s burst 2000",
    );
    direct_exactly(
        TokenBucket::new(
            Quota::new(u64::from(u32::MAX), std::time::Duration::from_millis(1))
                .and_then(|quota| quota.with_burst(1_500))
                .unwrap(),
        )
        .unwrap(),
        "token 4294967295/ms burst 1500",
    );
}

#[test]
fn a_wide_shaper_admits_exactly_its_burst() {
    direct_exactly(
        LeakyBucket::new(quota("300000000/s burst 2000")).unwrap(),
        "shaper 300000000/s burst 2000",
    );
    direct_exactly(
        LeakyBucket::new(
            Quota::new(u64::from(u32::MAX), std::time::Duration::from_millis(1))
                .and_then(|quota| quota.with_burst(1_500))
                .unwrap(),
        )
        .unwrap(),
        "shaper 4294967295/ms burst 1500",
    );
}

/// A wide shaper under 8 threads asking for single units, each waiting at most `max`: with time
/// frozen, the `k`-th unit admitted waits `k` slots rounded up, so exactly the units whose wait
/// fits pass, `min(burst, floor(max * count / period) + 1)` of them, each told its own slot.
#[test]
fn a_wide_shaper_admits_exactly_the_waits_within_a_maximum() {
    let (count, period, burst) = (u64::from(u32::MAX), SEC, 3_000u64);
    let shaper = LeakyBucket::new(
        Quota::new(count, std::time::Duration::from_nanos(period))
            .and_then(|quota| quota.with_burst(burst))
            .unwrap(),
    )
    .unwrap();
    assert!(shaper.is_wide());
    for (max, rep) in [77u64, 250, 5_000]
        .into_iter()
        .flat_map(|max| (0..REPS / 2).map(move |rep| (max, rep)))
    {
        let limiter = Arc::new(DirectLimiter::with_clock(
            shaper,
            ManualClock::starting_at(Timestamp::from_nanos(T0)),
        ));
        let barrier = Arc::new(Barrier::new(8));
        let workers: Vec<_> = (0..8)
            .map(|_| {
                let (limiter, barrier) = (Arc::clone(&limiter), Arc::clone(&barrier));
                thread::spawn(move || {
                    barrier.wait();
                    (0..600)
                        .map(|_| {
                            limiter
                                .check_n_within(1, std::time::Duration::from_nanos(max))
                                .expect("one unit fits")
                        })
                        .filter(Decision::is_allowed)
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut admitted: Vec<_> = workers
            .into_iter()
            .flat_map(|worker| worker.join().expect("a worker panicked"))
            .map(|decision| (1, decision))
            .collect();
        let fit =
            burst.min(u64::try_from(u128::from(max) * u128::from(count) / u128::from(period)).unwrap() + 1);
        let name = format!("shaper within {max} ns, run {rep}");
        assert_eq!(
            assert_linearizable(&mut admitted, burst, false, &name),
            fit,
            "{name}"
        );
        for (k, (_, decision)) in admitted.iter().enumerate() {
            let slot = (k as u128 * u128::from(period)).div_ceil(u128::from(count));
            assert_eq!(decision.delay().as_nanos(), slot, "{name}: unit {k}");
        }
    }
}

/// A token bucket of `u32::MAX` per second, burst `u32::MAX`, asked for in large shares: the
/// admitted weight is a sequence, at most a share short of the burst, and the stored TAT (in
/// units of `1 / count` ns) is `now * count` plus a period per unit admitted.
#[test]
fn a_u32_max_token_bucket_counts_every_unit_under_contention() {
    let count = u64::from(u32::MAX);
    fn share(i: usize, j: usize) -> u64 {
        u64::from(u32::MAX) / 100 + ((i * 7 + j) % 5) as u64
    }
    let bucket = TokenBucket::new(Quota::new(count, std::time::Duration::from_secs(1)).unwrap()).unwrap();
    assert!(bucket.is_wide());
    for rep in 0..REPS {
        let (mut admitted, state) = direct_run(bucket, 8, 20, share);
        let total = assert_linearizable(&mut admitted, count, false, &format!("token, run {rep}"));
        assert!(count - total < count / 100 + 5, "run {rep}: {total} admitted");
        assert_eq!(
            state,
            u128::from(T0) * u128::from(count) + u128::from(total) * u128::from(SEC),
            "run {rep}: stored TAT"
        );
    }
}

/// Limits of `u32::MAX` asked for in large shares: every thread asks for a hundredth of the limit
/// plus a few units at a time, so the admitted weight is a sequence up to where the next share
/// no longer fits, and the 32-bit count never carries into the previous count or the index.
#[test]
fn u32_max_limits_count_every_unit_under_contention() {
    let limit = u64::from(u32::MAX);
    fn share(i: usize, j: usize) -> u64 {
        u64::from(u32::MAX) / 100 + ((i * 7 + j) % 5) as u64
    }
    for (name, algorithm) in [
        (
            "sliding",
            SlidingWindow::new(Quota::new(limit, std::time::Duration::from_secs(1)).unwrap()).unwrap(),
        ),
        (
            "sliding, a day",
            SlidingWindow::new(quota("4294967295/d")).unwrap(),
        ),
    ] {
        for rep in 0..REPS {
            let (mut admitted, state) = direct_run(algorithm, 8, 20, share);
            let total = assert_linearizable(&mut admitted, limit, false, &format!("{name}, run {rep}"));
            // At most a share short: the shares are below 1% of the limit plus 4.
            assert!(
                limit - total < limit / 100 + 5,
                "{name}, run {rep}: {total} admitted"
            );
            let stored = tollgate::SlidingWindowState::from_raw_wide(state);
            assert_eq!(stored.current(&algorithm), total, "{name}, run {rep}");
            assert_eq!(stored.previous(&algorithm), 0, "{name}, run {rep}");
            assert_eq!(
                stored.index(&algorithm),
                T0 / (algorithm.window().as_nanos() as u64)
            );
        }
    }
    let fixed = FixedWindow::new(Quota::new(limit, std::time::Duration::from_millis(1)).unwrap()).unwrap();
    for rep in 0..REPS {
        let (mut admitted, state) = direct_run(fixed, 8, 20, share);
        let total = assert_linearizable(&mut admitted, limit, false, &format!("fixed, run {rep}"));
        assert_eq!(
            tollgate::FixedWindowState::from_raw_wide(state).count(&fixed),
            total
        );
    }
}

/// A keyed table of wide states (the locked table): 8 threads share 4 keys, each thread cycling
/// through them; every key admits exactly its limit, as a sequence of its own, and the table
/// holds the 4 keys.
fn keyed_exactly<A: Algorithm + Copy + Send + Sync + 'static>(algorithm: A, name: &str) {
    assert!(algorithm.is_wide(), "{name} must be wide");
    let limit = algorithm.capacity();
    let (threads, keys) = (8usize, 4u64);
    for rep in 0..REPS / 2 {
        let limiter = Arc::new(
            KeyedLimiter::<u64, _, _>::with_clock(
                algorithm,
                16,
                ManualClock::starting_at(Timestamp::from_nanos(T0)),
            )
            .unwrap(),
        );
        let barrier = Arc::new(Barrier::new(threads));
        let calls = usize::try_from(3 * limit * keys).unwrap() / threads;
        let workers: Vec<_> = (0..threads)
            .map(|i| {
                let (limiter, barrier) = (Arc::clone(&limiter), Arc::clone(&barrier));
                thread::spawn(move || {
                    barrier.wait();
                    (0..calls)
                        .map(|j| {
                            let (key, cost) = ((i + j) as u64 % keys, ones_and_twos(i, j));
                            (key, cost, limiter.check_n(&key, cost).expect("within the limit"))
                        })
                        .filter(|(_, _, decision)| decision.is_allowed())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let admitted: Vec<_> = workers
            .into_iter()
            .flat_map(|worker| worker.join().expect("a worker panicked"))
            .collect();
        for key in 0..keys {
            let mut own: Vec<_> = admitted
                .iter()
                .filter(|(k, _, _)| *k == key)
                .map(|&(_, cost, decision)| (cost, decision))
                .collect();
            assert_linearizable(&mut own, limit, true, &format!("{name}, key {key}, run {rep}"));
        }
        assert_eq!(limiter.len(), keys as usize, "{name}, run {rep}");
        assert_eq!(limiter.active(), keys as usize, "{name}, run {rep}");
    }
}

#[test]
fn wide_keyed_windows_admit_exactly_their_limit_per_key() {
    keyed_exactly(
        SlidingWindow::new(per_two_ns(600)).unwrap(),
        "sliding 600 per 2 ns",
    );
    keyed_exactly(FixedWindow::new(per_two_ns(600)).unwrap(), "fixed 600 per 2 ns");
    keyed_exactly(
        SlidingWindow::new(quota("500/min")).unwrap().with_wide_state(),
        "sliding 500/min, wide",
    );
    keyed_exactly(
        TokenBucket::new(quota("300000000/s burst 600")).unwrap(),
        "token 300000000/s burst 600",
    );
    keyed_exactly(
        LeakyBucket::new(quota("300000000/s burst 600")).unwrap(),
        "shaper 300000000/s burst 600",
    );
}

/// One new key asked for by every thread at once: the locked table inserts it once (its
/// insert lock), and it admits exactly its limit.
#[test]
fn one_new_wide_key_raced_by_every_thread_is_inserted_once() {
    let algorithm = SlidingWindow::new(quota("40/s")).unwrap().with_wide_state();
    for rep in 0..REPS * 5 {
        let limiter = Arc::new(
            KeyedLimiter::<str, _, _>::with_clock(
                algorithm,
                4,
                ManualClock::starting_at(Timestamp::from_nanos(T0)),
            )
            .unwrap(),
        );
        let barrier = Arc::new(Barrier::new(8));
        let workers: Vec<_> = (0..8)
            .map(|_| {
                let (limiter, barrier) = (Arc::clone(&limiter), Arc::clone(&barrier));
                thread::spawn(move || {
                    barrier.wait();
                    (0..10).filter(|_| limiter.check("new").is_allowed()).count()
                })
            })
            .collect();
        let admitted: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
        assert_eq!((admitted, limiter.len()), (40, 1), "run {rep}");
    }
}
