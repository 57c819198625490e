//! How decisions per second grow with threads: tollgate and governor, direct and keyed, on one
//! shared key and on distinct keys, with the coarse clocks (tollgate's `CoarseClock`, governor's
//! `QuantaUpkeepClock`).
//!
//! Every thread starts on a barrier and runs for a fixed time; a cell's rate is all threads'
//! decisions over the time from the first start to the last end; spawning and joining are outside
//! the measurement. Prints a Markdown table of millions of decisions per second.
//!
//! Run: `cargo run -p tollgate-peers --release --bin scaling -- [MAX_THREADS] [MILLIS]`.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use governor::clock::QuantaUpkeepClock;
use tollgate::clock::COARSE_UPKEEP_INTERVAL;
use tollgate::{CoarseClock, DirectLimiter};
use tollgate_peers::{governor, governor_quota, tollgate, tollgate_bucket, Governor, Keyed};

/// Keys per thread in the distinct-keys scenarios.
const KEYS_PER_THREAD: u64 = 1_024;

/// Runs `work(thread)` on `threads` threads for `run`; returns total decisions per second: all
/// threads' decisions over the time from the first thread's start to the last one's end (so
/// that threads a loaded machine runs one after the other do not count as running together).
fn throughput(threads: usize, run: Duration, work: &(dyn Fn(usize, &AtomicBool) -> u64 + Sync)) -> f64 {
    let barrier = Barrier::new(threads);
    let stop = AtomicBool::new(false);
    let results: Vec<(u64, Instant, Instant)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                let (barrier, stop) = (&barrier, &stop);
                scope.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    let done = work(thread, stop);
                    (done, start, Instant::now())
                })
            })
            .collect();
        std::thread::sleep(run);
        stop.store(true, Ordering::Relaxed);
        handles
            .into_iter()
            .map(|h| h.join().expect("a worker panicked"))
            .collect()
    });
    let done: u64 = results.iter().map(|&(done, _, _)| done).sum();
    let first_start = results.iter().map(|&(_, start, _)| start).min();
    let last_end = results.iter().map(|&(_, _, end)| end).max();
    match (first_start, last_end) {
        (Some(start), Some(end)) if end > start => done as f64 / end.duration_since(start).as_secs_f64(),
        _ => 0.0,
    }
}

/// Decides until told to stop, checking the flag every 256 decisions.
fn until_stopped(stop: &AtomicBool, mut decide: impl FnMut(u64)) -> u64 {
    let mut done = 0;
    while !stop.load(Ordering::Relaxed) {
        for i in 0..256 {
            decide(done + i);
        }
        done += 256;
    }
    done
}

fn main() {
    let mut args = std::env::args().skip(1);
    let max_threads: usize = args
        .next()
        .map_or(16, |a| a.parse().expect("MAX_THREADS is a number"));
    let millis: u64 = args
        .next()
        .map_or(300, |a| a.parse().expect("MILLIS is a number"));
    let run = Duration::from_millis(millis);
    let counts: Vec<usize> = [1, 2, 4, 8, 16, 32]
        .into_iter()
        .filter(|&t| t <= max_threads)
        .collect();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("{cores} cores available; {millis} ms per cell; millions of decisions per second (all threads together)\n");

    let keys = KEYS_PER_THREAD * max_threads as u64;
    let direct_tollgate = DirectLimiter::with_clock(tollgate_bucket(), CoarseClock::new());
    // One upkeep clock for governor, at the interval tollgate's coarse clock uses.
    let upkeep =
        QuantaUpkeepClock::from_interval(COARSE_UPKEEP_INTERVAL).expect("governor's upkeep thread starts");
    let direct_governor = ::governor::RateLimiter::direct_with_clock(governor_quota(), upkeep.clone());
    let keyed_tollgate = tollgate(keys as usize, CoarseClock::new());
    let keyed_governor = governor(keys as usize, upkeep);
    for key in 0..keys {
        let _ = keyed_tollgate.check(&key);
        let _ = keyed_governor.check_key(&key);
    }

    type Scenario<'a> = (&'a str, Box<dyn Fn(usize, &AtomicBool) -> u64 + Sync + 'a>);
    let scenarios: Vec<Scenario> = vec![
        (
            "direct, tollgate",
            Box::new(|_, stop: &AtomicBool| {
                until_stopped(stop, |_| {
                    let _ = black_box(direct_tollgate.check());
                })
            }),
        ),
        (
            "direct, governor",
            Box::new(|_, stop: &AtomicBool| {
                until_stopped(stop, |_| {
                    let _ = black_box(direct_governor.check());
                })
            }),
        ),
        (
            "keyed shared key, tollgate",
            Box::new(|_, stop: &AtomicBool| {
                until_stopped(stop, |_| {
                    let _ = black_box(Keyed::check(&keyed_tollgate, &0));
                })
            }),
        ),
        (
            "keyed shared key, governor",
            Box::new(|_, stop: &AtomicBool| {
                until_stopped(stop, |_| {
                    let _ = black_box(Keyed::check(&keyed_governor, &0));
                })
            }),
        ),
        (
            "keyed distinct keys, tollgate",
            Box::new(|thread, stop: &AtomicBool| {
                let first = thread as u64 * KEYS_PER_THREAD;
                until_stopped(stop, |i| {
                    let _ = black_box(Keyed::check(&keyed_tollgate, &(first + i % KEYS_PER_THREAD)));
                })
            }),
        ),
        (
            "keyed distinct keys, governor",
            Box::new(|thread, stop: &AtomicBool| {
                let first = thread as u64 * KEYS_PER_THREAD;
                until_stopped(stop, |i| {
                    let _ = black_box(Keyed::check(&keyed_governor, &(first + i % KEYS_PER_THREAD)));
                })
            }),
        ),
    ];

    print!("| scenario |");
    for threads in &counts {
        print!(" {threads} thr |");
    }
    println!();
    print!("|---|");
    for _ in &counts {
        print!("---:|");
    }
    println!();
    for (name, work) in &scenarios {
        print!("| {name} |");
        for &threads in &counts {
            let per_second = throughput(threads, run, work.as_ref());
            print!(" {:.1} |", per_second / 1e6);
        }
        println!();
    }
    // Every limiter must still be admitting: a refusal path would measure something else.
    assert!(direct_tollgate.check().is_allowed() && direct_governor.check().is_ok());
    assert!(Keyed::check(&keyed_tollgate, &0).is_allowed());
    let governor_answer = Keyed::check(&keyed_governor, &0);
    assert!(<Governor<QuantaUpkeepClock> as Keyed>::admitted(&governor_answer));
}
