//! Address ranges (`10.0.0.0/8`, `2001:db8::/32`): the trusted proxies.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// A block of IP addresses, `address/prefix`, such as the addresses of trusted proxies.
///
/// IPv4-mapped IPv6 addresses (`::ffff:192.0.2.1`) are read as the IPv4 address they carry,
/// both in ranges and in the addresses tested. A mapped range keeps its IPv6 prefix, 96 bits
/// more than the IPv4 one: `::ffff:10.0.0.0/104` is `10.0.0.0/8`. A mapped range with a prefix
/// under /96 would reach past the mapped addresses (`::ffff:a00:0/8` is `::/8` in IPv6, not
/// `10.0.0.0/8`): it is an error.
///
/// ```
/// use tollgate::middleware::IpRange;
///
/// let private: IpRange = "10.0.0.0/8".parse()?;
/// assert!(private.contains("10.1.2.3".parse()?));
/// assert!(!private.contains("11.0.0.1".parse()?));
/// let one: IpRange = "2001:db8::1".parse()?; // a single address
/// assert!(one.contains("2001:db8::1".parse()?));
/// assert!("10.0.0.1/8".parse::<IpRange>().is_err()); // host bits set: a typo, refused
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IpRange {
    network: IpAddr,
    prefix: u8,
}

impl IpRange {
    /// The addresses whose first `prefix` bits are those of `network`.
    ///
    /// # Errors
    /// [`IpRangeError::PrefixTooLong`] when `prefix` exceeds the address's width (32 or 128);
    /// [`IpRangeError::MappedPrefixTooShort`] when `network` is IPv4-mapped and `prefix` under
    /// 96; [`IpRangeError::HostBitsSet`] when `network` has bits set after the prefix
    /// (`10.0.0.1/8` is most likely a typo for `10.0.0.1/32` or `10.0.0.0/8`).
    pub fn new(network: IpAddr, prefix: u8) -> Result<IpRange, IpRangeError> {
        let canonical = network.to_canonical();
        let prefix = if canonical == network {
            prefix
        } else {
            // IPv4-mapped: the IPv6 prefix covers the 96 bits of `::ffff:` first.
            if u32::from(prefix) > bits(network) {
                return Err(IpRangeError::PrefixTooLong {
                    prefix,
                    max: bits(network),
                });
            }
            prefix
                .checked_sub(96)
                .ok_or(IpRangeError::MappedPrefixTooShort { network, prefix })?
        };
        let network = canonical;
        let width = bits(network);
        if u32::from(prefix) > width {
            return Err(IpRangeError::PrefixTooLong { prefix, max: width });
        }
        let range = IpRange { network, prefix };
        if as_u128(network) & !range.mask() != 0 {
            return Err(IpRangeError::HostBitsSet { network, prefix });
        }
        Ok(range)
    }

    /// Whether `address` is in this range.
    pub fn contains(&self, address: IpAddr) -> bool {
        let address = address.to_canonical();
        address.is_ipv4() == self.network.is_ipv4() && as_u128(address) & self.mask() == as_u128(self.network)
    }

    /// The mask of the prefix, aligned as [`as_u128`] aligns addresses.
    fn mask(&self) -> u128 {
        let width = bits(self.network);
        let host_bits = width - u32::from(self.prefix);
        let all = if width == 32 {
            u128::from(u32::MAX)
        } else {
            u128::MAX
        };
        all.checked_shl(host_bits).unwrap_or(0) & all
    }
}

fn bits(address: IpAddr) -> u32 {
    match address {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

fn as_u128(address: IpAddr) -> u128 {
    match address {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// Reads `address/prefix`, or a bare address (a range of one).
impl FromStr for IpRange {
    type Err = IpRangeError;

    fn from_str(text: &str) -> Result<IpRange, IpRangeError> {
        let text = text.trim();
        let invalid = || IpRangeError::Invalid {
            text: text.to_owned(),
        };
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text, None),
        };
        let network: IpAddr = address.parse().map_err(|_| invalid())?;
        let prefix = match prefix {
            Some(prefix) => prefix.parse::<u8>().map_err(|_| invalid())?,
            // A single address: every bit of it, as written (128 for a mapped one).
            None => bits(network) as u8,
        };
        IpRange::new(network, prefix)
    }
}

impl fmt::Display for IpRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// An [`IpRange`] that tollgate refuses to build.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum IpRangeError {
    /// Not `address` or `address/prefix`.
    Invalid {
        /// The text that was read.
        text: String,
    },
    /// A prefix longer than the address.
    PrefixTooLong {
        /// The prefix asked for.
        prefix: u8,
        /// The address's width in bits.
        max: u32,
    },
    /// An IPv4-mapped network (`::ffff:a.b.c.d`) with a prefix under /96, which would reach
    /// past the mapped addresses.
    MappedPrefixTooShort {
        /// The network given.
        network: IpAddr,
        /// The prefix given.
        prefix: u8,
    },
    /// Bits set after the prefix.
    HostBitsSet {
        /// The address given.
        network: IpAddr,
        /// The prefix given.
        prefix: u8,
    },
}

impl fmt::Display for IpRangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpRangeError::Invalid { text } => write!(
                f,
                "`{text}` is not an IP range (write `10.0.0.0/8`, `2001:db8::/32` or a single address)"
            ),
            IpRangeError::PrefixTooLong { prefix, max } => {
                write!(f, "a prefix of /{prefix} is longer than the address (at most /{max})")
            }
            IpRangeError::MappedPrefixTooShort { network, prefix } => write!(
                f,
                "{network}/{prefix} is an IPv4-mapped range with a prefix under /96, which reaches past the mapped addresses (write the IPv4 range, or its mapped form with 96 more bits: ::ffff:10.0.0.0/104 for 10.0.0.0/8)"
            ),
            IpRangeError::HostBitsSet { network, prefix } => write!(
                f,
                "{network}/{prefix} has bits set after the prefix (write the network address, or /{} for one address)",
                bits(*network)
            ),
        }
    }
}

