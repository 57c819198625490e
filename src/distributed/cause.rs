//! Why Redis did not decide, by cause: what the connection or the server said, read from the
//! Redis client's error, with what to fix.

use std::fmt;

use redis::{ErrorKind, RedisError, ServerErrorKind};

/// What went wrong between the limiter and Redis, as precisely as the Redis client tells it.
///
/// Carried by [`Failure`](super::Failure) (so by every [`RedisDecision`](super::RedisDecision)
/// the failure policy made, and by [`RedisResetError::Failed`](super::RedisResetError::Failed))
/// and by the errors of [`RedisLimiter::verify`](super::RedisLimiter::verify). Its `Display`
/// says what to fix. [`is_permanent`](Self::is_permanent) tells a misconfiguration, which no
/// retry mends, from a failure that may pass by itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RedisFailureCause {
    /// No reply within the deadline (a slow server, a lost network, a connection still being
    /// made).
    Timeout,
    /// The connection was refused: nothing listens at that host and port.
    ConnectionRefused,
    /// The connection was reset or closed while in use (a restart, a proxy or a firewall).
    ConnectionLost,
    /// Another failure to connect or to use the connection (a name that does not resolve, a
    /// host that cannot be reached, a TLS failure).
    Unreachable,
    /// The server refused the user or password of the URL (`WRONGPASS`, or a failed `AUTH`).
    AuthenticationFailed,
    /// The server requires a password and the URL gives none (`NOAUTH`).
    AuthenticationRequired,
    /// The URL's user may not run the limiter's commands or touch its keys (`NOPERM`).
    NoPermission,
    /// The database index of the URL (`/db`) is past the server's `databases` setting
    /// (`ERR DB index is out of range`).
    NoSuchDatabase,
    /// A seed of a cluster limiter is a Redis without cluster support (`ERR This instance has
    /// cluster support disabled`).
    NotACluster,
    /// The cluster is down (`CLUSTERDOWN`, `cluster_state:fail`): some slots have no master that
    /// answers.
    ClusterDown,
    /// The cluster's topology was changing (`MOVED`, `ASK`, `TRYAGAIN`) through every retry the
    /// deadline left room for, or the node that serves the key was not known yet.
    ClusterReconfiguring,
    /// The node is a replica and refused a write (`READONLY`).
    ReadOnly,
    /// The server is loading its data set (`LOADING`).
    Loading,
    /// The server is running a script past its time limit (`BUSY`).
    Busy,
    /// The server refused a write for memory (`OOM`).
    OutOfMemory,
    /// Another error reply of the server.
    ServerError,
    /// A reply that is not a decision (never expected).
    UnexpectedReply,
}

impl RedisFailureCause {
    /// Every cause, in the order of their codes (see [`code`](Self::code)).
    const ALL: [RedisFailureCause; 17] = [
        RedisFailureCause::Timeout,
        RedisFailureCause::ConnectionRefused,
        RedisFailureCause::ConnectionLost,
        RedisFailureCause::Unreachable,
        RedisFailureCause::AuthenticationFailed,
        RedisFailureCause::AuthenticationRequired,
        RedisFailureCause::NoPermission,
        RedisFailureCause::NoSuchDatabase,
        RedisFailureCause::NotACluster,
        RedisFailureCause::ClusterDown,
        RedisFailureCause::ClusterReconfiguring,
        RedisFailureCause::ReadOnly,
        RedisFailureCause::Loading,
        RedisFailureCause::Busy,
        RedisFailureCause::OutOfMemory,
        RedisFailureCause::ServerError,
        RedisFailureCause::UnexpectedReply,
    ];

    /// Whether this is a misconfiguration that no retry mends (the URL's password, user or
    /// database, the user's permissions, a seed that is not a cluster node): a service should
    /// stop at start with this message rather than run on its failure policy. The others may
    /// pass by themselves (a server restarting, a failover, a network blip).
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            RedisFailureCause::AuthenticationFailed
                | RedisFailureCause::AuthenticationRequired
                | RedisFailureCause::NoPermission
                | RedisFailureCause::NoSuchDatabase
                | RedisFailureCause::NotACluster
        )
    }

    /// The cause as one byte, for an atomic (see `breakers.rs`).
    pub(crate) fn code(self) -> u8 {
        Self::ALL
            .iter()
            .position(|&cause| cause == self)
            .map_or(0, |at| at as u8)
    }

    /// The cause of [`code`](Self::code) (a code out of range reads as a timeout).
    pub(crate) fn from_code(code: u8) -> RedisFailureCause {
        Self::ALL
            .get(usize::from(code))
            .copied()
            .unwrap_or(RedisFailureCause::Timeout)
    }
}

