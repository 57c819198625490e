//! A real Redis Cluster for the distributed limiter's tests: six `redis-server --cluster-enabled
//! yes` processes on free loopback ports (three masters, three replicas), each in its own
//! temporary directory for its `nodes.conf`, joined by `redis-cli --cluster create
//! --cluster-replicas 1`, and waited for until every node says `cluster_state:ok` and every
//! replica is in sync with its master.
//!
//! [`RedisCluster::shared`] starts one per test binary, on first use, for the tests that leave
//! the topology alone; its nodes are killed when the test binary exits (each server's watchdog,
//! see `mod.rs`). Tests that kill nodes or move slots start their own with
//! [`RedisCluster::start`], killed on drop.
//!
//! A missing `redis-cli` is a failure, never a skip: set `TOLLGATE_REDIS_CLI` to its path when it
//! is not on `PATH` (it comes with `redis-server` in Debian's `redis-tools`).

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use super::RedisServer;

/// Masters of every cluster the tests start (each with one replica).
pub(crate) const MASTERS: usize = 3;

/// The node timeout of the test clusters: a master that does not answer for this long is
/// marked failing, and its replica then promoted (within about two of it, on loopback).
pub(crate) const NODE_TIMEOUT: Duration = Duration::from_millis(1_000);

/// A node of the cluster, as `CLUSTER NODES` describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ClusterNode {
    /// The node's id (40 hexadecimal characters).
    pub(crate) id: String,
    /// Its loopback port.
    pub(crate) port: u16,
    /// Whether it is a master (else a replica).
    pub(crate) master: bool,
    /// Whether the cluster flags it as failing (`fail` or `fail?`).
    pub(crate) failing: bool,
    /// For a replica, its master's id.
    pub(crate) master_id: Option<String>,
    /// The slot ranges it serves (inclusive), for a master.
    pub(crate) slots: Vec<(u16, u16)>,
}

impl ClusterNode {
    /// Whether this node serves `slot`.
    pub(crate) fn serves(&self, slot: u16) -> bool {
        self.slots
            .iter()
            .any(|&(first, last)| (first..=last).contains(&slot))
    }
}

/// Six nodes joined into one cluster; each killed on drop.
#[derive(Debug)]
pub(crate) struct RedisCluster {
    nodes: Vec<RedisServer>,
}

static SHARED: LazyLock<RedisCluster> = LazyLock::new(RedisCluster::start);

