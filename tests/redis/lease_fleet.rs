//! A fleet of leased limiters, each with its own connection, sharing one key: together they
//! never admit more than the quota, and every unit taken from Redis is accounted for (spent,
//! still held, or dropped), at a frozen client time, at a moving one (every admission replayed
//! through the exact reference models) and on the server's clock; keyed and direct.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionLike;
use tollgate::distributed::{
    DecidedBy, FailurePolicy, LeasedLimiter, RedisAlgorithm, RedisLimiter, TimeSource,
};
use tollgate::{FixedWindow, ManualClock, SlidingWindow, Timestamp, TokenBucket};

use crate::redis_common::{raw_connection, shared_database, Backend};

use crate::reference::fixed_window::FixedWindowModel;
use crate::reference::sliding_window::SlidingWindowModel;
use crate::reference::token_bucket::TokenBucketModel;

pub(crate) const INSTANCES: usize = 6;
/// Each instance runs this many workers, each sending its requests one after the other (a
/// key's lease grows with what its process spends).
const WORKERS: usize = 4;
const REQUESTS_PER_WORKER: usize = 10;
const _: () = assert!(INSTANCES * WORKERS * REQUESTS_PER_WORKER > 100);

/// A leased limiter on `server`, failing closed (so that no decision of the policy is taken
/// for one of Redis's or a lease's), with a deadline no loaded machine reaches.
pub(crate) async fn leased(
    server: &impl Backend,
    algorithm: impl Into<RedisAlgorithm>,
    time: TimeSource,
    prefix: &str,
) -> LeasedLimiter {
    let policy = FailurePolicy::FailClosed {
        retry_after: Duration::from_secs(1),
    };
    server
        .limiter(algorithm.into(), policy)
        .time(time)
        .deadline(Duration::from_secs(5))
        .prefix(prefix)
        .leased()
        .connect()
        .await
        .unwrap()
}

/// [`leased`] with leases of up to `max_lease` units.
pub(crate) async fn leased_up_to(
    server: &impl Backend,
    algorithm: impl Into<RedisAlgorithm>,
    time: TimeSource,
    prefix: &str,
    max_lease: u64,
) -> LeasedLimiter {
    let policy = FailurePolicy::FailClosed {
        retry_after: Duration::from_secs(1),
    };
    server
        .limiter(algorithm.into(), policy)
        .time(time)
        .deadline(Duration::from_secs(5))
        .prefix(prefix)
        .leased()
        .max_lease(max_lease)
        .connect()
        .await
        .unwrap()
}

/// One request, then, if it started a refresh, a wait until the refresh has landed: a client
/// whose requests are spaced wider than a round trip.
pub(crate) async fn check_spaced(
    limiter: &Arc<LeasedLimiter>,
    key: &str,
) -> tollgate::distributed::RedisDecision {
    let refreshes = limiter.counts().refreshes;
    let answer = limiter.check(key).await.unwrap();
    if limiter.counts().refreshes > refreshes {
        settle(std::slice::from_ref(limiter)).await;
    }
    answer
}

/// Waits until no refresh is in flight: the round trips stop changing (a refresh that is still
/// on its way then lands before the counts are read).
pub(crate) async fn settle(limiters: &[Arc<LeasedLimiter>]) {
    let trips = || limiters.iter().map(|l| l.counts().round_trips).sum::<u64>();
    let mut last = trips();
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = trips();
        if now == last {
            return;
        }
        last = now;
    }
}

/// What a fleet did with one key: units admitted, still held in leases, dropped by installs.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) admitted: u64,
    pub(crate) held: u64,
    pub(crate) dropped: u64,
    pub(crate) by_lease: u64,
}

