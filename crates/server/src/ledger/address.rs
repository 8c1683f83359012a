//! How a session's client address is stored in the ledger (`[ledger] address`), a pure rule:
//! `full` keeps it, `truncated` keeps its network (IPv4 /24, IPv6 /48), `hashed` keeps a keyed
//! hash with a salt drawn for each UTC day (the salt lives in the database, so every server of a
//! cluster hashes a listener alike within a day; a listener cannot be followed across days).
//! Under `hashed` the address itself is never written anywhere.

use std::net::IpAddr;

use crate::config::AddressPolicy;

/// Milliseconds in a day (86,400,000): the salt's lifetime under `hashed`.
pub const DAY_MS: i64 = 86_400_000;

/// The UTC day number (days since 1970-01-01) of `at_ms` (Unix milliseconds).
pub fn day_of(at_ms: i64) -> i64 {
    at_ms.div_euclid(DAY_MS)
}

/// `ip` as stored under `policy`; `salt` is the day's salt (used by `hashed` only).
///
/// `full`: `192.0.2.7`; `truncated`: `192.0.2.0/24` or `2001:db8:1::/48`; `hashed`: 16 lower-case
/// hex digits, the first 8 bytes of SHA-256(salt ‖ the address's bytes). An IPv4-mapped IPv6
/// address is treated as IPv4 (a dual-stack socket reports IPv4 peers that way).
pub fn stored_address(policy: AddressPolicy, ip: IpAddr, salt: &[u8]) -> String {
    let ip = ip.to_canonical();
    match policy {
        AddressPolicy::Full => ip.to_string(),
        AddressPolicy::Truncated => match ip {
            IpAddr::V4(v4) => {
                let o = v4.octets();
                format!("{}.{}.{}.0/24", o[0], o[1], o[2])
            }
            IpAddr::V6(v6) => {
                let s = v6.segments();
                let net = std::net::Ipv6Addr::new(s[0], s[1], s[2], 0, 0, 0, 0, 0);
                format!("{net}/48")
            }
        },
        AddressPolicy::Hashed => {
            let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
            ctx.update(salt);
            match ip {
                IpAddr::V4(v4) => ctx.update(&v4.octets()),
                IpAddr::V6(v6) => ctx.update(&v6.octets()),
            }
            let digest = ctx.finish();
            digest.as_ref()[..8]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect()
        }
    }
}

/// A fresh random salt for one day (32 hex digits, 128 bits).
pub fn new_salt() -> String {
    let bytes: [u8; 16] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_and_truncated_forms() {
        let v4: IpAddr = "192.0.2.7".parse().unwrap();
        let v6: IpAddr = "2001:db8:1:2::7".parse().unwrap();
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(stored_address(AddressPolicy::Full, v4, b""), "192.0.2.7");
        assert_eq!(
            stored_address(AddressPolicy::Full, mapped, b""),
            "192.0.2.7"
        );
        assert_eq!(
            stored_address(AddressPolicy::Truncated, v4, b""),
            "192.0.2.0/24"
        );
        assert_eq!(
            stored_address(AddressPolicy::Truncated, v6, b""),
            "2001:db8:1::/48"
        );
    }

    #[test]
    fn hashes_depend_on_the_salt_and_never_show_the_address() {
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let a = stored_address(AddressPolicy::Hashed, ip, b"day-1");
        let b = stored_address(AddressPolicy::Hashed, ip, b"day-1");
        let c = stored_address(AddressPolicy::Hashed, ip, b"day-2");
        assert_eq!(a, b, "the same listener is the same within a day");
        assert_ne!(a, c, "and another across days");
        assert_eq!(a.len(), 16);
        assert!(a.bytes().all(|x| x.is_ascii_hexdigit()));
        assert!(!a.contains("192"));
        let other: IpAddr = "192.0.2.8".parse().unwrap();
        assert_ne!(a, stored_address(AddressPolicy::Hashed, other, b"day-1"));
    }

    #[test]
    fn days_are_utc_days() {
        assert_eq!(day_of(0), 0);
        assert_eq!(day_of(DAY_MS - 1), 0);
        assert_eq!(day_of(DAY_MS), 1);
        assert_eq!(day_of(-1), -1);
        assert_eq!(new_salt().len(), 32);
    }
}
