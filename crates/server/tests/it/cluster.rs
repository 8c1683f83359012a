//! Origin and edges (issue 15): an edge relaying the origin registers and shows in
//! `/api/v1/cluster` and `/metrics`, and leaves the registry once it stops; a full origin
//! redirects ffmpeg and curl listeners to the edge (they decode cleanly there, query string
//! kept); `redirect = "all"` sends every listener; a wrong secret is refused. The PROXY
//! protocol through a real HAProxy (`send-proxy` and `send-proxy-v2`) in front of two edges:
//! the client's address shows in `listclients` and the access log.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use throng_proto::auth::basic_authorization;
use throng_proto::http::ResponseHead;

use crate::support::*;

const SECRET: &str = "test-cluster-secret";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn admin() -> String {
    format!("Authorization: {}", basic_authorization("admin", ADMIN_PW))
}

fn header<'a>(head: &'a ResponseHead, name: &str) -> Option<&'a str> {
    head.headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// `GET /api/v1/cluster` on `server` with admin credentials.
fn cluster_view(server: &TestServer) -> serde_json::Value {
    let (head, body) = http_get(server.addr, "/api/v1/cluster", &[&admin()]);
    assert_eq!(head.status, 200);
    serde_json::from_slice(&body).unwrap()
}

/// An origin with a live `/live.mp3` (and `extra` config), reachable at its `addr`.
fn origin(extra: &str) -> (TestServer, Source) {
    let origin = TestServer::start(&format!(
        "{extra}\n[cluster]\nsecret = \"{SECRET}\"\nedge-timeout = 3\n"
    ));
    let source = Source::start(origin.addr, "/live.mp3", "PUT", 1.0);
    origin.wait_mount("/live.mp3");
    (origin, source)
}

/// An edge relaying `/live.mp3` from `origin`, reporting every second.
fn edge(origin: SocketAddr) -> TestServer {
    let port = free_port();
    let toml = format!(
        "listen = [\"127.0.0.1:{port}\"]\nworkers = 1\n\
         [[relay]]\nserver = \"127.0.0.1\"\nport = {}\nmount = \"/live.mp3\"\n\
         username = \"edge\"\npassword = \"{SECRET}\"\n\
         [cluster]\norigin = \"http://{origin}\"\npublic-url = \"http://127.0.0.1:{port}\"\n\
         secret = \"{SECRET}\"\nreport-interval = 1\n\
         [authentication]\nsource-password = \"{SOURCE_PW}\"\nadmin-password = \"{ADMIN_PW}\"\n\
         [logging]\naccess-log = \"\"\n",
        origin.port()
    );
    let edge = TestServer::start_config(throng_server::Config::from_toml(&toml).unwrap());
    edge.wait_mount("/live.mp3");
    edge
}

/// Waits until `origin` lists the edge at `url` carrying `/live.mp3`; returns its entry.
fn wait_edge(origin: &TestServer, url: &str) -> serde_json::Value {
    let mut found = None;
    wait_until(Duration::from_secs(15), || {
        let v = cluster_view(origin);
        found = v["edges"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["url"] == url && e["mounts"].get("/live.mp3").is_some())
            .cloned();
        found.is_some()
    })
    .unwrap_or_else(|_| panic!("edge {url} never registered: {}", cluster_view(origin)));
    found.unwrap()
}

