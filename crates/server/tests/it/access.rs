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
    // The page is static: its script builds the mount links (checked encoded in a browser by
    // `web_page::station_page_links_of_odd_mount_names_are_percent_encoded`); no mount name is
    // pasted into the HTML.
    assert!(!page.contains("my radio"), "{page}");
    // Every link on the page is one of the fixed pages.
    for attr in page
        .split("href=\"")
        .skip(1)
        .chain(page.split("src=\"").skip(1))
    {
        let url = &attr[..attr.find('"').unwrap()];
        assert!(
            // (`#…`: the skip link to the streams.)
            url.starts_with('#')
                || url.starts_with('/')
                    && !url.starts_with("//")
                    && !url.contains(['\\', ' ', '?']),
            "link {url:?} in {page}"
        );
    }
}

/// A server with `auth` appended to the test passwords' `[authentication]` table and `extra`
/// before it.
fn server_with(extra: &str, auth: &str) -> TestServer {
    let toml = format!(
        "listen = [\"127.0.0.1:0\"]\nworkers = 2\n{extra}\n[authentication]\nsource-password = \"{SOURCE_PW}\"\nadmin-password = \"{ADMIN_PW}\"\n{auth}\n[logging]\naccess-log = \"\"\n"
    );
    TestServer::start_config(throng_server::Config::from_toml(&toml).expect("test config"))
}

fn header_of<'a>(head: &'a throng_proto::http::ResponseHead, name: &str) -> Option<&'a str> {
    head.headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

fn metrics_text(server: &TestServer, headers: &[&str]) -> (u16, String) {
    let (head, body) = http_get(server.addr, "/metrics", headers);
    (head.status, String::from_utf8_lossy(&body).into_owned())
}

#[test]
fn hidden_mounts_are_absent_from_public_metrics() {
    let server = TestServer::start("[[mount]]\nname = \"/secret.mp3\"\nhidden = true\n");
    let _a = Source::start(server.addr, "/secret.mp3", "PUT", 2.0);
    let _b = Source::start(server.addr, "/public.mp3", "PUT", 2.0);
    server.wait_mount("/secret.mp3");
    server.wait_mount("/public.mp3");
    let mut l1 = Listener::open(server.addr, "/secret.mp3", false);
    let mut l2 = Listener::open(server.addr, "/public.mp3", false);
    l1.read_for(Duration::from_millis(200));
    l2.read_for(Duration::from_millis(200));
    wait_until(Duration::from_secs(10), || {
        metrics_text(&server, &[&admin_header()])
            .1
            .contains("throng_listeners{mount=\"/secret.mp3\"} 1")
    })
    .expect("the admin sees the hidden mount's listener");
    let (status, public) = metrics_text(&server, &[]);
    assert_eq!(status, 200);
    assert!(public.contains("mount=\"/public.mp3\""), "{public}");
    assert!(!public.contains("secret"), "{public}");
}

#[test]
fn metrics_password_puts_metrics_behind_a_credential() {
    let server = server_with(
        "[[mount]]\nname = \"/secret.mp3\"\nhidden = true\n",
        "metrics-password = \"scrape-pw\"",
    );
    let _a = Source::start(server.addr, "/secret.mp3", "PUT", 2.0);
    server.wait_mount("/secret.mp3");
    let (head, _) = http_get(server.addr, "/metrics", &[]);
    assert_eq!(head.status, 401);
    let bad = format!("Authorization: {}", basic_authorization("metrics", "nope"));
    assert_eq!(metrics_text(&server, &[&bad]).0, 401);
    let good = format!(
        "Authorization: {}",
        basic_authorization("metrics", "scrape-pw")
    );
    assert_eq!(metrics_text(&server, &[&good]).0, 200);
    // The source's byte counter appears with its first audio.
    wait_until(Duration::from_secs(10), || {
        metrics_text(&server, &[&good])
            .1
            .contains("mount=\"/secret.mp3\"")
    })
    .unwrap_or_else(|_| panic!("{}", metrics_text(&server, &[&good]).1));
    assert_eq!(metrics_text(&server, &[&admin_header()]).0, 200);
}

#[test]
fn series_of_an_ended_mount_are_removed() {
    let server = TestServer::start("");
    let src = Source::start(server.addr, "/show-1.mp3", "PUT", 2.0);
    let _other = Source::start(server.addr, "/always.mp3", "PUT", 2.0);
    server.wait_mount("/show-1.mp3");
    server.wait_mount("/always.mp3");
    let mut l = Listener::open(server.addr, "/show-1.mp3", false);
    l.read_for(Duration::from_millis(300));
    wait_until(Duration::from_secs(10), || {
        metrics_text(&server, &[]).1.contains("/show-1.mp3")
    })
    .expect("series of the live mount");
    drop(l);
    src.stop();
    wait_until(Duration::from_secs(30), || {
        server.ctx.registry.get("/show-1.mp3").is_none()
    })
    .expect("mount ended");
    wait_until(Duration::from_secs(30), || {
        !metrics_text(&server, &[]).1.contains("/show-1.mp3")
    })
    .unwrap_or_else(|_| panic!("series left: {}", metrics_text(&server, &[]).1));
    // Removed from the registry itself, not only from this output, and the live mount stays.
    let full = server.ctx.metrics.encode();
    assert!(!full.contains("/show-1.mp3"), "{full}");
    assert!(full.contains("/always.mp3"), "{full}");
}

