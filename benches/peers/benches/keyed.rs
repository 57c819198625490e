//! tollgate's keyed limiter beside governor's (`RateLimiter` on its DashMap state store, as
//! `RateLimiter::keyed` builds it) and beside the keyed floor (`floor`: a table of the same size,
//! a hash, a clock read and one 16-byte load and CAS; `src/keyed_floor.rs`), on `u64` keys and the
//! same quota (one per 10 s, burst 100,000,000: every decision is admitted and adds debt, so no
//! key is ever idle), measured in the same run.
//!
//! Every scenario runs on both clock kinds, each group holding every implementation as
//! `implementation/parameter`:
//!
//! - `keyed/{precise,coarse}/hot_key`: one key, again and again, in a table built for 10,000;
//! - `keyed/{precise,coarse}/round_robin`: 1,000 / 10,000 / 100,000 / 1,000,000 keys, all inserted
//!   before timing, decided in turn;
//! - `keyed/{precise,coarse}/zipf`: the same key counts, decided in a Zipf-like order (exponent
//!   0.99; a fixed sequence of 2^20 keys built before timing, the same for every implementation);
//! - `keyed/{precise,coarse}/insert`: fresh keys into an empty limiter built for 1,000,000 keys,
//!   an iteration being a whole fill from empty to 1,000,000 keys (so its time in ms is the mean
//!   ns per insert). The floor has no insert.
//!
//! Beside them, tollgate's window counters with a 128-bit state (`u32::MAX` per 1,000 s: keys
//! in the locked table, a short lock per key), in the hot-key and round-robin scenarios up to
//! 10,000 keys: rows `tollgate_sliding_window_wide` and `tollgate_fixed_window_wide`. And, in
//! the same scenarios, the benchmark quota in a `Live` (`tollgate_live`: a quota that can change
//! while it runs, beside the plain `tollgate`), and policy sets of two and three policies
//! (`tollgate_policy_set_2`: the key's bucket and a fixed window per key;
//! `tollgate_policy_set_3`: and a global bucket; `src/changeable.rs`).
//!
//! With `--features metrics`, each scenario also has the row `tollgate_metered`: tollgate's
//! keyed limiter named, so that every decision is counted (`tollgate::metrics`), beside the
//! unnamed one in the same run (`cargo bench -p tollgate-peers --features metrics --bench keyed`).
//!
//! `precise` is tollgate's `PreciseClock` beside governor's default `QuantaClock` (a clock read
//! per decision); `coarse` is tollgate's `CoarseClock` beside governor's `QuantaUpkeepClock`
//! (an upkeep thread publishes the time every millisecond, a decision loads it). Threads:
//! `benches/contention.rs`.
//!
//! governor's DashMap is pre-sized for the keys of each scenario, as tollgate's table is. Every
//! row is timed the same way, with `iter_custom`, by the same never-inlined loops
//! (`tollgate_peers::timing`); building and filling limiters (only for rows that run) and every
//! correctness check are outside the timed region.
//!
//! Run: `cargo bench -p tollgate-peers --bench keyed` (or with the rest: `benches/run keyed`).

use std::cell::OnceCell;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use governor::clock::{QuantaClock, QuantaUpkeepClock};
use tollgate::clock::COARSE_UPKEEP_INTERVAL;
use tollgate::{CoarseClock, PreciseClock};
use tollgate_peers::zipf::zipf_sequence;
use tollgate_peers::{
    GovernorKeyed, Keyed, KeyedContender, KeyedFloorContender, KeyedLoops, TollgateKeyed, TollgateKeyedLive,
    TollgateKeyedSet, TollgateKeyedWindow, BURST,
};

/// The table the hot-key scenario runs in: built for this many keys.
const SMALL_TABLE: usize = 10_000;
/// Key counts of the round-robin and Zipf scenarios (each in a limiter built for exactly that
/// many, holding them all).
const KEY_COUNTS: [u64; 4] = [1_000, 10_000, 100_000, 1_000_000];
/// Length of each Zipf-like key sequence (cycled through).
const ZIPF_LEN: usize = 1 << 20;
/// The insert scenario fills limiters built for this many keys, from empty up to this many.
const INSERT_CAPACITY: u64 = 1_000_000;

/// Checks, untimed, that `key` is still admitted after a run.
fn still_admitted<L: Keyed>(name: &str, limiter: &L, key: u64) {
    assert!(
        L::admitted(&limiter.check(&key)),
        "{name}: the allowed path must stay allowed"
    );
}

/// The hot key's limiter, reused from sample to sample and built again (untimed) before the key
/// has taken half its burst: every admitted decision takes one of [`BURST`], so at about 12 ns a
/// decision a run of more than about 1.2 s on one limiter would reach the denied path, and the
/// check after it would stop the benchmark.
struct HotLimiter<L> {
    limiter: Option<L>,
    decided: u64,
}

