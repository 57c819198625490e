//! Redis under `maxmemory` (`docs/distributed.md`, "Redis memory: maxmemory and eviction").
//!
//! With `noeviction` (Redis's default) and memory full, a script's first write fails with
//! `OOM`: an admission is then answered by the failure policy (`Failure::OutOfMemory`), a refusal
//! or a peek (which write nothing) is still Redis's, nothing is counted or left without a TTL,
//! and decisions go back to Redis by themselves once memory is available. With an evicting
//! policy, an evicted key comes back fresh: a client in debt is admitted a whole quota again.
//!
//! "Memory full" is `maxmemory` set to half of `used_memory` (the server's baseline, about 1 MB
//! on Redis 7.0, is far above the few KiB these keys hold), so it is full whatever else the
//! server allocates meanwhile. Client time, frozen: nothing drains between two decisions.

use std::time::{Duration, Instant};

use crate::redis_common::{client_time_limiter, client_time_limiter_with, raw_connection, RedisServer};
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use tollgate::distributed::{DecidedBy, Failure, FailurePolicy, RedisAlgorithm, RedisLimiter};
use tollgate::{
    FixedWindow, KeyedLimiter, LeakyBucket, ManualClock, Outcome, SlidingLog, SlidingWindow, Timestamp,
    TokenBucket,
};

/// The retry-after of `client_time_limiter`'s `FailClosed`.
const CLOSED_RETRY: Duration = Duration::from_secs(1);

/// Every algorithm, with an hour's quota (nothing expires during a test): capacity 3, and a log
/// of 300 (a Redis list, above `PACKED_LOG_LIMIT`).
fn every_algorithm() -> [RedisAlgorithm; 6] {
    let quota = "3/h".parse().unwrap();
    [
        TokenBucket::new(quota).unwrap().into(),
        LeakyBucket::new(quota).unwrap().into(),
        FixedWindow::new(quota).unwrap().into(),
        SlidingWindow::new(quota).unwrap().into(),
        SlidingLog::new(quota).unwrap().into(),
        SlidingLog::new("300/h".parse().unwrap()).unwrap().into(),
    ]
}

/// The name of an algorithm in messages: the log's two encodings apart.
fn label(algorithm: &RedisAlgorithm) -> String {
    format!("{} (capacity {})", algorithm.name(), algorithm.capacity())
}

/// `clock`'s limiter failing open, on `prefix`, waiting up to 5 s for Redis.
async fn fail_open(
    server: &RedisServer,
    algorithm: RedisAlgorithm,
    clock: &ManualClock,
    prefix: &str,
) -> RedisLimiter {
    client_time_limiter_with(server, algorithm, clock, prefix, FailurePolicy::FailOpen).await
}

async fn config_set(raw: &mut MultiplexedConnection, name: &str, value: &str) {
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query_async(raw)
        .await
        .unwrap();
}

/// `used_memory` from `INFO memory`: what `maxmemory` is compared with.
async fn used_memory(raw: &mut MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO").arg("memory").query_async(raw).await.unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("used_memory:"))
        .and_then(|value| value.trim().parse().ok())
        .expect("INFO memory has used_memory")
}

/// `noeviction`, with `maxmemory` at half of what is used: every write that may grow memory is
/// refused with `OOM`.
async fn fill_memory(raw: &mut MultiplexedConnection) {
    config_set(raw, "maxmemory-policy", "noeviction").await;
    let used = used_memory(raw).await;
    config_set(raw, "maxmemory", &(used / 2).to_string()).await;
    // Redis agrees that memory is full: a plain write is refused.
    let refused: redis::RedisResult<()> = raw.set("probe", "x").await;
    let error = refused.expect_err("a write with memory full");
    assert_eq!(error.code(), Some("OOM"), "{error:?}");
}

async fn free_memory(raw: &mut MultiplexedConnection) {
    config_set(raw, "maxmemory", "0").await;
}

