//! A master of a real Redis Cluster killed (SIGKILL) while a fleet decides: its replica is
//! promoted, decisions on its slots follow the failure policy meanwhile and then come back to
//! Redis by themselves, and the admissions the promoted replica never received (asynchronous
//! replication) are counted. The measured times and counts are printed (`--nocapture`), and
//! `docs/distributed.md`, "Failover", states the bound.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::redis_common::cluster::{error_count, RedisCluster, NODE_TIMEOUT};
use tokio::sync::watch;
use tollgate::distributed::{DecidedBy, Failure, FailurePolicy, RedisFailureCause, RedisLimiter};
use tollgate::{KeyedLimiter, ManualClock, Timestamp, TokenBucket};

/// Client keys, spread over the three masters.
const KEYS: usize = 300;
/// Instances of the fleet, each with its own cluster connection.
const CLIENTS: usize = 4;
/// Concurrent tasks per instance, each deciding about once a millisecond.
const TASKS: usize = 4;
/// The frozen client time, in seconds.
const NOW_SECS: i64 = 1_700_000_040;
/// The bucket's emission interval (one unit an hour), in microseconds: a key that admitted `n`
/// units holds a TAT of `NOW + n * T`, and lives `n` hours.
const T_MICROS: i64 = 3_600_000_000;

/// One decision of the load, as the caller saw it.
#[derive(Clone, Copy, Debug)]
struct Seen {
    /// When it was answered, in seconds after the kill (negative: before).
    at: f64,
    key: usize,
    by: DecidedBy,
    allowed: bool,
    failure: Option<Failure>,
}

/// The load: every task of every instance decides on the keys in turn, one decision about
/// every millisecond, until `stop` says so; times are taken from `start` and shifted to the kill
/// afterwards.
fn load(
    limiters: &[Arc<RedisLimiter>],
    keys: &Arc<Vec<String>>,
    start: Instant,
    stop: &watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<Vec<Seen>>> {
    let mut tasks = Vec::new();
    for (number, limiter) in limiters.iter().enumerate() {
        for task in 0..TASKS {
            let (limiter, keys, stop) = (Arc::clone(limiter), Arc::clone(keys), stop.clone());
            let mut key = (number * TASKS + task) * 7 % KEYS;
            tasks.push(tokio::spawn(async move {
                let mut seen = Vec::new();
                while !*stop.borrow() {
                    let answer = limiter.check(&keys[key]).await.expect("no decision is an error");
                    seen.push(Seen {
                        at: start.elapsed().as_secs_f64(),
                        key,
                        by: answer.decided_by,
                        allowed: answer.is_allowed(),
                        failure: answer.failure,
                    });
                    key = (key + 1) % KEYS;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                seen
            }));
        }
    }
    tasks
}

/// The default cluster configuration (`cluster-require-full-coverage yes`): while the killed
/// master is flagged failing and before its replica takes over, every node answers
/// `CLUSTERDOWN`, so the other masters' keys may follow the policy too for that moment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_master_fails_over_and_decisions_come_back_to_redis_by_themselves() {
    let measured = failover(&[]).await;
    assert!(measured.cluster_down > 0, "{measured:?}");
}

/// With `cluster-require-full-coverage no` the other masters keep answering, never
/// `CLUSTERDOWN`: their keys follow the policy only for a deadline the cluster client spent
/// learning the new topology (a timeout), and for the probe interval after it (or for sharing a
/// breaker's slot group with the killed master's slots, at a range's edge).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_full_coverage_the_other_masters_never_say_the_cluster_is_down() {
    let measured = failover(&["--cluster-require-full-coverage", "no"]).await;
    assert_eq!(measured.cluster_down, 0, "{measured:?}");
    assert!(
        measured
            .other_causes
            .iter()
            .all(|cause| *cause == RedisFailureCause::Timeout),
        "{measured:?}"
    );
}

/// What one failover measured.
#[derive(Debug)]
struct Measured {
    /// The causes of the policy's decisions on the other masters' keys after the kill.
    other_causes: Vec<RedisFailureCause>,
    /// The `CLUSTERDOWN` errors the surviving masters answered.
    cluster_down: u64,
}

