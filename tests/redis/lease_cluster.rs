//! Leases on the shared Redis Cluster: every lease script touches one key (its client key's
//! hash tag), so it runs on the master of that key's slot, as the per-decision scripts do. A
//! fleet of four leased instances, each with its own cluster connection, on 30 keys whose slots
//! fall on all three masters, at a frozen client time: no key passes its quota, and the masters'
//! counts are what was admitted plus what the leases still hold.

use std::sync::Arc;

use tollgate::distributed::{DecidedBy, RedisAlgorithm, TimeSource};
use tollgate::{FixedWindow, ManualClock, Timestamp, TokenBucket};

use crate::lease_fleet::{leased_up_to, settle, taken_in_redis};
use crate::redis_common::cluster::RedisCluster;

const KEYS: usize = 30;
const INSTANCES: usize = 4;
const WORKERS: usize = 3;
/// Each worker asks each of its keys this many times: 24 requests per key from the fleet.
const ROUNDS: usize = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leased_fleet_never_passes_a_keys_quota_on_any_master() {
    let cluster = RedisCluster::shared();
    let start = Timestamp::from_secs(1_700_000_040);
    let frozen = TimeSource::client(ManualClock::starting_at(start));
    let keys: Arc<Vec<String>> = Arc::new((0..KEYS).map(|i| format!("leased-{i}")).collect());
    let algorithms: [RedisAlgorithm; 2] = [
        TokenBucket::new("10/h".parse().unwrap()).unwrap().into(),
        FixedWindow::new("10/h".parse().unwrap()).unwrap().into(),
    ];
    for algorithm in algorithms {
        let prefix = format!("lease-cluster:{}:", algorithm.name().replace(' ', "-"));
        let mut limiters = Vec::new();
        for _ in 0..INSTANCES {
            limiters.push(Arc::new(
                leased_up_to(cluster, algorithm, frozen.clone(), &prefix, 4).await,
            ));
        }
        let redis_keys: Vec<String> = keys.iter().map(|key| limiters[0].redis_key(key)).collect();
        let slots = cluster.slots(&redis_keys);
        for master in cluster.masters() {
            assert!(
                slots.iter().any(|&slot| master.serves(slot)),
                "a master without keys"
            );
        }
        let mut tasks = Vec::new();
        for limiter in &limiters {
            for worker in 0..WORKERS {
                let (limiter, keys) = (Arc::clone(limiter), Arc::clone(&keys));
                tasks.push(tokio::spawn(async move {
                    let mut admitted = vec![0u64; KEYS];
                    for _ in 0..ROUNDS {
                        for index in (worker..KEYS).step_by(WORKERS) {
                            let answer = limiter.check(&keys[index]).await.unwrap();
                            assert!(
                                matches!(answer.decided_by, DecidedBy::Redis | DecidedBy::Lease),
                                "{answer:?}"
                            );
                            admitted[index] += u64::from(answer.is_allowed());
                        }
                    }
                    admitted
                }));
            }
        }
        let mut admitted = vec![0u64; KEYS];
        for task in tasks {
            for (total, own) in admitted.iter_mut().zip(task.await.unwrap()) {
                *total += own;
            }
        }
        settle(&limiters).await;
        assert!(
            admitted.iter().all(|&count| count <= 10),
            "{}: {admitted:?}",
            algorithm.name()
        );
        let held: u64 = limiters.iter().map(|l| l.units_held()).sum();
        let dropped: u64 = limiters.iter().map(|l| l.counts().units_dropped).sum();
        let local: u64 = limiters.iter().map(|l| l.counts().local_decisions).sum();
        let mut connection = cluster.raw_connection().await;
        let mut taken = 0;
        for key in &redis_keys {
            taken += taken_in_redis(&mut connection, key, &algorithm, start).await;
        }
        assert_eq!(
            taken,
            admitted.iter().sum::<u64>() + held + dropped,
            "{}",
            algorithm.name()
        );
        assert!(local > 0, "{}: leases decided", algorithm.name());
    }
}
