//! The limiter on a real Redis Cluster (three masters with a replica each, shared by this
//! binary's tests, each under its own key prefix): keys spread over every master, each admitting
//! exactly its quota across a fleet of clients; a script missing on one node, sent again there;
//! shaped slots given back through the tower layer; sliding logs whose client key leaves the
//! hash tag empty.
//!
//! The decisions table, refunds and resets run on the same kind of cluster in
//! `same_decisions.rs`, `refund.rs` and `reset.rs`; failover and resharding
//! under load, on clusters of their own, in `cluster_failover.rs` and
//! `cluster_reshard.rs`.

use std::sync::Arc;
use std::time::Duration;

use crate::redis_common::client_time_limiter;
use crate::redis_common::cluster::{command, RedisCluster};
use tollgate::distributed::{
    DecidedBy, FailurePolicy, RedisAlgorithm, RedisLimiter, TimeSource, PACKED_LOG_LIMIT,
};
use tollgate::{
    FixedWindow, LeakyBucket, ManualClock, Quota, SlidingLog, SlidingWindow, Timestamp, TokenBucket,
};

/// Taken shared by every test of this binary, and alone by the one that flushes scripts, so
/// that no other test loads them again between its `SCRIPT FLUSH` and its decision.
static SCRIPTS: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// Client keys of the fleet test.
const KEYS: usize = 1_000;
/// Instances of the fleet, each with its own cluster connection.
const CLIENTS: usize = 4;
/// Concurrent tasks per instance.
const TASKS: usize = 8;
/// Requests per key from each instance: 8 in all, more than any quota below.
const REQUESTS: usize = 2;

/// A frozen client time: nothing refills, and no key's TTL (its reset-after in client time,
/// an hour) runs out during a test.
fn frozen() -> ManualClock {
    ManualClock::starting_at(Timestamp::from_secs(1_700_000_040))
}

fn quota(text: &str) -> Quota {
    text.parse().unwrap()
}

/// Every algorithm at a quota of 3 an hour.
fn algorithms() -> [(&'static str, RedisAlgorithm); 5] {
    [
        ("tb", TokenBucket::new(quota("1/h burst 3")).unwrap().into()),
        ("lb", LeakyBucket::new(quota("1/h burst 3")).unwrap().into()),
        ("fw", FixedWindow::new(quota("3/h")).unwrap().into()),
        ("sw", SlidingWindow::new(quota("3/h")).unwrap().into()),
        ("log", SlidingLog::new(quota("3/h")).unwrap().into()),
    ]
}

/// 1,000 keys whose slots fall on all three masters (as `CLUSTER KEYSLOT` and `CLUSTER NODES`
/// say), four instances each with its own cluster connection, eight tasks each, two requests
/// per key from each instance, at a frozen client time: every key admits exactly its quota of 3,
/// for every algorithm, and every decision is Redis's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_admits_exactly_each_keys_quota_on_every_master() {
    let _scripts = SCRIPTS.read().await;
    let cluster = RedisCluster::shared();
    let clock = frozen();
    let keys: Arc<Vec<String>> = Arc::new((0..KEYS).map(|i| format!("client-{i}")).collect());
    let masters = cluster.masters();
    assert_eq!(masters.len(), 3);
    for (name, algorithm) in algorithms() {
        let prefix = format!("spread-{name}:");
        let mut limiters = Vec::new();
        for _ in 0..CLIENTS {
            let limiter = client_time_limiter(cluster, algorithm, &clock, &prefix).await;
            limiters.push(Arc::new(limiter));
        }
        // The keys in Redis, and the master of each one's slot.
        let redis_keys: Vec<String> = keys.iter().map(|key| limiters[0].redis_key(key)).collect();
        let slots = cluster.slots(&redis_keys);
        let on_each: Vec<usize> = masters
            .iter()
            .map(|master| slots.iter().filter(|&&slot| master.serves(slot)).count())
            .collect();
        assert_eq!(on_each.iter().sum::<usize>(), KEYS, "{name}: {on_each:?}");
        assert!(
            on_each.iter().all(|&count| count >= KEYS / 4),
            "{name}: keys per master {on_each:?}"
        );
        let mut tasks = Vec::new();
        for limiter in &limiters {
            for task in 0..TASKS {
                let (limiter, keys) = (Arc::clone(limiter), Arc::clone(&keys));
                tasks.push(tokio::spawn(async move {
                    let mut admitted = vec![0u32; KEYS];
                    for index in (task..KEYS).step_by(TASKS) {
                        for _ in 0..REQUESTS {
                            let answer = limiter.check(&keys[index]).await.unwrap();
                            assert_eq!(answer.decided_by, DecidedBy::Redis, "{}: {answer:?}", keys[index]);
                            admitted[index] += u32::from(answer.is_allowed());
                        }
                    }
                    admitted
                }));
            }
        }
        let mut admitted = vec![0u32; KEYS];
        for task in tasks {
            for (sum, count) in admitted.iter_mut().zip(task.await.unwrap()) {
                *sum += count;
            }
        }
        for (index, count) in admitted.iter().enumerate() {
            assert_eq!(*count, 3, "{name}: {} (slot {})", keys[index], slots[index]);
        }
    }
}