/// SIGKILL of one master under load, its replica promoted: every decision is an answer (never an
/// error); decisions on the killed master's slots follow the failure policy (fail closed) for a
/// while, then are Redis's again with nothing restarted; the admissions the promoted replica
/// lost are counted from the buckets' state (with the client time frozen, a key's TAT says
/// exactly how many units Redis holds as admitted).
async fn failover(extra: &[&str]) -> Measured {
    let mut cluster = RedisCluster::start_with(extra);
    let clock = ManualClock::starting_at(Timestamp::from_secs(NOW_SECS as u64));
    let bucket = TokenBucket::new("1/h burst 100000".parse().unwrap()).unwrap();
    let mut limiters = Vec::new();
    for _ in 0..CLIENTS {
        // The default deadline (50 ms) and probe interval (100 ms).
        let limiter = RedisLimiter::cluster_builder(
            cluster.seeds(),
            bucket,
            FailurePolicy::FailClosed {
                retry_after: Duration::from_secs(1),
            },
        )
        .client_time(clock.clone())
        .prefix("failover:")
        .connect_checked()
        .await
        .unwrap();
        limiters.push(Arc::new(limiter));
    }
    let keys: Arc<Vec<String>> = Arc::new((0..KEYS).map(|i| format!("client-{i}")).collect());
    let redis_keys: Vec<String> = keys.iter().map(|key| limiters[0].redis_key(key)).collect();
    let slots = cluster.slots(&redis_keys);
    let victim = cluster.master_of(slots[0]);
    let on_victim: Vec<bool> = slots.iter().map(|&slot| victim.serves(slot)).collect();
    let victims = on_victim.iter().filter(|&&on| on).count();
    assert!(
        victims > KEYS / 5 && victims < KEYS / 2,
        "{victims} keys on the victim"
    );
    let replica = cluster
        .topology()
        .into_iter()
        .find(|node| node.master_id.as_deref() == Some(victim.id.as_str()))
        .expect("the victim's replica");

    let start = Instant::now();
    let (stop, stopped) = watch::channel(false);
    let tasks = load(&limiters, &keys, start, &stopped);
    tokio::time::sleep(Duration::from_millis(700)).await;
    cluster.kill(victim.port);
    let kill = start.elapsed().as_secs_f64();
    // Until the replica serves the victim's slots (or 30 s), and every node says the cluster is
    // up again; then two more seconds of load.
    let promoted = loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let masters = cluster.masters();
        if masters
            .iter()
            .any(|node| node.port == replica.port && node.serves(slots[0]))
        {
            break start.elapsed().as_secs_f64() - kill;
        }
        assert!(
            start.elapsed().as_secs_f64() - kill < 30.0,
            "no replica promoted in 30 s"
        );
    };
    tokio::task::block_in_place(|| cluster.wait_until_ok(Duration::from_secs(30)));
    let cluster_ok = start.elapsed().as_secs_f64() - kill;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ended = start.elapsed().as_secs_f64() - kill;
    stop.send(true).unwrap();
    let mut seen = Vec::new();
    for task in tasks {
        seen.extend(
            task.await
                .unwrap()
                .into_iter()
                .map(|s| Seen { at: s.at - kill, ..s }),
        );
    }
    // What the surviving masters answered: `CLUSTERDOWN` while the cluster was `fail`.
    let cluster_down: u64 = cluster
        .masters()
        .iter()
        .filter(|node| node.port != replica.port)
        .map(|node| error_count(node.port, "CLUSTERDOWN"))
        .sum();
    let after: Vec<Seen> = seen.iter().copied().filter(|seen| seen.at >= 0.0).collect();
    let by_policy = |seen: &&Seen| seen.by != DecidedBy::Redis;
    let victim_policy: Vec<&Seen> = after
        .iter()
        .filter(|s| on_victim[s.key])
        .filter(by_policy)
        .collect();
    let other_policy: Vec<&Seen> = after
        .iter()
        .filter(|s| !on_victim[s.key])
        .filter(by_policy)
        .collect();
    let other_decisions = after.iter().filter(|s| !on_victim[s.key]).count();
    let first_policy = victim_policy.iter().map(|s| s.at).fold(f64::INFINITY, f64::min);
    let last_policy = victim_policy.iter().map(|s| s.at).fold(0.0, f64::max);
    let causes = |seen: &[&Seen]| {
        let mut causes: Vec<String> = seen
            .iter()
            .filter_map(|s| s.failure.map(|f| format!("{f:?}")))
            .collect();
        causes.sort();
        causes.dedup();
        causes
    };
    let redis_after = after
        .iter()
        .filter(|s| on_victim[s.key] && s.by == DecidedBy::Redis && s.at > last_policy)
        .count();
    println!(
        "failover {extra:?}: {victims} of {KEYS} keys on the killed master (node timeout {NODE_TIMEOUT:?}); \
         replica seen promoted {promoted:.2} s after the kill, every node `cluster_state:ok` at \
         {cluster_ok:.2} s; its keys followed the policy from \
         {first_policy:.3} s to {last_policy:.3} s after the kill ({} decisions; {:?}), then Redis decided \
         {redis_after} on them until {ended:.2} s; the other masters' keys: {} policy decisions of \
         {other_decisions} ({:?}), from {:.3} s to {:.3} s; the other masters answered \
         {cluster_down} CLUSTERDOWN",
        victim_policy.len(),
        causes(&victim_policy),
        other_policy.len(),
        causes(&other_policy),
        other_policy.iter().map(|s| s.at).fold(f64::INFINITY, f64::min),
        other_policy.iter().map(|s| s.at).fold(0.0, f64::max),
    );
    // The victim's keys failed over to the policy (fail closed: refused, each with its cause).
    assert!(!victim_policy.is_empty(), "the kill was not seen");
    assert!(victim_policy
        .iter()
        .all(|s| !s.allowed && s.by == DecidedBy::FailClosed && s.failure.is_some()));
    // And came back to Redis by themselves, on the same limiters: each decided by Redis now.
    for (key, name) in keys.iter().enumerate().filter(|&(key, _)| on_victim[key]) {
        let limiter = &limiters[key % CLIENTS];
        let answer = limiter.check(name).await.unwrap();
        assert_eq!(answer.decided_by, DecidedBy::Redis, "{name}: {answer:?}");
    }
    // Admissions lost by asynchronous replication: those Redis acknowledged (before and after
    // the kill) against those the buckets hold. A decision the policy answered may have been
    // counted all the same (a script that ran after its deadline, or ran on the killed master,
    // was replicated, and ran again on the promoted one after the client's retry): a key holding
    // more than it acknowledged. So the losses counted here are a lower bound.
    let mut acknowledged = vec![0i64; KEYS];
    for seen in &seen {
        if seen.by == DecidedBy::Redis && seen.allowed {
            acknowledged[seen.key] += 1;
        }
    }
    let mut raw = cluster.raw_connection().await;
    let (mut lost, mut lost_keys, mut unacknowledged) = (0, 0, 0);
    for (key, redis_key) in redis_keys.iter().enumerate() {
        let stored: Option<Vec<u8>> = redis::cmd("GET")
            .arg(redis_key)
            .query_async(&mut raw)
            .await
            .unwrap();
        let held = stored.map_or(0, |bytes| {
            let tat = i64::from_le_bytes(bytes.try_into().expect("8 bytes"));
            (tat - NOW_SECS * 1_000_000) / T_MICROS
        });
        unacknowledged += (held - acknowledged[key]).max(0);
        if held < acknowledged[key] {
            // Only a master that was killed can forget what it acknowledged.
            assert!(
                on_victim[key],
                "{}: holds {held} of {}",
                keys[key], acknowledged[key]
            );
            lost += acknowledged[key] - held;
            lost_keys += 1;
        }
    }
    let on_victim_in_all: i64 = (0..KEYS).filter(|&k| on_victim[k]).map(|k| acknowledged[k]).sum();
    println!(
        "failover {extra:?}: {lost} admissions acknowledged by the killed master were lost (on \
         {lost_keys} keys), of {on_victim_in_all} acknowledged on its keys; {unacknowledged} units \
         counted in Redis for decisions the policy answered"
    );
    Measured {
        other_causes: other_policy
            .iter()
            .filter_map(|s| s.failure.map(|f| f.cause()))
            .collect(),
        cluster_down,
    }
}

