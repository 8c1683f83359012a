//! Malformed, oversized, slow and unknown requests: each gets a clear status and a close.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::support::*;

#[test]
fn malformed_head_gets_400() {
    let srv = TestServer::start("");
    assert_eq!(status_of(srv.addr, b"GARBAGE\r\n\r\n"), 400);
    assert_eq!(status_of(srv.addr, b"GET /x HTTP/9.9\r\n\r\n"), 400);
    assert_eq!(
        status_of(srv.addr, b"GET / HTTP/1.0\r\nBad Header Line\r\n\r\n"),
        400
    );
}

#[test]
fn oversized_head_gets_431() {
    let srv = TestServer::start("");
    let mut req = b"GET /x HTTP/1.0\r\nX-Long: ".to_vec();
    req.extend(std::iter::repeat_n(b'a', 10_000));
    req.extend_from_slice(b"\r\n\r\n");
    assert_eq!(status_of(srv.addr, &req), 431);
}

#[test]
fn unknown_method_gets_405_and_unknown_mount_404() {
    let srv = TestServer::start("");
    assert_eq!(status_of(srv.addr, b"DELETE /x HTTP/1.0\r\n\r\n"), 405);
    assert_eq!(
        status_of(srv.addr, b"GET /nothing.mp3 HTTP/1.0\r\n\r\n"),
        404
    );
}

#[test]
fn slow_head_gets_408_after_header_timeout() {
    let srv = TestServer::start("[limits]\nheader-timeout = 1");
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /x HTTP/1.0\r\n").unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    assert!(
        out.starts_with(b"HTTP/1.0 408"),
        "{:?}",
        String::from_utf8_lossy(&out)
    );
}

#[test]
fn bad_requests_do_not_disturb_a_listener() {
    let srv = TestServer::start("");
    let _src = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    let mut l = Listener::open(srv.addr, "/live.mp3", false);
    let _ = l.read_for(Duration::from_millis(200));
    for raw in [
        &b"GARBAGE\r\n\r\n"[..],
        b"\x16\x03\x01\x00\xff",
        b"PUT /live.mp3 HTTP/1.0\r\n\r\n",
    ] {
        let _ = exchange(srv.addr, raw);
    }
    let got = l.read_for(Duration::from_millis(2500));
    assert!(got.len() >= 8000, "listener got {} bytes", got.len());
}