const THROTTLE: &str = "max-failed-logins = 3\nfailed-login-window = 60\nfailed-login-block = 60";

#[test]
fn failed_source_logins_are_throttled_per_address() {
    let server = server_with("", THROTTLE);
    let wrong = basic_authorization("source", "guess");
    for _ in 0..3 {
        assert_eq!(source_status(server.addr, "/live.mp3", &wrong), 401);
    }
    // Blocked now: even the right password gets 429, with Retry-After.
    let raw = format!(
        "SOURCE /live.mp3 HTTP/1.0\r\nAuthorization: {}\r\nContent-Type: audio/mpeg\r\n\r\n",
        good_source_auth()
    );
    let out = exchange(server.addr, raw.as_bytes());
    let (head, _) = throng_proto::http::parse_response_head(&out)
        .unwrap()
        .unwrap();
    assert_eq!(head.status, 429, "{}", String::from_utf8_lossy(&out));
    let retry: u64 = header_of(&head, "retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    // Requests without credentials are not blocked (libshout's poke gets its 401), and
    // admin requests with credentials from the same address are refused too.
    let poke = "SOURCE /live.mp3 HTTP/1.0\r\nContent-Type: audio/mpeg\r\n\r\n";
    assert_eq!(status_of(server.addr, poke.as_bytes()), 401);
    let (head, _) = http_get(server.addr, "/admin/stats", &[&admin_header()]);
    assert_eq!(head.status, 429);
    let (head, _) = http_get(server.addr, "/status-json.xsl", &[]);
    assert_eq!(head.status, 200);
}

#[test]
fn failed_admin_logins_are_throttled_and_status_pages_still_served() {
    let server = server_with("", THROTTLE);
    let wrong = format!("Authorization: {}", basic_authorization("admin", "guess"));
    for q in ["/admin/stats", "/api/v1/stats", "/admin/listmounts"] {
        let (head, _) = http_get(server.addr, q, &[&wrong]);
        assert_eq!(head.status, 401, "{q}");
    }
    let (head, body) = http_get(server.addr, "/admin/stats", &[&admin_header()]);
    assert_eq!(head.status, 429, "{}", String::from_utf8_lossy(&body));
    assert!(header_of(&head, "retry-after").is_some());
    // Requests without credentials are neither counted nor blocked.
    for _ in 0..5 {
        let (head, _) = http_get(server.addr, "/admin/stats", &[]);
        assert_eq!(head.status, 401);
    }
    let (head, _) = http_get(server.addr, "/", &[]);
    assert_eq!(head.status, 200);
}

#[test]
fn failed_listener_logins_are_throttled() {
    let dir = tempfile::Builder::new()
        .prefix("throng-it-access")
        .tempdir()
        .unwrap();
    let file = dir.path().join("users");
    // Icecast's md5("secret").
    std::fs::write(&file, "fred:5ebe2294ecd0e0f08eab7690d2a6ee69\n").unwrap();
    let server = server_with(
        &format!(
            "[[mount]]\nname = \"/locked.mp3\"\nauthentication = {{ type = \"htpasswd\", filename = {:?} }}\n",
            file.display().to_string()
        ),
        THROTTLE,
    );
    let _s = Source::start(server.addr, "/locked.mp3", "PUT", 2.0);
    server.wait_mount("/locked.mp3");
    let get = |user: &str, pass: &str| {
        let auth = format!("Authorization: {}", basic_authorization(user, pass));
        let raw = format!("GET /locked.mp3 HTTP/1.0\r\nHost: test\r\n{auth}\r\n\r\n");
        let mut s = TcpStream::connect(server.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(raw.as_bytes()).unwrap();
        let mut buf = [0u8; 256];
        let n = s.read(&mut buf).unwrap_or(0);
        let line = String::from_utf8_lossy(&buf[..n]).into_owned();
        line.split(' ').nth(1).unwrap_or("").to_owned()
    };
    assert_eq!(get("fred", "secret"), "200");
    for _ in 0..3 {
        assert_eq!(get("fred", "wrong"), "401");
    }
    assert_eq!(get("fred", "secret"), "429");
}

#[test]
fn source_admin_metadata_only_limits_source_credentials() {
    let src_auth = format!("Authorization: {}", good_source_auth());
    // Default: as Icecast, source credentials open the mount's commands.
    let server = TestServer::start("");
    let _s = Source::start(server.addr, "/live.mp3", "PUT", 2.0);
    server.wait_mount("/live.mp3");
    let (head, _) = http_get(
        server.addr,
        "/admin/listclients?mount=/live.mp3",
        &[&src_auth],
    );
    assert_eq!(head.status, 200);
    drop(server);

    let server = server_with("", "source-admin = \"metadata-only\"");
    let _s = Source::start(server.addr, "/live.mp3", "PUT", 2.0);
    server.wait_mount("/live.mp3");
    for q in [
        "/admin/listclients?mount=/live.mp3",
        "/admin/killclient?mount=/live.mp3&id=1",
        "/admin/moveclients?mount=/live.mp3&destination=/other.mp3",
        "/admin/killsource?mount=/live.mp3",
    ] {
        let (head, _) = http_get(server.addr, q, &[&src_auth]);
        assert_eq!(head.status, 403, "{q}");
    }
    let raw =
        format!("DELETE /api/v1/mounts/live.mp3 HTTP/1.0\r\nHost: test\r\n{src_auth}\r\n\r\n");
    assert_eq!(status_of(server.addr, raw.as_bytes()), 403);
    assert!(server.ctx.registry.get("/live.mp3").is_some(), "not killed");
    let (head, body) = http_get(
        server.addr,
        "/admin/metadata?mount=/live.mp3&mode=updinfo&song=Hello",
        &[&src_auth],
    );
    assert_eq!(head.status, 200, "{}", String::from_utf8_lossy(&body));
    // The admin still may do everything.
    let (head, _) = http_get(
        server.addr,
        "/admin/listclients?mount=/live.mp3",
        &[&admin_header()],
    );
    assert_eq!(head.status, 200);
}

#[test]
fn admin_pages_cannot_be_framed() {
    let server = TestServer::start("");
    for q in ["/admin/stats.xsl", "/admin/stats", "/", "/api/v1/stats"] {
        let (head, _) = http_get(server.addr, q, &[&admin_header()]);
        assert_eq!(head.status, 200, "{q}");
        assert_eq!(header_of(&head, "x-frame-options"), Some("DENY"), "{q}");
        let csp = header_of(&head, "content-security-policy").unwrap_or("");
        assert!(csp.contains("frame-ancestors 'none'"), "{q}: {csp}");
    }
}

#[test]
fn cross_site_admin_actions_are_refused_and_scripts_still_work() {
    let server = TestServer::start("");
    let _a = Source::start(server.addr, "/a.mp3", "PUT", 2.0);
    let _b = Source::start(server.addr, "/b.mp3", "PUT", 2.0);
    server.wait_mount("/a.mp3");
    server.wait_mount("/b.mp3");
    let admin = admin_header();
    for from in [
        "Origin: http://evil.example",
        "Referer: http://evil.example/attack.html",
        "Sec-Fetch-Site: cross-site",
        "Origin: null",
    ] {
        for q in [
            "/admin/killsource?mount=/a.mp3",
            "/admin/metadata?mount=/a.mp3&mode=updinfo&song=pwned",
            "/admin/fallbacks?mount=/a.mp3&fallback=/b.mp3",
        ] {
            let (head, _) = http_get(server.addr, q, &[&admin, from]);
            assert_eq!(head.status, 403, "{q} with {from}");
        }
        let raw = format!(
            "DELETE /api/v1/mounts/a.mp3 HTTP/1.0\r\nHost: test\r\n{admin}\r\n{from}\r\n\r\n"
        );
        assert_eq!(
            status_of(server.addr, raw.as_bytes()),
            403,
            "API with {from}"
        );
    }
    assert!(server.ctx.registry.get("/a.mp3").is_some(), "not killed");
    assert_ne!(server.ctx.registry.get("/a.mp3").unwrap().title(), "pwned");
    // Reading is not an action: a cross-site page may still get the status JSON.
    let (head, _) = http_get(
        server.addr,
        "/status-json.xsl",
        &["Origin: http://evil.example"],
    );
    assert_eq!(head.status, 200);
    // The server's own pages (same host) and scripts without these headers keep working.
    let (head, _) = http_get(
        server.addr,
        "/admin/metadata?mount=/a.mp3&mode=updinfo&song=Hello",
        &[
            &admin,
            "Referer: http://test/admin/updatemetadata.xsl?mount=/a.mp3",
        ],
    );
    assert_eq!(head.status, 200);
    let (head, _) = http_get(
        server.addr,
        "/admin/killsource?mount=/b.mp3",
        &[&admin, "Origin: http://test", "Sec-Fetch-Site: same-origin"],
    );
    assert_eq!(head.status, 200);
    let (head, _) = http_get(server.addr, "/admin/killsource?mount=/a.mp3", &[&admin]);
    assert_eq!(head.status, 200);
}

#[test]
fn failed_admin_cgi_passwords_are_throttled() {
    let server = server_with("", THROTTLE);
    let _s = Source::start(server.addr, "/live.mp3", "PUT", 2.0);
    server.wait_mount("/live.mp3");
    let cgi = |pass: &str| {
        let (head, _) = http_get(
            server.addr,
            &format!("/admin.cgi?mode=updinfo&mount=/live.mp3&pass={pass}&song=x"),
            &[],
        );
        head.status
    };
    for _ in 0..3 {
        assert_eq!(cgi("guess"), 401);
    }
    assert_eq!(cgi(SOURCE_PW), 429);
}
