//! Keying IPv6 clients by their network: a client that holds a whole /64 is one client.

use std::net::{IpAddr, Ipv6Addr};

use http::request::Parts;

use super::ip_range::IpRangeError;
use super::key::{KeyError, KeyExtractor};

/// Keys an IPv6 client by the first `prefix` bits of its address, and an IPv4 client (and an
/// IPv4-mapped IPv6 one) by its whole address, around any extractor that keys by address
/// ([`PeerIp`](super::PeerIp), [`ClientIp`](super::ClientIp)).
///
/// An IPv6 client is usually given a whole /64 (often more) and can use a new address for every
/// request: keyed by its full address it gets a fresh quota each time, and it can fill a keyed
/// limiter's table with keys that carry debt, so that new clients meet the table's
/// [`WhenFull`](crate::WhenFull) policy. Keyed by its /64 it is one client. A shorter prefix
/// (a /56, a /48) puts every client of that network under one quota.
///
/// Addresses that carry an IPv4 client inside an IPv6 prefix are cut too: behind a NAT64
/// gateway (`64:ff9b::/96`) or a Teredo relay (`2001::/32`) many clients share one /64, and so
/// one key. If your traffic comes through such translators, key those ranges by their full
/// address with a [`KeyFn`](super::KeyFn) instead.
///
/// ```
/// use tollgate::middleware::{Ipv6Prefix, PeerIp};
///
/// let by_network = Ipv6Prefix::new(PeerIp, 64)?;
/// assert!(Ipv6Prefix::new(PeerIp, 129).is_err());
/// # let _ = by_network;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Ipv6Prefix<X> {
    inner: X,
    prefix: u8,
}

impl<X> Ipv6Prefix<X> {
    /// Keys by `inner`'s address, with an IPv6 address cut to its first `prefix` bits.
    ///
    /// # Errors
    /// [`IpRangeError::PrefixTooLong`] when `prefix` is above 128.
    pub fn new(inner: X, prefix: u8) -> Result<Self, IpRangeError> {
        if prefix > 128 {
            return Err(IpRangeError::PrefixTooLong {
                prefix,
                max: Ipv6Addr::BITS,
            });
        }
        Ok(Ipv6Prefix { inner, prefix })
    }

    /// The prefix an IPv6 address is cut to.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// The network `address` is keyed by: an IPv6 address with the bits after the prefix
    /// cleared; an IPv4 or IPv4-mapped address as the IPv4 address.
    pub fn network(&self, address: IpAddr) -> IpAddr {
        match address.to_canonical() {
            IpAddr::V6(v6) => {
                let host_bits = Ipv6Addr::BITS - u32::from(self.prefix);
                let mask = u128::MAX.checked_shl(host_bits).unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
            }
            v4 => v4,
        }
    }
}

impl<X: KeyExtractor<Key = IpAddr>> KeyExtractor for Ipv6Prefix<X> {
    type Key = IpAddr;

    fn extract(&self, request: &Parts) -> Result<IpAddr, KeyError> {
        self.inner.extract(request).map(|address| self.network(address))
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;
    use crate::middleware::{PeerAddr, PeerIp};

    fn from(peer: &str) -> Parts {
        let peer: IpAddr = peer.parse().unwrap();
        let mut request = http::Request::new(());
        request
            .extensions_mut()
            .insert(PeerAddr(SocketAddr::new(peer, 4242)));
        request.into_parts().0
    }

    fn key(prefix: u8, peer: &str) -> IpAddr {
        Ipv6Prefix::new(PeerIp, prefix)
            .unwrap()
            .extract(&from(peer))
            .unwrap()
    }

    #[test]
    fn an_ipv6_client_is_keyed_by_its_network() {
        let network: IpAddr = "2001:db8:1:2::".parse().unwrap();
        assert_eq!(key(64, "2001:db8:1:2:aaaa:bbbb:cccc:dddd"), network);
        assert_eq!(key(64, "2001:db8:1:2::1"), network);
        assert_ne!(key(64, "2001:db8:1:3::1"), network);
        assert_eq!(
            key(56, "2001:db8:1:2ff::1"),
            "2001:db8:1:200::".parse::<IpAddr>().unwrap()
        );
        assert_eq!(key(128, "2001:db8::1"), "2001:db8::1".parse::<IpAddr>().unwrap());
        assert_eq!(key(0, "2001:db8::1"), IpAddr::V6(Ipv6Addr::UNSPECIFIED));
    }

    #[test]
    fn an_ipv4_client_keeps_its_whole_address() {
        for prefix in [0, 1, 64, 128] {
            assert_eq!(key(prefix, "192.0.2.7"), "192.0.2.7".parse::<IpAddr>().unwrap());
            assert_eq!(
                key(prefix, "::ffff:192.0.2.7"),
                "192.0.2.7".parse::<IpAddr>().unwrap()
            );
        }
    }

    #[test]
    fn a_prefix_longer_than_an_address_is_refused() {
        assert_eq!(
            Ipv6Prefix::new(PeerIp, 129).unwrap_err(),
            IpRangeError::PrefixTooLong {
                prefix: 129,
                max: 128
            }
        );
        assert_eq!(Ipv6Prefix::new(PeerIp, 128).unwrap().prefix(), 128);
    }

    #[test]
    fn without_an_address_the_inner_error_stands() {
        let request = http::Request::new(()).into_parts().0;
        assert!(matches!(
            Ipv6Prefix::new(PeerIp, 64).unwrap().extract(&request),
            Err(KeyError::MissingPeerAddr)
        ));
    }
}
