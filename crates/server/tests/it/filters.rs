//! Access filters: the client address behind trusted proxies (`paths.x-forwarded-for`) used by
//! the listener list, the access log, the source IP and the IP filters; `deny-ip`, `allow-ip`
//! and `deny-agents` files answered with 403 and re-read when they change; the SHOUTcast port
//! honouring `deny-ip`.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use throng_proto::auth::basic_authorization;
use throng_proto::http::parse_response_head;
use throng_server::ListenerRow;

use crate::support::*;

/// A scratch directory for one test's filter files and access log, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("throng-it-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// Writes `text` to file `name`; returns its path as a TOML string.
    fn file(&self, name: &str, text: &str) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        format!("{:?}", p.display().to_string())
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A server with `paths` (the body of a `[paths]` table) and its access log in `log`.
fn server(paths: &str, log: &Path, top: &str) -> TestServer {
    let config = throng_server::Config::from_toml(&format!(
        "listen = [\"127.0.0.1:0\"]\nworkers = 1\n{top}\n[paths]\n{paths}\n[authentication]\nsource-password = \"{SOURCE_PW}\"\nadmin-password = \"{ADMIN_PW}\"\n[logging]\naccess-log = {:?}\n",
        log.display().to_string()
    ))
    .expect("test config");
    TestServer::start_config(config)
}

/// Status of a GET on `path` with extra header lines.
fn get_status(addr: SocketAddr, path: &str, headers: &[&str]) -> u16 {
    http_get(addr, path, headers).0.status
}

/// The listeners of `mount` as the fan-out reports them (the rows behind `listclients`).
fn rows(srv: &TestServer, mount: &str) -> Vec<ListenerRow> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(srv.ctx.fanout.list(Some(mount), throng_server::Page::FIRST))
}

/// Opens a listener on `path` with extra header lines; returns the stream after the head.
fn listen_with(addr: SocketAddr, path: &str, headers: &[&str]) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: test\r\nUser-Agent: it\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.0 200");
    s
}

fn wait_log(log: &Path, needle: &str) {
    wait_until(Duration::from_secs(5), || {
        std::fs::read_to_string(log).is_ok_and(|t| t.contains(needle))
    })
    .unwrap_or_else(|_| {
        panic!(
            "access log lacks {needle:?}: {:?}",
            std::fs::read_to_string(log)
        )
    });
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn trusted_proxy_sets_the_client_ip_for_listeners_log_and_source() {
    let dir = Scratch::new("xff");
    let log = dir.path("access.log");
    let srv = server("x-forwarded-for = [\"127.0.0.0/8\"]", &log, "");
    let _src = Source::start_with(
        srv.addr,
        "/live.mp3",
        "PUT",
        1.0,
        &["X-Forwarded-For: 198.51.100.7"],
    );
    srv.wait_mount("/live.mp3");
    let mount = srv.ctx.registry.get("/live.mp3").unwrap();
    assert_eq!(mount.settings.source_ip, Some(ip("198.51.100.7")));

    // The client forged 1.1.1.1; the right-most untrusted entry is the real client.
    let l = listen_with(
        srv.addr,
        "/live.mp3",
        &["X-Forwarded-For: 1.1.1.1, 203.0.113.9"],
    );
    let listed = rows(&srv, "/live.mp3");
    assert_eq!(
        listed.iter().map(|r| r.ip).collect::<Vec<_>>(),
        [ip("203.0.113.9")]
    );
    drop(l);
    wait_log(&log, "203.0.113.9 - - [");

    // Metadata with source credentials must come from the source's (forwarded) address.
    let auth = format!(
        "Authorization: {}",
        basic_authorization("source", SOURCE_PW)
    );
    let target = "/admin/metadata?mount=/live.mp3&mode=updinfo&song=Via%20Proxy";
    assert_eq!(get_status(srv.addr, target, &[&auth]), 401);
    assert_eq!(
        get_status(srv.addr, target, &[&auth, "X-Forwarded-For: 198.51.100.7"]),
        200
    );
    assert_eq!(mount.title(), "Via Proxy");
    // The same rule through the admin JSON API.
    let put = |xff: &str| {
        let raw = format!(
            "PUT /api/v1/mounts/live.mp3/metadata?song=Via%20API HTTP/1.0\r\n{auth}\r\n{xff}Content-Length: 0\r\n\r\n"
        );
        let out = exchange(srv.addr, raw.as_bytes());
        parse_response_head(&out).unwrap().unwrap().0.status
    };
    assert_eq!(put(""), 401);
    assert_eq!(mount.title(), "Via Proxy");
    assert_eq!(put("X-Forwarded-For: 198.51.100.7\r\n"), 200);
    assert_eq!(mount.title(), "Via API");
}

#[test]
fn an_untrusted_peer_cannot_spoof_x_forwarded_for() {
    let dir = Scratch::new("xff-untrusted");
    let log = dir.path("access.log");
    let srv = server("x-forwarded-for = [\"10.0.0.0/8\"]", &log, "");
    let _src = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    let _l = listen_with(srv.addr, "/live.mp3", &["X-Forwarded-For: 203.0.113.9"]);
    let listed = rows(&srv, "/live.mp3");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].ip, ip("127.0.0.1"));
}

