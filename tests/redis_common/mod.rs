//! A real `redis-server` for the distributed limiter's tests and benchmark: started on a free
//! loopback port with no persistence, waited for until it answers `PING`, killed on drop; and a
//! real Redis Cluster of six of them (`cluster.rs`).
//!
//! A missing `redis-server` binary is a failure, never a skip: set `TOLLGATE_REDIS_SERVER` to
//! its path when it is not on `PATH` (`.ci/run` installs it).

#![allow(dead_code)]

pub(crate) mod cluster;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tollgate::distributed::{FailurePolicy, RedisAlgorithm, RedisLimiter, RedisLimiterBuilder};
use tollgate::ManualClock;

/// Where a test's limiters keep their state: one `redis-server`, or a Redis Cluster.
pub(crate) trait Backend {
    /// A builder of a limiter on this backend.
    fn limiter(&self, algorithm: RedisAlgorithm, policy: FailurePolicy) -> RedisLimiterBuilder;
}

impl Backend for RedisServer {
    fn limiter(&self, algorithm: RedisAlgorithm, policy: FailurePolicy) -> RedisLimiterBuilder {
        RedisLimiter::builder(self.url(), algorithm, policy)
    }
}

impl Backend for cluster::RedisCluster {
    fn limiter(&self, algorithm: RedisAlgorithm, policy: FailurePolicy) -> RedisLimiterBuilder {
        RedisLimiter::cluster_builder(self.seeds(), algorithm, policy)
    }
}

/// A running `redis-server`, killed (and its directory removed) on drop.
#[derive(Debug)]
pub(crate) struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    /// Arguments added to the common ones (`start_with`).
    extra: Vec<String>,
    /// The `sh` that kills the server when this process exits ([`kill_at_exit`](Self::kill_at_exit)).
    watcher: Option<Child>,
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
                watcher: None,
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

    /// Kills the server and removes its directory when this test process exits, however it
    /// exits: for a server in a `static`, which is never dropped. A `sh` waits for this process
    /// to end, polling every 0.2 s.
    pub(crate) fn kill_at_exit(&mut self) {
        let Some(child) = &self.child else {
            return;
        };
        let watch = "while kill -0 \"$1\" 2>/dev/null; do sleep 0.2; done; kill -9 \"$2\"; rm -rf \"$3\"";
        let watcher = Command::new("sh")
            .args(["-c", watch, "kill-at-exit"])
            .arg(std::process::id().to_string())
            .arg(child.id().to_string())
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sh, to kill the shared servers at exit");
        self.watcher = Some(watcher);
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
        let child = Command::new(&binary)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run {binary:?} ({e}): the Redis tests need a real redis-server \
                     (install it, or set TOLLGATE_REDIS_SERVER to its path)"
                )
            });
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                self.child = None;
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

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        if let Some(mut watcher) = self.watcher.take() {
            let _ = watcher.kill();
            let _ = watcher.wait();
        }
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
pub(crate) async fn raw_connection(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}
