//! The PROXY protocol header (HAProxy, cloud network load balancers), versions 1 (text) and 2
//! (binary), as specified in HAProxy's `doc/proxy-protocol.txt` (2020-03-05 revision): a load
//! balancer that forwards a TCP connection sends one header before the client's bytes, naming
//! the client's address and port. The server must only believe it from configured load
//! balancers; the server decides that, this module only reads the header.
//!
//! - **v1**: `PROXY TCP4 1.2.3.4 5.6.7.8 1111 2222\r\n` (or `TCP6`, or `UNKNOWN ...`), at most
//!   107 bytes including the CRLF (spec 2.1).
//! - **v2**: the 12-byte signature `\r\n\r\n\0\r\nQUIT\n`, one version/command byte (`0x21`
//!   PROXY, `0x20` LOCAL), one family/protocol byte, a big-endian 16-bit length, then the
//!   addresses (12 bytes for IPv4, 36 for IPv6, 216 for UNIX) and TLVs, which are skipped
//!   (spec 2.2).
//!
//! [`parse`] is fed the bytes read so far and says whether they hold a whole header, need more,
//! or are no PROXY header at all (so a connection from a trusted address that sends plain HTTP
//! is served as plain HTTP).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The v2 signature (spec 2.2).
pub const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// Longest v1 header, CRLF included (spec 2.1: 107 bytes).
pub const V1_MAX: usize = 107;
/// Longest v2 header this parser accepts: the 16-byte fixed part and at most this many bytes of
/// addresses and TLVs (HAProxy sends a few hundred at most).
pub const V2_MAX_PAYLOAD: usize = 4096;

/// A whole PROXY header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyHeader {
    /// Protocol version (1 or 2).
    pub version: u8,
    /// The client's address and port; `None` for v1 `UNKNOWN`, v2 `LOCAL` (the balancer's own
    /// health check) and v2 families other than TCP/UDP over IPv4/IPv6: the TCP peer then
    /// stands for itself.
    pub source: Option<SocketAddr>,
    /// The address the client connected to on the balancer, when given.
    pub destination: Option<SocketAddr>,
}

/// Why bytes are not a valid PROXY header.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProxyError {
    /// The bytes do not begin with either version's signature: no PROXY header at all.
    #[error("not a PROXY protocol header")]
    NotProxy,
    /// A v1 line longer than 107 bytes, or one not ending in CRLF.
    #[error("PROXY v1 line too long or not ended by CRLF")]
    V1TooLong,
    /// A v1 line with a wrong protocol, address or port (spec 2.1).
    #[error("malformed PROXY v1 line: {0}")]
    V1Malformed(&'static str),
    /// A v2 header with an unknown version or command, or an address block shorter than its
    /// family needs (spec 2.2).
    #[error("malformed PROXY v2 header: {0}")]
    V2Malformed(&'static str),
    /// A v2 header announcing more than [`V2_MAX_PAYLOAD`] bytes.
    #[error("PROXY v2 header too long ({0} bytes)")]
    V2TooLong(usize),
}

/// Reads a PROXY header at the start of `buf`: `Ok(Some((header, length)))` when a whole one is
/// there (`length` bytes, after which the client's own bytes begin), `Ok(None)` when `buf` is a
/// prefix of one and more bytes are needed.
///
/// Errors: [`ProxyError::NotProxy`] when `buf` starts with neither signature (an empty `buf`
/// needs more bytes); the other variants for a broken header.
pub fn parse(buf: &[u8]) -> Result<Option<(ProxyHeader, usize)>, ProxyError> {
    const V1_PREFIX: &[u8] = b"PROXY ";
    let n = buf.len().min(V2_SIGNATURE.len());
    if buf[..n] == V2_SIGNATURE[..n] {
        return if n < V2_SIGNATURE.len() {
            Ok(None)
        } else {
            parse_v2(buf)
        };
    }
    let n = buf.len().min(V1_PREFIX.len());
    if buf[..n] == V1_PREFIX[..n] {
        return if n < V1_PREFIX.len() {
            Ok(None)
        } else {
            parse_v1(buf)
        };
    }
    Err(ProxyError::NotProxy)
}

fn parse_v1(buf: &[u8]) -> Result<Option<(ProxyHeader, usize)>, ProxyError> {
    let Some(end) = buf.windows(2).position(|w| w == b"\r\n") else {
        return if buf.len() >= V1_MAX {
            Err(ProxyError::V1TooLong)
        } else {
            Ok(None)
        };
    };
    let len = end + 2;
    if len > V1_MAX {
        return Err(ProxyError::V1TooLong);
    }
    let line =
        std::str::from_utf8(&buf[..end]).map_err(|_| ProxyError::V1Malformed("not ASCII"))?;
    let mut parts = line.split(' ');
    parts.next(); // "PROXY"
    let proto = parts.next().ok_or(ProxyError::V1Malformed("no protocol"))?;
    let v4 = match proto {
        "TCP4" => true,
        "TCP6" => false,
        // Spec 2.1: the receiver must ignore anything after UNKNOWN.
        "UNKNOWN" => {
            let h = ProxyHeader {
                version: 1,
                source: None,
                destination: None,
            };
            return Ok(Some((h, len)));
        }
        _ => {
            return Err(ProxyError::V1Malformed(
                "protocol is not TCP4, TCP6 or UNKNOWN",
            ))
        }
    };
    let fields: Vec<&str> = parts.collect();
    let [src, dst, sport, dport] = fields[..] else {
        return Err(ProxyError::V1Malformed("not four address fields"));
    };
    let ip = |s: &str| -> Result<IpAddr, ProxyError> {
        let ip: IpAddr = s
            .parse()
            .map_err(|_| ProxyError::V1Malformed("bad address"))?;
        if ip.is_ipv4() != v4 {
            return Err(ProxyError::V1Malformed("address of the wrong family"));
        }
        Ok(ip)
    };
    // Spec 2.1: ports are decimal 0..65535 without leading zeroes.
    let port = |s: &str| -> Result<u16, ProxyError> {
        if s.is_empty()
            || (s.len() > 1 && s.starts_with('0'))
            || !s.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(ProxyError::V1Malformed("bad port"));
        }
        s.parse().map_err(|_| ProxyError::V1Malformed("bad port"))
    };
    let h = ProxyHeader {
        version: 1,
        source: Some(SocketAddr::new(ip(src)?, port(sport)?)),
        destination: Some(SocketAddr::new(ip(dst)?, port(dport)?)),
    };
    Ok(Some((h, len)))
}