/// Every instance's workers send their requests at once; all are decided by Redis or a lease.
async fn fleet_run(limiters: &[Arc<LeasedLimiter>], key: &str) -> Tally {
    let mut tasks = Vec::new();
    for limiter in limiters {
        for _ in 0..WORKERS {
            let limiter = Arc::clone(limiter);
            let key = key.to_owned();
            tasks.push(tokio::spawn(async move {
                let mut answers = Vec::new();
                for _ in 0..REQUESTS_PER_WORKER {
                    answers.push(limiter.check(&key).await.unwrap());
                }
                answers
            }));
        }
    }
    let mut tally = Tally::default();
    for task in tasks {
        for answer in task.await.unwrap() {
            assert!(
                matches!(answer.decided_by, DecidedBy::Redis | DecidedBy::Lease),
                "{answer:?}"
            );
            tally.admitted += u64::from(answer.is_allowed());
            tally.by_lease += u64::from(answer.decided_by == DecidedBy::Lease);
        }
    }
    settle(limiters).await;
    tally.held = limiters.iter().map(|l| l.units_held()).sum();
    tally.dropped = limiters.iter().map(|l| l.counts().units_dropped).sum();
    tally
}

/// The units Redis has handed out for a bucket key whose first lease started at `start` (a
/// frozen client time: its TAT is `start + units * T`), or for a window key (its window's count).
pub(crate) async fn taken_in_redis(
    connection: &mut impl ConnectionLike,
    key: &str,
    algorithm: &RedisAlgorithm,
    start: Timestamp,
) -> u64 {
    let state: Vec<u8> = redis::cmd("GET").arg(key).query_async(connection).await.unwrap();
    let word = |at: usize| i64::from_le_bytes(state[at..at + 8].try_into().unwrap()) as u64;
    match algorithm {
        RedisAlgorithm::TokenBucket(bucket) => {
            let interval = bucket.emission_interval().as_micros() as u64;
            (word(0) - start.as_nanos() / 1_000) / interval
        }
        RedisAlgorithm::FixedWindow(_) => word(8),
        RedisAlgorithm::SlidingWindow(_) => word(16),
        other => panic!("not leased: {other:?}"),
    }
}

/// Six instances at one frozen client time, 240 requests on one key: at most the quota passes,
/// and Redis's count of what it handed out is exactly what was admitted, plus what the leases
/// still hold, plus what installs dropped: no unit spent twice, none spent that Redis did not
/// hand out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_at_a_frozen_time_never_admits_more_than_the_quota() {
    let server = shared_database();
    let start = Timestamp::from_secs(1_700_000_040);
    let frozen = TimeSource::client(ManualClock::starting_at(start));
    // Slow quotas: nothing refills, and no key expires in real time mid-test (the TTL is the
    // reset-after in client time).
    let algorithms: [RedisAlgorithm; 3] = [
        TokenBucket::new("100/h".parse().unwrap()).unwrap().into(),
        FixedWindow::new("100/h".parse().unwrap()).unwrap().into(),
        SlidingWindow::new("100/h".parse().unwrap()).unwrap().into(),
    ];
    let mut connection = raw_connection(&server).await;
    for algorithm in algorithms {
        let prefix = format!("frozen:{}:", algorithm.name().replace(' ', "-"));
        let mut limiters = Vec::new();
        for _ in 0..INSTANCES {
            limiters.push(Arc::new(
                leased(&server, algorithm, frozen.clone(), &prefix).await,
            ));
        }
        let tally = fleet_run(&limiters, "shared").await;
        let taken = taken_in_redis(
            &mut connection,
            &limiters[0].redis_key("shared"),
            &algorithm,
            start,
        )
        .await;
        assert!(tally.admitted <= 100, "{}: {tally:?}", algorithm.name());
        assert_eq!(
            taken,
            tally.admitted + tally.held + tally.dropped,
            "{}: {tally:?}",
            algorithm.name()
        );
        // Leases did decide: the fleet made far fewer round trips than decisions.
        assert!(tally.by_lease > 0, "{}: {tally:?}", algorithm.name());
        // What Redis still has passes to anyone who asks, and nothing more.
        let drain = RedisLimiter::builder(
            server.url(),
            algorithm,
            FailurePolicy::FailClosed {
                retry_after: Duration::from_secs(1),
            },
        )
        .time(frozen.clone())
        .prefix(&prefix)
        .connect()
        .await
        .unwrap();
        let mut drained = 0;
        while drain.check("shared").await.unwrap().is_allowed() {
            drained += 1;
        }
        assert_eq!(taken + drained, 100, "{}: {tally:?}", algorithm.name());
    }
}