/// The serialized value of `key` (a string or a list alike), without its TTL.
async fn dump(raw: &mut MultiplexedConnection, key: &str) -> Vec<u8> {
    redis::cmd("DUMP").arg(key).query_async(raw).await.unwrap()
}

/// Every key on the server has a time to live: none can outlive its state.
async fn assert_every_key_expires(raw: &mut MultiplexedConnection, when: &str) {
    let keys: Vec<String> = raw.keys("*").await.unwrap();
    for key in keys {
        let ttl: i64 = raw.pttl(&key).await.unwrap();
        assert!(ttl > 0, "{when}: {key} has no TTL ({ttl})");
    }
}

/// With memory full under `noeviction`, for every algorithm: an admission fails to write and
/// the policy answers it (`FailOpen` admits untracked, `FailClosed` refuses, both with
/// `Failure::OutOfMemory`); a refusal and a peek are still Redis's, even right after the failure (an
/// OOM is an answer from Redis, not a sign that it is down); the state and its TTL are as they
/// were (nothing counted), even with the script to load again (`SCRIPT FLUSH`: `SCRIPT LOAD`
/// is allowed under OOM), and a bucket's refund gives nothing back; and once `maxmemory` is lifted, Redis decides again with the count
/// intact.
#[tokio::test(flavor = "current_thread")]
async fn with_memory_full_admissions_follow_the_policy_and_refusals_stay_redis() {
    let server = RedisServer::start();
    let mut raw = raw_connection(&server).await;
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_800_000_000));
    for (index, algorithm) in every_algorithm().into_iter().enumerate() {
        let name = label(&algorithm);
        let prefix = format!("full{index}:");
        let closed = client_time_limiter(&server, algorithm, &clock, &prefix).await;
        let open = fail_open(&server, algorithm, &clock, &prefix).await;
        let capacity = closed.capacity();
        let key = closed.redis_key("k");

        // All but one unit counted by Redis.
        let first = closed.check_n("k", capacity - 1).await.unwrap();
        assert_eq!(first.decided_by, DecidedBy::Redis, "{name}: {first:?}");
        assert!(first.is_allowed(), "{name}: {first:?}");
        let state = dump(&mut raw, &key).await;
        let ttl: i64 = raw.pttl(&key).await.unwrap();
        assert!(ttl > 0, "{name}: {ttl}");

        fill_memory(&mut raw).await;
        let () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut raw)
            .await
            .unwrap();

        for round in 0..2 {
            // The last unit would be admitted: its write fails, the policy answers.
            let admitted = open.check("k").await.unwrap();
            assert_eq!(
                admitted.decided_by,
                DecidedBy::FailOpen,
                "{name} {round}: {admitted:?}"
            );
            assert_eq!(admitted.failure, Some(Failure::OutOfMemory), "{name} {round}");
            assert_eq!(admitted.decision.outcome(), Outcome::AllowedUntracked, "{name}");
            assert_eq!(admitted.decision.remaining(), capacity - 1, "{name}");
            assert_eq!(admitted.decision.retry_after(), Duration::ZERO, "{name}");
            // Right after that failure, a refusal is still decided by Redis.
            let refused = open.check_n("k", capacity).await.unwrap();
            assert_eq!(
                refused.decided_by,
                DecidedBy::Redis,
                "{name} {round}: {refused:?}"
            );
            assert_eq!(refused.failure, None, "{name}");
            assert_eq!(refused.decision.outcome(), Outcome::Denied, "{name}");
            assert_eq!(refused.decision.remaining(), 1, "{name}");

            let shut = closed.check("k").await.unwrap();
            assert_eq!(shut.decided_by, DecidedBy::FailClosed, "{name} {round}: {shut:?}");
            assert_eq!(shut.failure, Some(Failure::OutOfMemory), "{name}");
            assert_eq!(shut.decision.outcome(), Outcome::Denied, "{name}");
            assert_eq!(shut.decision.remaining(), 0, "{name}");
            assert_eq!(shut.decision.retry_after(), CLOSED_RETRY, "{name}");
            let refused = closed.check_n("k", capacity).await.unwrap();
            assert_eq!(
                refused.decided_by,
                DecidedBy::Redis,
                "{name} {round}: {refused:?}"
            );
            assert_eq!(refused.decision.outcome(), Outcome::Denied, "{name}");

            // A peek writes nothing: Redis's, and it would admit the last unit.
            let peek = closed.peek("k").await.unwrap();
            assert_eq!(peek.decided_by, DecidedBy::Redis, "{name} {round}: {peek:?}");
            assert!(peek.is_allowed(), "{name}: {peek:?}");
            assert_eq!(peek.decision.remaining(), 0, "{name}");
            // A fresh key's admission fails too, and leaves no key behind.
            let fresh = open.check("fresh").await.unwrap();
            assert_eq!(fresh.decided_by, DecidedBy::FailOpen, "{name}: {fresh:?}");
            assert_eq!(fresh.failure, Some(Failure::OutOfMemory), "{name}");
            let exists: bool = raw.exists(open.redis_key("fresh")).await.unwrap();
            assert!(!exists, "{name}: a failed first admission left a key");
        }
        // A bucket's refund would write (`gcra_refund.lua`'s `PSETEX`): best effort, nothing
        // given back (the windows and the log give nothing back anyway).
        assert_eq!(open.refund_n("k", 1).await, Ok(false), "{name}");
        // Nothing was written: the same state, still expiring (no sooner than it would have).
        assert_eq!(dump(&mut raw, &key).await, state, "{name}: the state changed");
        let still: i64 = raw.pttl(&key).await.unwrap();
        assert!(still > 0 && still <= ttl, "{name}: TTL {ttl} then {still}");
        assert_every_key_expires(&mut raw, &name).await;

        free_memory(&mut raw).await;
        // Back to Redis at once, with the count intact: one unit left, then none.
        let last = open.check("k").await.unwrap();
        assert_eq!(last.decided_by, DecidedBy::Redis, "{name}: {last:?}");
        assert_eq!(last.decision.outcome(), Outcome::Allowed, "{name}: {last:?}");
        assert_eq!(last.decision.remaining(), 0, "{name}");
        let over = closed.check("k").await.unwrap();
        assert_eq!(over.decided_by, DecidedBy::Redis, "{name}: {over:?}");
        assert_eq!(
            over.decision.outcome(),
            Outcome::Denied,
            "{name}: counted twice or lost"
        );
        assert_every_key_expires(&mut raw, &name).await;
    }
}

