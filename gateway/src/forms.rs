//! The forms a value takes, read the same way from a flag and from the configuration file.
//! Each error says what was read and shows the expected form with an example.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use clap::ValueEnum;
use http::{HeaderName, Method, Uri};
use tollgate::middleware::{ClientIp, ForwardedHeader, IpRange};
use tollgate::{
    FixedWindow, LeakyBucket, Quota, QuotaError, SlidingLog, SlidingWindow, TokenBucket, WhenFull,
};

/// How requests are keyed: the flag's and the file's `key`.
#[derive(Clone, Debug)]
pub(crate) enum KeyChoice {
    /// The connection's IP address.
    Peer,
    /// A header's value (an API key).
    Header(HeaderName),
    /// The client's IP address behind trusted proxies, from `X-Forwarded-For` or `Forwarded`.
    ClientIp {
        extractor: ClientIp,
        /// Read from `Forwarded` (RFC 7239), not `X-Forwarded-For`.
        forwarded: bool,
    },
}

impl KeyChoice {
    /// The Rust type the key has: limiters keyed by one cannot be reused for the other.
    pub(crate) fn kind(&self) -> KeyKind {
        match self {
            KeyChoice::Peer | KeyChoice::ClientIp { .. } => KeyKind::Address,
            KeyChoice::Header(_) => KeyKind::Text,
        }
    }
}

/// What a key is: an IP address (or network) or a header's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyKind {
    /// An IP address, or an IPv6 network.
    Address,
    /// A header's value.
    Text,
}

/// Which algorithm limits each key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum AlgorithmChoice {
    /// Token bucket (GCRA): bursts up to the burst, then the rate.
    #[value(alias = "token-bucket", alias = "gcra")]
    #[serde(alias = "token-bucket", alias = "gcra")]
    Token,
    /// Leaky bucket: admitted requests wait for their slot (shaping).
    #[value(alias = "leaky-bucket")]
    #[serde(alias = "leaky-bucket")]
    Leaky,
    /// Fixed window: a count per window.
    #[value(alias = "fixed-window")]
    #[serde(alias = "fixed-window")]
    Fixed,
    /// Sliding window counter: the last two windows' counts, weighted.
    #[value(alias = "sliding-window")]
    #[serde(alias = "sliding-window")]
    Sliding,
    /// Sliding log: every admission's time, exact.
    #[value(alias = "sliding-log")]
    #[serde(alias = "sliding-log")]
    Log,
}

impl AlgorithmChoice {
    /// The quota a key gets when none is given: one the algorithm accepts (a burst only for
    /// the buckets, the windows having none).
    pub(crate) fn default_quota(self) -> Result<Quota, QuotaError> {
        let quota = Quota::per_second(5)?;
        match self {
            AlgorithmChoice::Token | AlgorithmChoice::Leaky => quota.with_burst(10),
            AlgorithmChoice::Fixed | AlgorithmChoice::Sliding | AlgorithmChoice::Log => Ok(quota),
        }
    }
}

impl AlgorithmChoice {
    /// Whether this algorithm takes `quota` (a window refuses a burst).
    pub(crate) fn accepts(self, quota: Quota) -> Result<(), QuotaError> {
        match self {
            AlgorithmChoice::Token => TokenBucket::new(quota).map(drop),
            AlgorithmChoice::Leaky => LeakyBucket::new(quota).map(drop),
            AlgorithmChoice::Fixed => FixedWindow::new(quota).map(drop),
            AlgorithmChoice::Sliding => SlidingWindow::new(quota).map(drop),
            AlgorithmChoice::Log => SlidingLog::new(quota).map(drop),
        }
    }
}

impl fmt::Display for AlgorithmChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AlgorithmChoice::Token => "token bucket",
            AlgorithmChoice::Leaky => "leaky bucket",
            AlgorithmChoice::Fixed => "fixed window",
            AlgorithmChoice::Sliding => "sliding window",
            AlgorithmChoice::Log => "sliding log",
        })
    }
}

/// What a keyed table does with a new key when it is full: the library's [`WhenFull`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum WhenFullChoice {
    /// Refuse the new key's request (503): no client gets more than its quota.
    Refuse,
    /// Admit the new key's request without counting it, until room appears.
    Admit,
}

impl From<WhenFullChoice> for WhenFull {
    fn from(choice: WhenFullChoice) -> WhenFull {
        match choice {
            WhenFullChoice::Refuse => WhenFull::Refuse,
            WhenFullChoice::Admit => WhenFull::Admit,
        }
    }
}

/// What a Redis-backed limit answers while Redis does not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum RedisAwayChoice {
    /// Refuse every request (429, retry after 1 s): no quota is exceeded.
    Refuse,
    /// Forward every request, uncounted: the service stays up, unprotected.
    Admit,
}

/// An address and port to listen on: `127.0.0.1:8080`, `[::1]:8080`.
pub(crate) fn listen(text: &str) -> Result<SocketAddr, String> {
    text.parse().map_err(|_| {
        format!("`{text}` is not an address and port; expected e.g. 127.0.0.1:8080 or [::1]:8080")
    })
}

/// A number of keys a table holds at once: a whole number from 1.
pub(crate) fn capacity(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("the key table needs room for at least one key; expected e.g. 100000".to_owned()),
        Ok(keys) => Ok(keys),
        Err(_) => Err(format!(
            "`{text}` is not a number of keys; expected a whole number from 1, e.g. 100000"
        )),
    }
}

/// The prefix an IPv6 client's address is cut to: 0 to 128 bits.
pub(crate) fn ipv6_prefix(text: &str) -> Result<u8, String> {
    text.parse()
        .ok()
        .filter(|&bits| bits <= 128)
        .ok_or_else(|| format!("`{text}` is not a number of bits from 0 to 128; expected e.g. 64"))
}

