//! A Redis client's error, split into the typed errors about a key's content or the deployment,
//! which no failure policy fixes, and the failures the policy answers, each with its cause.

use redis::{ErrorKind, RedisError, ServerErrorKind};

use super::cause::{cause_of, RedisFailureCause};
use super::error::RedisCheckError;
use super::policy::Failure;

/// Splits `error` into a typed error about the key's content or the deployment, which no policy
/// fixes, and a failure the policy answers.
///
/// `key` is the key the script decides on; `other`, the same client's key in the log's other
/// encoding, which the log scripts also read (an error about it names it: `TOLLGATE_OTHER_*`).
/// `cluster` says whether the connection is a cluster client: there a `MOVED` or `ASK` that
/// outlasted the client's retries is a topology in flux (a failure); on a connection to one node
/// it is a cluster behind a one-node client (a typed error that names the node).
pub(super) fn classify(
    error: &RedisError,
    key: String,
    other: Option<String>,
    cluster: bool,
) -> Result<Failure, RedisCheckError> {
    match error.code() {
        Some("WRONGTYPE") => return Err(RedisCheckError::WrongType { key }),
        // The same before Redis 7.0, wrapped in an `ERR` (the scripts' own `TOLLGATE_*` errors
        // are replies, never wrapped): the `GET` of the decided key met another type.
        Some("ERR") if is_wrapped_script_error(error, "WRONGTYPE") => {
            return Err(RedisCheckError::WrongType { key })
        }
        Some("TOLLGATE_STATE") => return Err(RedisCheckError::CorruptState { key }),
        Some("TOLLGATE_OTHER_WRONGTYPE") => {
            return Err(RedisCheckError::WrongType {
                key: other.unwrap_or(key),
            })
        }
        Some("TOLLGATE_OTHER_STATE") => {
            return Err(RedisCheckError::CorruptState {
                key: other.unwrap_or(key),
            })
        }
        _ => {}
    }
    if let ErrorKind::Server(ServerErrorKind::Moved | ServerErrorKind::Ask) = error.kind() {
        if !cluster {
            // The same key is redirected on every call: a cluster behind a one-node client.
            let node = error.redirect_node().map_or_else(
                || error.detail().unwrap_or_default().to_owned(),
                |(node, _slot)| node.to_owned(),
            );
            return Err(RedisCheckError::ClusterRedirect { key, node });
        }
    }
    let cause = match cause_of(error) {
        // Before Redis 7.0 a script's `OOM` reaches the client wrapped in an `ERR` of its own.
        RedisFailureCause::ServerError if is_script_out_of_memory(error) => RedisFailureCause::OutOfMemory,
        cause => cause,
    };
    Ok(Failure::from_cause(cause))
}

/// Whether `error` is the `OOM` of a script's first write as Redis before 7.0 answers it: an
/// `ERR` reply that wraps the command's own error after a `-` (`ERR Error running script (call
/// to f_...): @user_script:41: @user_script: 41: -OOM command not allowed when used memory >
/// 'maxmemory'.`). Redis 7.0 and later answer the command's own code, `OOM`.
fn is_script_out_of_memory(error: &RedisError) -> bool {
    is_wrapped_script_error(error, "OOM")
}

/// Whether `error` is a command's `code` error inside a script, as Redis before 7.0 answers it
/// (wrapped in an `ERR`, as for [`is_script_out_of_memory`]).
fn is_wrapped_script_error(error: &RedisError, code: &str) -> bool {
    error.code() == Some("ERR")
        && error.detail().is_some_and(|detail| {
            detail.starts_with("Error running script")
                && detail.match_indices(": -").any(|(at, _)| {
                    detail[at + 3..]
                        .strip_prefix(code)
                        .is_some_and(|rest| rest.starts_with(' '))
                })
        })
}

#[cfg(test)]
mod tests {
    use redis::Value;

    use super::*;

    fn server_error(kind: ServerErrorKind, description: &'static str, detail: &str) -> RedisError {
        RedisError::from((ErrorKind::Server(kind), description, detail.to_owned()))
    }

    #[test]
    fn cluster_redirects_are_a_typed_error_naming_the_node() {
        for kind in [ServerErrorKind::Moved, ServerErrorKind::Ask] {
            let error = server_error(kind, "key moved", "3999 127.0.0.1:17002");
            assert_eq!(
                classify(&error, "tollgate:{k}:tb2".to_owned(), None, false),
                Err(RedisCheckError::ClusterRedirect {
                    key: "tollgate:{k}:tb2".to_owned(),
                    node: "127.0.0.1:17002".to_owned(),
                })
            );
        }
    }

