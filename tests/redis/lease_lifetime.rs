//! What happens to a lease that is not spent: given back (by `release`, or by dropping the
//! limiter in a runtime), it returns to the whole fleet; left in a limiter dropped outside a
//! runtime, or in a process that is killed, it passes no later than its lifetime (a bucket's
//! range within the burst's span of its grant, a window's units at the window's end); with Redis killed, a process spends what it holds, then its policy decides,
//! and Redis decides again once it is back.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tollgate::distributed::{DecidedBy, FailurePolicy, RedisAlgorithm, RedisLimiter, TimeSource};
use tollgate::{FixedWindow, ManualClock, SlidingWindow, Timestamp, TokenBucket};

use crate::lease_fleet::{check_spaced, leased, leased_up_to, settle, taken_in_redis};
use crate::redis_common::{raw_connection, shared_database, RedisServer, RedisUrl};

fn fail_closed() -> FailurePolicy {
    FailurePolicy::FailClosed {
        retry_after: Duration::from_secs(1),
    }
}

/// A per-decision limiter on the same keys, asked until it refuses: the units left in Redis.
pub(crate) async fn drain(
    server: &impl RedisUrl,
    algorithm: RedisAlgorithm,
    time: TimeSource,
    prefix: &str,
    key: &str,
) -> u64 {
    let limiter = RedisLimiter::builder(server.url(), algorithm, fail_closed())
        .time(time)
        .prefix(prefix)
        .connect()
        .await
        .unwrap();
    let mut drained = 0;
    loop {
        let answer = limiter.check(key).await.unwrap();
        assert_eq!(answer.decided_by, DecidedBy::Redis);
        if !answer.is_allowed() {
            return drained;
        }
        drained += 1;
    }
}

/// At a frozen client time, a process spends part of its leases and gives the rest back: the
/// units it spent and those the rest of the fleet can still have add up to the quota exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn units_given_back_return_to_the_fleet() {
    let server = shared_database();
    let frozen = TimeSource::client(ManualClock::starting_at(Timestamp::from_secs(1_700_000_040)));
    let algorithms: [RedisAlgorithm; 3] = [
        TokenBucket::new("100/h".parse().unwrap()).unwrap().into(),
        FixedWindow::new("100/h".parse().unwrap()).unwrap().into(),
        SlidingWindow::new("100/h".parse().unwrap()).unwrap().into(),
    ];
    for algorithm in algorithms {
        let prefix = format!("back:{}:", algorithm.name().replace(' ', "-"));
        let limiter = Arc::new(leased(&server, algorithm, frozen.clone(), &prefix).await);
        let mut spent = 0;
        for _ in 0..20 {
            spent += u64::from(check_spaced(&limiter, "k").await.is_allowed());
        }
        settle(std::slice::from_ref(&limiter)).await;
        let held = limiter.units_held();
        assert!(
            held > 0,
            "{}: a lease is held after 20 requests",
            algorithm.name()
        );
        assert_eq!(limiter.release().await, held, "{}", algorithm.name());
        assert_eq!(limiter.units_held(), 0, "{}", algorithm.name());
        assert_eq!(limiter.counts().units_given_back, held);
        let drained = drain(&server, algorithm, frozen.clone(), &prefix, "k").await;
        assert_eq!(spent + drained, 100, "{}", algorithm.name());
        // Nothing is spent from what was given back: the next request asks Redis, refused.
        let answer = limiter.check("k").await.unwrap();
        assert!(!answer.is_allowed(), "{}: {answer:?}", algorithm.name());
    }
}

/// Drops `limiter` on a thread of its own, outside any runtime: nothing can give its lease back.
fn drop_outside_a_runtime<T: Send + 'static>(limiter: T) {
    std::thread::spawn(move || drop(limiter)).join().unwrap();
}

