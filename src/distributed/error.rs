//! The distributed limiter's typed errors: refused configurations, and the decisions it cannot
//! make whatever the failure policy says.

use std::fmt;
use std::time::Duration;

use super::cause::RedisFailureCause;
use super::policy::Failure;
use crate::{CostTooLarge, Timestamp};

/// A distributed limiter that tollgate refuses to build.
#[derive(Debug)]
#[non_exhaustive]
pub enum RedisConfigError {
    /// The Redis URL could not be parsed, or the client could not be configured from it.
    InvalidUrl {
        /// What the Redis client said (without the URL, which may hold a password).
        reason: String,
    },
    /// A window is not a whole number of microseconds, the unit of the scripts (and of the
    /// server's `TIME`); its boundaries would fall elsewhere than a local limiter's.
    NotWholeMicros {
        /// The algorithm asked for.
        algorithm: &'static str,
        /// The window asked for.
        window: Duration,
    },
    /// A quantity of the algorithm's script would reach past 2^51 microseconds (about 71
    /// years), so that adding a time (below 2^52 µs) could reach 2^53, where Lua's numbers
    /// (doubles) stop holding every integer exactly.
    BeyondExactIntegers {
        /// The algorithm asked for.
        algorithm: &'static str,
        /// The parameter that is too large, and the product that bounds it.
        parameter: &'static str,
        /// The value asked for.
        value: u64,
        /// The largest value that keeps every intermediate product below 2^53.
        max: u64,
    },
    /// A live change to another algorithm ([`RedisLimiter::set_algorithm`](super::RedisLimiter::set_algorithm)):
    /// its keys are another algorithm's (a key's name ends in its algorithm), so the states the
    /// fleet holds would not be read. Build a new limiter for another algorithm.
    AlgorithmChanged {
        /// The running algorithm.
        from: &'static str,
        /// The algorithm offered.
        to: &'static str,
    },
    /// A sliding log whose limit exceeds what one Redis key holds: one list entry per unit, and
    /// a request of weight `n` writes `n` entries in one script, which Redis runs alone.
    LogTooLarge {
        /// The limit asked for.
        limit: u64,
        /// The largest limit a Redis sliding log accepts.
        max: u64,
    },
    /// A key prefix with a brace: it would move the hash tag (`{key}`) that keeps a limit's keys
    /// in one Redis Cluster slot.
    BraceInPrefix {
        /// The prefix asked for.
        prefix: String,
    },
    /// A per-decision deadline of zero: no decision could ever reach Redis.
    ZeroDeadline,
    /// [`connect`](super::RedisLimiterBuilder::connect) ran outside a tokio runtime, or in one
    /// built without its timer (`enable_time`, or `enable_all`): every decision waits for Redis
    /// under a tokio timer (its deadline), which would panic there.
    RuntimeWithoutTimers,
    /// [`connect`](super::RedisLimiterBuilder::connect) ran in a tokio runtime built without its
    /// IO driver (`enable_io`, or `enable_all`): the connection, made at the first decision,
    /// would panic there.
    RuntimeWithoutIo,
    /// [`cluster_builder`](super::RedisLimiter::cluster_builder) was given no seed node.
    NoSeeds,
    /// A seed of [`cluster_builder`](super::RedisLimiter::cluster_builder) is a Redis whose
    /// cluster support is disabled (`ERR This instance has cluster support disabled`), found by
    /// [`connect`](super::RedisLimiterBuilder::connect) (which asks its seed nodes for the topology
    /// once) or by [`verify`](super::RedisLimiter::verify).
    NotACluster {
        /// That seed (`host:port`; from `connect`, every seed, comma-separated: the client does
        /// not say which one answered).
        node: String,
    },
    /// A seed says the cluster is down (`cluster_state:fail` in `CLUSTER INFO`: a range of
    /// slots has no master that answers), found by [`verify`](super::RedisLimiter::verify).
    ClusterDown {
        /// That seed node (`host:port`): it said so.
        node: String,
    },
    /// A node could not be reached, or did not answer in time, when
    /// [`verify`](super::RedisLimiter::verify) asked it: refused, timed out, reset. This may
    /// pass by itself ([`is_transient`](Self::is_transient)).
    Unreachable {
        /// The node (`host:port`), or for a cluster seen through its client, `cluster`.
        node: String,
        /// What the connection met.
        cause: RedisFailureCause,
    },
    /// A node refused this client when [`verify`](super::RedisLimiter::verify) asked it: a wrong
    /// or missing password, a database index past the server's, an ACL user without the
    /// limiter's commands, a server error. A misconfiguration when
    /// [`RedisFailureCause::is_permanent`] says so.
    Refused {
        /// The node (`host:port`), or for a cluster seen through its client, `cluster`.
        node: String,
        /// What the node answered.
        cause: RedisFailureCause,
    },
}

