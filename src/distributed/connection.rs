//! The limiter's connection to Redis: one node through redis-rs's `ConnectionManager`, or a Redis
//! Cluster through its cluster client. Everything else in the limiter sends a script call to
//! [`Connection::run`] and reads one reply, whichever it is.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterConfig};
use redis::cluster_async::ClusterConnection;
use redis::{Client, ErrorKind, RedisError, RedisResult, ServerErrorKind, Value};

use super::cause::{cause_of, RedisFailureCause};
use super::script::LuaScript;

/// How long making a TCP connection (and its set-up: `HELLO`, `AUTH`, `SELECT`) may take.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// A connection to one Redis, or to a Redis Cluster. Cheap to clone: every clone shares it.
#[derive(Clone)]
pub(crate) enum Connection {
    /// One node, its URL's.
    Single(Arc<SingleNode>),
    /// A cluster, found from its seeds: the client routes each call to the master of the key's
    /// slot, follows `MOVED` and `ASK`, and retries `TRYAGAIN` and `CLUSTERDOWN`.
    Cluster(ClusterConnection),
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Connection::Single(_) => "Single",
            Connection::Cluster(_) => "Cluster",
        })
    }
}

impl Connection {
    /// A connection to the one Redis of `client`, made at the first call.
    ///
    /// The `ConnectionManager` makes one attempt per connection (no retries of its own): its
    /// retries, with their backoff, outlast a decision's deadline, so a refused connection or a
    /// wrong password showed only as a timeout. Each failure now reaches the call that met it
    /// with its cause; the next call starts a new attempt (the manager does so after an
    /// input/output error; after a refused password or database, [`SingleNode`] builds a new
    /// manager, since redis-rs's would keep that error for good).
    pub(crate) fn single(client: Client, response_timeout: Duration) -> RedisResult<Connection> {
        let config = ConnectionManagerConfig::new()
            .set_number_of_retries(0)
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            // Answers later than the deadline are dropped, so that a hung server does not pile
            // up requests in the connection.
            .set_response_timeout(Some(response_timeout));
        let manager = ConnectionManager::new_lazy_with_config(client.clone(), config.clone())?;
        Ok(Connection::Single(Arc::new(SingleNode {
            client,
            config,
            current: RwLock::new((0, manager)),
        })))
    }

    /// A connection to the cluster of `seeds`.
    ///
    /// It asks its seed nodes for the topology once, waiting at most the connection timeout (below):
    /// a seed set that answers without cluster support is refused (the client would otherwise
    /// send every call to any one of those nodes, which for several single Redis servers splits
    /// each key's count among them); seeds that do not answer leave the client to find the
    /// cluster in the background, decisions falling to the policy meanwhile.
    ///
    /// Each try of a call waits at most `deadline` for its reply, and the call as a whole too
    /// (redis-rs's overall response timeout). A call that meets `MOVED` or `ASK` follows it at
    /// once; one that loses its node's connection tries again at once; one that meets `TRYAGAIN`
    /// or `CLUSTERDOWN` (a slot migrating, a failover) tries again after a wait drawn between
    /// `deadline / 48` and `deadline / 24` (at least 1 ms); up to [`CLUSTER_RETRIES`] retries
    /// in all. So the waits of a call that meets only `TRYAGAIN` add up to between half the
    /// deadline and the whole of it: a retry that can answer within the deadline gets the chance,
    /// and the deadline ends the call otherwise. (With redis-rs's waits from 1 ms, eight draws
    /// could add up to a tenth of the deadline, and a log's `TRYAGAIN` during a slot's migration
    /// reached the policy.)
    ///
    /// The retries are many because a redirect can go round: redis-rs sends `ASKING` and then the
    /// redirected call separately on the node's multiplexed connection, so another call's command
    /// can come between them and take the `ASKING`; the importing node then answers `MOVED` back to
    /// the old owner, which answers `ASK` again (the importing node answered 36 `MOVED` during one
    /// slot's migration in `tests/redis/cluster_reshard.rs`, and 8 retries let a bucket's call
    /// reach the policy).
    /// Connections to a node time out after the deadline (at least 100 ms, at most
    /// [`CONNECT_TIMEOUT`]): the client connects to the nodes of a new topology while it holds
    /// the topology, so a node that does not answer holds every call for that long (redis-rs 1.2,
    /// `cluster_handling/async_connection/mod.rs`, `refresh_slots`).
    pub(crate) async fn cluster(seeds: &[String], deadline: Duration) -> Result<Connection, ClusterError> {
        let deadline_ms = u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX);
        let connect = deadline.clamp(Duration::from_millis(100), CONNECT_TIMEOUT);
        let client = ClusterClient::builder(seeds.iter().map(String::as_str))
            .retries(CLUSTER_RETRIES)
            .min_retry_wait((deadline_ms / 48).max(1))
            .max_retry_wait((deadline_ms / 24).max(2))
            // Waits drawn below `factor * 2^retry` ms, held between those bounds: from the
            // second retry on, `factor * 4` passes the upper one.
            .retry_wait_formula((deadline_ms / 96).max(1), 2)
            .connection_timeout(connect)
            .response_timeout(deadline)
            .overall_response_timeout(Some(deadline))
            .build()
            .map_err(ClusterError::Client)?;
        let config = ClusterConfig::new()
            .set_connection_timeout(connect)
            .set_response_timeout(deadline);
        let first = client.get_async_connection_with_config(config.clone());
        match tokio::time::timeout(connect, first).await {
            Ok(Ok(connection)) => Ok(Connection::Cluster(connection)),
            Ok(Err(error)) if cause_of(&error) == RedisFailureCause::NotACluster => {
                Err(ClusterError::NotACluster)
            }
            _ => Ok(Connection::Cluster(
                client.get_pending_async_connection_with_config(config),
            )),
        }
    }

    /// Whether this is a cluster connection.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Connection::Cluster(_))
    }

    /// One call of `script` on `keys` (all in one slot, the first one's) with `args`: `EVALSHA`,
    /// and on `NOSCRIPT`, `EVAL` of the source on the same node (see [`LuaScript`]).
    pub(crate) async fn run(&self, script: &LuaScript, keys: &[&str], args: &[&[u8]]) -> RedisResult<Value> {
        match self {
            Connection::Single(node) => {
                let (generation, mut manager) = node.current();
                let answer = evaluate(&mut manager, script, keys, args).await;
                if let Err(error) = &answer {
                    node.renew_after(generation, error);
                }
                answer
            }
            Connection::Cluster(cluster) => evaluate(&mut cluster.clone(), script, keys, args).await,
        }
    }
}

