//! Redis failures reported by their cause, against real servers: a wrong or missing password
//! (`redis-server --requirepass`), a closed port, a database past the server's `databases`, an
//! ACL user without `EVALSHA`, a server that never answers; and a cluster limiter given a
//! single-node Redis, a cluster with slots no master serves, or an unreachable seed. Each is the
//! cause of the decisions the failure policy makes, and a typed error of
//! `RedisLimiter::verify` (`connect_checked`) that says what to fix.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use crate::redis_common::cluster::{command, free_cluster_port};
use crate::redis_common::RedisServer;
use tollgate::distributed::{
    DecidedBy, Failure, FailurePolicy, RedisConfigError, RedisFailureCause, RedisLimiter,
};
use tollgate::TokenBucket;

fn bucket() -> TokenBucket {
    TokenBucket::new("10/s burst 10".parse().unwrap()).unwrap()
}

fn closed() -> FailurePolicy {
    FailurePolicy::FailClosed {
        retry_after: Duration::from_secs(1),
    }
}

/// A limiter on `url` with the default deadline (50 ms): the cause must show within it.
async fn limiter_on(url: &str) -> RedisLimiter {
    RedisLimiter::builder(url, bucket(), closed())
        .connect()
        .await
        .unwrap()
}

/// The first decision's failure, and how long it took.
async fn first_failure(limiter: &RedisLimiter) -> (Option<Failure>, Duration) {
    let asked = Instant::now();
    let answer = limiter.check("k").await.unwrap();
    assert_eq!(answer.decided_by, DecidedBy::FailClosed, "{answer:?}");
    (answer.failure, asked.elapsed())
}

