//! tollgate's keyed limiter beside governor's (`RateLimiter` on its DashMap state store, as
//! `RateLimiter::keyed` builds it), on `u64` keys and the same quota (1/s, burst 1,000,000,000:
//! every decision is admitted and adds debt, so no key is ever idle), measured in the same run.
//!
//! Every scenario runs on both clock kinds, each group holding both implementations as
//! `implementation/parameter`:
//!
//! - `keyed/{precise,coarse}/hot_key`: one key, again and again;
//! - `keyed/{precise,coarse}/round_robin`: 10,000 and 1,000,000 keys, all inserted before timing,
//!   decided in turn;
//! - `keyed/{precise,coarse}/insert`: fresh keys into an empty limiter built for 1,000,000 keys,
//!   an iteration being a whole fill from empty to 1,000,000 keys (so its time in ms is the mean
//!   ns per insert);
//! - `keyed/{precise,coarse}/threads`: 1 and 2 threads, each on its own 1,000 keys (`distinct`)
//!   or all on one key (`shared`); the throughput is decisions per second, all threads together
//!   (each thread times itself; a run lasts as long as its slowest thread). The 2-thread rows
//!   mean something only with two otherwise idle cores.
//!
//! `precise` is tollgate's `PreciseClock` beside governor's default `QuantaClock` (a clock read
//! per decision); `coarse` is tollgate's `CoarseClock` beside governor's `QuantaUpkeepClock`
//! (an upkeep thread publishes the time every millisecond, a decision loads it).
//!
//! governor's DashMap is pre-sized for the keys of each scenario, as tollgate's table is. Every
//! row is timed the same way, with `iter_custom`, by the same never-inlined loops; building and
//! filling limiters (only for rows that run), spawning and joining threads and every correctness
//! check are outside the timed region.
//!
//! Run: `cargo bench -p tollgate-peers --bench keyed`.

use std::cell::OnceCell;
use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use governor::clock::{QuantaClock, QuantaUpkeepClock};
use tollgate::clock::COARSE_UPKEEP_INTERVAL;
use tollgate::{Clock, CoarseClock, PreciseClock};
use tollgate_peers::{Governor, Keyed, Tollgate};

/// The table the hot-key and thread scenarios run in: built for this many keys.
const SMALL_TABLE: usize = 10_000;
/// Key counts of the round-robin scenario (each in a limiter built for exactly that many).
const ROUND_ROBIN: [u64; 2] = [10_000, 1_000_000];
/// The insert scenario fills limiters built for this many keys, from empty up to this many.
const INSERT_CAPACITY: u64 = 1_000_000;
/// Keys of each thread in the `distinct` thread scenario.
const KEYS_PER_THREAD: u64 = 1_000;
/// Thread counts of the thread scenario.
const THREADS: [u64; 2] = [1, 2];

/// One implementation on one clock: how to build its limiter.
trait Contender {
    /// The limiter it builds.
    type Limiter: Keyed;
    /// The implementation's name, the first half of every benchmark id.
    const NAME: &'static str;
    /// A limiter built for `capacity` keys, holding none.
    fn build(&self, capacity: usize) -> Self::Limiter;
}

struct TollgateOn<C>(C);

impl<C: Clock + Clone> Contender for TollgateOn<C> {
    type Limiter = Tollgate<C>;
    const NAME: &'static str = "tollgate";
    fn build(&self, capacity: usize) -> Tollgate<C> {
        tollgate_peers::tollgate(capacity, self.0.clone())
    }
}

struct GovernorOn<C>(C);

impl<C: governor::clock::Clock + Clone + Sync> Contender for GovernorOn<C>
where
    C::Instant: Sync,
{
    type Limiter = Governor<C>;
    const NAME: &'static str = "governor";
    fn build(&self, capacity: usize) -> Governor<C> {
        tollgate_peers::governor(capacity, self.0.clone())
    }
}

