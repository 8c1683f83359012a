//! Source clients over raw sockets: the exact replies Icecast 2.4.4 gives, the refusals, and
//! bad sources (garbage, silence, inline metadata) that must not harm anything else.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use throng_proto::auth::basic_authorization;
use throng_proto::http::parse_response_head;

use crate::support::*;

fn source_head(method: &str, mount: &str, auth: Option<(&str, &str)>, extra: &str) -> String {
    let auth = auth
        .map(|(u, p)| format!("Authorization: {}\r\n", basic_authorization(u, p)))
        .unwrap_or_default();
    format!("{method} {mount} HTTP/1.1\r\n{auth}{extra}\r\n")
}

#[test]
fn put_with_expect_gets_100_then_exact_http10_200() {
    let srv = TestServer::start("");
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let head = source_head(
        "PUT",
        "/live.mp3",
        Some(("source", SOURCE_PW)),
        "Content-Type: audio/mpeg\r\nExpect: 100-continue\r\n",
    );
    s.write_all(head.as_bytes()).unwrap();
    let expected = b"HTTP/1.1 100 Continue\r\nContent-Length: 0\r\n\r\nHTTP/1.0 200 OK\r\n\r\n";
    let mut got = vec![0u8; expected.len()];
    s.read_exact(&mut got).unwrap();
    assert_eq!(got, expected);
    srv.wait_mount("/live.mp3");
}

#[test]
fn source_without_expect_gets_exactly_http10_200() {
    let srv = TestServer::start("");
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(1500)))
        .unwrap();
    let head = source_head(
        "SOURCE",
        "/live.mp3",
        Some(("source", SOURCE_PW)),
        "Content-Type: audio/mpeg\r\n",
    );
    s.write_all(head.as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 64];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, b"HTTP/1.0 200 OK\r\n\r\n", "nothing more may follow");
}

#[test]
fn wrong_password_gets_401_with_icecast_realm() {
    let srv = TestServer::start("");
    let out = exchange(
        srv.addr,
        source_head(
            "PUT",
            "/live.mp3",
            Some(("source", "nope")),
            "Content-Type: audio/mpeg\r\n",
        )
        .as_bytes(),
    );
    let (head, _) = parse_response_head(&out).unwrap().unwrap();
    assert_eq!(head.status, 401);
    assert_eq!(
        head.header("WWW-Authenticate"),
        Some("Basic realm=\"Icecast2 Server\"")
    );
    assert!(srv.ctx.registry.get("/live.mp3").is_none());
    // Wrong user with the right password is refused too.
    let status = status_of(
        srv.addr,
        source_head(
            "PUT",
            "/live.mp3",
            Some(("admin", SOURCE_PW)),
            "Content-Type: audio/mpeg\r\n",
        )
        .as_bytes(),
    );
    assert_eq!(status, 401);
}

#[test]
fn libshout_poke_without_credentials_gets_clean_401_with_allow() {
    let srv = TestServer::start("");
    // libshout 2.4.6's unauthenticated poke, byte for byte (docs/peers.md).
    let poke = b"SOURCE /live.mp3 HTTP/1.0\r\nHost: 127.0.0.1\r\nUser-Agent: libshout/2.4.6\r\nContent-Type: audio/mpeg\r\nContent-Length: 0\r\nConnection: Keep-Alive\r\nice-public: 0\r\nPrefer: return=minimal\r\n\r\n";
    let out = exchange(srv.addr, poke);
    let (head, len) = parse_response_head(&out).unwrap().unwrap();
    assert_eq!(head.status, 401);
    let allow = head.header("Allow").expect("Allow header");
    assert!(allow.contains("SOURCE"));
    let body_len: usize = head.header("Content-Length").unwrap().parse().unwrap();
    assert_eq!(out.len() - len, body_len, "a complete response, then close");
}

#[test]
fn mount_in_use_and_too_many_sources_get_403() {
    let srv = TestServer::start("[limits]\nsources = 1");
    let _a = Source::start(srv.addr, "/a.mp3", "PUT", 1.0);
    let hdr = "Content-Type: audio/mpeg\r\n";
    let again = source_head("PUT", "/a.mp3", Some(("source", SOURCE_PW)), hdr);
    let out = exchange(srv.addr, again.as_bytes());
    assert_eq!(parse_response_head(&out).unwrap().unwrap().0.status, 403);
    assert!(String::from_utf8_lossy(&out).contains("Mountpoint in use"));
    let other = source_head("SOURCE", "/b.mp3", Some(("source", SOURCE_PW)), hdr);
    let out = exchange(srv.addr, other.as_bytes());
    assert_eq!(parse_response_head(&out).unwrap().unwrap().0.status, 403);
    assert!(String::from_utf8_lossy(&out).contains("too many sources"));
}

#[test]
fn put_without_content_type_is_refused_source_without_is_mp3() {
    let srv = TestServer::start("");
    let status = status_of(
        srv.addr,
        source_head("PUT", "/x.mp3", Some(("source", SOURCE_PW)), "").as_bytes(),
    );
    assert_eq!(status, 403);
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.write_all(source_head("SOURCE", "/y.mp3", Some(("source", SOURCE_PW)), "").as_bytes())
        .unwrap();
    let mut reply = [0u8; 19];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"HTTP/1.0 200 OK\r\n\r\n");
    srv.wait_mount("/y.mp3");
    assert_eq!(
        srv.mount_status("/y.mp3").unwrap()["content_type"],
        "audio/mpeg"
    );
}

