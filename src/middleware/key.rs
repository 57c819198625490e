//! Which client a request counts against: its key.

use std::fmt;
use std::marker::PhantomData;
use std::net::{IpAddr, SocketAddr};

use http::header::HeaderName;
use http::request::Parts;

use super::peer::PeerAddr;

/// Reads the key a request is limited by (the client it counts against).
///
/// The layer calls it with the request's head (method, URI, headers, extensions). A request
/// whose key cannot be read gets the layer's [`MissingKey`](super::MissingKey) behaviour.
pub trait KeyExtractor: Send + Sync + 'static {
    /// The key: what the limiter is keyed by.
    type Key: Send + Sync + 'static;

    /// The key of this request, or why there is none.
    ///
    /// # Errors
    /// [`KeyError`] when the request carries no usable key.
    fn extract(&self, request: &Parts) -> Result<Self::Key, KeyError>;
}

/// Why a request has no key.
///
/// Each reason is either the request's fault ([`is_client_error`](Self::is_client_error): the
/// client left out or garbled what it must send) or the server's (its configuration does not
/// provide what the extractor reads); the layer's default answer follows
/// ([`MissingKey::Reject`](super::MissingKey::Reject)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// The request carries no peer address: the server did not put one in its extensions (the
    /// server's fault).
    MissingPeerAddr,
    /// The header the key is read from is absent (the request's fault).
    MissingHeader(HeaderName),
    /// The header is present but empty, not visible ASCII, or sent more than once (the
    /// request's fault).
    InvalidHeader(HeaderName),
    /// An `X-Forwarded-For` or `Forwarded` entry in the trusted part of the chain is not an
    /// address (the request's fault: a client can garble the line its proxy appends to, with an
    /// unclosed quote, say).
    MalformedForwarded {
        /// The entry that could not be read.
        entry: String,
    },
    /// The forwarding header holds fewer entries than the proxies a
    /// [`ClientIp::hops`](super::ClientIp::hops) counts: the request did not come through every
    /// one of them (the request's fault: proxies only ever add entries, and a client must not
    /// be able to make the server answer 5xx at will by leaving them out).
    TooFewForwarded {
        /// The proxies counted, each of which appends one entry.
        hops: usize,
    },
    /// A custom extractor's reason, the request's fault: the client is told this text.
    Other(String),
    /// A custom extractor's reason, the server's fault (what it reads was never put in the
    /// request, say): the client is not told this text (only the server's own answer, a 500 by
    /// default, carries it).
    Misconfigured(String),
}

impl KeyError {
    /// Whether the request is at fault (`400 Bad Request` by default), rather than the server's
    /// configuration (`500 Internal Server Error`): a client must not be able to make the server
    /// answer 5xx at will by leaving a header out.
    pub fn is_client_error(&self) -> bool {
        match self {
            KeyError::MissingHeader(_)
            | KeyError::InvalidHeader(_)
            | KeyError::MalformedForwarded { .. }
            | KeyError::TooFewForwarded { .. }
            | KeyError::Other(_) => true,
            KeyError::MissingPeerAddr | KeyError::Misconfigured(_) => false,
        }
    }

    /// What a client may be told: what its request lacks, and nothing of the server's
    /// configuration (no fix, no trusted proxies, no echo of a forwarding entry).
    pub(crate) fn client_reason(&self) -> String {
        match self {
            KeyError::MissingHeader(name) => format!("the request has no `{name}` header"),
            KeyError::InvalidHeader(_) => self.to_string(),
            KeyError::MalformedForwarded { .. } | KeyError::TooFewForwarded { .. } => {
                "the request's forwarding header cannot be read".to_owned()
            }
            KeyError::Other(reason) => reason.clone(),
            KeyError::MissingPeerAddr | KeyError::Misconfigured(_) => {
                "the server cannot tell which client sent the request".to_owned()
            }
        }
    }
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::MissingPeerAddr => f.write_str(
                "tollgate: the request carries no peer address, so it cannot be limited by client IP. \
                 Fix: where the server accepts a connection, insert its remote address into every \
                 request's extensions: wrap the connection's service in \
                 `tollgate::middleware::PeerAddrLayer::new(remote_addr)` (hyper), or read axum's \
                 `ConnectInfo<SocketAddr>` with a `KeyFn` and serve with \
                 `into_make_service_with_connect_info::<SocketAddr>()`.",
            ),
            KeyError::MissingHeader(name) => write!(f, "the request has no `{name}` header to be limited by"),
            KeyError::InvalidHeader(name) => {
                write!(
                    f,
                    "the `{name}` header is empty, not visible ASCII, or sent more than once, so it is not a key"
                )
            }
            KeyError::MalformedForwarded { entry } => write!(
                f,
                "the forwarding header's entry {}, in the part the trusted proxies wrote (or one a \
                 client garbled, with an unclosed quote, say), is not an IP address",
                Shown(entry)
            ),
            KeyError::TooFewForwarded { hops } => write!(
                f,
                "the forwarding header holds fewer than the {hops} entries the proxies in front append: the request did not come through all of them"
            ),
            KeyError::Other(reason) | KeyError::Misconfigured(reason) => f.write_str(reason),
        }
    }
}