impl std::error::Error for IpRangeError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("a test address")
    }

    #[test]
    fn ranges_contain_exactly_their_addresses() {
        let range: IpRange = "192.168.0.0/16".parse().expect("valid");
        assert!(range.contains(ip("192.168.255.255")));
        assert!(!range.contains(ip("192.169.0.0")));
        assert!(
            range.contains(ip("::ffff:192.168.1.1")),
            "an IPv4-mapped address is its IPv4"
        );
        assert!(!range.contains(ip("::1")));
        let everything: IpRange = "0.0.0.0/0".parse().expect("valid");
        assert!(everything.contains(ip("255.255.255.255")));
        assert!(!everything.contains(ip("2001:db8::1")));
        let v6: IpRange = "2001:db8::/32".parse().expect("valid");
        assert!(v6.contains(ip("2001:db8:ffff::1")));
        assert!(!v6.contains(ip("2001:db9::")));
        let all_v6: IpRange = "::/0".parse().expect("valid");
        assert!(all_v6.contains(ip("ffff::1")));
    }

    #[test]
    fn bad_ranges_are_typed_errors() {
        assert_eq!(
            "10.0.0.0/33".parse::<IpRange>(),
            Err(IpRangeError::PrefixTooLong { prefix: 33, max: 32 })
        );
        assert!(matches!(
            "10.0.0.1/8".parse::<IpRange>(),
            Err(IpRangeError::HostBitsSet { prefix: 8, .. })
        ));
        assert!(matches!(
            "proxy.internal".parse::<IpRange>(),
            Err(IpRangeError::Invalid { .. })
        ));
        assert!(matches!(
            "10.0.0.0/x".parse::<IpRange>(),
            Err(IpRangeError::Invalid { .. })
        ));
        assert!(matches!(
            "::/129".parse::<IpRange>(),
            Err(IpRangeError::PrefixTooLong { .. })
        ));
    }

    #[test]
    fn mapped_ranges_keep_their_ipv6_prefix() -> Result<(), IpRangeError> {
        // `::ffff:a00:0/8` is `::/8` in IPv6: not `10.0.0.0/8`, and not a mapped range at all.
        assert_eq!(
            "::ffff:a00:0/8".parse::<IpRange>(),
            Err(IpRangeError::MappedPrefixTooShort {
                network: ip("::ffff:10.0.0.0"),
                prefix: 8
            })
        );
        assert!(matches!(
            "::ffff:0.0.0.0/95".parse::<IpRange>(),
            Err(IpRangeError::MappedPrefixTooShort { prefix: 95, .. })
        ));
        let mapped: IpRange = "::ffff:10.0.0.0/104".parse()?;
        assert_eq!(mapped, "10.0.0.0/8".parse()?);
        assert!(mapped.contains(ip("10.1.2.3")));
        assert!(mapped.contains(ip("::ffff:10.1.2.3")));
        assert!(!mapped.contains(ip("11.0.0.1")));
        assert_eq!("::ffff:0.0.0.0/96".parse::<IpRange>()?, "0.0.0.0/0".parse()?);
        assert_eq!("::ffff:192.0.2.1".parse::<IpRange>()?, "192.0.2.1/32".parse()?);
        assert!(matches!(
            "::ffff:10.0.0.1/104".parse::<IpRange>(),
            Err(IpRangeError::HostBitsSet { prefix: 8, .. })
        ));
        assert!(matches!(
            "::ffff:10.0.0.0/129".parse::<IpRange>(),
            Err(IpRangeError::PrefixTooLong {
                prefix: 129,
                max: 128
            })
        ));
        Ok(())
    }
}
