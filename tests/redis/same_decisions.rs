//! One table of scenarios (arrival times, weights, expected admissions), run against the local
//! limiters and against Redis in client-time mode, on one `redis-server` and on a Redis Cluster
//! of three masters (each scenario's key in its own slot): every decision must be the same.
//!
//! Rounding rule (docs/distributed.md): the scripts work in whole microseconds (a client time is
//! rounded down to one, a bucket's interval up to one, a window must be whole). With parameters
//! and times in whole microseconds, as here, the decisions are equal, field for field, to the
//! nanosecond.

use std::time::Duration;

use crate::redis_common::cluster::RedisCluster;
use crate::redis_common::{client_time_limiter, raw_connection, shared_database, Backend};
use redis::AsyncCommands;
use tollgate::algorithm::Algorithm;
use tollgate::distributed::{DecidedBy, RedisAlgorithm, RedisLimiter};
use tollgate::{
    Decision, DirectLimiter, FixedWindow, LeakyBucket, LogLimiter, ManualClock, Quota, SlidingLog,
    SlidingWindow, Timestamp, TokenBucket,
};

/// 00:00 of a minute (1_700_000_040 s since the epoch), in microseconds: scenario times are
/// offsets from it, so "59 s" is 00:59.
const BASE_MICROS: i64 = 1_700_000_040_000_000;
const SECOND: i64 = 1_000_000;

/// `times` requests of weight `weight` at `at` µs after BASE, of which `admitted` pass.
#[derive(Clone, Copy, Debug)]
struct Step {
    at: i64,
    weight: u64,
    peek: bool,
    times: u32,
    admitted: u32,
}

const fn check(at: i64, times: u32, admitted: u32) -> Step {
    Step {
        at,
        weight: 1,
        peek: false,
        times,
        admitted,
    }
}

const fn weighted(at: i64, weight: u64, admitted: bool) -> Step {
    Step {
        at,
        weight,
        peek: false,
        times: 1,
        admitted: admitted as u32,
    }
}

