//! Access control (issue 11 items 3 and 4): canonical mount names for sources, listeners and
//! admin parameters, percent-encoded links, hidden mounts left out of `/metrics` and series
//! of ended mounts removed, throttling of failed logins, and the admin pages' framing and
//! cross-site request checks.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use throng_proto::auth::basic_authorization;

use crate::support::*;

/// Sends a `SOURCE` head for `target` (raw, still percent-encoded) with `auth` as the
/// `Authorization` value, and returns the status of the reply (the connection is closed
/// after the head, so a 200 does not wait for stream data).
fn source_status(addr: SocketAddr, target: &str, auth: &str) -> u16 {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let req = format!(
        "SOURCE {target} HTTP/1.0\r\nAuthorization: {auth}\r\nContent-Type: audio/mpeg\r\n\r\n"
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 512];
    while !out.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    let line = String::from_utf8_lossy(&out);
    line.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status for {target}: {line:?}"))
}

fn good_source_auth() -> String {
    basic_authorization("source", SOURCE_PW)
}

#[test]
fn non_canonical_mount_names_are_refused_for_sources() {
    let server = TestServer::start("");
    let auth = good_source_auth();
    for target in [
        "/%5Cevil.example/x.mp3",
        "/a/../b.mp3",
        "/a/./b.mp3",
        "/a/%2e%2e/b.mp3",
        "/%2E%2E/b.mp3",
        "/a%5Cb.mp3",
        "/a//b.mp3",
        "/a/",
        "/a%0d%0ab.mp3",
        "/a%00b.mp3",
        "/a%7fb.mp3",
    ] {
        assert_eq!(source_status(server.addr, target, &auth), 400, "{target}");
    }
    // Nothing was created, so nothing is listed or linked.
    assert!(server.ctx.registry.list().is_empty());
    // An ordinary name still works.
    let _s = Source::start(server.addr, "/ok.mp3", "SOURCE", 1.0);
    server.wait_mount("/ok.mp3");
}

#[test]
fn non_canonical_names_never_reach_a_listener_lookup_or_admin_command() {
    let server = TestServer::start("");
    let _s = Source::start(server.addr, "/b.mp3", "SOURCE", 1.0);
    server.wait_mount("/b.mp3");
    for target in [
        "/a/../b.mp3",
        "/a/%2e%2e/b.mp3",
        "/./b.mp3",
        "//b.mp3",
        "/%5Cb.mp3",
    ] {
        let (head, _) = http_get(server.addr, target, &[]);
        assert_eq!(head.status, 404, "GET {target}");
    }
    let admin = format!("Authorization: {}", basic_authorization("admin", ADMIN_PW));
    for q in [
        "/admin/listclients?mount=/a/../b.mp3",
        "/admin/listclients?mount=/a/%2e%2e/b.mp3",
        "/admin/stats?mount=%5Cb.mp3",
        "/admin/moveclients?mount=/b.mp3&destination=/x/../b.mp3",
        "/admin/fallbacks?mount=/b.mp3&fallback=/%5Cevil.example/x.mp3",
    ] {
        let (head, body) = http_get(server.addr, q, &[&admin]);
        assert_eq!(head.status, 400, "{q}");
        let body = String::from_utf8_lossy(&body);
        assert!(body.contains("Invalid mountpoint"), "{q}: {body}");
    }
}

#[test]
fn mount_links_on_the_station_page_are_percent_encoded() {
    let server = TestServer::start("");
    // A canonical name with characters that mean something in HTML and URLs.
    let _s = Source::start(server.addr, "/my%20radio%22%3E%3F%23.mp3", "SOURCE", 1.0);
    server.wait_mount("/my radio\">?#.mp3");
    let (head, body) = http_get(server.addr, "/", &[]);
    assert_eq!(head.status, 200);
    let page = String::from_utf8_lossy(&body);
    assert!(
        page.contains("href=\"/my%20radio%22%3E%3F%23.mp3\""),
        "{page}"
    );
    assert!(
        page.contains("src=\"/my%20radio%22%3E%3F%23.mp3\""),
        "{page}"
    );
    // Every link on the page is either an encoded mount or one of the fixed pages.
    for attr in page
        .split("href=\"")
        .skip(1)
        .chain(page.split("src=\"").skip(1))
    {
        let url = &attr[..attr.find('"').unwrap()];
        assert!(
            url.starts_with('/') && !url.starts_with("//") && !url.contains(['\\', ' ', '?']),
            "link {url:?} in {page}"
        );
    }
}
