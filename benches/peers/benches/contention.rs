//! Decisions per second with 1, 2 and 4 threads, on one shared limiter or key and on one limiter
//! or key per thread, for every implementation, on both clock kinds.
//!
//! Groups `contention/{precise,coarse}/{direct_shared,direct_distinct,keyed_shared,keyed_distinct}`,
//! rows `implementation/threads`:
//!
//! - `direct_shared`: all threads on one direct limiter (tollgate's token bucket, governor,
//!   ratelimit and, on the precise clock, the plain `f64` token bucket behind a `Mutex`);
//! - `direct_distinct`: each thread on its own direct limiter (cache-padded apart);
//! - `keyed_shared`: all threads on one key of a keyed limiter (tollgate, governor);
//! - `keyed_distinct`: each thread on its own 1,000 keys of one keyed limiter, in turn.
//!
//! Timed with `iter_custom`: for each sample a fresh limiter is built (untimed), the threads are
//! spawned and wait on a barrier, each then runs its `iters` decisions with the same
//! never-inlined loop as the single-thread benchmarks, and the sample lasts from the first
//! thread's start to the last thread's end (a thread scheduled late stretches it, as it
//! stretched the run). Spawning and joining are outside the measurement. Criterion's time per
//! iteration is the time for one decision on every thread, so decisions per second, all threads
//! together, are `threads / time`; its throughput figure (elements = threads) is exactly that.
//!
//! With `--features metrics`, the keyed scenarios also have the row `tollgate_metered`: tollgate's
//! keyed limiter named, every decision counted on its thread's lane (`tollgate::metrics`),
//! beside the unnamed one in the same run.
//!
//! With more threads than idle cores (4 threads on a 2-core machine) threads take turns, and the
//! figures measure the scheduler as much as the limiter: read them with the core count.
//!
//! Run: `cargo bench -p tollgate-peers --bench contention` (or with the rest: `benches/run threads`).

use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, Throughput};
use crossbeam_utils::CachePadded;
use governor::clock::{QuantaClock, QuantaUpkeepClock};
use tollgate::clock::COARSE_UPKEEP_INTERVAL;
use tollgate::{CoarseClock, PreciseClock};
use tollgate_peers::timing::in_threads;
use tollgate_peers::{
    tollgate_token_bucket, Direct, DirectContender, DirectLoops, GovernorDirect, GovernorKeyed, Keyed,
    KeyedContender, KeyedLoops, MutexBucketDirect, RatelimitDirect, TollgateElapsed, TollgateKeyed,
};

/// Thread counts of every scenario.
const THREADS: [usize; 3] = [1, 2, 4];
/// Keys of each thread in `keyed_distinct`.
const KEYS_PER_THREAD: u64 = 1_000;
/// The table every keyed scenario runs in: built for this many keys.
const TABLE: usize = 10_000;

fn assert_admitted<L: Direct>(name: &str, limiter: &L) {
    let answer = limiter.check();
    assert!(L::admitted(&answer), "{name}: the allowed path must stay allowed");
}

fn direct_shared<T: DirectContender + Sync>(group: &mut BenchmarkGroup<'_, WallTime>, contender: &T) {
    let name = contender.name();
    for threads in THREADS {
        group.throughput(Throughput::Elements(threads as u64));
        group.bench_function(BenchmarkId::new(name, threads), |b| {
            b.iter_custom(|iters| {
                let limiter = contender.allowed();
                let elapsed = in_threads(threads, |_| limiter.decide_direct(iters));
                assert_admitted(name, &limiter);
                elapsed
            })
        });
    }
}

fn direct_distinct<T: DirectContender + Sync>(group: &mut BenchmarkGroup<'_, WallTime>, contender: &T) {
    let name = contender.name();
    for threads in THREADS {
        group.throughput(Throughput::Elements(threads as u64));
        group.bench_function(BenchmarkId::new(name, threads), |b| {
            b.iter_custom(|iters| {
                let limiters: Vec<_> = (0..threads)
                    .map(|_| CachePadded::new(contender.allowed()))
                    .collect();
                let elapsed = in_threads(threads, |thread| limiters[thread].decide_direct(iters));
                for limiter in &limiters {
                    assert_admitted(name, &**limiter);
                }
                elapsed
            })
        });
    }
}

fn keyed_shared<C: KeyedContender + Sync>(group: &mut BenchmarkGroup<'_, WallTime>, contender: &C) {
    for threads in THREADS {
        group.throughput(Throughput::Elements(threads as u64));
        group.bench_function(BenchmarkId::new(C::NAME, threads), |b| {
            b.iter_custom(|iters| {
                let limiter = contender.filled(TABLE, 1);
                let elapsed = in_threads(threads, |_| limiter.decide_in_turn(iters, 0, 1));
                keyed_admitted::<C>(&limiter);
                elapsed
            })
        });
    }
}