/// One unit an hour on the server's clock: nothing refills during the test, so the burst is
/// the most the fleet may admit; Redis's TAT says how many units it handed out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_on_the_server_clock_never_admits_more_than_the_burst() {
    let server = shared_database();
    let bucket = TokenBucket::new("1/h burst 100".parse().unwrap()).unwrap();
    let mut limiters = Vec::new();
    for _ in 0..INSTANCES {
        limiters.push(Arc::new(
            leased(&server, bucket, TimeSource::Server, "server:").await,
        ));
    }
    let tally = fleet_run(&limiters, "shared").await;
    assert!(tally.admitted <= 100, "{tally:?}");
    let mut connection = raw_connection(&server).await;
    let key = limiters[0].redis_key("shared");
    let state: Vec<u8> = redis::cmd("GET")
        .arg(&key)
        .query_async(&mut connection)
        .await
        .unwrap();
    let tat = i64::from_le_bytes(state[..8].try_into().unwrap());
    let (seconds, micros): (i64, i64) = redis::cmd("TIME").query_async(&mut connection).await.unwrap();
    // The TAT runs `units * 1 h` ahead of the first grant, less the seconds since.
    let taken = (tat - (seconds * 1_000_000 + micros)).div_euclid(3_600_000_000) + 1;
    assert_eq!(
        taken as u64,
        tally.admitted + tally.held + tally.dropped,
        "{tally:?}"
    );
}

/// The same at a direct limiter's one key, on the fixed window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_fleet_at_a_frozen_time_never_admits_more_than_the_quota() {
    let server = shared_database();
    let start = Timestamp::from_secs(1_700_000_040);
    let frozen = TimeSource::client(ManualClock::starting_at(start));
    let window = FixedWindow::new("100/h".parse().unwrap()).unwrap();
    let mut tasks = Vec::new();
    let mut limiters = Vec::new();
    for _ in 0..INSTANCES {
        let limiter = RedisLimiter::builder(
            server.url(),
            window,
            FailurePolicy::FailClosed {
                retry_after: Duration::from_secs(1),
            },
        )
        .time(frozen.clone())
        .deadline(Duration::from_secs(5))
        .prefix("direct:")
        .leased()
        .connect_direct("partner")
        .await
        .unwrap();
        let limiter = Arc::new(limiter);
        limiters.push(Arc::clone(&limiter));
        for _ in 0..WORKERS {
            let limiter = Arc::clone(&limiter);
            tasks.push(tokio::spawn(async move {
                let mut admitted = 0;
                for _ in 0..REQUESTS_PER_WORKER {
                    admitted += u64::from(limiter.check().await.unwrap().is_allowed());
                }
                admitted
            }));
        }
    }
    let mut admitted = 0;
    for task in tasks {
        admitted += task.await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let held: u64 = limiters.iter().map(|l| l.units_held()).sum();
    let dropped: u64 = limiters.iter().map(|l| l.counts().units_dropped).sum();
    let mut connection = raw_connection(&server).await;
    let key = limiters[0].keyed().redis_key("partner");
    let taken = taken_in_redis(&mut connection, &key, &window.into(), start).await;
    assert!(admitted <= 100);
    assert_eq!(taken, admitted + held + dropped);
}

