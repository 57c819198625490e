//! Whether a limiter's configuration can work at all: one round trip at start, answered with a
//! typed error that says what to fix, where a decision would only fall to the failure policy.

use std::time::Duration;

use redis::{AsyncConnectionConfig, Client, IntoConnectionInfo};

use super::builder::Target;
use super::cause::{cause_of, RedisFailureCause};
use super::connection::CONNECT_TIMEOUT;
use super::error::RedisConfigError;
use super::limiter::RedisLimiter;

/// The key [`RedisLimiter::verify`] peeks at (weight 0: nothing is written).
const PROBE_KEY: &str = "tollgate-verify";

impl RedisLimiter {
    /// Asks Redis once whether this limiter's configuration can work, and says what is wrong
    /// when it cannot: a weight-0 peek of the algorithm's own script (which writes nothing), over
    /// the limiter's own connection, with the deadline raised to at least one second (a first
    /// connection is being made). On a cluster, each seed is first asked `CLUSTER INFO` on a
    /// connection of its own.
    ///
    /// Decisions never fail for these causes (the failure policy answers, and
    /// [`RedisDecision::failure`](super::RedisDecision::failure) says why): this is for a
    /// service to stop at start with the message, or to start on its policy when the error
    /// [`is_transient`](RedisConfigError::is_transient).
    ///
    /// # Errors
    /// - [`RedisConfigError::Refused`]: a node refused this client, with its
    ///   [`cause`](RedisFailureCause): a wrong password or user
    ///   ([`AuthenticationFailed`](RedisFailureCause::AuthenticationFailed)), none given where one
    ///   is required ([`AuthenticationRequired`](RedisFailureCause::AuthenticationRequired)), a
    ///   database past the server's ([`NoSuchDatabase`](RedisFailureCause::NoSuchDatabase)), an
    ///   ACL user without the limiter's commands ([`NoPermission`](RedisFailureCause::NoPermission)),
    ///   or another error reply.
    /// - [`RedisConfigError::Unreachable`]: refused, reset or timed out (transient).
    /// - [`RedisConfigError::NotACluster`]: a cluster seed with cluster support disabled.
    /// - [`RedisConfigError::ClusterDown`]: a seed says `cluster_state:fail` (transient).
    pub async fn verify(&self) -> Result<(), RedisConfigError> {
        let wait = self.deadline.max(CONNECT_TIMEOUT);
        let node = match &self.target {
            Target::Single(url) => node_name(url),
            Target::Cluster(seeds) => {
                for seed in seeds {
                    check_seed(seed, wait).await?;
                }
                "cluster".to_owned()
            }
        };
        let configured = self.configured.load();
        let program = &configured.program;
        let key = self.key_with_suffix(PROBE_KEY, program.suffix);
        let (arguments, length) = program.arguments(0, None);
        let (keys, args): ([&str; 1], [&[u8]; 2]) = ([key.as_str()], [&arguments[..length], b"peek"]);
        let call = self.connection.run(&program.script, &keys, &args);
        match tokio::time::timeout(wait, call).await {
            Err(_elapsed) => Err(config_error(node, RedisFailureCause::Timeout)),
            // A reply, or an error about the key's content (written by something else): Redis
            // runs the script for this client.
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) if error.code().is_some_and(|code| code.starts_with("TOLLGATE_")) => Ok(()),
            Ok(Err(error)) if error.code() == Some("WRONGTYPE") => Ok(()),
            Ok(Err(error)) => Err(config_error(node, cause_of(&error))),
        }
    }
}

/// `CLUSTER INFO` of one seed, on a connection of its own: a node that can be reached, lets this
/// client in, has cluster support, and says `cluster_state:ok`.
async fn check_seed(seed: &str, wait: Duration) -> Result<(), RedisConfigError> {
    let node = node_name(seed);
    let client = Client::open(seed).map_err(|error| RedisConfigError::InvalidUrl {
        reason: error.to_string(),
    })?;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(wait))
        .set_response_timeout(Some(wait));
    let info = async {
        let mut connection = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        redis::cmd("CLUSTER")
            .arg("INFO")
            .query_async::<String>(&mut connection)
            .await
    };
    match tokio::time::timeout(wait, info).await {
        Err(_elapsed) => Err(config_error(node, RedisFailureCause::Timeout)),
        Ok(Err(error)) => Err(config_error(node, cause_of(&error))),
        Ok(Ok(info)) if info.lines().any(|line| line.trim() == "cluster_state:ok") => Ok(()),
        Ok(Ok(_)) => Err(RedisConfigError::ClusterDown { node }),
    }
}

/// The error [`RedisLimiter::verify`] answers for `cause` at `node`.
fn config_error(node: String, cause: RedisFailureCause) -> RedisConfigError {
    match cause {
        RedisFailureCause::Timeout
        | RedisFailureCause::ConnectionRefused
        | RedisFailureCause::ConnectionLost
        | RedisFailureCause::Unreachable
        | RedisFailureCause::ClusterReconfiguring => RedisConfigError::Unreachable { node, cause },
        RedisFailureCause::NotACluster => RedisConfigError::NotACluster { node },
        RedisFailureCause::ClusterDown => RedisConfigError::ClusterDown { node },
        cause => RedisConfigError::Refused { node, cause },
    }
}

/// `host:port` of a Redis URL, which never shows its password (or `redis` for one the client
/// would not read, which `connect` has refused before).
pub(super) fn node_name(url: &str) -> String {
    url.into_connection_info()
        .map_or_else(|_| "redis".to_owned(), |info| info.addr().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_named_without_its_password() {
        assert_eq!(node_name("redis://:hunter2@10.0.0.5:6380/2"), "10.0.0.5:6380");
        assert_eq!(node_name("redis://cache"), "cache:6379");
    }

    #[test]
    fn each_cause_is_the_error_that_says_it() {
        let node = || "n:1".to_owned();
        assert!(matches!(
            config_error(node(), RedisFailureCause::ConnectionRefused),
            RedisConfigError::Unreachable {
                cause: RedisFailureCause::ConnectionRefused,
                ..
            }
        ));
        assert!(matches!(
            config_error(node(), RedisFailureCause::NotACluster),
            RedisConfigError::NotACluster { .. }
        ));
        let refused = config_error(node(), RedisFailureCause::NoSuchDatabase);
        assert!(matches!(
            refused,
            RedisConfigError::Refused {
                cause: RedisFailureCause::NoSuchDatabase,
                ..
            }
        ));
        assert!(!refused.is_transient());
        assert!(config_error(node(), RedisFailureCause::Timeout).is_transient());
        assert!(config_error(node(), RedisFailureCause::ClusterDown).is_transient());
        assert!(config_error(node(), RedisFailureCause::Loading).is_transient());
    }
}
