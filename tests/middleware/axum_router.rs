//! The layer composes with axum: a `Router` layer, the peer address from axum's `ConnectInfo`.

use std::net::{IpAddr, SocketAddr};

use crate::middleware_common::{get, http1_client};
use axum::extract::ConnectInfo;
use axum::routing::get as route_get;
use axum::Router;
use http::request::Parts;
use http::StatusCode;
use tokio::net::TcpListener;
use tollgate::middleware::{KeyError, KeyFn, RateLimitLayer};
use tollgate::{KeyedLimiter, ManualClock, Timestamp, TokenBucket};

type Error = Box<dyn std::error::Error>;

/// The client IP as axum serves it (`into_make_service_with_connect_info`).
fn axum_peer_ip(request: &Parts) -> Result<IpAddr, KeyError> {
    request
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(peer)| peer.ip())
        .ok_or(KeyError::MissingPeerAddr)
}

#[tokio::test]
async fn the_layer_limits_an_axum_router() -> Result<(), Error> {
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_800_000_000));
    let limiter = KeyedLimiter::<IpAddr, _, _>::with_clock(TokenBucket::new("2/min".parse()?)?, 100, clock)?;
    let app = Router::new()
        .route("/", route_get(|| async { "hello from axum" }))
        .layer(
            RateLimitLayer::builder(limiter, KeyFn::new(axum_peer_ip))
                .fields_on_admitted(true)
                .build(),
        );
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move {
        axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await
    });

    let client = http1_client();
    let first = get(&client, address, "/", &[]).await;
    assert_eq!(
        (first.status, first.body.as_str()),
        (StatusCode::OK, "hello from axum")
    );
    assert_eq!(first.header("ratelimit"), r#""default";r=1;t=30"#);
    assert_eq!(get(&client, address, "/", &[]).await.status, StatusCode::OK);
    let refused = get(&client, address, "/", &[]).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.header("retry-after"), "30");
    Ok(())
}
