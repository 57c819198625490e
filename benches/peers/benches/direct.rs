//! ns per decision of every direct limiter, allowed and denied paths, on both clock kinds, beside
//! the floors (one clock read; one clock read plus an uncontended load and CAS; the keyed floors:
//! a clock read, a key hash and an uncontended 16-byte load and CAS) and the stripped references
//! of each algorithm (`minimal_gcra`, `minimal_fixed_window`, `minimal_sliding_window`), all in
//! one run.
//!
//! Groups `direct/precise` and `direct/coarse`; rows `contender/allowed`, `contender/denied` and
//! `floor/...`:
//!
//! - `precise`: tollgate's `PreciseClock` (quanta, a TSC read), governor's default `QuantaClock`,
//!   ratelimit on tollgate's `PreciseClock` (`ratelimit`) and on its own default `StdClock`
//!   (`ratelimit_std`, `std::time::Instant`), and a plain `f64` token bucket behind a `Mutex`
//!   (`mutex_f64_bucket`, `src/float_bucket.rs`) on `std::time::Instant`; floors for both clock
//!   sources.
//! - `coarse`: tollgate's `CoarseClock`, governor's `QuantaUpkeepClock` and ratelimit on tollgate's
//!   `CoarseClock`, all refreshed every millisecond by an upkeep thread. The `Mutex` bucket reads
//!   `Instant` only and is not in this group.
//!
//! Every row is timed the same way (`iter_custom`, by the same never-inlined loop, in chunks of
//! `CHUNK` decisions on a fresh limiter made outside the timed region and checked after it), so
//! the ratios between rows of one group are the comparison. Denied rows use a limiter that has
//! admitted its one request and refuses for an hour or more.
//!
//! Beside tollgate's rows, the same quotas in a `Live` (`tollgate_token_bucket_live`,
//! `tollgate_fixed_window_live`, `tollgate_sliding_window_live`, `tollgate_sliding_log_live`: a
//! quota that can change while it runs), and policy sets of one, two and three direct policies
//! (`tollgate_policy_set_1`, `_2`, `_3`; denied by the last policy, after the others admitted:
//! their undo is timed too; `src/changeable.rs`).
//!
//! Run: `cargo bench -p tollgate-peers --bench direct` (or with the rest: `benches/run direct`).

use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, Throughput};
use governor::clock::{QuantaClock, QuantaUpkeepClock};
use tollgate::clock::COARSE_UPKEEP_INTERVAL;
use tollgate::{
    Clock, CoarseClock, DirectLimiter, FixedWindow, LeakyBucket, Live, LogLimiter, PreciseClock, SlidingLog,
    SlidingWindow, TokenBucket,
};
use tollgate_peers::{
    tollgate_fixed_window, tollgate_fixed_window_live, tollgate_fixed_window_wide, tollgate_leaky_bucket,
    tollgate_sliding_window, tollgate_sliding_window_live, tollgate_sliding_window_wide,
    tollgate_token_bucket, tollgate_token_bucket_live, ClockRead, ClockReadHashLoadCas16,
    ClockReadHashLoadTagCas8, ClockReadHashPlaceLoadCas16, ClockReadHashPlaceLoadTagCas8, ClockReadLoadCas,
    Direct, DirectContender, DirectLoops, GovernorClockRead, GovernorDirect, InstantRead, MinimalBucket,
    MinimalFixed, MinimalFixedWindow, MinimalGcra, MinimalSliding, MinimalSlidingWindow, MutexBucketDirect,
    RatelimitDirect, TollgateElapsed, TollgateLog, TollgateLogLive, TollgateSet, ALLOWED_RUN,
};

/// Allowed-path runs are timed in chunks of this many decisions, each on a fresh limiter.
const CHUNK: u64 = 10_000;
const _: () = assert!(CHUNK <= ALLOWED_RUN, "a chunk must stay on the allowed path");

/// Times `iters` decisions in chunks of at most `CHUNK`, each on a subject made by `setup` and
/// checked by `after`, both outside the timed region.
fn timed_in_chunks<S>(
    iters: u64,
    setup: impl Fn() -> S,
    run: impl Fn(&S, u64) -> Duration,
    after: impl Fn(&S),
) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let subject = setup();
        let n = left.min(CHUNK);
        total += run(&subject, n);
        after(&subject);
        left -= n;
    }
    total
}

/// The allowed and denied rows of one contender.
fn contender<T: DirectContender>(group: &mut BenchmarkGroup<'_, WallTime>, contender: &T) {
    let name = contender.name();
    group.bench_function(BenchmarkId::new(name, "allowed"), |b| {
        b.iter_custom(|iters| {
            timed_in_chunks(
                iters,
                || contender.allowed(),
                DirectLoops::decide_direct,
                |limiter| {
                    let answer = limiter.check();
                    assert!(
                        T::Limiter::admitted(&answer),
                        "{name}: the allowed path must stay allowed"
                    )
                },
            )
        })
    });

    let limiter = contender.denied();
    let refused = |limiter: &T::Limiter| {
        let answer = limiter.check();
        assert!(
            !T::Limiter::admitted(&answer),
            "{name}: the denied path must refuse"
        )
    };
    refused(&limiter);
    group.bench_function(BenchmarkId::new(name, "denied"), |b| {
        b.iter_custom(|iters| {
            let elapsed = limiter.decide_direct(iters);
            refused(&limiter);
            elapsed
        })
    });
}

fn floor_row<L: DirectLoops>(group: &mut BenchmarkGroup<'_, WallTime>, name: &str, limiter: L) {
    group.bench_function(name, |b| b.iter_custom(|iters| limiter.decide_direct(iters)));
}

