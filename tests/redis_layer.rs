//! Two gateways sharing one quota: the tower layer over the Redis limiter, each layer with its
//! own connection, answering over real TCP with a real HTTP client against a real redis-server.
#![cfg(all(feature = "redis", feature = "tower"))]

mod middleware_common;
mod redis_common;

use std::time::Duration;

use http::{HeaderName, StatusCode};
use middleware_common::{get, http1_client, serve, Hello};
use redis_common::RedisServer;
use tollgate::distributed::{FailurePolicy, RedisLimiter};
use tollgate::middleware::{HeaderKey, RateLimitLayer};
use tollgate::{ManualClock, Timestamp, TokenBucket};
use tower::Layer;

type Error = Box<dyn std::error::Error>;

#[tokio::test]
async fn two_gateways_on_one_redis_share_one_quota() -> Result<(), Error> {
    let server = RedisServer::start();
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