/// A limiter dropped in a runtime gives its lease back on a task: at a frozen client time, once
/// the task has run, Redis holds only the units spent, and the rest of the fleet has the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limiter_dropped_in_a_runtime_gives_its_lease_back() {
    let server = shared_database();
    let start = Timestamp::from_secs(1_700_000_040);
    let time = TimeSource::client(ManualClock::starting_at(start));
    let algorithms: [RedisAlgorithm; 2] = [
        TokenBucket::new("10/h burst 10".parse().unwrap()).unwrap().into(),
        FixedWindow::new("10/h".parse().unwrap()).unwrap().into(),
    ];
    for algorithm in algorithms {
        let prefix = format!("dropped-back:{}:", algorithm.name().replace(' ', "-"));
        let limiter = Arc::new(leased_up_to(&server, algorithm, time.clone(), &prefix, 4).await);
        for _ in 0..4 {
            assert!(limiter.check("k").await.unwrap().is_allowed());
        }
        settle(std::slice::from_ref(&limiter)).await;
        assert!(limiter.units_held() > 0, "a lease is held");
        let redis_key = limiter.redis_key("k");
        drop(limiter);
        let mut connection = raw_connection(&server).await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while taken_in_redis(&mut connection, &redis_key, &algorithm, start).await != 4 {
            assert!(
                Instant::now() < deadline,
                "{}: the lease never came back",
                algorithm.name()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let left = drain(&server, algorithm, time.clone(), &prefix, "k").await;
        assert_eq!(left, 10 - 4, "{}", algorithm.name());
    }
}

/// A limiter dropped where nothing can give its lease back (outside a runtime) strands it until
/// the lease's lifetime is over: on a moving client clock, the bucket (10 per second, burst 10)
/// is full again one burst's span (1 s) after the last grant, the window's units are back when
/// the window ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_limiter_strands_its_lease_for_at_most_its_lifetime() {
    let server = shared_database();
    let start = Timestamp::from_secs(1_700_000_040);
    let clock = ManualClock::starting_at(start);
    let time = TimeSource::client(clock.clone());
    let bucket = TokenBucket::new("10/s burst 10".parse().unwrap()).unwrap();
    let limiter = Arc::new(leased_up_to(&server, bucket, time.clone(), "dropped:tb:", 4).await);
    for _ in 0..4 {
        assert!(limiter.check("k").await.unwrap().is_allowed());
    }
    settle(std::slice::from_ref(&limiter)).await;
    let held = limiter.units_held();
    assert!(held > 0, "a lease is held");
    drop_outside_a_runtime(limiter);
    // What the dropped process held is the rest of the fleet's no more: 10 - 4 - held.
    clock.set(start);
    let left = drain(&server, bucket.into(), time.clone(), "dropped:tb:", "k").await;
    assert_eq!(left, 10 - 4 - held);
    // One burst's span after the grants (all at `start`), every slot has passed: full again.
    clock.set(start.saturating_add(Duration::from_secs(1)));
    assert_eq!(
        drain(&server, bucket.into(), time.clone(), "dropped:tb:", "k").await,
        10
    );

    let window = FixedWindow::new("10/s".parse().unwrap()).unwrap();
    clock.set(start);
    let limiter = Arc::new(leased_up_to(&server, window, time.clone(), "dropped:fw:", 4).await);
    for _ in 0..4 {
        assert!(limiter.check("k").await.unwrap().is_allowed());
    }
    settle(std::slice::from_ref(&limiter)).await;
    let held = limiter.units_held();
    assert!(held > 0, "a lease is held");
    drop_outside_a_runtime(limiter);
    assert_eq!(
        drain(&server, window.into(), time.clone(), "dropped:fw:", "k").await,
        10 - 4 - held
    );
    // The window (one second from `start`, a whole second) ends: the next one is whole.
    clock.set(start.saturating_add(Duration::from_secs(1)));
    assert_eq!(drain(&server, window.into(), time, "dropped:fw:", "k").await, 10);
}

/// The environment variable that makes this test binary the process that holds a lease.
const CHILD: &str = "TOLLGATE_LEASE_HOLDER";