#[test]
fn per_mount_source_password_overrides_global() {
    let srv = TestServer::start("[[mount]]\nname = \"/own.mp3\"\npassword = \"own-pw\"");
    let hdr = "Content-Type: audio/mpeg\r\n";
    let global = source_head("PUT", "/own.mp3", Some(("source", SOURCE_PW)), hdr);
    assert_eq!(status_of(srv.addr, global.as_bytes()), 401);
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.write_all(source_head("PUT", "/own.mp3", Some(("source", "own-pw")), hdr).as_bytes())
        .unwrap();
    let mut reply = [0u8; 19];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"HTTP/1.0 200 OK\r\n\r\n");
}

#[test]
fn garbage_source_is_closed_and_other_listeners_keep_playing() {
    let srv = TestServer::start("");
    let _good = Source::start(srv.addr, "/good.mp3", "PUT", 1.0);
    srv.wait_mount("/good.mp3");
    let mut listener = Listener::open(srv.addr, "/good.mp3", false);
    let _ = listener.read_for(Duration::from_millis(300));

    let mut bad = TcpStream::connect(srv.addr).unwrap();
    bad.write_all(
        source_head(
            "PUT",
            "/bad.mp3",
            Some(("source", SOURCE_PW)),
            "Content-Type: audio/mpeg\r\n",
        )
        .as_bytes(),
    )
    .unwrap();
    let mut reply = [0u8; 19];
    bad.read_exact(&mut reply).unwrap();
    srv.wait_mount("/bad.mp3");
    // Text is never MP3: after 64 KiB of it the server must hang up.
    let junk = b"this is definitely not an mp3 frame, just text. ".repeat(4000);
    let _ = bad.write_all(&junk);
    wait_until(Duration::from_secs(5), || {
        srv.ctx.registry.get("/bad.mp3").is_none()
    })
    .expect("garbage source must be closed");
    bad.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut rest = Vec::new();
    let _ = bad.read_to_end(&mut rest);
    assert!(rest.is_empty());
    // The other mount's listener is unaffected.
    let got = listener.read_for(Duration::from_millis(2500));
    assert!(got.len() >= 8000, "listener starved: {} bytes", got.len());
    assert!(srv.ctx.registry.get("/good.mp3").is_some());
}

#[test]
fn silent_source_is_closed_after_source_timeout() {
    let srv = TestServer::start("[limits]\nsource-timeout = 1");
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.write_all(
        source_head(
            "PUT",
            "/quiet.mp3",
            Some(("source", SOURCE_PW)),
            "Content-Type: audio/mpeg\r\n",
        )
        .as_bytes(),
    )
    .unwrap();
    let mut reply = [0u8; 19];
    s.read_exact(&mut reply).unwrap();
    srv.wait_mount("/quiet.mp3");
    let t = Instant::now();
    wait_until(Duration::from_secs(5), || {
        srv.ctx.registry.get("/quiet.mp3").is_none()
    })
    .expect("silent source must time out");
    assert!(t.elapsed() >= Duration::from_millis(800));
}

#[test]
fn inline_icy_metadata_from_source_is_stripped_and_becomes_the_title() {
    let srv = TestServer::start("");
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.write_all(
        source_head(
            "PUT",
            "/icy.mp3",
            Some(("source", SOURCE_PW)),
            "Content-Type: audio/mpeg\r\nicy-metaint: 1000\r\n",
        )
        .as_bytes(),
    )
    .unwrap();
    let mut reply = [0u8; 19];
    s.read_exact(&mut reply).unwrap();
    srv.wait_mount("/icy.mp3");
    let frames: Vec<u8> = demo_frames()
        .iter()
        .take(300)
        .flat_map(|f| f.data.to_vec())
        .collect();
    let block = throng_proto::icy::metadata_block("Inline Title", None);
    let mut wire = Vec::new();
    for (i, piece) in frames.chunks(1000).enumerate() {
        wire.extend_from_slice(piece);
        if piece.len() == 1000 {
            wire.extend_from_slice(if i == 0 { &block } else { &[0u8][..] });
        }
    }
    s.write_all(&wire).unwrap();
    wait_until(Duration::from_secs(5), || {
        srv.mount_status("/icy.mp3")
            .is_some_and(|m| m["title"] == "Inline Title")
    })
    .expect("title from inline metadata");
    let mut l = Listener::open(srv.addr, "/icy.mp3", false);
    let body = l.read_for(Duration::from_millis(500));
    let (starts, n) = mp3_chain(&body);
    assert!(starts && n > 100, "listener must get clean frames, got {n}");
}

#[test]
fn reserved_or_malformed_mount_names_are_refused() {
    let srv = TestServer::start("");
    let hdr = "Content-Type: audio/mpeg\r\n";
    for name in [
        "/metrics",
        "/status-json.xsl",
        "/admin/stats",
        "//evil.example/x",
        "/",
    ] {
        let req = source_head("PUT", name, Some(("source", SOURCE_PW)), hdr);
        assert_eq!(status_of(srv.addr, req.as_bytes()), 400, "{name}");
    }
}
