//! The timed loops every scenario runs, written once.
//!
//! Every loop is `#[inline(never)]`: within one benchmark binary, each row, on the main thread or
//! a spawned one, runs the same loop compiled once per limiter type, so no row's code generation
//! depends on its call site. (An earlier version, with the loop inlined into the main-thread
//! closures, measured tollgate's hot key at 34 ns there and 16 ns in a one-thread row on a spawned
//! thread.) Each benchmark binary (`direct`, `keyed`, `contention`, `instructions`) compiles the
//! loops on its own, though, and how a peer's code is inlined into them can differ between
//! binaries: `benches/report.py` compares every one-thread contention row with the same
//! implementation's single-thread row and does not settle a verdict on a pair that differs.

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use crate::{Direct, Keyed};

/// Times `iters` decisions of `limiter`.
#[inline(never)]
pub fn decide_direct<L: Direct>(limiter: &L, iters: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        black_box(limiter.check());
    }
    start.elapsed()
}

/// Times `iters` decisions for the keys `first..first + count`, in turn.
#[inline(never)]
pub fn decide_in_turn<L: Keyed>(limiter: &L, iters: u64, first: u64, count: u64) -> Duration {
    let end = first + count;
    let mut key = first;
    let start = Instant::now();
    for _ in 0..iters {
        black_box(limiter.check(black_box(&key)));
        key += 1;
        if key == end {
            key = first;
        }
    }
    start.elapsed()
}

/// Times `iters` decisions for the keys of `sequence` (not empty), in order, starting at
/// `*position` and wrapping; leaves `*position` where the next run should start.
#[inline(never)]
pub fn decide_in_sequence<L: Keyed>(
    limiter: &L,
    iters: u64,
    sequence: &[u64],
    position: &mut usize,
) -> Duration {
    let mut at = *position % sequence.len();
    let start = Instant::now();
    for _ in 0..iters {
        black_box(limiter.check(black_box(&sequence[at])));
        at += 1;
        if at == sequence.len() {
            at = 0;
        }
    }
    let elapsed = start.elapsed();
    *position = at;
    elapsed
}

/// Times one decision for each of the keys `0..keys`.
#[inline(never)]
pub fn decide_each_once<L: Keyed>(limiter: &L, keys: u64) -> Duration {
    let start = Instant::now();
    for key in 0..keys {
        black_box(limiter.check(black_box(&key)));
    }
    start.elapsed()
}

/// Runs `work(thread)` on `threads` scoped threads started together on a barrier; spawning,
/// the barrier and joining are outside every measurement. Returns the time from the first
/// thread's start to the last thread's end: the run lasted that long. (Each thread's own time
/// is not enough: on a loaded machine a thread may be scheduled only after another has
/// finished, and the slowest thread's time would then count a run of one thread after the
/// other as if they had run together.)
pub fn in_threads(threads: usize, work: impl Fn(usize) -> Duration + Sync) -> Duration {
    let barrier = Barrier::new(threads);
    let spans: Vec<(Instant, Instant)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|thread| {
                let (barrier, work) = (&barrier, &work);
                scope.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    black_box(work(thread));
                    (start, Instant::now())
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("a benchmark thread panicked"))
            .collect()
    });
    let first_start = spans.iter().map(|&(start, _)| start).min();
    let last_end = spans.iter().map(|&(_, end)| end).max();
    match (first_start, last_end) {
        (Some(start), Some(end)) => end.duration_since(start),
        _ => Duration::ZERO,
    }
}