/// A process killed (SIGKILL) while it holds a lease, on the server's clock: right after, the
/// key's TAT in Redis is at most one burst's span ahead (a lease never reaches further), and
/// once that span has passed the whole burst is the rest of the fleet's again.
///
/// The process is this test binary itself, run again with [`CHILD`] set: it takes leases on
/// the key, prints how many units it holds, and waits to be killed.
#[test]
fn a_killed_process_strands_its_lease_for_at_most_its_lifetime() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let bucket = TokenBucket::new("20/s burst 20".parse().unwrap()).unwrap();
    if let Ok(url) = std::env::var(CHILD) {
        runtime.block_on(async {
            let server = url;
            let limiter = RedisLimiter::builder(server, bucket, fail_closed())
                .prefix("killed:")
                .deadline(Duration::from_secs(5))
                .leased()
                .max_lease(8)
                .connect()
                .await
                .unwrap();
            let limiter = Arc::new(limiter);
            for _ in 0..6 {
                assert!(limiter.check("k").await.unwrap().is_allowed());
            }
            settle(std::slice::from_ref(&limiter)).await;
            println!("HOLDING {}", limiter.units_held());
            tokio::time::sleep(Duration::from_secs(60)).await;
        });
        return;
    }
    let server = shared_database();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "lease_lifetime::a_killed_process_strands_its_lease_for_at_most_its_lifetime",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, server.url())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let holding: u64 = loop {
        let line = lines.next().expect("the child prints what it holds").unwrap();
        // The harness prints the test's name first, on the same line.
        if let Some((_, units)) = line.rsplit_once("HOLDING ") {
            break units.trim().parse().unwrap();
        }
    };
    child.kill().unwrap();
    child.wait().unwrap();
    let killed = Instant::now();
    assert!(holding > 0, "the child held a lease");
    runtime.block_on(async {
        let mut connection = raw_connection(&server).await;
        let key = "killed:{k}:tb2";
        let state: Vec<u8> = redis::cmd("GET")
            .arg(key)
            .query_async(&mut connection)
            .await
            .unwrap();
        let tat = i64::from_le_bytes(state[..8].try_into().unwrap());
        let (seconds, micros): (i64, i64) = redis::cmd("TIME").query_async(&mut connection).await.unwrap();
        let ahead = tat - (seconds * 1_000_000 + micros);
        assert!(
            ahead <= 1_000_000,
            "the TAT is {ahead} µs ahead, past the burst's 1 s"
        );
        tokio::time::sleep(Duration::from_secs(1).saturating_sub(killed.elapsed())).await;
        let left = drain(&server, bucket.into(), TimeSource::Server, "killed:", "k").await;
        assert!(
            left >= 20,
            "{left} units passed once the lease's lifetime was over"
        );
    });
}

/// With Redis killed, a process spends what its lease holds (decided by the lease), then its
/// failure policy answers; once Redis is back (empty), Redis decides again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_killed_a_process_spends_its_lease_then_its_policy_decides() {
    let mut server = RedisServer::start();
    let bucket = TokenBucket::new("1/h burst 1000".parse().unwrap()).unwrap();
    let limiter = RedisLimiter::builder(server.url(), bucket, fail_closed())
        .deadline(Duration::from_millis(200))
        .probe_interval(Duration::from_millis(50))
        .prefix("away:")
        .leased()
        .max_lease(50)
        .connect()
        .await
        .unwrap();
    let limiter = Arc::new(limiter);
    for _ in 0..40 {
        assert!(limiter.check("k").await.unwrap().is_allowed());
    }
    settle(std::slice::from_ref(&limiter)).await;
    let held = limiter.units_held();
    assert!(held > 0, "a lease is held");
    server.kill();
    let mut by_lease = 0;
    let mut answer = limiter.check("k").await.unwrap();
    while answer.decided_by == DecidedBy::Lease {
        assert!(answer.is_allowed(), "{answer:?}");
        by_lease += 1;
        answer = limiter.check("k").await.unwrap();
    }
    assert_eq!(by_lease, held);
    assert_eq!(answer.decided_by, DecidedBy::FailClosed, "{answer:?}");
    assert!(answer.failure.is_some());
    server.restart();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = limiter.check("k").await.unwrap();
        if matches!(answer.decided_by, DecidedBy::Redis | DecidedBy::Lease) {
            assert!(
                answer.is_allowed(),
                "a restarted Redis holds a full bucket: {answer:?}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "Redis never decided again: {answer:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