impl fmt::Display for RedisFailureCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RedisFailureCause::Timeout => {
                "no reply within the deadline: Redis is slow or cannot be reached (check the address \
                 and the network, or raise the limiter's deadline)"
            }
            RedisFailureCause::ConnectionRefused => {
                "connection refused: nothing listens at that host and port (check the address, and \
                 that Redis runs)"
            }
            RedisFailureCause::ConnectionLost => {
                "the connection was reset or closed (Redis restarting, or a proxy or firewall \
                 dropping it); it is made again by itself"
            }
            RedisFailureCause::Unreachable => {
                "Redis cannot be reached (a host name that does not resolve, a host with no route, \
                 or a TLS failure): check the address"
            }
            RedisFailureCause::AuthenticationFailed => {
                "authentication failed (WRONGPASS): the user or password of the URL is not the \
                 server's; set them as `redis://user:password@host:port/db`"
            }
            RedisFailureCause::AuthenticationRequired => {
                "authentication required (NOAUTH): the server has a password and the URL gives \
                 none; set it as `redis://:password@host:port/db`"
            }
            RedisFailureCause::NoPermission => {
                "permission denied (NOPERM): the URL's user may not run the limiter's commands \
                 (EVALSHA, EVAL, and inside the scripts TIME, GET, SET, PSETEX, PEXPIRE, SETRANGE, \
                 DEL and the list commands) or touch its key prefix; grant them in the server's ACL"
            }
            RedisFailureCause::NoSuchDatabase => {
                "no such database (ERR DB index is out of range): the `/db` of the URL is past the \
                 server's `databases` setting (16 by default: 0 to 15)"
            }
            RedisFailureCause::NotACluster => {
                "this node has cluster support disabled: for one Redis use `RedisLimiter::builder` \
                 with its URL; for a cluster, give the cluster's nodes as seeds"
            }
            RedisFailureCause::ClusterDown => {
                "the cluster is down (CLUSTERDOWN, `cluster_state:fail`): some slots have no master \
                 that answers; see `CLUSTER INFO` and `CLUSTER NODES`"
            }
            RedisFailureCause::ClusterReconfiguring => {
                "the cluster's topology was changing (MOVED, ASK or TRYAGAIN through every retry \
                 the deadline left room for): a failover or a slot migration in progress"
            }
            RedisFailureCause::ReadOnly => {
                "the node is a replica (READONLY): the address leads to a replica, not to the \
                 primary (after a failover, point it at the new primary)"
            }
            RedisFailureCause::Loading => "Redis is loading its data set (LOADING)",
            RedisFailureCause::Busy => "Redis is busy running a script past its time limit (BUSY)",
            RedisFailureCause::OutOfMemory => {
                "Redis is out of memory (OOM under `noeviction`): free memory or raise `maxmemory`"
            }
            RedisFailureCause::ServerError => "Redis answered an error",
            RedisFailureCause::UnexpectedReply => "Redis answered something that is not a decision",
        })
    }
}

/// The cause of `error`, from its kind, its error code and, for the replies redis-rs does not
/// name, its text (read against Redis 7.0.15's replies and redis-rs 1.2's errors, one by one in
/// `tests/redis/causes.rs`).
pub(crate) fn cause_of(error: &RedisError) -> RedisFailureCause {
    if error.is_timeout() {
        return RedisFailureCause::Timeout;
    }
    let detail = error.detail().unwrap_or_default();
    match error.code() {
        Some("WRONGPASS") => return RedisFailureCause::AuthenticationFailed,
        Some("NOAUTH") => return RedisFailureCause::AuthenticationRequired,
        Some("NOPERM") => return RedisFailureCause::NoPermission,
        Some("OOM") => return RedisFailureCause::OutOfMemory,
        Some("BUSY") => return RedisFailureCause::Busy,
        // `SELECT` at connection set-up (redis-rs: "Redis server refused to switch database").
        Some("ERR") if detail.starts_with("DB index is out of range") => {
            return RedisFailureCause::NoSuchDatabase
        }
        Some("ERR") if detail.contains("cluster support disabled") => return RedisFailureCause::NotACluster,
        // A command the ACL denies inside a script (the denied `EVALSHA` itself, or a key the
        // user may not touch, is `NOPERM`).
        Some("ERR") if detail.starts_with("The user executing the script can't run") => {
            return RedisFailureCause::NoPermission
        }
        _ => {}
    }
    match error.kind() {
        ErrorKind::AuthenticationFailed => RedisFailureCause::AuthenticationFailed,
        ErrorKind::Server(kind) => match kind {
            ServerErrorKind::NoPerm => RedisFailureCause::NoPermission,
            ServerErrorKind::ClusterDown | ServerErrorKind::MasterDown => RedisFailureCause::ClusterDown,
            ServerErrorKind::Moved | ServerErrorKind::Ask | ServerErrorKind::TryAgain => {
                RedisFailureCause::ClusterReconfiguring
            }
            ServerErrorKind::ReadOnly => RedisFailureCause::ReadOnly,
            ServerErrorKind::BusyLoading => RedisFailureCause::Loading,
            _ => RedisFailureCause::ServerError,
        },
        ErrorKind::ClusterConnectionNotFound => RedisFailureCause::ClusterReconfiguring,
        ErrorKind::Extension => RedisFailureCause::ServerError,
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType => RedisFailureCause::UnexpectedReply,
        ErrorKind::Io => io_cause(error, detail),
        _ => RedisFailureCause::Unreachable,
    }
}

