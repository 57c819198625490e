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
    // No quoted strings in X-Forwarded-For: a quote is garbage in its own entry.
    hops(headers, &X_FORWARDED_FOR, false, address)
}

/// The `for=` hops of every `Forwarded` line, in order (left-most first).
pub(crate) fn forwarded(headers: &HeaderMap) -> Vec<Hop<'_>> {
    hops(headers, &FORWARDED, true, |element| {
        // The element's quotes are balanced (`elements` said so), so every pair is readable.
        elements(element.as_bytes(), b';', true)
            .filter_map(Result::ok)
            .filter_map(|pair| pair.split_once('='))
            .find(|(name, _)| name.trim().eq_ignore_ascii_case("for"))
            .map_or(Hop::Unreadable(element.trim()), |(_, value)| {
                address(value.trim().trim_matches('"'))
            })
    })
}

fn hops<'a>(
    headers: &'a HeaderMap,
    name: &HeaderName,
    quotes: bool,
    read: impl Fn(&'a str) -> Hop<'a>,
) -> Vec<Hop<'a>> {
    let mut hops = Vec::new();
    for line in headers.get_all(name) {
        for element in elements(line.as_bytes(), b',', quotes) {
            match element {
                Ok(element) if element.trim().is_empty() => {}
                Ok(element) => hops.push(read(element)),
                Err(element) => hops.push(Hop::Unreadable(element.trim())),
            }
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

/// Splits a header line on `separator`, outside double-quoted strings when `quotes` is set.
///
/// An element whose quoted string never closes is an `Err`: a client's unbalanced quote would
/// otherwise swallow the entries proxies append after it on the same line (and the client
/// would choose its own address). So is an element that is not UTF-8 (it alone, not the
/// line: the separators and quotes are ASCII, never part of a multi-byte character).
fn elements(line: &[u8], separator: u8, quotes: bool) -> impl Iterator<Item = Result<&str, &str>> {
    let mut rest = Some(line);
    std::iter::from_fn(move || {
        let text = rest?;
        let (mut quoted, mut escaped) = (false, false);
        let mut end = text.len();
        for (i, &byte) in text.iter().enumerate() {
            if escaped {
                escaped = false;
            } else if quoted && byte == b'\\' {
                escaped = true;
            } else if quotes && byte == b'"' {
                quoted = !quoted;
            } else if byte == separator && !quoted {
                end = i;
                break;
            }
        }
        let (element, tail) = text.split_at(end);
        // Past the separator; `None` when the line ended instead.
        rest = tail.get(1..);
        Some(match std::str::from_utf8(element) {
            Ok(element) if !quoted => Ok(element),
            Ok(element) => Err(element),
            Err(_) => Err("<not UTF-8>"),
        })
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
    fn an_unclosed_quote_spoils_its_element_and_nothing_before() {
        let headers = headers(
            "forwarded",
            &[
                r#"for=192.0.2.60, for=1.2.3.4;x=", for=203.0.113.7"#,
                "for=198.51.100.1",
            ],
        );
        assert_eq!(
            forwarded(&headers),
            [
                ip("192.0.2.60"),
                Hop::Unreadable(r#"for=1.2.3.4;x=", for=203.0.113.7"#),
                ip("198.51.100.1"),
            ]
        );
        let line = b"1.2.3.4, \xff\xfe, \"5.6.7.8";
        let split: Vec<_> = elements(line, b',', false).collect();
        assert_eq!(split, [Ok("1.2.3.4"), Err("<not UTF-8>"), Ok(" \"5.6.7.8")]);
        let split: Vec<_> = elements(b"a,", b',', true).collect();
        assert_eq!(split, [Ok("a"), Ok("")]);
    }

    #[test]
    fn no_header_no_hops() {
        assert!(x_forwarded_for(&HeaderMap::new()).is_empty());
        assert!(forwarded(&HeaderMap::new()).is_empty());
    }
}
