//! Real `redis-server` processes for the distributed limiter's tests and benchmarks, each on a
//! free loopback port with no persistence, waited for until it answers `PING`, and real Redis
//! Clusters of six of them (`cluster.rs`):
//!
//! - [`shared_database`]: a database of its own on the one server the tests of a binary share,
//!   started by the first test that asks. For the tests that leave their server as they found
//!   it: a database (`redis://127.0.0.1:PORT/N`) keeps each test's keys apart from the others'
//!   whatever their names.
//! - [`RedisServer::start`]: a server of its own, killed on drop, for a test that kills or
//!   restarts it, changes its configuration (`CONFIG SET`, ACL users, `SCRIPT FLUSH`,
//!   `FLUSHALL`), pauses or stalls it (`CLIENT PAUSE`, `DEBUG SLEEP`), reads its server-wide
//!   statistics (`INFO`) or starts it with arguments of its own (a cluster node, `maxmemory`).
//!
//! Every server is started through `sh`, which leaves behind a watchdog (a subshell polling the
//! test process once a second) and then `exec`s `redis-server`, so the server's pid is the
//! child's (a kill is a crash, as the fault tests want). The shared server lives in a static,
//! which is never dropped: when the test process has exited, its watchdog kills the server
//! (SIGKILL) and removes its directory, within about a second. A watchdog whose server is gone
//! (killed by its test) exits.
//!
//! A missing `redis-server` binary is a failure, never a skip: set `TOLLGATE_REDIS_SERVER` to
//! its path when it is not on `PATH` (`.ci/run` installs it).

#![allow(dead_code)]

pub(crate) mod cluster;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tollgate::distributed::{FailurePolicy, RedisAlgorithm, RedisLimiter, RedisLimiterBuilder};
use tollgate::ManualClock;

/// A running `redis-server`, killed (and its directory removed) on drop.
#[derive(Debug)]
pub(crate) struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    /// Arguments added to the common ones (`start_with`).
    extra: Vec<String>,
}

impl RedisServer {
    /// Starts a server on a free loopback port and waits until it answers.
    pub(crate) fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// Starts a server with `extra` arguments (`--cluster-enabled yes`, ...) after the common
    /// ones, and waits until it answers.
    pub(crate) fn start_with(extra: &[&str]) -> RedisServer {
        RedisServer::start_on(free_port, extra)
    }

    /// Starts a node of a Redis Cluster: as [`start_with`](Self::start_with), on a port whose
    /// cluster bus port (`port + 10000`) is free too.
    pub(crate) fn start_cluster_node(extra: &[&str]) -> RedisServer {
        RedisServer::start_on(cluster::free_cluster_port, extra)
    }

    fn start_on(free_port: fn() -> u16, extra: &[&str]) -> RedisServer {
        let mut last_error = String::new();
        for _ in 0..5 {
            let port = free_port();
            let dir = std::env::temp_dir().join(format!("tollgate-redis-{}-{port}", std::process::id()));
            let mut server = RedisServer {
                child: None,
                port,
                dir,
                extra: extra.iter().map(|arg| (*arg).to_owned()).collect(),
            };
            match server.launch() {
                Ok(()) => return server,
                Err(error) => last_error = error,
            }
        }
        panic!("could not start redis-server: {last_error}");
    }

    /// `redis://127.0.0.1:{port}/`.
    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The loopback port it listens on.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// Whether the process is running (not killed by the test).
    pub(crate) fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Kills the server (SIGKILL), as a crash would.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port, empty (nothing is persisted), and waits until
    /// it answers.
    pub(crate) fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.launch() {
                Ok(()) => return,
                Err(error) if Instant::now() > deadline => panic!("could not restart redis-server: {error}"),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    fn launch(&mut self) -> Result<(), String> {
        let binary = std::env::var("TOLLGATE_REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_owned());
        std::fs::create_dir_all(&self.dir).map_err(|e| format!("temp dir {:?}: {e}", self.dir))?;
        let child = Command::new("sh")
            .args(["-c", WATCHED, "sh"])
            .arg(std::process::id().to_string())
            .arg(&self.dir)
            .arg(&binary)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run sh ({e}): the Redis tests start redis-server through it"));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                self.child = None;
                // 127: `exec` found no such program.
                assert!(
                    status.code() != Some(127),
                    "cannot run {binary:?}: the Redis tests need a real redis-server \
                     (install it, or set TOLLGATE_REDIS_SERVER to its path)"
                );
                return Err(format!(
                    "redis-server exited with {status} (port {} taken?)",
                    self.port
                ));
            }
            if ping(self.port) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
        Err(format!(
            "redis-server on port {} did not answer PING within 10 s",
            self.port
        ))
    }
}

/// `sh -c WATCHED sh TEST_PID DIR PROGRAM ARGS...`: starts a watchdog subshell, then becomes
/// `PROGRAM ARGS...` (the shell's pid, `$$`, is then the server's). The watchdog polls once a
/// second until the test process or the server is gone; if the test process is, it kills the
/// server and removes `DIR`.
const WATCHED: &str = r#"
parent=$1 dir=$2
shift 2
(
    while kill -0 "$parent" 2>/dev/null && kill -0 $$ 2>/dev/null; do sleep 1; done
    if ! kill -0 "$parent" 2>/dev/null; then kill -9 $$ 2>/dev/null; rm -rf "$dir"; fi
) </dev/null >/dev/null 2>&1 &
exec "$@"
"#;

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free loopback port")
}

