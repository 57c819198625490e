//! The client's IP behind trusted reverse proxies.

use std::net::IpAddr;
use std::num::NonZeroUsize;

use http::request::Parts;

use super::forwarded::{self, Hop};
use super::ip_range::IpRange;
use super::key::{peer_ip, KeyError, KeyExtractor};

/// The forwarding header a [`ClientIp`] reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2`.
    #[default]
    XForwardedFor,
    /// `Forwarded: for=client, for=proxy1` (RFC 7239).
    Forwarded,
}

/// Keys by the client's IP address behind trusted reverse proxies.
///
/// Each proxy appends the address it received the request from to `X-Forwarded-For` (or
/// `Forwarded`), so the list reads `client, proxy1, proxy2` and only the entries appended by your
/// own proxies can be believed: anything to their left was written by the client, who can write
/// anything. The client IP is therefore found from the right:
///
/// 1. If the connection's peer ([`PeerAddr`](super::PeerAddr)) is not a trusted proxy, it is the
///    client, and the headers are ignored.
/// 2. Otherwise walk the header's entries from the right, skipping trusted proxies: the first
///    address that is not one is the client.
/// 3. If every entry is a trusted proxy, the right-most entry is the client: the address the
///    peer proxy itself saw and appended, which the client cannot write. With no entry at all,
///    the peer is.
///
/// The header is read in place, from the right (the last line first), and its entries are
/// parsed only as far as the walk goes: nothing is copied or allocated, whatever the client
/// wrote to the left. A `Forwarded` line with quoted values is the exception in cost, not in
/// result: only a scan from its start knows where its quotes put an entry's bounds, so each step
/// of the walk into it scans the line from its start, and a walk more than 8 entries deep
/// (empty entries count) splits the rest of that line once, into a vector, so that its cost
/// stays linear.
///
/// So the key is always an address written by a trusted proxy (or the peer itself), never one
/// a client wrote: the entries to the left of the right-most untrusted one, or of the
/// right-most entry when all are trusted, are never read (tower_governor's smart extractor
/// believes the left-most entry, and any client can spoof it). An entry in the trusted part of
/// the chain that is not an address (`unknown`, garbage) is a [`KeyError::MalformedForwarded`]:
/// the request gets the layer's [`MissingKey`](super::MissingKey) behaviour.
///
/// **The trusted ranges must hold your proxies and nothing else.** A client whose own address
/// is in a trusted range is taken for a proxy, and the walk goes past it to whatever the client
/// wrote on the left of the header: it chooses its key at will, whether it connects directly or
/// through your proxies (behind one proxy, `X-Forwarded-For: 203.0.113.9` sent by a client at
/// 10.5.5.5 arrives as `203.0.113.9, 10.5.5.5`, and the key is `203.0.113.9`). Only when it
/// writes nothing, or only trusted addresses, is it keyed by an address a proxy wrote. Never
/// trust a range that contains clients (a whole private network your users are on, `0.0.0.0/0`,
/// `::/0`): list the proxies' own addresses, or a subnet that holds only them.
///
/// The key is the client's full address; an IPv6 client usually holds a whole /64 and can change
/// address per request: wrap the extractor in [`Ipv6Prefix`](super::Ipv6Prefix) to key it by its
/// network.
///
/// ```
/// use tollgate::middleware::{ClientIp, ForwardedHeader};
///
/// // Behind a load balancer in 10.0.0.0/8 that appends to `X-Forwarded-For`.
/// let client_ip = ClientIp::new(["10.0.0.0/8".parse()?]);
/// let rfc_7239 = ClientIp::new(["10.0.0.0/8".parse()?]).header(ForwardedHeader::Forwarded);
/// # let _ = (client_ip, rfc_7239);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct ClientIp {
    trusted: Vec<IpRange>,
    header: ForwardedHeader,
    /// `Some(n)`: the client is the `n`-th entry from the right ([`ClientIp::hops`]), not the
    /// first untrusted one.
    hops: Option<NonZeroUsize>,
}

impl ClientIp {
    /// Trusts the proxies in `trusted`, reading `X-Forwarded-For`.
    pub fn new(trusted: impl IntoIterator<Item = IpRange>) -> ClientIp {
        ClientIp {
            trusted: trusted.into_iter().collect(),
            header: ForwardedHeader::default(),
            hops: None,
        }
    }

    /// Reads `header` instead.
    pub fn header(self, header: ForwardedHeader) -> ClientIp {
        ClientIp { header, ..self }
    }

