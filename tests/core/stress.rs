//! Many OS threads hammering one `DirectLimiter` on a frozen `ManualClock`.
//!
//! With time frozen, every algorithm has a hard ceiling on the weight it may admit (the burst,
//! or the window's limit), and a total requested weight far above it; weight-1 requests keep
//! coming until that ceiling is hit, so the admitted weight must be *exactly* the ceiling on
//! every run (two threads admitted on the same state would show as too many). The admitted
//! decisions must also be linearizable: their `remaining` values, sorted, count down from the
//! capacity by exactly the weight of each request, with no two alike; and the final state word
//! must be the one a sequential run admitting the same weight leaves.
//!
//! Threads start together on a `Barrier`; the machine these run on may have only two cores,
//! so many threads also means many preemptions in the middle of a decision. A second kind of
//! run moves the clock between rounds (by one emission interval, or one window) while the
//! workers are parked at a barrier, and checks every round against a sequential limiter.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::Duration;

use tollgate::algorithm::Algorithm;
use tollgate::{
    Decision, DirectLimiter, FixedWindow, GcraState, LeakyBucket, ManualClock, Quota, SlidingWindow,
    Timestamp, TokenBucket,
};

const SEC: u64 = 1_000_000_000;
/// Runs of each frozen-clock scenario.
const REPS: usize = 50;
/// Calls per thread in a frozen-clock run; one in four weighs 2.
const CALLS: usize = 1_000;
/// A minute boundary (1_700_000_040 s) plus 15 s and a few ns: a quarter into a minute window.
const T0: u64 = 1_700_000_040 * SEC + 15 * SEC + 7;

fn quota(text: &str) -> Quota {
    text.parse().unwrap()
}

fn ns(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap()
}

/// The weight of call `j` of thread `i`: one in four is 2, staggered across threads.
fn weight(i: usize, j: usize) -> u64 {
    if (i + j) % 4 == 3 {
        2
    } else {
        1
    }
}

/// One request through the public API: `check()` for weight 1, `check_n` otherwise.
fn request<A: Algorithm>(limiter: &DirectLimiter<A, ManualClock>, cost: u64) -> Decision {
    if cost == 1 {
        limiter.check()
    } else {
        limiter.check_n(cost).expect("weights stay within capacity")
    }
}

/// What every algorithm promises about its admissions at one frozen instant, where it started
/// fresh: sorted by weight admitted so far, each admission's `remaining` is the capacity minus
/// the weight admitted up to and including it. No two admissions can claim the same slot.
///
/// Returns how often consecutive admissions in that order came from different threads: a
/// measure of how much the run really interleaved.
fn assert_linearizable(admitted: &mut [(u64, Decision, usize)], capacity: u64, name: &str) -> usize {
    admitted.sort_by_key(|(_, d, _)| std::cmp::Reverse(d.remaining()));
    let mut so_far = 0;
    for &(cost, d, _) in admitted.iter() {
        so_far += cost;
        assert_eq!(
            d.remaining(),
            capacity - so_far,
            "{name}: admissions are not a sequence: weight {cost} left {} after {so_far}",
            d.remaining()
        );
    }
    assert_eq!(so_far, capacity, "{name}: admitted weight");
    admitted.windows(2).filter(|pair| pair[0].2 != pair[1].2).count()
}

/// Builds a fresh limiter at `now`, admits `total` weight sequentially (weight 1 each), and
/// returns its state word: what the concurrent run must have ended with.
fn sequential_state<A: Algorithm + Copy>(algorithm: A, now: u64, total: u64) -> u64 {
    let limiter = DirectLimiter::with_clock(algorithm, ManualClock::starting_at(Timestamp::from_nanos(now)));
    for _ in 0..total {
        assert!(limiter.check().is_allowed());
    }
    assert!(!limiter.check().is_allowed());
    limiter.raw_state()
}

/// Admitted requests: (weight, decision, thread).
type Admitted = Vec<(u64, Decision, usize)>;
/// Refused requests: (weight, decision).
type Refused = Vec<(u64, Decision)>;

