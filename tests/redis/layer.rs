//! The tower layer over the Redis limiter: two gateways sharing one quota, each layer with its
//! own connection, answering over real TCP with a real HTTP client against a real redis-server;
//! and, with Redis away, what the layer announces and refunds when the fallback decides.

use std::sync::Arc;
use std::time::Duration;

use crate::middleware_common::{get, http1_client, serve, Hello};
use crate::redis_common::{client_time_limiter, raw_connection, shared_database, RedisServer};
use http::{HeaderName, StatusCode};
use redis::AsyncCommands;
use tollgate::distributed::{DecidedBy, FailurePolicy, RedisLimiter};
use tollgate::middleware::{HeaderKey, Origin, RateLimitLayer, RateLimiter};
use tollgate::{KeyedLimiter, LeakyBucket, ManualClock, Timestamp, TokenBucket};
use tower::Layer;

type Error = Box<dyn std::error::Error>;

#[tokio::test]
async fn two_gateways_on_one_redis_share_one_quota() -> Result<(), Error> {
    let server = shared_database();
    // Both instances read the same frozen client time, so the test does not race the clock.
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_800_000_000));
    let mut gateways = Vec::new();
    for _ in 0..2 {
        let limiter = RedisLimiter::builder(
            server.url(),
            TokenBucket::new("3/min".parse()?)?,
            FailurePolicy::FailClosed {
                retry_after: Duration::from_secs(1),
            },
        )
        .client_time(clock.clone())
        .connect()
        .await?;
        let layer = RateLimitLayer::new(limiter, HeaderKey::new(HeaderName::from_static("x-api-key")));
        gateways.push(serve(layer.layer(Hello), true).await);
    }
    let client = http1_client();
    let alice = [("x-api-key", "alice")];

    // Alice spends her 3 across both gateways; the fourth is refused by either.
    for gateway in [gateways[0], gateways[1], gateways[0]] {
        assert_eq!(get(&client, gateway, "/", &alice).await.status, StatusCode::OK);
    }
    for gateway in &gateways {
        let refused = get(&client, *gateway, "/", &alice).await;
        assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.header("retry-after"), "20");
        assert_eq!(refused.header("ratelimit-policy"), r#""default";q=3;w=60"#);
        assert_eq!(refused.header("ratelimit"), r#""default";r=0;t=20"#);
    }
    // Bob's quota is his own.
    assert_eq!(
        get(&client, gateways[1], "/", &[("x-api-key", "bob")])
            .await
            .status,
        StatusCode::OK
    );
    // 20 s later one token is back, for whichever gateway asks first.
    clock.advance(Duration::from_secs(20));
    assert_eq!(
        get(&client, gateways[1], "/", &alice).await.status,
        StatusCode::OK
    );
    assert_eq!(
        get(&client, gateways[0], "/", &alice).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    Ok(())
}

fn shaper() -> LeakyBucket {
    LeakyBucket::new("10/s burst 10".parse().expect("a valid quota")).expect("a valid shaper")
}

/// The TAT (µs) a bucket's key holds in Redis.
async fn tat(raw: &mut redis::aio::MultiplexedConnection, key: &str) -> Result<i64, Error> {
    let bytes: Vec<u8> = raw.get(key).await?;
    Ok(i64::from_le_bytes(bytes.as_slice().try_into()?))
}

// The layer hands `refund` the origin `decide_with_origin` gave: a slot Redis never counted (the
// local fallback gave it while Redis was away) must not give the fleet a unit back.
#[tokio::test]
async fn a_slot_the_fallback_gave_goes_back_to_the_fallback_never_to_redis() -> Result<(), Error> {
    let mut server = RedisServer::start();
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_800_000_000));
    let share = Arc::new(KeyedLimiter::<str, _, _>::with_clock(
        shaper(),
        100,
        clock.clone(),
    )?);
    let policy = FailurePolicy::Fallback(Arc::clone(&share) as _);
    let gateway = RedisLimiter::builder(server.url(), shaper(), policy)
        .client_time(clock.clone())
        .probe_interval(Duration::from_millis(1))
        .prefix("p:")
        .connect()
        .await?;
    let fleet = client_time_limiter(&server, shaper(), &clock, "p:").await;
    let key = "k".to_owned();
    let decide = |cost| RateLimiter::<String>::decide_with_origin(&gateway, &key, cost);

    // Redis is away: the local share decides, and its second request waits for a slot.
    server.kill();
    let (at_once, _) = decide(1).await?;
    assert!(at_once.is_allowed() && at_once.delay().is_zero(), "{at_once:?}");
    let (shaped, from_fallback) = decide(1).await?;
    assert!(shaped.is_allowed() && !shaped.delay().is_zero(), "{shaped:?}");
    assert_eq!(from_fallback, Origin::Fallback);

    // Redis is back (empty), and so is the gateway's connection.
    server.restart();
    let back = async {
        while gateway.check("warm-up").await?.decided_by != DecidedBy::Redis {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok::<_, Error>(())
    };
    tokio::time::timeout(Duration::from_secs(10), back).await??;
    // The fleet spends 5 units, then the gateway 2 more, each slot 100 ms: the TAT is 700 ms
    // ahead of the clock, which stands still.
    assert!(fleet.check_n(&key, 5).await?.is_allowed());
    let (by_redis, from_redis) = decide(2).await?;
    assert!(by_redis.is_allowed(), "{by_redis:?}");
    assert_eq!(from_redis, Origin::Limiter);
    let mut raw = raw_connection(&server).await;
    let redis_key = fleet.redis_key(&key);
    let before = tat(&mut raw, &redis_key).await?;

    // Both clients leave: the fallback's refund first, then Redis's, started in that order on
    // the gateway's one connection (this runtime runs its tasks in order). Once Redis's 2 units
    // are back, anything the fallback's refund sent to Redis would be there too.
    let queued = share.peek(&key).delay();
    RateLimiter::<String>::refund(&gateway, key.clone(), 1, from_fallback);
    // The share that counted the slot gets it back, at once (a local refund).
    assert_eq!(share.peek(&key).delay(), queued - Duration::from_millis(100));
    RateLimiter::<String>::refund(&gateway, key.clone(), 2, from_redis);
    let slot = 100_000;
    let refunded = async {
        loop {
            let now = tat(&mut raw, &redis_key).await?;
            if now <= before - 2 * slot {
                return Ok::<_, Error>(now);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    let after = tokio::time::timeout(Duration::from_secs(10), refunded).await??;
    assert_eq!(before - after, 2 * slot, "Redis got back units it never counted");
    Ok(())
}

#[tokio::test]
async fn the_fallback_policy_refunds_its_own_limiter() -> Result<(), Error> {
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_800_000_000));
    let share = Arc::new(KeyedLimiter::<str, _, _>::with_clock(shaper(), 100, clock)?);
    let policy = FailurePolicy::Fallback(Arc::clone(&share) as _);
    for _ in 0..2 {
        assert!(share.check_n("k", 1)?.is_allowed());
    }
    assert_eq!(share.peek("k").delay(), Duration::from_millis(200));
    assert!(policy.refund_n("k", 1));
    assert_eq!(share.peek("k").delay(), Duration::from_millis(100));
    // Fail open counts nothing, fail closed admits nothing: nothing to give back.
    assert!(!FailurePolicy::FailOpen.refund_n("k", 1));
    let closed = FailurePolicy::FailClosed {
        retry_after: Duration::from_secs(1),
    };
    assert!(!closed.refund_n("k", 1));
    Ok(())
}

#[tokio::test]
async fn a_request_too_heavy_for_the_fallback_retries_after_a_probe_interval() -> Result<(), Error> {
    // Redis admits up to 10; this instance's share, up to 3. Nothing listens on port 1.
    let share = KeyedLimiter::<str, _>::new(TokenBucket::new("10/3s burst 3".parse()?)?, 100)?;
    let limiter = RedisLimiter::builder(
        "redis://127.0.0.1:1/",
        TokenBucket::new("10/s burst 10".parse()?)?,
        FailurePolicy::fallback(share),
    )
    .probe_interval(Duration::from_millis(250))
    .connect()
    .await?;
    let answer = limiter.check_n("k", 5).await?;
    assert_eq!(answer.decided_by, DecidedBy::Fallback);
    assert!(!answer.is_allowed());
    // Not "never" (the 584 years of u64::MAX ns): Redis, asked again after the limiter's probe
    // interval, may admit it.
    assert_eq!(answer.decision.retry_after(), Duration::from_millis(250));
    Ok(())
}

/// An admission by the local fallback carries `r` (the share's count) but no `t`: the time
/// until more quota comes follows from the fleet's policy only when Redis decided, and the
/// share refills at its own rate.
#[tokio::test]
async fn a_fallback_admission_announces_no_refill_time() -> Result<(), Error> {
    // The fleet: 100/min (a unit back every 0.6 s). This instance's share while Redis is away:
    // 10/min (one every 6 s). Nothing listens on port 1.
    let share = KeyedLimiter::<str, _>::new(TokenBucket::new("10/min".parse()?)?, 100)?;
    let limiter = RedisLimiter::builder(
        "redis://127.0.0.1:1/",
        TokenBucket::new("100/min".parse()?)?,
        FailurePolicy::fallback(share),
    )
    .deadline(Duration::from_millis(200))
    .connect()
    .await?;
    let layer = RateLimitLayer::builder(limiter, HeaderKey::new(HeaderName::from_static("x-api-key")))
        .fields_on_admitted(true)
        .build();
    let gateway = serve(layer.layer(Hello), true).await;
    let admitted = get(&http1_client(), gateway, "/", &[("x-api-key", "k")]).await;
    assert_eq!(admitted.status, StatusCode::OK);
    assert_eq!(admitted.header("ratelimit"), r#""default";r=9"#);
    Ok(())
}

/// A layer over Redis that shapes (the fleet's leaky bucket, a maximum wait of 1 s), with Redis
/// away (nothing listens on port 1): every decision is this instance's `share`'s.
async fn shaping_layer_over_a_fallback<A>(
    share: A,
    clock: &ManualClock,
) -> Result<std::net::SocketAddr, Error>
where
    A: tollgate::algorithm::Algorithm + 'static,
{
    let share = KeyedLimiter::<str, _, _>::with_clock(share, 100, clock.clone())?;
    let limiter = RedisLimiter::builder(
        "redis://127.0.0.1:1/",
        LeakyBucket::new("2/s burst 5".parse()?)?,
        FailurePolicy::fallback(share),
    )
    .deadline(Duration::from_millis(200))
    .connect()
    .await?;
    let layer = RateLimitLayer::builder(limiter, HeaderKey::new(HeaderName::from_static("x-api-key")))
        .max_delay(Duration::from_secs(1))
        .fields_on_admitted(true)
        .build();
    Ok(serve(layer.layer(Hello), true).await)
}

/// A refusal by the fallback is told the fallback's own retry-after: the later one a shaping
/// layer gives a full queue (`reset_after - max_delay`) holds only for the fleet's queue, and a
/// token-bucket share's reset-after is the time until it is full (5 s here), no queue at all.
#[tokio::test]
async fn a_fallback_refusal_retries_after_the_fallbacks_own_time() -> Result<(), Error> {
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_800_000_000));
    let gateway = shaping_layer_over_a_fallback(TokenBucket::new("1/s burst 5".parse()?)?, &clock).await?;
    let client = http1_client();
    let k = [("x-api-key", "k")];
    for _ in 0..5 {
        assert_eq!(get(&client, gateway, "/", &k).await.status, StatusCode::OK);
    }
    let refused = get(&client, gateway, "/", &k).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.header("retry-after"), "1");
    assert_eq!(refused.header("ratelimit"), r#""default";r=0;t=1"#);
    // And it does pass then.
    clock.advance(Duration::from_secs(1));
    assert_eq!(get(&client, gateway, "/", &k).await.status, StatusCode::OK);
    Ok(())
}