#[test]
fn an_edge_registers_shows_in_the_cluster_view_and_leaves_when_it_dies() {
    let (origin, _source) = origin("");
    let edge = edge(origin.addr);
    let url = format!("http://{}", edge.addr);
    let mut l = Listener::open(edge.addr, "/live.mp3", false);
    l.read_for(Duration::from_millis(300));
    // The edge's listener is counted in its next report.
    wait_until(Duration::from_secs(10), || {
        wait_edge(&origin, &url)["listeners"] == 1
    })
    .unwrap_or_else(|_| panic!("listener not reported: {}", cluster_view(&origin)));
    let v = cluster_view(&origin);
    assert_eq!(v["role"], "origin");
    assert_eq!(v["totals"]["edges"], 1);
    assert_eq!(v["totals"]["edge-listeners"], 1);
    let e = &v["edges"][0];
    assert_eq!(e["health"], "healthy");
    assert!(e["capacity"].as_u64().unwrap() > 1);
    assert_eq!(e["mounts"]["/live.mp3"], 1);
    // Per-edge gauges in /metrics.
    let (_, body) = http_get(origin.addr, "/metrics", &[]);
    let metrics = String::from_utf8_lossy(&body);
    assert!(metrics.contains("throng_cluster_edges 1\n"), "{metrics}");
    assert!(
        metrics.contains(&format!(
            "throng_cluster_edge_listeners{{edge=\"{url}\"}} 1\n"
        )),
        "{metrics}"
    );
    assert!(metrics.trim_end().ends_with("# EOF"), "{metrics}");
    // The edge knows it is one.
    assert_eq!(cluster_view(&edge)["role"], "edge");
    // The edge stops: after edge-timeout (3 s) the origin drops it.
    drop(l);
    drop(edge);
    wait_until(Duration::from_secs(10), || {
        cluster_view(&origin)["edges"]
            .as_array()
            .unwrap()
            .is_empty()
    })
    .expect("the dead edge is dropped");
    assert_eq!(cluster_view(&origin)["totals"]["edges"], 0);
}

/// Now, Unix milliseconds (a report's `time`).
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A report of edge `url` made at `time` (Unix milliseconds).
fn report_body(url: &str, capacity: &str, time: u64) -> String {
    format!(
        r#"{{"url":{},"capacity":{capacity},"listeners":0,"mounts":{{"/live.mp3":0}},"time":{time}}}"#,
        serde_json::to_string(url).unwrap()
    )
}

/// POSTs the report `body` to `addr` from 127.0.0.`from` with `auth`, signed with `key` (HMAC-
/// SHA256, base64, computed here with ring) unless `None`; the status.
fn post_report(addr: SocketAddr, from: u8, auth: &str, key: Option<&str>, body: &str) -> u16 {
    use base64::Engine as _;
    let signature = key.map_or(String::new(), |k| {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, k.as_bytes());
        let tag = ring::hmac::sign(&key, body.as_bytes());
        format!(
            "X-Throng-Signature: {}\r\n",
            base64::engine::general_purpose::STANDARD.encode(tag.as_ref())
        )
    });
    let raw = format!(
        "POST /api/v1/cluster/edges HTTP/1.1\r\nHost: t\r\nAuthorization: {auth}\r\n{signature}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let (_, head) = ask_from(from, addr, &raw);
    head.expect("an answer").status
}

#[test]
fn reports_need_the_cluster_secret() {
    let (origin, _source) = origin("");
    let body = report_body("http://127.0.0.1:9", "10", now_ms());
    let post = |auth: &str| post_report(origin.addr, 2, auth, Some(SECRET), &body);
    assert_eq!(post(&basic_authorization("edge", "wrong")), 401);
    assert!(cluster_view(&origin)["edges"]
        .as_array()
        .unwrap()
        .is_empty());
    assert_eq!(post(&basic_authorization("edge", SECRET)), 200);
    assert_eq!(cluster_view(&origin)["totals"]["edges"], 1);
    // The cluster view itself is the admin's.
    let (head, _) = http_get(origin.addr, "/api/v1/cluster", &[]);
    assert_eq!(head.status, 401);
}

