//! A leased limiter's decisions, one process at a time: a key seen once costs the round trip a
//! per-decision limiter makes, a steady key is decided by its lease and refreshed before it runs
//! out, peeks count nothing, resets forget the lease, leased and per-decision instances share a
//! key's quota; and the errors: configurations refused, keys holding foreign values.

use std::sync::Arc;
use std::time::Duration;

use tollgate::distributed::{
    DecidedBy, FailurePolicy, LeaseConfigError, RedisAlgorithm, RedisCheckError, RedisConfigError,
    RedisLimiter, TimeSource,
};
use tollgate::{
    CapacityError, Clock, FixedWindow, LeakyBucket, ManualClock, SlidingLog, Timestamp, TokenBucket,
};

use crate::lease_fleet::{check_spaced, leased, settle, taken_in_redis, INSTANCES};
use crate::redis_common::{raw_connection, shared_database};

fn fail_closed() -> FailurePolicy {
    FailurePolicy::FailClosed {
        retry_after: Duration::from_secs(1),
    }
}

/// A key seen once costs one round trip and takes exactly the request's weight from the quota,
/// as a per-decision limiter's request does: no lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_seen_once_costs_one_round_trip_and_takes_only_its_weight() {
    let server = shared_database();
    let start = Timestamp::from_secs(1_700_000_040);
    let frozen = TimeSource::client(ManualClock::starting_at(start));
    for algorithm in [
        RedisAlgorithm::from(TokenBucket::new("100/h".parse().unwrap()).unwrap()),
        FixedWindow::new("100/h".parse().unwrap()).unwrap().into(),
    ] {
        let limiter = leased(&server, algorithm, frozen.clone(), "once:").await;
        let answer = limiter.check_n("k", 3).await.unwrap();
        assert_eq!(answer.decided_by, DecidedBy::Redis);
        assert!(answer.is_allowed());
        assert_eq!(answer.decision.remaining(), 97);
        let counts = limiter.counts();
        assert_eq!(
            (counts.round_trips, counts.leases, counts.units_leased),
            (1, 0, 0)
        );
        let mut connection = raw_connection(&server).await;
        let taken = taken_in_redis(&mut connection, &limiter.redis_key("k"), &algorithm, start).await;
        assert_eq!(taken, 3, "{}", algorithm.name());
        let mut connection = raw_connection(&server).await;
        let _: () = redis::cmd("FLUSHDB").query_async(&mut connection).await.unwrap();
    }
}

/// A key asked every 2 s (client time) for over an hour, half of its quota (one unit a second,
/// burst 1,000): after its first requests every decision is its lease's, since each refresh
/// starts (on a task) when half of the lease is left, and lands before the other half is spent
/// (the test lets each refresh land before the next request, as a client's spacing would); the
/// leases grow to twice what is spent per lease interval (100 s here: 100 units), so far fewer
/// round trips are made than decisions. (The slow quota keeps the key alive in real time: its
/// TTL is the TAT's lead in client time.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steady_key_is_decided_by_its_lease_refreshed_before_it_runs_out() {
    let server = shared_database();
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_700_000_040));
    let bucket = TokenBucket::new("1/s burst 1000".parse().unwrap()).unwrap();
    let limiter = RedisLimiter::builder(server.url(), bucket, fail_closed())
        .time(TimeSource::client(clock.clone()))
        .deadline(Duration::from_secs(5))
        .prefix("steady:")
        .leased()
        .lease_interval(Duration::from_secs(100))
        .connect()
        .await
        .unwrap();
    let limiter = Arc::new(limiter);
    let mut by_redis_after_warmup = 0;
    for request in 0..2_000 {
        clock.advance(Duration::from_secs(2));
        let answer = check_spaced(&limiter, "k").await;
        assert!(answer.is_allowed(), "{answer:?}");
        if request >= 10 && answer.decided_by != DecidedBy::Lease {
            by_redis_after_warmup += 1;
        }
    }
    let counts = limiter.counts();
    assert_eq!(by_redis_after_warmup, 0, "{counts:?}");
    assert!(counts.refreshes > 0, "{counts:?}");
    // At most one round trip per ten decisions (slots pass at twice the spending).
    assert!(counts.round_trips * 10 < 2_000, "{counts:?}");
}