fn ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    // A server started with `--requirepass` answers `-NOAUTH Authentication required.`: up.
    let mut reply = [0; 7];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut reply).is_ok()
        && (&reply == b"+PONG\r\n" || &reply == b"-NOAUTH")
}

/// What a test's limiters and raw connections connect to: a [`RedisServer`] of its own, or a
/// [`SharedDatabase`].
pub(crate) trait RedisUrl {
    /// `redis://127.0.0.1:{port}/{database}`.
    fn url(&self) -> String;
}

impl RedisUrl for RedisServer {
    fn url(&self) -> String {
        RedisServer::url(self)
    }
}

/// The databases of the shared server (`--databases`): database 0 is left unused, and each test
/// that asks gets one of the others, so a binary may hold up to 255 such tests.
const SHARED_DATABASES: u32 = 256;

/// The server the tests of a binary share, and the next database to hand out.
#[derive(Debug)]
struct SharedServer {
    server: RedisServer,
    next_database: AtomicU32,
}

/// A database of its own, empty, on the server the tests of this binary share (started, on the
/// first call, with [`SHARED_DATABASES`] databases; killed by its watchdog once the binary has
/// exited). For a test that leaves the server as it found it: no kill, restart, configuration,
/// pause, server-wide statistics or flush of every database.
pub(crate) fn shared_database() -> SharedDatabase {
    static SHARED: OnceLock<SharedServer> = OnceLock::new();
    let shared = SHARED.get_or_init(|| SharedServer {
        server: RedisServer::start_with(&["--databases", &SHARED_DATABASES.to_string()]),
        next_database: AtomicU32::new(1),
    });
    // Relaxed: the counter only hands out distinct numbers; it publishes nothing else.
    let database = shared.next_database.fetch_add(1, Ordering::Relaxed);
    assert!(
        database < SHARED_DATABASES,
        "more than {} tests of this binary ask for a shared database: raise SHARED_DATABASES",
        SHARED_DATABASES - 1
    );
    SharedDatabase {
        port: shared.server.port(),
        database,
    }
}

/// One test's database on the shared server ([`shared_database`]).
#[derive(Debug)]
pub(crate) struct SharedDatabase {
    port: u16,
    database: u32,
}

impl SharedDatabase {
    /// `redis://127.0.0.1:{port}/{database}`.
    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/{}", self.port, self.database)
    }
}

impl RedisUrl for SharedDatabase {
    fn url(&self) -> String {
        SharedDatabase::url(self)
    }
}

/// Where a test's limiters keep their state: one `redis-server` (of its own, or a database of
/// the shared one), or a Redis Cluster.
pub(crate) trait Backend {
    /// A builder of a limiter on this backend.
    fn limiter(&self, algorithm: RedisAlgorithm, policy: FailurePolicy) -> RedisLimiterBuilder;
}

impl<T: RedisUrl> Backend for T {
    fn limiter(&self, algorithm: RedisAlgorithm, policy: FailurePolicy) -> RedisLimiterBuilder {
        RedisLimiter::builder(self.url(), algorithm, policy)
    }
}

impl Backend for cluster::RedisCluster {
    fn limiter(&self, algorithm: RedisAlgorithm, policy: FailurePolicy) -> RedisLimiterBuilder {
        RedisLimiter::cluster_builder(self.seeds(), algorithm, policy)
    }
}

/// A limiter on `server` (one Redis, or a cluster) deciding on the caller's `clock` (client-time
/// mode), with its keys under `prefix` and a deadline no loaded machine reaches. It fails closed,
/// so a decision that did not come from Redis is never mistaken for one that did (the tests also
/// check `decided_by`).
pub(crate) async fn client_time_limiter(
    server: &impl Backend,
    algorithm: impl Into<RedisAlgorithm>,
    clock: &ManualClock,
    prefix: &str,
) -> RedisLimiter {
    let policy = FailurePolicy::FailClosed {
        retry_after: Duration::from_secs(1),
    };
    client_time_limiter_with(server, algorithm, clock, prefix, policy).await
}

/// [`client_time_limiter`] with another failure policy.
pub(crate) async fn client_time_limiter_with(
    server: &impl Backend,
    algorithm: impl Into<RedisAlgorithm>,
    clock: &ManualClock,
    prefix: &str,
    policy: FailurePolicy,
) -> RedisLimiter {
    server
        .limiter(algorithm.into(), policy)
        .client_time(clock.clone())
        .deadline(Duration::from_secs(5))
        .prefix(prefix)
        .connect()
        .await
        .unwrap()
}

/// A plain connection to `server`, for writing keys behind the limiter's back and reading TTLs.
pub(crate) async fn raw_connection(server: &impl RedisUrl) -> redis::aio::MultiplexedConnection {
    redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}