impl<L> HotLimiter<L> {
    /// The limiter for `iters` more decisions on its one key.
    fn for_decisions(&mut self, iters: u64, build: impl FnOnce() -> L) -> &L {
        let total = self.decided.saturating_add(iters);
        if total > u64::from(BURST / 2) {
            self.limiter = None;
        }
        self.decided = if self.limiter.is_none() { iters } else { total };
        self.limiter.get_or_insert_with(build)
    }
}

fn hot_key<C: KeyedContender>(group: &mut BenchmarkGroup<'_, WallTime>, contender: &C) {
    let mut hot = HotLimiter {
        limiter: None,
        decided: 0,
    };
    group.throughput(Throughput::Elements(1));
    group.bench_function(BenchmarkId::new(C::NAME, "1_key"), |b| {
        b.iter_custom(|iters| {
            let limiter = hot.for_decisions(iters, || contender.filled(SMALL_TABLE, 1));
            let elapsed = limiter.decide_in_turn(iters, 0, 1);
            still_admitted(C::NAME, limiter, 0);
            elapsed
        })
    });
}

fn round_robin<C: KeyedContender>(group: &mut BenchmarkGroup<'_, WallTime>, contender: &C, keys: u64) {
    let limiter = OnceCell::new();
    group.throughput(Throughput::Elements(1));
    group.bench_function(BenchmarkId::new(C::NAME, keys), |b| {
        let limiter = limiter.get_or_init(|| contender.filled(keys as usize, keys));
        b.iter_custom(|iters| {
            let elapsed = limiter.decide_in_turn(iters, 0, keys);
            still_admitted(C::NAME, limiter, 0);
            elapsed
        })
    });
}

fn zipf<C: KeyedContender>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    contender: &C,
    keys: u64,
    sequence: &[u64],
) {
    let limiter = OnceCell::new();
    group.throughput(Throughput::Elements(1));
    group.bench_function(BenchmarkId::new(C::NAME, keys), |b| {
        let limiter = limiter.get_or_init(|| contender.filled(keys as usize, keys));
        let mut position = 0;
        b.iter_custom(|iters| {
            let elapsed = limiter.decide_in_sequence(iters, sequence, &mut position);
            still_admitted(C::NAME, limiter, sequence[0]);
            elapsed
        })
    });
}

/// Fresh keys into an empty limiter built for `INSERT_CAPACITY` keys, until it holds that many.
///
/// The timed unit is one whole fill: a fresh empty limiter is built and receives keys
/// `0..INSERT_CAPACITY`, each decided once, so every iteration averages the same range of
/// occupancy (empty to full). The build is timed with the fill: tollgate writes its whole table
/// when it is built (so the kernel maps its pages then), governor's pre-sized map is written as
/// keys arrive (its pages are mapped during the fill); timing one without the other would
/// charge the first touch of the memory to governor alone. The drop is not timed. With
/// `INSERT_CAPACITY` = 1,000,000, the time per iteration in milliseconds reads as the mean time
/// per insert in nanoseconds; the throughput is inserts per second.
fn insert<C: KeyedContender>(group: &mut BenchmarkGroup<'_, WallTime>, contender: &C) {
    group.throughput(Throughput::Elements(INSERT_CAPACITY));
    group.bench_function(
        BenchmarkId::new(C::NAME, format!("fill_{INSERT_CAPACITY}")),
        |b| {
            b.iter_custom(|fills| {
                let mut total = Duration::ZERO;
                for _ in 0..fills {
                    let start = Instant::now();
                    let limiter = black_box(contender.build(INSERT_CAPACITY as usize));
                    limiter.decide_each_once(INSERT_CAPACITY);
                    total += start.elapsed();
                    assert_eq!(
                        limiter.keys() as u64,
                        INSERT_CAPACITY,
                        "{}: every fresh key must be inserted",
                        C::NAME
                    );
                    still_admitted(C::NAME, &limiter, 0);
                }
                total
            })
        },
    );
}

