//! The timed loops every scenario runs, written once and compiled once.
//!
//! Every loop is `#[inline(never)]`: each row, on the main thread or a spawned one, runs the same
//! loop, so no row's code generation depends on its call site (a loop inlined into each call site
//! is optimized there, and its time then depends on the site as much as on the limiter).
//!
//! Every binary (`direct`, `keyed`, `contention`, `instructions`, `distinct_density`) also runs
//! the same machine code for a given limiter type. The binaries reach the loops only through
//! [`DirectLoops`] and [`KeyedLoops`], whose implementations (`src/compiled_loops.rs`) are
//! non-generic `#[inline(never)]` methods, one per concrete limiter type, each calling the generic
//! loop below: rustc codegens those methods, and the loop instance each calls, in this library
//! crate alone, and every binary links that one copy (a binary that called the generic loops
//! itself would instantiate and optimize its own copy, which need not be the same code).
//! `check()` is still statically dispatched and inlined into the loop; the one added call is per
//! timed run, not per decision.
//!
//! Two conditions keep this true. No LTO (the workspace's `release` and `bench` profiles have
//! none): LTO would let each binary re-optimize this crate's code. And one build of this crate:
//! a command that builds a probe without any bench target resolves features without the
//! dev-dependencies and compiles a second `tollgate-peers`, so `benches/run` builds the probes
//! with `--benches`. The `bench` profile also builds this crate in one codegen unit (the
//! workspace's `Cargo.toml`), so that what is inlined into a loop does not depend on how rustc
//! splits the crate. `benches/loop_code.py` shows whether the binaries' loops are the same code,
//! and `benches/report.py` sets every one-thread contention row beside the same implementation's
//! single-thread row ("How far to trust a row").
//!
//! A limiter type no binary has timed yet needs one line in `src/compiled_loops.rs`; without it,
//! a scenario over that type does not compile.

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use crate::{Direct, Keyed};

/// A direct limiter whose timed loop is compiled once, in this crate.
pub trait DirectLoops: Direct {
    /// Times `iters` decisions of `self`.
    fn decide_direct(&self, iters: u64) -> Duration;
}

/// A keyed limiter whose timed loops are compiled once, in this crate.
pub trait KeyedLoops: Keyed {
    /// Times `iters` decisions for the keys `first..first + count`, in turn.
    fn decide_in_turn(&self, iters: u64, first: u64, count: u64) -> Duration;

    /// Times `iters` decisions for the keys of `sequence` (not empty), in order, starting at
    /// `*position` and wrapping; leaves `*position` where the next run should start.
    fn decide_in_sequence(&self, iters: u64, sequence: &[u64], position: &mut usize) -> Duration;

    /// Times one decision for each of the keys `0..keys`.
    fn decide_each_once(&self, keys: u64) -> Duration;
}

/// Times `iters` decisions of `limiter`.
#[inline(never)]
pub(crate) fn decide_direct<L: Direct>(limiter: &L, iters: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        black_box(limiter.check());
    }
    start.elapsed()
}

/// Times `iters` decisions for the keys `first..first + count`, in turn.
#[inline(never)]
pub(crate) fn decide_in_turn<L: Keyed>(limiter: &L, iters: u64, first: u64, count: u64) -> Duration {
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
pub(crate) fn decide_in_sequence<L: Keyed>(
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
pub(crate) fn decide_each_once<L: Keyed>(limiter: &L, keys: u64) -> Duration {
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