/// The floors on one tollgate clock (each type's loop compiled once, in `tollgate_peers`).
fn floors<C: Clock + Clone>(group: &mut BenchmarkGroup<'_, WallTime>, clock: &C)
where
    ClockRead<C>: DirectLoops,
    ClockReadLoadCas<C>: DirectLoops,
    ClockReadHashLoadCas16<C>: DirectLoops,
    ClockReadHashLoadTagCas8<C>: DirectLoops,
    ClockReadHashPlaceLoadCas16<C>: DirectLoops,
    ClockReadHashPlaceLoadTagCas8<C>: DirectLoops,
{
    floor_row(group, "floor/clock_read", ClockRead(clock.clone()));
    floor_row(
        group,
        "floor/clock_read+load+cas",
        ClockReadLoadCas::new(clock.clone()),
    );
    floor_row(
        group,
        "floor/clock_read+hash+load16+cas16",
        ClockReadHashLoadCas16::new(clock.clone()),
    );
    floor_row(
        group,
        "floor/clock_read+hash+load8x2+cas8",
        ClockReadHashLoadTagCas8::new(clock.clone()),
    );
    floor_row(
        group,
        "floor/clock_read+hash+place+load16+cas16",
        ClockReadHashPlaceLoadCas16::new(clock.clone()),
    );
    floor_row(
        group,
        "floor/clock_read+hash+place+load8x2+cas8",
        ClockReadHashPlaceLoadTagCas8::new(clock.clone()),
    );
}

/// tollgate's direct limiters on one clock (each type's loop compiled once, in `tollgate_peers`).
fn tollgate_rows<C: Clock + Clone + 'static>(group: &mut BenchmarkGroup<'_, WallTime>, clock: &C)
where
    DirectLimiter<TokenBucket, C>: DirectLoops,
    DirectLimiter<LeakyBucket, C>: DirectLoops,
    DirectLimiter<FixedWindow, C>: DirectLoops,
    DirectLimiter<SlidingWindow, C>: DirectLoops,
    LogLimiter<C>: DirectLoops,
    MinimalGcra<C>: DirectLoops,
    MinimalFixedWindow<C>: DirectLoops,
    MinimalSlidingWindow<C>: DirectLoops,
    DirectLimiter<Live<TokenBucket>, C>: DirectLoops,
    DirectLimiter<Live<FixedWindow>, C>: DirectLoops,
    DirectLimiter<Live<SlidingWindow>, C>: DirectLoops,
    LogLimiter<C, Live<SlidingLog>>: DirectLoops,
{
    contender(group, &tollgate_token_bucket(clock.clone()));
    contender(group, &tollgate_leaky_bucket(clock.clone()));
    contender(group, &tollgate_fixed_window(clock.clone()));
    contender(group, &tollgate_sliding_window(clock.clone()));
    // The same windows with their 128-bit state (a limit too large for one word): the 16-byte
    // cell's compare-and-swap.
    contender(group, &tollgate_fixed_window_wide(clock.clone()));
    contender(group, &tollgate_sliding_window_wide(clock.clone()));
    contender(group, &TollgateLog(clock.clone()));
    // The same quotas, changeable live: one snapshot load more per decision.
    contender(group, &tollgate_token_bucket_live(clock.clone()));
    contender(group, &tollgate_fixed_window_live(clock.clone()));
    contender(group, &tollgate_sliding_window_live(clock.clone()));
    contender(group, &TollgateLogLive(clock.clone()));
    // One, two and three policies per request.
    for policies in 1..=3 {
        contender(group, &TollgateSet::new(clock.clone(), policies));
    }
    // The references (not limiters): each algorithm's decision without what a real limiter
    // adds, timed as tollgate's are.
    contender(group, &MinimalBucket(clock.clone()));
    contender(group, &MinimalFixed(clock.clone()));
    contender(group, &MinimalSliding(clock.clone()));
}

fn precise(c: &mut Criterion) {
    let clock = PreciseClock::new();
    let mut group = c.benchmark_group("direct/precise");
    group.throughput(Throughput::Elements(1));
    floors(&mut group, &clock);
    floor_row(&mut group, "floor/std_instant_now", InstantRead);
    floor_row(
        &mut group,
        "floor/governor_clock_read",
        GovernorClockRead::new(QuantaClock::default()),
    );
    tollgate_rows(&mut group, &clock);
    contender(&mut group, &GovernorDirect(QuantaClock::default()));
    contender(
        &mut group,
        &RatelimitDirect::new("ratelimit", || TollgateElapsed::new(PreciseClock::new())),
    );
    contender(
        &mut group,
        &RatelimitDirect::new("ratelimit_std", ratelimit::StdClock::new),
    );
    contender(&mut group, &MutexBucketDirect);
    group.finish();
}

fn coarse(c: &mut Criterion) {
    let clock = CoarseClock::new();
    // governor's upkeep thread (its quanta 0.12, a separate one from tollgate's quanta 0.13),
    // refreshing at the interval tollgate's coarse clock uses.
    let upkeep = QuantaUpkeepClock::from_interval(COARSE_UPKEEP_INTERVAL)
        .expect("governor's quanta upkeep thread starts");
    let mut group = c.benchmark_group("direct/coarse");
    group.throughput(Throughput::Elements(1));
    floors(&mut group, &clock);
    floor_row(
        &mut group,
        "floor/governor_clock_read",
        GovernorClockRead::new(upkeep.clone()),
    );
    tollgate_rows(&mut group, &clock);
    contender(&mut group, &GovernorDirect(upkeep));
    contender(
        &mut group,
        &RatelimitDirect::new("ratelimit", || TollgateElapsed::new(CoarseClock::new())),
    );
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = precise, coarse
}
criterion_main!(benches);
