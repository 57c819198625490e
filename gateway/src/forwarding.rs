//! What a reverse proxy changes in the fields it forwards: hop-by-hop fields removed in both
//! directions (RFC 9110 section 7.6.1), and the client it saw added for the upstream
//! (`Forwarded`, RFC 7239, and `X-Forwarded-For`).

use std::net::{IpAddr, SocketAddr};

use http::header::{CONNECTION, FORWARDED, HOST};
use http::{HeaderMap, HeaderName, HeaderValue};

/// The fields that concern one connection only, removed before forwarding whatever
/// `Connection` says: RFC 9110 section 7.6.1 names `Proxy-Connection`, `Keep-Alive`, `TE`,
/// `Transfer-Encoding` and `Upgrade`; `Proxy-Authenticate` and `Proxy-Authorization` are for
/// the proxy itself (section 11.7), and `Trailer` announces trailers of the message's own
/// framing.
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// `X-Forwarded-For`, which `http` has no constant for.
const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// Removes every hop-by-hop field from `headers`: those named by `Connection`, then the
/// fixed list. Allocates only when `Connection` names fields.
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    if headers.contains_key(CONNECTION) {
        let named: Vec<HeaderName> = headers
            .get_all(CONNECTION)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
            .collect();
        for name in named {
            headers.remove(name);
        }
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
}

/// Tells the upstream who the client was, after the hop-by-hop fields are gone (so that a
/// client cannot have these removed with `Connection`): appends the peer's address to
/// `X-Forwarded-For` and an element to `Forwarded` (`for`, `proto` and the `host` the client
/// asked for), earlier entries kept.
pub(crate) fn add_forwarding(headers: &mut HeaderMap, peer: SocketAddr, asked_host: Option<&str>) {
    if let Ok(value) = HeaderValue::from_str(&peer.ip().to_string()) {
        headers.append(X_FORWARDED_FOR, value);
    }
    if let Ok(value) = HeaderValue::from_str(&forwarded_element(peer.ip(), asked_host)) {
        headers.append(FORWARDED, value);
    }
}

/// The host the client asked for: its `Host` field, or an HTTP/2 request's authority.
pub(crate) fn asked_host(headers: &HeaderMap, authority: Option<&str>) -> Option<String> {
    headers
        .get(HOST)
        .and_then(|host| host.to_str().ok())
        .or(authority)
        .map(str::to_owned)
}

/// `for=192.0.2.7;proto=http;host="example.com:8080"`; an IPv6 node is quoted and bracketed
/// (RFC 7239 section 6), and the host is always a quoted string (a port's `:` is not a token
/// character).
fn forwarded_element(client: IpAddr, host: Option<&str>) -> String {
    let mut element = match client.to_canonical() {
        IpAddr::V4(v4) => format!("for={v4};proto=http"),
        IpAddr::V6(v6) => format!("for=\"[{v6}]\";proto=http"),
    };
    if let Some(host) = host {
        let escaped = host.replace('\\', "\\\\").replace('"', "\\\"");
        element.push_str(&format!(";host=\"{escaped}\""));
    }
    element
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_and_the_fields_it_names_are_removed() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("connection", "keep-alive, x-private-hop"),
            ("connection", "close"),
            ("x-private-hop", "1"),
            ("keep-alive", "timeout=5"),
            ("proxy-authorization", "Basic eA=="),
            ("te", "trailers"),
            ("upgrade", "websocket"),
            ("accept", "*/*"),
        ] {
            headers.append(name, HeaderValue::from_static(value));
        }
        strip_hop_by_hop(&mut headers);
        let left: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
        assert_eq!(left, ["accept"]);
    }

    #[test]
    fn forwarded_elements_quote_what_is_not_a_token() {
        let v4: IpAddr = [192, 0, 2, 7].into();
        assert_eq!(forwarded_element(v4, None), "for=192.0.2.7;proto=http");
        let v6: IpAddr = "2001:db8::1".parse().unwrap_or(v4);
        assert_eq!(
            forwarded_element(v6, Some("example.com:8080")),
            "for=\"[2001:db8::1]\";proto=http;host=\"example.com:8080\""
        );
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap_or(v6);
        assert_eq!(forwarded_element(mapped, None), "for=192.0.2.7;proto=http");
    }
}