/// A server started full (`maxmemory 1`, below its own baseline, under `noeviction`): every
/// algorithm's admission is `Failure::OutOfMemory`, never `Server`, and every policy answers it
/// (fail open admits uncounted, fail closed refuses, the fallback counts it locally), with no
/// key left in Redis. The breaker stays closed: a peek right after, which writes nothing, is
/// Redis's, and so is a reset.
#[tokio::test(flavor = "current_thread")]
async fn a_server_started_full_is_out_of_memory_under_every_policy() {
    let server = RedisServer::start_with(&["--maxmemory", "1", "--maxmemory-policy", "noeviction"]);
    let mut raw = raw_connection(&server).await;
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_800_000_000));
    for (index, algorithm) in every_algorithm().into_iter().enumerate() {
        let name = label(&algorithm);
        let bucket = TokenBucket::new("3/h".parse().unwrap()).unwrap();
        let fallback = KeyedLimiter::<str, _, _>::with_clock(bucket, 100, clock.clone()).unwrap();
        let policies = [
            (
                FailurePolicy::FailOpen,
                DecidedBy::FailOpen,
                Outcome::AllowedUntracked,
            ),
            (
                FailurePolicy::FailClosed {
                    retry_after: CLOSED_RETRY,
                },
                DecidedBy::FailClosed,
                Outcome::Denied,
            ),
            (
                FailurePolicy::fallback(fallback),
                DecidedBy::Fallback,
                Outcome::Allowed,
            ),
        ];
        for (policy, decided_by, outcome) in policies {
            let prefix = format!("oom{index}:");
            let limiter = client_time_limiter_with(&server, algorithm, &clock, &prefix, policy).await;
            let answer = limiter.check("k").await.unwrap();
            assert_eq!(answer.failure, Some(Failure::OutOfMemory), "{name}: {answer:?}");
            assert_eq!(answer.decided_by, decided_by, "{name}: {answer:?}");
            assert_eq!(answer.decision.outcome(), outcome, "{name}: {answer:?}");
            let exists: bool = raw.exists(limiter.redis_key("k")).await.unwrap();
            assert!(!exists, "{name}: a refused write left a key");
            let peek = limiter.peek("k").await.unwrap();
            assert_eq!(
                peek.decided_by,
                DecidedBy::Redis,
                "{name}: the breaker opened: {peek:?}"
            );
            assert!(peek.is_allowed(), "{name}: {peek:?}");
            // A reset writes nothing but its `DEL`, which Redis allows under OOM.
            assert_eq!(limiter.reset("k").await, Ok(false), "{name}");
        }
    }
}