/// Why [`Connection::cluster`] refused its seeds.
#[derive(Debug)]
pub(crate) enum ClusterError {
    /// The client refused the configuration (a seed that is not a TCP URL...).
    Client(RedisError),
    /// A seed answered without cluster support.
    NotACluster,
}

/// Retries of a cluster call (see [`Connection::cluster`]).
pub(crate) const CLUSTER_RETRIES: u32 = 24;

/// `EVALSHA`, then `EVAL` after a `NOSCRIPT`.
async fn evaluate(
    connection: &mut impl ConnectionLike,
    script: &LuaScript,
    keys: &[&str],
    args: &[&[u8]],
) -> RedisResult<Value> {
    match script.command(false, keys, args).query_async(connection).await {
        Err(error) if error.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
            script.command(true, keys, args).query_async(connection).await
        }
        answer => answer,
    }
}

/// The connection to one Redis, and what it takes to make it again.
pub(crate) struct SingleNode {
    client: Client,
    config: ConnectionManagerConfig,
    /// The manager in use, and how many were built before it.
    current: RwLock<(u64, ConnectionManager)>,
}

impl SingleNode {
    /// The manager in use (a clone shares its connection) and its generation.
    fn current(&self) -> (u64, ConnectionManager) {
        // No panic runs under this lock (a clone, an assignment): a poisoned one holds a
        // consistent pair.
        let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
        (current.0, current.1.clone())
    }

    /// After `error` from the manager of `generation`: a new manager, if the error is one
    /// redis-rs's manager keeps for good (a refused password or database at the connection's
    /// set-up: it makes a new connection only after an input/output error), and no other call
    /// has built one since. The next call then tries again, paced by the breaker (one probe per
    /// probe interval while the connection fails).
    fn renew_after(&self, generation: u64, error: &RedisError) {
        if !kept_for_good(error) {
            return;
        }
        let Ok(fresh) = ConnectionManager::new_lazy_with_config(self.client.clone(), self.config.clone())
        else {
            return;
        };
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        if current.0 == generation {
            *current = (generation + 1, fresh);
        }
    }
}

/// Whether redis-rs's `ConnectionManager` keeps `error` as its connection for good: one of its
/// set-up (`AUTH`, `SELECT`) refused, which is not an input/output error.
fn kept_for_good(error: &RedisError) -> bool {
    matches!(
        cause_of(error),
        RedisFailureCause::AuthenticationFailed | RedisFailureCause::NoSuchDatabase
    )
}
