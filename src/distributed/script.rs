//! A Lua script of the limiter, sent as `EVALSHA` and, when the node answers `NOSCRIPT`, as
//! `EVAL` of its source on that same node.

use std::borrow::Cow;
use std::fmt;

use redis::Cmd;

/// A script's source and its SHA-1.
///
/// Sent by [`Connection::run`](super::connection::Connection::run): `EVALSHA` first, and after a
/// `NOSCRIPT` (a restart, a `SCRIPT FLUSH`, a replica promoted after a failover, a node added to
/// a cluster) `EVAL` with the source, routed by the same key to the same node, which also caches
/// the script there for the next `EVALSHA`. redis-rs's own `ScriptInvocation` sends `SCRIPT LOAD`
/// instead, which a cluster connection sends to every node, and which fails while one of them is
/// down; and it costs one more round trip.
#[derive(Clone)]
pub(crate) struct LuaScript {
    source: Cow<'static, str>,
    hash: String,
}

impl LuaScript {
    /// The script of `source`, its SHA-1 computed once here.
    pub(crate) fn new(source: impl Into<Cow<'static, str>>) -> LuaScript {
        let source = source.into();
        let hash = redis::Script::new(&source).get_hash().to_owned();
        LuaScript { source, hash }
    }

    /// `EVALSHA hash numkeys keys... args...`, or with `source`, `EVAL source numkeys ...`.
    pub(crate) fn command(&self, source: bool, keys: &[&str], args: &[&[u8]]) -> Cmd {
        let mut command = if source {
            let mut command = redis::cmd("EVAL");
            command.arg(self.source.as_ref());
            command
        } else {
            let mut command = redis::cmd("EVALSHA");
            command.arg(&self.hash);
            command
        };
        command.arg(keys.len());
        for key in keys {
            command.arg(*key);
        }
        for arg in args {
            command.arg(*arg);
        }
        command
    }

    /// The SHA-1 `EVALSHA` names the script by.
    #[cfg(test)]
    pub(crate) fn hash(&self) -> &str {
        &self.hash
    }
}

impl fmt::Debug for LuaScript {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LuaScript")
            .field("hash", &self.hash)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::LuaScript;

    #[test]
    fn a_call_is_evalsha_or_eval_with_the_same_keys_and_arguments() {
        let script = LuaScript::new("return KEYS[1]");
        // The SHA-1 of the source, as `SCRIPT LOAD` would answer it.
        assert_eq!(script.hash(), "4a2267357833227dd98abdedb8cf24b15a986445");
        let by_hash = script.command(false, &["k", "l"], &[b"\x01\x02", b"peek"]);
        let expected =
            "*7\r\n$7\r\nEVALSHA\r\n$40\r\n4a2267357833227dd98abdedb8cf24b15a986445\r\n$1\r\n2\r\n\
                        $1\r\nk\r\n$1\r\nl\r\n$2\r\n\x01\x02\r\n$4\r\npeek\r\n";
        assert_eq!(by_hash.get_packed_command(), expected.as_bytes());
        let by_source = script.command(true, &["k"], &[]);
        let expected = "*4\r\n$4\r\nEVAL\r\n$14\r\nreturn KEYS[1]\r\n$1\r\n1\r\n$1\r\nk\r\n";
        assert_eq!(by_source.get_packed_command(), expected.as_bytes());
    }
}
