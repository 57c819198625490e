//! A slot holding live keys migrated from one master of a real Redis Cluster to another while a
//! fleet decides on them (`CLUSTER SETSLOT ... IMPORTING/MIGRATING`, `MIGRATE` in batches,
//! `CLUSTER SETSLOT ... NODE`, as `redis-cli --cluster reshard` does): no decision is an error or
//! the failure policy's, and every key still admits exactly its quota. Scripts meet `ASK`
//! (a key already moved) and `TRYAGAIN` (a log's two keys, one of them absent, in a slot being
//! moved), which the cluster client retries within the deadline.

use std::sync::Arc;
use std::time::Duration;

use crate::redis_common::cluster::{command, error_count as errors, RedisCluster};
use tokio::sync::watch;
use tollgate::distributed::{DecidedBy, FailurePolicy, RedisAlgorithm, RedisLimiter};
use tollgate::{ManualClock, Quota, SlidingLog, Timestamp, TokenBucket};

/// Keys in the migrated slot: `hot}N`, whose hash tag is `hot` whatever the prefix.
const HOT: usize = 40;
/// Keys elsewhere.
const SPREAD: usize = 100;
/// Each key's quota.
const QUOTA: u64 = 40;
/// Instances of the fleet, each with its own cluster connection.
const CLIENTS: usize = 3;
/// Concurrent tasks per instance.
const TASKS: usize = 3;
/// Keys moved by each `MIGRATE`, and the pause after each, so that decisions meet the slot
/// half moved.
const BATCH: usize = 4;
const PAUSE: Duration = Duration::from_millis(5);

/// Moves `slot` from the master on `from` to the master on `to`, a few keys at a time.
async fn migrate(cluster: &RedisCluster, slot: u16, from: u16, to: u16) -> usize {
    let topology = cluster.topology();
    let id = |port: u16| topology.iter().find(|node| node.port == port).unwrap().id.clone();
    let (from_id, to_id, slot) = (id(from), id(to), slot.to_string());
    let () = command(to, &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &from_id]);
    let () = command(from, &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &to_id]);
    let mut moved = 0;
    loop {
        let batch = BATCH.to_string();
        let keys: Vec<String> = command(from, &["CLUSTER", "GETKEYSINSLOT", &slot, &batch]);
        if keys.is_empty() {
            break;
        }
        let port = to.to_string();
        let mut arguments = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
        arguments.extend(keys.iter().map(String::as_str));
        let () = command(from, &arguments);
        moved += keys.len();
        tokio::time::sleep(PAUSE).await;
    }
    // The new owner first, then the old one, then every other master (as redis-cli does).
    let () = command(to, &["CLUSTER", "SETSLOT", &slot, "NODE", &to_id]);
    let () = command(from, &["CLUSTER", "SETSLOT", &slot, "NODE", &to_id]);
    for master in cluster.masters() {
        if master.port != to && master.port != from {
            let () = command(master.port, &["CLUSTER", "SETSLOT", &slot, "NODE", &to_id]);
        }
    }
    moved
}