/// An input/output failure, told apart by the OS error redis-rs keeps (or, where a cluster
/// client wraps it into "Failed to create initial connections", by its text).
fn io_cause(error: &RedisError, detail: &str) -> RedisFailureCause {
    if error.is_connection_refusal() || detail.contains("Connection refused") {
        RedisFailureCause::ConnectionRefused
    } else if error.is_connection_dropped() {
        RedisFailureCause::ConnectionLost
    } else {
        RedisFailureCause::Unreachable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply_error(reply: &[u8]) -> RedisError {
        redis::parse_redis_value(reply)
            .and_then(redis::Value::extract_error)
            .expect_err("an error reply")
    }

    #[test]
    fn every_cause_has_its_own_code() {
        for cause in RedisFailureCause::ALL {
            assert_eq!(RedisFailureCause::from_code(cause.code()), cause);
        }
    }

    /// The replies of Redis 7.0.15, byte for byte, each read as its cause.
    #[test]
    fn error_replies_are_read_as_their_causes() {
        for (reply, cause) in [
            (
                &b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"[..],
                RedisFailureCause::AuthenticationFailed,
            ),
            (b"-NOAUTH Authentication required.\r\n", RedisFailureCause::AuthenticationRequired),
            (
                b"-NOPERM this user has no permissions to run the 'evalsha' command\r\n",
                RedisFailureCause::NoPermission,
            ),
            (
                b"-NOPERM this user has no permissions to access one of the keys used as arguments\r\n",
                RedisFailureCause::NoPermission,
            ),
            (
                b"-ERR The user executing the script can't run this command or subcommand script: \
                  8c65b2bc1e1aa28b7e857a77051f1ccb4b611adb, on @user_script:1.\r\n",
                RedisFailureCause::NoPermission,
            ),
            (b"-ERR DB index is out of range\r\n", RedisFailureCause::NoSuchDatabase),
            (
                b"-ERR This instance has cluster support disabled\r\n",
                RedisFailureCause::NotACluster,
            ),
            (b"-CLUSTERDOWN The cluster is down\r\n", RedisFailureCause::ClusterDown),
            (b"-MOVED 3999 127.0.0.1:6381\r\n", RedisFailureCause::ClusterReconfiguring),
            (b"-ASK 3999 127.0.0.1:6381\r\n", RedisFailureCause::ClusterReconfiguring),
            (
                b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
                RedisFailureCause::ClusterReconfiguring,
            ),
            (
                b"-READONLY You can't write against a read only replica.\r\n",
                RedisFailureCause::ReadOnly,
            ),
            (
                b"-LOADING Redis is loading the dataset in memory\r\n",
                RedisFailureCause::Loading,
            ),
            (
                b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n",
                RedisFailureCause::Busy,
            ),
            (
                b"-OOM command not allowed when used memory > 'maxmemory'.\r\n",
                RedisFailureCause::OutOfMemory,
            ),
            (b"-ERR unknown command\r\n", RedisFailureCause::ServerError),
            (b"-MISCONF no disk\r\n", RedisFailureCause::ServerError),
        ] {
            assert_eq!(cause_of(&reply_error(reply)), cause, "{}", String::from_utf8_lossy(reply));
        }
    }

    #[test]
    fn connection_failures_are_read_as_their_causes() {
        let refused = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(cause_of(&refused), RedisFailureCause::ConnectionRefused);
        let reset = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(cause_of(&reset), RedisFailureCause::ConnectionLost);
        let timeout = RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut));
        assert_eq!(cause_of(&timeout), RedisFailureCause::Timeout);
        let auth = RedisError::from((ErrorKind::AuthenticationFailed, "Password authentication failed"));
        assert_eq!(cause_of(&auth), RedisFailureCause::AuthenticationFailed);
        let wrapped = RedisError::from((
            ErrorKind::Io,
            "Failed to create initial connections",
            "Connection refused (os error 111)".to_owned(),
        ));
        assert_eq!(cause_of(&wrapped), RedisFailureCause::ConnectionRefused);
    }

    #[test]
    fn only_misconfigurations_are_permanent() {
        let permanent: Vec<_> = RedisFailureCause::ALL
            .into_iter()
            .filter(RedisFailureCause::is_permanent)
            .collect();
        assert_eq!(
            permanent,
            [
                RedisFailureCause::AuthenticationFailed,
                RedisFailureCause::AuthenticationRequired,
                RedisFailureCause::NoPermission,
                RedisFailureCause::NoSuchDatabase,
                RedisFailureCause::NotACluster,
            ]
        );
    }
}
