//! `RedisLimiter::set_algorithm`, against a real redis-server: a quota changed live on one
//! instance keeps every key's state in Redis (read under the new quota from its next call), both
//! ways; instances of a fleet that change at different moments each decide the shared keys under
//! their own quota meanwhile; another algorithm is a typed error that changes nothing.

use crate::redis_common::{client_time_limiter, shared_database};
use tollgate::distributed::{DecidedBy, RedisConfigError};
use tollgate::{FixedWindow, ManualClock, SlidingLog, SlidingWindow, Timestamp, TokenBucket};

/// 8 of 10 spent, then 5 or 20, live: the bucket keeps its debt in time (1 left of 5, 4 of
/// 20), the windows and the log their 8 units (none of 5, 12 of 20), as the local limiters do.
#[tokio::test(flavor = "current_thread")]
async fn a_live_change_keeps_every_key_in_redis_both_ways() {
    let server = shared_database();
    let at = Timestamp::from_secs(1_800_000_000);
    let quota = |text: &str| text.parse().expect("valid");
    for (to, bucket_left, counted_left) in [("5/s", 1, 0), ("20/s", 4, 12)] {
        let clock = ManualClock::starting_at(at);
        let prefix = format!("live-{to}:");
        let algorithms: [(
            tollgate::distributed::RedisAlgorithm,
            tollgate::distributed::RedisAlgorithm,
            u64,
        ); 4] = [
            (
                TokenBucket::new(quota("10/s")).expect("valid").into(),
                TokenBucket::new(quota(to)).expect("valid").into(),
                bucket_left,
            ),
            (
                FixedWindow::new(quota("10/s")).expect("valid").into(),
                FixedWindow::new(quota(to)).expect("valid").into(),
                counted_left,
            ),
            (
                SlidingWindow::new(quota("10/s")).expect("valid").into(),
                SlidingWindow::new(quota(to)).expect("valid").into(),
                counted_left,
            ),
            (
                SlidingLog::new(quota("10/s")).expect("valid").into(),
                SlidingLog::new(quota(to)).expect("valid").into(),
                counted_left,
            ),
        ];
        for (before, after, left) in algorithms {
            let name = before.name();
            let limiter = client_time_limiter(&server, before, &clock, &prefix).await;
            assert!(
                limiter.check_n("client", 8).await.expect("fits").is_allowed(),
                "{name}"
            );
            limiter.set_algorithm(after).expect("the same algorithm");
            assert_eq!(limiter.changes(), 1);
            assert_eq!(limiter.algorithm(), after);
            let peek = limiter.peek_n("client", 0).await.expect("fits");
            assert_eq!(peek.decided_by, DecidedBy::Redis, "{name}");
            assert_eq!(peek.decision.remaining(), left, "{name} to {to}");
            assert_eq!(limiter.capacity(), after.capacity());
        }
    }
}

/// Two instances on one key: one changed to 4 a minute, the other still at 10. Each decides
/// the shared key under its own quota: at 6 units counted, the changed one refuses and the other
/// admits; once both have changed, both refuse.
#[tokio::test(flavor = "current_thread")]
async fn a_fleet_changing_at_different_moments_decides_under_each_instances_quota() {
    let server = shared_database();
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_800_000_000));
    let ten = FixedWindow::new("10/min".parse().expect("valid")).expect("valid");
    let four = FixedWindow::new("4/min".parse().expect("valid")).expect("valid");
    let first = client_time_limiter(&server, ten, &clock, "fleet:").await;
    let second = client_time_limiter(&server, ten, &clock, "fleet:").await;
    assert!(first.check_n("shared", 6).await.expect("fits").is_allowed());
    first.set_algorithm(four).expect("live");
    assert!(
        !first.check("shared").await.expect("fits").is_allowed(),
        "6 counted, 4 allowed"
    );
    let admitted = second.check("shared").await.expect("fits");
    assert!(admitted.is_allowed(), "the other instance still allows 10");
    assert_eq!(admitted.decision.remaining(), 3);
    second.set_algorithm(four).expect("live");
    assert!(!second.check("shared").await.expect("fits").is_allowed());
}

/// Another algorithm's keys are not this one's: a typed error, and the quota stays.
#[tokio::test(flavor = "current_thread")]
async fn another_algorithm_is_a_typed_error() {
    let server = shared_database();
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_800_000_000));
    let bucket = TokenBucket::new("10/s".parse().expect("valid")).expect("valid");
    let limiter = client_time_limiter(&server, bucket, &clock, "other:").await;
    let window = FixedWindow::new("10/s".parse().expect("valid")).expect("valid");
    let error = limiter.set_algorithm(window).expect_err("another algorithm");
    assert!(matches!(
        error,
        RedisConfigError::AlgorithmChanged {
            from: "token bucket",
            to: "fixed window counter"
        }
    ));
    assert!(
        error
            .to_string()
            .contains("build a new limiter for the fixed window counter"),
        "{error}"
    );
    let not_whole = FixedWindow::new("10/1500ns".parse().expect("valid")).expect("valid");
    let windowed = client_time_limiter(&server, window, &clock, "other:").await;
    assert!(matches!(
        windowed.set_algorithm(not_whole),
        Err(RedisConfigError::NotWholeMicros { .. })
    ));
    assert_eq!((limiter.changes(), windowed.changes()), (0, 0));
    assert_eq!(limiter.algorithm(), bucket.into());
}