/// A wrong password: the first decision already says so (it read as a timeout while the
/// connection manager retried connecting within the deadline), and so does `verify`, as a
/// misconfiguration (not transient) whose message says where the password goes.
#[tokio::test(flavor = "current_thread")]
async fn a_wrong_password_is_said_as_such() {
    let server = RedisServer::start_with(&["--requirepass", "secret"]);
    let url = format!("redis://:wrong@127.0.0.1:{}/", server.port());
    let limiter = limiter_on(&url).await;
    let (failure, took) = first_failure(&limiter).await;
    assert_eq!(
        failure,
        Some(Failure::Connection(RedisFailureCause::AuthenticationFailed))
    );
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert_eq!(
        limiter.last_failure(),
        Some(RedisFailureCause::AuthenticationFailed)
    );
    // The next decisions skip Redis for the probe interval, and still say why.
    let (failure, _) = first_failure(&limiter).await;
    assert_eq!(
        failure,
        Some(Failure::RecentlyDown(RedisFailureCause::AuthenticationFailed))
    );
    let error = limiter.verify().await.unwrap_err();
    assert!(
        matches!(
            &error,
            RedisConfigError::Refused { cause: RedisFailureCause::AuthenticationFailed, node }
                if *node == format!("127.0.0.1:{}", server.port())
        ),
        "{error:?}"
    );
    assert!(!error.is_transient());
    let message = error.to_string();
    assert!(
        message.contains("WRONGPASS") && message.contains("redis://user:password@"),
        "{message}"
    );
    assert!(
        !message.contains("wrong"),
        "the message shows the password: {message}"
    );
    // Once the server takes that password, the same limiter decides again by itself.
    let admin = redis::Client::open(format!("redis://:secret@127.0.0.1:{}/", server.port())).unwrap();
    let () = redis::cmd("CONFIG")
        .arg(&["SET", "requirepass", "wrong"])
        .query(&mut admin.get_connection().unwrap())
        .unwrap();
    let mut decided = None;
    for _ in 0..100 {
        let answer = limiter.check("k").await.unwrap();
        if answer.decided_by == DecidedBy::Redis {
            decided = Some(answer);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(decided.is_some(), "the limiter never decided again");
    assert_eq!(limiter.verify().await.map_err(|e| e.to_string()), Ok(()));
}

/// No password where the server requires one: `NOAUTH` on every call.
#[tokio::test(flavor = "current_thread")]
async fn a_missing_password_is_said_as_such() {
    let server = RedisServer::start_with(&["--requirepass", "secret"]);
    let limiter = limiter_on(&server.url()).await;
    let (failure, _) = first_failure(&limiter).await;
    assert_eq!(
        failure,
        Some(Failure::Server(RedisFailureCause::AuthenticationRequired))
    );
    let error = limiter.verify().await.unwrap_err();
    assert!(
        matches!(
            error,
            RedisConfigError::Refused {
                cause: RedisFailureCause::AuthenticationRequired,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(!error.is_transient());
    assert!(error.to_string().contains("NOAUTH"), "{error}");
}

/// A database index past the server's `databases` (4 here): refused at the connection's
/// `SELECT`, at the first decision, and by `verify`.
#[tokio::test(flavor = "current_thread")]
async fn a_database_past_the_servers_is_said_as_such() {
    let server = RedisServer::start_with(&["--databases", "4"]);
    let limiter = limiter_on(&format!("redis://127.0.0.1:{}/7", server.port())).await;
    let (failure, took) = first_failure(&limiter).await;
    assert_eq!(
        failure,
        Some(Failure::Connection(RedisFailureCause::NoSuchDatabase))
    );
    assert!(took < Duration::from_secs(1), "{took:?}");
    let error = limiter.verify().await.unwrap_err();
    assert!(
        matches!(
            error,
            RedisConfigError::Refused {
                cause: RedisFailureCause::NoSuchDatabase,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(!error.is_transient());
    assert!(error.to_string().contains("`databases`"), "{error}");
    // Database 3 exists.
    let existing = limiter_on(&format!("redis://127.0.0.1:{}/3", server.port())).await;
    assert_eq!(existing.verify().await.map_err(|e| e.to_string()), Ok(()));
}

/// A closed port: refused, at once, and transient (Redis may be starting).
#[tokio::test(flavor = "current_thread")]
async fn a_closed_port_is_said_as_such() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let limiter = limiter_on(&format!("redis://127.0.0.1:{port}/")).await;
    let (failure, took) = first_failure(&limiter).await;
    assert_eq!(
        failure,
        Some(Failure::Connection(RedisFailureCause::ConnectionRefused))
    );
    assert!(took < Duration::from_secs(1), "{took:?}");
    let error = limiter.verify().await.unwrap_err();
    assert!(
        matches!(
            error,
            RedisConfigError::Unreachable {
                cause: RedisFailureCause::ConnectionRefused,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.is_transient());
    assert!(error.to_string().contains("connection refused"), "{error}");
}

/// A server that accepts connections and never answers: a timeout, transient.
#[tokio::test(flavor = "current_thread")]
async fn a_server_that_never_answers_is_a_timeout() {
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let limiter = limiter_on(&format!(
        "redis://127.0.0.1:{}/",
        silent.local_addr().unwrap().port()
    ))
    .await;
    let (failure, _) = first_failure(&limiter).await;
    assert_eq!(failure, Some(Failure::Timeout));
    let error = limiter.verify().await.unwrap_err();
    assert!(
        matches!(
            error,
            RedisConfigError::Unreachable {
                cause: RedisFailureCause::Timeout,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.is_transient());
    drop(silent);
}

/// An ACL user who may not run `EVALSHA` and `EVAL`: `NOPERM`, a misconfiguration.
#[tokio::test(flavor = "current_thread")]
async fn a_user_without_the_scripting_commands_is_said_as_such() {
    let server = RedisServer::start();
    let () = command(
        server.port(),
        &[
            "ACL", "SETUSER", "app", "on", ">pw", "~*", "+@all", "-evalsha", "-eval",
        ],
    );
    let limiter = limiter_on(&format!("redis://app:pw@127.0.0.1:{}/", server.port())).await;
    assert_eq!(limiter.last_failure(), None);
    let (failure, _) = first_failure(&limiter).await;
    assert_eq!(failure, Some(Failure::Server(RedisFailureCause::NoPermission)));
    // An error reply pauses nothing (Redis answered), and is the limiter's last failure.
    assert_eq!(limiter.last_failure(), Some(RedisFailureCause::NoPermission));
    let error = limiter.verify().await.unwrap_err();
    assert!(
        matches!(
            error,
            RedisConfigError::Refused {
                cause: RedisFailureCause::NoPermission,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(!error.is_transient());
}

/// A configuration that works verifies, through `connect_checked` too.
#[tokio::test(flavor = "current_thread")]
async fn a_working_configuration_verifies() {
    let server = RedisServer::start_with(&["--requirepass", "secret"]);
    let url = format!("redis://:secret@127.0.0.1:{}/1", server.port());
    let limiter = RedisLimiter::builder(url, bucket(), closed())
        .connect_checked()
        .await
        .unwrap();
    assert_eq!(limiter.check("k").await.unwrap().decided_by, DecidedBy::Redis);
}

mod cluster {
    use super::*;

    async fn cluster_limiter(seeds: &[String]) -> RedisLimiter {
        RedisLimiter::cluster_builder(seeds.to_vec(), bucket(), closed())
            .connect()
            .await
            .unwrap()
    }

    /// Seeds naming a Redis without cluster support: refused when the limiter is built (the
    /// client would send every call to any of its seed nodes), saying what to use instead; and by
    /// `verify`, for a limiter built while that node was down.
    #[tokio::test(flavor = "current_thread")]
    async fn a_seed_that_is_not_a_cluster_node_is_said_as_such() {
        let mut single = RedisServer::start();
        let error = RedisLimiter::cluster_builder([single.url()], bucket(), closed())
            .connect()
            .await
            .unwrap_err();
        let node = format!("127.0.0.1:{}", single.port());
        assert!(
            matches!(&error, RedisConfigError::NotACluster { node: named } if *named == node),
            "{error:?}"
        );
        assert!(!error.is_transient());
        assert!(error.to_string().contains("RedisLimiter::builder"), "{error}");
        single.kill();
        let limiter = cluster_limiter(&[single.url()]).await;
        single.restart();
        let error = limiter.verify().await.unwrap_err();
        assert!(
            matches!(&error, RedisConfigError::NotACluster { node: named } if *named == node),
            "{error:?}"
        );
    }

    /// A cluster node that serves half of the slots and knows no other node: `cluster_state:fail`.
    #[tokio::test(flavor = "current_thread")]
    async fn a_cluster_with_slots_no_master_serves_is_said_to_be_down() {
        let node = RedisServer::start_cluster_node(&["--cluster-enabled", "yes"]);
        let () = command(node.port(), &["CLUSTER", "ADDSLOTSRANGE", "0", "8191"]);
        let limiter = cluster_limiter(&[node.url()]).await;
        let error = limiter.verify().await.unwrap_err();
        assert!(matches!(error, RedisConfigError::ClusterDown { .. }), "{error:?}");
        assert!(error.is_transient());
        assert!(error.to_string().contains("cluster_state:fail"), "{error}");
    }

    /// A seed where nothing listens, beside one that works: `verify` names the one that does
    /// not answer.
    #[tokio::test(flavor = "current_thread")]
    async fn an_unreachable_seed_is_named() {
        let node = RedisServer::start_cluster_node(&["--cluster-enabled", "yes"]);
        let () = command(node.port(), &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
        // Wait for the one-node cluster to say it is up.
        for _ in 0..100 {
            let info: String = command(node.port(), &["CLUSTER", "INFO"]);
            if info.contains("cluster_state:ok") {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let nowhere = free_cluster_port();
        let seeds = [node.url(), format!("redis://127.0.0.1:{nowhere}/")];
        let limiter = cluster_limiter(&seeds).await;
        let error = limiter.verify().await.unwrap_err();
        assert!(
            matches!(&error, RedisConfigError::Unreachable { cause: RedisFailureCause::ConnectionRefused, node }
                if *node == format!("127.0.0.1:{nowhere}")),
            "{error:?}"
        );
        assert!(error.is_transient());
        // One seed node that answers is enough for decisions.
        let limiter = cluster_limiter(&seeds[..1]).await;
        assert_eq!(limiter.verify().await.map_err(|e| e.to_string()), Ok(()));
        assert_eq!(limiter.check("k").await.unwrap().decided_by, DecidedBy::Redis);
    }

    /// Seeds are checked when the limiter is built: at least one, each a `redis://` URL of
    /// database 0.
    #[tokio::test(flavor = "current_thread")]
    async fn bad_seed_lists_are_refused_at_construction() {
        let none: [&str; 0] = [];
        let error = RedisLimiter::cluster_builder(none, bucket(), closed())
            .connect()
            .await
            .unwrap_err();
        assert!(matches!(error, RedisConfigError::NoSeeds), "{error:?}");
        let error = RedisLimiter::cluster_builder(["redis://127.0.0.1:7000/2"], bucket(), closed())
            .connect()
            .await
            .unwrap_err();
        assert!(
            matches!(&error, RedisConfigError::InvalidUrl { reason } if reason.contains("database 2")),
            "{error:?}"
        );
        let error = RedisLimiter::cluster_builder(["redis+unix:///tmp/redis.sock"], bucket(), closed())
            .connect()
            .await
            .unwrap_err();
        assert!(matches!(error, RedisConfigError::InvalidUrl { .. }), "{error:?}");
    }
}
