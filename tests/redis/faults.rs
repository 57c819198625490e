//! Redis killed mid-load and restarted, down when a limiter is built, stalled, or a cluster node
//! that does not hold a key: every decision follows the configured policy (or is a typed error
//! that names the node), nothing panics, and decisions through Redis resume by themselves.

use std::sync::Arc;
use std::time::Duration;

use crate::redis_common::{raw_connection, RedisServer};
use tollgate::distributed::{
    DecidedBy, Failure, FailurePolicy, RedisCheckError, RedisDecision, RedisLimiter, RedisResetError,
};
use tollgate::{KeyedLimiter, Outcome, TokenBucket};

const DEADLINE: Duration = Duration::from_millis(250);

async fn limiter(server: &RedisServer, policy: FailurePolicy) -> RedisLimiter {
    let bucket = TokenBucket::new("1000/s burst 1000".parse().unwrap()).unwrap();
    RedisLimiter::builder(server.url(), bucket, policy)
        .deadline(DEADLINE)
        .connect()
        .await
        .unwrap()
}

/// Decides every 2 ms until `stop`, recording each answer with the phase it was made in.
async fn load(
    limiter: Arc<RedisLimiter>,
    phase: Arc<std::sync::atomic::AtomicU8>,
) -> Vec<(u8, RedisDecision)> {
    use std::sync::atomic::Ordering;
    let mut answers = Vec::new();
    // Relaxed: the phase is a label read for bookkeeping; the test orders phases by sleeps.
    while phase.load(Ordering::Relaxed) != STOP {
        let before = phase.load(Ordering::Relaxed);
        let answer = limiter.check("load").await.unwrap();
        answers.push((before, answer));
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    answers
}

const UP: u8 = 0;
const DOWN: u8 = 1;
const RESTARTED: u8 = 2;
const STOP: u8 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_and_restarted_server_is_survived_under_every_policy() {
    use std::sync::atomic::{AtomicU8, Ordering};
    let mut server = RedisServer::start();
    let fallback =
        KeyedLimiter::<str, _>::new(TokenBucket::new("100/s burst 3".parse().unwrap()).unwrap(), 16).unwrap();
    let policies = [
        FailurePolicy::FailOpen,
        FailurePolicy::FailClosed {
            retry_after: Duration::from_millis(750),
        },
        FailurePolicy::fallback(fallback),
    ];
    let phase = Arc::new(AtomicU8::new(UP));
    let mut tasks = Vec::new();
    for policy in policies {
        let limiter = Arc::new(limiter(&server, policy).await);
        tasks.push(tokio::spawn(load(limiter, Arc::clone(&phase))));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Relaxed: see `load`. Decisions begun before this store finish (in well under 50 ms)
    // before the kill, so every decision labelled UP ran against a live server.
    phase.store(DOWN, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(50)).await;
    server.kill();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let server = tokio::task::spawn_blocking(move || {
        server.restart();
        server
    })
    .await
    .unwrap();
    phase.store(RESTARTED, Ordering::Relaxed);
    // Every limiter gets back to Redis on its own (the connection manager reconnects, the
    // scripts are loaded again after NOSCRIPT); give them time, then stop.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    phase.store(STOP, Ordering::Relaxed);
    let expected = [DecidedBy::FailOpen, DecidedBy::FailClosed, DecidedBy::Fallback];
    for (task, policy) in tasks.into_iter().zip(expected) {
        let answers = task.await.unwrap();
        let by_phase = |wanted: u8| answers.iter().filter(move |(p, _)| *p == wanted).map(|(_, a)| a);
        assert!(
            by_phase(UP).count() > 10,
            "{policy:?}: too few decisions before the kill"
        );
        assert!(
            by_phase(UP).all(|a| a.decided_by == DecidedBy::Redis),
            "{policy:?}"
        );
        let down: Vec<_> = by_phase(DOWN).collect();
        assert!(!down.is_empty(), "{policy:?}: no decision while Redis was down");
        for answer in &down {
            // Right after the kill a request may still have been answered; after that, the
            // policy decides every one.
            match answer.decided_by {
                DecidedBy::Redis => assert!(answer.failure.is_none()),
                by => {
                    assert_eq!(by, policy);
                    assert!(matches!(
                        answer.failure,
                        Some(Failure::Timeout | Failure::Connection(_) | Failure::RecentlyDown(_))
                    ));
                    match by {
                        DecidedBy::FailOpen => {
                            assert_eq!(answer.decision.outcome(), Outcome::AllowedUntracked)
                        }
                        DecidedBy::FailClosed => {
                            assert_eq!(answer.decision.outcome(), Outcome::Denied);
                            assert_eq!(answer.decision.retry_after(), Duration::from_millis(750));
                        }
                        // The fallback bucket (burst 3, 100/s) admits some and refuses others.
                        _ => assert!(answer.decision.remaining() <= 3),
                    }
                }
            }
        }
        let by_policy = down.iter().filter(|a| a.decided_by == policy).count();
        assert!(
            by_policy > 0,
            "{policy:?}: the policy never decided while Redis was down"
        );
        let after: Vec<_> = by_phase(RESTARTED).collect();
        let resumed = after.iter().position(|a| a.decided_by == DecidedBy::Redis);
        let resumed = resumed.unwrap_or_else(|| panic!("{policy:?}: never went back to Redis"));
        assert!(
            after[resumed..].iter().all(|a| a.decided_by == DecidedBy::Redis),
            "{policy:?}: fell back again after resuming"
        );
        assert!(after.len() - resumed > 10, "{policy:?}: resumed too late");
        eprintln!(
            "{policy:?}: {} decisions by Redis before the kill; {} while down ({by_policy} by the policy); \
             {resumed} by the policy after the restart, then {} by Redis",
            by_phase(UP).count(),
            down.len(),
            after.len() - resumed
        );
    }
    drop(server);
}

#[tokio::test(flavor = "current_thread")]
async fn a_limiter_built_while_redis_is_down_answers_by_its_policy() {
    let mut server = RedisServer::start();
    let url = server.url();
    server.kill();
    let bucket = TokenBucket::new("10/s".parse().unwrap()).unwrap();
    let limiter = RedisLimiter::builder(url, bucket, FailurePolicy::FailOpen)
        .deadline(Duration::from_millis(50))
        .connect()
        .await
        .unwrap();
    for _ in 0..3 {
        let answer = limiter.check_n("k", 4).await.unwrap();
        assert_eq!(answer.decided_by, DecidedBy::FailOpen);
        assert_eq!(answer.decision.outcome(), Outcome::AllowedUntracked);
        assert_eq!(answer.decision.remaining(), 6);
    }
    // Too heavy to ever pass: a typed error, whatever the state of Redis.
    assert!(matches!(
        limiter.check_n("k", 11).await,
        Err(RedisCheckError::CostTooLarge(_))
    ));
}

/// A server that is up but stalled (`DEBUG SLEEP 1`): every decision is answered by the policy
/// within about the deadline, as a timeout (the connection did not fail: it was slow), and
/// Redis decides again by itself once the stall ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_server_is_a_timeout_answered_within_the_deadline() {
    let server = RedisServer::start_with(&["--enable-debug-command", "yes"]);
    let bucket = TokenBucket::new("1000/s burst 1000".parse().unwrap()).unwrap();
    let limiter = RedisLimiter::builder(server.url(), bucket, FailurePolicy::FailOpen)
        .deadline(Duration::from_millis(50))
        .probe_interval(Duration::from_millis(100))
        .connect()
        .await
        .unwrap();
    assert_eq!(limiter.check("k").await.unwrap().decided_by, DecidedBy::Redis);
    let url = server.url();
    let stall = tokio::spawn(async move {
        let mut connection = redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        // The reply may come after this connection's own response timeout: the server sleeps
        // all the same, and the assertions below see whether it did.
        let _: redis::RedisResult<()> = redis::cmd("DEBUG")
            .arg("SLEEP")
            .arg("1")
            .query_async(&mut connection)
            .await;
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = std::time::Instant::now();
    let mut slowest = Duration::ZERO;
    let mut failures = Vec::new();
    let mut last = None;
    while started.elapsed() < Duration::from_millis(2500) {
        let asked = std::time::Instant::now();
        let answer = limiter.check("k").await.unwrap();
        slowest = slowest.max(asked.elapsed());
        failures.extend(answer.failure);
        last = Some(answer);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stall.await.unwrap();
    // Far under the stall's second (the margin over the 50 ms deadline is for a loaded machine).
    assert!(
        slowest < Duration::from_millis(500),
        "slowest decision {slowest:?}"
    );
    assert!(failures.contains(&Failure::Timeout), "{failures:?}");
    assert!(
        !failures
            .iter()
            .any(|failure| matches!(failure, Failure::Connection(_))),
        "a slow server was reported as a failed connection: {failures:?}"
    );
    assert_eq!(last.map(|answer| answer.decided_by), Some(DecidedBy::Redis));
}

/// Two Redis Cluster nodes, each holding half of the slots, that know each other.
async fn two_node_cluster() -> [RedisServer; 2] {
    let nodes = [(); 2].map(|()| RedisServer::start_with(&["--cluster-enabled", "yes"]));
    for (node, (first, last)) in nodes.iter().zip([(0, 8191), (8192, 16383)]) {
        let mut raw = raw_connection(node).await;
        let _: () = redis::cmd("CLUSTER")
            .arg("ADDSLOTSRANGE")
            .arg(first)
            .arg(last)
            .query_async(&mut raw)
            .await
            .unwrap();
    }
    let mut first = raw_connection(&nodes[0]).await;
    let _: () = redis::cmd("CLUSTER")
        .arg("MEET")
        .arg("127.0.0.1")
        .arg(nodes[1].port())
        .query_async(&mut first)
        .await
        .unwrap();
    // Gossip takes a moment: wait until the first node sees every slot covered.
    for _ in 0..200 {
        let info: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query_async(&mut first)
            .await
            .unwrap();
        if info.contains("cluster_state:ok") {
            return nodes;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the two cluster nodes did not meet within 10 s");
}

/// This client talks to one node and does not follow redirects: on a Redis Cluster, a key whose
/// slot lives on another node is a typed error naming that node, never a silent decision of
/// the failure policy (fail open, here); a reset of it too.
#[tokio::test(flavor = "current_thread")]
async fn a_cluster_redirect_is_a_typed_error_not_a_policy_decision() {
    let nodes = two_node_cluster().await;
    let limiter = RedisLimiter::builder(
        nodes[0].url(),
        TokenBucket::new("10/s burst 10".parse().unwrap()).unwrap(),
        FailurePolicy::FailOpen,
    )
    .deadline(Duration::from_secs(5))
    .connect()
    .await
    .unwrap();
    let other = format!("127.0.0.1:{}", nodes[1].port());
    let (mut here, mut redirected) = (0, 0);
    for i in 0..30 {
        let key = format!("client-{i}");
        match limiter.check(&key).await {
            Ok(answer) => {
                assert_eq!(answer.decided_by, DecidedBy::Redis, "{key}: {answer:?}");
                here += 1;
            }
            Err(RedisCheckError::ClusterRedirect { key: redis_key, node }) => {
                assert_eq!((redis_key, node), (limiter.redis_key(&key), other.clone()));
                redirected += 1;
                // A reset of that key is redirected the same way, and says so.
                match limiter.reset(&key).await {
                    Err(RedisResetError::ClusterRedirect { key: redis_key, node }) => {
                        assert_eq!((redis_key, node), (limiter.redis_key(&key), other.clone()));
                    }
                    other => panic!("{key}: a reset answered {other:?}"),
                }
            }
            Err(error) => panic!("{key}: {error}"),
        }
    }
    assert!(
        here > 0 && redirected > 0,
        "{here} decided, {redirected} redirected"
    );
}