/// The scenarios on one clock: tollgate (and, with feature `metrics`, tollgate named:
/// `metered`), governor, the floor.
fn bench_clock<T: KeyedContender, M: KeyedContender, G: KeyedContender, F: KeyedContender>(
    c: &mut Criterion,
    clock_name: &str,
    (ours, metered): (&T, Option<&M>),
    theirs: &G,
    floor: &F,
) {
    let mut group = c.benchmark_group(format!("keyed/{clock_name}/hot_key"));
    hot_key(&mut group, ours);
    if let Some(metered) = metered {
        hot_key(&mut group, metered);
    }
    hot_key(&mut group, theirs);
    hot_key(&mut group, floor);
    group.finish();

    let mut group = c.benchmark_group(format!("keyed/{clock_name}/round_robin"));
    for keys in KEY_COUNTS {
        round_robin(&mut group, ours, keys);
        if let Some(metered) = metered {
            round_robin(&mut group, metered, keys);
        }
        round_robin(&mut group, theirs, keys);
        round_robin(&mut group, floor, keys);
    }
    group.finish();

    let mut group = c.benchmark_group(format!("keyed/{clock_name}/zipf"));
    for keys in KEY_COUNTS {
        let sequence = zipf_sequence(keys, ZIPF_LEN);
        zipf(&mut group, ours, keys, &sequence);
        if let Some(metered) = metered {
            zipf(&mut group, metered, keys, &sequence);
        }
        zipf(&mut group, theirs, keys, &sequence);
        zipf(&mut group, floor, keys, &sequence);
    }
    group.finish();

    // An iteration is a whole fill (`insert`): ten samples of equal length (flat), not a ramp.
    let mut group = c.benchmark_group(format!("keyed/{clock_name}/insert"));
    group.sampling_mode(SamplingMode::Flat).sample_size(10);
    insert(&mut group, ours);
    if let Some(metered) = metered {
        insert(&mut group, metered);
    }
    insert(&mut group, theirs);
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

/// The wide window rows on one clock: the hot key and round-robin over 1,000 and 10,000 keys.
fn wide_windows<C: tollgate::Clock + Clone>(c: &mut Criterion, clock_name: &str, clock: C)
where
    TollgateKeyedWindow<tollgate::SlidingWindow, C>: KeyedContender,
    TollgateKeyedWindow<tollgate::FixedWindow, C>: KeyedContender,
{
    let sliding = TollgateKeyedWindow::sliding(clock.clone());
    let fixed = TollgateKeyedWindow::fixed(clock);
    let mut group = c.benchmark_group(format!("keyed/{clock_name}/hot_key"));
    hot_key(&mut group, &sliding);
    hot_key(&mut group, &fixed);
    group.finish();
    let mut group = c.benchmark_group(format!("keyed/{clock_name}/round_robin"));
    for keys in &KEY_COUNTS[..2] {
        round_robin(&mut group, &sliding, *keys);
        round_robin(&mut group, &fixed, *keys);
    }
    group.finish();
}

/// The changeable and policy-set rows on one clock: the hot key and round-robin over 1,000 and
/// 10,000 keys, beside the plain `tollgate` rows of `bench_clock`.
fn changeable<C: tollgate::Clock + Clone + 'static>(c: &mut Criterion, clock_name: &str, clock: C)
where
    TollgateKeyedLive<C>: KeyedContender,
    TollgateKeyedSet<C, 2>: KeyedContender,
    TollgateKeyedSet<C, 3>: KeyedContender,
{
    let live = TollgateKeyedLive::new(clock.clone());
    let two = TollgateKeyedSet::<C, 2>::new(clock.clone());
    let three = TollgateKeyedSet::<C, 3>::new(clock);
    let mut group = c.benchmark_group(format!("keyed/{clock_name}/hot_key"));
    hot_key(&mut group, &live);
    hot_key(&mut group, &two);
    hot_key(&mut group, &three);
    group.finish();
    let mut group = c.benchmark_group(format!("keyed/{clock_name}/round_robin"));
    for keys in &KEY_COUNTS[..2] {
        round_robin(&mut group, &live, *keys);
        round_robin(&mut group, &two, *keys);
        round_robin(&mut group, &three, *keys);
    }
    group.finish();
}

fn keyed(c: &mut Criterion) {
    let (ours, metered) = tollgate_pair(PreciseClock::new());
    bench_clock(
        c,
        "precise",
        (&ours, metered.as_ref()),
        &GovernorKeyed::new(QuantaClock::default()),
        &KeyedFloorContender(PreciseClock::new()),
    );
    wide_windows(c, "precise", PreciseClock::new());
    changeable(c, "precise", PreciseClock::new());
    // tollgate's upkeep thread (quanta 0.13) and governor's (quanta 0.12: a separate one) both
    // run from here on, each refreshing its time every `COARSE_UPKEEP_INTERVAL`.
    let upkeep = QuantaUpkeepClock::from_interval(COARSE_UPKEEP_INTERVAL)
        .expect("governor's quanta upkeep thread starts");
    let (ours, metered) = tollgate_pair(CoarseClock::new());
    bench_clock(
        c,
        "coarse",
        (&ours, metered.as_ref()),
        &GovernorKeyed::new(upkeep),
        &KeyedFloorContender(CoarseClock::new()),
    );
    wide_windows(c, "coarse", CoarseClock::new());
    changeable(c, "coarse", CoarseClock::new());
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = keyed
}
criterion_main!(benches);