impl RedisCluster {
    /// The cluster this test binary shares, started on first use: for tests that leave its
    /// topology alone (each under its own key prefix).
    pub(crate) fn shared() -> &'static RedisCluster {
        &SHARED
    }

    /// Starts three masters and three replicas, joins them, and waits until the cluster is up.
    pub(crate) fn start() -> RedisCluster {
        RedisCluster::start_with(&[])
    }

    /// [`start`](Self::start), each node with `extra` arguments too.
    pub(crate) fn start_with(extra: &[&str]) -> RedisCluster {
        let timeout = NODE_TIMEOUT.as_millis().to_string();
        let mut arguments = vec!["--cluster-enabled", "yes", "--cluster-node-timeout", &timeout];
        arguments.extend_from_slice(extra);
        let nodes: Vec<RedisServer> = (0..2 * MASTERS)
            .map(|_| RedisServer::start_cluster_node(&arguments))
            .collect();
        let cluster = RedisCluster { nodes };
        let cli = std::env::var("TOLLGATE_REDIS_CLI").unwrap_or_else(|_| "redis-cli".to_owned());
        let addresses: Vec<String> = cluster
            .nodes
            .iter()
            .map(|node| format!("127.0.0.1:{}", node.port()))
            .collect();
        let output = Command::new(&cli)
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run {cli:?} ({e}): the Redis Cluster tests need redis-cli \
                     (install redis-tools, or set TOLLGATE_REDIS_CLI to its path)"
                )
            });
        assert!(
            output.status.success(),
            "redis-cli --cluster create failed: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        cluster.wait_until_ok(Duration::from_secs(30));
        cluster
    }

    /// `redis://127.0.0.1:{port}/` of every running node: seed nodes for a cluster client.
    pub(crate) fn seeds(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|node| node.is_running())
            .map(RedisServer::url)
            .collect()
    }

    /// A cluster connection of its own, for writing keys behind the limiter's back and reading
    /// them (every command routed to the master of its key's slot).
    pub(crate) async fn raw_connection(&self) -> redis::cluster_async::ClusterConnection {
        redis::cluster::ClusterClient::new(self.seeds())
            .expect("a cluster client")
            .get_async_connection()
            .await
            .expect("a cluster connection")
    }

    /// The node processes, in the order they were started.
    pub(crate) fn servers(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The topology as the first running node sees it.
    pub(crate) fn topology(&self) -> Vec<ClusterNode> {
        let node = self
            .nodes
            .iter()
            .find(|node| node.is_running())
            .expect("a running node");
        topology_seen_by(node.port()).expect("CLUSTER NODES")
    }

    /// The masters that serve slots, in the order of their first slot.
    pub(crate) fn masters(&self) -> Vec<ClusterNode> {
        let mut masters: Vec<ClusterNode> = self
            .topology()
            .into_iter()
            .filter(|node| node.master && !node.slots.is_empty() && !node.failing)
            .collect();
        masters.sort_by_key(|node| node.slots[0].0);
        masters
    }

    /// The master that serves `slot`.
    pub(crate) fn master_of(&self, slot: u16) -> ClusterNode {
        self.masters()
            .into_iter()
            .find(|node| node.serves(slot))
            .unwrap_or_else(|| panic!("no master serves slot {slot}"))
    }

    /// The slot of `key`, as the cluster computes it (`CLUSTER KEYSLOT`).
    pub(crate) fn slot(&self, key: &str) -> u16 {
        let node = self
            .nodes
            .iter()
            .find(|node| node.is_running())
            .expect("a running node");
        command(node.port(), &["CLUSTER", "KEYSLOT", key])
    }

    /// The slots of `keys`, as the cluster computes them, in one pipeline.
    pub(crate) fn slots(&self, keys: &[String]) -> Vec<u16> {
        let node = self
            .nodes
            .iter()
            .find(|node| node.is_running())
            .expect("a running node");
        let mut pipeline = redis::pipe();
        for key in keys {
            pipeline.cmd("CLUSTER").arg("KEYSLOT").arg(key);
        }
        pipeline
            .query(&mut admin(node.port()).expect("a connection"))
            .expect("CLUSTER KEYSLOT")
    }

    /// Kills the node on `port` (SIGKILL), as a crash would.
    pub(crate) fn kill(&mut self, port: u16) {
        let node = self
            .nodes
            .iter_mut()
            .find(|node| node.port() == port)
            .unwrap_or_else(|| panic!("no node on port {port}"));
        node.kill();
    }

    /// Starts the node on `port` again, with its `nodes.conf` (so it rejoins the cluster as the
    /// node it was) and no data.
    pub(crate) fn restart(&mut self, port: u16) {
        let node = self
            .nodes
            .iter_mut()
            .find(|node| node.port() == port)
            .unwrap_or_else(|| panic!("no node on port {port}"));
        node.restart();
    }

    /// The ports of every node, running or not.
    pub(crate) fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(RedisServer::port).collect()
    }

    /// Waits until every running node says `cluster_state:ok`, sees every other running node
    /// connected, and every replica is in sync with its master, or panics after `within`.
    pub(crate) fn wait_until_ok(&self, within: Duration) {
        let deadline = Instant::now() + within;
        let mut last = String::new();
        while Instant::now() < deadline {
            match self.not_ok() {
                None => return,
                Some(why) => last = why,
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the cluster was not up within {within:?}: {last}");
    }

    /// Why the cluster is not up yet, or `None` when it is.
    fn not_ok(&self) -> Option<String> {
        let running: Vec<u16> = self
            .nodes
            .iter()
            .filter(|node| node.is_running())
            .map(RedisServer::port)
            .collect();
        for &port in &running {
            let info: String = match try_command(port, &["CLUSTER", "INFO"]) {
                Ok(info) => info,
                Err(error) => return Some(format!("{port}: {error}")),
            };
            if !info.contains("cluster_state:ok") {
                return Some(format!("{port}: not cluster_state:ok"));
            }
            let topology = match topology_seen_by(port) {
                Ok(topology) => topology,
                Err(error) => return Some(format!("{port}: {error}")),
            };
            for &other in &running {
                if !topology.iter().any(|node| node.port == other && !node.failing) {
                    return Some(format!("{port} does not see {other} up"));
                }
            }
            let replication: String = match try_command(port, &["INFO", "replication"]) {
                Ok(info) => info,
                Err(error) => return Some(format!("{port}: {error}")),
            };
            if replication.contains("role:slave") && !replication.contains("master_link_status:up") {
                return Some(format!("{port}: replica not in sync"));
            }
        }
        None
    }
}

/// A loopback port free for a cluster node: itself and its cluster bus port (`port + 10000`,
/// so at most 55535).
pub(crate) fn free_cluster_port() -> u16 {
    for _ in 0..1_000 {
        let Ok(listener) = TcpListener::bind("127.0.0.1:0") else {
            continue;
        };
        let Ok(port) = listener.local_addr().map(|address| address.port()) else {
            continue;
        };
        if port <= 55_535 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port whose cluster bus port is free too");
}

/// A blocking connection to the node on `port`, with short timeouts.
pub(crate) fn admin(port: u16) -> redis::RedisResult<redis::Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let connection = client.get_connection_with_timeout(Duration::from_secs(2))?;
    connection.set_read_timeout(Some(Duration::from_secs(5)))?;
    Ok(connection)
}

/// `arguments` sent to the node on `port`, its reply read as `T`.
pub(crate) fn try_command<T: redis::FromRedisValue>(port: u16, arguments: &[&str]) -> redis::RedisResult<T> {
    let mut connection = admin(port)?;
    let mut command = redis::cmd(arguments[0]);
    for argument in &arguments[1..] {
        command.arg(*argument);
    }
    command.query(&mut connection)
}

/// [`try_command`], which must succeed.
pub(crate) fn command<T: redis::FromRedisValue>(port: u16, arguments: &[&str]) -> T {
    try_command(port, arguments).unwrap_or_else(|e| panic!("{arguments:?} on {port}: {e}"))
}

/// How many `code` errors the node on `port` has answered since it started or its last
/// `CONFIG RESETSTAT` (`INFO errorstats`; 0 when none).
pub(crate) fn error_count(port: u16, code: &str) -> u64 {
    let info: String = command(port, &["INFO", "errorstats"]);
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("errorstat_{code}:count=")))
        .map_or(0, |count| count.trim().parse().expect("a count"))
}

