//! Reading the hops of `X-Forwarded-For` and `Forwarded` (RFC 7239), left to right.

use std::net::{IpAddr, SocketAddr};

use http::header::{HeaderMap, HeaderName, FORWARDED};

/// One entry of a forwarding header: the address a proxy saw its peer at, or text that is not
/// an address (`unknown`, an obfuscated identifier, garbage).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hop<'a> {
    Ip(IpAddr),
    Unreadable(&'a str),
}

/// The hops of every `X-Forwarded-For` line, in order (left-most first).
pub(crate) fn x_forwarded_for(headers: &HeaderMap) -> Vec<Hop<'_>> {
    static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
    hops(headers, &X_FORWARDED_FOR, |entry| address(entry))
}

/// The `for=` hops of every `Forwarded` line, in order (left-most first).
pub(crate) fn forwarded(headers: &HeaderMap) -> Vec<Hop<'_>> {
    hops(headers, &FORWARDED, |element| {
        split_unquoted(element, ';')
            .filter_map(|pair| pair.split_once('='))
            .find(|(name, _)| name.trim().eq_ignore_ascii_case("for"))
            .map_or(Hop::Unreadable(element.trim()), |(_, value)| {
                address(value.trim().trim_matches('"'))
            })
    })
}

fn hops<'a>(headers: &'a HeaderMap, name: &HeaderName, read: impl Fn(&'a str) -> Hop<'a>) -> Vec<Hop<'a>> {
    let mut hops = Vec::new();
    for line in headers.get_all(name) {
        match line.to_str() {
            Ok(line) => hops.extend(
                split_unquoted(line, ',')
                    .filter(|e| !e.trim().is_empty())
                    .map(&read),
            ),
            Err(_) => hops.push(Hop::Unreadable("<not visible ASCII>")),
        }
    }
    hops
}

/// `192.0.2.1`, `192.0.2.1:8080`, `2001:db8::1`, `[2001:db8::1]`, `[2001:db8::1]:8080`.
fn address(entry: &str) -> Hop<'_> {
    let entry = entry.trim();
    let bare = entry
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .unwrap_or(entry);
    bare.parse::<IpAddr>()
        .or_else(|_| entry.parse::<SocketAddr>().map(|socket| socket.ip()))
        .map_or(Hop::Unreadable(entry), |ip| Hop::Ip(ip.to_canonical()))
}

/// Splits on `separator` outside double quotes.
fn split_unquoted(text: &str, separator: char) -> impl Iterator<Item = &str> {
    let mut quoted = false;
    let mut escaped = false;
    text.split(move |c: char| {
        if escaped {
            escaped = false;
        } else if quoted && c == '\\' {
            escaped = true;
        } else if c == '"' {
            quoted = !quoted;
        } else if c == separator && !quoted {
            return true;
        }
        false
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn ip(text: &str) -> Hop<'static> {
        Hop::Ip(text.parse().expect("a test address"))
    }

    fn headers(name: &'static str, lines: &[&'static str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for line in lines {
            headers.append(name, HeaderValue::from_static(line));
        }
        headers
    }

    #[test]
    fn x_forwarded_for_reads_every_line_in_order() {
        let headers = headers(
            "x-forwarded-for",
            &[
                "203.0.113.9, 10.0.0.1:8080",
                "[2001:db8::7]:443,2001:db8::8 , ::ffff:192.0.2.1, bogus",
            ],
        );
        assert_eq!(
            x_forwarded_for(&headers),
            [
                ip("203.0.113.9"),
                ip("10.0.0.1"),
                ip("2001:db8::7"),
                ip("2001:db8::8"),
                ip("192.0.2.1"),
                Hop::Unreadable("bogus"),
            ]
        );
    }

    #[test]
    fn forwarded_reads_the_for_parameter() {
        let headers = headers(
            "forwarded",
            &[
                r#"for=192.0.2.60;proto=http;by=203.0.113.43, For="[2001:db8:cafe::17]:4711""#,
                r#"proto=https;for=unknown, by=10.0.0.1, for="198.51.100.17;x", for="_hidden,x""#,
            ],
        );
        assert_eq!(
            forwarded(&headers),
            [
                ip("192.0.2.60"),
                ip("2001:db8:cafe::17"),
                Hop::Unreadable("unknown"),
                Hop::Unreadable("by=10.0.0.1"),
                Hop::Unreadable("198.51.100.17;x"),
                Hop::Unreadable("_hidden,x"),
            ]
        );
    }

    #[test]
    fn no_header_no_hops() {
        assert!(x_forwarded_for(&HeaderMap::new()).is_empty());
        assert!(forwarded(&HeaderMap::new()).is_empty());
    }
}
