//! Building a [`RedisLimiter`]: on one Redis (a URL) or on a Redis Cluster (seed nodes), with the
//! same options either way, checked once at construction.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::{Client, IntoConnectionInfo, RedisError};

use super::breakers::Breakers;
use super::connection::{ClusterError, Connection};
use super::error::RedisConfigError;
use super::limiter::{RedisLimiter, DEFAULT_DEADLINE, DEFAULT_PREFIX, DEFAULT_PROBE_INTERVAL};
use super::live::Configured;
use super::policy::FailurePolicy;
use super::time::TimeSource;
use super::verify::node_name;
use super::RedisAlgorithm;
use crate::clock::Clock;
use crate::sync::{AtomicU64, Snapshot};

impl RedisLimiter {
    /// Starts building a limiter on the Redis at `url` (`redis://host:port/db`), running
    /// `algorithm`, answering by `policy` when Redis does not.
    pub fn builder(
        url: impl Into<String>,
        algorithm: impl Into<RedisAlgorithm>,
        policy: FailurePolicy,
    ) -> RedisLimiterBuilder {
        RedisLimiterBuilder::new(Target::Single(url.into()), algorithm.into(), policy)
    }

    /// Starts building a limiter on a Redis Cluster, found from `seeds` (`redis://host:port`
    /// URLs of some of its nodes, masters or replicas: the client learns the rest of the
    /// topology from the first that answers), running `algorithm`, answering by `policy` when
    /// the cluster does not. Every option of [`builder`](Self::builder) applies.
    ///
    /// Each decision goes to the master of its key's slot; `MOVED` and `ASK` are followed, and
    /// `TRYAGAIN` and `CLUSTERDOWN` retried, within the decision's deadline
    /// (`docs/distributed.md`, "Redis Cluster").
    ///
    /// ```no_run
    /// use tollgate::distributed::{FailurePolicy, RedisLimiter};
    /// use tollgate::TokenBucket;
    ///
    /// # async fn serve() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = RedisLimiter::cluster_builder(
    ///     ["redis://10.0.0.5:6379", "redis://10.0.0.6:6379", "redis://10.0.0.7:6379"],
    ///     TokenBucket::new("10/s burst 20".parse()?)?,
    ///     FailurePolicy::FailOpen,
    /// )
    /// .prefix("api:")
    /// .connect_checked()
    /// .await?;
    /// let answer = limiter.check("client-192.0.2.1").await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn cluster_builder(
        seeds: impl IntoIterator<Item = impl Into<String>>,
        algorithm: impl Into<RedisAlgorithm>,
        policy: FailurePolicy,
    ) -> RedisLimiterBuilder {
        let seeds = seeds.into_iter().map(Into::into).collect();
        RedisLimiterBuilder::new(Target::Cluster(seeds), algorithm.into(), policy)
    }
}

/// Where the limiter's state lives.
#[derive(Clone)]
pub(super) enum Target {
    /// One Redis, at this URL.
    Single(String),
    /// A Redis Cluster, found from these seeds.
    Cluster(Vec<String>),
}

/// Configures a [`RedisLimiter`]; see [`RedisLimiter::builder`] and
/// [`RedisLimiter::cluster_builder`]. Its `Debug` output hides the URLs' passwords
/// ([`redacted_url`](super::redacted_url)).
#[must_use = "a builder does nothing until `connect` is awaited"]
pub struct RedisLimiterBuilder {
    target: Target,
    algorithm: RedisAlgorithm,
    policy: FailurePolicy,
    prefix: String,
    time: TimeSource,
    deadline: Duration,
    probe_interval: Duration,
}

impl fmt::Debug for RedisLimiterBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("RedisLimiterBuilder");
        match &self.target {
            Target::Single(url) => debug.field("url", &super::redacted_url(url)),
            Target::Cluster(seeds) => debug.field(
                "seeds",
                &seeds
                    .iter()
                    .map(|seed| super::redacted_url(seed))
                    .collect::<Vec<_>>(),
            ),
        };
        debug
            .field("algorithm", &self.algorithm)
            .field("policy", &self.policy)
            .field("prefix", &self.prefix)
            .field("time", &self.time)
            .field("deadline", &self.deadline)
            .field("probe_interval", &self.probe_interval)
            .finish()
    }
}

/// The client's complaint about a URL, as tollgate's own error: the `redis` crate's error type
/// stays out of tollgate's API.
fn invalid_url(error: RedisError) -> RedisConfigError {
    RedisConfigError::InvalidUrl {
        reason: error.to_string(),
    }
}

