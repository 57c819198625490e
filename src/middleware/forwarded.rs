//! Reading the hops of `X-Forwarded-For` and `Forwarded` (RFC 7239), right to left, without
//! allocating: a [`ClientIp`](super::ClientIp) reads from the right and stops at the first
//! address that is not a trusted proxy, usually one or two entries in.

use std::net::{IpAddr, SocketAddr};

use http::header::{HeaderMap, HeaderName, FORWARDED};

/// One entry of a forwarding header: the address a proxy saw its peer at, or text that is not
/// an address (`unknown`, an obfuscated identifier, garbage).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hop<'a> {
    Ip(IpAddr),
    Unreadable(&'a str),
}

/// The hops of every `X-Forwarded-For` line, right-most first (the last line's last entry).
pub(crate) fn x_forwarded_for(headers: &HeaderMap) -> impl Iterator<Item = Hop<'_>> {
    static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
    // No quoted strings in X-Forwarded-For: a quote is garbage in its own entry.
    hops(headers, &X_FORWARDED_FOR, false, address)
}

/// The `for=` hops of every `Forwarded` line, right-most first (the last line's last element).
pub(crate) fn forwarded(headers: &HeaderMap) -> impl Iterator<Item = Hop<'_>> {
    hops(headers, &FORWARDED, true, |element| {
        // The element's quotes are balanced (`elements_rev` said so), so every pair is readable.
        elements(element.as_bytes(), b';', true)
            .filter_map(Result::ok)
            .filter_map(|pair| pair.split_once('='))
            .find(|(name, _)| name.trim().eq_ignore_ascii_case("for"))
            .map_or(Hop::Unreadable(element.trim()), |(_, value)| {
                address(value.trim().trim_matches('"'))
            })
    })
}

/// The hops of every `name` line, the last line first and each line right to left; empty
/// elements are skipped.
fn hops<'a>(
    headers: &'a HeaderMap,
    name: &HeaderName,
    quotes: bool,
    read: impl Fn(&'a str) -> Hop<'a> + 'a,
) -> impl Iterator<Item = Hop<'a>> {
    headers
        .get_all(name)
        .iter()
        .rev()
        .flat_map(move |line| elements_rev(line.as_bytes(), b',', quotes))
        .filter_map(move |element| match element {
            Ok(element) if element.trim().is_empty() => None,
            Ok(element) => Some(read(element)),
            Err(element) => Some(Hop::Unreadable(element.trim())),
        })
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

/// Splits a header line on `separator`, left to right, outside double-quoted strings when
/// `quotes` is set.
///
/// An element whose quoted string never closes is an `Err`: a client's unbalanced quote would
/// otherwise swallow the entries proxies append after it on the same line (and the client
/// would choose its own address). So is an element that is not UTF-8 (it alone, not the
/// line: the separators and quotes are ASCII, never part of a multi-byte character).
fn elements(line: &[u8], separator: u8, quotes: bool) -> impl Iterator<Item = Result<&str, &str>> {
    let mut rest = Some(line);
    std::iter::from_fn(move || {
        let text = rest?;
        let (end, quoted) = element_end(text, separator, quotes);
        let (element, tail) = text.split_at_checked(end).unwrap_or((text, &[]));
        // Past the separator; `None` when the line ended instead.
        rest = tail.get(1..);
        Some(read_element(element, quoted))
    })
}

/// [`elements`], right to left: the same elements, with the same verdicts, last first.
///
/// Where an element starts depends on the quotes before it, which only a scan from the left
/// can tell (a `\"` escapes the quote inside a quoted string, not outside one), so a line with
/// quotes is scanned from its start for each element, up to that element, for the first
/// [`RESCANS`] elements: a walk that stops `k` elements from the right reads the line `k`
/// times, and allocates nothing. A walk that goes further (every entry so far a trusted proxy)
/// splits what is left of the line once, into a vector, so that no line costs more than
/// `RESCANS + 1` reads. A line without quotes (every `X-Forwarded-For` line, most `Forwarded`
/// ones) is split from the right directly.
fn elements_rev(line: &[u8], separator: u8, quotes: bool) -> impl Iterator<Item = Result<&str, &str>> {
    let quotes = quotes && line.contains(&b'"');
    let mut rest = Some(line);
    let mut scans = 0;
    // What is left of a line split at once, last element at the end.
    let mut split: Vec<Result<&str, &str>> = Vec::new();
    std::iter::from_fn(move || {
        if let Some(element) = split.pop() {
            return Some(element);
        }
        let text = rest?;
        if quotes {
            if scans == RESCANS {
                rest = None;
                split.extend(elements(text, separator, true));
                return split.pop();
            }
            scans += 1;
        }
        let (start, quoted) = last_element(text, separator, quotes);
        let (head, element) = text.split_at_checked(start).unwrap_or((&[], text));
        // Before the separator that ends `head`; `None` when the element starts the line.
        rest = head.split_last().map(|(_separator, before)| before);
        Some(read_element(element, quoted))
    })
}

/// How many elements of a line with quotes [`elements_rev`] finds by scanning the line from its
/// start, before it splits the rest at once. A walk from the right stops at the first address
/// that is not a trusted proxy: one or two elements in, with proxies that append to one line.
const RESCANS: u32 = 8;

