//! ns per decision of each algorithm's direct limiter, allowed and denied paths, with both
//! clocks, beside the floor: one clock read, and one clock read plus an uncontended load+CAS.
//!
//! Run: `cargo bench --bench direct`. Results and how to read them: `docs/benchmarks.md`.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, Throughput};
use crossbeam_utils::CachePadded;
use tollgate::algorithm::Algorithm;
use tollgate::{
    Clock, CoarseClock, DirectLimiter, FixedWindow, LeakyBucket, PreciseClock, Quota, SlidingWindow,
    Timestamp, TokenBucket,
};

/// Allowed-path runs are timed in chunks of this many decisions on a fresh limiter, so that no
/// decision in a chunk is ever refused (every allowed-path quota admits more than this).
const CHUNK: u64 = 10_000;

fn quota(text: &str) -> Quota {
    text.parse().expect("benchmark quotas are valid")
}

/// Times `iters` calls of `op`, in chunks of at most `CHUNK` on a subject made by `setup`
/// (outside the timed region), checking each chunk's subject with `after` (also untimed). Every
/// row of the table, floors included, is timed this same way.
fn timed_in_chunks<S>(iters: u64, setup: impl Fn() -> S, op: impl Fn(&S), after: impl Fn(&S)) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let subject = setup();
        let n = left.min(CHUNK);
        let start = Instant::now();
        for _ in 0..n {
            op(&subject);
        }
        total += start.elapsed();
        after(&subject);
        left -= n;
    }
    total
}

/// Benchmarks one algorithm: `allowed` admits at least `CHUNK` decisions from fresh (after
/// `seed`), `denied` admits one and then refuses for hours.
fn bench_algorithm<A: Algorithm + Copy, C: Clock + Clone>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    clock: &C,
    allowed: A,
    seed: impl Fn(&DirectLimiter<A, C>),
    denied: A,
) {
    group.bench_function(BenchmarkId::new(name, "allowed"), |b| {
        b.iter_custom(|iters| {
            timed_in_chunks(
                iters,
                || {
                    let limiter = DirectLimiter::with_clock(allowed, clock.clone());
                    seed(&limiter);
                    limiter
                },
                |limiter| {
                    let _ = black_box(limiter.check());
                },
                |limiter| {
                    assert!(
                        limiter.check().is_allowed(),
                        "{name}: the allowed path must stay allowed"
                    )
                },
            )
        })
    });

    let limiter = DirectLimiter::with_clock(denied, clock.clone());
    assert!(limiter.check().is_allowed());
    assert!(
        !limiter.check().is_allowed(),
        "{name}: the denied-path limiter must refuse"
    );
    group.bench_function(BenchmarkId::new(name, "denied"), |b| {
        b.iter(|| black_box(limiter.check()))
    });
}

fn bench_clock<C: Clock + Clone>(c: &mut Criterion, clock_name: &str, clock: C) {
    let mut group = c.benchmark_group(format!("direct/{clock_name}"));
    group.throughput(Throughput::Elements(1));

    group.bench_function("floor/clock_read", |b| {
        b.iter_custom(|iters| {
            timed_in_chunks(
                iters,
                || &clock,
                |clock| {
                    black_box(clock.now());
                },
                |_| {},
            )
        })
    });
    let word = CachePadded::new(AtomicU64::new(0));
    group.bench_function("floor/clock_read+load+cas", |b| {
        b.iter_custom(|iters| {
            timed_in_chunks(
                iters,
                || &word,
                |word| {
                    // The stored value changes every call, as a decision's state does.
                    let now = clock.now().as_nanos();
                    let current = word.load(Ordering::Relaxed);
                    let _ = black_box(word.compare_exchange_weak(
                        current,
                        current.wrapping_add(now | 1),
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    ));
                },
                |_| {},
            )
        })
    });

    bench_algorithm(
        &mut group,
        "token_bucket",
        &clock,
        TokenBucket::new(quota("1/h burst 1000000")).unwrap(),
        |_| {},
        TokenBucket::new(quota("1/h")).unwrap(),
    );
    bench_algorithm(
        &mut group,
        "leaky_bucket",
        &clock,
        LeakyBucket::new(quota("1/ns burst 1000000000")).unwrap(),
        |_| {},
        LeakyBucket::new(quota("1/h")).unwrap(),
    );
    bench_algorithm(
        &mut group,
        "fixed_window",
        &clock,
        FixedWindow::new(quota("1000000/s")).unwrap(),
        |_| {},
        FixedWindow::new(quota("1/d")).unwrap(),
    );
    // The previous window holds 5,000, so the estimate really weighs it (as under steady load).
    let seed_previous_window = |limiter: &DirectLimiter<SlidingWindow, C>| {
        let a_window_ago = limiter.clock().now().as_nanos().saturating_sub(1_000_000_000);
        let seeded = limiter.check_n_at(5_000, Timestamp::from_nanos(a_window_ago));
        assert!(seeded.is_ok_and(|d| d.is_allowed()));
    };
    bench_algorithm(
        &mut group,
        "sliding_window",
        &clock,
        SlidingWindow::new(quota("16000/s")).unwrap(),
        seed_previous_window,
        SlidingWindow::new(quota("1/d")).unwrap(),
    );
    group.finish();
}

fn direct(c: &mut Criterion) {
    bench_clock(c, "precise", PreciseClock::new());
    bench_clock(c, "coarse", CoarseClock::new());
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = direct
}
criterion_main!(benches);