const fn peek(at: i64, weight: u64, admitted: bool) -> Step {
    Step {
        at,
        weight,
        peek: true,
        times: 1,
        admitted: admitted as u32,
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Token,
    Leaky,
    Fixed,
    Sliding,
    Log,
}

struct Scenario {
    name: &'static str,
    kind: Kind,
    quota: Quota,
    steps: Vec<Step>,
}

fn quota(text: &str) -> Quota {
    text.parse().unwrap()
}

fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "token bucket: capacity 10, refill 2/s",
            kind: Kind::Token,
            quota: quota("2/s burst 10"),
            steps: vec![
                peek(0, 1, true),
                check(0, 12, 10),
                // The next token arrives at 0.5 s exactly, not a microsecond before.
                check(SECOND / 2 - 1, 1, 0),
                check(SECOND / 2, 2, 1),
                check(SECOND, 2, 1),
                check(7 * SECOND, 12, 10),
                peek(7 * SECOND + SECOND / 4, 1, false),
            ],
        },
        Scenario {
            name: "token bucket: weights, peek, weight 0, a clock that steps back",
            kind: Kind::Token,
            quota: quota("10/s burst 5"),
            steps: vec![
                weighted(0, 3, true),
                weighted(0, 3, false),
                peek(0, 2, true),
                weighted(0, 2, true),
                weighted(0, 0, true),
                weighted(-SECOND, 1, false),
                weighted(SECOND / 4, 2, true),
                weighted(SECOND / 4, 5, false),
                weighted(10 * SECOND, 5, true),
            ],
        },
        Scenario {
            name: "leaky bucket shaper: 2/s, up to 2 waiting",
            kind: Kind::Leaky,
            quota: quota("2/s burst 3"),
            steps: vec![
                check(0, 4, 3),
                check(SECOND * 4 / 10, 1, 0),
                check(SECOND / 2, 1, 1),
                weighted(SECOND / 2, 0, true),
                peek(SECOND, 2, false),
                weighted(3 * SECOND, 2, true),
                check(-SECOND, 1, 0),
            ],
        },
        Scenario {
            name: "fixed window boundary spike: 100/min, 150 at 00:59 and 150 at 01:01",
            kind: Kind::Fixed,
            quota: quota("100/min"),
            steps: vec![
                check(59 * SECOND, 150, 100),
                check(60 * SECOND - 1, 1, 0),
                check(61 * SECOND, 150, 100),
                check(30 * SECOND, 1, 0),
                weighted(120 * SECOND, 100, true),
                peek(121 * SECOND, 1, false),
                weighted(121 * SECOND, 0, true),
            ],
        },
        Scenario {
            name: "sliding window estimate: 80 before, 30 now, 25% in",
            kind: Kind::Sliding,
            quota: quota("100/min"),
            steps: vec![
                check(30 * SECOND, 80, 80),
                check(75 * SECOND, 30, 30),
                // 30 + 80 * 0.75 = 90 < 100: allowed (remaining 9).
                check(75 * SECOND, 1, 1),
                check(75 * SECOND, 20, 9),
                // Full: the next unit passes when 80 * (w - e) / w drops to 59, at 01:15.75.
                check(75 * SECOND + 750_000 - 1, 1, 0),
                check(75 * SECOND + 750_000, 2, 1),
                weighted(90 * SECOND, 5, true),
                weighted(90 * SECOND, 0, true),
                check(10 * SECOND, 1, 0),
                peek(150 * SECOND, 30, true),
                weighted(200 * SECOND, 100, true),
            ],
        },
        Scenario {
            name: "sliding window: retry-after between two microseconds (rounded up)",
            kind: Kind::Sliding,
            quota: Quota::new(7, Duration::from_secs(3)).unwrap(),
            steps: vec![
                check(SECOND / 10, 7, 7),
                check(3 * SECOND + SECOND / 10, 3, 0),
                weighted(3 * SECOND + SECOND / 10, 6, false),
                check(4 * SECOND, 3, 2),
                check(5 * SECOND + 1, 7, 2),
            ],
        },
        Scenario {
            // A second, not a millisecond: in client-time mode a key's expiry still runs on the
            // server's clock (`docs/distributed.md`), so a window much shorter than the test's
            // own pace between steps (milliseconds on a loaded machine) would expire mid-scenario.
            name: "sliding log: 3 per second, weights, and the oldest unit leaving",
            kind: Kind::Log,
            quota: Quota::new(3, Duration::from_secs(1)).unwrap(),
            steps: vec![
                weighted(100_000, 1, true),
                weighted(400_000, 2, true),
                weighted(900_000, 1, false),
                weighted(900_000, 2, false),
                peek(1_100_000, 1, true),
                weighted(1_100_000, 1, true),
                weighted(1_100_000, 0, true),
                weighted(1_399_999, 1, false),
                weighted(1_400_000, 1, true),
                weighted(200_000, 1, true),
                check(5_000_000, 4, 3),
            ],
        },
        Scenario {
            name: "sliding log: no boundary spike, 150 at 00:59 and 150 at 01:01",
            kind: Kind::Log,
            quota: quota("100/min"),
            steps: vec![
                check(59 * SECOND, 150, 100),
                check(61 * SECOND, 150, 0),
                check(119 * SECOND, 150, 100),
                weighted(30 * SECOND, 1, false),
            ],
        },
    ]
}

type Local = Box<dyn Fn(u64, Timestamp, bool) -> Decision>;

fn direct<A: Algorithm + 'static>(algorithm: A) -> Local {
    let limiter = DirectLimiter::with_clock(algorithm, ManualClock::new());
    Box::new(move |cost, now, peek| match peek {
        true => limiter.peek_n_at(cost, now).unwrap(),
        false => limiter.check_n_at(cost, now).unwrap(),
    })
}

fn build(kind: Kind, quota: Quota) -> (Local, RedisAlgorithm) {
    match kind {
        Kind::Token => {
            let a = TokenBucket::new(quota).unwrap();
            (direct(a), a.into())
        }
        Kind::Leaky => {
            let a = LeakyBucket::new(quota).unwrap();
            (direct(a), a.into())
        }
        Kind::Fixed => {
            let a = FixedWindow::new(quota).unwrap();
            (direct(a), a.into())
        }
        Kind::Sliding => {
            let a = SlidingWindow::new(quota).unwrap();
            (direct(a), a.into())
        }
        Kind::Log => {
            let a = SlidingLog::new(quota).unwrap();
            let limiter = LogLimiter::with_clock(a, ManualClock::new());
            let local: Local = Box::new(move |cost, now, peek| match peek {
                true => limiter.peek_n_at(cost, now).unwrap(),
                false => limiter.check_n_at(cost, now).unwrap(),
            });
            (local, a.into())
        }
    }
}