impl RedisLimiterBuilder {
    fn new(target: Target, algorithm: RedisAlgorithm, policy: FailurePolicy) -> RedisLimiterBuilder {
        RedisLimiterBuilder {
            target,
            algorithm,
            policy,
            prefix: DEFAULT_PREFIX.to_owned(),
            time: TimeSource::Server,
            deadline: DEFAULT_DEADLINE,
            probe_interval: DEFAULT_PROBE_INTERVAL,
        }
    }

    /// The prefix of every key ([`DEFAULT_PREFIX`] unless set). Limits that must not share
    /// counts need distinct prefixes; it may not contain a brace.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Times decisions by `clock` instead of the server's `TIME` (see [`TimeSource`]).
    pub fn client_time(self, clock: impl Clock + 'static) -> Self {
        self.time(TimeSource::client(clock))
    }

    /// Where `now` comes from ([`TimeSource::Server`] unless set). On a cluster, `TIME` is the
    /// clock of the master that holds the key: keep the masters' clocks synchronised.
    pub fn time(mut self, time: TimeSource) -> Self {
        self.time = time;
        self
    }

    /// How long a decision waits for Redis before the failure policy answers
    /// ([`DEFAULT_DEADLINE`] unless set). On a cluster it also bounds the client's retries of a
    /// changing topology (`docs/distributed.md`, "Redis Cluster").
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// After a timeout or a connection failure, how long decisions go straight to the failure
    /// policy without asking Redis, except one probe per interval ([`DEFAULT_PROBE_INTERVAL`]
    /// unless set). While Redis is down, requests then wait for nothing instead of the deadline.
    /// On a cluster this holds per group of 64 hash slots: a failing master pauses only the keys
    /// of its own slots.
    pub fn probe_interval(mut self, interval: Duration) -> Self {
        self.probe_interval = interval;
        self
    }

    /// Validates the configuration and sets up the connection. The connection to one Redis is
    /// made lazily; on a cluster, its seed nodes are asked for the topology once (waiting at most the
    /// deadline, at least 100 ms, at most a second), and a seed that answers without cluster
    /// support is refused ([`RedisConfigError::NotACluster`]). Either way a limiter built while
    /// Redis is down answers by its failure policy until Redis is back.
    /// [`connect_checked`](Self::connect_checked) also makes one decision's round trip.
    ///
    /// Must run inside the tokio runtime the limiter will decide in, built with its timer and
    /// IO drivers (`enable_all`): each decision waits for Redis under a tokio timer.
    ///
    /// # Errors
    /// [`RedisConfigError`]: an invalid URL or seed (a cluster seed with a database other than
    /// 0, or a Unix socket), no seed ([`RedisConfigError::NoSeeds`]), seeds without cluster
    /// support ([`RedisConfigError::NotACluster`]), a prefix with a brace, a
    /// zero deadline, a window that is not whole microseconds, parameters past exact integers
    /// in Lua, or no tokio runtime with timers and IO here
    /// ([`RedisConfigError::RuntimeWithoutTimers`], [`RedisConfigError::RuntimeWithoutIo`]).
    pub async fn connect(self) -> Result<RedisLimiter, RedisConfigError> {
        runtime_has_timers()?;
        runtime_has_io()?;
        if self.prefix.contains(['{', '}']) {
            return Err(RedisConfigError::BraceInPrefix { prefix: self.prefix });
        }
        if self.deadline.is_zero() {
            return Err(RedisConfigError::ZeroDeadline);
        }
        let program = self.algorithm.program()?;
        let (connection, breakers) = match &self.target {
            Target::Single(url) => {
                let client = Client::open(url.as_str()).map_err(invalid_url)?;
                let connection = Connection::single(client, self.deadline).map_err(invalid_url)?;
                (connection, Breakers::single(self.probe_interval))
            }
            Target::Cluster(seeds) => {
                check_seeds(seeds)?;
                let connection =
                    Connection::cluster(seeds, self.deadline)
                        .await
                        .map_err(|error| match error {
                            ClusterError::Client(error) => invalid_url(error),
                            ClusterError::NotACluster => RedisConfigError::NotACluster {
                                node: seeds
                                    .iter()
                                    .map(|seed| node_name(seed))
                                    .collect::<Vec<_>>()
                                    .join(", "),
                            },
                        })?;
                (connection, Breakers::cluster(self.probe_interval))
            }
        };
        Ok(RedisLimiter {
            connection,
            target: self.target,
            configured: Snapshot::new(Configured {
                algorithm: self.algorithm,
                program,
            }),
            changes: AtomicU64::new(0),
            prefix: self.prefix,
            time: self.time,
            deadline: self.deadline,
            policy: self.policy,
            probe_interval: self.probe_interval,
            breakers: Arc::new(breakers),
            metering: crate::meter::Metering::NONE,
        })
    }

