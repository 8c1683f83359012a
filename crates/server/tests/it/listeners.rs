//! Listener requests: Icecast's response head, HEAD and OPTIONS, burst-on-connect on a frame
//! boundary, counts that follow hang-ups at once, max-listeners, and the end of a source.

use std::io::Read;
use std::time::{Duration, Instant};

use crate::support::*;

#[test]
fn listener_head_is_icecast_shaped() {
    let srv = TestServer::start("");
    let _src = Source::start_with(
        srv.addr,
        "/live.mp3",
        "PUT",
        1.0,
        &["ice-genre: Jazz", "ice-public: 1"],
    );
    srv.wait_mount("/live.mp3");
    let l = Listener::open(srv.addr, "/live.mp3", false);
    let h = &l.head;
    assert_eq!((h.status, h.version.as_str()), (200, "HTTP/1.0"));
    assert_eq!(h.header("Content-Type"), Some("audio/mpeg"));
    assert_eq!(h.header("Cache-Control"), Some("no-cache, no-store"));
    assert_eq!(h.header("Pragma"), Some("no-cache"));
    assert_eq!(h.header("Expires"), Some("Mon, 26 Jul 1997 05:00:00 GMT"));
    assert_eq!(h.header("Access-Control-Allow-Origin"), Some("*"));
    assert!(h
        .header("Access-Control-Expose-Headers")
        .unwrap()
        .contains("Icy-MetaInt"));
    assert_eq!(h.header("icy-name"), Some("Test Stream"));
    assert_eq!(h.header("icy-genre"), Some("Jazz"));
    assert_eq!(h.header("icy-br"), Some("64"));
    assert_eq!(h.header("icy-pub"), Some("1"));
    assert_eq!(h.header("icy-metaint"), None, "only when asked for");
    let l = Listener::open(srv.addr, "/live.mp3", true);
    assert_eq!(l.head.header("icy-metaint"), Some("16000"));
}

#[test]
fn head_gets_headers_only_and_options_gets_cors() {
    let srv = TestServer::start("");
    let _src = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    let out = exchange(srv.addr, b"HEAD /live.mp3 HTTP/1.1\r\nHost: x\r\n\r\n");
    let (head, len) = throng_proto::http::parse_response_head(&out)
        .unwrap()
        .unwrap();
    assert_eq!(head.status, 200);
    assert_eq!(head.header("Content-Type"), Some("audio/mpeg"));
    assert_eq!(out.len(), len, "no body for HEAD");
    assert_eq!(
        srv.ctx
            .registry
            .get("/live.mp3")
            .unwrap()
            .listeners
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    let out = exchange(
        srv.addr,
        b"OPTIONS /live.mp3 HTTP/1.1\r\nOrigin: http://example.org\r\nAccess-Control-Request-Headers: icy-metadata\r\n\r\n",
    );
    let (head, _) = throng_proto::http::parse_response_head(&out)
        .unwrap()
        .unwrap();
    assert_eq!(head.status, 204);
    assert!(head
        .header("Access-Control-Allow-Headers")
        .unwrap()
        .contains("Icy-MetaData"));
    assert!(head
        .header("Access-Control-Allow-Methods")
        .unwrap()
        .contains("GET"));
}

#[test]
fn burst_starts_on_a_frame_and_fills_burst_size_at_once() {
    let srv = TestServer::start("");
    let _src = Source::start(srv.addr, "/live.mp3", "PUT", 20.0);
    srv.wait_mount("/live.mp3");
    // Let more than a burst's worth accumulate (20× real time: ~160 KB/s).
    std::thread::sleep(Duration::from_millis(1500));
    let t = Instant::now();
    let mut l = Listener::open(srv.addr, "/live.mp3", false);
    let ttfb = t.elapsed();
    let body = l.read_for(Duration::from_millis(300));
    let (starts, frames) = mp3_chain(&body);
    assert!(starts, "burst must start on an MP3 frame header");
    assert!(frames > 250, "burst must be whole frames, got {frames}");
    assert!(
        body.len() >= 60_000,
        "burst of ~64 KiB expected, got {}",
        body.len()
    );
    assert!(ttfb < Duration::from_secs(2));
}

#[test]
fn hang_up_leaves_the_count_at_once() {
    // With a 5 s write interval no write can reveal the hang-up within the wait below: only the
    // shard's read readiness can.
    let srv = TestServer::start("[limits]\nwrite-interval-ms = 5000");
    let _src = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    let mount = srv.ctx.registry.get("/live.mp3").unwrap();
    let count = || mount.listeners.load(std::sync::atomic::Ordering::Relaxed);
    let listeners: Vec<Listener> = (0..5)
        .map(|_| Listener::open(srv.addr, "/live.mp3", false))
        .collect();
    wait_until(Duration::from_secs(2), || count() == 5).expect("5 listeners counted");
    drop(listeners);
    // Well under one write interval: the shard sees the hang-up through read readiness.
    wait_until(Duration::from_millis(1500), || count() == 0).expect("count must drop at once");
    assert_eq!(srv.mount_status("/live.mp3").unwrap()["listeners"], 0);
}

#[test]
fn max_listeners_is_enforced_with_403() {
    let srv = TestServer::start("[[mount]]\nname = \"/small.mp3\"\nmax-listeners = 2");
    let _src = Source::start(srv.addr, "/small.mp3", "PUT", 1.0);
    srv.wait_mount("/small.mp3");
    let _a = Listener::open(srv.addr, "/small.mp3", false);
    let _b = Listener::open(srv.addr, "/small.mp3", false);
    assert_eq!(status_of(srv.addr, b"GET /small.mp3 HTTP/1.0\r\n\r\n"), 403);
}

#[test]
fn listeners_are_closed_after_the_source_ends() {
    let srv = TestServer::start("");
    let src = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    let mut l = Listener::open(srv.addr, "/live.mp3", false);
    let _ = l.read_for(Duration::from_millis(200));
    src.stop();
    l.stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut rest = Vec::new();
    let r = l.stream.read_to_end(&mut rest);
    assert!(r.is_ok(), "clean close expected, got {r:?}");
    wait_until(Duration::from_secs(2), || {
        srv.ctx.registry.get("/live.mp3").is_none()
    })
    .unwrap();
    assert_eq!(status_of(srv.addr, b"GET /live.mp3 HTTP/1.0\r\n\r\n"), 404);
}
