//! Non-blocking client sockets bound to a chosen local address with `IP_BIND_ADDRESS_NO_PORT`.
//!
//! Linux allows about 28,000 ephemeral ports per (source address, destination). Binding each
//! listener to one of many loopback source addresses (127.0.0.2, 127.0.0.3, ...) multiplies that;
//! `IP_BIND_ADDRESS_NO_PORT` defers the port choice to `connect()`, so the bind does not reserve a
//! port for every destination.

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::AsRawFd;
use thiserror::Error;

/// A `FIRST-LAST` IPv4 range that could not be parsed.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("bad address range {0:?} (expected e.g. 127.0.0.2-127.0.0.40 or none)")]
pub struct BadRange(pub String);

/// Parses `FIRST-LAST` (inclusive, IPv4, at most 65,536 addresses), a single address, or `none`
/// (empty list).
pub fn parse_bind_range(s: &str) -> Result<Vec<Ipv4Addr>, BadRange> {
    let s = s.trim();
    if s.is_empty() || s.eq_ignore_ascii_case("none") {
        return Ok(Vec::new());
    }
    let (a, b) = s.split_once('-').unwrap_or((s, s));
    let a: Ipv4Addr = a.trim().parse().map_err(|_| BadRange(s.into()))?;
    let b: Ipv4Addr = b.trim().parse().map_err(|_| BadRange(s.into()))?;
    let (a, b) = (u32::from(a), u32::from(b));
    if b < a || b - a > 65_535 {
        return Err(BadRange(s.into()));
    }
    Ok((a..=b).map(Ipv4Addr::from).collect())
}

/// Starts a non-blocking TCP connect to `dest`, bound to `local` (port 0, chosen at connect time)
/// when given. Returns the socket; completion is signalled by writability.
pub fn start_connect(dest: SocketAddr, local: Option<Ipv4Addr>) -> io::Result<std::net::TcpStream> {
    let domain = if dest.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let sock = Socket::new(domain, Type::STREAM.nonblocking(), Some(Protocol::TCP))?;
    if let (Some(ip), true) = (local, dest.is_ipv4()) {
        set_bind_address_no_port(&sock)?;
        sock.bind(&SockAddr::from(SocketAddrV4::new(ip, 0)))?;
    }
    match sock.connect(&SockAddr::from(dest)) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    Ok(sock.into())
}

fn set_bind_address_no_port(sock: &Socket) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: valid fd, option value is a c_int of the stated size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            &one as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether `addr` is an IPv4 loopback address.
pub fn is_loopback_v4(addr: &SocketAddr) -> bool {
    matches!(addr, SocketAddr::V4(a) if a.ip().is_loopback())
}

/// Whether connections to `target` bind the source addresses `binds`: an IPv4 target on the
/// same side of loopback as they are (the default range, 127.0.0.2-127.0.0.40, applies to
/// loopback targets only; a host's own addresses, e.g. a load host's 10.0.0.20-10.0.0.29,
/// to targets off loopback).
pub fn binds_apply(target: &SocketAddr, binds: &[Ipv4Addr]) -> bool {
    match (target, binds.first()) {
        (SocketAddr::V4(t), Some(b)) => t.ip().is_loopback() == b.is_loopback(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        let r = parse_bind_range("127.0.0.2-127.0.0.40").unwrap();
        assert_eq!(r.len(), 39);
        assert_eq!(r[0], Ipv4Addr::new(127, 0, 0, 2));
        assert!(parse_bind_range("none").unwrap().is_empty());
        assert_eq!(parse_bind_range("127.0.0.9").unwrap().len(), 1);
        assert!(parse_bind_range("127.0.0.9-127.0.0.1").is_err());
    }

    #[test]
    fn bind_ranges_apply_on_their_side_of_loopback() {
        let lo: SocketAddr = "127.0.0.1:80".parse().unwrap();
        let far: SocketAddr = "10.1.2.3:80".parse().unwrap();
        let lo_binds = parse_bind_range("127.0.0.2-127.0.0.3").unwrap();
        let far_binds = parse_bind_range("10.1.2.20-10.1.2.29").unwrap();
        assert!(binds_apply(&lo, &lo_binds) && !binds_apply(&far, &lo_binds));
        assert!(binds_apply(&far, &far_binds) && !binds_apply(&lo, &far_binds));
        assert!(!binds_apply(&lo, &[]));
    }

    #[test]
    fn bound_connect_to_loopback() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = start_connect(l.local_addr().unwrap(), Some(Ipv4Addr::new(127, 0, 0, 7))).unwrap();
        let (_peer, from) = l.accept().unwrap();
        assert_eq!(from.ip().to_string(), "127.0.0.7");
        drop(s);
    }
}