/// The one admission Redis makes with memory full under `noeviction`: a log kept as a list
/// whose oldest entries have left the window drops them first (`LTRIM`, which Redis allows
/// under OOM, since it cannot grow memory), and a script that has written once is let finish
/// (Redis cannot undo its first write), so its `RPUSH` passes too. The log stays consistent
/// (entries and TTL written together); the next admission, with nothing to drop, fails.
#[tokio::test(flavor = "current_thread")]
async fn a_list_log_that_drops_old_entries_first_still_admits_with_memory_full() {
    let server = RedisServer::start();
    let mut raw = raw_connection(&server).await;
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_800_000_000));
    let log = SlidingLog::new("300/h".parse().unwrap()).unwrap();
    let limiter = fail_open(&server, log.into(), &clock, "trim:").await;
    let key = limiter.redis_key("k");
    assert_eq!(limiter.check("k").await.unwrap().decided_by, DecidedBy::Redis);
    // That entry leaves the window (the key lives on: its TTL ran from the client's time).
    clock.advance(Duration::from_secs(3_601));
    fill_memory(&mut raw).await;

    let trimmed = limiter.check_n("k", 2).await.unwrap();
    assert_eq!(trimmed.decided_by, DecidedBy::Redis, "{trimmed:?}");
    assert_eq!(trimmed.decision.outcome(), Outcome::Allowed);
    assert_eq!(trimmed.decision.remaining(), 298);
    let length: usize = raw.llen(&key).await.unwrap();
    assert_eq!(length, 2, "the old entry dropped, the two new ones pushed");
    let ttl: i64 = raw.pttl(&key).await.unwrap();
    assert!(ttl > 3_590_000, "the TTL moved with the admission: {ttl}");

    let next = limiter.check("k").await.unwrap();
    assert_eq!(next.decided_by, DecidedBy::FailOpen, "{next:?}");
    assert_eq!(next.failure, Some(Failure::OutOfMemory));
    free_memory(&mut raw).await;
    let next = limiter.check("k").await.unwrap();
    assert_eq!(next.decided_by, DecidedBy::Redis, "{next:?}");
    assert_eq!(next.decision.remaining(), 297);
}