/// One request of `weight` for `key` at `now` (the caller has set the limiters' clock to it),
/// a peek if `peek`, through the local limiter and through Redis: Redis must decide it, and
/// decide it as the local limiter does (`context` says which step failed). Returns the decision.
async fn same_decision(
    local: &Local,
    remote: &RedisLimiter,
    key: &str,
    (weight, now, peek): (u64, Timestamp, bool),
    context: impl Fn() -> String,
) -> Decision {
    let expected = local(weight, now, peek);
    let answer = match peek {
        true => remote.peek_n(key, weight).await,
        false => remote.check_n(key, weight).await,
    }
    .unwrap();
    assert_eq!(answer.decided_by, DecidedBy::Redis, "{}", context());
    assert_eq!(answer.decision, expected, "{}", context());
    expected
}

#[tokio::test(flavor = "current_thread")]
async fn redis_decides_as_the_local_limiters() {
    the_table_decides_as_the_local_limiters(&shared_database()).await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_redis_cluster_decides_as_the_local_limiters() {
    the_table_decides_as_the_local_limiters(RedisCluster::shared()).await;
}

/// Every scenario of the table, each on its own key, on `server`.
async fn the_table_decides_as_the_local_limiters(server: &impl Backend) {
    let clock = ManualClock::new();
    let mut compared = 0;
    for (number, scenario) in scenarios().into_iter().enumerate() {
        let (local, algorithm) = build(scenario.kind, scenario.quota);
        let remote = client_time_limiter(server, algorithm, &clock, "same:").await;
        let key = number.to_string();
        for (index, step) in scenario.steps.iter().enumerate() {
            let micros = u64::try_from(BASE_MICROS + step.at).unwrap();
            let now = Timestamp::from_nanos(micros * 1_000);
            clock.set(now);
            let mut admitted = 0;
            for attempt in 0..step.times {
                let expected = same_decision(&local, &remote, &key, (step.weight, now, step.peek), || {
                    format!("{}: step {index} ({step:?}), attempt {attempt}", scenario.name)
                })
                .await;
                admitted += u32::from(expected.is_allowed());
                compared += 1;
            }
            assert_eq!(
                admitted, step.admitted,
                "{}: step {index} ({step:?}) admissions",
                scenario.name
            );
        }
    }
    assert!(compared > 800, "only {compared} decisions compared");
}

/// A small deterministic generator (xorshift64*): a failure replays from its seed.
struct Random(u64);

impl Random {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// Random arrivals (mostly close together, some a window apart, some stepping back), weights
/// (mostly 1, up to the capacity, some 0) and peeks, against each algorithm: every decision of
/// Redis must be the local limiter's. The logs hold dozens of admission times, so their
/// searches run over many records; the third is a list log (above `PACKED_LOG_LIMIT`).
///
/// Times fall on whole seconds, and every parameter is whole seconds: each key then lives at
/// least a second of real time after a write (its TTL is client time, counted on the server's
/// clock, `docs/distributed.md`), longer than a case runs, so no key expires while its state
/// still matters on the test's clock. The table above covers boundaries to the microsecond.
#[tokio::test(flavor = "current_thread")]
async fn redis_decides_as_the_local_limiters_on_random_arrivals() {
    random_arrivals_decide_as_the_local_limiters(&shared_database()).await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_redis_cluster_decides_as_the_local_limiters_on_random_arrivals() {
    random_arrivals_decide_as_the_local_limiters(RedisCluster::shared()).await;
}

/// The random arrivals of each case, on `server`.
async fn random_arrivals_decide_as_the_local_limiters(server: &impl Backend) {
    let clock = ManualClock::new();
    let per = |limit: u64, seconds: u64| Quota::new(limit, Duration::from_secs(seconds)).unwrap();
    // The algorithm, its quota, and its window (or refill of the whole burst) in seconds.
    let cases = [
        (Kind::Token, per(1, 4).with_burst(5).unwrap(), 20),
        (Kind::Leaky, per(1, 4).with_burst(4).unwrap(), 16),
        (Kind::Fixed, per(7, 16), 16),
        (Kind::Sliding, per(7, 16), 16),
        (Kind::Log, per(7, 16), 16),
        (Kind::Log, per(40, 80), 80),
        // Above `PACKED_LOG_LIMIT`: the list script.
        (Kind::Log, per(300, 160), 160),
    ];
    for (number, (kind, quota, window)) in cases.into_iter().enumerate() {
        let (local, algorithm) = build(kind, quota);
        let capacity = algorithm.capacity();
        let remote = client_time_limiter(server, algorithm, &clock, "random:").await;
        let key = number.to_string();
        let mut random = Random(0x9E37_79B9_7F4A_7C15 ^ number as u64);
        // Seconds after BASE (far enough that no step back crosses it).
        let mut at: u64 = 100_000;
        let (mut admitted, mut refused) = (0, 0);
        for step in 0..400 {
            at = match random.below(100) {
                0..60 => at + random.below(window / 8 + 1),
                60..85 => at,
                85..95 => at + random.below(2 * window),
                _ => at - random.below(window / 2),
            };
            let weight = match random.below(10) {
                0..7 => 1,
                7 => 0,
                _ => random.below(capacity + 1),
            };
            let peek = random.below(10) == 0;
            let now = Timestamp::from_nanos((BASE_MICROS as u64 + at * 1_000_000) * 1_000);
            clock.set(now);
            let expected = same_decision(&local, &remote, &key, (weight, now, peek), || {
                format!("{kind:?} {number}: step {step}, weight {weight}, peek {peek}, at {at}")
            })
            .await;
            if weight > 0 && !peek {
                admitted += u32::from(expected.is_allowed());
                refused += u32::from(!expected.is_allowed());
            }
        }
        // Both admitted and refused decisions were compared.
        assert!(
            admitted >= 20 && refused >= 20,
            "{kind:?} {number}: {admitted} admitted, {refused} refused"
        );
    }
}

/// The scripts' limits, against the local limiters: random arrivals in microsecond steps around
/// window edges (some stepping back), weights up to the capacity, and peeks, from time 0, from
/// just below the end of the scripts' time (2^52 µs, `docs/distributed.md`, "Time") and from
/// today, for each algorithm at ordinary settings, at the documented maxima (a one-day sliding
/// window of 26,062 and a token bucket of that burst; windows of 2^51 µs) and at windows and
/// intervals of odd microseconds: every decision is the local one, field for field.
///
/// The walk lingers microseconds before a window's end while real time runs on, and a key's TTL
/// is client time counted on the server's clock (a key written 1 µs before its window ends
/// lives 1 ms): so that no key expires while the test's frozen clock still needs its state, each
/// key is made persistent after every call. On a loaded machine the `PERSIST` can still come
/// after such a key has expired (a millisecond of real time between the decision's answer and
/// it): a key found gone while the local state still counts, with a reset-after under
/// [`RACED_TTL`], starts both sides afresh (counted, and bounded); one gone with a longer
/// reset-after fails the test. Expiry has its own tests (`keys.rs`, `quota_changes.rs`).
#[tokio::test(flavor = "current_thread")]
async fn redis_decides_as_the_local_limiters_at_extreme_times() {
    const END: u64 = 1 << 52;
    let server = shared_database();
    let mut raw = raw_connection(&server).await;
    let per = |limit: u64, window: Duration| Quota::new(limit, window).unwrap();
    let (hour, day) = (Duration::from_secs(3_600), Duration::from_secs(86_400));
    let micros = Duration::from_micros;
    // The algorithm, its quota, and its window (or refill of the whole burst) in µs.
    let cases = [
        (
            Kind::Token,
            per(1, Duration::from_secs(4)).with_burst(5).unwrap(),
            20_000_000,
        ),
        (
            Kind::Leaky,
            per(1, Duration::from_secs(4)).with_burst(4).unwrap(),
            16_000_000,
        ),
        (Kind::Fixed, per(7, hour), 3_600_000_000),
        (Kind::Sliding, per(7, hour), 3_600_000_000),
        (Kind::Log, per(7, hour), 3_600_000_000),
        (Kind::Log, per(256, hour), 3_600_000_000),
        (Kind::Log, per(300, hour), 3_600_000_000),
        (Kind::Sliding, per(26_062, day), 86_400_000_000),
        (
            Kind::Token,
            per(1, day).with_burst(26_062).unwrap(),
            86_400_000_000 * 26_062,
        ),
        (Kind::Fixed, per(5, micros(1 << 51)), 1 << 51),
        (Kind::Sliding, per(1, micros(1 << 51)), 1 << 51),
        (Kind::Log, per(5, micros(1 << 51)), 1 << 51),
        (Kind::Fixed, per(3, micros(1_000_003)), 1_000_003),
        (Kind::Sliding, per(9, micros(7_000_001)), 7_000_001),
        (Kind::Log, per(9, micros(7_000_001)), 7_000_001),
        (
            Kind::Token,
            per(7, micros(7_000_007)).with_burst(3).unwrap(),
            3_000_003,
        ),
        (
            Kind::Leaky,
            per(7, micros(7_000_007)).with_burst(3).unwrap(),
            3_000_003,
        ),
    ];
    let (mut compared, mut raced) = (0, 0);
    for (number, (kind, quota, window)) in cases.into_iter().enumerate() {
        let starts = [0, END - 1 - 3 * window.min(END / 4), BASE_MICROS as u64];
        for (origin, start) in starts.into_iter().enumerate() {
            let clock = ManualClock::new();
            let (mut local, algorithm) = build(kind, quota);
            let capacity = algorithm.capacity();
            let prefix = format!("extreme{number}-{origin}:");
            let remote = client_time_limiter(&server, algorithm, &clock, &prefix).await;
            let mut random = Random((0x1234_5678 ^ start ^ window) | 1);
            let mut at = start;
            for step in 0..300 {
                let next = match random.below(100) {
                    0..40 => at + random.below(3),
                    40..60 => at + random.below(window / 4 + 1),
                    // Just before, at and after the end of the window that holds `at`.
                    60..70 => (at / window + 1) * window - 1 + random.below(3),
                    70..80 => at + window - 1 + random.below(3),
                    80..90 => at,
                    _ => at.saturating_sub(random.below(window / 2 + 1)),
                };
                at = next.min(END - 1);
                let weight = match random.below(10) {
                    0..5 => 1,
                    5 => 0,
                    _ => random.below(capacity + 1),
                };
                let peek = random.below(10) == 0;
                let now = Timestamp::from_nanos(at * 1_000);
                clock.set(now);
                let context = || {
                    format!(
                        "{kind:?} {number}/{origin}: step {step} at {at} µs, weight {weight}, peek {peek}"
                    )
                };
                let decided = same_decision(&local, &remote, "k", (weight, now, peek), context).await;
                let key = remote.redis_key("k");
                let _: bool = raw.persist(&key).await.unwrap();
                compared += 1;
                // Past the PERSIST the key stays, or is gone for good: if the local state still
                // counts after a check (a peek's reset-after is that of the check it previews),
                // it must be there, unless its TTL raced the PERSIST.
                let counts = !peek && !decided.reset_after().is_zero();
                if counts && !raw.exists::<_, bool>(&key).await.unwrap() {
                    assert!(
                        decided.reset_after() < RACED_TTL,
                        "{}: the key is gone while its state counts for {:?}",
                        context(),
                        decided.reset_after()
                    );
                    local = build(kind, quota).0;
                    raced += 1;
                }
            }
        }
    }
    assert_eq!(compared, 17 * 3 * 300);
    // A few per run at most on a loaded machine (about 170 steps land 1 µs before a window's
    // end): many would mean keys expire early, not a race.
    assert!(raced <= 40, "{raced} keys expired before their PERSIST");
}

/// A key whose state counts for less than this (a TTL of a few ms of the server's real time)
/// may expire before the test's `PERSIST` reaches it.
const RACED_TTL: Duration = Duration::from_millis(20);

/// The packed log replies with one integer where its numbers fit one below 2^53, else with its
/// packed string (`sliding_log.lua`, "Returns"); either way it decides as the local limiter. At
/// 5 units per 2^51 µs: an admission decided 2 * 10^15 µs behind the newest record (a clock
/// that went back: `(at - now) * 6` is past 2^53), a refusal there (its reset is past the
/// window), an admission at the clock (one integer) and a refusal there (its retry times the
/// window is past 2^53).
#[tokio::test(flavor = "current_thread")]
async fn a_log_replies_packed_where_its_numbers_do_not_fit_one_integer() {
    const END: u64 = 1 << 52;
    const BEHIND: u64 = END - 1 - 2_000_000_000_000_000;
    let server = shared_database();
    let clock = ManualClock::new();
    let quota = Quota::new(5, Duration::from_micros(1 << 51)).unwrap();
    let (local, algorithm) = build(Kind::Log, quota);
    let remote = client_time_limiter(&server, algorithm, &clock, "fit:").await;
    let steps = [
        (END - 1, 1, true),
        (BEHIND, 1, true),
        (BEHIND, 4, false),
        (END - 1, 3, true),
        (END - 1, 1, false),
    ];
    for (index, (at, weight, admitted)) in steps.into_iter().enumerate() {
        let now = Timestamp::from_nanos(at * 1_000);
        clock.set(now);
        let decision = same_decision(&local, &remote, "k", (weight, now, false), || {
            format!("step {index}: weight {weight} at {at} µs")
        })
        .await;
        assert_eq!(decision.is_allowed(), admitted, "step {index}");
    }
}

/// A packed log appends each admission in place and keeps records that left the window until
/// an admission that adds a record finds them at least a sixteenth of those still in the window,
/// then rebuilds the string without them (`docs/distributed.md`, "Sliding log"): over many
/// windows of distinct and repeated times, at limits 4 and 40, every decision is the local
/// limiter's, the string never holds more than `limit + limit / 16` records (4 and 42; the
/// previous rule kept up to `limit + min(limit, 16)`), every path runs (the string grows by one
/// record, shrinks, and at limit 40 holds records that left the window), and the key lives
/// exactly until the log is empty.
#[tokio::test(flavor = "current_thread")]
async fn a_packed_log_keeps_a_bounded_string_and_decides_as_the_local_limiter() {
    let server = shared_database();
    let mut raw = raw_connection(&server).await;
    // (limit, µs per step of the arrivals, % of arrivals a window after the previous one):
    // windows of 10 s that hold up to about 5 and 50 arrivals, at limit 40 rolling for long
    // stretches, so that records leave the window between admissions.
    for (limit, unit, jumps) in [(4, 1_000_000, 15), (40, 100_000, 2)] {
        let clock = ManualClock::new();
        let quota = Quota::new(limit, Duration::from_secs(10)).unwrap();
        let (local, algorithm) = build(Kind::Log, quota);
        let prefix = format!("bounded{limit}:");
        let remote = client_time_limiter(&server, algorithm, &clock, &prefix).await;
        let key = remote.redis_key("bounded");
        // 16 bytes of trailer and 12 per record, and one record of no unit (on a client's
        // time, the latest time a refusal was decided at).
        let bound = 16 + 12 * (limit + limit / 16 + 1) as usize;
        let mut random = Random(0x2545_F491_4F6C_DD1D);
        let mut at: u64 = 100_000;
        // The distinct times admitted, oldest first (the test's own model of the records).
        let mut times: Vec<u64> = Vec::new();
        let (mut length, mut grew, mut shrank, mut admitted, mut kept_old) = (0, 0, 0, 0, 0);
        for step in 0..600 {
            at = match random.below(100) {
                percent if percent < jumps => at + 11_000_000,
                percent if percent < jumps + 15 => at,
                _ => at + (1 + random.below(3)) * unit,
            };
            let weight = if random.below(5) == 0 { 2 } else { 1 };
            let now = Timestamp::from_nanos((BASE_MICROS as u64 + at) * 1_000);
            clock.set(now);
            let expected = same_decision(&local, &remote, "bounded", (weight, now, false), || {
                format!("limit {limit}, step {step}, weight {weight}, at {at}")
            })
            .await;
            let stored: usize = redis::cmd("STRLEN")
                .arg(&key)
                .query_async(&mut raw)
                .await
                .unwrap();
            assert!(
                stored <= bound,
                "limit {limit}, step {step}: {stored} bytes stored"
            );
            if expected.is_allowed() {
                admitted += 1;
                if times.last() != Some(&at) {
                    times.push(at);
                }
                grew += u32::from(stored == length + 12);
                shrank += u32::from(stored < length);
                // Records that left the window (at or before `at - 10 s`) are still stored.
                let in_window = times.iter().filter(|&&t| t + 10_000_000 > at).count();
                kept_old += u32::from(stored > 16 + 12 * in_window);
                let ttl: i64 = redis::cmd("PTTL").arg(&key).query_async(&mut raw).await.unwrap();
                let reset = i64::try_from(expected.reset_after().as_millis()).unwrap();
                assert!(
                    ttl > 0 && ttl <= reset + 1 && ttl + 100 > reset,
                    "limit {limit}, step {step}: ttl {ttl} ms, reset {reset} ms"
                );
            } else {
                // A refusal adds no unit: at most the record of no unit that holds its time, at
                // the end, written over the one there.
                assert!(
                    stored == length || stored == length + 12,
                    "limit {limit}, step {step}: a refusal wrote {stored} bytes over {length}"
                );
            }
            length = stored;
        }
        // Up to limit 17 a record that left the window goes at the next admission that adds one.
        let old_expected = if limit > 17 { 5 } else { 0 };
        println!("limit {limit}: {admitted} admitted, grew {grew}, shrank {shrank}, kept old {kept_old}");
        assert!(
            admitted >= 100 && grew >= 50 && shrank >= 5 && kept_old >= old_expected,
            "limit {limit}: {admitted} admitted, grew {grew} times, shrank {shrank} times, \
             {kept_old} with old records"
        );
    }
}