/// What `RateLimitBuilder::max_delay` documents of a fallback: an admission's `r` is the share's
/// own remaining (for a leaky share, the room in its queue), which the layer's maximum wait may
/// cut, since the layer cannot tell the share's algorithm from its decisions; the maximum itself
/// still holds, a wait above it refused.
#[tokio::test]
async fn a_fallback_admission_announces_the_shares_own_remaining() -> Result<(), Error> {
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_800_000_000));
    // A slot every 0.5 s, 5 in the queue: of 4 more sent at once, the 0.5 s and 1 s waits fit.
    let gateway = shaping_layer_over_a_fallback(LeakyBucket::new("2/s burst 5".parse()?)?, &clock).await?;
    let client = http1_client();
    let k = [("x-api-key", "k")];
    let first = get(&client, gateway, "/", &k).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.header("ratelimit"), r#""default";r=4"#);
    let (a, b, c, d) = tokio::join!(
        get(&client, gateway, "/", &k),
        get(&client, gateway, "/", &k),
        get(&client, gateway, "/", &k),
        get(&client, gateway, "/", &k),
    );
    let passed = [a, b, c, d]
        .iter()
        .filter(|answer| answer.status == StatusCode::OK)
        .count();
    assert_eq!(passed, 2);
    Ok(())
}