/// `threads` threads, released together, each making `CALLS` requests on one limiter at a
/// frozen `T0`. Returns every admitted and every refused request, and the final state word.
fn frozen_run<A: Algorithm + Copy>(algorithm: A, threads: usize) -> (Admitted, Refused, u64) {
    let limiter = DirectLimiter::with_clock(algorithm, ManualClock::starting_at(Timestamp::from_nanos(T0)));
    let barrier = Barrier::new(threads);
    let results: Vec<(Admitted, Refused)> = thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|i| {
                let (limiter, barrier) = (&limiter, &barrier);
                scope.spawn(move || {
                    let (mut admitted, mut refused) = (Vec::new(), Vec::new());
                    barrier.wait();
                    for j in 0..CALLS {
                        let cost = weight(i, j);
                        let d = request(limiter, cost);
                        if d.is_allowed() {
                            admitted.push((cost, d, i));
                        } else {
                            refused.push((cost, d));
                        }
                        if j % 64 == 0 {
                            // Peeks interleaved with the writes never change anything.
                            let _ = limiter.peek();
                        }
                    }
                    (admitted, refused)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let (mut admitted, mut refused) = (Vec::new(), Vec::new());
    for (a, r) in results {
        admitted.extend(a);
        refused.extend(r);
    }
    (admitted, refused, limiter.raw_state())
}

/// The frozen-clock scenario, `REPS` times: exact admitted weight, linearizable admissions,
/// consistent refusals, and the same final state as a sequential run. `check` adds the
/// algorithm's own exact expectations for each admission and refusal.
fn frozen<A: Algorithm + Copy>(
    algorithm: A,
    threads: usize,
    name: &str,
    check: impl Fn(&[(u64, Decision)], &[(u64, Decision)]),
) {
    let capacity = algorithm.capacity();
    // Enough weight-1 calls that the ceiling is always reached.
    assert!((threads * CALLS * 3 / 4) as u64 > 2 * capacity);
    let expected_state = sequential_state(algorithm, T0, capacity);
    let mut switches = 0;
    for rep in 0..REPS {
        let name = format!("{name}, {threads} threads, run {rep}");
        let (mut admitted, refused, state) = frozen_run(algorithm, threads);
        let total: u64 = admitted.iter().map(|(c, _, _)| c).sum();
        assert_eq!(total, capacity, "{name}: admitted weight");
        switches += assert_linearizable(&mut admitted, capacity, &name);
        for (cost, d) in &refused {
            assert!(
                d.remaining() < *cost,
                "{name}: refused {cost} with {} remaining",
                d.remaining()
            );
            assert!(d.retry_after() > Duration::ZERO, "{name}");
        }
        // Every weight-1 request after the ceiling was refused with nothing remaining.
        assert!(
            refused.iter().any(|(c, d)| *c == 1 && d.remaining() == 0),
            "{name}"
        );
        let admitted: Vec<(u64, Decision)> = admitted.iter().map(|&(c, d, _)| (c, d)).collect();
        check(&admitted, &refused);
        assert_eq!(
            state, expected_state,
            "{name}: final state differs from a sequential run"
        );
    }
    eprintln!(
        "{name}, {threads} threads: {switches} thread switches between consecutive admissions in {REPS} runs"
    );
    // Not vacuous: with more than one core, some runs really interleaved their admissions.
    if thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
        assert!(switches > 0, "{name}: the threads never interleaved");
    }
}

#[test]
fn token_bucket_admits_exactly_the_burst() {
    let bucket = TokenBucket::new(quota("100/s burst 2000")).unwrap();
    let t = ns(bucket.emission_interval());
    for threads in [8, 16] {
        frozen(bucket, threads, "token bucket", |admitted, refused| {
            for (cost, d) in admitted {
                // The bucket is full again once every admitted unit so far has refilled.
                assert_eq!(ns(d.reset_after()), (2000 - d.remaining()) * t);
                assert_eq!(d.delay(), Duration::ZERO, "weight {cost}");
            }
            for (cost, d) in refused {
                assert_eq!(ns(d.retry_after()), (cost - d.remaining()) * t);
                assert_eq!(ns(d.reset_after()), (2000 - d.remaining()) * t);
            }
        });
    }
    assert_eq!(
        GcraState::from_raw(sequential_state(bucket, T0, 2000)).tat(),
        T0 + 2000 * t
    );
}

#[test]
fn leaky_bucket_accepts_exactly_the_burst_in_distinct_slots() {
    let shaper = LeakyBucket::new(quota("100/s burst 2000")).unwrap();
    let t = ns(shaper.emission_interval());
    for threads in [8, 16] {
        frozen(shaper, threads, "leaky bucket", |admitted, refused| {
            // Accepted requests (delayed ones included) occupy consecutive slots: the one that
            // leaves `k` units remaining waits for exactly the slots taken before it.
            for (cost, d) in admitted {
                let after = 2000 - d.remaining();
                assert_eq!(ns(d.delay()), (after - cost) * t);
                assert_eq!(ns(d.reset_after()), after * t);
            }
            let zero_delay = admitted.iter().filter(|(_, d)| d.delay().is_zero()).count();
            assert_eq!(zero_delay, 1, "exactly one request proceeds at once");
            for (cost, d) in refused {
                assert_eq!(ns(d.retry_after()), (cost - d.remaining()) * t);
                assert_eq!(d.delay(), Duration::ZERO);
            }
        });
    }
}

#[test]
fn fixed_window_admits_exactly_the_limit() {
    let window = FixedWindow::new(quota("2000/min")).unwrap();
    // T0 is 15 s into its minute.
    let to_end = 45 * SEC - 7;
    for threads in [8, 16] {
        frozen(window, threads, "fixed window", |admitted, refused| {
            for (_, d) in admitted {
                assert_eq!(ns(d.reset_after()), to_end);
            }
            for (_, d) in refused {
                assert_eq!(ns(d.retry_after()), to_end);
                assert_eq!(ns(d.reset_after()), to_end);
            }
        });
    }
}

#[test]
fn sliding_window_admits_exactly_the_limit() {
    let window = SlidingWindow::new(quota("2000/min")).unwrap();
    let until_two_windows_on = 2 * 60 * SEC - 15 * SEC - 7;
    for threads in [8, 16] {
        frozen(window, threads, "sliding window", |admitted, refused| {
            for (_, d) in admitted {
                assert_eq!(ns(d.reset_after()), until_two_windows_on);
            }
            for (_, d) in refused {
                assert_eq!(ns(d.reset_after()), until_two_windows_on);
            }
        });
    }
}

/// Rounds: the main thread sets the clock while the workers wait at a barrier, then releases
/// them to hammer the limiter at that instant, and waits for them all to finish before the
/// next step. Each round's admitted weight must equal what a sequential limiter driven through
/// the same instants admits, and so must the state word after every round.
fn rounds<A: Algorithm + Copy>(
    algorithm: A,
    threads: usize,
    start: u64,
    step: u64,
    rounds: usize,
    calls: usize,
    name: &str,
) -> Vec<u64> {
    let clock = ManualClock::starting_at(Timestamp::from_nanos(start));
    let limiter = DirectLimiter::with_clock(algorithm, clock.clone());
    let reference = DirectLimiter::with_clock(algorithm, ManualClock::new());
    let barrier = Barrier::new(threads + 1);
    let per_round: Vec<AtomicU64> = (0..rounds).map(|_| AtomicU64::new(0)).collect();
    // Every thread keeps to the barrier protocol whatever happens: a panic (a failed assertion
    // in the main thread, or a panic in the library under a worker) that left one thread out of
    // a barrier would hang the test instead of failing it. So the main thread only records
    // while the workers run, and panics are caught, flagged, and reported after the scope.
    let panicked = AtomicBool::new(false);
    let mut observed = Vec::with_capacity(rounds);
    thread::scope(|scope| {
        for i in 0..threads {
            let (limiter, barrier, per_round, panicked) = (&limiter, &barrier, &per_round, &panicked);
            scope.spawn(move || {
                for (round, admitted) in per_round.iter().enumerate() {
                    barrier.wait();
                    let work = panic::catch_unwind(AssertUnwindSafe(|| {
                        let mut weight_here = 0;
                        for j in 0..calls {
                            let cost = weight(i + round, j);
                            if request(limiter, cost).is_allowed() {
                                weight_here += cost;
                            }
                        }
                        weight_here
                    }));
                    match work {
                        Ok(weight_here) => {
                            admitted.fetch_add(weight_here, Ordering::Relaxed);
                        }
                        Err(_) => panicked.store(true, Ordering::Relaxed),
                    }
                    barrier.wait();
                }
            });
        }
        for (round, admitted) in per_round.iter().enumerate() {
            let now = start + round as u64 * step;
            clock.set(Timestamp::from_nanos(now));
            barrier.wait(); // release the workers at `now`
            barrier.wait(); // all of them are done
            let expected = panic::catch_unwind(AssertUnwindSafe(|| {
                let mut expected = 0;
                while expected <= 1_000_000 && reference.check_at(Timestamp::from_nanos(now)).is_allowed() {
                    expected += 1;
                }
                expected
            }))
            .unwrap_or_else(|_| {
                panicked.store(true, Ordering::Relaxed);
                u64::MAX
            });
            observed.push((
                now,
                admitted.load(Ordering::Relaxed),
                expected,
                limiter.raw_state(),
                reference.raw_state(),
            ));
        }
    });
    assert!(
        !panicked.load(Ordering::Relaxed),
        "{name}: a decision panicked (see above)"
    );
    for (round, &(now, total, expected, state, reference_state)) in observed.iter().enumerate() {
        let context = format!("{name}, {threads} threads, round {round} at {now}");
        assert_eq!(total, expected, "{context}: admitted weight");
        assert_eq!(state, reference_state, "{context}: state");
    }
    observed.iter().map(|&(_, total, ..)| total).collect()
}

#[test]
fn rounds_one_emission_interval_apart() {
    // After the burst, exactly one unit per interval: weight-2 requests never fit.
    let bucket = TokenBucket::new(quota("100/s burst 64")).unwrap();
    let t = ns(bucket.emission_interval());
    let shaper = LeakyBucket::new(quota("100/s burst 64")).unwrap();
    for threads in [8, 16] {
        let totals = rounds(bucket, threads, T0, t, 40, 40, "token bucket");
        assert_eq!(totals[0], 64);
        assert!(totals[1..].iter().all(|&n| n == 1), "{totals:?}");
        let totals = rounds(shaper, threads, T0, t, 40, 40, "leaky bucket");
        assert_eq!(totals[0], 64);
        assert!(totals[1..].iter().all(|&n| n == 1), "{totals:?}");
        // Three intervals apart: three units a round, whatever the mix of weights 1 and 2.
        let totals = rounds(bucket, threads, T0, 3 * t, 30, 40, "token bucket, 3 T");
        assert!(totals[1..].iter().all(|&n| n == 3), "{totals:?}");
    }
}

#[test]
fn rounds_one_window_apart() {
    let minute = 60 * SEC;
    let fixed = FixedWindow::new(quota("200/min")).unwrap();
    let sliding = SlidingWindow::new(quota("200/min")).unwrap();
    for threads in [8, 16] {
        // Each window admits exactly its limit, wherever in the window the round falls.
        let totals = rounds(fixed, threads, T0, minute, 30, 60, "fixed window");
        assert!(totals.iter().all(|&n| n == 200), "{totals:?}");
        // 15 s into each window the previous one weighs 3/4: 200, then 200 - 150 = 50, then
        // 200 - ceil(50 * 3/4) = 162, ...
        let totals = rounds(sliding, threads, T0, minute, 30, 60, "sliding window");
        assert_eq!(totals[..3], [200, 50, 162]);
        // At the start of each window, the previous one weighs all of its count: full windows
        // alternate with empty ones.
        let start = T0 - 15 * SEC - 7;
        let totals = rounds(sliding, threads, start, minute, 30, 60, "sliding window, aligned");
        for (round, &n) in totals.iter().enumerate() {
            assert_eq!(n, if round % 2 == 0 { 200 } else { 0 }, "{totals:?}");
        }
    }
}
