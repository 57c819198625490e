//! Trusted ranges that trust everyone: a range (or a list of them) holding every public
//! address takes every client for a proxy, and lets each pick its own key by writing the
//! forwarding header.

use std::net::IpAddr;

use tollgate::middleware::IpRange;

/// Addresses no client on the Internet connects from: IPv4's private, shared, loopback,
/// link-local, documentation, benchmarking, multicast and reserved blocks (RFC 6890), and
/// every IPv6 address outside global unicast, `2000::/3` (RFC 4291 section 2.4), with
/// documentation's `2001:db8::/32`.
const NOT_PUBLIC: &[&str] = &[
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.2.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "224.0.0.0/3",
    "::/3",
    "4000::/2",
    "8000::/1",
    "2001:db8::/32",
];

/// The family (`"IPv4"` or `"IPv6"`) whose every public address `trusted` holds, alone or
/// together: `0.0.0.0/0`, `::/0`, `2000::/3`, `::ffff:0:0/96`, `0.0.0.0/1,128.0.0.0/1`. `None`
/// when clients outside the ranges remain in both.
pub(crate) fn trusts_everyone(trusted: &[IpRange]) -> Option<&'static str> {
    let blocks = |v4: bool| -> Vec<(u128, u128)> {
        trusted
            .iter()
            .filter_map(interval)
            .filter(|&(is_v4, _)| is_v4 == v4)
            .map(|(_, block)| block)
            .collect()
    };
    [true, false].into_iter().find_map(|v4| {
        let mut blocks_of_family = blocks(v4);
        if blocks_of_family.is_empty() {
            return None;
        }
        blocks_of_family.extend(
            NOT_PUBLIC
                .iter()
                .filter_map(|text| text.parse::<IpRange>().ok())
                .filter_map(|range| interval(&range))
                .filter(|&(is_v4, _)| is_v4 == v4)
                .map(|(_, block)| block),
        );
        let last = if v4 { u128::from(u32::MAX) } else { u128::MAX };
        covers(blocks_of_family, last).then_some(if v4 { "IPv4" } else { "IPv6" })
    })
}

/// The range's family (IPv4: true) and its first and last addresses as integers, read from
/// its canonical form (an IPv4-mapped range is its IPv4 range).
fn interval(range: &IpRange) -> Option<(bool, (u128, u128))> {
    let text = range.to_string();
    let (address, prefix) = text.split_once('/')?;
    let address: IpAddr = address.parse().ok()?;
    let prefix: u32 = prefix.parse().ok()?;
    let (v4, first, width) = match address {
        IpAddr::V4(v4) => (true, u128::from(u32::from(v4)), 32u32),
        IpAddr::V6(v6) => (false, u128::from(v6), 128),
    };
    let host_bits = width.checked_sub(prefix)?;
    let span = 1u128.checked_shl(host_bits).map_or(u128::MAX, |size| size - 1);
    Some((v4, (first, first | span)))
}

/// Whether the blocks together cover every integer from 0 to `last`.
fn covers(mut blocks: Vec<(u128, u128)>, last: u128) -> bool {
    blocks.sort_unstable();
    // The first integer not yet covered; `None` once everything up to `last` is.
    let mut next = Some(0u128);
    for (first, end) in blocks {
        match next {
            Some(uncovered) if first > uncovered => return false,
            Some(uncovered) if end >= uncovered => next = end.checked_add(1),
            _ => {}
        }
    }
    next.is_none_or(|uncovered| uncovered > last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(list: &str) -> Vec<IpRange> {
        list.split(',').filter_map(|range| range.parse().ok()).collect()
    }

    #[test]
    fn ranges_holding_every_public_address_are_found() {
        for everyone in [
            "0.0.0.0/0",
            "::/0",
            "::/1",
            "2000::/3",
            "::ffff:0:0/96",
            "0.0.0.0/1,128.0.0.0/1",
            "10.0.0.0/8,0.0.0.0/0",
            "1.0.0.0/8,2.0.0.0/7,4.0.0.0/6,8.0.0.0/5,16.0.0.0/4,32.0.0.0/3,64.0.0.0/2,128.0.0.0/2,192.0.0.0/3",
        ] {
            assert!(trusts_everyone(&ranges(everyone)).is_some(), "{everyone}");
        }
        assert_eq!(trusts_everyone(&ranges("10.0.0.0/8,::/0")), Some("IPv6"));
        assert_eq!(trusts_everyone(&ranges("::ffff:0:0/96")), Some("IPv4"));
    }

    #[test]
    fn proxies_ranges_leave_clients_outside() {
        for proxies in [
            "10.0.0.0/8",
            "127.0.0.0/8",
            "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7",
            "0.0.0.0/1",
            "2001:db8::/32",
            "2000::/4",
            "203.0.113.7",
        ] {
            assert_eq!(trusts_everyone(&ranges(proxies)), None, "{proxies}");
        }
    }
}
