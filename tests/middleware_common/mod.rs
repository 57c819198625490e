//! A real server on 127.0.0.1 and a real HTTP client, shared by the middleware tests.

#![allow(dead_code, unreachable_pub)]

use std::convert::Infallible;
use std::future::{ready, Ready};
use std::net::SocketAddr;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::time::Instant;
use tollgate::middleware::PeerAddrLayer;
use tower::{Layer, Service};

/// When a request entered the server (an extension set by [`Stamp`]).
#[derive(Clone, Copy, Debug)]
pub struct Entered(pub Instant);

/// The inner application: answers `hello`, and says in `x-waited-ns` how long the request took
/// from entering the server ([`Stamp`]) to reaching it (the shaping delay, under paused time).
#[derive(Clone, Debug, Default)]
pub struct Hello;

impl<B> Service<Request<B>> for Hello {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let mut response = Response::new(Full::new(Bytes::from_static(b"hello\n")));
        if let Some(Entered(at)) = request.extensions().get::<Entered>() {
            let waited = at.elapsed().as_nanos().to_string();
            response
                .headers_mut()
                .insert("x-waited-ns", waited.parse().expect("digits"));
        }
        if request
            .headers()
            .get("content-type")
            .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
        {
            response
                .headers_mut()
                .insert("content-type", "application/grpc".parse().expect("valid"));
            response
                .headers_mut()
                .insert("grpc-status", "0".parse().expect("valid"));
        }
        ready(Ok(response))
    }
}

/// Stamps each request with the time it entered the server, then calls the inner service.
#[derive(Clone, Debug)]
pub struct Stamp<S>(pub S);

impl<S: Service<Request<B>>, B> Service<Request<B>> for Stamp<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> S::Future {
        request.extensions_mut().insert(Entered(Instant::now()));
        self.0.call(request)
    }
}

/// Serves `service` on 127.0.0.1 (a free port), HTTP/1.1 and HTTP/2 (prior knowledge), each
/// connection's requests carrying its peer address when `with_peer` is set.
pub async fn serve<S, B>(service: S, with_peer: bool) -> SocketAddr
where
    S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + Sync + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port on loopback");
    let address = listener.local_addr().expect("a bound address");
    tokio::spawn(async move {
        loop {
            let Ok((stream, peer)) = listener.accept().await else {
                continue;
            };
            let service = service.clone();
            tokio::spawn(async move {
                let io = TokioIo::new(stream);
                let builder = auto::Builder::new(TokioExecutor::new());
                // A connection that ends with an error (a client leaving) is the test's business.
                let _ = if with_peer {
                    let service = TowerToHyperService::new(PeerAddrLayer::new(peer).layer(service));
                    builder.serve_connection(io, service).await
                } else {
                    builder
                        .serve_connection(io, TowerToHyperService::new(service))
                        .await
                };
            });
        }
    });
    address
}

/// A plain HTTP/1.1 client.
pub fn http1_client() -> Client<HttpConnector, Empty<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

/// An HTTP/2 client (prior knowledge, no TLS), as gRPC clients are.
pub fn http2_client() -> Client<HttpConnector, Empty<Bytes>> {
    Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http()
}

/// A response, read to the end.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Answer {
    /// A header as text, its lines joined by ", " as for a list ("" when absent).
    pub fn header(&self, name: &str) -> String {
        let lines: Vec<_> = self
            .headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().expect("visible ASCII"))
            .collect();
        lines.join(", ")
    }
}

/// Sends `GET path` with `headers` to `address` and reads the whole answer.
pub async fn get(
    client: &Client<HttpConnector, Empty<Bytes>>,
    address: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> Answer {
    with_method(http::Method::GET, client, address, path, headers).await
}

/// As [`get`], with `POST` (the method of every gRPC call).
pub async fn post(
    client: &Client<HttpConnector, Empty<Bytes>>,
    address: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> Answer {
    with_method(http::Method::POST, client, address, path, headers).await
}

/// Sends `method path` with `headers` to `address` and reads the whole answer.
async fn with_method(
    method: http::Method,
    client: &Client<HttpConnector, Empty<Bytes>>,
    address: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> Answer {
    let mut request = Request::builder()
        .method(method)
        .uri(format!("http://{address}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    send(client, request.body(Empty::new()).expect("a valid request")).await
}

/// Sends `request` and reads the whole answer.
pub async fn send(client: &Client<HttpConnector, Empty<Bytes>>, request: Request<Empty<Bytes>>) -> Answer {
    let response = client.request(request).await.expect("the server answers");
    let (head, body) = response.into_parts();
    let body = body.collect().await.expect("a whole body").to_bytes();
    Answer {
        status: head.status,
        headers: head.headers,
        body: String::from_utf8(body.to_vec()).expect("a UTF-8 body"),
    }
}

/// The key every middleware test limits by: the `x-api-key` header.
pub fn api_key() -> tollgate::middleware::HeaderKey {
    tollgate::middleware::HeaderKey::new(http::HeaderName::from_static("x-api-key"))
}

/// The tests' clock: a whole minute (1,800,000,000 s since the epoch), so that windows start now.
pub fn clock() -> tollgate::ManualClock {
    tollgate::ManualClock::starting_at(tollgate::Timestamp::from_secs(1_800_000_000))
}
