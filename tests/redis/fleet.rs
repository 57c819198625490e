//! Several instances, each with its own connection, share one key: together they admit exactly
//! the quota, at a frozen client time and on the server's clock.

use std::sync::Arc;
use std::time::Duration;

use crate::redis_common::{shared_database, RedisUrl};
use tollgate::distributed::{DecidedBy, FailurePolicy, RedisAlgorithm, RedisLimiter, TimeSource};
use tollgate::{FixedWindow, LeakyBucket, ManualClock, SlidingLog, SlidingWindow, Timestamp, TokenBucket};

const INSTANCES: usize = 6;
/// 240 requests in all: more than any quota below, so every quota is exhausted.
const REQUESTS_PER_INSTANCE: usize = 40;
const _: () = assert!(INSTANCES * REQUESTS_PER_INSTANCE > 100);

/// Every instance sends its requests concurrently on its own connection; returns how many
/// passed in all.
async fn fleet_admissions(
    server: &impl RedisUrl,
    algorithm: RedisAlgorithm,
    time: TimeSource,
    key: &str,
) -> usize {
    let mut tasks = Vec::new();
    for _ in 0..INSTANCES {
        let limiter = RedisLimiter::builder(
            server.url(),
            algorithm,
            FailurePolicy::FailClosed {
                retry_after: Duration::from_secs(1),
            },
        )
        .time(time.clone())
        .deadline(Duration::from_secs(5))
        .connect()
        .await
        .unwrap();
        let limiter = Arc::new(limiter);
        let key = key.to_owned();
        tasks.push(tokio::spawn(async move {
            let requests = (0..REQUESTS_PER_INSTANCE).map(|_| {
                let limiter = Arc::clone(&limiter);
                let key = key.clone();
                tokio::spawn(async move { limiter.check(&key).await.unwrap() })
            });
            let mut admitted = 0;
            for request in requests.collect::<Vec<_>>() {
                let answer = request.await.unwrap();
                assert_eq!(answer.decided_by, DecidedBy::Redis);
                admitted += usize::from(answer.is_allowed());
            }
            admitted
        }));
    }
    let mut admitted = 0;
    for task in tasks {
        admitted += task.await.unwrap();
    }
    admitted
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_at_a_frozen_time_admits_exactly_the_quota() {
    let server = shared_database();
    let frozen = TimeSource::client(ManualClock::starting_at(Timestamp::from_secs(1_700_000_040)));
    // Client time stands still, Redis's clock does not: each key's TTL is its reset-after in
    // client time, so the buckets run slowly enough that no key can expire, in real time,
    // between two requests of a loaded machine: at 100/s the first unit's TTL would be 10 ms,
    // and a key that expires mid-test comes back full, the one way for the count to be off.
    let algorithms: [(RedisAlgorithm, usize); 5] = [
        (TokenBucket::new("100/h".parse().unwrap()).unwrap().into(), 100),
        (
            LeakyBucket::new("10/h burst 37".parse().unwrap()).unwrap().into(),
            37,
        ),
        (FixedWindow::new("100/min".parse().unwrap()).unwrap().into(), 100),
        (
            SlidingWindow::new("100/min".parse().unwrap()).unwrap().into(),
            100,
        ),
        (SlidingLog::new("100/min".parse().unwrap()).unwrap().into(), 100),
    ];
    for (algorithm, quota) in algorithms {
        let admitted = fleet_admissions(&server, algorithm, frozen.clone(), "shared").await;
        assert_eq!(admitted, quota, "{}", algorithm.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_on_the_server_clock_admits_exactly_the_burst() {
    let server = shared_database();
    // One unit an hour: nothing refills during the test, so exactly the burst passes.
    let bucket = TokenBucket::new("1/h burst 100".parse().unwrap()).unwrap();
    let admitted = fleet_admissions(&server, bucket.into(), TimeSource::Server, "shared").await;
    assert_eq!(admitted, 100);
    let log = SlidingLog::new("100/h".parse().unwrap()).unwrap();
    let admitted = fleet_admissions(&server, log.into(), TimeSource::Server, "shared").await;
    assert_eq!(admitted, 100);
}