impl std::error::Error for KeyError {}

/// Text a client may have written, as a message may quote it: escaped (no control or bidi
/// character reaches a log line or a body) and cut after 64 characters.
struct Shown<'a>(&'a str);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 64;
        match self.0.char_indices().nth(SHOWN) {
            Some((cut, _)) => write!(f, "{:?}... ({} bytes)", &self.0[..cut], self.0.len()),
            None => write!(f, "{:?}", self.0),
        }
    }
}

/// The peer address of the request's connection, from a [`PeerAddr`] (or a plain
/// `SocketAddr`) extension.
pub(crate) fn peer_ip(request: &Parts) -> Result<IpAddr, KeyError> {
    let extensions = &request.extensions;
    extensions
        .get::<PeerAddr>()
        .map(|peer| peer.0)
        .or_else(|| extensions.get::<SocketAddr>().copied())
        .map(|peer| peer.ip().to_canonical())
        .ok_or(KeyError::MissingPeerAddr)
}

/// Keys by the IP address of the connection's peer ([`PeerAddr`]).
///
/// Behind a reverse proxy every request comes from the proxy: use [`ClientIp`](super::ClientIp)
/// there. IPv4-mapped IPv6 addresses are keyed as the IPv4 address they carry. An IPv6 client
/// usually holds a whole /64 and can change address per request: to limit it as one client,
/// key by its network with [`Ipv6Prefix`](super::Ipv6Prefix).
#[derive(Clone, Copy, Debug, Default)]
pub struct PeerIp;

impl KeyExtractor for PeerIp {
    type Key = IpAddr;

    fn extract(&self, request: &Parts) -> Result<IpAddr, KeyError> {
        peer_ip(request)
    }
}

/// Keys by the value of a request header, such as an API key.
///
/// A client chooses the value, so each made-up value gets a fresh quota and a slot of the key
/// table, which a flood of made-up values fills (new keys then get the table's full policy, a
/// 503 with `WhenFull::Refuse`): limit by a header only once it is authenticated (the layer
/// inside the one checking API keys), or limit the unauthenticated traffic by IP as well.
///
/// The key is the value as sent, less the spaces and tabs around it: case and inner spaces
/// count. A value that the authenticating layer reads more loosely is several quotas for one
/// credential: `Authorization: Bearer t`, `bearer t` and `Bearer  t` (two spaces) are one token
/// to an RFC 9110 parser and three keys here. Key such a header by what the authentication
/// found (a [`KeyFn`] reading the identity it stored in the request's extensions), not by its
/// text.
///
/// ```
/// use tollgate::middleware::HeaderKey;
///
/// let by_api_key = HeaderKey::new(http::HeaderName::from_static("x-api-key"));
/// # let _ = by_api_key;
/// ```
#[derive(Clone, Debug)]
pub struct HeaderKey {
    name: HeaderName,
}

impl HeaderKey {
    /// Keys by the value of the header `name`. A request that sends the header more than once
    /// has no key ([`KeyError::InvalidHeader`]): a layer in front (the one checking API keys)
    /// may read another of the lines, and a client would otherwise be authenticated by one
    /// value and limited under another it makes up.
    pub fn new(name: HeaderName) -> HeaderKey {
        HeaderKey { name }
    }
}

impl KeyExtractor for HeaderKey {
    type Key = String;

    fn extract(&self, request: &Parts) -> Result<String, KeyError> {
        let mut values = request.headers.get_all(&self.name).iter();
        let value = values
            .next()
            .ok_or_else(|| KeyError::MissingHeader(self.name.clone()))?;
        // Without the whitespace around it, which HTTP/1 parsers strip and HTTP/2 passes on
        // (RFC 9113 calls such a value malformed): otherwise `alice` and `alice ` would be two
        // quotas over HTTP/2 and one over HTTP/1.
        match value.to_str().map(|text| text.trim_matches([' ', '\t'])) {
            Ok(text) if !text.is_empty() && values.next().is_none() => Ok(text.to_owned()),
            _ => Err(KeyError::InvalidHeader(self.name.clone())),
        }
    }
}