#[test]
fn deny_ip_refuses_with_403_follows_the_proxy_and_reloads() {
    let dir = Scratch::new("deny-ip");
    let log = dir.path("access.log");
    let deny = dir.file("deny", "# proxied clients\n203.0.113.0/24\n");
    let srv = server(
        &format!("deny-ip = {deny}\nx-forwarded-for = [\"127.0.0.1\"]"),
        &log,
        "shoutcast-mount = \"/sc.mp3\"",
    );
    let denied = ["X-Forwarded-For: 203.0.113.5"];
    let other = ["X-Forwarded-For: 198.51.100.1"];
    assert_eq!(get_status(srv.addr, "/status-json.xsl", &[]), 200);
    assert_eq!(get_status(srv.addr, "/status-json.xsl", &denied), 403);
    assert_eq!(get_status(srv.addr, "/live.mp3", &denied), 403);
    wait_log(&log, "\"GET /live.mp3 HTTP/1.0\" 403");
    let text = std::fs::read_to_string(&log).unwrap();
    let line = text.lines().find(|l| l.contains("/live.mp3")).unwrap();
    assert!(line.starts_with("203.0.113.5 - - ["), "{line}");

    // Now deny the proxy's own address (e.g. direct connections from it).
    std::fs::write(dir.path("deny"), "127.0.0.1\n").unwrap();
    wait_until(Duration::from_secs(4), || {
        get_status(srv.addr, "/status-json.xsl", &[]) == 403
    })
    .expect("deny-ip reloaded within the recheck interval");
    assert_eq!(get_status(srv.addr, "/status-json.xsl", &other), 200);
    assert_eq!(get_status(srv.addr, "/status-json.xsl", &denied), 200);

    // The SHOUTcast port checks the TCP peer: a denied source gets no OK2.
    let sc = SocketAddr::new(srv.addr.ip(), srv.addr.port() + 1);
    assert_eq!(
        exchange(sc, format!("{SOURCE_PW}\r\nicy-name:x\r\n\r\n").as_bytes()),
        b""
    );
    assert!(srv.ctx.registry.get("/sc.mp3").is_none());
}

#[test]
fn allow_ip_admits_only_listed_addresses() {
    let dir = Scratch::new("allow-ip");
    let log = dir.path("access.log");
    let allow = dir.file("allow", "192.0.2.0/24\n2001:db8::/32\n");
    let srv = server(
        &format!("allow-ip = {allow}\nx-forwarded-for = [\"127.0.0.1\"]"),
        &log,
        "",
    );
    assert_eq!(get_status(srv.addr, "/status-json.xsl", &[]), 403);
    assert_eq!(
        get_status(
            srv.addr,
            "/status-json.xsl",
            &["X-Forwarded-For: 192.0.2.9"]
        ),
        200
    );
    assert_eq!(
        get_status(
            srv.addr,
            "/status-json.xsl",
            &["X-Forwarded-For: [2001:db8::5]:4711"]
        ),
        200
    );
    assert_eq!(
        get_status(
            srv.addr,
            "/status-json.xsl",
            &["X-Forwarded-For: 198.51.100.1"]
        ),
        403
    );
}

#[test]
fn deny_agents_refuses_matching_user_agents() {
    let dir = Scratch::new("deny-agents");
    let log = dir.path("access.log");
    let agents = dir.file("agents", "# crawlers\n*bot*\nWget/*\n");
    let srv = server(&format!("deny-agents = {agents}"), &log, "");
    let _src = Source::start(srv.addr, "/live.mp3", "PUT", 1.0);
    srv.wait_mount("/live.mp3");
    let status = |agent: &str| {
        status_of(
            srv.addr,
            format!("HEAD /live.mp3 HTTP/1.0\r\nUser-Agent: {agent}\r\n\r\n").as_bytes(),
        )
    };
    assert_eq!(status("Mozilla/5.0 (compatible; Googlebot/2.1)"), 403);
    assert_eq!(status("wget/1.21.3"), 403);
    assert_eq!(status("VLC/3.0.18 LibVLC/3.0.18"), 200);
    assert_eq!(get_status(srv.addr, "/status-json.xsl", &[]), 200);
    wait_log(&log, "\"wget/1.21.3\"");
    // The source itself was not refused, and is still live.
    assert!(srv.ctx.registry.get("/live.mp3").is_some());
}
