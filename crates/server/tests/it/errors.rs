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

#[test]
fn at_the_clients_limit_a_new_listener_waits_for_a_slot_then_gets_503() {
    // clients = 3: the source and two listeners fill the server.
    let srv = TestServer::start("[limits]\nclients = 3");
    let _src = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    let a = Listener::open(srv.addr, "/live.mp3", false);
    let _b = Listener::open(srv.addr, "/live.mp3", false);
    // A third listener is held in the listen backlog, not refused, while a slot may free up...
    let addr = srv.addr;
    let waiting = std::thread::spawn(move || Listener::open(addr, "/live.mp3", false));
    std::thread::sleep(Duration::from_millis(500));
    drop(a);
    let admitted = waiting.join().unwrap();
    assert_eq!(admitted.head.status, 200, "admitted once a listener left");
    // ...and refused with 503 when none does within the grace period.
    let t = std::time::Instant::now();
    assert_eq!(status_of(srv.addr, b"GET /live.mp3 HTTP/1.0\r\n\r\n"), 503);
    assert!(
        t.elapsed() >= Duration::from_millis(1500),
        "503 only after waiting"
    );
    drop(admitted);
}