impl RedisConfigError {
    /// Whether this error may pass by itself, so that a service may start on its failure policy
    /// and wait for Redis (a node refusing connections or not answering in time, a cluster
    /// that is down, or reconfiguring), rather than stop: `false` for a configuration that can
    /// never work (a wrong password or database, a seed that is not a cluster node, a bad URL,
    /// a quota the scripts cannot hold...).
    pub fn is_transient(&self) -> bool {
        match self {
            RedisConfigError::Unreachable { .. } | RedisConfigError::ClusterDown { .. } => true,
            RedisConfigError::Refused { cause, .. } => !cause.is_permanent(),
            _ => false,
        }
    }
}

impl fmt::Display for RedisConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedisConfigError::AlgorithmChanged { from, to } => write!(
                f,
                "a Redis limiter cannot change from a {from} to a {to} live: the fleet's keys are the \
                 {from}'s; build a new limiter for the {to}"
            ),
            RedisConfigError::InvalidUrl { reason } => write!(
                f,
                "invalid Redis URL ({reason}); expected `redis://[[user]:password@]host[:port][/db]` \
                 or `redis+unix:///path/to/socket[?db=N]`"
            ),
            RedisConfigError::NotWholeMicros { algorithm, window } => write!(
                f,
                "the {algorithm}'s window of {window:?} is not a whole number of microseconds, the unit of the Redis scripts"
            ),
            RedisConfigError::BeyondExactIntegers {
                algorithm,
                parameter,
                value,
                max,
            } => write!(
                f,
                "the {algorithm}'s {parameter} of {value} is too large for exact integers in Lua (doubles, exact below 2^53): at most {max}"
            ),
            RedisConfigError::LogTooLarge { limit, max } => write!(
                f,
                "a sliding log of limit {limit} is too large for one Redis key (one entry per unit): at most {max}"
            ),
            RedisConfigError::BraceInPrefix { prefix } => write!(
                f,
                "the key prefix {prefix:?} contains a brace, which would move the hash tag of every key"
            ),
            RedisConfigError::ZeroDeadline => f.write_str("the per-decision deadline must be longer than zero"),
            RedisConfigError::RuntimeWithoutTimers => f.write_str(
                "the Redis limiter must be built and used inside a tokio runtime with timers and IO enabled (`enable_all`)",
            ),
            RedisConfigError::RuntimeWithoutIo => f.write_str(
                "the Redis limiter must be built and used inside a tokio runtime with IO and timers enabled (`enable_all`): this one has no IO driver",
            ),
            RedisConfigError::NoSeeds => f.write_str(
                "a Redis Cluster limiter needs at least one seed node (`redis://host:port`; a few of the cluster's nodes)",
            ),
            RedisConfigError::NotACluster { node } => write!(
                f,
                "seed {node} is not a Redis Cluster node (its cluster support is disabled): for one Redis use `RedisLimiter::builder` with its URL"
            ),
            RedisConfigError::ClusterDown { node } => write!(
                f,
                "the Redis Cluster is down (`cluster_state:fail` at {node}): a range of slots has no master that answers; see `CLUSTER INFO` and `CLUSTER NODES`"
            ),
            RedisConfigError::Unreachable { node, cause } => write!(f, "Redis at {node}: {cause}"),
            RedisConfigError::Refused { node, cause } => write!(f, "Redis at {node} refused this client: {cause}"),
        }
    }
}

impl std::error::Error for RedisConfigError {}

