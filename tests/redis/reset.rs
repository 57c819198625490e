//! `RedisLimiter::reset`: a key forgotten for the whole fleet (its state deleted in Redis, in
//! both encodings of a sliding log) and in the instance's fallback limiter; typed errors when
//! Redis is away.

use std::time::Duration;

use crate::redis_common::cluster::RedisCluster;
use crate::redis_common::{
    client_time_limiter, client_time_limiter_with, raw_connection, shared_database, Backend, RedisServer,
};
use redis::aio::ConnectionLike;
use redis::AsyncCommands;
use tollgate::distributed::{
    DecidedBy, Failure, FailurePolicy, RedisAlgorithm, RedisLimiter, RedisResetError,
};
use tollgate::{
    FixedWindow, KeyedLimiter, LeakyBucket, ManualClock, Quota, SlidingLog, SlidingWindow, Timestamp,
    TokenBucket,
};

/// 1_700_000_040 s since the epoch plus 15 s: inside every window below, on no boundary.
const NOW: Timestamp = Timestamp::from_secs(1_700_000_055);

fn quota(text: &str) -> Quota {
    text.parse().unwrap()
}

/// Every algorithm at a limit of 3 per second (a log of 300 too: the list encoding).
fn algorithms() -> Vec<(&'static str, RedisAlgorithm, u64)> {
    vec![
        ("token bucket", TokenBucket::new(quota("3/s")).unwrap().into(), 3),
        ("leaky bucket", LeakyBucket::new(quota("3/s")).unwrap().into(), 3),
        ("fixed window", FixedWindow::new(quota("3/s")).unwrap().into(), 3),
        (
            "sliding window",
            SlidingWindow::new(quota("3/s")).unwrap().into(),
            3,
        ),
        ("sliding log", SlidingLog::new(quota("3/s")).unwrap().into(), 3),
        (
            "sliding log as a list",
            SlidingLog::new(quota("300/s")).unwrap().into(),
            300,
        ),
    ]
}

/// Requests of weight 1 for `key` admitted by Redis at the clock's frozen time, out of `asked`.
async fn admitted(limiter: &RedisLimiter, key: &str, asked: u64) -> u64 {
    let mut admitted = 0;
    for _ in 0..asked {
        let answer = limiter.check(key).await.unwrap();
        assert_eq!(answer.decided_by, DecidedBy::Redis);
        admitted += u64::from(answer.is_allowed());
    }
    admitted
}

#[tokio::test(flavor = "current_thread")]
async fn a_reset_key_is_decided_as_a_new_one_and_only_it() {
    let server = shared_database();
    let mut raw = raw_connection(&server).await;
    a_reset_key_is_decided_as_a_new_one(&server, &mut raw).await;
}

/// The same on a Redis Cluster, where the two keys are in different slots.
#[tokio::test(flavor = "current_thread")]
async fn on_a_cluster_a_reset_key_is_decided_as_a_new_one_and_only_it() {
    let cluster = RedisCluster::shared();
    assert_ne!(cluster.slot("k"), cluster.slot("other"));
    let mut raw = cluster.raw_connection().await;
    a_reset_key_is_decided_as_a_new_one(cluster, &mut raw).await;
}

/// Keys `k` and `other` of every algorithm, at a frozen time: a reset of `k` deletes its state
/// (seen through `raw`), and `k` is then decided as a new key while `other` keeps its count.
async fn a_reset_key_is_decided_as_a_new_one(
    server: &impl Backend,
    raw: &mut (impl ConnectionLike + Send + Sync),
) {
    let clock = ManualClock::starting_at(NOW);
    for (name, algorithm, limit) in algorithms() {
        let limiter = client_time_limiter(server, algorithm, &clock, "reset:").await;
        assert_eq!(limiter.reset("k").await, Ok(false), "{name}: an absent key");
        for key in ["k", "other"] {
            assert_eq!(admitted(&limiter, key, limit + 1).await, limit, "{name}: {key}");
        }
        assert_eq!(limiter.reset("k").await, Ok(true), "{name}");
        let exists: bool = raw.exists(limiter.redis_key("k")).await.unwrap();
        assert!(!exists, "{name}: the state is deleted");
        assert_eq!(limiter.reset("k").await, Ok(false), "{name}: nothing left");
        assert_eq!(
            admitted(&limiter, "k", limit + 1).await,
            limit,
            "{name}: a new key's quota"
        );
        assert_eq!(
            admitted(&limiter, "other", 1).await,
            0,
            "{name}: the other key keeps its count"
        );
        let _: () = raw
            .del(&[limiter.redis_key("k"), limiter.redis_key("other")])
            .await
            .unwrap();
    }
}