fn parse_v2(buf: &[u8]) -> Result<Option<(ProxyHeader, usize)>, ProxyError> {
    if buf.len() < 16 {
        return Ok(None);
    }
    let ver_cmd = buf[12];
    if ver_cmd >> 4 != 2 {
        return Err(ProxyError::V2Malformed("version is not 2"));
    }
    let local = match ver_cmd & 0x0f {
        0 => true,
        1 => false,
        _ => return Err(ProxyError::V2Malformed("unknown command")),
    };
    let fam = buf[13];
    let payload = usize::from(u16::from_be_bytes([buf[14], buf[15]]));
    if payload > V2_MAX_PAYLOAD {
        return Err(ProxyError::V2TooLong(payload));
    }
    let len = 16 + payload;
    if buf.len() < len {
        return Ok(None);
    }
    let a = &buf[16..len];
    let (source, destination) = match fam >> 4 {
        // AF_INET
        1 => {
            if a.len() < 12 {
                return Err(ProxyError::V2Malformed("IPv4 address block too short"));
            }
            let ip = |o: usize| IpAddr::V4(Ipv4Addr::new(a[o], a[o + 1], a[o + 2], a[o + 3]));
            let port = |o: usize| u16::from_be_bytes([a[o], a[o + 1]]);
            (
                Some(SocketAddr::new(ip(0), port(8))),
                Some(SocketAddr::new(ip(4), port(10))),
            )
        }
        // AF_INET6
        2 => {
            if a.len() < 36 {
                return Err(ProxyError::V2Malformed("IPv6 address block too short"));
            }
            let ip = |o: usize| {
                let mut b = [0u8; 16];
                b.copy_from_slice(&a[o..o + 16]);
                IpAddr::V6(Ipv6Addr::from(b))
            };
            let port = |o: usize| u16::from_be_bytes([a[o], a[o + 1]]);
            (
                Some(SocketAddr::new(ip(0), port(32))),
                Some(SocketAddr::new(ip(16), port(34))),
            )
        }
        // AF_UNSPEC, AF_UNIX: no usable address.
        _ => (None, None),
    };
    // Spec 2.2: with LOCAL the receiver must use the real connection endpoints.
    let (source, destination) = if local {
        (None, None)
    } else {
        (source, destination)
    };
    let h = ProxyHeader {
        version: 2,
        source,
        destination,
    };
    Ok(Some((h, len)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2(cmd: u8, fam: u8, addr: &[u8]) -> Vec<u8> {
        let mut b = V2_SIGNATURE.to_vec();
        b.push(cmd);
        b.push(fam);
        b.extend_from_slice(&(addr.len() as u16).to_be_bytes());
        b.extend_from_slice(addr);
        b
    }

    #[test]
    fn v1_tcp4_and_tcp6() {
        let buf = b"PROXY TCP4 192.0.2.7 198.51.100.1 56324 8000\r\nGET / HTTP/1.1\r\n";
        let (h, len) = parse(buf).unwrap().unwrap();
        assert_eq!(&buf[len..len + 3], b"GET");
        assert_eq!(h.version, 1);
        assert_eq!(h.source, Some("192.0.2.7:56324".parse().unwrap()));
        assert_eq!(h.destination, Some("198.51.100.1:8000".parse().unwrap()));
        let (h, _) = parse(b"PROXY TCP6 2001:db8::1 ::1 1 65535\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.source, Some("[2001:db8::1]:1".parse().unwrap()));
    }

    #[test]
    fn v1_unknown_has_no_address() {
        let (h, len) = parse(b"PROXY UNKNOWN ffff::1 whatever\r\nX")
            .unwrap()
            .unwrap();
        assert_eq!((h.source, len), (None, 32));
    }

    #[test]
    fn prefixes_need_more_bytes() {
        let full = b"PROXY TCP4 192.0.2.7 198.51.100.1 56324 8000\r\n";
        for n in 0..full.len() {
            assert_eq!(parse(&full[..n]), Ok(None), "{n} bytes");
        }
        let full = v2(0x21, 0x11, &[192, 0, 2, 7, 10, 0, 0, 1, 0x1f, 0x40, 0, 80]);
        for n in 0..full.len() {
            assert_eq!(parse(&full[..n]), Ok(None), "{n} bytes");
        }
    }

    #[test]
    fn plain_http_is_not_proxy() {
        for req in [
            &b"GET / HTTP/1.1\r\n"[..],
            b"PUT /live",
            b"POST /api",
            b"SOURCE /a",
            b"\r\n\r\nX",
        ] {
            assert_eq!(parse(req), Err(ProxyError::NotProxy), "{req:?}");
        }
    }

    #[test]
    fn v1_malformed_lines_are_refused() {
        let bad: [&[u8]; 6] = [
            b"PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n",
            b"PROXY TCP4 ::1 5.6.7.8 1 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1 65536\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 +1 2\r\n",
        ];
        for b in bad {
            assert!(matches!(parse(b), Err(ProxyError::V1Malformed(_))), "{b:?}");
        }
        let long = [b"PROXY ".as_slice(), &[b'x'; 120]].concat();
        assert_eq!(parse(&long), Err(ProxyError::V1TooLong));
    }

    #[test]
    fn v2_ipv4_ipv6_local_and_tlvs() {
        let mut addr = vec![192, 0, 2, 7, 10, 0, 0, 1, 0xdc, 0x04, 0x1f, 0x40];
        addr.extend_from_slice(&[0x04, 0, 1, 0]); // a NOOP TLV, skipped
        let mut buf = v2(0x21, 0x11, &addr);
        buf.extend_from_slice(b"GET");
        let (h, len) = parse(&buf).unwrap().unwrap();
        assert_eq!(h.version, 2);
        assert_eq!(h.source, Some("192.0.2.7:56324".parse().unwrap()));
        assert_eq!(h.destination, Some("10.0.0.1:8000".parse().unwrap()));
        assert_eq!(&buf[len..], b"GET");

        let mut a6 = vec![0u8; 36];
        a6[0] = 0x20;
        a6[1] = 0x01;
        a6[15] = 9;
        a6[31] = 1;
        a6[32..34].copy_from_slice(&443u16.to_be_bytes());
        let (h, _) = parse(&v2(0x21, 0x21, &a6)).unwrap().unwrap();
        assert_eq!(h.source, Some("[2001::9]:443".parse().unwrap()));

        let (h, len) = parse(&v2(0x20, 0x00, &[])).unwrap().unwrap();
        assert_eq!((h.source, len), (None, 16));
        let (h, _) = parse(&v2(0x20, 0x11, &addr)).unwrap().unwrap();
        assert_eq!(h.source, None, "LOCAL ignores the addresses");
    }

    #[test]
    fn v2_malformed_headers_are_refused() {
        assert!(matches!(
            parse(&v2(0x11, 0x11, &[0; 12])),
            Err(ProxyError::V2Malformed(_))
        ));
        assert!(matches!(
            parse(&v2(0x22, 0x11, &[0; 12])),
            Err(ProxyError::V2Malformed(_))
        ));
        assert!(matches!(
            parse(&v2(0x21, 0x11, &[0; 8])),
            Err(ProxyError::V2Malformed(_))
        ));
        assert!(matches!(
            parse(&v2(0x21, 0x21, &[0; 12])),
            Err(ProxyError::V2Malformed(_))
        ));
        let mut big = V2_SIGNATURE.to_vec();
        big.extend_from_slice(&[0x21, 0x11, 0xff, 0xff]);
        assert_eq!(parse(&big), Err(ProxyError::V2TooLong(65535)));
    }
}