/// A limiter built for `capacity` keys holding keys `0..keys`, each decided once (untimed).
fn filled<C: Contender>(contender: &C, capacity: usize, keys: u64) -> C::Limiter {
    let limiter = contender.build(capacity);
    for key in 0..keys {
        let answer = limiter.check(&key);
        assert!(
            C::Limiter::admitted(&answer),
            "{}: key {key} must be admitted",
            C::NAME
        );
    }
    assert_eq!(limiter.keys() as u64, keys, "{}: every key must be held", C::NAME);
    limiter
}

/// Times `iters` decisions for keys `first..first + count`, in turn.
///
/// Never inlined: every row, on the main thread or a spawned one, runs this same loop compiled
/// once per limiter type, so no row's codegen depends on its call site. (How much that matters:
/// an earlier version, where the loop was inlined into the main-thread closures, measured
/// tollgate's hot key at 34 ns there and 16 ns in the one-thread `shared_1t` row.)
#[inline(never)]
fn decide_in_turn<L: Keyed>(limiter: &L, iters: u64, first: u64, count: u64) -> Duration {
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

/// Times one decision for each of the keys `0..keys`, which are new to `limiter`. Never inlined,
/// as `decide_in_turn`.
#[inline(never)]
fn decide_each_once<L: Keyed>(limiter: &L, keys: u64) -> Duration {
    let start = Instant::now();
    for key in 0..keys {
        black_box(limiter.check(black_box(&key)));
    }
    start.elapsed()
}

/// Checks, untimed, that the key range a run decided is still admitted.
fn still_admitted<L: Keyed>(name: &str, limiter: &L, first: u64) {
    assert!(
        L::admitted(&limiter.check(&first)),
        "{name}: the allowed path must stay allowed"
    );
}

/// `threads` scoped threads, started together on a barrier, each timing its own `iters`
/// decisions on the keys `keys(thread)` gives; the run lasts as long as the slowest thread.
fn decide_in_threads<L: Keyed>(
    limiter: &L,
    iters: u64,
    threads: u64,
    keys: impl Fn(u64) -> (u64, u64),
) -> Duration {
    let barrier = Barrier::new(threads as usize);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|thread| {
                let (first, count) = keys(thread);
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    decide_in_turn(limiter, iters, first, count)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("a benchmark thread panicked"))
            .max()
            .unwrap_or_default()
    })
}

fn hot_key<C: Contender>(group: &mut BenchmarkGroup<'_, WallTime>, contender: &C) {
    let limiter = OnceCell::new();
    group.throughput(Throughput::Elements(1));
    group.bench_function(BenchmarkId::new(C::NAME, "1_key"), |b| {
        let limiter = limiter.get_or_init(|| filled(contender, SMALL_TABLE, 1));
        b.iter_custom(|iters| {
            let elapsed = decide_in_turn(limiter, iters, 0, 1);
            still_admitted(C::NAME, limiter, 0);
            elapsed
        })
    });
}

fn round_robin<C: Contender>(group: &mut BenchmarkGroup<'_, WallTime>, contender: &C, keys: u64) {
    let limiter = OnceCell::new();
    group.throughput(Throughput::Elements(1));
    group.bench_function(BenchmarkId::new(C::NAME, format!("{keys}_keys")), |b| {
        let limiter = limiter.get_or_init(|| filled(contender, keys as usize, keys));
        b.iter_custom(|iters| {
            let elapsed = decide_in_turn(limiter, iters, 0, keys);
            still_admitted(C::NAME, limiter, 0);
            elapsed
        })
    });
}