/// Every decision is counted once, as a lease's or as a request's round trip, when four
/// threads decide at once on keys of their own and on one they share: the local decisions are
/// counted on each thread's own line, and their sum loses none.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_decision_is_counted_once_from_several_threads() {
    let server = shared_database();
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_700_000_040));
    let bucket = TokenBucket::new("1/s burst 100000".parse().unwrap()).unwrap();
    let limiter = RedisLimiter::builder(server.url(), bucket, fail_closed())
        .time(TimeSource::client(clock.clone()))
        .deadline(Duration::from_secs(5))
        .prefix("counted:")
        .leased()
        .connect()
        .await
        .unwrap();
    let limiter = Arc::new(limiter);
    const TASKS: usize = 4;
    const REQUESTS: usize = 500;
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let limiter = Arc::clone(&limiter);
            tokio::spawn(async move {
                for request in 0..REQUESTS {
                    let key = if request % 2 == 0 {
                        format!("own-{task}")
                    } else {
                        "shared".to_owned()
                    };
                    let answer = limiter.check(&key).await.unwrap();
                    assert!(answer.is_allowed(), "{answer:?}");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    settle(std::slice::from_ref(&limiter)).await;
    let counts = limiter.counts();
    let asked = counts.round_trips - counts.refreshes;
    assert_eq!(
        counts.local_decisions + asked,
        (TASKS * REQUESTS) as u64,
        "{counts:?}"
    );
    assert!(
        counts.local_decisions > (TASKS * REQUESTS / 2) as u64,
        "{counts:?}"
    );
}

/// A peek counts nothing, in the lease or in Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peek_counts_nothing() {
    let server = shared_database();
    let frozen = TimeSource::client(ManualClock::starting_at(Timestamp::from_secs(1_700_000_040)));
    let bucket = TokenBucket::new("100/h".parse().unwrap()).unwrap();
    let limiter = Arc::new(leased(&server, bucket, frozen, "peek:").await);
    // A key never seen: Redis's peek.
    let answer = limiter.peek("k").await.unwrap();
    assert_eq!(
        (answer.decided_by, answer.decision.remaining()),
        (DecidedBy::Redis, 99)
    );
    for _ in 0..10 {
        assert!(limiter.check("k").await.unwrap().is_allowed());
    }
    settle(std::slice::from_ref(&limiter)).await;
    let held = limiter.units_held();
    assert!(held > 0);
    let answer = limiter.peek_n("k", 2).await.unwrap();
    assert_eq!(answer.decided_by, DecidedBy::Lease);
    assert!(answer.is_allowed());
    assert_eq!(limiter.units_held(), held);
    // A weightless request is always admitted, and takes nothing.
    assert!(limiter.check_n("k", 0).await.unwrap().is_allowed());
    assert_eq!(limiter.units_held(), held);
}

/// A reset forgets the key in Redis and this process's lease of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_forgets_the_key_and_its_lease() {
    let server = shared_database();
    let frozen = TimeSource::client(ManualClock::starting_at(Timestamp::from_secs(1_700_000_040)));
    let window = FixedWindow::new("100/h".parse().unwrap()).unwrap();
    let limiter = Arc::new(leased(&server, window, frozen, "reset:").await);
    for _ in 0..10 {
        assert!(limiter.check("k").await.unwrap().is_allowed());
    }
    settle(std::slice::from_ref(&limiter)).await;
    assert!(limiter.units_held() > 0);
    assert!(limiter.reset("k").await.unwrap());
    assert_eq!(limiter.units_held(), 0);
    let answer = limiter.check("k").await.unwrap();
    assert_eq!(
        (answer.decided_by, answer.decision.remaining()),
        (DecidedBy::Redis, 99)
    );
}