/// A decision the distributed limiter refuses to make, whatever its failure policy: the
/// request itself, or the data in Redis, is wrong, and no fallback would make it right.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RedisCheckError {
    /// The request weighs more than the limiter's capacity: it could never pass. Redis is not
    /// asked.
    CostTooLarge(CostTooLarge),
    /// The key holds a value of another Redis type (a list where a string was expected, ...):
    /// something else writes under this key prefix.
    WrongType {
        /// The key in Redis that holds it: the limiter's own key, or, for a sliding log, the same
        /// client's key in the log's other encoding, which its script also reads (see
        /// `docs/distributed.md`, "Sliding log").
        key: String,
    },
    /// The key holds a string that is not this algorithm's state (another algorithm, or another
    /// program, writes under this key prefix), or, for a sliding log kept as a list, entries
    /// that are not whole microseconds in the scripts' range.
    CorruptState {
        /// The key in Redis that holds it (as for [`WrongType`](Self::WrongType)).
        key: String,
    },
    /// The key lives on another node of a Redis Cluster (a `MOVED` or `ASK` reply) and the
    /// limiter talks to the one node of its URL ([`RedisLimiter::builder`](super::RedisLimiter::builder)),
    /// which does not follow redirects: build it with
    /// [`RedisLimiter::cluster_builder`](super::RedisLimiter::cluster_builder) and the cluster's
    /// nodes as seeds. (A cluster limiter follows redirects; one that outlasts its retries is a
    /// failure the policy answers, never this error.)
    ClusterRedirect {
        /// The key in Redis.
        key: String,
        /// The node the server redirected to (`host:port`), as the reply said it.
        node: String,
    },
    /// A client-supplied time at or after 2^52 microseconds since the epoch (the year 2112),
    /// past which the scripts' arithmetic would not stay exact.
    TimeOutOfRange {
        /// The time the clock gave.
        now: Timestamp,
    },
}

impl From<CostTooLarge> for RedisCheckError {
    fn from(error: CostTooLarge) -> Self {
        RedisCheckError::CostTooLarge(error)
    }
}

impl fmt::Display for RedisCheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedisCheckError::CostTooLarge(error) => error.fmt(f),
            RedisCheckError::WrongType { key } => {
                write!(
                    f,
                    "the Redis key {key:?} holds a value of another type than this limiter's state"
                )
            }
            RedisCheckError::CorruptState { key } => {
                write!(
                    f,
                    "the Redis key {key:?} holds a string that is not this limiter's state"
                )
            }
            RedisCheckError::ClusterRedirect { key, node } => write!(
                f,
                "cluster redirect: the Redis key {key:?} lives on node {node} of a Redis Cluster, and this limiter talks to one node: build it with `RedisLimiter::cluster_builder` and the cluster's nodes as seeds"
            ),
            RedisCheckError::TimeOutOfRange { now } => write!(
                f,
                "a time of {} ns since the epoch is past the range of the Redis scripts (2^52 microseconds)",
                now.as_nanos()
            ),
        }
    }
}

/// No source: the one error this wraps, [`CostTooLarge`], is its whole message.
impl std::error::Error for RedisCheckError {}

/// Why [`RedisLimiter::reset`](super::RedisLimiter::reset) could not forget a key in Redis.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RedisResetError {
    /// Redis did not answer within the deadline, the connection failed, or Redis answered an
    /// error of its own: the key's state in Redis may be intact. Try again.
    Failed(Failure),
    /// The key lives on another node of a Redis Cluster (see
    /// [`RedisCheckError::ClusterRedirect`]).
    ClusterRedirect {
        /// The key in Redis.
        key: String,
        /// The node the server redirected to (`host:port`), as the reply said it.
        node: String,
    },
    /// A client-supplied time at or after 2^52 microseconds since the epoch (see
    /// [`RedisCheckError::TimeOutOfRange`]): the reset judges whether the key was still being
    /// limited at that time, which the scripts cannot hold. Redis was not asked.
    TimeOutOfRange {
        /// The time the clock gave.
        now: Timestamp,
    },
}

impl fmt::Display for RedisResetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedisResetError::Failed(failure) => {
                write!(f, "the reset did not reach Redis ({failure}); the key's state may be intact")
            }
            RedisResetError::ClusterRedirect { key, node } => write!(
                f,
                "cluster redirect: the Redis key {key:?} lives on node {node} of a Redis Cluster, and this limiter talks to one node: build it with `RedisLimiter::cluster_builder` and the cluster's nodes as seeds"
            ),
            RedisResetError::TimeOutOfRange { now } => write!(
                f,
                "a time of {} ns since the epoch is past the range of the Redis scripts (2^52 microseconds); the key was not reset in Redis",
                now.as_nanos()
            ),
        }
    }
}

impl std::error::Error for RedisResetError {}