/// Fresh keys into an empty limiter built for `INSERT_CAPACITY` keys, until it holds that many.
///
/// The timed unit is one whole fill: a fresh empty limiter (built, and dropped, outside the timed
/// region) receives keys `0..INSERT_CAPACITY`, each decided once, so every iteration averages the
/// same range of occupancy (empty to full). With `INSERT_CAPACITY` = 1,000,000, the time per
/// iteration in milliseconds reads as the mean time per insert in nanoseconds; the throughput is
/// inserts per second.
fn insert<C: Contender>(group: &mut BenchmarkGroup<'_, WallTime>, contender: &C) {
    group.throughput(Throughput::Elements(INSERT_CAPACITY));
    group.bench_function(
        BenchmarkId::new(C::NAME, format!("fill_{INSERT_CAPACITY}")),
        |b| {
            b.iter_custom(|fills| {
                let mut total = Duration::ZERO;
                for _ in 0..fills {
                    let limiter = contender.build(INSERT_CAPACITY as usize);
                    total += decide_each_once(&limiter, INSERT_CAPACITY);
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

fn threads<C: Contender>(group: &mut BenchmarkGroup<'_, WallTime>, contender: &C) {
    let distinct = OnceCell::new();
    for threads in THREADS {
        group.throughput(Throughput::Elements(threads));
        group.bench_function(BenchmarkId::new(C::NAME, format!("distinct_{threads}t")), |b| {
            let distinct = distinct.get_or_init(|| {
                let keys = KEYS_PER_THREAD * THREADS[THREADS.len() - 1];
                filled(contender, SMALL_TABLE, keys)
            });
            b.iter_custom(|iters| {
                let elapsed = decide_in_threads(distinct, iters, threads, |thread| {
                    (thread * KEYS_PER_THREAD, KEYS_PER_THREAD)
                });
                still_admitted(C::NAME, distinct, 0);
                elapsed
            })
        });
    }
    drop(distinct);

    let shared = OnceCell::new();
    for threads in THREADS {
        group.throughput(Throughput::Elements(threads));
        group.bench_function(BenchmarkId::new(C::NAME, format!("shared_{threads}t")), |b| {
            let shared = shared.get_or_init(|| filled(contender, SMALL_TABLE, 1));
            b.iter_custom(|iters| {
                let elapsed = decide_in_threads(shared, iters, threads, |_| (0, 1));
                still_admitted(C::NAME, shared, 0);
                elapsed
            })
        });
    }
}

fn bench_clock<T: Contender, G: Contender>(c: &mut Criterion, clock_name: &str, ours: &T, theirs: &G) {
    let mut group = c.benchmark_group(format!("keyed/{clock_name}/hot_key"));
    hot_key(&mut group, ours);
    hot_key(&mut group, theirs);
    group.finish();

    let mut group = c.benchmark_group(format!("keyed/{clock_name}/round_robin"));
    for keys in ROUND_ROBIN {
        round_robin(&mut group, ours, keys);
        round_robin(&mut group, theirs, keys);
    }
    group.finish();

    // An iteration is a whole fill (`insert`): ten samples of equal length (flat), not a ramp.
    let mut group = c.benchmark_group(format!("keyed/{clock_name}/insert"));
    group.sampling_mode(SamplingMode::Flat).sample_size(10);
    insert(&mut group, ours);
    insert(&mut group, theirs);
    group.finish();

    let mut group = c.benchmark_group(format!("keyed/{clock_name}/threads"));
    threads(&mut group, ours);
    threads(&mut group, theirs);
    group.finish();
}

fn keyed(c: &mut Criterion) {
    bench_clock(
        c,
        "precise",
        &TollgateOn(PreciseClock::new()),
        &GovernorOn(QuantaClock::default()),
    );
    // tollgate's upkeep thread (quanta 0.13) and governor's (quanta 0.12: a separate one) both
    // run from here on, each refreshing its time every `COARSE_UPKEEP_INTERVAL`.
    let upkeep = QuantaUpkeepClock::from_interval(COARSE_UPKEEP_INTERVAL)
        .expect("governor's quanta upkeep thread starts");
    bench_clock(c, "coarse", &TollgateOn(CoarseClock::new()), &GovernorOn(upkeep));
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = keyed
}
criterion_main!(benches);