/// Leased and per-decision instances on one key, at a frozen client time: together at most the
/// quota, and Redis's count is what they admitted plus what the leases still hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_and_per_decision_instances_share_a_key() {
    let server = shared_database();
    let start = Timestamp::from_secs(1_700_000_040);
    let frozen = TimeSource::client(ManualClock::starting_at(start));
    let bucket = TokenBucket::new("100/h".parse().unwrap()).unwrap();
    let mut tasks = Vec::new();
    let mut leased_limiters = Vec::new();
    for instance in 0..INSTANCES {
        if instance % 2 == 0 {
            let limiter = Arc::new(leased(&server, bucket, frozen.clone(), "mixed:").await);
            leased_limiters.push(Arc::clone(&limiter));
            tasks.push(tokio::spawn(async move {
                let mut admitted = 0;
                for _ in 0..40 {
                    admitted += u64::from(limiter.check("k").await.unwrap().is_allowed());
                }
                admitted
            }));
        } else {
            let limiter = RedisLimiter::builder(server.url(), bucket, fail_closed())
                .time(frozen.clone())
                .prefix("mixed:")
                .connect()
                .await
                .unwrap();
            tasks.push(tokio::spawn(async move {
                let mut admitted = 0;
                for _ in 0..40 {
                    admitted += u64::from(limiter.check("k").await.unwrap().is_allowed());
                }
                admitted
            }));
        }
    }
    let mut admitted = 0;
    for task in tasks {
        admitted += task.await.unwrap();
    }
    settle(&leased_limiters).await;
    let held: u64 = leased_limiters.iter().map(|l| l.units_held()).sum();
    let dropped: u64 = leased_limiters.iter().map(|l| l.counts().units_dropped).sum();
    let mut connection = raw_connection(&server).await;
    let taken = taken_in_redis(
        &mut connection,
        &leased_limiters[0].redis_key("k"),
        &bucket.into(),
        start,
    )
    .await;
    assert!(admitted <= 100);
    assert_eq!(taken, admitted + held + dropped);
}

/// A leased limiter's quota is the one it was built with: a quota changed on its per-decision
/// limiter (`per_decision().set_algorithm`, 100 a window to 1,000) changes that limiter's own
/// decisions, never the leases'. At a frozen client time the leased limiter admits at most its
/// 100, and Redis's count is what it admitted plus what its lease holds and dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_changed_on_the_per_decision_limiter_leaves_the_leases_quota() {
    let server = shared_database();
    let start = Timestamp::from_secs(1_700_000_040);
    let frozen = TimeSource::client(ManualClock::starting_at(start));
    let window = FixedWindow::new("100/h".parse().unwrap()).unwrap();
    let limiter = Arc::new(leased(&server, window, frozen, "pinned:").await);
    let larger = FixedWindow::new("1000/h".parse().unwrap()).unwrap();
    limiter.per_decision().set_algorithm(larger).unwrap();
    assert_eq!(limiter.algorithm(), window.into());
    assert_eq!(limiter.capacity(), 100);
    let mut admitted = 0;
    for _ in 0..300 {
        admitted += u64::from(check_spaced(&limiter, "k").await.is_allowed());
    }
    settle(std::slice::from_ref(&limiter)).await;
    let held = limiter.units_held();
    let dropped = limiter.counts().units_dropped;
    let mut connection = raw_connection(&server).await;
    let taken = taken_in_redis(&mut connection, &limiter.redis_key("k"), &window.into(), start).await;
    assert!(admitted <= 100, "{admitted} admitted");
    assert_eq!(taken, admitted + held + dropped);
    assert!(taken <= 100, "{taken} taken");
    // The per-decision limiter decides under its own, changed quota.
    let answer = limiter.per_decision().check("k").await.unwrap();
    assert!(answer.is_allowed(), "{answer:?}");
}