/// Where the last element of `text` starts, and whether it ends inside a quoted string.
fn last_element(text: &[u8], separator: u8, quotes: bool) -> (usize, bool) {
    if !quotes {
        let start = text
            .iter()
            .rposition(|&byte| byte == separator)
            .map_or(0, |at| at + 1);
        return (start, false);
    }
    let mut start = 0;
    loop {
        let rest = text.get(start..).unwrap_or_default();
        let (end, quoted) = element_end(rest, separator, quotes);
        if end >= rest.len() {
            return (start, quoted);
        }
        start += end + 1;
    }
}

/// Where the element at the start of `text` ends (its separator's index, or `text.len()`),
/// and whether it ends inside a quoted string (one that never closes).
fn element_end(text: &[u8], separator: u8, quotes: bool) -> (usize, bool) {
    let (mut quoted, mut escaped) = (false, false);
    for (i, &byte) in text.iter().enumerate() {
        if escaped {
            escaped = false;
        } else if quoted && byte == b'\\' {
            escaped = true;
        } else if quotes && byte == b'"' {
            quoted = !quoted;
        } else if byte == separator && !quoted {
            return (i, false);
        }
    }
    (text.len(), quoted)
}

/// An element as text: `Err` when its quoted string never closes or it is not UTF-8.
fn read_element(element: &[u8], quoted: bool) -> Result<&str, &str> {
    match std::str::from_utf8(element) {
        Ok(element) if !quoted => Ok(element),
        Ok(element) => Err(element),
        Err(_) => Err("<not UTF-8>"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use proptest::prelude::*;

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

    /// The hops read right to left, put back in the header's order (left-most first).
    fn in_order<'a>(hops: impl Iterator<Item = Hop<'a>>) -> Vec<Hop<'a>> {
        let mut hops: Vec<_> = hops.collect();
        hops.reverse();
        hops
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
            in_order(x_forwarded_for(&headers)),
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
            in_order(forwarded(&headers)),
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
            in_order(forwarded(&headers)),
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
        assert_eq!(x_forwarded_for(&HeaderMap::new()).next(), None);
        assert_eq!(forwarded(&HeaderMap::new()).next(), None);
    }

    /// Many lines of many elements, quoted and not, with empty elements and an escaped quote:
    /// read from the right, last line first, and the walk can stop anywhere.
    #[test]
    fn many_lines_are_read_from_the_right_last_line_first() {
        let lines = headers(
            "forwarded",
            &[
                r#"for=192.0.2.1, , for="[2001:db8::1]";proto=https,for=192.0.2.2"#,
                "",
                r#",for="192.0.2.3";x="a\"b,c", for=unknown,,"#,
                r#"for=192.0.2.4 ,for="_x;y=\"z\"",for=192.0.2.5:80, for=192.0.2.6"#,
            ],
        );
        let expected = [
            ip("192.0.2.6"),
            ip("192.0.2.5"),
            Hop::Unreadable(r#"_x;y=\"z\"#),
            ip("192.0.2.4"),
            Hop::Unreadable("unknown"),
            ip("192.0.2.3"),
            ip("192.0.2.2"),
            ip("2001:db8::1"),
            ip("192.0.2.1"),
        ];
        assert_eq!(forwarded(&lines).collect::<Vec<_>>(), expected);
        assert_eq!(forwarded(&lines).take(2).collect::<Vec<_>>(), expected[..2]);
        let xff = headers(
            "x-forwarded-for",
            &["192.0.2.1,,192.0.2.2", " ", "192.0.2.3, \"x, 192.0.2.4,"],
        );
        assert_eq!(
            x_forwarded_for(&xff).collect::<Vec<_>>(),
            [
                ip("192.0.2.4"),
                Hop::Unreadable("\"x"),
                ip("192.0.2.3"),
                ip("192.0.2.2"),
                ip("192.0.2.1"),
            ]
        );
    }

    /// A walk deeper than [`RESCANS`] into a quoted line gives the same elements.
    #[test]
    fn a_long_quoted_line_is_read_whole_from_the_right() {
        let mut line = String::new();
        for i in 0..30 {
            line.push_str(&format!("for=\"10.0.0.{i}\";x=\"a,\\\"b\", "));
        }
        line.push_str("for=unknown");
        let mut forward: Vec<_> = elements(line.as_bytes(), b',', true).collect();
        forward.reverse();
        let backward: Vec<_> = elements_rev(line.as_bytes(), b',', true).collect();
        assert_eq!(forward.len(), 31);
        assert_eq!(backward, forward);
    }

    proptest! {
        /// Right to left gives exactly the elements and verdicts of left to right, reversed,
        /// on lines made of separators, quotes, backslashes and text.
        #[test]
        fn right_to_left_is_left_to_right_reversed(
            line in proptest::collection::vec(
                prop_oneof![
                    Just(b','), Just(b';'), Just(b'"'), Just(b'\\'), Just(b' '), Just(b'a'),
                    Just(0xff_u8),
                ],
                0..100,
            ),
            quotes: bool,
        ) {
            for separator in [b',', b';'] {
                let mut forward: Vec<_> = elements(&line, separator, quotes).collect();
                forward.reverse();
                let backward: Vec<_> = elements_rev(&line, separator, quotes).collect();
                prop_assert_eq!(backward, forward);
            }
        }
    }
}
