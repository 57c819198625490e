//! What the gateway forwards to: a built-in `hello`, or a real upstream server.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{HeaderValue, HOST};
use http::uri::PathAndQuery;
use http::{Request, Response, StatusCode, Uri, Version};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tollgate::middleware::PeerAddr;
use tower::Service;

use crate::forwarding;

/// The body of an upstream answer: the built-in one, or the real upstream's.
pub(crate) type UpstreamBody = Either<Full<Bytes>, Incoming>;

#[derive(Clone, Debug)]
pub(crate) enum Upstream {
    /// Answers `hello` itself: no second hop, so a load test measures the gateway alone.
    Hello,
    /// Forwards to a server.
    Proxy(Arc<Proxy>),
}

/// A client for the upstream server, and its base URI.
#[derive(Debug)]
pub(crate) struct Proxy {
    client: Client<HttpConnector, Incoming>,
    base: Uri,
}

impl Upstream {
    pub(crate) fn proxy(base: Uri) -> Upstream {
        Upstream::Proxy(Arc::new(Proxy {
            client: Client::builder(TokioExecutor::new()).build_http(),
            base,
        }))
    }
}

type Answer = Result<Response<UpstreamBody>, Infallible>;

impl Service<Request<Incoming>> for Upstream {
    type Response = Response<UpstreamBody>;
    type Error = Infallible;
    type Future = UpstreamFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Incoming>) -> UpstreamFuture {
        match self {
            Upstream::Hello => {
                let body = Either::Left(Full::new(Bytes::from_static(b"hello\n")));
                UpstreamFuture::Ready(Some(Response::new(body)))
            }
            Upstream::Proxy(proxy) => UpstreamFuture::Proxy(Box::pin(forward(Arc::clone(proxy), request))),
        }
    }
}

async fn forward(proxy: Arc<Proxy>, request: Request<Incoming>) -> Answer {
    let (mut head, body) = request.into_parts();
    let mut target = proxy.base.clone().into_parts();
    target.path_and_query = head
        .uri
        .path_and_query()
        .cloned()
        .or(Some(PathAndQuery::from_static("/")));
    let Ok(uri) = Uri::from_parts(target) else {
        return Ok(bad_gateway("bad upstream URI"));
    };
    let asked = forwarding::asked_host(&head.headers, head.uri.authority().map(|a| a.as_str()));
    forwarding::strip_hop_by_hop(&mut head.headers);
    if let Some(authority) = uri
        .authority()
        .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
    {
        head.headers.insert(HOST, authority);
    }
    // Tell the upstream who the client was (appending: earlier entries are kept).
    if let Some(PeerAddr(peer)) = head.extensions.get::<PeerAddr>() {
        forwarding::add_forwarding(&mut head.headers, *peer, asked.as_deref());
    }
    head.uri = uri;
    // The upstream client speaks HTTP/1.1 and refuses a request marked HTTP/2 (one that came in
    // over HTTP/2): forward it as HTTP/1.1.
    head.version = Version::HTTP_11;
    match proxy.client.request(Request::from_parts(head, body)).await {
        Ok(mut response) => {
            forwarding::strip_hop_by_hop(response.headers_mut());
            Ok(response.map(Either::Right))
        }
        Err(error) => Ok(bad_gateway(&format!("upstream: {error}"))),
    }
}

fn bad_gateway(reason: &str) -> Response<UpstreamBody> {
    let mut response = Response::new(Either::Left(Full::new(Bytes::from(format!("{reason}\n")))));
    *response.status_mut() = StatusCode::BAD_GATEWAY;
    response
}

/// The built-in answer at once, or a forwarded request's.
pub(crate) enum UpstreamFuture {
    Ready(Option<Response<UpstreamBody>>),
    Proxy(Pin<Box<dyn Future<Output = Answer> + Send>>),
}

impl Future for UpstreamFuture {
    type Output = Answer;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Answer> {
        match self.get_mut() {
            UpstreamFuture::Ready(response) => match response.take() {
                Some(response) => Poll::Ready(Ok(response)),
                None => Poll::Pending, // polled after completion: never ready again
            },
            UpstreamFuture::Proxy(future) => future.as_mut().poll(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use http_body_util::{BodyExt, Empty};
    use hyper_util::rt::TokioIo;
    use hyper_util::server::conn::auto;
    use hyper_util::service::TowerToHyperService;
    use tokio::net::TcpListener;

    use super::*;

    /// Serves `upstream` on 127.0.0.1 (a free port), HTTP/1.1 and HTTP/2.
    async fn serve(upstream: Upstream) -> std::io::Result<SocketAddr> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let service = TowerToHyperService::new(upstream.clone());
                tokio::spawn(async move {
                    let builder = auto::Builder::new(TokioExecutor::new());
                    let _ = builder.serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
        Ok(address)
    }

    #[tokio::test]
    async fn an_http2_request_is_forwarded_over_http1() -> Result<(), Box<dyn std::error::Error>> {
        let upstream = serve(Upstream::Hello).await?;
        let gateway = serve(Upstream::proxy(format!("http://{upstream}").parse()?)).await?;
        let client = Client::builder(TokioExecutor::new())
            .http2_only(true)
            .build_http::<Empty<Bytes>>();
        let response = client.get(format!("http://{gateway}/").parse()?).await?;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.into_body().collect().await?.to_bytes(), "hello\n");
        Ok(())
    }
}