    /// [`connect`](Self::connect), then [`RedisLimiter::verify`]: one round trip that tells
    /// whether this configuration can work at all, for a service to stop at start with what to
    /// fix (a wrong password or database, a seed that is not a cluster node), or to start on its
    /// failure policy when the error [`is_transient`](RedisConfigError::is_transient) (Redis
    /// refusing connections or not answering yet).
    ///
    /// # Errors
    /// Those of [`connect`](Self::connect) and of [`RedisLimiter::verify`].
    pub async fn connect_checked(self) -> Result<RedisLimiter, RedisConfigError> {
        let limiter = self.connect().await?;
        limiter.verify().await?;
        Ok(limiter)
    }
}

/// Each seed is a Redis URL over TCP with database 0, the only one a cluster has.
fn check_seeds(seeds: &[String]) -> Result<(), RedisConfigError> {
    if seeds.is_empty() {
        return Err(RedisConfigError::NoSeeds);
    }
    for (number, seed) in seeds.iter().enumerate() {
        let info = seed.as_str().into_connection_info().map_err(invalid_url)?;
        if info.redis_settings().db() != 0 {
            return Err(RedisConfigError::InvalidUrl {
                reason: format!(
                    "seed {number} names database {}, and a Redis Cluster has one, 0: drop the `/db` of that seed",
                    info.redis_settings().db()
                ),
            });
        }
    }
    Ok(())
}

/// Whether this thread runs in a tokio runtime whose timers work, so that no decision's
/// deadline panics later. Tokio has no query for its time driver, and creating a timer without
/// one panics: the one timer created here tells, once, at construction. (The panic hook still
/// reports that panic; with `panic = "abort"` it aborts here, at construction.)
fn runtime_has_timers() -> Result<(), RedisConfigError> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(RedisConfigError::RuntimeWithoutTimers);
    }
    std::panic::catch_unwind(|| drop(tokio::time::sleep(Duration::ZERO)))
        .map_err(|_| RedisConfigError::RuntimeWithoutTimers)
}

/// Whether this thread's tokio runtime has its IO driver, which the connection (made lazily,
/// at the first decision) needs. Tokio has no query for it either: registering one socket with
/// it tells, once, at construction, as for the timers. Where no socket can be made here, the
/// connection will tell, as failures the policy answers.
fn runtime_has_io() -> Result<(), RedisConfigError> {
    let Ok(socket) = std::net::UdpSocket::bind((std::net::Ipv4Addr::LOCALHOST, 0)) else {
        return Ok(());
    };
    // Tokio takes a socket that does not block (registering one that does is a misuse).
    if socket.set_nonblocking(true).is_err() {
        return Ok(());
    }
    std::panic::catch_unwind(|| drop(tokio::net::UdpSocket::from_std(socket)))
        .map_err(|_| RedisConfigError::RuntimeWithoutIo)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A builder logged with `{:?}` must not write the Redis password into the log.
    #[test]
    fn a_builder_debug_hides_the_password() {
        let bucket = crate::TokenBucket::new("10/s".parse().unwrap()).unwrap();
        let builder = RedisLimiter::builder(
            "redis://default:hunter2@redis.internal:6379/0",
            bucket,
            FailurePolicy::FailOpen,
        );
        let shown = format!("{builder:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(
            shown.contains("redis://default:***@redis.internal:6379/0"),
            "{shown}"
        );
        let cluster = RedisLimiter::cluster_builder(
            ["redis://:hunter2@10.0.0.5:6379", "redis://:hunter2@10.0.0.6:6379"],
            bucket,
            FailurePolicy::FailOpen,
        );
        let shown = format!("{cluster:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("redis://:***@10.0.0.6:6379"), "{shown}");
    }

    #[test]
    fn cluster_seeds_are_tcp_urls_of_database_0() {
        assert!(matches!(check_seeds(&[]), Err(RedisConfigError::NoSeeds)));
        assert!(check_seeds(&["redis://127.0.0.1:7000".to_owned(), "redis://h:7001/0".to_owned()]).is_ok());
        match check_seeds(&[
            "redis://127.0.0.1:7000".to_owned(),
            "redis://127.0.0.1:7001/3".to_owned(),
        ]) {
            Err(RedisConfigError::InvalidUrl { reason }) => {
                assert!(reason.contains("seed 1 names database 3"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            check_seeds(&["http://nowhere".to_owned()]),
            Err(RedisConfigError::InvalidUrl { .. })
        ));
    }
}