/// The script runs a bucket at its exact interval (`9999/s`: 100 µs and 1/9,999 µs, not whole
/// µs), and the layer announces the `q` of that interval rounded up to whole ns (100,011 ns), as
/// a local bucket of the same quota does: 9,999.
#[tokio::test]
async fn a_redis_bucket_announces_the_rate_its_script_runs() -> Result<(), Error> {
    let quota = "9999/s burst 1";
    // Nothing listens on port 1: every decision is the failure policy's, which is enough to
    // read the fields the layer announces.
    let limiter = RedisLimiter::builder(
        "redis://127.0.0.1:1/",
        TokenBucket::new(quota.parse()?)?,
        FailurePolicy::FailClosed {
            retry_after: Duration::from_secs(1),
        },
    )
    .deadline(Duration::from_millis(200))
    .connect()
    .await?;
    let gateway = serve(
        RateLimitLayer::new(limiter, HeaderKey::new(HeaderName::from_static("x-api-key"))).layer(Hello),
        true,
    )
    .await;
    let client = http1_client();
    let refused = get(&client, gateway, "/", &[("x-api-key", "k")]).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.header("ratelimit-policy"), r#""default";q=9999;w=1"#);

    // A local bucket of the same quota runs at 100,011 ns and announces the same 9,999.
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_800_000_000));
    let local = KeyedLimiter::<String, _, _>::with_clock(TokenBucket::new(quota.parse()?)?, 10, clock)?;
    let gateway = serve(
        RateLimitLayer::new(local, HeaderKey::new(HeaderName::from_static("x-api-key"))).layer(Hello),
        true,
    )
    .await;
    let k = [("x-api-key", "k")];
    assert_eq!(get(&client, gateway, "/", &k).await.status, StatusCode::OK);
    let refused = get(&client, gateway, "/", &k).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.header("ratelimit-policy"), r#""default";q=9999;w=1"#);
    Ok(())
}
