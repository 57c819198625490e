//! The decision and lease scripts called by another program than tollgate's client: a weight
//! the client never sends is refused with a `TOLLGATE_COST` error, a lease script without its
//! last argument with its typed error, and nothing written.

use crate::redis_common::{raw_connection, shared_database};
use redis::AsyncCommands;

/// A script as the limiter sends it: `prologue.lua`, then the body of the file named.
macro_rules! script {
    ($body:literal) => {
        concat!(
            include_str!("../../src/distributed/prologue.lua"),
            include_str!(concat!("../../src/distributed/", $body))
        )
    };
}

/// Each decision script refuses a weight the client never sends, called by another program:
/// below 0 (every script), or above the limit (the logs, whose client refuses it as too large),
/// with a `TOLLGATE_COST` error and nothing written. (Unchecked, such a weight is a Lua error on
/// an absent key in the packed log, a corrupt state in the list log, a negative expiry for the
/// bucket's `PSETEX`, and a packed record of 4,294,967,295 units.)
#[tokio::test(flavor = "current_thread")]
async fn a_script_refuses_a_weight_its_client_never_sends() {
    let server = shared_database();
    let mut raw = raw_connection(&server).await;
    let scripts = [
        ("gcra", script!("gcra.lua"), [-1, 1_000, 10_000]),
        ("gcra_refund", script!("gcra_refund.lua"), [-1, 1_000, 10_000]),
        ("fixed_window", script!("fixed_window.lua"), [-1, 1_000_000, 10]),
        (
            "sliding_window",
            script!("sliding_window.lua"),
            [-1, 1_000_000, 10],
        ),
        ("sliding_log", script!("sliding_log.lua"), [-1, 1_000_000, 10]),
        ("sliding_log", script!("sliding_log.lua"), [11, 1_000_000, 10]),
        (
            "sliding_log_list",
            script!("sliding_log_list.lua"),
            [-1, 1_000_000, 10],
        ),
        (
            "sliding_log_list",
            script!("sliding_log_list.lua"),
            [11, 1_000_000, 10],
        ),
    ];
    let now: i64 = 1_800_000_000_000_000;
    for (name, script, [cost, first, second]) in scripts {
        let mut packed = Vec::new();
        for value in [cost, first, second, now] {
            packed.extend_from_slice(&value.to_le_bytes());
        }
        let key = format!("raw:{{{name}}}:{cost}");
        let answer: redis::RedisResult<redis::Value> = redis::cmd("EVAL")
            .arg(script)
            .arg(1)
            .arg(&key)
            .arg(packed)
            .query_async(&mut raw)
            .await;
        let error = answer.expect_err(name);
        assert_eq!(
            error.code(),
            Some("TOLLGATE_COST"),
            "{name}, weight {cost}: {error}"
        );
        let exists: bool = raw.exists(&key).await.unwrap();
        assert!(!exists, "{name}, weight {cost}: wrote its key");
    }
}

/// A lease script called without the units asked for (its last argument), by another program
/// than tollgate's client, is refused with a `TOLLGATE_LEASE` error and nothing written; the
/// window return script without the window's end, with a `TOLLGATE_COST` error.
#[tokio::test(flavor = "current_thread")]
async fn a_lease_script_refuses_a_call_without_its_last_argument() {
    let server = shared_database();
    let mut raw = raw_connection(&server).await;
    let now: i64 = 1_800_000_000_000_000;
    // (name, source, packed arguments before the time, mode argument, the error code)
    type Call = (
        &'static str,
        &'static str,
        [i64; 3],
        Option<&'static str>,
        &'static str,
    );
    let scripts: [Call; 4] = [
        (
            "gcra_lease",
            include_str!("../../src/distributed/lease/gcra_lease.lua"),
            [1, 1_000, 10_000],
            None,
            "TOLLGATE_LEASE",
        ),
        (
            "fixed_window_lease",
            include_str!("../../src/distributed/lease/fixed_window_lease.lua"),
            [1, 1_000_000, 10],
            None,
            "TOLLGATE_LEASE",
        ),
        (
            "sliding_window",
            script!("sliding_window.lua"),
            [1, 1_000_000, 10],
            Some("lease"),
            "TOLLGATE_LEASE",
        ),
        (
            "window_return",
            include_str!("../../src/distributed/lease/window_return.lua"),
            [1, 1_000_000, 10],
            None,
            "TOLLGATE_COST",
        ),
    ];
    for (name, script, [cost, first, second], mode, code) in scripts {
        let packed: Vec<u8> = [cost, first, second, now]
            .iter()
            .flat_map(|value| value.to_le_bytes())
            .collect();
        let key = format!("raw:{{{name}}}:missing");
        let mut call = redis::cmd("EVAL");
        call.arg(script).arg(1).arg(&key).arg(packed);
        if let Some(mode) = mode {
            call.arg(mode);
        }
        let answer: redis::RedisResult<redis::Value> = call.query_async(&mut raw).await;
        let error = answer.expect_err(name);
        assert_eq!(error.code(), Some(code), "{name}: {error}");
        let exists: bool = raw.exists(&key).await.unwrap();
        assert!(!exists, "{name}: wrote its key");
    }
}
