//! Networks in configuration values (`addr` or `addr/len`, IPv4 or IPv6): the parser every
//! key that takes networks shares (`[paths]` proxies and filters, `[hls] cache-log-from`).

/// Parses `addr` or `addr/len` (IPv4 or IPv6) into a network address and prefix length in bits.
/// `None` when malformed or the prefix is longer than the address.
pub fn parse_cidr(s: &str) -> Option<(std::net::IpAddr, u8)> {
    let s = s.trim();
    let (addr, len) = match s.split_once('/') {
        Some((a, l)) => (
            a.parse::<std::net::IpAddr>().ok()?,
            Some(l.parse::<u8>().ok()?),
        ),
        None => (s.parse::<std::net::IpAddr>().ok()?, None),
    };
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = len.unwrap_or(max);
    (len <= max).then_some((addr, len))
}
