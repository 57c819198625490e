//! A `PolicySet` behind the layer, over real TCP: `RateLimit-Policy` lists every policy by its
//! name, `RateLimit` reports the one nearest to refusal (or the one that refused), and a refusal
//! by a later policy gives the earlier ones their units back.

use std::sync::Arc;
use std::time::Duration;

use crate::middleware_common::{api_key, clock, get, http1_client, serve, Hello};
use http::StatusCode;
use tollgate::middleware::RateLimitLayer;
use tollgate::{DirectLimiter, FixedWindow, KeyedLimiter, PolicySet, TokenBucket};
use tower::Layer;

type Error = Box<dyn std::error::Error>;

#[tokio::test]
async fn every_policy_is_announced_and_the_nearest_to_refusal_reported() -> Result<(), Error> {
    let clock = clock();
    let burst = Arc::new(KeyedLimiter::<String, _, _>::with_clock(
        TokenBucket::new("3/min".parse()?)?,
        1_000,
        clock.clone(),
    )?);
    let hourly =
        KeyedLimiter::<String, _, _>::with_clock(FixedWindow::new("5/h".parse()?)?, 1_000, clock.clone())?;
    let global = DirectLimiter::with_clock(TokenBucket::new("100/min".parse()?)?, clock.clone());
    let set = PolicySet::new("burst", Arc::clone(&burst))?
        .and("hourly", hourly)?
        .and("global", global)?;
    let layer = RateLimitLayer::builder(set, api_key())
        .fields_on_admitted(true)
        .build();
    let address = serve(layer.layer(Hello), true).await;
    let client = http1_client();
    let alice = [("x-api-key", "alice")];
    let policies = r#""burst";q=3;w=60, "hourly";q=5;w=3600, "global";q=100;w=60"#;

    // The burst is nearest to refusal: 2 left of 3, against 4 of 5 and 99 of 100.
    for remaining in [2, 1, 0] {
        let answer = get(&client, address, "/", &alice).await;
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(answer.header("ratelimit-policy"), policies);
        assert_eq!(
            answer.header("ratelimit"),
            format!(r#""burst";r={remaining};t=20"#)
        );
    }
    let refused = get(&client, address, "/", &alice).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.header("ratelimit-policy"), policies);
    assert_eq!(refused.header("ratelimit"), r#""burst";r=0;t=20"#);
    assert_eq!(refused.header("retry-after"), "20");

    // A minute on, the burst is full again and the hour has 2 left: the hour is nearest.
    clock.advance(Duration::from_secs(60));
    let answer = get(&client, address, "/", &alice).await;
    assert_eq!(answer.header("ratelimit"), r#""hourly";r=1;t=3540"#);
    let answer = get(&client, address, "/", &alice).await;
    assert_eq!(answer.header("ratelimit"), r#""hourly";r=0;t=3540"#);
    // The hour refuses: the burst's unit, taken first, goes back.
    let burst_left = || burst.peek_n(&"alice".to_owned(), 0).map(|d| d.remaining());
    assert_eq!(burst_left()?, 1);
    let refused = get(&client, address, "/", &alice).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.header("ratelimit"), r#""hourly";r=0;t=3540"#);
    assert_eq!(refused.header("retry-after"), "3540");
    assert_eq!(
        burst_left()?,
        1,
        "the refused request's burst unit was given back"
    );
    // Another client has its own burst and hour, and shares the global 100.
    let bob = get(&client, address, "/", &[("x-api-key", "bob")]).await;
    assert_eq!(bob.header("ratelimit"), r#""burst";r=2;t=20"#);
    Ok(())
}
