//! Routes counted in a real Redis Cluster (three masters, three replicas, started by the
//! library's test harness): gateways on the cluster, one from flags and one from a file, share
//! one quota per key, each key counted on the master of its slot; seeds of a single Redis stop
//! the start with the library's "not a cluster" message.

mod common;
#[path = "../../tests/redis_common/mod.rs"]
mod redis_common;

use std::collections::BTreeSet;

use common::{run, ConfigFile, Gateway, RedisServer};
use redis_common::cluster::{command, RedisCluster};

/// Client keys whose hash tags fall on each of the three masters (checked below).
const CLIENTS: [&str; 6] = ["alice", "bob", "carol", "dave", "erin", "frank"];

#[test]
fn gateways_on_a_cluster_share_one_quota_per_key_across_its_masters() {
    let cluster = RedisCluster::start();
    let seeds: Vec<String> = cluster.seeds().into_iter().take(3).collect();
    let by_flags = Gateway::start(&[
        "--key",
        "header:x-api-key",
        "--quota",
        "3/min",
        "--redis-cluster",
        &seeds.join(","),
    ]);
    let listed: Vec<String> = seeds.iter().map(|seed| format!("{seed:?}")).collect();
    let config = ConfigFile::new(&format!(
        "[redis]\ncluster = [{}]\n[[route]]\nname = \"default\"\nkey = \"header:x-api-key\"\nquota = \"3/min\"\n",
        listed.join(", ")
    ));
    let by_file = Gateway::start(&["--config", config.arg()]);
    for gateway in [&by_flags, &by_file] {
        let store = gateway.banner_line("keys: ").unwrap_or_default();
        assert!(
            store.starts_with(&format!(
                "keys: in the Redis Cluster found from {}, ",
                seeds.join(", ")
            )) && store.contains("each on the master of its slot"),
            "{:?}",
            gateway.banner
        );
    }
    // A route's key in Redis is `gateway:default:{CLIENT}:...`: its slot is its hash tag's.
    let masters: BTreeSet<u16> = CLIENTS
        .iter()
        .map(|client| cluster.master_of(cluster.slot(client)).port)
        .collect();
    assert_eq!(masters.len(), 3, "the clients' keys fall on every master");
    for client in CLIENTS {
        let statuses: Vec<u16> = [&by_flags, &by_file, &by_flags, &by_file]
            .iter()
            .map(|gateway| gateway.get("/", &[("x-api-key", client)]).status)
            .collect();
        assert_eq!(statuses, [200, 200, 200, 429], "{client}");
    }
    let mut counted = BTreeSet::new();
    for master in cluster.masters() {
        let keys: Vec<String> = command(master.port, &["KEYS", "gateway:default:*"]);
        for key in keys {
            let tag = key.split(['{', '}']).nth(1).unwrap_or_default().to_owned();
            assert!(master.serves(cluster.slot(&tag)), "{key} on {}", master.port);
            counted.insert(tag);
        }
    }
    assert_eq!(counted, CLIENTS.iter().map(|c| (*c).to_owned()).collect());
    let failures: Vec<String> = [&by_flags, &by_file]
        .iter()
        .flat_map(|gateway| gateway.lines_seen())
        .filter(|line| line.stderr)
        .map(|line| line.text)
        .collect();
    assert_eq!(failures, Vec::<String>::new());
}

#[test]
fn seeds_of_a_single_redis_stop_the_start() {
    let redis = RedisServer::start();
    let output = run(&["--redis-cluster", &redis.url(), "--listen", "127.0.0.1:0"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "", "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "tollgate-gateway: route `default`: Redis Cluster at {}: seed 127.0.0.1:{} is not a Redis Cluster \
             node (its cluster support is disabled)",
            redis.url(),
            redis.port
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("(in the gateway: --redis URL, or `url` in [redis], instead of --redis-cluster"),
        "{stderr}"
    );
}