/// Keys by a closure over the request's head.
///
/// ```
/// use http::request::Parts;
/// use tollgate::middleware::{KeyError, KeyFn};
///
/// // By the first path segment (a tenant), say.
/// let by_tenant = KeyFn::new(|request: &Parts| {
///     let tenant = request.uri.path().split('/').nth(1).unwrap_or_default();
///     if tenant.is_empty() {
///         return Err(KeyError::Other("no tenant in the path".into()));
///     }
///     Ok(tenant.to_owned())
/// });
/// # let _ = by_tenant;
/// ```
pub struct KeyFn<F, K> {
    extract: F,
    key: PhantomData<fn() -> K>,
}

impl<F, K> KeyFn<F, K>
where
    F: Fn(&Parts) -> Result<K, KeyError> + Send + Sync + 'static,
    K: Send + Sync + 'static,
{
    /// Keys by `extract`.
    pub fn new(extract: F) -> KeyFn<F, K> {
        KeyFn {
            extract,
            key: PhantomData,
        }
    }
}

impl<F: Clone, K> Clone for KeyFn<F, K> {
    fn clone(&self) -> Self {
        KeyFn {
            extract: self.extract.clone(),
            key: PhantomData,
        }
    }
}

impl<F, K> fmt::Debug for KeyFn<F, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyFn").finish_non_exhaustive()
    }
}

impl<F, K> KeyExtractor for KeyFn<F, K>
where
    F: Fn(&Parts) -> Result<K, KeyError> + Send + Sync + 'static,
    K: Send + Sync + 'static,
{
    type Key = K;

    fn extract(&self, request: &Parts) -> Result<K, KeyError> {
        (self.extract)(request)
    }
}

#[cfg(test)]
mod tests {
    use http::{HeaderValue, Request};

    use super::*;

    fn extract(values: &[&[u8]]) -> Result<String, KeyError> {
        let mut request = Request::builder();
        for value in values {
            request = request.header("x-api-key", HeaderValue::from_bytes(value).unwrap());
        }
        let (parts, ()) = request.body(()).unwrap().into_parts();
        HeaderKey::new(HeaderName::from_static("x-api-key")).extract(&parts)
    }

    /// One credential is one key over every protocol: HTTP/1 parsers strip the whitespace
    /// around a value and HTTP/2 passes it on, so without the trim each spelling below would be
    /// a quota of its own over HTTP/2.
    #[test]
    fn a_header_key_is_the_value_without_the_whitespace_around_it() {
        for value in [&b"alice"[..], b"alice ", b" alice", b"alice\t", b"\t alice  "] {
            assert_eq!(extract(&[value]).unwrap(), "alice", "{value:?}");
        }
        // Inside the value, and in case, keys differ (see the type's documentation).
        assert_eq!(extract(&[b"Bearer  t"]).unwrap(), "Bearer  t");
        assert_eq!(extract(&[b"bearer t"]).unwrap(), "bearer t");
    }

    /// An entry a client may have written reaches a 5xx body or a log line escaped and cut: no
    /// bidi override or line break of the client's, and not 10 KB of it.
    #[test]
    fn a_malformed_forwarding_entry_is_quoted_escaped_and_cut() {
        let message = |entry: &str| {
            KeyError::MalformedForwarded {
                entry: entry.to_owned(),
            }
            .to_string()
        };
        let shown = message("for=\"<x> \u{202e}\r\nSet-Cookie: a=b");
        assert!(!shown.contains(['\u{202e}', '\r', '\n']), "{shown}");
        assert!(
            shown.contains(r#""for=\"<x> \u{202e}\r\nSet-Cookie: a=b""#),
            "{shown}"
        );
        let long = message(&"x".repeat(10_000));
        assert!(long.len() < 300, "{long}");
        assert!(
            long.contains(&format!("{:?}... (10000 bytes)", "x".repeat(64))),
            "{long}"
        );
    }

    #[test]
    fn a_header_key_needs_one_value_of_visible_ascii() {
        let invalid = |values: &[&[u8]]| matches!(extract(values), Err(KeyError::InvalidHeader(_)));
        assert!(matches!(extract(&[]), Err(KeyError::MissingHeader(_))));
        assert!(invalid(&[b""]));
        assert!(invalid(&[b"  \t "]));
        assert!(invalid(&[b"alice", b"bob"]));
        assert!(invalid(&[b"caf\xc3\xa9"]));
    }
}
