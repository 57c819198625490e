//! Decisions per second and latency through Redis: SET, a plain Lua token bucket script
//! (`PLAIN_BUCKET_SCRIPT`, below), and each tollgate script, at 1 and 50 concurrent tasks over one multiplexed connection, with
//! each one's server time per call from `INFO commandstats`. Prints a markdown table.
//!
//! `cargo bench --features redis --bench redis_speed` (needs `redis-server`, started here on a
//! free port). `TOLLGATE_BENCH_SECS` sets the measured seconds per row (default 2) and
//! `TOLLGATE_BENCH_ROUNDS` the interleaved rounds (default 3; each row keeps its best). Run without
//! `--bench` (as `cargo test --all-targets` does), it only checks that every row runs.

#[path = "../tests/redis_common/mod.rs"]
mod redis_common;
mod redis_load;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use redis::aio::ConnectionManager;
use redis::Script;
use redis_common::RedisServer;
use redis_load::{measure, Load, KEYS};
use tollgate::distributed::{FailurePolicy, RedisAlgorithm, RedisLimiter};
use tollgate::{FixedWindow, LeakyBucket, SlidingLog, SlidingWindow, TokenBucket};

/// A token bucket script as it is commonly written, the baseline of every script's row: a hash
/// of two fields per key (the tokens left, a float, and the client's time of the last update, in
/// whole seconds), read with HMGET, refilled by the seconds elapsed times the rate and capped at
/// the capacity, one token taken when at least one is there, written back with HSET, and an
/// expiry of an hour set on each admission. It answers 1 (admitted) or 0, and nothing else.
const PLAIN_BUCKET_SCRIPT: &str = r#"-- A plain token bucket
local key = KEYS[1]
local limit = tonumber(ARGV[1])        -- the bucket's capacity (e.g. 10)
local current_time = tonumber(ARGV[2]) -- the client's time, in seconds
local refill_rate = tonumber(ARGV[3])  -- tokens per second (e.g. 2)

-- The bucket: [tokens, last_updated]
local data = redis.call("HMGET", key, "tokens", "last_updated")
local tokens = tonumber(data[1])
local last_updated = tonumber(data[2])

if tokens == nil then
    tokens = limit
    last_updated = current_time
else
    -- Refill for the time since the last request
    local delta = math.max(0, current_time - last_updated)
    tokens = math.min(limit, tokens + (delta * refill_rate))
    last_updated = current_time
end

-- Take a token if there is one
if tokens >= 1 then
    tokens = tokens - 1
    redis.call("HSET", key, "tokens", tokens, "last_updated", last_updated)
    redis.call("EXPIRE", key, 3600) -- an hour to live
    return 1 -- admitted
else
    redis.call("HSET", key, "tokens", tokens, "last_updated", last_updated)
    return 0 -- refused (429)
end
"#;

#[derive(Clone)]
enum Operation {
    Set(ConnectionManager),
    PlainBucket(ConnectionManager, Arc<Script>),
    Tollgate(Arc<RedisLimiter>),
}

impl Load for Operation {
    async fn run(&self, key: usize) {
        let key = format!("10.0.{}.{}", key / 256, key % 256);
        match self {
            Operation::Set(connection) => {
                let mut connection = connection.clone();
                let _: () = redis::cmd("SET")
                    .arg(format!("set:{key}"))
                    .arg(1)
                    .query_async(&mut connection)
                    .await
                    .expect("SET");
            }
            Operation::PlainBucket(connection, script) => {
                let mut connection = connection.clone();
                let seconds = SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap()
                    .as_secs();
                let _: i64 = script
                    .key(format!("bucket:{key}"))
                    .arg(10)
                    .arg(seconds)
                    .arg(2)
                    .invoke_async(&mut connection)
                    .await
                    .expect("the plain bucket script");
            }
            Operation::Tollgate(limiter) => {
                let answer = limiter.check(&key).await.expect("a tollgate decision");
                assert_eq!(answer.decided_by, tollgate::distributed::DecidedBy::Redis);
            }
        }
    }
}

struct Row {
    name: String,
    tasks: usize,
    per_second: f64,
    p50: Duration,
    p99: Duration,
    server_usec_per_call: f64,
}

/// `usec_per_call` of `command` in `INFO commandstats`.
async fn server_usec_per_call(connection: &mut ConnectionManager, command: &str) -> f64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(connection)
        .await
        .expect("INFO");
    redis_load::command_stats(&info, command)
        .unwrap_or_else(|| panic!("no cmdstat_{command} in INFO commandstats"))
        .1
}