    /// Counts proxies instead of recognizing them: behind exactly `n` reverse proxies that each
    /// append to the header (the peer, which must still be in a trusted range, is the last of
    /// them), the client is the `n`-th entry from the right, whatever its address. For networks
    /// where clients share address ranges with the proxies, so that the trusted ranges cannot
    /// hold the proxies alone (a cloud load balancer whose addresses change within the
    /// network's range). With `n = 2` (a CDN, then a load balancer), `X-Forwarded-For: spoofed,
    /// 203.0.113.9, 198.51.100.4` keys the request by `203.0.113.9`, the address the CDN saw.
    ///
    /// The count must be exact, and clients must reach nothing but the first proxy: one that
    /// could send its request to an inner proxy could write the entry that proxy then reads as
    /// the client. A request whose header holds fewer than `n` entries did not come through
    /// every proxy: [`KeyError::TooFewForwarded`] (the layer's
    /// [`MissingKey`](super::MissingKey) behaviour, a 400 by default); an entry at the `n`-th
    /// place that is not an address is [`KeyError::MalformedForwarded`]. A peer outside the
    /// trusted ranges is the client, as without `hops`.
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// use tollgate::middleware::ClientIp;
    ///
    /// // A CDN, then a load balancer in 10.0.0.0/8 (the peer): two appending proxies.
    /// let behind_two = ClientIp::new(["10.0.0.0/8".parse()?]).hops(NonZeroUsize::new(2).unwrap());
    /// # let _ = behind_two;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn hops(self, n: NonZeroUsize) -> ClientIp {
        ClientIp {
            hops: Some(n),
            ..self
        }
    }

    /// The trusted proxies.
    pub fn trusted(&self) -> &[IpRange] {
        &self.trusted
    }

    fn is_trusted(&self, address: IpAddr) -> bool {
        self.trusted.iter().any(|range| range.contains(address))
    }

    /// The client's address, given the connection's peer and the request's headers.
    fn client(&self, peer: IpAddr, request: &Parts) -> Result<IpAddr, KeyError> {
        if !self.is_trusted(peer) {
            return Ok(peer);
        }
        match (self.header, self.hops) {
            (ForwardedHeader::XForwardedFor, None) => {
                self.walk(peer, forwarded::x_forwarded_for(&request.headers))
            }
            (ForwardedHeader::Forwarded, None) => self.walk(peer, forwarded::forwarded(&request.headers)),
            (ForwardedHeader::XForwardedFor, Some(n)) => {
                counted(n, forwarded::x_forwarded_for(&request.headers))
            }
            (ForwardedHeader::Forwarded, Some(n)) => counted(n, forwarded::forwarded(&request.headers)),
        }
    }

    /// The client among `hops`, read right to left (without allocating: the walk stops at
    /// the first address that is not a trusted proxy, usually one or two entries in).
    fn walk<'a>(&self, peer: IpAddr, hops: impl Iterator<Item = Hop<'a>>) -> Result<IpAddr, KeyError> {
        let mut rightmost = None;
        for hop in hops {
            match hop {
                Hop::Ip(address) if self.is_trusted(address) => {
                    rightmost.get_or_insert(address);
                }
                Hop::Ip(address) => return Ok(address),
                Hop::Unreadable(entry) => {
                    return Err(KeyError::MalformedForwarded {
                        entry: entry.to_owned(),
                    })
                }
            }
        }
        // Every entry is a trusted proxy (the loop returned on anything else). The right-most
        // was appended by the peer, which is trusted; anything to its left may have been
        // written by a client inside a trusted range.
        Ok(rightmost.unwrap_or(peer))
    }
}

/// The `n`-th of `hops`, read right to left ([`ClientIp::hops`]).
fn counted<'a>(n: NonZeroUsize, mut hops: impl Iterator<Item = Hop<'a>>) -> Result<IpAddr, KeyError> {
    match hops.nth(n.get() - 1) {
        Some(Hop::Ip(address)) => Ok(address),
        Some(Hop::Unreadable(entry)) => Err(KeyError::MalformedForwarded {
            entry: entry.to_owned(),
        }),
        None => Err(KeyError::TooFewForwarded { hops: n.get() }),
    }
}

impl KeyExtractor for ClientIp {
    type Key = IpAddr;

