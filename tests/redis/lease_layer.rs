//! The tower layer over leased limiters: two gateways sharing one quota, each with its own
//! connection, answering over real TCP; requests the lease holds are decided on the layer's
//! synchronous path (`RateLimiter::decide_now`), the others through Redis.

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, StatusCode};
use tollgate::distributed::{FailurePolicy, LeasedLimiter, RedisLimiter};
use tollgate::middleware::{HeaderKey, RateLimitLayer, RateLimiter};
use tollgate::{ManualClock, Timestamp, TokenBucket};
use tower::Layer;

use crate::lease_fleet::{settle, taken_in_redis};
use crate::middleware_common::{get, http1_client, serve, Hello};
use crate::redis_common::{raw_connection, shared_database, RedisUrl};

type Error = Box<dyn std::error::Error>;

async fn leased_bucket(server: &impl RedisUrl, clock: &ManualClock) -> Result<Arc<LeasedLimiter>, Error> {
    let limiter = RedisLimiter::builder(
        server.url(),
        TokenBucket::new("20/min burst 20".parse()?)?,
        FailurePolicy::FailClosed {
            retry_after: Duration::from_secs(1),
        },
    )
    .client_time(clock.clone())
    .deadline(Duration::from_secs(5))
    .prefix("layer:")
    .leased()
    .max_lease(5)
    .connect()
    .await?;
    Ok(Arc::new(limiter))
}

/// Alice's 40 requests across two gateways at a frozen time: at most her 20 pass, Redis's TAT
/// says exactly what was admitted plus what the leases still hold, refusals carry the bucket's
/// fields, and most decisions were the leases' own, made on the layer's synchronous path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_leased_gateways_share_one_quota() -> Result<(), Error> {
    let server = shared_database();
    let start = Timestamp::from_secs(1_800_000_000);
    let clock = ManualClock::starting_at(start);
    let mut limiters = Vec::new();
    let mut gateways = Vec::new();
    for _ in 0..2 {
        let limiter = leased_bucket(&server, &clock).await?;
        limiters.push(Arc::clone(&limiter));
        let layer = RateLimitLayer::new(limiter, HeaderKey::new(HeaderName::from_static("x-api-key")));
        gateways.push(serve(layer.layer(Hello), true).await);
    }
    let client = http1_client();
    let alice = [("x-api-key", "alice")];
    let mut passed = 0;
    for request in 0..40 {
        let answer = get(&client, gateways[request % 2], "/", &alice).await;
        match answer.status {
            StatusCode::OK => passed += 1,
            StatusCode::TOO_MANY_REQUESTS => {
                assert_eq!(answer.header("ratelimit-policy"), r#""default";q=20;w=60"#);
                assert!(!answer.header("retry-after").is_empty());
            }
            other => panic!("{other}"),
        }
        if request % 4 == 3 {
            settle(&limiters).await;
        }
    }
    settle(&limiters).await;
    let held: u64 = limiters.iter().map(|l| l.units_held()).sum();
    let dropped: u64 = limiters.iter().map(|l| l.counts().units_dropped).sum();
    let local: u64 = limiters.iter().map(|l| l.counts().local_decisions).sum();
    let mut connection = raw_connection(&server).await;
    let bucket = limiters[0].algorithm();
    let taken = taken_in_redis(&mut connection, &limiters[0].redis_key("alice"), &bucket, start).await;
    assert!(passed <= 20, "{passed}");
    assert_eq!(taken, passed + held + dropped);
    assert!(local > 20, "{local} decisions of the leases");
    Ok(())
}

/// The synchronous path decides what the lease holds, and hands the rest to the asynchronous
/// one without storing an ask (the asynchronous path makes it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_synchronous_path_decides_only_what_the_lease_holds() -> Result<(), Error> {
    let server = shared_database();
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_800_000_000));
    let limiter = leased_bucket(&server, &clock).await?;
    let key = "carol".to_owned();
    assert!(RateLimiter::decide_now(&*limiter, &key, 1).is_none());
    assert_eq!(limiter.counts().round_trips, 0);
    // The asynchronous path asks (the key's first lease is its request), then grows.
    for _ in 0..3 {
        let decision = RateLimiter::decide(&*limiter, &key, 1).await?;
        assert!(decision.is_allowed());
        settle(std::slice::from_ref(&limiter)).await;
    }
    assert!(limiter.units_held() > 0);
    let (held, before) = (limiter.units_held(), limiter.counts());
    let decided = RateLimiter::decide_now(&*limiter, &key, 1).expect("the lease decides")?;
    assert!(decided.is_allowed());
    // One unit spent, and what a refresh the spend started added (at a frozen time nothing
    // passes unused).
    settle(std::slice::from_ref(&limiter)).await;
    let after = limiter.counts();
    let leased = after.units_leased - before.units_leased - (after.units_dropped - before.units_dropped);
    assert_eq!(limiter.units_held(), held - 1 + leased);
    assert_eq!(after.local_decisions, before.local_decisions + 1);
    // Heavier than the capacity: the layer's error, on the synchronous path.
    assert!(RateLimiter::decide_now(&*limiter, &key, 21)
        .expect("decided")
        .is_err());
    Ok(())
}

/// The layer announces the quota the leases are taken from: the one the limiter was built with,
/// also after a quota changed on its per-decision limiter (which announces its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_announced_policy_is_the_leases_quota() -> Result<(), Error> {
    use tollgate::middleware::AnnouncedPolicy;

    let server = shared_database();
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_800_000_000));
    let limiter = leased_bucket(&server, &clock).await?;
    let built = RateLimiter::<String>::policy(&*limiter);
    let bucket = TokenBucket::new("20/min burst 20".parse()?)?;
    assert_eq!(built, bucket.policy());
    let larger = TokenBucket::new("200/min burst 200".parse()?)?;
    limiter.per_decision().set_algorithm(larger)?;
    assert_eq!(RateLimiter::<String>::policy(&*limiter), built);
    assert_eq!(
        RateLimiter::<String>::policy(limiter.per_decision()),
        larger.policy()
    );
    Ok(())
}