async fn reset_stats(connection: &mut ConnectionManager) {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(connection)
        .await
        .expect("CONFIG RESETSTAT");
}

async fn flush(connection: &mut ConnectionManager) {
    let _: () = redis::cmd("FLUSHALL")
        .query_async(connection)
        .await
        .expect("FLUSHALL");
}

async fn run(full: bool) {
    let server = RedisServer::start();
    let client = redis::Client::open(server.url()).expect("client");
    let connection = ConnectionManager::new(client.clone()).await.expect("connection");
    let mut admin = ConnectionManager::new(client).await.expect("connection");
    let version: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut admin)
        .await
        .expect("INFO");
    let version = version
        .lines()
        .find_map(|line| line.strip_prefix("redis_version:"))
        .unwrap_or("?")
        .to_owned();
    let (duration, rounds) = redis_load::settings(full);
    // The plain script's parameters everywhere: 10 at once, 2 per second.
    let quota = "2/s burst 10".parse().expect("quota");
    let window = "10/5s".parse().expect("quota");
    let algorithms: [(&str, RedisAlgorithm); 5] = [
        (
            "tollgate token bucket",
            TokenBucket::new(quota).expect("bucket").into(),
        ),
        (
            "tollgate leaky bucket",
            LeakyBucket::new(quota).expect("shaper").into(),
        ),
        (
            "tollgate fixed window",
            FixedWindow::new(window).expect("window").into(),
        ),
        (
            "tollgate sliding window",
            SlidingWindow::new(window).expect("window").into(),
        ),
        (
            "tollgate sliding log",
            SlidingLog::new(window).expect("log").into(),
        ),
    ];
    let mut operations = vec![
        ("SET".to_owned(), "set", Operation::Set(connection.clone())),
        (
            "plain Lua token bucket".to_owned(),
            "evalsha",
            Operation::PlainBucket(connection.clone(), Arc::new(Script::new(PLAIN_BUCKET_SCRIPT))),
        ),
    ];
    for (name, algorithm) in algorithms {
        let limiter = RedisLimiter::builder(server.url(), algorithm, FailurePolicy::FailOpen)
            .deadline(Duration::from_secs(5))
            .connect()
            .await
            .expect("limiter");
        operations.push((name.to_owned(), "evalsha", Operation::Tollgate(Arc::new(limiter))));
    }
    // Rounds interleave the rows, so that a burst of load elsewhere on the machine does not
    // favour one row; each row keeps its best round (most decisions per second, and separately
    // the least server time per call).
    let mut rows: Vec<Row> = Vec::new();
    for _ in 0..rounds {
        for (name, command, operation) in &operations {
            for tasks in [1, 50] {
                flush(&mut admin).await;
                // Warm up: loads the script, fills the connection's buffers.
                measure(operation, tasks, duration / 10).await;
                reset_stats(&mut admin).await;
                let measured = measure(operation, tasks, duration).await;
                let (per_second, p50, p99) = (measured.per_second, measured.p50, measured.p99);
                let server_usec_per_call = server_usec_per_call(&mut admin, command).await;
                let row = Row {
                    name: name.clone(),
                    tasks,
                    per_second,
                    p50,
                    p99,
                    server_usec_per_call,
                };
                match rows.iter_mut().find(|r| r.name == row.name && r.tasks == tasks) {
                    None => rows.push(row),
                    Some(best) => {
                        best.server_usec_per_call = best.server_usec_per_call.min(row.server_usec_per_call);
                        if row.per_second > best.per_second {
                            (best.per_second, best.p50, best.p99) = (row.per_second, row.p50, row.p99);
                        }
                    }
                }
            }
        }
    }
    println!(
        "Redis {version} on loopback, one multiplexed connection, a current-thread tokio client, \
         {KEYS} keys, {:.2} s per row, best of {rounds} interleaved rounds\n",
        duration.as_secs_f64()
    );
    println!("| operation | tasks | decisions/s | p50 µs | p99 µs | server µs/call | vs SET (same tasks) |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for row in &rows {
        let set = rows
            .iter()
            .find(|r| r.name == "SET" && r.tasks == row.tasks)
            .map_or(f64::NAN, |set| row.per_second / set.per_second);
        println!(
            "| {} | {} | {:.0} | {:.1} | {:.1} | {:.2} | {:.2}x |",
            row.name,
            row.tasks,
            row.per_second,
            row.p50.as_secs_f64() * 1e6,
            row.p99.as_secs_f64() * 1e6,
            row.server_usec_per_call,
            set
        );
    }
}

fn main() {
    let full = std::env::args().any(|arg| arg == "--bench");
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(run(full));
}