    fn extract(&self, request: &Parts) -> Result<IpAddr, KeyError> {
        self.client(peer_ip(request)?, request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::middleware::PeerAddr;

    fn request(peer: &str, header: (&str, &str)) -> Parts {
        let mut request = http::Request::builder()
            .header(header.0, header.1)
            .body(())
            .expect("a valid request")
            .into_parts()
            .0;
        let peer = format!("{peer}:40000").parse().expect("a test address");
        request.extensions.insert(PeerAddr(peer));
        request
    }

    fn client(extractor: &ClientIp, peer: &str, header: (&str, &str)) -> Result<String, KeyError> {
        extractor.extract(&request(peer, header)).map(|ip| ip.to_string())
    }

    #[test]
    fn the_rightmost_untrusted_address_is_the_client() -> Result<(), Box<dyn std::error::Error>> {
        let proxies = ClientIp::new(["10.0.0.0/8".parse()?, "192.0.2.1".parse()?]);
        let xff = "x-forwarded-for";
        // A spoofed left-most entry is ignored: the proxy appended the real client.
        assert_eq!(
            client(&proxies, "10.0.0.2", (xff, "6.6.6.6, 203.0.113.7"))?,
            "203.0.113.7"
        );
        // Trusted hops on the right are skipped.
        assert_eq!(
            client(
                &proxies,
                "10.0.0.2",
                (xff, "6.6.6.6, 203.0.113.7, 192.0.2.1, 10.9.9.9")
            )?,
            "203.0.113.7"
        );
        // An untrusted peer is the client, whatever it writes.
        assert_eq!(
            client(&proxies, "198.51.100.4", (xff, "203.0.113.7"))?,
            "198.51.100.4"
        );
        // Only trusted addresses: the right-most, which the peer proxy appended; the left-most
        // may be a client in a trusted range writing what it likes.
        assert_eq!(
            client(&proxies, "10.0.0.2", (xff, "10.1.1.1, 10.2.2.2"))?,
            "10.2.2.2"
        );
        assert_eq!(
            client(&proxies, "10.0.0.2", (xff, "10.66.66.66, 10.1.1.1, 10.2.2.2"))?,
            "10.2.2.2"
        );
        // No header: the peer.
        assert_eq!(client(&proxies, "10.0.0.2", ("x-other", "1.2.3.4"))?, "10.0.0.2");
        // Garbage in the trusted part of the chain is an error, not a guess.
        assert_eq!(
            client(&proxies, "10.0.0.2", (xff, "203.0.113.7, unknown")),
            Err(KeyError::MalformedForwarded {
                entry: "unknown".into()
            })
        );
        // Garbage to the left of the client is never read.
        assert_eq!(
            client(&proxies, "10.0.0.2", (xff, "garbage, 203.0.113.7"))?,
            "203.0.113.7"
        );
        Ok(())
    }

    #[test]
    fn hops_count_the_proxies_instead_of_recognizing_them() -> Result<(), Box<dyn std::error::Error>> {
        let two = NonZeroUsize::new(2).unwrap();
        // Clients and proxies share 10.0.0.0/8: the walk would go past a client there.
        let counted = ClientIp::new(["10.0.0.0/8".parse()?]).hops(two);
        let xff = "x-forwarded-for";
        // The CDN appended the client, the load balancer (the peer) the CDN's node.
        assert_eq!(
            client(&counted, "10.0.0.2", (xff, "6.6.6.6, 10.1.2.3, 198.51.100.4"))?,
            "10.1.2.3"
        );
        let walked = ClientIp::new(["10.0.0.0/8".parse()?, "198.51.100.4".parse()?]);
        assert_eq!(
            client(&walked, "10.0.0.2", (xff, "6.6.6.6, 10.1.2.3, 198.51.100.4"))?,
            "6.6.6.6",
            "the walk skips a client in a trusted range, to what it wrote"
        );
        // Across header lines, the last line's last entry first.
        let mut request = request("10.0.0.2", (xff, "6.6.6.6, 10.1.2.3"));
        request.headers.append(xff, "198.51.100.4".parse()?);
        assert_eq!(counted.extract(&request)?.to_string(), "10.1.2.3");
        // One proxy: the right-most entry, whatever it is.
        let one = ClientIp::new(["10.0.0.0/8".parse()?]).hops(NonZeroUsize::MIN);
        assert_eq!(client(&one, "10.0.0.2", (xff, "6.6.6.6, 10.9.9.9"))?, "10.9.9.9");
        // Fewer entries than proxies: the request did not come through all of them.
        assert_eq!(
            client(&counted, "10.0.0.2", (xff, "198.51.100.4")),
            Err(KeyError::TooFewForwarded { hops: 2 })
        );
        assert!(KeyError::TooFewForwarded { hops: 2 }.is_client_error());
        // The entry at the counted place must be an address; one further left is never read.
        assert_eq!(
            client(&counted, "10.0.0.2", (xff, "unknown, 198.51.100.4")),
            Err(KeyError::MalformedForwarded {
                entry: "unknown".into()
            })
        );
        assert_eq!(
            client(&counted, "10.0.0.2", (xff, "garbage, 10.1.2.3, 198.51.100.4"))?,
            "10.1.2.3"
        );
        // A peer outside the trusted ranges is the client, as without hops.
        assert_eq!(
            client(&counted, "203.0.113.9", (xff, "6.6.6.6, 10.1.2.3"))?,
            "203.0.113.9"
        );
        // The same count on `Forwarded`.
        let forwarded = ClientIp::new(["10.0.0.0/8".parse()?])
            .header(ForwardedHeader::Forwarded)
            .hops(two);
        let header = (
            "forwarded",
            r#"for=6.6.6.6, for="[2001:db8::5]:1234", for=198.51.100.4"#,
        );
        assert_eq!(client(&forwarded, "10.0.0.2", header)?, "2001:db8::5");
        Ok(())
    }

    #[test]
    fn the_forwarded_header_is_read_the_same_way() -> Result<(), Box<dyn std::error::Error>> {
        let proxies = ClientIp::new(["10.0.0.0/8".parse()?]).header(ForwardedHeader::Forwarded);
        let header = (
            "forwarded",
            r#"for=6.6.6.6, for="[2001:db8::5]:1234";proto=https, for=10.0.0.3"#,
        );
        assert_eq!(client(&proxies, "10.0.0.2", header)?, "2001:db8::5");
        // X-Forwarded-For is not read when Forwarded is chosen.
        assert_eq!(
            client(&proxies, "10.0.0.2", ("x-forwarded-for", "203.0.113.7"))?,
            "10.0.0.2"
        );
        Ok(())
    }

    #[test]
    fn an_unclosed_quote_cannot_swallow_the_proxys_entry() -> Result<(), Box<dyn std::error::Error>> {
        // The client ends its element with an open quote; a proxy appending on the same line
        // (as nginx's `$http_forwarded, for=$remote_addr` does) puts its entry inside it.
        let forwarded = ClientIp::new(["10.0.0.0/8".parse()?]).header(ForwardedHeader::Forwarded);
        let spoof = ("forwarded", r#"for=1.2.3.4;x=", for=203.0.113.7"#);
        assert_eq!(
            client(&forwarded, "10.0.0.2", spoof),
            Err(KeyError::MalformedForwarded {
                entry: r#"for=1.2.3.4;x=", for=203.0.113.7"#.into()
            })
        );
        let escaped = ("forwarded", r#"for=1.2.3.4;x="\", for="[2001:db8::5]""#);
        assert!(client(&forwarded, "10.0.0.2", escaped).is_err());
        // X-Forwarded-For has no quoted strings: a quote is one unreadable entry, left of the
        // client's.
        let xff = ClientIp::new(["10.0.0.0/8".parse()?]);
        assert_eq!(
            client(&xff, "10.0.0.2", ("x-forwarded-for", r#"", 203.0.113.7"#))?,
            "203.0.113.7"
        );
        // Bytes that are not visible ASCII spoil only their own entry, not the line.
        assert_eq!(
            client(&xff, "10.0.0.2", ("x-forwarded-for", "é, 203.0.113.7"))?,
            "203.0.113.7"
        );
        Ok(())
    }

    #[test]
    fn several_lines_are_walked_from_the_last_one() -> Result<(), Box<dyn std::error::Error>> {
        let mut parts = request("10.0.0.2", ("x-other", ""));
        for line in [
            "for=6.6.6.6, for=203.0.113.1",
            r#"for=203.0.113.2, for="[2001:db8::9]:80";proto=https,, for=10.1.1.1"#,
            "",
            "for=10.2.2.2, , for=10.3.3.3",
        ] {
            parts.headers.append("forwarded", line.parse()?);
        }
        let forwarded = ClientIp::new(["10.0.0.0/8".parse()?]).header(ForwardedHeader::Forwarded);
        assert_eq!(forwarded.extract(&parts)?.to_string(), "2001:db8::9");
        // With the IPv6 proxy trusted too, the walk goes on to the left of its line.
        let more = ClientIp::new(["10.0.0.0/8".parse()?, "2001:db8::/32".parse()?])
            .header(ForwardedHeader::Forwarded);
        assert_eq!(more.extract(&parts)?.to_string(), "203.0.113.2");
        // All trusted: the right-most entry of the last line.
        let all = ClientIp::new(["0.0.0.0/0".parse()?, "::/0".parse()?]).header(ForwardedHeader::Forwarded);
        assert_eq!(all.extract(&parts)?.to_string(), "10.3.3.3");
        Ok(())
    }

    #[test]
    fn no_peer_address_is_a_clear_error() {
        let parts = http::Request::new(()).into_parts().0;
        let error = ClientIp::new([]).extract(&parts).expect_err("no peer");
        assert_eq!(error, KeyError::MissingPeerAddr);
        assert!(
            error.to_string().contains("PeerAddrLayer"),
            "the message says how to fix it"
        );
    }
}