/// A token bucket (one key per client) and a sliding log (two keys per client: its own and the
/// other encoding's), each of `QUOTA` at a frozen client time, decided by three instances of
/// three tasks each while the slot of `HOT` of the keys moves. Every decision is Redis's and
/// every key admits exactly `QUOTA` (the load's admissions, then each key asked until it
/// refuses).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_moved_under_load_loses_no_decision_and_no_count() {
    let cluster = RedisCluster::start();
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_700_000_040));
    let quota = Quota::new(QUOTA, Duration::from_secs(3_600)).unwrap();
    let algorithms: [(&str, RedisAlgorithm); 2] = [
        (
            "tb",
            TokenBucket::new(quota.with_burst(QUOTA).unwrap()).unwrap().into(),
        ),
        ("log", SlidingLog::new(quota).unwrap().into()),
    ];
    let keys: Vec<String> = (0..HOT)
        .map(|i| format!("hot}}{i}"))
        .chain((0..SPREAD).map(|i| format!("client-{i}")))
        .collect();
    let keys = Arc::new(keys);
    let hot_slot = cluster.slot("hot");
    let from = cluster.master_of(hot_slot).port;
    let to = cluster
        .masters()
        .into_iter()
        .find(|node| node.port != from)
        .unwrap()
        .port;
    let mut limiters = Vec::new();
    for (name, algorithm) in algorithms {
        for _ in 0..CLIENTS {
            let limiter = RedisLimiter::cluster_builder(
                cluster.seeds(),
                algorithm,
                FailurePolicy::FailClosed {
                    retry_after: Duration::from_secs(1),
                },
            )
            .client_time(clock.clone())
            .prefix(format!("{name}:"))
            // The cluster client's retries of `TRYAGAIN` wait at least half the deadline in all:
            // a second, longer than the slot's migration (0.2 to 0.4 s here) on a loaded machine.
            .deadline(Duration::from_secs(2))
            .connect_checked()
            .await
            .unwrap();
            limiters.push((name, Arc::new(limiter)));
        }
    }
    let redis_keys: Vec<String> = (0..HOT)
        .map(|i| limiters[CLIENTS].1.redis_key(&keys[i]))
        .collect();
    assert!(cluster.slots(&redis_keys).iter().all(|&slot| slot == hot_slot));
    let (ask, tryagain) = (
        errors(from, "ASK"),
        errors(from, "TRYAGAIN") + errors(to, "TRYAGAIN"),
    );
    let moved_before = errors(to, "MOVED");

    let (stop, stopped) = watch::channel(false);
    let mut tasks = Vec::new();
    for (number, (name, limiter)) in limiters.iter().enumerate() {
        for task in 0..TASKS {
            let (name, limiter, keys, stopped) =
                (*name, Arc::clone(limiter), Arc::clone(&keys), stopped.clone());
            let mut key = (number * TASKS + task) * 11 % keys.len();
            tasks.push(tokio::spawn(async move {
                let mut admitted = vec![0u64; keys.len()];
                let mut decisions = 0;
                while !*stopped.borrow() {
                    let answer = limiter.check(&keys[key]).await.expect("no decision is an error");
                    assert_eq!(
                        answer.decided_by,
                        DecidedBy::Redis,
                        "{name} {}: {answer:?}",
                        keys[key]
                    );
                    admitted[key] += u64::from(answer.is_allowed());
                    decisions += 1;
                    key = (key + 1) % keys.len();
                }
                (name, admitted, decisions)
            }));
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let migrating = std::time::Instant::now();
    let moved = migrate(&cluster, hot_slot, from, to).await;
    let migrating = migrating.elapsed();
    // The slot's keys are on the new master, and every node says so.
    assert_eq!(cluster.master_of(hot_slot).port, to);
    let asked = errors(from, "ASK") - ask;
    let retried = errors(from, "TRYAGAIN") + errors(to, "TRYAGAIN") - tryagain;
    let moved_back = errors(to, "MOVED") - moved_before;
    // The load goes on a while on the new topology.
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.send(true).unwrap();
    let mut admitted = [vec![0u64; keys.len()], vec![0u64; keys.len()]];
    let mut decisions = 0;
    for task in tasks {
        let (name, counted, made) = task.await.unwrap();
        decisions += made;
        let sums = &mut admitted[usize::from(name == "log")];
        for (sum, count) in sums.iter_mut().zip(counted) {
            *sum += count;
        }
    }
    // Then each key is asked until it refuses: what it admits in all is its quota.
    for (number, (name, limiter)) in limiters.iter().enumerate().step_by(CLIENTS) {
        let sums = &mut admitted[number / CLIENTS];
        for (key, sum) in keys.iter().zip(sums.iter_mut()) {
            loop {
                let answer = limiter.check(key).await.unwrap();
                assert_eq!(answer.decided_by, DecidedBy::Redis, "{name} {key}: {answer:?}");
                if !answer.is_allowed() {
                    break;
                }
                *sum += 1;
            }
        }
    }
    println!(
        "reshard: slot {hot_slot} ({moved} keys) moved from {from} to {to} in {migrating:?} under \
         {decisions} decisions; \
         {asked} ASK and {retried} TRYAGAIN answered meanwhile, and {moved_back} MOVED from the \
         importing node (a redirected call whose `ASKING` another call's command took)"
    );
    assert!(moved >= 2 * HOT, "{moved} keys moved");
    assert!(asked > 0 && retried > 0, "{asked} ASK, {retried} TRYAGAIN");
    for (name, sums) in ["tb", "log"].into_iter().zip(&admitted) {
        for (key, sum) in keys.iter().zip(sums) {
            assert_eq!(*sum, QUOTA, "{name} {key}");
        }
    }
}
