//! What counting every decision costs, by how it is counted (feature `metrics`): tollgate's keyed
//! token bucket on the precise clock, unnamed; named, each decision counted on its thread's lane
//! (`tollgate::metrics`: a plain load and store on the thread's own cache line); and unnamed
//! with a locked add (`fetch_add`, `lock xadd` on x86-64) after each decision, on a counter of
//! the thread's own (uncontended) or on one counter every thread shares (what tollgate does not
//! do). On one hot key, on one thread; and on 1,000 distinct keys per thread, on two threads.
//!
//! The variants take turns, one short run each per round, and each cell is the median of its
//! rounds, so that a machine whose load changes during the run moves every variant alike. Prints
//! a Markdown table of ns per decision (one thread) and millions of decisions per second (all
//! threads together), with each variant's ratio to the unnamed limiter.
//!
//! Run: `cargo run -p tollgate-peers --profile bench --features metrics --bin counting_cost -- [ROUNDS] [MILLIS]`.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use tollgate::metrics::LimiterName;
use tollgate::PreciseClock;
use tollgate_peers::{tollgate, Tollgate};

/// Keys per thread on distinct keys.
const KEYS_PER_THREAD: u64 = 1_000;
/// Decisions between two looks at the stop flag.
const BATCH: u64 = 1_024;

/// How a decision is counted.
#[derive(Clone, Copy, PartialEq)]
enum Counting {
    /// Not at all: an unnamed limiter.
    Unnamed,
    /// On the thread's lane: a named limiter.
    Lanes,
    /// A `fetch_add` on a counter of the thread's own, after each decision of an unnamed one.
    OwnAtomic,
    /// A `fetch_add` on one counter every thread shares, after each decision of an unnamed one.
    SharedAtomic,
}

impl Counting {
    const ALL: [Counting; 4] = [
        Counting::Unnamed,
        Counting::Lanes,
        Counting::OwnAtomic,
        Counting::SharedAtomic,
    ];

    fn label(self) -> &'static str {
        match self {
            Counting::Unnamed => "unnamed (nothing counted)",
            Counting::Lanes => "named: the thread's lane (tollgate::metrics)",
            Counting::OwnAtomic => "unnamed + fetch_add on the thread's own counter",
            Counting::SharedAtomic => "unnamed + fetch_add on one shared counter",
        }
    }
}

/// A filled limiter for `threads` threads' keys, named when `counting` is `Lanes`.
fn limiter(counting: Counting, keys: u64) -> Tollgate<PreciseClock> {
    let limiter = tollgate(10_000, PreciseClock::new());
    let limiter = match counting {
        Counting::Lanes => limiter.named(LimiterName::new("counting-cost").expect("a valid name")),
        _ => limiter,
    };
    for key in 0..keys {
        assert!(limiter.check(&key).is_allowed(), "the benchmark quota admits");
    }
    limiter
}

/// Decisions per second of `threads` threads, each on its own `keys` keys (`keys` 1: one shared
/// hot key), counted as `counting`, for `run`: all threads' decisions over the time from the
/// first start to the last end.
fn throughput(counting: Counting, threads: usize, keys: u64, run: Duration) -> f64 {
    let distinct = if keys == 1 { 1 } else { keys * threads as u64 };
    let limiter = limiter(counting, distinct);
    let shared = CachePadded::new(AtomicU64::new(0));
    let barrier = Barrier::new(threads);
    let stop = AtomicBool::new(false);
    let spans: Vec<(u64, Instant, Instant)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|thread| {
                let (limiter, shared, barrier, stop) = (&limiter, &shared, &barrier, &stop);
                scope.spawn(move || {
                    let own = CachePadded::new(AtomicU64::new(0));
                    let counter: &AtomicU64 = match counting {
                        Counting::SharedAtomic => shared,
                        _ => &own,
                    };
                    let first = if keys == 1 { 0 } else { thread as u64 * keys };
                    // A first decision outside the timed run: it claims the thread's lane.
                    let _ = black_box(limiter.check(&first));
                    barrier.wait();
                    let start = Instant::now();
                    let done = decide(limiter, counter, counting, first, keys, stop);
                    (done, start, Instant::now())
                })
            })
            .collect();
        std::thread::sleep(run);
        // Relaxed: a flag polled every batch; nothing is published through it.
        stop.store(true, Ordering::Relaxed);
        workers
            .into_iter()
            .map(|worker| worker.join().expect("a worker panicked"))
            .collect()
    });
    let done: u64 = spans.iter().map(|&(done, _, _)| done).sum();
    let start = spans.iter().map(|&(_, start, _)| start).min().expect("threads");
    let end = spans.iter().map(|&(_, _, end)| end).max().expect("threads");
    done as f64 / end.duration_since(start).as_secs_f64()
}

/// The timed loop: decisions for keys `first..first + keys` in turn until `stop`.
#[inline(never)]
fn decide(
    limiter: &Tollgate<PreciseClock>,
    counter: &AtomicU64,
    counting: Counting,
    first: u64,
    keys: u64,
    stop: &AtomicBool,
) -> u64 {
    let atomic = matches!(counting, Counting::OwnAtomic | Counting::SharedAtomic);
    let mut key = first;
    let mut done = 0;
    // Relaxed: see `throughput`.
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..BATCH {
            let _ = black_box(limiter.check(black_box(&key)));
            if atomic {
                // Relaxed: a count, as a metric's would be; the locked add is what is measured.
                counter.fetch_add(1, Ordering::Relaxed);
            }
            key += 1;
            if key == first + keys {
                key = first;
            }
        }
        done += BATCH;
    }
    done
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|arg| arg.parse().ok())
        .collect();
    let rounds = args.first().copied().unwrap_or(15) as usize;
    let run = Duration::from_millis(args.get(1).copied().unwrap_or(200));
    let scenarios = [
        ("one hot key, 1 thread (ns per decision)", 1, 1),
        (
            "1,000 distinct keys per thread, 2 threads (M decisions/s)",
            2,
            KEYS_PER_THREAD,
        ),
    ];
    println!(
        "{rounds} rounds of {} ms per cell, the median of each; CPUs: {}",
        run.as_millis(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    for (title, threads, keys) in scenarios {
        let mut rates: Vec<Vec<f64>> = vec![Vec::new(); Counting::ALL.len()];
        for _ in 0..rounds {
            for (at, counting) in Counting::ALL.into_iter().enumerate() {
                rates[at].push(throughput(counting, threads, keys, run));
            }
        }
        let medians: Vec<f64> = rates.into_iter().map(median).collect();
        println!("\n{title}\n\n| counting | value | vs unnamed |\n|---|---:|---:|");
        for (counting, &rate) in Counting::ALL.iter().zip(&medians) {
            let value = if threads == 1 { 1e9 / rate } else { rate / 1e6 };
            let ratio = if threads == 1 {
                medians[0] / rate
            } else {
                rate / medians[0]
            };
            println!("| {} | {value:.2} | {ratio:.3} |", counting.label());
        }
    }
}