/// A sliding log's state may sit in the other encoding's key (written while the quota was on the
/// other side of 256, `docs/distributed.md`, "Sliding log"): a reset deletes both.
#[tokio::test(flavor = "current_thread")]
async fn a_log_reset_deletes_both_encodings() {
    let server = shared_database();
    let mut raw = raw_connection(&server).await;
    let clock = ManualClock::starting_at(NOW);
    let as_list =
        client_time_limiter(&server, SlidingLog::new(quota("300/s")).unwrap(), &clock, "both:").await;
    let packed = client_time_limiter(&server, SlidingLog::new(quota("3/s")).unwrap(), &clock, "both:").await;
    assert_ne!(as_list.redis_key("k"), packed.redis_key("k"));
    assert_eq!(admitted(&as_list, "k", 5).await, 5);
    // The packed log counts the list's units: the quota went down to 3.
    assert_eq!(admitted(&packed, "k", 1).await, 0);
    assert_eq!(packed.reset("k").await, Ok(true));
    for key in [as_list.redis_key("k"), packed.redis_key("k")] {
        let exists: bool = raw.exists(&key).await.unwrap();
        assert!(!exists, "{key} is deleted");
    }
    assert_eq!(admitted(&packed, "k", 4).await, 3);
}

/// With Redis away, a reset is an error that says so, and the instance's fallback forgets the key
/// all the same; once Redis is back, resets reach it again.
#[tokio::test(flavor = "current_thread")]
async fn a_reset_without_redis_is_an_error_and_still_resets_the_fallback() {
    let mut server = RedisServer::start();
    let clock = ManualClock::starting_at(NOW);
    let bucket = TokenBucket::new(quota("3/s")).unwrap();
    let fallback = KeyedLimiter::<str, _, _>::with_clock(bucket, 100, clock.clone()).unwrap();
    let limiter = RedisLimiter::builder(server.url(), bucket, FailurePolicy::fallback(fallback))
        .client_time(clock.clone())
        .deadline(Duration::from_millis(300))
        .probe_interval(Duration::from_millis(1))
        .connect()
        .await
        .unwrap();
    server.kill();
    let mut by_fallback = 0;
    for _ in 0..4 {
        let answer = limiter.check("k").await.unwrap();
        assert_eq!(answer.decided_by, DecidedBy::Fallback);
        by_fallback += u64::from(answer.is_allowed());
    }
    assert_eq!(by_fallback, 3, "the fallback's own quota");

    let reset = tokio::time::timeout(Duration::from_secs(5), limiter.reset("k"))
        .await
        .expect("a reset waits at most its deadline");
    assert!(
        matches!(
            reset,
            Err(RedisResetError::Failed(Failure::Connection(_) | Failure::Timeout))
        ),
        "{reset:?}"
    );
    let answer = limiter.check("k").await.unwrap();
    assert_eq!(answer.decided_by, DecidedBy::Fallback);
    assert!(answer.is_allowed(), "the fallback forgot the key");

    server.restart();
    let back = async {
        loop {
            if let Ok(found) = limiter.reset("k").await {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let found = tokio::time::timeout(Duration::from_secs(20), back)
        .await
        .expect("resets reach Redis again once it is back");
    assert!(!found, "the restarted server is empty");
}

/// `FailOpen` and `FailClosed` count nothing locally: a reset through them is Redis's answer.
#[tokio::test(flavor = "current_thread")]
async fn the_policies_without_a_local_count_forget_nothing_locally() {
    let server = shared_database();
    let clock = ManualClock::starting_at(NOW);
    let algorithm = FixedWindow::new(quota("3/s")).unwrap();
    assert!(!FailurePolicy::FailOpen.reset("k"));
    let closed = FailurePolicy::FailClosed {
        retry_after: Duration::from_secs(1),
    };
    assert!(!closed.reset("k"));
    let limiter =
        client_time_limiter_with(&server, algorithm, &clock, "open:", FailurePolicy::FailOpen).await;
    assert_eq!(admitted(&limiter, "k", 3).await, 3);
    assert_eq!(limiter.reset("k").await, Ok(true));
    assert_eq!(admitted(&limiter, "k", 4).await, 3);
}

/// Every algorithm at a limit of 3 per hour (a log of 300 too), and when one unit admitted at
/// [`NOW`] stops weighing: the buckets' TAT (`NOW` plus one interval of 20 minutes), the end of
/// the fixed window, the end of the window after the sliding window's, and the unit leaving
/// the log's window.
fn hourly() -> Vec<(&'static str, RedisAlgorithm, Timestamp)> {
    let hour = quota("3/h");
    let tat = NOW.saturating_add(Duration::from_secs(1_200));
    // NOW is 2_055 s into the hour that starts at 1_699_999_200 s.
    let window_end = Timestamp::from_secs(1_700_002_800);
    vec![
        ("token bucket", TokenBucket::new(hour).unwrap().into(), tat),
        ("leaky bucket", LeakyBucket::new(hour).unwrap().into(), tat),
        ("fixed window", FixedWindow::new(hour).unwrap().into(), window_end),
        (
            "sliding window",
            SlidingWindow::new(hour).unwrap().into(),
            window_end.saturating_add(Duration::from_secs(3_600)),
        ),
        (
            "sliding log",
            SlidingLog::new(hour).unwrap().into(),
            NOW.saturating_add(Duration::from_secs(3_600)),
        ),
        (
            "sliding log as a list",
            SlidingLog::new(quota("300/h")).unwrap().into(),
            NOW.saturating_add(Duration::from_secs(3_600)),
        ),
    ]
}

/// A reset answers whether the key was still being limited at its time, by the decisions' own
/// rule, as the local limiters' `reset` does, not whether Redis still held the key: on a frozen
/// client clock, a key admitted once answers `true` one microsecond before its state becomes a
/// fresh key's, and `false` from that instant, while Redis still holds the key (its TTL runs on
/// the server's clock, an hour away). Both keys are deleted.
#[tokio::test(flavor = "current_thread")]
async fn a_reset_answers_whether_the_state_still_limits_not_whether_the_key_exists() {
    let server = shared_database();
    let mut raw = raw_connection(&server).await;
    for (index, (name, algorithm, idle_at)) in hourly().into_iter().enumerate() {
        let clock = ManualClock::starting_at(NOW);
        let prefix = format!("idle{index}:");
        let limiter = client_time_limiter(&server, algorithm, &clock, &prefix).await;
        for key in ["limited", "idle"] {
            assert_eq!(admitted(&limiter, key, 1).await, 1, "{name}: {key}");
        }
        clock.set(Timestamp::from_nanos(idle_at.as_nanos() - 1_000));
        let peek = limiter.peek_n("limited", limiter.capacity()).await.unwrap();
        assert!(!peek.is_allowed(), "{name}: still limiting 1 µs before: {peek:?}");
        assert_eq!(limiter.reset("limited").await, Ok(true), "{name}: 1 µs before");

        clock.set(idle_at);
        let peek = limiter.peek_n("idle", limiter.capacity()).await.unwrap();
        assert!(
            peek.is_allowed(),
            "{name}: a fresh key's decision at {idle_at:?}: {peek:?}"
        );
        let exists: bool = raw.exists(limiter.redis_key("idle")).await.unwrap();
        assert!(exists, "{name}: Redis still holds the idle key");
        assert_eq!(limiter.reset("idle").await, Ok(false), "{name}: idle at its time");
        for key in ["limited", "idle"] {
            let exists: bool = raw.exists(limiter.redis_key(key)).await.unwrap();
            assert!(!exists, "{name}: {key} is deleted");
        }
    }
}

/// A key holding something that is not this limiter's state (foreign text, which the decision
/// script refuses with an error reply, or a list, on whose `GET` Redis raises `WRONGTYPE`) is
/// deleted all the same, as a plain `DEL` would, and the reset says there was something.
#[tokio::test(flavor = "current_thread")]
async fn a_key_holding_something_else_is_deleted_all_the_same() {
    let server = shared_database();
    let mut raw = raw_connection(&server).await;
    let clock = ManualClock::starting_at(NOW);
    let limiter = client_time_limiter(
        &server,
        TokenBucket::new(quota("3/s")).unwrap(),
        &clock,
        "foreign:",
    )
    .await;
    let key = limiter.redis_key("k");
    let () = raw.set(&key, "not a bucket").await.unwrap();
    assert_eq!(limiter.reset("k").await, Ok(true), "foreign text");
    let exists: bool = raw.exists(&key).await.unwrap();
    assert!(!exists, "the text is deleted");
    let _: u64 = raw.rpush(&key, "1").await.unwrap();
    assert_eq!(limiter.reset("k").await, Ok(true), "a list");
    let exists: bool = raw.exists(&key).await.unwrap();
    assert!(!exists, "the list is deleted");
}

/// On the server's clock (the default), the reset script reads `TIME` as the decisions do: a
/// key admitted an instant ago is still limited, and once reset nothing is left.
#[tokio::test(flavor = "current_thread")]
async fn on_the_servers_clock_a_just_admitted_key_is_still_limited() {
    let server = shared_database();
    for (index, (name, algorithm, _)) in hourly().into_iter().enumerate() {
        let limiter = RedisLimiter::builder(server.url(), algorithm, FailurePolicy::FailOpen)
            .deadline(Duration::from_secs(5))
            .prefix(format!("server{index}:"))
            .connect()
            .await
            .unwrap();
        assert_eq!(admitted(&limiter, "k", 1).await, 1, "{name}");
        assert_eq!(limiter.reset("k").await, Ok(true), "{name}");
        assert_eq!(limiter.reset("k").await, Ok(false), "{name}: nothing left");
    }
}

/// A client time past what the scripts hold is a typed error, as for a decision.
#[tokio::test(flavor = "current_thread")]
async fn a_reset_at_a_time_past_the_scripts_range_is_a_typed_error() {
    let server = shared_database();
    let late = Timestamp::from_nanos((1 << 52) * 1_000);
    let clock = ManualClock::starting_at(late);
    let bucket = TokenBucket::new(quota("3/s")).unwrap();
    let limiter = client_time_limiter(&server, bucket, &clock, "late:").await;
    assert_eq!(
        limiter.reset("k").await,
        Err(RedisResetError::TimeOutOfRange { now: late })
    );
}

/// On the server's clock (the default), an idle state whose key Redis still holds answers
/// `false`: the state of every algorithm, written as its script writes it, an hour old (a TAT,
/// a window, a log entry long past), under a TTL that still runs. A reset that only asked
/// whether there was a key (`DEL`), or whose peek on the server's clock failed (the script then
/// answers whether it deleted anything), answers `true`: the test above cannot tell them apart,
/// since a key just admitted is limited under every rule.
#[tokio::test(flavor = "current_thread")]
async fn on_the_servers_clock_an_idle_key_that_redis_still_holds_answers_false() {
    let server = shared_database();
    let mut raw = raw_connection(&server).await;
    let pack = |numbers: &[i64]| numbers.iter().flat_map(|n| n.to_le_bytes()).collect::<Vec<u8>>();
    let (window, hour_ago) = (3_600_000_000_i64, 1_700_000_000_000_000_i64);
    for (index, (name, algorithm, _)) in hourly().into_iter().enumerate() {
        let limiter = RedisLimiter::builder(server.url(), algorithm, FailurePolicy::FailOpen)
            .deadline(Duration::from_secs(5))
            .prefix(format!("idle-server{index}:"))
            .connect()
            .await
            .unwrap();
        let key = limiter.redis_key("k");
        match name {
            "token bucket" | "leaky bucket" => raw
                .pset_ex::<_, _, ()>(&key, pack(&[hour_ago]), 3_600_000)
                .await
                .unwrap(),
            "fixed window" => raw
                .pset_ex::<_, _, ()>(&key, pack(&[hour_ago / window, 3, window]), 3_600_000)
                .await
                .unwrap(),
            "sliding window" => raw
                .pset_ex::<_, _, ()>(&key, pack(&[hour_ago / window, 3, 3, window]), 3_600_000)
                .await
                .unwrap(),
            "sliding log" => {
                // One record (time, units so far) and the trailer (before, total, newest).
                let mut log = hour_ago.to_le_bytes().to_vec();
                log.extend_from_slice(&1_u32.to_le_bytes());
                log.extend_from_slice(&0_u32.to_le_bytes());
                log.extend_from_slice(&1_u32.to_le_bytes());
                log.extend_from_slice(&hour_ago.to_le_bytes());
                raw.pset_ex::<_, _, ()>(&key, log, 3_600_000).await.unwrap();
            }
            _ => {
                let _: u64 = raw.rpush(&key, hour_ago.to_string()).await.unwrap();
                let _: bool = raw.pexpire(&key, 3_600_000).await.unwrap();
            }
        }
        let peek = limiter.peek_n("k", limiter.capacity()).await.unwrap();
        assert!(
            peek.is_allowed(),
            "{name}: the state decides as a fresh key's: {peek:?}"
        );
        assert_eq!(
            limiter.reset("k").await,
            Ok(false),
            "{name}: idle, though Redis held it"
        );
        let exists: bool = raw.exists(&key).await.unwrap();
        assert!(!exists, "{name}: deleted");
    }
}
