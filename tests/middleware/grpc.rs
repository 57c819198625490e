//! gRPC through the layer, over HTTP/2 on loopback: a refused call is `RESOURCE_EXHAUSTED`.

use crate::middleware_common::{http1_client, http2_client, send, serve, Hello};
use bytes::Bytes;
use http::{HeaderName, Method, Request, StatusCode, Version};
use http_body_util::Empty;
use tollgate::middleware::{HeaderKey, RateLimitLayer};
use tollgate::{KeyedLimiter, ManualClock, Timestamp, TokenBucket};
use tower::Layer;

type Error = Box<dyn std::error::Error>;

fn grpc_call(address: std::net::SocketAddr) -> Request<Empty<Bytes>> {
    call_with(address, "application/grpc")
}

fn call_with(address: std::net::SocketAddr, content_type: &str) -> Request<Empty<Bytes>> {
    Request::builder()
        .method(Method::POST)
        .uri(format!("http://{address}/helloworld.Greeter/SayHello"))
        .header("content-type", content_type)
        .header("te", "trailers")
        .header("x-api-key", "k")
        .body(Empty::new())
        .expect("a valid request")
}

#[tokio::test]
async fn a_refused_grpc_call_is_resource_exhausted() -> Result<(), Error> {
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_800_000_000));
    let limiter = KeyedLimiter::<String, _, _>::with_clock(TokenBucket::new("2/min".parse()?)?, 100, clock)?;
    let layer = RateLimitLayer::builder(limiter, HeaderKey::new(HeaderName::from_static("x-api-key")))
        .fields_on_admitted(true)
        .build();
    let address = serve(layer.layer(Hello), true).await;
    let client = http2_client();

    for remaining in [1, 0] {
        let answer = send(&client, grpc_call(address)).await;
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(answer.header("grpc-status"), "0", "the application answered");
        assert_eq!(
            answer.header("ratelimit"),
            // t: when more quota comes, the next token 30 s away however many are spent.
            format!(r#""default";r={remaining};t=30"#)
        );
    }
    // The quota is spent: refusals from here on, over HTTP/2 as gRPC requires.
    let response = client.request(grpc_call(address)).await?;
    assert_eq!(response.version(), Version::HTTP_2);
    assert_eq!(response.headers()["grpc-status"], "8");
    let answer = send(&client, grpc_call(address)).await;
    // gRPC status travels in HTTP 200 ("trailers-only"); 8 is RESOURCE_EXHAUSTED.
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.header("content-type"), "application/grpc");
    assert_eq!(answer.header("grpc-status"), "8");
    assert_eq!(
        answer.header("grpc-message"),
        "too many requests: retry after 30 s"
    );
    assert_eq!(answer.header("retry-after"), "30");
    assert_eq!(answer.header("ratelimit-policy"), r#""default";q=2;w=60"#);
    assert_eq!(answer.header("ratelimit"), r#""default";r=0;t=30"#);
    assert_eq!(answer.body, "");
    Ok(())
}

#[tokio::test]
async fn grpc_web_is_refused_in_grpc_web_and_look_alikes_in_plain_http() -> Result<(), Error> {
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_800_000_000));
    let limiter = KeyedLimiter::<String, _, _>::with_clock(TokenBucket::new("1/min".parse()?)?, 100, clock)?;
    let layer = RateLimitLayer::new(limiter, HeaderKey::new(HeaderName::from_static("x-api-key")));
    let address = serve(layer.layer(Hello), true).await;
    // gRPC-Web travels over HTTP/1.1 too.
    let client = http1_client();
    let spent = send(&client, call_with(address, "application/grpc-web+proto")).await;
    assert_eq!(spent.header("grpc-status"), "0", "the application answered");

    // A gRPC-Web client is refused in its own content type, which its library decodes.
    for content_type in [
        "application/grpc-web+proto",
        "application/grpc-web-text",
        "Application/gRPC-Web",
        "application/grpc+json",
    ] {
        let answer = send(&client, call_with(address, content_type)).await;
        assert_eq!(answer.status, StatusCode::OK, "{content_type}");
        assert_eq!(answer.header("content-type"), content_type);
        assert_eq!(answer.header("grpc-status"), "8", "{content_type}");
        assert_eq!(answer.header("retry-after"), "60", "{content_type}");
    }
    // Content types that only start like gRPC's are plain HTTP: a 429 with a text body.
    for content_type in [
        "application/grpcfoo",
        "application/grpc-webby",
        "application/grpc+",
    ] {
        let answer = send(&client, call_with(address, content_type)).await;
        assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS, "{content_type}");
        assert_eq!(answer.header("content-type"), "text/plain; charset=utf-8");
        assert_eq!(answer.header("grpc-status"), "", "{content_type}");
        assert_eq!(answer.body, "too many requests: retry after 60 s\n");
    }
    // So is a gRPC content type on another method than POST: a refused GET answered 200 could
    // be kept by a cache.
    for method in [Method::GET, Method::PUT] {
        let mut call = call_with(address, "application/grpc");
        *call.method_mut() = method.clone();
        let answer = send(&client, call).await;
        assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS, "{method}");
        assert_eq!(answer.header("grpc-status"), "", "{method}");
    }
    Ok(())
}

#[tokio::test]
async fn a_grpc_call_without_its_key_is_invalid_argument() -> Result<(), Error> {
    let limiter = KeyedLimiter::<String, _>::new(TokenBucket::new("1/min".parse()?)?, 100)?;
    let layer = RateLimitLayer::new(limiter, HeaderKey::new(HeaderName::from_static("x-api-key")));
    let address = serve(layer.layer(Hello), true).await;
    let mut call = grpc_call(address);
    call.headers_mut().remove("x-api-key");
    let answer = send(&http2_client(), call).await;
    // The client's fault: INVALID_ARGUMENT (3), not INTERNAL (13).
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.header("grpc-status"), "3");
    assert_eq!(
        answer.header("grpc-message"),
        "the request has no `x-api-key` header"
    );
    Ok(())
}