fn keyed_distinct<C: KeyedContender + Sync>(group: &mut BenchmarkGroup<'_, WallTime>, contender: &C) {
    for threads in THREADS {
        group.throughput(Throughput::Elements(threads as u64));
        group.bench_function(BenchmarkId::new(C::NAME, threads), |b| {
            b.iter_custom(|iters| {
                let limiter = contender.filled(TABLE, KEYS_PER_THREAD * threads as u64);
                let elapsed = in_threads(threads, |thread| {
                    limiter.decide_in_turn(iters, thread as u64 * KEYS_PER_THREAD, KEYS_PER_THREAD)
                });
                keyed_admitted::<C>(&limiter);
                elapsed
            })
        });
    }
}

fn keyed_admitted<C: KeyedContender>(limiter: &C::Limiter) {
    assert!(
        C::Limiter::admitted(&limiter.check(&0)),
        "{}: the allowed path must stay allowed",
        C::NAME
    )
}

/// The direct contenders of one clock kind (the `Mutex` bucket reads `Instant`: precise only).
struct DirectPeers<T, G, R> {
    tollgate: T,
    governor: G,
    ratelimit: R,
    mutex: Option<MutexBucketDirect>,
}

/// Every scenario on one clock kind; `metered` is tollgate's keyed limiter named (feature
/// `metrics`).
fn bench_clock<T, G, R, KT, KM, KG>(
    c: &mut Criterion,
    clock: &str,
    direct: &DirectPeers<T, G, R>,
    (ours, metered): (&KT, Option<&KM>),
    theirs: &KG,
) where
    T: DirectContender + Sync,
    G: DirectContender + Sync,
    R: DirectContender + Sync,
    KT: KeyedContender + Sync,
    KM: KeyedContender + Sync,
    KG: KeyedContender + Sync,
{
    let mut group = c.benchmark_group(format!("contention/{clock}/direct_shared"));
    direct_shared(&mut group, &direct.tollgate);
    direct_shared(&mut group, &direct.governor);
    direct_shared(&mut group, &direct.ratelimit);
    if let Some(mutex) = &direct.mutex {
        direct_shared(&mut group, mutex);
    }
    group.finish();

    let mut group = c.benchmark_group(format!("contention/{clock}/direct_distinct"));
    direct_distinct(&mut group, &direct.tollgate);
    direct_distinct(&mut group, &direct.governor);
    direct_distinct(&mut group, &direct.ratelimit);
    if let Some(mutex) = &direct.mutex {
        direct_distinct(&mut group, mutex);
    }
    group.finish();

    let mut group = c.benchmark_group(format!("contention/{clock}/keyed_shared"));
    keyed_shared(&mut group, ours);
    if let Some(metered) = metered {
        keyed_shared(&mut group, metered);
    }
    keyed_shared(&mut group, theirs);
    group.finish();

    let mut group = c.benchmark_group(format!("contention/{clock}/keyed_distinct"));
    keyed_distinct(&mut group, ours);
    if let Some(metered) = metered {
        keyed_distinct(&mut group, metered);
    }
    keyed_distinct(&mut group, theirs);
    group.finish();
}

/// tollgate's keyed limiter on `clock`, and the same named when feature `metrics` is on.
#[cfg(feature = "metrics")]
fn tollgate_pair<C: Clone>(clock: C) -> (TollgateKeyed<C>, Option<tollgate_peers::TollgateKeyedMetered<C>>) {
    let metered = tollgate_peers::TollgateKeyedMetered(TollgateKeyed::new(clock.clone()));
    (TollgateKeyed::new(clock), Some(metered))
}

/// tollgate's keyed limiter on `clock` (no named one without feature `metrics`).
#[cfg(not(feature = "metrics"))]
fn tollgate_pair<C>(clock: C) -> (TollgateKeyed<C>, Option<TollgateKeyed<C>>) {
    (TollgateKeyed::new(clock), None)
}

fn contention(c: &mut Criterion) {
    let precise = DirectPeers {
        tollgate: tollgate_token_bucket(PreciseClock::new()),
        governor: GovernorDirect(QuantaClock::default()),
        ratelimit: RatelimitDirect::new("ratelimit", || TollgateElapsed::new(PreciseClock::new())),
        mutex: Some(MutexBucketDirect),
    };
    let (ours, metered) = tollgate_pair(PreciseClock::new());
    bench_clock(
        c,
        "precise",
        &precise,
        (&ours, metered.as_ref()),
        &GovernorKeyed::new(QuantaClock::default()),
    );

    // governor's upkeep thread (its quanta 0.12, separate from tollgate's quanta 0.13), refreshing
    // at the interval tollgate's coarse clock uses.
    let upkeep = QuantaUpkeepClock::from_interval(COARSE_UPKEEP_INTERVAL)
        .expect("governor's quanta upkeep thread starts");
    let coarse = DirectPeers {
        tollgate: tollgate_token_bucket(CoarseClock::new()),
        governor: GovernorDirect(upkeep.clone()),
        ratelimit: RatelimitDirect::new("ratelimit", || TollgateElapsed::new(CoarseClock::new())),
        mutex: None,
    };
    let (ours, metered) = tollgate_pair(CoarseClock::new());
    bench_clock(
        c,
        "coarse",
        &coarse,
        (&ours, metered.as_ref()),
        &GovernorKeyed::new(upkeep),
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = contention
}
criterion_main!(benches);
