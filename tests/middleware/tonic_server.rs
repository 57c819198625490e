//! The layer composes with tonic: `Server::builder().layer(..)` in front of a gRPC service, a
//! real gRPC client over HTTP/2 on loopback, and a refused call is `RESOURCE_EXHAUSTED` with its
//! rate-limit metadata. No code generation: the service and the codec are written by hand.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes};
use http::uri::PathAndQuery;
use http::HeaderName;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tollgate::middleware::{HeaderKey, RateLimitLayer};
use tollgate::{KeyedLimiter, ManualClock, Timestamp, TokenBucket};
use tonic::body::Body;
use tonic::client::Grpc;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::server::NamedService;
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;
use tonic::{Code, Status};
use tower::Service;

type Error = Box<dyn std::error::Error>;

/// A message is its bytes, as they are: no protobuf.
#[derive(Clone, Copy, Debug, Default)]
struct RawCodec;

impl Codec for RawCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = RawCodec;
    type Decoder = RawCodec;

    fn encoder(&mut self) -> RawCodec {
        RawCodec
    }

    fn decoder(&mut self) -> RawCodec {
        RawCodec
    }
}

impl Encoder for RawCodec {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for RawCodec {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

/// `helloworld.Greeter`, by hand: every method is unary and answers `hello, <request>`. It
/// counts the calls that reach it.
#[derive(Clone, Debug, Default)]
struct Greeter {
    calls: Arc<AtomicUsize>,
}

impl NamedService for Greeter {
    const NAME: &'static str = "helloworld.Greeter";
}

impl Service<http::Request<Body>> for Greeter {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(RawCodec);
            Ok(grpc.unary(SayHello, request).await)
        })
    }
}

/// The unary method itself.
#[derive(Clone, Copy, Debug)]
struct SayHello;

impl Service<tonic::Request<Bytes>> for SayHello {
    type Response = tonic::Response<Bytes>;
    type Error = Status;
    type Future = std::future::Ready<Result<tonic::Response<Bytes>, Status>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: tonic::Request<Bytes>) -> Self::Future {
        let mut answer = b"hello, ".to_vec();
        answer.extend_from_slice(request.get_ref());
        std::future::ready(Ok(tonic::Response::new(answer.into())))
    }
}

/// A gRPC client: tonic's `Grpc` over hyper's HTTP/2 client (prior knowledge, no TLS).
type GrpcClient = Grpc<Client<HttpConnector, Body>>;

fn grpc_client(address: SocketAddr) -> Result<GrpcClient, Error> {
    let client = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http();
    Ok(Grpc::with_origin(client, format!("http://{address}").parse()?))
}

/// Calls `helloworld.Greeter/SayHello` with `name`, as the client with API key `k`.
async fn say_hello(client: &mut GrpcClient, name: &'static str) -> Result<tonic::Response<Bytes>, Status> {
    let mut request = tonic::Request::new(Bytes::from_static(name.as_bytes()));
    request
        .metadata_mut()
        .insert("x-api-key", "k".parse().expect("a valid value"));
    client
        .ready()
        .await
        .map_err(|error| Status::unavailable(error.to_string()))?;
    let path = PathAndQuery::from_static("/helloworld.Greeter/SayHello");
    client.unary(request, path, RawCodec).await
}

/// A metadata entry as text ("" when absent).
fn entry(metadata: &tonic::metadata::MetadataMap, name: &str) -> String {
    metadata
        .get(name)
        .map(|value| value.to_str().expect("visible ASCII").to_owned())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_tonic_server_behind_the_layer_refuses_with_resource_exhausted() -> Result<(), Error> {
    let clock = ManualClock::starting_at(Timestamp::from_secs(1_800_000_000));
    let bucket = TokenBucket::new("2/min".parse()?)?;
    let limiter = KeyedLimiter::<String, _, _>::with_clock(bucket, 100, clock.clone())?;
    let layer = RateLimitLayer::builder(limiter, HeaderKey::new(HeaderName::from_static("x-api-key")))
        .fields_on_admitted(true)
        .build();
    let greeter = Greeter::default();
    let calls = Arc::clone(&greeter.calls);
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse()?)?;
    let address = incoming.local_addr()?;
    let router = Server::builder().layer(layer).add_service(greeter);
    tokio::spawn(router.serve_with_incoming(incoming));

    let mut client = grpc_client(address)?;
    for remaining in [1, 0] {
        let response = say_hello(&mut client, "tollgate").await?;
        assert_eq!(response.get_ref().as_ref(), b"hello, tollgate");
        assert_eq!(
            entry(response.metadata(), "ratelimit"),
            // t: when more quota comes, the next token 30 s away however many are spent.
            format!(r#""default";r={remaining};t=30"#)
        );
    }
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    // The quota is spent: the layer answers itself, and the client reads a gRPC status.
    let refused = say_hello(&mut client, "tollgate")
        .await
        .expect_err("the third call within the minute is refused");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert_eq!(refused.message(), "too many requests: retry after 30 s");
    assert_eq!(entry(refused.metadata(), "retry-after"), "30");
    assert_eq!(
        entry(refused.metadata(), "ratelimit-policy"),
        r#""default";q=2;w=60"#
    );
    assert_eq!(entry(refused.metadata(), "ratelimit"), r#""default";r=0;t=30"#);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "a refused call never reaches the service"
    );

    // Once the bucket has refilled a token, the same connection is served again.
    clock.advance(Duration::from_secs(30));
    let response = say_hello(&mut client, "again").await?;
    assert_eq!(response.get_ref().as_ref(), b"hello, again");
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    Ok(())
}