/// With an evicting policy (`allkeys-lru`, and `volatile-lru`: every tollgate key has a TTL),
/// a key in debt that Redis evicts comes back fresh: its client is admitted a whole quota again,
/// by Redis, at the same instant. Real eviction, made deterministic: the keys in debt are the
/// least recently used (`OBJECT IDLETIME` polled until they are idle for longer than a filler
/// of 1 MiB just read), and `maxmemory` is lowered to 512 KiB below what is used, which only
/// evicting the filler can reach, so every key idler than it goes first.
#[tokio::test(flavor = "current_thread")]
async fn an_evicted_key_in_debt_is_admitted_a_whole_quota_again() {
    let server = RedisServer::start();
    let mut raw = raw_connection(&server).await;
    for policy in ["allkeys-lru", "volatile-lru"] {
        let clock = ManualClock::starting_at(Timestamp::from_secs(1_800_000_000));
        let mut limiters = Vec::new();
        for (index, algorithm) in every_algorithm().into_iter().enumerate() {
            // A prefix each: the log's two encodings would read each other's key.
            let prefix = format!("{policy}{index}:");
            let limiter = client_time_limiter(&server, algorithm, &clock, &prefix).await;
            let capacity = limiter.capacity();
            let full = limiter.check_n("k", capacity).await.unwrap();
            assert!(full.is_allowed(), "{policy} {}: {full:?}", label(&algorithm));
            let debt = limiter.check("k").await.unwrap();
            assert_eq!(debt.decided_by, DecidedBy::Redis, "{policy}: {debt:?}");
            assert!(!debt.is_allowed(), "{policy} {}: {debt:?}", label(&algorithm));
            limiters.push(limiter);
        }
        let keys: Vec<String> = limiters.iter().map(|limiter| limiter.redis_key("k")).collect();
        let () = raw.set_ex("filler", vec![b'x'; 1 << 20], 3_600).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let _: Vec<u8> = raw.get("filler").await.unwrap();
            let filler: u64 = idle(&mut raw, "filler").await;
            let mut least = u64::MAX;
            for key in &keys {
                least = least.min(idle(&mut raw, key).await);
            }
            if least > filler {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the keys never became idler than the filler"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        config_set(&mut raw, "maxmemory-policy", policy).await;
        config_set(&mut raw, "maxmemory-samples", "64").await;
        // The next command evicts; poll until every key in debt is gone. While one is left, the
        // limit follows the memory in use down (never up), 512 KiB below it: memory the server
        // frees of its own meanwhile (a buffer, the previous round's flush) would otherwise leave
        // it under the limit, evicting nothing. The server evicts in LRU order, so every key idler
        // than the filler goes before it.
        let mut limit = u64::MAX;
        let deadline = Instant::now() + Duration::from_secs(30);
        for key in &keys {
            while raw.exists::<_, bool>(key).await.unwrap() {
                assert!(Instant::now() < deadline, "{policy}: {key} was not evicted");
                let lower = used_memory(&mut raw).await.saturating_sub(512 << 10);
                if lower < limit {
                    limit = lower;
                    config_set(&mut raw, "maxmemory", &limit.to_string()).await;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        // Every key in debt is gone. The limit, lowered to force that, may now sit at what is in
        // use with nothing evictable left (under volatile-lru the filler too may have gone), where
        // the next write is refused as out of memory: lift it, as the eviction is what is tested.
        free_memory(&mut raw).await;
        // The same instant, the same clients: a whole quota again, each.
        for limiter in &limiters {
            let name = label(&limiter.algorithm());
            let again = limiter.check_n("k", limiter.capacity()).await.unwrap();
            assert_eq!(again.decided_by, DecidedBy::Redis, "{policy} {name}: {again:?}");
            assert!(again.is_allowed(), "{policy} {name}: the debt survived eviction");
            assert_eq!(again.decision.remaining(), 0, "{policy} {name}");
        }
        config_set(&mut raw, "maxmemory-policy", "noeviction").await;
        let () = redis::cmd("FLUSHALL").query_async(&mut raw).await.unwrap();
    }
}

/// `OBJECT IDLETIME` (seconds since the key was last used; it does not use it).
async fn idle(raw: &mut MultiplexedConnection, key: &str) -> u64 {
    redis::cmd("OBJECT")
        .arg("IDLETIME")
        .arg(key)
        .query_async(raw)
        .await
        .unwrap()
}