/// Every configuration a leased limiter refuses, with what to fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configurations_that_cannot_lease_are_refused() {
    let server = shared_database();
    let not_leased: [RedisAlgorithm; 2] = [
        LeakyBucket::new("10/s".parse().unwrap()).unwrap().into(),
        SlidingLog::new("10/s".parse().unwrap()).unwrap().into(),
    ];
    for algorithm in not_leased {
        let error = RedisLimiter::builder(server.url(), algorithm, fail_closed())
            .leased()
            .connect()
            .await
            .unwrap_err();
        assert!(
            matches!(error, LeaseConfigError::NotLeasable { algorithm: name } if name == algorithm.name()),
            "{error:?}"
        );
        assert!(
            error
                .to_string()
                .contains("lease a token bucket, a fixed window or a sliding window counter"),
            "{error}"
        );
    }
    let bucket = TokenBucket::new("10/s".parse().unwrap()).unwrap();
    let builder = || RedisLimiter::builder(server.url(), bucket, fail_closed()).leased();
    let error = builder().max_lease(0).connect().await.unwrap_err();
    assert!(matches!(error, LeaseConfigError::ZeroMaxLease), "{error:?}");
    let error = builder()
        .lease_interval(Duration::from_nanos(999))
        .connect()
        .await
        .unwrap_err();
    assert!(
        matches!(error, LeaseConfigError::IntervalTooShort { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("at least 1 µs"), "{error}");
    let error = builder().keys(0).connect().await.unwrap_err();
    assert!(
        matches!(error, LeaseConfigError::Keys(CapacityError::Zero)),
        "{error:?}"
    );
    let error = RedisLimiter::builder(server.url(), bucket, fail_closed())
        .prefix("a{b")
        .leased()
        .connect()
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            LeaseConfigError::Redis(RedisConfigError::BraceInPrefix { .. })
        ),
        "{error:?}"
    );
    // The default largest lease is a quarter of the burst (10 here), at least one unit.
    let limiter = builder().connect().await.unwrap();
    assert_eq!(limiter.max_lease(), 2);
    let small = TokenBucket::new("2/s burst 3".parse().unwrap()).unwrap();
    let limiter = RedisLimiter::builder(server.url(), small, fail_closed())
        .leased()
        .connect()
        .await
        .unwrap();
    assert_eq!(limiter.max_lease(), 1);
    let big = TokenBucket::new("1000/s burst 800".parse().unwrap()).unwrap();
    let limiter = RedisLimiter::builder(server.url(), big, fail_closed())
        .leased()
        .connect()
        .await
        .unwrap();
    assert_eq!(limiter.max_lease(), 200);
}

/// A key holding what is not the algorithm's state is a typed error, as for the per-decision
/// limiter; a request heavier than the capacity is one before Redis is asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_values_and_heavy_requests_are_typed_errors() {
    let server = shared_database();
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_700_000_040));
    let mut connection = raw_connection(&server).await;
    for algorithm in [
        RedisAlgorithm::from(TokenBucket::new("100/h".parse().unwrap()).unwrap()),
        FixedWindow::new("100/h".parse().unwrap()).unwrap().into(),
    ] {
        let limiter = leased(&server, algorithm, TimeSource::client(clock.clone()), "foreign:").await;
        let key = limiter.redis_key("text");
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg("hello")
            .query_async(&mut connection)
            .await
            .unwrap();
        assert!(
            matches!(limiter.check("text").await, Err(RedisCheckError::CorruptState { key: k }) if k == key),
            "{}",
            algorithm.name()
        );
        let key = limiter.redis_key("list");
        let _: () = redis::cmd("RPUSH")
            .arg(&key)
            .arg("x")
            .query_async(&mut connection)
            .await
            .unwrap();
        assert!(
            matches!(limiter.check("list").await, Err(RedisCheckError::WrongType { key: k }) if k == key),
            "{}",
            algorithm.name()
        );
        assert!(matches!(
            limiter.check_n("k", 101).await,
            Err(RedisCheckError::CostTooLarge(_))
        ));
        assert!(clock.now() > Timestamp::UNIX_EPOCH);
    }
}