#[test]
fn a_full_origin_redirects_ffmpeg_and_curl_to_an_edge() {
    require("curl");
    // Room for two: the edge's relay and one listener.
    let (origin, _source) = origin("[[mount]]\nname = \"/live.mp3\"\nmax-listeners = 2\n");
    let edge = edge(origin.addr);
    let edge_url = format!("http://{}", edge.addr);
    wait_edge(&origin, &edge_url);
    // With room, the origin serves the listener itself.
    let mut first = Listener::open(origin.addr, "/live.mp3", false);
    assert_eq!(first.head.status, 200);
    first.read_for(Duration::from_millis(200));
    // Full: 302 to the edge, query string kept.
    let (head, _) = http_get(origin.addr, "/live.mp3?token=a%20b&x=1", &[]);
    assert_eq!(head.status, 302);
    assert_eq!(
        header(&head, "location"),
        Some(format!("{edge_url}/live.mp3?token=a%20b&x=1").as_str())
    );
    // ffmpeg follows the redirect and decodes without an error.
    let errors = ffmpeg_decode(&origin.url("/live.mp3"), 4);
    assert!(errors.is_empty(), "ffmpeg errors: {errors}");
    // curl -L lands on the edge; what it got decodes cleanly.
    let file = std::env::temp_dir().join(format!("throng-it-cluster-{}.mp3", std::process::id()));
    let out = Command::new("curl")
        .args(["-sS", "-L", "--max-time", "4", "-o"])
        .arg(&file)
        .args(["-w", "%{url_effective} %{num_redirects}"])
        .arg(origin.url("/live.mp3"))
        .output()
        .unwrap();
    let info = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(info, format!("{edge_url}/live.mp3 1"));
    let data = std::fs::read(&file).unwrap();
    let errors = ffmpeg_decode(file.to_str().unwrap(), 60);
    let _ = std::fs::remove_file(&file);
    assert!(data.len() > 16_000, "curl got {} bytes", data.len());
    assert!(errors.is_empty(), "decode errors: {errors}");
    let v = cluster_view(&origin);
    assert!(v["edges"][0]["redirected"].as_u64().unwrap() >= 3, "{v}");
    // Without an edge (it died), a full origin refuses as before.
    drop(edge);
    wait_until(Duration::from_secs(10), || {
        cluster_view(&origin)["edges"]
            .as_array()
            .unwrap()
            .is_empty()
    })
    .unwrap();
    // The relay's slot is free again: one more listener fills the mount.
    let second = Listener::open(origin.addr, "/live.mp3", false);
    assert_eq!(second.head.status, 200);
    let (head, _) = http_get(origin.addr, "/live.mp3", &[]);
    assert_eq!(head.status, 403);
    drop(first);
}

#[test]
fn redirect_all_makes_the_origin_a_director() {
    let origin = TestServer::start(&format!(
        "[cluster]\nsecret = \"{SECRET}\"\nredirect = \"all\"\n"
    ));
    let _source = Source::start(origin.addr, "/live.mp3", "PUT", 1.0);
    origin.wait_mount("/live.mp3");
    // No edge yet: served locally.
    let l = Listener::open(origin.addr, "/live.mp3", false);
    assert_eq!(l.head.status, 200);
    drop(l);
    let edge = edge(origin.addr);
    let edge_url = format!("http://{}", edge.addr);
    wait_edge(&origin, &edge_url);
    let (head, _) = http_get(origin.addr, "/live.mp3", &[]);
    assert_eq!(head.status, 302);
    assert_eq!(
        header(&head, "location"),
        Some(format!("{edge_url}/live.mp3").as_str())
    );
    // A mount no edge carries stays on the origin (404 here: it does not exist).
    let (head, _) = http_get(origin.addr, "/other.mp3", &[]);
    assert_eq!(head.status, 404);
}