    /// On a cluster connection a redirect that outlasted the client's retries is a topology in
    /// flux, answered by the policy: never an error for the caller.
    #[test]
    fn on_a_cluster_redirects_fall_to_the_policy() {
        for kind in [
            ServerErrorKind::Moved,
            ServerErrorKind::Ask,
            ServerErrorKind::TryAgain,
        ] {
            let error = server_error(kind, "key moved", "3999 127.0.0.1:17002");
            assert_eq!(
                classify(&error, "tollgate:{k}:tb2".to_owned(), None, true),
                Ok(Failure::Server(RedisFailureCause::ClusterReconfiguring))
            );
        }
    }

    #[test]
    fn other_server_errors_fall_to_the_policy_with_their_causes() {
        for (kind, cause) in [
            (ServerErrorKind::ReadOnly, RedisFailureCause::ReadOnly),
            (ServerErrorKind::BusyLoading, RedisFailureCause::Loading),
            (ServerErrorKind::ClusterDown, RedisFailureCause::ClusterDown),
        ] {
            let error = server_error(kind, "server error", "detail");
            assert_eq!(
                classify(&error, "k".to_owned(), None, false),
                Ok(Failure::Server(cause))
            );
        }
    }

    /// Error codes redis-rs does not name are `ErrorKind::Extension`: still Redis's answer,
    /// never a connection failure (which would also open the breaker).
    #[test]
    fn unnamed_server_errors_fall_to_the_policy_as_server_errors() {
        for (code, cause) in [
            ("BUSY", RedisFailureCause::Busy),
            ("MISCONF", RedisFailureCause::ServerError),
            ("NOREPLICAS", RedisFailureCause::ServerError),
        ] {
            let error = redis::make_extension_error(code.to_owned(), Some("detail".to_owned()));
            assert_eq!(error.kind(), ErrorKind::Extension);
            assert_eq!(
                classify(&error, "k".to_owned(), None, false),
                Ok(Failure::Server(cause)),
                "{code}"
            );
        }
    }

    /// `OOM` is what a script's write gets with memory full under `noeviction`
    /// (`tests/redis/memory.rs`): a failure of its own, for the operators' alerts.
    #[test]
    fn out_of_memory_is_its_own_failure() {
        let error = redis::make_extension_error(
            "OOM".to_owned(),
            Some("command not allowed when used memory > 'maxmemory'.".to_owned()),
        );
        assert_eq!(error.kind(), ErrorKind::Extension);
        assert_eq!(
            classify(&error, "k".to_owned(), None, false),
            Ok(Failure::OutOfMemory)
        );
    }

    /// Before Redis 7.0 a script's error reply does not keep the code of the command that
    /// failed in it: the same `OOM` of a script's first write reaches the client wrapped in an
    /// `ERR` (the reply below, as Redis 5 and 6 send it). It is memory all the same.
    #[test]
    fn out_of_memory_inside_a_script_before_redis_7_is_its_own_failure() {
        let reply = b"-ERR Error running script (call to f_8f55ae4a3be429c6d38c5d5db3e80edf89197b64): \
            @user_script:41: @user_script: 41: -OOM command not allowed when used memory > 'maxmemory'.\r\n";
        let error = redis::parse_redis_value(reply)
            .and_then(Value::extract_error)
            .expect_err("an error reply");
        assert_eq!(error.code(), Some("ERR"));
        assert_eq!(
            classify(&error, "k".to_owned(), None, false),
            Ok(Failure::OutOfMemory)
        );
        // Another script error stays a server error.
        let reply = b"-ERR Error running script (call to f_8f): @user_script:3: -BUSYKEY Target key name already exists.\r\n";
        let error = redis::parse_redis_value(reply)
            .and_then(Value::extract_error)
            .expect_err("an error reply");
        assert_eq!(
            classify(&error, "k".to_owned(), None, false),
            Ok(Failure::Server(RedisFailureCause::ServerError))
        );
    }

    /// Likewise a key of another type met by a script's `GET` (Redis 5 and 6): the typed error
    /// that Redis 7 gives, not a failure for the policy to answer (which, failing open, would
    /// admit that key's every request uncounted). A `WRONGTYPE` only named in the message of
    /// another error is not one.
    #[test]
    fn a_key_of_another_type_inside_a_script_before_redis_7_is_a_typed_error() {
        let reply = b"-ERR Error running script (call to f_84c51cec304677c1c8508656a2f0d8a820275e33): \
            @user_script:29: @user_script: 29: -WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
        let error = redis::parse_redis_value(reply)
            .and_then(Value::extract_error)
            .expect_err("an error reply");
        assert_eq!(
            classify(&error, "tollgate:{k}:tb2".to_owned(), None, false),
            Err(RedisCheckError::WrongType {
                key: "tollgate:{k}:tb2".to_owned()
            })
        );
        let reply = b"-ERR Error running script (call to f_8f): @user_script:3: -BUSYKEY not -WRONGTYPEs\r\n";
        let error = redis::parse_redis_value(reply)
            .and_then(Value::extract_error)
            .expect_err("an error reply");
        assert_eq!(
            classify(&error, "k".to_owned(), None, false),
            Ok(Failure::Server(RedisFailureCause::ServerError))
        );
    }
}
