//! The client address behind trusted reverse proxies, from `X-Forwarded-For` (Icecast-KH
//! `<x-forwarded-for>`; Icecast 2.4.4 has no such option).
//!
//! Each proxy appends the address it received the request from, so the header reads
//! `client, proxy1, proxy2` and the TCP peer is the last proxy. Only entries added by trusted
//! proxies can be believed: the client is the **right-most entry that is not a trusted proxy**,
//! found by walking from the right while entries are trusted. Everything left of it could have
//! been written by the client itself. (Icecast-KH takes the left-most entry, which a client can
//! forge.) When every entry is trusted, the left-most one is the client. A malformed entry
//! (not an address, e.g. `unknown`) stops the walk: the client is then the last good address
//! seen, which is a trusted proxy.

use std::net::{IpAddr, SocketAddr};

/// Parses one `X-Forwarded-For` entry: an IPv4 or IPv6 address, optionally with a port
/// (`1.2.3.4:5678`, `[2001:db8::1]:443`) or in brackets. IPv4-mapped IPv6 addresses become
/// IPv4. `None` when it is no address.
pub fn parse_entry(entry: &str) -> Option<IpAddr> {
    let e = entry.trim();
    let ip = e
        .parse::<IpAddr>()
        .ok()
        .or_else(|| e.parse::<SocketAddr>().ok().map(|s| s.ip()))
        .or_else(|| {
            e.strip_prefix('[')
                .and_then(|r| r.strip_suffix(']'))
                .and_then(|r| r.parse::<IpAddr>().ok())
        })?;
    Some(ip.to_canonical())
}

/// The client address of a request received from `peer`, given the values of its
/// `X-Forwarded-For` headers in order (several headers read as one comma-separated list) and
/// which addresses are trusted proxies. When `peer` is not trusted the header is ignored and
/// `peer` is the client. See the module documentation for the rule.
pub fn client_ip<'a>(
    peer: IpAddr,
    forwarded_for: impl IntoIterator<Item = &'a str>,
    is_trusted: impl Fn(IpAddr) -> bool,
) -> IpAddr {
    let peer = peer.to_canonical();
    if !is_trusted(peer) {
        return peer;
    }
    let entries: Vec<&str> = forwarded_for
        .into_iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect();
    let mut client = peer;
    for entry in entries.iter().rev() {
        let Some(ip) = parse_entry(entry) else {
            break;
        };
        client = ip;
        if !is_trusted(ip) {
            break;
        }
    }
    client
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// Trusts 10.0.0.0/8 and ::1.
    fn trusted(a: IpAddr) -> bool {
        match a {
            IpAddr::V4(v4) => v4.octets()[0] == 10,
            IpAddr::V6(v6) => v6.is_loopback(),
        }
    }

    #[test]
    fn untrusted_peer_is_the_client() {
        assert_eq!(
            client_ip(ip("192.0.2.7"), ["203.0.113.1"], trusted),
            ip("192.0.2.7")
        );
    }

    #[test]
    fn right_most_untrusted_entry_wins() {
        // The client forged "1.1.1.1"; the proxy chain appended the real address.
        assert_eq!(
            client_ip(ip("10.0.0.2"), ["1.1.1.1, 203.0.113.9, 10.0.0.1"], trusted),
            ip("203.0.113.9")
        );
        // Several headers read as one list.
        assert_eq!(
            client_ip(ip("10.0.0.2"), ["1.1.1.1", "203.0.113.9"], trusted),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn all_trusted_takes_the_left_most_and_no_header_keeps_the_peer() {
        assert_eq!(
            client_ip(ip("10.0.0.2"), ["10.1.1.1, 10.0.0.1"], trusted),
            ip("10.1.1.1")
        );
        assert_eq!(client_ip(ip("10.0.0.2"), [], trusted), ip("10.0.0.2"));
        assert_eq!(client_ip(ip("10.0.0.2"), [" , "], trusted), ip("10.0.0.2"));
    }

    #[test]
    fn malformed_entries_stop_the_walk() {
        assert_eq!(
            client_ip(ip("10.0.0.2"), ["203.0.113.9, unknown, 10.0.0.1"], trusted),
            ip("10.0.0.1")
        );
        assert_eq!(
            client_ip(ip("10.0.0.2"), ["unknown"], trusted),
            ip("10.0.0.2")
        );
    }

    #[test]
    fn entries_with_ports_brackets_and_mapped_addresses() {
        assert_eq!(parse_entry("1.2.3.4:5678"), Some(ip("1.2.3.4")));
        assert_eq!(parse_entry("[2001:db8::1]:443"), Some(ip("2001:db8::1")));
        assert_eq!(parse_entry("[2001:db8::1]"), Some(ip("2001:db8::1")));
        assert_eq!(parse_entry("::ffff:192.0.2.1"), Some(ip("192.0.2.1")));
        assert_eq!(parse_entry("_hidden"), None);
        // A mapped peer address is trusted as its IPv4 form.
        assert_eq!(
            client_ip(ip("::ffff:10.0.0.2"), ["198.51.100.4"], trusted),
            ip("198.51.100.4")
        );
    }
}