/// `CLUSTER NODES` of the node on `port`, parsed.
pub(crate) fn topology_seen_by(port: u16) -> redis::RedisResult<Vec<ClusterNode>> {
    let text: String = try_command(port, &["CLUSTER", "NODES"])?;
    Ok(text.lines().filter_map(parse_node).collect())
}

/// One line of `CLUSTER NODES`: `id ip:port@bus flags master ping pong epoch link slot...`.
fn parse_node(line: &str) -> Option<ClusterNode> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let [id, address, flags, master, _ping, _pong, _epoch, _link, slots @ ..] = fields.as_slice() else {
        return None;
    };
    let port = address
        .split(['@', ','])
        .next()?
        .rsplit(':')
        .next()?
        .parse()
        .ok()?;
    let flags: Vec<&str> = flags.split(',').collect();
    let slots = slots
        .iter()
        // Slots being imported or migrated (`[slot->-id]`) are listed in brackets: not served.
        .filter(|range| !range.starts_with('['))
        .filter_map(|range| match range.split_once('-') {
            Some((first, last)) => Some((first.parse().ok()?, last.parse().ok()?)),
            None => range.parse().ok().map(|slot| (slot, slot)),
        })
        .collect();
    Some(ClusterNode {
        id: (*id).to_owned(),
        port,
        master: flags.contains(&"master"),
        failing: flags.contains(&"fail") || flags.contains(&"fail?"),
        master_id: (*master != "-").then(|| (*master).to_owned()),
        slots,
    })
}