/// A HAProxy started from a temporary config, killed (and its directory removed) on drop.
struct Haproxy {
    _proc: Proc,
    dir: PathBuf,
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts HAProxy with two TCP frontends on `v1` and `v2`, each balancing over `edges`
/// round-robin, with `send-proxy` and `send-proxy-v2`.
fn haproxy(v1: u16, v2: u16, edges: &[SocketAddr]) -> Haproxy {
    require("haproxy");
    let dir = std::env::temp_dir().join(format!("throng-it-haproxy-{}-{v1}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let servers = |opt: &str| {
        edges
            .iter()
            .enumerate()
            .map(|(i, a)| format!("    server edge{i} {a} {opt}\n"))
            .collect::<String>()
    };
    let cfg = format!(
        "global\n    maxconn 100\n\
         defaults\n    mode tcp\n    timeout connect 5s\n    timeout client 60s\n    timeout server 60s\n\
         frontend fv1\n    bind 127.0.0.1:{v1}\n    default_backend bv1\n\
         backend bv1\n    balance roundrobin\n{}\
         frontend fv2\n    bind 127.0.0.1:{v2}\n    default_backend bv2\n\
         backend bv2\n    balance roundrobin\n{}",
        servers("send-proxy"),
        servers("send-proxy-v2")
    );
    let path = dir.join("haproxy.cfg");
    std::fs::write(&path, cfg).unwrap();
    let child = Command::new("haproxy")
        .arg("-db")
        .arg("-f")
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start haproxy");
    let h = Haproxy {
        _proc: Proc(child),
        dir,
    };
    for port in [v1, v2] {
        wait_until(Duration::from_secs(10), || {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
        })
        .expect("haproxy listens");
    }
    h
}

/// A listener of `/live.mp3` through `proxy`, connecting from local address `from`.
fn listen_from(from: &str, proxy: u16) -> TcpStream {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.bind(&format!("{from}:0").parse::<SocketAddr>().unwrap().into())
        .unwrap();
    sock.connect(&SocketAddr::from(([127, 0, 0, 1], proxy)).into())
        .unwrap();
    let mut s: TcpStream = sock.into();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /live.mp3 HTTP/1.1\r\nHost: t\r\nUser-Agent: behind-haproxy\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 4096];
    let n = s.read(&mut buf).unwrap();
    assert!(
        buf[..n].starts_with(b"HTTP/1.1 200") || buf[..n].starts_with(b"HTTP/1.0 200"),
        "{:?}",
        String::from_utf8_lossy(&buf[..n])
    );
    s
}

#[test]
fn proxy_protocol_through_haproxy_gives_the_client_address() {
    require("haproxy");
    let dir = std::env::temp_dir().join(format!("throng-it-proxyproto-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let edge = |n: u32| {
        let log = dir.join(format!("access-{n}.log"));
        let toml = format!(
            "listen = [\"127.0.0.1:0\"]\nworkers = 1\n\
             [paths]\nproxy-protocol-from = [\"127.0.0.1\"]\n\
             [authentication]\nsource-password = \"{SOURCE_PW}\"\nadmin-password = \"{ADMIN_PW}\"\n\
             [logging]\naccess-log = \"{}\"\n",
            log.display()
        );
        let s = TestServer::start_config(throng_server::Config::from_toml(&toml).unwrap());
        let src = Source::start(s.addr, "/live.mp3", "PUT", 1.0);
        s.wait_mount("/live.mp3");
        (s, src, log)
    };
    let (e1, _s1, log1) = edge(1);
    let (e2, _s2, log2) = edge(2);
    let (v1, v2) = (free_port(), free_port());
    let _haproxy = haproxy(v1, v2, &[e1.addr, e2.addr]);
    // Two clients per frontend.
    let clients = [
        listen_from("127.0.0.11", v1),
        listen_from("127.0.0.12", v1),
        listen_from("127.0.0.21", v2),
        listen_from("127.0.0.22", v2),
    ];
    let listclients = |e: &TestServer| {
        let (_, body) = http_get(e.addr, "/admin/listclients?mount=/live.mp3", &[&admin()]);
        String::from_utf8_lossy(&body).into_owned()
    };
    let both = format!("{}{}", listclients(&e1), listclients(&e2));
    for ip in ["127.0.0.11", "127.0.0.12", "127.0.0.21", "127.0.0.22"] {
        assert!(
            both.contains(&format!("<IP>{ip}</IP>")),
            "{ip} missing: {both}"
        );
    }
    assert!(!both.contains("<IP>127.0.0.1</IP>"), "{both}");
    // The .1x clients came through the `send-proxy` (v1) frontend and the .2x ones through
    // `send-proxy-v2`: both headers were read (which edge each landed on is HAProxy's choice).
    drop(clients);
    let mut logs = String::new();
    wait_until(Duration::from_secs(10), || {
        logs = [&log1, &log2]
            .iter()
            .map(|p| std::fs::read_to_string(p).unwrap_or_default())
            .collect();
        logs.lines()
            .filter(|l| l.contains("behind-haproxy"))
            .count()
            == 4
    })
    .unwrap_or_else(|_| panic!("access log: {logs}"));
    for ip in ["127.0.0.11", "127.0.0.12", "127.0.0.21", "127.0.0.22"] {
        assert!(
            logs.lines()
                .any(|l| l.starts_with(&format!("{ip} ")) && l.contains("GET /live.mp3")),
            "{ip} not logged: {logs}"
        );
    }
    // A direct connection from the trusted address without a header is served as usual.
    let l = Listener::open(e1.addr, "/live.mp3", false);
    assert_eq!(l.head.status, 200);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Reads `stream` for `d` and counts the separate deliveries: reads that return data more than
/// 100 ms after the previous one (one write the kernel splits over several reads counts once).
fn deliveries(stream: &mut TcpStream, d: Duration) -> usize {
    let end = std::time::Instant::now() + d;
    let mut buf = vec![0u8; 1 << 17];
    let mut last: Option<std::time::Instant> = None;
    let mut count = 0;
    while let Some(left) = end.checked_duration_since(std::time::Instant::now()) {
        stream
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let now = std::time::Instant::now();
                if last.is_none_or(|t| now - t > Duration::from_millis(100)) {
                    count += 1;
                }
                last = Some(now);
            }
        }
    }
    count
}

/// An edge's relay connection (the edge credentials) is written at every tick of the origin's
/// shard, a tenth of the write interval, so a relay hop adds little latency and does not stretch
/// the edge's listeners' gaps; an ordinary listener is written once per interval. With a 4 s
/// interval the relay gets new audio several times in 3 s, the listener at most once.
#[test]
fn an_edges_relay_connection_is_written_at_every_tick() {
    let srv = TestServer::start(&format!(
        "demo = true\n[limits]\nwrite-interval-ms = 4000\n[cluster]\nsecret = \"{SECRET}\"\n"
    ));
    srv.wait_mount("/demo.mp3");
    let mut relay = TcpStream::connect(srv.addr).unwrap();
    write!(
        relay,
        "GET /demo.mp3 HTTP/1.0\r\nAuthorization: {}\r\n\r\n",
        basic_authorization("edge", SECRET)
    )
    .unwrap();
    let mut listener = Listener::open(srv.addr, "/demo.mp3", false);
    // The head and the burst-on-connect come at once; what follows is the regular writes.
    std::thread::sleep(Duration::from_millis(500));
    let _ = deliveries(&mut relay, Duration::from_millis(300));
    let _ = deliveries(&mut listener.stream, Duration::from_millis(10));
    let relay_writes = deliveries(&mut relay, Duration::from_secs(3));
    let listener_writes = deliveries(&mut listener.stream, Duration::from_secs(3));
    assert!(
        relay_writes >= 3,
        "relay written {relay_writes} times in 3 s"
    );
    assert!(
        listener_writes <= 1,
        "listener written {listener_writes} times in 3 s"
    );
}

/// Issue 28 (cluster reports): an edge URL that would split the origin's `302` (CR/LF), carry
/// credentials or overflow a sum is refused with `400` before it reaches the registry, so no
/// listener is ever redirected by it.
#[test]
fn a_report_with_an_unsafe_edge_url_or_count_is_refused_with_400() {
    let (origin, _source) = origin("");
    let auth = basic_authorization("edge", SECRET);
    let post = |body: &str| post_report(origin.addr, 2, &auth, Some(SECRET), body);
    for url in [
        "http://127.0.0.1:9/\r\nSet-Cookie: admin=1\r\n\r\n<h1>owned</h1>",
        "http://user:pw@127.0.0.1:9",
        "javascript:alert(1)",
    ] {
        assert_eq!(post(&report_body(url, "10", now_ms())), 400, "{url:?}");
    }
    let huge = report_body("http://127.0.0.1:9", "18446744073709551615", now_ms());
    assert_eq!(post(&huge), 400);
    assert!(cluster_view(&origin)["edges"]
        .as_array()
        .unwrap()
        .is_empty());
}

/// Issue 28 (cluster reports): a report must be signed with the secret, carries its time inside
/// the signature (an old or replayed one is refused), and an edge's entry is bound to the
/// address of its first report (another edge cannot overwrite it).
#[test]
fn reports_are_signed_fresh_and_bound_to_the_edge_s_first_address() {
    let (origin, _source) = origin("");
    let auth = basic_authorization("edge", SECRET);
    let url = "http://127.0.0.1:9";
    let first = report_body(url, "10", now_ms());
    // Unsigned, or signed with another key: refused, though the Basic credentials are right.
    assert_eq!(post_report(origin.addr, 2, &auth, None, &first), 401);
    assert_eq!(
        post_report(origin.addr, 2, &auth, Some("other"), &first),
        401
    );
    assert_eq!(
        post_report(origin.addr, 2, &auth, Some(SECRET), &first),
        200
    );
    // The same report again (a replay), and one made a minute ago: refused.
    assert_eq!(
        post_report(origin.addr, 2, &auth, Some(SECRET), &first),
        400
    );
    let old = report_body(url, "10", now_ms() - 60_000);
    assert_eq!(post_report(origin.addr, 2, &auth, Some(SECRET), &old), 400);
    // Another address reporting the same edge URL cannot overwrite it.
    let hijack = report_body(url, "0", now_ms() + 1);
    assert_eq!(
        post_report(origin.addr, 3, &auth, Some(SECRET), &hijack),
        409
    );
    let view = cluster_view(&origin);
    assert_eq!(view["edges"][0]["capacity"], 10, "{view}");
    // The edge itself goes on reporting.
    let next = report_body(url, "20", now_ms() + 2);
    assert_eq!(post_report(origin.addr, 2, &auth, Some(SECRET), &next), 200);
    assert_eq!(cluster_view(&origin)["edges"][0]["capacity"], 20);
}

/// The status code of the whole response `raw` (0 when there is none).
fn status_line(raw: &[u8]) -> u16 {
    String::from_utf8_lossy(raw)
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// `GET /healthz/ready` of `server`: its status and JSON body.
fn readiness(server: &TestServer) -> (u16, serde_json::Value) {
    let (head, body) = http_get(server.addr, "/healthz/ready", &[]);
    (
        head.status,
        serde_json::from_slice(&body).unwrap_or_default(),
    )
}

/// The `key`s of a readiness answer's reasons.
fn reason_keys(v: &serde_json::Value) -> Vec<String> {
    v["reasons"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| r["key"].as_str().unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn healthz_ready_turns_false_at_capacity_and_true_again_below_it() {
    let server = TestServer::start("[cluster]\ncapacity = 2\n");
    let _source = Source::start(server.addr, "/live.mp3", "PUT", 1.0);
    server.wait_mount("/live.mp3");
    let (head, body) = http_get(server.addr, "/healthz/live", &[]);
    assert_eq!(head.status, 200);
    let live: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(live["live"], true);
    assert_eq!(header(&head, "cache-control"), Some("no-store"));
    let (status, v) = readiness(&server);
    assert_eq!((status, v["ready"].clone()), (200, true.into()), "{v}");
    assert_eq!(v["capacity"], 2);
    let first = Listener::open(server.addr, "/live.mp3", false);
    let second = Listener::open(server.addr, "/live.mp3", false);
    wait_until(Duration::from_secs(5), || readiness(&server).0 == 503).unwrap();
    let (_, v) = readiness(&server);
    assert_eq!(reason_keys(&v), ["full"], "{v}");
    assert_eq!(v["listeners"], 2);
    drop(second);
    wait_until(Duration::from_secs(5), || readiness(&server).0 == 200)
        .unwrap_or_else(|_| panic!("still not ready: {:?}", readiness(&server)));
    drop(first);
    // HEAD works too (an HAProxy `option httpchk HEAD`), and no credentials are needed.
    let raw = exchange(
        server.addr,
        b"HEAD /healthz/ready HTTP/1.0\r\nHost: x\r\n\r\n",
    );
    assert_eq!(status_line(&raw), 200, "{}", String::from_utf8_lossy(&raw));
}

#[test]
fn healthz_ready_waits_for_an_edges_relay_to_be_live() {
    // A relay of an upstream that is not there.
    let gone = free_port();
    let server = TestServer::start(&format!(
        "[[relay]]\nserver = \"127.0.0.1\"\nport = {gone}\nmount = \"/live.mp3\"\n"
    ));
    let (status, v) = readiness(&server);
    assert_eq!(status, 503, "{v}");
    assert_eq!(reason_keys(&v), ["relay-not-live"], "{v}");
    assert!(v["reasons"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("/live.mp3"));
}

#[test]
fn a_draining_server_sends_newcomers_of_every_path_on_and_keeps_its_listeners() {
    let origin = "http://127.0.0.1:9";
    let server = TestServer::start(&format!(
        "{}[cluster]\norigin = \"{origin}\"\npublic-url = \"http://127.0.0.1:1\"\nsecret = \"{SECRET}\"\n\
         [limits]\ndrain-timeout = 60\n",
        crate::whep::webrtc_config()
    ));
    let _source = Source::start(server.addr, "/live.mp3", "PUT", 1.0);
    server.wait_mount("/live.mp3");
    let mut kept = Listener::open(server.addr, "/live.mp3", false);
    assert_eq!(kept.head.status, 200);
    // Only an admin starts a drain, with POST.
    let post = |auth: &str| {
        let raw =
            format!("POST /api/v1/drain HTTP/1.0\r\nHost: x\r\n{auth}Content-Length: 0\r\n\r\n");
        exchange(server.addr, raw.as_bytes())
    };
    let refused = post("");
    assert_eq!(
        status_line(&refused),
        401,
        "{}",
        String::from_utf8_lossy(&refused)
    );
    assert_eq!(readiness(&server).0, 200);
    let started = post(&format!("{}\r\n", admin()));
    let text = String::from_utf8_lossy(&started).into_owned();
    assert_eq!(status_line(&started), 202, "{text}");
    assert!(text.contains("\"drain_timeout_s\":60"), "{text}");
    wait_until(Duration::from_secs(2), || readiness(&server).0 == 503).unwrap();
    assert_eq!(reason_keys(&readiness(&server).1), ["draining"]);
    // ICY and HLS newcomers: 302 to the origin, the whole target kept.
    let (head, _) = http_get(server.addr, "/live.mp3?a=1", &[]);
    assert_eq!(head.status, 302);
    assert_eq!(
        header(&head, "location"),
        Some(format!("{origin}/live.mp3?a=1").as_str())
    );
    let (head, _) = http_get(server.addr, "/hls/live.mp3/index.m3u8", &[]);
    assert_eq!(head.status, 302);
    assert_eq!(
        header(&head, "location"),
        Some(format!("{origin}/hls/live.mp3/index.m3u8").as_str())
    );
    // A WHEP offer: 307, so the browser posts it again at the origin.
    let offer = "v=0\r\n";
    let raw = format!(
        "POST /whep/live.mp3 HTTP/1.1\r\nHost: x\r\nContent-Type: application/sdp\r\nContent-Length: {}\r\n\r\n{offer}",
        offer.len()
    );
    let answer = String::from_utf8_lossy(&exchange(server.addr, raw.as_bytes())).into_owned();
    assert_eq!(status_line(answer.as_bytes()), 307, "{answer}");
    assert!(
        answer.contains(&format!("Location: {origin}/whep/live.mp3\r\n")),
        "{answer}"
    );
    // The listener it had plays on.
    let more = kept.read_for(Duration::from_millis(1500));
    assert!(
        more.len() > 4_000,
        "the kept listener got {} bytes",
        more.len()
    );
}

#[test]
fn a_draining_server_with_nowhere_to_send_refuses_newcomers_with_503() {
    let server = TestServer::start("[limits]\ndrain-timeout = 60\n");
    let _source = Source::start(server.addr, "/live.mp3", "PUT", 1.0);
    server.wait_mount("/live.mp3");
    let raw = format!(
        "POST /api/v1/drain HTTP/1.0\r\nHost: x\r\n{}\r\nContent-Length: 0\r\n\r\n",
        admin()
    );
    assert_eq!(status_line(&exchange(server.addr, raw.as_bytes())), 202);
    wait_until(Duration::from_secs(2), || readiness(&server).0 == 503).unwrap();
    let (head, _) = http_get(server.addr, "/live.mp3", &[]);
    assert_eq!(head.status, 503);
    assert_eq!(header(&head, "retry-after"), Some("5"));
}