/// The longest wait for a slot, in whole milliseconds.
pub(crate) fn max_delay_ms(text: &str) -> Result<Duration, String> {
    text.parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|_| format!("`{text}` is not a number of milliseconds; expected e.g. 1000"))
}

/// A quota, in the library's grammar (its errors already show the form).
pub(crate) fn quota(text: &str) -> Result<Quota, String> {
    text.parse::<Quota>().map_err(|error| error.to_string())
}

/// A Redis URL: only its scheme is read here; the client reads the rest when the limiter is
/// built.
pub(crate) fn redis_url(text: &str) -> Result<String, String> {
    let known = ["redis://", "rediss://", "redis+unix://", "unix://"];
    if known.iter().any(|scheme| text.starts_with(scheme)) {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "`{text}` is not a Redis URL; expected e.g. redis://127.0.0.1:6379/ (or redis://:password@host:port/db)"
        ))
    }
}

/// A seed node of a Redis Cluster: a node's URL over TCP (a cluster has no Unix socket, and
/// one database, 0, which the library checks when the limiter is built).
pub(crate) fn redis_seed(text: &str) -> Result<String, String> {
    if ["redis://", "rediss://"]
        .iter()
        .any(|scheme| text.starts_with(scheme))
    {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "`{text}` is not a Redis Cluster node's URL; expected e.g. redis://127.0.0.1:7000 \
             (or redis://:password@host:port), several separated by commas"
        ))
    }
}

/// An upstream base: `http://host:port`, nothing after it (each request's own path and query
/// are forwarded as they are, so a base path would be dropped).
pub(crate) fn upstream(text: &str) -> Result<Uri, String> {
    // `http::Uri` drops a fragment without a word, and would keep user information in the
    // authority, which the proxy sends on as the `Host` of every request.
    if text.contains('#') {
        return Err(format!("`{text}` has a fragment; give http://host:port"));
    }
    let uri: Uri = text
        .parse()
        .map_err(|e| format!("`{text}`: {e}; expected e.g. http://127.0.0.1:3000"))?;
    if uri
        .authority()
        .is_some_and(|authority| authority.as_str().contains('@'))
    {
        return Err("user information (`user:password@`) is not supported; give http://host:port".to_owned());
    }
    match uri.scheme_str() {
        Some("http") if uri.authority().is_some() => {}
        Some("https") => {
            return Err(format!(
                "`{text}`: TLS upstreams are not supported; give http://host:port"
            ))
        }
        None => return Err(format!("`{text}` has no scheme; write http://{text}")),
        Some(_) => return Err(format!("`{text}` is not http://host:port")),
    }
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(format!(
            "`{text}` has a path or query; give http://host:port (each request keeps its own path)"
        ));
    }
    Ok(uri)
}

/// A key: `peer`, `header:NAME`, `xff:RANGES` or `forwarded:RANGES`.
pub(crate) fn key(text: &str) -> Result<KeyChoice, String> {
    let ranges = |list: &str| -> Result<Vec<IpRange>, String> {
        list.split(',')
            .map(|range| {
                range.parse::<IpRange>().map_err(|e| {
                    format!("{e}; expected addresses or ranges such as 10.0.0.0/8,2001:db8::/32")
                })
            })
            .collect()
    };
    Ok(match text.split_once(':') {
        None if text == "peer" => KeyChoice::Peer,
        Some(("header", name)) => KeyChoice::Header(
            HeaderName::try_from(name)
                .map_err(|e| format!("header:{name}: {e}; expected e.g. header:x-api-key"))?,
        ),
        Some(("xff", list)) => KeyChoice::ClientIp {
            extractor: ClientIp::new(ranges(list)?),
            forwarded: false,
        },
        Some(("forwarded", list)) => KeyChoice::ClientIp {
            extractor: ClientIp::new(ranges(list)?).header(ForwardedHeader::Forwarded),
            forwarded: true,
        },
        _ => {
            return Err(format!(
                "`{text}` is not peer, header:NAME, xff:RANGES or forwarded:RANGES; \
                 expected e.g. peer, header:x-api-key or xff:10.0.0.0/8"
            ))
        }
    })
}

/// A route's name: it names the policy in the `RateLimit` fields and the route in metrics and
/// logs, so it is kept to letters, digits, `-`, `_` and `.`.
pub(crate) fn route_name(text: &str) -> Result<String, String> {
    let fits = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if !text.is_empty() && text.chars().all(fits) {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "`{text}` is not a route name; expected letters, digits, `-`, `_` or `.`, e.g. login"
        ))
    }
}

/// A policy's name within a route of several: written in the `RateLimit` fields, so kept to
/// letters, digits, `-`, `_` and `.` as a route's name is.
pub(crate) fn policy_name(text: &str) -> Result<String, String> {
    route_name(text).map_err(|_| {
        format!("`{text}` is not a policy name; expected letters, digits, `-`, `_` or `.`, e.g. burst")
    })
}

/// A route's path prefix: it starts with `/`.
pub(crate) fn path_prefix(text: &str) -> Result<String, String> {
    if text.starts_with('/') {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "`{text}` is not a path prefix; expected one starting with /, e.g. /login"
        ))
    }
}

/// A route's method, upper-case as HTTP writes it (`post` would be another, unknown method).
pub(crate) fn method(text: &str) -> Result<Method, String> {
    let upper = !text.is_empty() && text.bytes().all(|b| b.is_ascii_uppercase());
    match Method::from_bytes(text.as_bytes()) {
        Ok(method) if upper => Ok(method),
        _ => Err(format!(
            "`{text}` is not a method; expected upper-case, e.g. GET or POST"
        )),
    }
}
