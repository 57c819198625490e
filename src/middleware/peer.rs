//! The connection's peer address, carried in each request's extensions.

use std::net::SocketAddr;
use std::task::{Context, Poll};

use http::Request;
use tower::{Layer, Service};

/// The address of the connection a request came in on, as a request extension.
///
/// The server inserts it where it accepts connections, for [`PeerIp`](super::PeerIp) and
/// [`ClientIp`](super::ClientIp) to read: wrap each connection's service in
/// [`PeerAddrLayer`] (or insert `PeerAddr(remote)` yourself). A plain `SocketAddr`
/// extension is read too.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PeerAddr(pub SocketAddr);

/// A layer inserting one connection's [`PeerAddr`] into every request on that connection.
///
/// ```
/// use std::net::SocketAddr;
/// use tollgate::middleware::PeerAddrLayer;
/// use tower::Layer;
///
/// # fn serve<S>(service: S, remote: SocketAddr) {
/// // In the accept loop, once per connection:
/// let service = PeerAddrLayer::new(remote).layer(service);
/// # let _ = service;
/// # }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct PeerAddrLayer {
    peer: SocketAddr,
}

impl PeerAddrLayer {
    /// A layer for the connection from `peer`.
    pub fn new(peer: SocketAddr) -> PeerAddrLayer {
        PeerAddrLayer { peer }
    }
}

impl<S> Layer<S> for PeerAddrLayer {
    type Service = AddPeerAddr<S>;

    fn layer(&self, inner: S) -> AddPeerAddr<S> {
        AddPeerAddr {
            inner,
            peer: self.peer,
        }
    }
}

/// The service [`PeerAddrLayer`] makes: inserts [`PeerAddr`] and calls `inner`.
#[derive(Clone, Copy, Debug)]
pub struct AddPeerAddr<S> {
    inner: S,
    peer: SocketAddr,
}

impl<S, B> Service<Request<B>> for AddPeerAddr<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> S::Future {
        request.extensions_mut().insert(PeerAddr(self.peer));
        self.inner.call(request)
    }
}
