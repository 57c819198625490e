//! Resets through Redis: one script per algorithm that deletes a key and answers whether it was
//! still being limited, by the rule of the algorithm's decision script (`reset.lua`).

use std::sync::LazyLock;

use redis::Value;

use super::algorithm::{
    Reader, RedisAlgorithm, FIXED_WINDOW_SCRIPT, GCRA_SCRIPT, PACKED_LOG_LIMIT, SLIDING_LOG_LIST_SCRIPT,
    SLIDING_LOG_SCRIPT, SLIDING_WINDOW_SCRIPT,
};
use super::reply;
use super::script::LuaScript;

/// The wrapper: the decision script's source goes in place of its marker line.
const RESET_SCRIPT: &str = include_str!("reset.lua");

/// The line of [`RESET_SCRIPT`] the decision script replaces.
const MARKER: &str = "--[[decision script]]";

static GCRA_RESET: LazyLock<LuaScript> = LazyLock::new(|| wrapped(GCRA_SCRIPT));
static FIXED_WINDOW_RESET: LazyLock<LuaScript> = LazyLock::new(|| wrapped(FIXED_WINDOW_SCRIPT));
static SLIDING_WINDOW_RESET: LazyLock<LuaScript> = LazyLock::new(|| wrapped(SLIDING_WINDOW_SCRIPT));
static SLIDING_LOG_RESET: LazyLock<LuaScript> = LazyLock::new(|| wrapped(SLIDING_LOG_SCRIPT));
static SLIDING_LOG_LIST_RESET: LazyLock<LuaScript> = LazyLock::new(|| wrapped(SLIDING_LOG_LIST_SCRIPT));

/// `reset.lua` around `decision`, the body of its `decide` function.
fn wrapped(decision: &str) -> LuaScript {
    LuaScript::new(RESET_SCRIPT.replacen(MARKER, decision, 1))
}

/// The reset script of `algorithm` (each is built, and its SHA-1 computed, once per process).
pub(super) fn script(algorithm: &RedisAlgorithm) -> &'static LuaScript {
    match algorithm {
        RedisAlgorithm::TokenBucket(_) | RedisAlgorithm::LeakyBucket(_) => &GCRA_RESET,
        RedisAlgorithm::FixedWindow(_) => &FIXED_WINDOW_RESET,
        RedisAlgorithm::SlidingWindow(_) => &SLIDING_WINDOW_RESET,
        RedisAlgorithm::SlidingLog(log) if log.limit() <= PACKED_LOG_LIMIT => &SLIDING_LOG_RESET,
        RedisAlgorithm::SlidingLog(_) => &SLIDING_LOG_LIST_RESET,
    }
}

/// Whether the key was still being limited, from the reset script's reply: the decision
/// script's peek said so ([`reply::idle`]), or, when it refused the key's content, whether
/// there was anything to delete. `None` for a reply of another shape (never expected).
pub(super) fn still_limited(reader: &Reader, reply: &Value) -> Option<bool> {
    let Value::Array(parts) = reply else {
        return None;
    };
    match parts.as_slice() {
        [Value::Int(deleted)] => Some(*deleted > 0),
        [Value::Int(_), peek] => reply::idle(reader, peek).map(|idle| !idle),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_decision_script_is_wrapped_once() {
        for source in [
            GCRA_SCRIPT,
            FIXED_WINDOW_SCRIPT,
            SLIDING_WINDOW_SCRIPT,
            SLIDING_LOG_SCRIPT,
            SLIDING_LOG_LIST_SCRIPT,
        ] {
            assert!(!source.contains(MARKER));
        }
        assert_eq!(RESET_SCRIPT.matches(MARKER).count(), 1);
    }
}
