//! A layer in front of a limiter whose quota changes live: the next responses announce the new
//! quota (`RateLimit-Policy`, built again once the limiter says it changed), and each client's
//! counters carry on under it.

use std::sync::Arc;

use crate::middleware_common::{api_key, clock, get, http1_client, serve, Hello};
use http::StatusCode;
use tollgate::middleware::RateLimitLayer;
use tollgate::{FixedWindow, KeyedLimiter, Live, TokenBucket};
use tower::Layer;

type Error = Box<dyn std::error::Error>;

#[tokio::test]
async fn a_quota_changed_live_is_announced_and_counts_on() -> Result<(), Error> {
    let clock = clock();
    let limiter = Arc::new(KeyedLimiter::<String, _, _>::with_clock(
        Live::new(TokenBucket::new("3/min".parse()?)?),
        1_000,
        clock.clone(),
    )?);
    let layer = RateLimitLayer::builder(Arc::clone(&limiter), api_key())
        .policy_name("api")?
        .fields_on_admitted(true)
        .build();
    let address = serve(layer.layer(Hello), true).await;
    let client = http1_client();
    let alice = [("x-api-key", "alice")];
    let first = get(&client, address, "/", &alice).await;
    assert_eq!(first.header("ratelimit-policy"), r#""api";q=3;w=60"#);
    assert_eq!(first.header("ratelimit"), r#""api";r=2;t=20"#);

    // Doubled: a third of the bucket stays spent (20 s of debt, 2 of 6), and one more unit.
    limiter.algorithm().set_quota("6/min".parse()?)?;
    let after = get(&client, address, "/", &alice).await;
    assert_eq!(after.status, StatusCode::OK);
    assert_eq!(after.header("ratelimit-policy"), r#""api";q=6;w=60"#);
    assert_eq!(after.header("ratelimit"), r#""api";r=3;t=10"#);
    // Lowered twice (the fields follow every change) to one a minute: 30 s of debt is half
    // the bucket, and a unit needs the whole of it, in 30 s.
    limiter.algorithm().set_quota("2/min".parse()?)?;
    limiter.algorithm().set_quota("1/min".parse()?)?;
    let refused = get(&client, address, "/", &alice).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.header("ratelimit-policy"), r#""api";q=1;w=60"#);
    assert_eq!(refused.header("ratelimit"), r#""api";r=0;t=30"#);
    assert_eq!(refused.header("retry-after"), "30");
    Ok(())
}

/// A window whose limit is raised live: the count of the window in progress stays.
#[tokio::test]
async fn a_window_raised_live_keeps_the_count_in_progress() -> Result<(), Error> {
    let clock = clock();
    let limiter = Arc::new(KeyedLimiter::<String, _, _>::with_clock(
        Live::new(FixedWindow::new("2/min".parse()?)?),
        1_000,
        clock.clone(),
    )?);
    let layer = RateLimitLayer::builder(Arc::clone(&limiter), api_key()).build();
    let address = serve(layer.layer(Hello), true).await;
    let client = http1_client();
    let alice = [("x-api-key", "alice")];
    for _ in 0..2 {
        assert_eq!(get(&client, address, "/", &alice).await.status, StatusCode::OK);
    }
    let refused = get(&client, address, "/", &alice).await;
    assert_eq!(refused.header("ratelimit"), r#""default";r=0;t=60"#);
    limiter.algorithm().set_quota("3/min".parse()?)?;
    assert_eq!(get(&client, address, "/", &alice).await.status, StatusCode::OK);
    let refused = get(&client, address, "/", &alice).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.header("ratelimit-policy"), r#""default";q=3;w=60"#);
    Ok(())
}