/// One step of a moving client clock: every instance sends `requests[i]` requests at the same
/// instant (the clock stands still while they are decided), of weight `weight`.
async fn step(limiters: &[Arc<LeasedLimiter>], requests: &[usize], weight: u64) -> u64 {
    let mut tasks = Vec::new();
    for (limiter, &count) in limiters.iter().zip(requests) {
        for _ in 0..count {
            let limiter = Arc::clone(limiter);
            tasks.push(tokio::spawn(async move {
                limiter.check_n("moving", weight).await.unwrap()
            }));
        }
    }
    let mut admitted = 0;
    for task in tasks {
        let answer = task.await.unwrap();
        assert!(
            matches!(answer.decided_by, DecidedBy::Redis | DecidedBy::Lease),
            "{answer:?}"
        );
        admitted += u64::from(answer.is_allowed());
    }
    admitted
}

/// A moving client clock: the instances ask in bursts at instants a little apart, several times
/// the quota; every admission, replayed in time order through the exact reference model of the
/// algorithm, is one the model admits (the bucket: no interval `[a, b]` holds more than
/// `burst + (b - a) / T`; the window: no window more than its limit; the sliding window counter:
/// no admission past its limit, on the exact estimate).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_on_a_moving_clock_admits_only_what_the_exact_model_admits() {
    let server = shared_database();
    let start = Timestamp::from_secs(1_700_000_040);
    let clock = ManualClock::starting_at(start);
    let time = TimeSource::client(clock.clone());
    // 20 per second, burst 20: T = 50 ms. Steps of 0 to 70 ms, 12 requests each: 10 times the
    // rate. The window: 20 per second, windows crossed every few steps.
    let bucket = TokenBucket::new("20/s burst 20".parse().unwrap()).unwrap();
    let window = FixedWindow::new("20/s".parse().unwrap()).unwrap();
    let sliding = SlidingWindow::new("20/s".parse().unwrap()).unwrap();
    for (algorithm, name) in [
        (RedisAlgorithm::from(bucket), "bucket"),
        (window.into(), "window"),
        (sliding.into(), "sliding"),
    ] {
        clock.set(start);
        let prefix = format!("moving:{name}:");
        let mut limiters = Vec::new();
        for _ in 0..3 {
            limiters.push(Arc::new(leased(&server, algorithm, time.clone(), &prefix).await));
        }
        let mut admissions = Vec::new();
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..120 {
            // xorshift: a fixed, seeded sequence.
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            clock.advance(Duration::from_millis(rng % 71));
            let requests = [
                (rng >> 8) as usize % 6,
                (rng >> 16) as usize % 5,
                (rng >> 24) as usize % 4,
            ];
            let weight = 1 + (rng >> 40) % 2;
            let admitted = step(&limiters, &requests, weight).await;
            let now = clock.now_nanos();
            admissions.extend(std::iter::repeat_n((now, weight), admitted as usize));
        }
        settle(&limiters).await;
        assert!(admissions.len() > 20, "{name}: {}", admissions.len());
        match name {
            "bucket" => {
                let mut model = TokenBucketModel::new(50_000_000, 20);
                for &(now, weight) in &admissions {
                    assert!(model.decide(now, weight).allowed, "{name}: {weight} at {now}");
                }
            }
            "window" => {
                let mut model = FixedWindowModel::new(1_000_000_000, 20);
                for &(now, weight) in &admissions {
                    assert!(model.decide(now, weight).allowed, "{name}: {weight} at {now}");
                }
            }
            _ => {
                let mut model = SlidingWindowModel::new(1_000_000_000, 20);
                for &(now, weight) in &admissions {
                    assert!(model.decide(now, weight).allowed, "{name}: {weight} at {now}");
                }
            }
        }
    }
}

/// A clock's reading in nanoseconds.
trait Nanos {
    fn now_nanos(&self) -> u64;
}

impl Nanos for ManualClock {
    fn now_nanos(&self) -> u64 {
        use tollgate::Clock;
        self.now().as_nanos()
    }
}