/// A limiter built while every node of the cluster is down decides by its policy (a local
/// fallback here), saying why, and by Redis once the nodes are back (each restarted with its `nodes.conf`), with nothing
/// rebuilt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limiter_built_while_the_cluster_is_down_decides_once_it_is_back() {
    let mut cluster = RedisCluster::start();
    let seeds = cluster.seeds();
    for port in cluster.ports() {
        cluster.kill(port);
    }
    // While the cluster is away, this instance's share: 2 of the key's 5.
    let share =
        KeyedLimiter::<str, _>::new(TokenBucket::new("1/h burst 2".parse().unwrap()).unwrap(), 64).unwrap();
    let limiter = RedisLimiter::cluster_builder(
        seeds,
        TokenBucket::new("1/h burst 5".parse().unwrap()).unwrap(),
        FailurePolicy::fallback(share),
    )
    .connect()
    .await
    .unwrap();
    let answers = [(); 3].map(|()| limiter.check("k"));
    let mut admitted = 0;
    for answer in answers {
        let answer = answer.await.unwrap();
        assert_eq!(answer.decided_by, DecidedBy::Fallback, "{answer:?}");
        assert!(answer.failure.is_some());
        admitted += u32::from(answer.is_allowed());
    }
    assert_eq!(admitted, 2);
    let error = limiter.verify().await.unwrap_err();
    assert!(error.is_transient(), "{error:?}");
    for port in cluster.ports() {
        cluster.restart(port);
    }
    tokio::task::block_in_place(|| cluster.wait_until_ok(Duration::from_secs(30)));
    let back = Instant::now();
    let mut answer = limiter.check("k").await.unwrap();
    while answer.decided_by != DecidedBy::Redis && back.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(20)).await;
        answer = limiter.check("k").await.unwrap();
    }
    assert_eq!(answer.decided_by, DecidedBy::Redis, "{answer:?}");
    println!(
        "a limiter built while the cluster was down decided by Redis {:?} after every node said ok",
        back.elapsed()
    );
    assert_eq!(limiter.verify().await.map_err(|e| e.to_string()), Ok(()));
}