/// On the servers' clocks (each master's `TIME`), six instances share a bucket of 20 that
/// refills one unit an hour on each of ten keys: each admits exactly its burst.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_servers_clocks_a_fleet_admits_exactly_the_burst() {
    let _scripts = SCRIPTS.read().await;
    let cluster = RedisCluster::shared();
    let bucket = TokenBucket::new(quota("1/h burst 20")).unwrap();
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let limiter = RedisLimiter::cluster_builder(cluster.seeds(), bucket, FailurePolicy::FailOpen)
            .time(TimeSource::Server)
            .prefix("server-time:")
            .deadline(Duration::from_secs(5))
            .connect()
            .await
            .unwrap();
        tasks.push(tokio::spawn(async move {
            let mut admitted = [0u32; 10];
            for _ in 0..10 {
                for (key, count) in admitted.iter_mut().enumerate() {
                    let answer = limiter.check(&format!("key-{key}")).await.unwrap();
                    assert_eq!(answer.decided_by, DecidedBy::Redis, "{answer:?}");
                    *count += u32::from(answer.is_allowed());
                }
            }
            admitted
        }));
    }
    let mut admitted = [0u32; 10];
    for task in tasks {
        for (sum, count) in admitted.iter_mut().zip(task.await.unwrap()) {
            *sum += count;
        }
    }
    assert_eq!(admitted, [20; 10]);
}

/// A client key of `master`'s slots, among `candidates` (a prefix and a number).
fn key_on(cluster: &RedisCluster, limiter: &RedisLimiter, master: u16, candidates: &str) -> String {
    let master = cluster
        .masters()
        .into_iter()
        .find(|node| node.port == master)
        .unwrap();
    let keys: Vec<String> = (0..100).map(|i| format!("{candidates}{i}")).collect();
    let redis_keys: Vec<String> = keys.iter().map(|key| limiter.redis_key(key)).collect();
    let slots = cluster.slots(&redis_keys);
    let at = slots.iter().position(|&slot| master.serves(slot)).unwrap();
    keys[at].clone()
}

/// After a `SCRIPT FLUSH` on one master (as after a restart, or on a replica promoted without
/// the script), a decision on a key of that master is still Redis's, and the script is cached
/// there again: the limiter sent `EVAL` to that node after its `NOSCRIPT`, not `SCRIPT LOAD` to
/// every node.
#[tokio::test(flavor = "current_thread")]
async fn a_script_missing_on_one_node_is_sent_again_to_that_node() {
    let _alone = SCRIPTS.write().await;
    let cluster = RedisCluster::shared();
    let clock = frozen();
    for (name, algorithm) in algorithms() {
        let limiter = client_time_limiter(cluster, algorithm, &clock, &format!("noscript-{name}:")).await;
        let hash = redis::Script::new(algorithm.script_source())
            .get_hash()
            .to_owned();
        for master in cluster.masters() {
            let key = key_on(cluster, &limiter, master.port, "k");
            let first = limiter.check(&key).await.unwrap();
            assert_eq!(first.decided_by, DecidedBy::Redis, "{name}");
            let exists: Vec<bool> = command(master.port, &["SCRIPT", "EXISTS", &hash]);
            assert_eq!(exists, [true], "{name}: cached on {}", master.port);
            let () = command(master.port, &["SCRIPT", "FLUSH"]);
            let exists: Vec<bool> = command(master.port, &["SCRIPT", "EXISTS", &hash]);
            assert_eq!(exists, [false], "{name}: flushed on {}", master.port);
            let second = limiter.check(&key).await.unwrap();
            assert_eq!(second.decided_by, DecidedBy::Redis, "{name}: {second:?}");
            assert_eq!(second.decision.remaining(), 1, "{name}: the key's count kept");
            let exists: Vec<bool> = command(master.port, &["SCRIPT", "EXISTS", &hash]);
            assert_eq!(exists, [true], "{name}: cached again on {}", master.port);
        }
    }
}

