//! HTTP rate limiting as a [`tower`] layer (feature `tower`): one shared keyed limiter in front
//! of any tower service over `http` types (hyper, axum and a tonic server are tested; a gRPC
//! request is recognised by its content type and refused with `RESOURCE_EXHAUSTED`).
//!
//! ```
//! use std::net::IpAddr;
//! use tollgate::middleware::{PeerIp, RateLimitLayer};
//! use tollgate::{KeyedLimiter, TokenBucket};
//!
//! // 100 requests per minute per client IP, for up to 100,000 clients at once.
//! let limiter = KeyedLimiter::<IpAddr, _>::new(TokenBucket::new("100/min".parse()?)?, 100_000)?;
//! let layer = RateLimitLayer::new(limiter, PeerIp);
//! // `ServiceBuilder::new().layer(layer.clone())`, `Router::layer(layer)`, ...: every clone of
//! // the layer and every service it makes decide with the same limiter.
//! # let _ = layer;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! - **Which limiter**: anything implementing [`RateLimiter`]: every [`KeyedLimiter`] (any
//!   algorithm, any clock), an `Arc` of one, or a limiter that decides elsewhere (asynchronously,
//!   and possibly failing: [`OnLimiterError`] says what then; a client refused for it is told
//!   nothing of why but when to retry (`Retry-After`,
//!   [`RateLimitBuilder::limiter_error_retry_after`]), and the response carries the
//!   [`LimiterError`] in its extensions, for a layer outside to log).
//! - **Which key** ([`KeyExtractor`]): the peer IP ([`PeerIp`], from a [`PeerAddr`] the server
//!   puts in each request's extensions), a header ([`HeaderKey`], an API key), the client IP
//!   behind trusted proxies ([`ClientIp`]: the right-most address in `X-Forwarded-For` or
//!   `Forwarded` that is not a trusted proxy, or the right-most entry when all are; the trusted
//!   ranges must hold only proxies), or a closure ([`KeyFn`]); either IP key can take an IPv6
//!   client by its network instead of its address ([`Ipv6Prefix`]: a client with a /64 is one
//!   client). A request without a key gets the configured [`MissingKey`] behaviour, never a
//!   panic.
//! - **Refusals**: `429 Too Many Requests` with `Retry-After` (whole seconds, rounded up) and the
//!   IETF `RateLimit-Policy` / `RateLimit` fields, optionally the legacy `X-RateLimit-*` ones
//!   (admitted responses carry them too with [`RateLimitBuilder::fields_on_admitted`]); a
//!   gRPC request (a `POST` with `content-type: application/grpc`, `application/grpc-web` or
//!   `application/grpc-web-text`, each optionally `+<subtype>`) gets HTTP 200 with
//!   `grpc-status: 8` (`RESOURCE_EXHAUSTED`), its own content type, and the same fields.
//! - **Shaping**: with the [`LeakyBucket`](crate::LeakyBucket), an admitted request waits for
//!   its slot (a tokio timer) before it is forwarded; a wait above
//!   [`RateLimitBuilder::max_delay`] is refused (and the fields of the limiter's own decisions
//!   count only the requests that maximum lets through; an admission by a stand-in, a remote
//!   store's local fallback, announces its share's own `r`); a client that leaves while
//!   waiting, or before a limiter deciding elsewhere answered (the decision then finishes on
//!   a task of its own), gives its slot back ([`RateLimiter::refund`]) if it is still the end
//!   of the key's queue, else the slot passes unused, so that forwarded requests stay one
//!   interval apart ([`Origin::Slot`]). The wait needs a tokio runtime with its timer enabled
//!   (`#[tokio::main]`, or `enable_time`/`enable_all` on a runtime builder); tokio panics on a
//!   timer without one, which no other path of the layer uses.
//! - **Per route**: [`RateLimitBuilder::only_for`] limits only the requests a [`RouteFilter`]
//!   matches; stack one layer per route for different quotas.
//!
//! The guide, with a gateway to run: `docs/gateway.md`.
//!
//! [`KeyedLimiter`]: crate::KeyedLimiter

mod announcement;
mod client_ip;
mod fields;
mod forwarded;
mod in_flight;
mod ip_range;
mod ipv6_prefix;
mod key;
mod layer;
mod limiter;
mod peer;
mod refusal;
mod route;
mod service;
mod set_limiter;
mod shaping;

pub use crate::policy::{AnnouncedPolicy, Policy};
pub use client_ip::{ClientIp, ForwardedHeader};
pub use fields::PolicyNameError;
pub use ip_range::{IpRange, IpRangeError};
pub use ipv6_prefix::Ipv6Prefix;
pub use key::{HeaderKey, KeyError, KeyExtractor, KeyFn, PeerIp};
pub use layer::{MissingKey, OnLimiterError, RateLimitBuilder, RateLimitLayer};
pub use limiter::{LimiterError, NamedPolicy, Origin, RateLimiter};
pub use peer::{AddPeerAddr, PeerAddr, PeerAddrLayer};
pub use route::RouteFilter;
pub use service::{LimitedBody, RateLimit, ResponseFuture};