/// A log's script reads the same client's key in its other encoding, in the same slot thanks to
/// the hash tag, except for a client key that is empty or starts with `}`: its tag is empty, and
/// the two keys fall in different slots (`CROSSSLOT` for a script touching both). On a cluster
/// the limiter leaves the other key out for such a key: it is decided by Redis, and reset.
#[tokio::test(flavor = "current_thread")]
async fn a_log_whose_client_key_leaves_the_tag_empty_is_decided_by_redis() {
    let _scripts = SCRIPTS.read().await;
    let cluster = RedisCluster::shared();
    let clock = frozen();
    for limit in [3, PACKED_LOG_LIMIT + 44] {
        let log = SlidingLog::new(Quota::new(limit, Duration::from_secs(3_600)).unwrap()).unwrap();
        // A prefix per limit: the log of 300 would read the log of 3's units as its own.
        let prefix = format!("empty-tag-{limit}:");
        let limiter = client_time_limiter(cluster, log, &clock, &prefix).await;
        for key in ["", "}", "}x", "ok"] {
            let (packed, list) = (
                format!("{prefix}{{{key}}}:log2"),
                format!("{prefix}{{{key}}}:log"),
            );
            let apart = cluster.slot(&packed) != cluster.slot(&list);
            assert_eq!(apart, key != "ok", "{key:?}");
            let mut admitted = 0;
            for _ in 0..limit + 2 {
                let answer = limiter.check(key).await.unwrap();
                assert_eq!(answer.decided_by, DecidedBy::Redis, "{key:?}: {answer:?}");
                admitted += u64::from(answer.is_allowed());
            }
            assert_eq!(admitted, limit, "{key:?}");
            assert_eq!(limiter.reset(key).await, Ok(true), "{key:?}");
            let answer = limiter.check(key).await.unwrap();
            assert!(answer.is_allowed(), "{key:?}: {answer:?}");
        }
    }
}

#[cfg(feature = "tower")]
mod layer {
    use tollgate::middleware::{Origin, RateLimiter};

    use super::*;

    /// The client time the shapers stand at.
    const FROZEN: u64 = 1_800_000_000;

    /// The layer's decision for `key`: the slot it was given.
    async fn slot(limiter: &RedisLimiter, key: &str) -> Origin {
        let (decision, origin) = RateLimiter::<String>::decide_within(limiter, &key.to_owned(), 1, None)
            .await
            .unwrap();
        assert!(decision.is_allowed(), "{key}: {decision:?}");
        origin
    }

    /// Clients D, C and B of a shaper (one slot every 10 s) leaving in that order give back all
    /// three slots through the layer, on keys of every master: the key's TAT is back at A's
    /// slot, 10 s after the frozen time.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn slots_given_back_from_the_end_of_the_queue_all_come_back() {
        let _scripts = super::SCRIPTS.read().await;
        let cluster = RedisCluster::shared();
        let shaper = LeakyBucket::new(quota("1/10s burst 5")).unwrap();
        let clock = ManualClock::starting_at(Timestamp::from_secs(FROZEN));
        let limiter = client_time_limiter(cluster, shaper, &clock, "slots:").await;
        let mut raw = cluster.raw_connection().await;
        let masters = cluster.masters();
        let mut on_each = vec![0; masters.len()];
        for round in 0..30 {
            let key = format!("k{round}");
            let slot_of_key = cluster.slot(&limiter.redis_key(&key));
            on_each[masters.iter().position(|m| m.serves(slot_of_key)).unwrap()] += 1;
            let mut slots = Vec::new();
            for _ in 0..4 {
                slots.push(slot(&limiter, &key).await);
            }
            for slot in slots[1..].iter().rev() {
                RateLimiter::<String>::refund(&limiter, key.clone(), 1, *slot);
            }
            let wanted = ((FROZEN + 10) * 1_000_000) as i64;
            let mut tat = None;
            for _ in 0..500 {
                let stored: Option<Vec<u8>> = redis::cmd("GET")
                    .arg(limiter.redis_key(&key))
                    .query_async(&mut raw)
                    .await
                    .unwrap();
                tat = stored.map(|bytes| i64::from_le_bytes(bytes.try_into().unwrap()));
                if tat == Some(wanted) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            assert_eq!(tat, Some(wanted), "{key}");
        }
        assert!(on_each.iter().all(|&count| count > 0), "{on_each:?}");
    }
}
