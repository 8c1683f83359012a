//! HLS behind a cache (issue 24): shared media playlists a cache may keep half a target
//! duration, the session token in the path, per-session playlists where asked for,
//! `throng_hls_requests_total`, the cache tier's logs (UDP syslog and `POST
//! /api/v1/hls/cache-logs`) keeping sessions alive and opening them (issue 42: from the
//! senders of `cache-log-from` only, with the POST's own credentials, and for tokens Throng
//! issued only), and the shipped nginx
//! configuration (`deploy/nginx/hls-cache.conf`, Debian nginx started by the test) in front of
//! 500 then 2,000 `throng bench` HLS players.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use throng_proto::hls::playlist::parse;

use crate::support::*;
use crate::whep::post;

/// A file-fed MP3 mount (always on, no source client) with `hls` settings; the cache on
/// loopback is trusted for `X-Forwarded-For`, as `deploy/nginx/hls-cache.conf` asks (the
/// players' addresses, not the cache's, are capped per address).
fn config(hls: &str, dir: &std::path::Path) -> String {
    let file = dir.join("live.mp3");
    std::fs::copy(asset("demo.mp3"), &file).unwrap();
    format!(
        "[hls]\n{hls}\n[paths]\nx-forwarded-for = [\"127.0.0.1\"]\n\
         [[mount]]\nname = \"/live.mp3\"\nfile = {file:?}\n"
    )
}

/// A server with `/live.mp3` ([`config`]) of `segment_seconds` segments, receiving cache logs
/// as UDP syslog on a free port, with `extra` TOML for the mount; the server and that port.
fn server_with_cache_logs(
    segment_seconds: u64,
    extra: &str,
    dir: &std::path::Path,
) -> (TestServer, SocketAddr) {
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let syslog = udp.local_addr().unwrap();
    drop(udp);
    let mut cfg = config(
        &format!("segment-seconds = {segment_seconds}\ncache-log-listen = \"{syslog}\""),
        dir,
    );
    cfg.push_str(extra);
    (TestServer::start(&cfg), syslog)
}

/// Opens a session of `/live.mp3` at `addr` with shared playlists: the multivariant
/// playlist's response head, the media playlist URI it names (`s/<token>/index.m3u8`) and the
/// token.
fn open_shared(addr: SocketAddr) -> (throng_proto::http::ResponseHead, String, String) {
    let (head, body) = http_get(addr, "/hls/live.mp3/index.m3u8", &[]);
    assert_eq!(head.status, 200);
    let variant = parse(std::str::from_utf8(&body).unwrap())
        .unwrap()
        .variant
        .unwrap();
    let token = variant
        .strip_prefix("s/")
        .and_then(|v| v.strip_suffix("/index.m3u8"))
        .unwrap_or_else(|| panic!("variant {variant}"))
        .to_owned();
    (head, variant, token)
}

/// Waits until `/live.mp3` is packaged and lists `n` segments.
fn wait_segments(srv: &TestServer, n: usize) {
    srv.wait_mount("/live.mp3");
    wait_until(Duration::from_secs(30), || {
        srv.ctx
            .hls
            .window("/live.mp3")
            .is_some_and(|w| w.segments.len() >= n)
    })
    .expect("segments cut");
}

/// The sum of the `/metrics` series starting with `prefix` (e.g.
/// `throng_hls_requests_total{mount="/live.mp3"`).
fn metric_sum(addr: SocketAddr, prefix: &str) -> f64 {
    let (head, body) = http_get(addr, "/metrics", &[]);
    assert_eq!(head.status, 200);
    String::from_utf8(body)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// HLS listeners of `/live.mp3` in `/api/v1/status`.
fn listeners(srv: &TestServer) -> u64 {
    srv.mount_status("/live.mp3").unwrap()["listeners"]
        .as_u64()
        .unwrap()
}

#[test]
fn shared_playlists_carry_the_token_in_the_path_and_are_cacheable() {
    let dir = tempfile::tempdir().unwrap();
    let srv = TestServer::start(&config("segment-seconds = 2", dir.path()));
    wait_segments(&srv, 1);
    let (head, variant, token) = open_shared(srv.addr);
    assert_eq!(head.header("cache-control"), Some("private, no-store"));
    let media = format!("/hls/live.mp3/{variant}");
    let (h1, b1) = http_get(srv.addr, &media, &[]);
    assert_eq!(h1.status, 200);
    // At most half the 2 s target duration.
    assert_eq!(h1.header("cache-control"), Some("public, max-age=1"));
    // Another player's playlist: the same bytes.
    let (_, other) = http_get(srv.addr, "/hls/live.mp3/index.m3u8", &[]);
    let other = parse(std::str::from_utf8(&other).unwrap())
        .unwrap()
        .variant
        .unwrap();
    assert_ne!(other, variant);
    let (_, b2) = http_get(srv.addr, &format!("/hls/live.mp3/{other}"), &[]);
    assert_eq!(b1, b2, "every player gets the same media playlist");
    // Segment URLs are relative: they resolve under the token's path, and are served there.
    let pl = parse(std::str::from_utf8(&b1).unwrap()).unwrap();
    let (_, uri, _) = pl.segments.last().unwrap();
    assert!(!uri.contains('/'), "relative segment URI {uri}");
    let (hs, seg) = http_get(srv.addr, &format!("/hls/live.mp3/s/{token}/{uri}"), &[]);
    assert_eq!(hs.status, 200);
    assert_eq!(
        hs.header("cache-control"),
        Some("public, max-age=86400, immutable")
    );
    assert!(!seg.is_empty());
    // Two sessions; only the one that fetched a segment is a listener (issue 28), until the
    // other fetches one too.
    assert_eq!(listeners(&srv), 1);
    let other_token = other.strip_suffix("index.m3u8").unwrap();
    let (hs, _) = http_get(srv.addr, &format!("/hls/live.mp3/{other_token}{uri}"), &[]);
    assert_eq!(hs.status, 200);
    assert_eq!(listeners(&srv), 2);
    // Throng counted what it answered: 4 playlists (2 multivariant, 2 media), 2 segments.
    let p = "throng_hls_requests_total{mount=\"/live.mp3\"";
    assert_eq!(
        metric_sum(srv.addr, &format!("{p},kind=\"playlist\"}}")),
        4.0
    );
    assert_eq!(
        metric_sum(srv.addr, &format!("{p},kind=\"segment\"}}")),
        2.0
    );
}

#[test]
fn per_session_playlists_stay_available_per_mount() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config("segment-seconds = 2", dir.path());
    cfg.push_str("hls-playlists = \"per-session\"\n");
    let srv = TestServer::start(&cfg);
    wait_segments(&srv, 1);
    let (_, body) = http_get(srv.addr, "/hls/live.mp3/index.m3u8", &[]);
    let variant = parse(std::str::from_utf8(&body).unwrap())
        .unwrap()
        .variant
        .unwrap();
    assert!(variant.starts_with("index.m3u8?session="), "{variant}");
    let (head, body) = http_get(srv.addr, &format!("/hls/live.mp3/{variant}"), &[]);
    assert_eq!(head.status, 200);
    assert_eq!(head.header("cache-control"), Some("private, max-age=1"));
    assert_eq!(listeners(&srv), 0, "a listener once it fetches a segment");
    // Its segments are named without the token: the address's pending session is the one.
    let pl = parse(std::str::from_utf8(&body).unwrap()).unwrap();
    let (_, uri, _) = pl.segments.last().unwrap();
    let (head, _) = http_get(srv.addr, &format!("/hls/live.mp3/{uri}"), &[]);
    assert_eq!(head.status, 200);
    assert_eq!(listeners(&srv), 1);
}

#[test]
fn cache_log_lines_keep_sessions_alive_and_open_them_on_a_segment() {
    let dir = tempfile::tempdir().unwrap();
    let (srv, syslog) = server_with_cache_logs(1, "", dir.path());
    wait_segments(&srv, 2);
    let seq = srv.ctx.hls.window("/live.mp3").unwrap().segments[0].seq;
    let line = |token: &str, file: &str| {
        format!(
            "{{\"addr\":\"198.51.100.{}\",\"uri\":\"/hls/live.mp3/s/{token}/{file}\",\
             \"status\":200,\"bytes\":1000,\"agent\":\"player/1\",\"referer\":\"-\"}}",
            token.len()
        )
    };
    // A token Throng issued whose session is not in the table (expired during a gap in the
    // logs, or from before a restart with the same `token-secret`): its MAC checks (issue 42).
    let tok = srv.ctx.hls.tokens.issue(None);
    // The API needs credentials.
    let body = line(&tok, &format!("{seq}.mp3"));
    let (status, _, _) = post(srv.addr, "/api/v1/hls/cache-logs", &[], &body);
    assert_eq!(status, 401);
    assert_eq!(listeners(&srv), 0);
    // A playlist of an unknown token opens nothing; a segment does; a segment of a token
    // Throng did not issue does not; garbage is counted.
    let batch = format!(
        "{}\n{}\n{}\nnot json\n{{\"uri\":\"/live.mp3\"}}\n",
        line(&tok, "index.m3u8"),
        line("Tok1", &format!("{seq}.mp3")),
        line(&tok, &format!("{seq}.mp3"))
    );
    let (status, _, reply) = post(
        srv.addr,
        "/api/v1/hls/cache-logs",
        &[&admin_header()],
        &batch,
    );
    assert_eq!(status, 200, "{reply}");
    let v: serde_json::Value = serde_json::from_str(&reply).unwrap();
    assert_eq!(
        (&v["lines"], &v["opened"], &v["ignored"], &v["invalid"]),
        (&5.into(), &1.into(), &3.into(), &1.into()),
        "{reply}"
    );
    assert_eq!(listeners(&srv), 1);
    // The line's address and User-Agent are the session's.
    let (_, rows) = http_get(
        srv.addr,
        "/api/v1/mounts/live.mp3/listeners",
        &[&admin_header()],
    );
    let rows = String::from_utf8(rows).unwrap();
    assert!(
        rows.contains("198.51.100.32") && rows.contains("player/1"),
        "{rows}"
    );
    // UDP syslog as nginx sends it keeps it alive past its 3 s timeout.
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        let msg = format!("<190>Nov 27 02:20:00 throng: {}", line(&tok, "index.m3u8"));
        sock.send_to(msg.as_bytes(), syslog).unwrap();
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(listeners(&srv), 1, "kept alive by the syslog lines");
    // Lines stop: the session ends (client:vanished), through the one audience record.
    wait_until(Duration::from_secs(10), || listeners(&srv) == 0).expect("session expired");
    let ended = metric_sum(
        srv.addr,
        "throng_session_ends_total{path=\"hls\",reason=\"client:vanished\"}",
    );
    assert_eq!(ended, 1.0);
    assert!(
        metric_sum(
            srv.addr,
            "throng_hls_cache_log_lines_total{outcome=\"touched\"}"
        ) >= 8.0
    );
}

/// One cache-log line (the `throng_hls` record) from player address `10.0.<i>` for `file` of
/// `/live.mp3` under `token`.
fn log_line(i: usize, token: &str, file: &str) -> String {
    format!(
        "<190>Dec  2 14:00:00 cache1 throng: {{\"addr\":\"10.0.{}.{}\",\
         \"uri\":\"/hls/live.mp3/s/{token}/{file}\",\"status\":200,\"bytes\":48213,\
         \"agent\":\"player/{i}\",\"referer\":\"-\",\"cache\":\"HIT\"}}",
        i / 250,
        i % 250 + 1
    )
}

/// Sends `lines` to `syslog` as one datagram each from a socket on 127.0.0.1, 50 every 10 ms
/// (1,000 in 0.2 s: the receiver keeps up, so none is lost in its socket buffer).
fn send_datagrams(syslog: SocketAddr, lines: &[String]) {
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for chunk in lines.chunks(50) {
        for l in chunk {
            sock.send_to(l.as_bytes(), syslog).unwrap();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The count of cache-log lines with `outcome` in `/metrics`.
fn log_lines(srv: &TestServer, outcome: &str) -> f64 {
    metric_sum(
        srv.addr,
        &format!("throng_hls_cache_log_lines_total{{outcome=\"{outcome}\"}}"),
    )
}

/// Issue 42, probe 4: any sender to `cache-log-listen` opened sessions (100,000 forged lines
/// gave 100,001 listeners). Now the receiver reads datagrams only from `[hls]
/// cache-log-from`: 1,000 datagrams from 127.0.0.1, not listed, are refused unread, even those
/// naming real tokens (a pending session's, and one Throng issued with no session), and no
/// listener, session or cache-log outcome other than `refused` comes of them.
#[test]
fn a_thousand_forged_datagrams_from_an_unlisted_sender_open_no_listener() {
    let dir = tempfile::tempdir().unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let syslog = udp.local_addr().unwrap();
    drop(udp);
    let srv = TestServer::start(&config(
        &format!(
            "segment-seconds = 1\ncache-log-listen = \"{syslog}\"\n\
             cache-log-from = [\"192.0.2.10\", \"2001:db8::/32\"]"
        ),
        dir.path(),
    ));
    wait_segments(&srv, 2);
    let seg = format!(
        "{}.mp3",
        srv.ctx.hls.window("/live.mp3").unwrap().segments[0].seq
    );
    let (_, _, pending) = open_shared(srv.addr);
    let issued = srv.ctx.hls.tokens.issue(None);
    let sessions_before = srv.ctx.hls.sessions.len();
    let lines: Vec<String> = (0..1000)
        .map(|i| match i % 10 {
            0 => log_line(i, &pending, &seg),
            1 => log_line(i, &issued, &seg),
            _ => log_line(i, &format!("Forged{i:026}"), &seg),
        })
        .collect();
    send_datagrams(syslog, &lines);
    wait_until(Duration::from_secs(30), || {
        log_lines(&srv, "refused") == 1000.0
    })
    .expect("every datagram refused");
    assert_eq!(listeners(&srv), 0);
    assert_eq!(
        metric_sum(srv.addr, "throng_listeners{mount=\"/live.mp3\"}"),
        0.0
    );
    assert_eq!(
        srv.ctx.hls.sessions.len(),
        sessions_before,
        "no session opened"
    );
    for outcome in ["touched", "opened", "ignored", "invalid"] {
        assert_eq!(log_lines(&srv, outcome), 0.0, "{outcome}: nothing was read");
    }
}

/// Issue 42, probe 4, from a listed sender (the default: the socket's loopback address): a
/// line opens a session only for a token Throng issued. 1,000 forged tokens (short, random
/// of the issued length, an issued token with its MAC altered) fill none of the mount's 3
/// listener slots; then an issued token with no session opens one and a pending session's
/// token makes it a listener, as before.
#[test]
fn from_a_listed_sender_only_issued_tokens_open_listeners() {
    let dir = tempfile::tempdir().unwrap();
    let (srv, syslog) = server_with_cache_logs(1, "max-listeners = 3\n", dir.path());
    wait_segments(&srv, 2);
    let seg = format!(
        "{}.mp3",
        srv.ctx.hls.window("/live.mp3").unwrap().segments[0].seq
    );
    let issued = srv.ctx.hls.tokens.issue(None);
    let mut altered = issued.clone();
    let last = if altered.ends_with('0') { "1" } else { "0" };
    altered.replace_range(31.., last);
    let lines: Vec<String> = (0..1000)
        .map(|i| match i % 3 {
            0 => log_line(i, &format!("F{i}"), &seg),
            1 => log_line(i, &format!("Forged{i:026}"), &seg),
            _ => log_line(i, &altered, &seg),
        })
        .collect();
    send_datagrams(syslog, &lines);
    wait_until(Duration::from_secs(30), || {
        log_lines(&srv, "ignored") == 1000.0
    })
    .expect("every forged line read and ignored");
    assert_eq!(listeners(&srv), 0, "no forged token took a slot");
    assert_eq!(log_lines(&srv, "opened"), 0.0);
    assert_eq!(
        log_lines(&srv, "refused"),
        0.0,
        "the loopback sender is listed"
    );
    // Real tokens count as before: one Throng issued (no session: opened from the line) and
    // a pending session's (started as a listener).
    let (_, _, pending) = open_shared(srv.addr);
    send_datagrams(
        syslog,
        &[log_line(1, &issued, &seg), log_line(2, &pending, &seg)],
    );
    wait_until(Duration::from_secs(10), || listeners(&srv) == 2).expect("two listeners");
    assert_eq!(log_lines(&srv, "opened"), 1.0);
    assert_eq!(log_lines(&srv, "touched"), 1.0);
}

/// Issue 42, probe 4: `POST /api/v1/hls/cache-logs` takes credentials of its own, user
/// `cache-log` with `[authentication] cache-log-password`, which open nothing else; the
/// admin's still work, and nothing else does.
#[test]
fn posted_cache_logs_take_the_cache_log_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "listen = [\"127.0.0.1:0\"]\nworkers = 2\n{}\n[authentication]\n\
         admin-password = \"{ADMIN_PW}\"\ncache-log-password = \"cdn-logs-0123\"\n\
         [logging]\naccess-log = \"\"\n",
        config("segment-seconds = 1", dir.path())
    );
    let srv = TestServer::start_config(throng_server::config::Config::from_toml(&toml).unwrap());
    let auth = |user: &str, pw: &str| {
        format!(
            "Authorization: {}",
            throng_proto::auth::basic_authorization(user, pw)
        )
    };
    let line = "{\"uri\":\"/hls/live.mp3/s/Tok1/1.mp3\",\"status\":200}";
    let cache_log = auth("cache-log", "cdn-logs-0123");
    for (who, headers, status) in [
        ("the cache-log user", vec![cache_log.clone()], 200),
        ("the admin", vec![admin_header()], 200),
        ("nobody", vec![], 401),
        (
            "a wrong password",
            vec![auth("cache-log", "cdn-logs-0124")],
            401,
        ),
        (
            "the admin's password",
            vec![auth("cache-log", ADMIN_PW)],
            401,
        ),
        ("another user", vec![auth("metrics", "cdn-logs-0123")], 401),
    ] {
        let h: Vec<&str> = headers.iter().map(String::as_str).collect();
        let (got, _, reply) = post(srv.addr, "/api/v1/hls/cache-logs", &h, line);
        assert_eq!(got, status, "{who}: {reply}");
        if got == 200 {
            assert!(reply.contains("\"ignored\":1"), "{who}: {reply}");
        }
    }
    // The cache-log credentials open nothing of the admin's.
    let (head, _) = http_get(srv.addr, "/api/v1/mounts/live.mp3/listeners", &[&cache_log]);
    assert_eq!(head.status, 401);
    let (head, _) = http_get(
        srv.addr,
        "/admin/listclients?mount=/live.mp3",
        &[&cache_log],
    );
    assert_eq!(head.status, 401);
}

/// nginx (Debian package) running the shipped `deploy/nginx/hls-cache.conf`, its three
/// addresses marked CHANGE set for this test; killed on drop.
pub(crate) struct CacheTier {
    _proc: Proc,
    /// Where players reach it.
    pub(crate) addr: SocketAddr,
}

/// `text` with `from` replaced by `to`; panics when `from` is not there (the shipped file
/// changed under the test).
fn set(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "hls-cache.conf no longer has {from:?}");
    text.replace(from, to)
}

/// Starts the cache tier; with `secret`, the shipped `hls-secure-link.conf` is included with
/// that secret.
pub(crate) fn start_cache(
    dir: &std::path::Path,
    upstream: SocketAddr,
    syslog: SocketAddr,
    secret: Option<&str>,
) -> CacheTier {
    require("nginx");
    let shipped = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/nginx/hls-cache.conf"),
    )
    .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let d = dir.display();
    let snippet = set(
        &shipped,
        "/var/cache/nginx/throng-hls",
        &format!("{d}/cache"),
    );
    let snippet = set(
        &snippet,
        "server 127.0.0.1:8000;",
        &format!("server {upstream};"),
    );
    let snippet = set(&snippet, "listen 80;", &format!("listen 127.0.0.1:{port};"));
    let snippet = set(
        &snippet,
        "syslog:server=127.0.0.1:5140",
        &format!("syslog:server={syslog}"),
    );
    let snippet = match secret {
        Some(secret) => {
            let link = std::fs::read_to_string(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../../deploy/nginx/hls-secure-link.conf"),
            )
            .unwrap();
            std::fs::write(
                dir.join("hls-secure-link.conf"),
                set(&link, " CHANGE-ME\"", &format!(" {secret}\"")),
            )
            .unwrap();
            set(
                &snippet,
                "# include /etc/nginx/throng/hls-secure-link.conf;",
                &format!("include {d}/hls-secure-link.conf;"),
            )
        }
        None => snippet,
    };
    std::fs::write(dir.join("hls-cache.conf"), snippet).unwrap();
    let conf = format!(
        "daemon off;\nmaster_process off;\nworker_rlimit_nofile 8192;\npid {d}/nginx.pid;\n\
         error_log {d}/error.log;\nevents {{ worker_connections 8000; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  \
         proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  \
         scgi_temp_path {d}/scgi;\n  include {d}/hls-cache.conf;\n}}\n"
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, conf).unwrap();
    let proc = Proc(
        Command::new("nginx")
            .arg("-c")
            .arg(&path)
            .arg("-p")
            .arg(dir)
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn nginx"),
    );
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    wait_until(Duration::from_secs(10), || {
        std::net::TcpStream::connect(addr).is_ok()
    })
    .expect("nginx listening");
    CacheTier { _proc: proc, addr }
}

/// What one step of players through the cache showed.
struct Step {
    /// Throng's HLS requests per second over the steady part of the hold.
    origin_rate: f64,
    /// HLS listeners Throng counted, sampled during the steady part.
    counted: Vec<u64>,
    report: throng_bench::report::summary::RunReport,
}

/// Players arrive this fast (per second).
const RAMP: f64 = 500.0;
/// Each step's hold (seconds): short, as CI runs it on two cores.
const HOLD: f64 = 36.0;

/// `players` `throng bench` HLS players through the cache at `proxy` for [`HOLD`] seconds;
/// Throng's HLS request rate and its HLS listener count are read during the hold, from 8 s
/// after the ramp (every player is in steady state) to 32 s.
fn step(srv: &TestServer, proxy: SocketAddr, players: u32) -> Step {
    use throng_bench::profile::{Profile, Secs};
    let profile = Profile {
        listeners: players,
        ramp: RAMP,
        hold: Secs(HOLD),
        ..Default::default()
    };
    let group = throng_bench::run::group_of_flags(
        throng_bench::mode::Mode::Hls,
        &[format!("http://{proxy}/hls/live.mp3/index.m3u8")],
        &profile,
        &Default::default(),
        &Default::default(),
    );
    let plan = throng_bench::scenario::plan::Plan {
        name: format!("hls-cache-{players}"),
        stages: group.schedule.clone(),
        groups: vec![group],
        profile: Some(profile),
        thresholds: throng_bench::report::threshold::with_defaults(vec![], false, 1000.0, false),
        ..Default::default()
    };
    let t0 = Instant::now();
    let run = std::thread::spawn(move || throng_bench::run::execute(&plan));
    let steady = t0 + Duration::from_secs_f64(players as f64 / RAMP + 8.0);
    std::thread::sleep(steady.saturating_duration_since(Instant::now()));
    let origin = || metric_sum(srv.addr, "throng_hls_requests_total{mount=\"/live.mp3\"");
    let (c1, i1) = (origin(), Instant::now());
    let mut counted = Vec::new();
    for _ in 0..4 {
        std::thread::sleep(Duration::from_secs(6));
        counted.push(listeners(srv));
    }
    let (c2, i2) = (origin(), Instant::now());
    let report = run.join().unwrap().expect("bench run");
    Step {
        origin_rate: (c2 - c1) / i2.duration_since(i1).as_secs_f64(),
        counted,
        report,
    }
}

#[test]
fn nginx_with_the_shipped_config_serves_500_then_2000_players_at_a_flat_origin_rate() {
    let dir = tempfile::tempdir().unwrap();
    let (srv, syslog) = server_with_cache_logs(2, "", dir.path());
    wait_segments(&srv, 3);
    let cache = start_cache(dir.path(), srv.addr, syslog, None);
    // Two players through the cache: each its own session (the multivariant playlist is never
    // kept), the same media playlist.
    let media: Vec<String> = (0..2)
        .map(|_| {
            let (h, b) = http_get(cache.addr, "/hls/live.mp3/index.m3u8", &[]);
            assert_eq!(h.status, 200);
            let v = parse(std::str::from_utf8(&b).unwrap()).unwrap().variant;
            let v = v.expect("a multivariant playlist, not a cached media playlist");
            let (h, b) = http_get(cache.addr, &format!("/hls/live.mp3/{v}"), &[]);
            assert_eq!(h.status, 200);
            let text = String::from_utf8(b).unwrap();
            // A segment through the cache: its log line makes the session a listener.
            let (_, uri, _) = parse(&text).unwrap().segments.last().cloned().unwrap();
            let dir = v.strip_suffix("index.m3u8").unwrap();
            let (h, _) = http_get(cache.addr, &format!("/hls/live.mp3/{dir}{uri}"), &[]);
            assert_eq!(h.status, 200);
            text
        })
        .collect();
    assert!(parse(&media[1]).unwrap().segments.len() >= 3);
    wait_until(Duration::from_secs(5), || listeners(&srv) == 2)
        .expect("both players counted from the cache's logs");
    let mut rates = Vec::new();
    for players in [500u32, 2000] {
        let s = step(&srv, cache.addr, players);
        let sum = &s.report.summary;
        let refused: Vec<(&str, f64)> = ["rate", "per-address", "full"]
            .into_iter()
            .map(|o| {
                let series = format!("throng_hls_sessions_refused_total{{outcome=\"{o}\"}}");
                (o, metric_sum(srv.addr, &series))
            })
            .collect();
        eprintln!(
            "{players} players: origin {:.2} HLS requests/s, counted {:?}, starved {}, \
             corrupt {} {:?}, failures {}, sessions refused {refused:?}",
            s.origin_rate, s.counted, sum.starved, sum.corrupt, sum.extra, sum.failures_total
        );
        assert!(s.report.errors.is_empty(), "{:?}", s.report.errors);
        assert_eq!(sum.failures_total, 0, "{:?}", sum.failures);
        assert_eq!(sum.starved, 0, "starved players");
        // Every player's segments, through the cache, verified whole.
        assert_eq!(sum.corrupt, 0, "corrupt players: {:?}", sum.extra);
        assert_eq!(sum.peak_streaming, players);
        let tolerance = players as f64 * 0.02;
        for c in &s.counted {
            assert!(
                (*c as f64 - players as f64).abs() <= tolerance,
                "{c} HLS listeners counted for {players} players"
            );
        }
        rates.push(s.origin_rate);
        // The players are gone: their sessions end once their log lines stop.
        wait_until(Duration::from_secs(30), || listeners(&srv) == 0)
            .expect("sessions ended after the run");
    }
    assert!(rates[0] > 0.0);
    assert!(
        rates[1] < rates[0] * 1.10,
        "origin HLS requests/s grew from {:.2} to {:.2}",
        rates[0],
        rates[1]
    );
}

#[test]
fn signed_links_are_checked_by_nginx_and_by_throng() {
    const SECRET: &str = "test-link-secret";
    let dir = tempfile::tempdir().unwrap();
    let (srv, syslog) = server_with_cache_logs(
        1,
        &format!("hls-secure-link-secret = \"{SECRET}\"\n"),
        dir.path(),
    );
    wait_segments(&srv, 2);
    let cache = start_cache(dir.path(), srv.addr, syslog, Some(SECRET));
    // A player through the cache: a signed token, its playlist and segments served.
    let (_, variant, token) = open_shared(cache.addr);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let id = token.split('-').next().unwrap().to_owned();
    assert_eq!(
        throng_proto::hls::secure_link::check(&token, "/live.mp3", SECRET, now),
        Ok(())
    );
    let (h, media) = http_get(cache.addr, &format!("/hls/live.mp3/{variant}"), &[]);
    assert_eq!(h.status, 200);
    let media = parse(std::str::from_utf8(&media).unwrap()).unwrap();
    let (_, seg, _) = media.segments.last().unwrap().clone();
    let (h, _) = http_get(cache.addr, &format!("/hls/live.mp3/s/{token}/{seg}"), &[]);
    assert_eq!(h.status, 200);
    // Refused alike by nginx and by Throng: an expired token signed with the right secret
    // (410), a forged one (403), one signed for another mount (403), an unsigned one and a
    // segment outside a session path (403).
    let expired = throng_proto::hls::secure_link::sign(&id, "/live.mp3", now - 10, SECRET);
    let mut forged = token.clone();
    let last = forged.pop().unwrap();
    forged.push(if last == 'A' { 'B' } else { 'A' });
    let other = throng_proto::hls::secure_link::sign(&id, "/other.mp3", now + 600, SECRET);
    let cases = [
        (format!("/hls/live.mp3/s/{expired}/index.m3u8"), 410),
        (format!("/hls/live.mp3/s/{expired}/{seg}"), 410),
        (format!("/hls/live.mp3/s/{forged}/index.m3u8"), 403),
        (format!("/hls/live.mp3/s/{forged}/{seg}"), 403),
        (format!("/hls/live.mp3/s/{other}/{seg}"), 403),
        (format!("/hls/live.mp3/s/{id}/index.m3u8"), 403),
        (format!("/hls/live.mp3/{seg}"), 403),
    ];
    for (path, status) in &cases {
        for (who, addr) in [("nginx", cache.addr), ("Throng", srv.addr)] {
            let (h, _) = http_get(addr, path, &[]);
            assert_eq!(h.status, *status, "{who}: GET {path}");
        }
    }
    // A forged token in the cache's logs opens no session.
    let before = listeners(&srv);
    let line = format!("{{\"uri\":\"/hls/live.mp3/s/{forged}/{seg}\",\"status\":200}}");
    let (status, _, reply) = post(
        srv.addr,
        "/api/v1/hls/cache-logs",
        &[&admin_header()],
        &line,
    );
    assert_eq!(status, 200);
    assert!(reply.contains("\"ignored\":1"), "{reply}");
    assert_eq!(listeners(&srv), before);
}

/// Through the shipped nginx configuration, a multivariant playlist that was `404` once (the
/// mount not live yet) is never served from the cache afterwards: players arriving together
/// once the mount is live all get their own token (before, nginx kept the 404 for a second and
/// served it stale to concurrent players for as long as it had no 200 to store instead, and the
/// 200 is `no-store`).
#[test]
fn a_multivariant_playlist_404_is_not_served_stale_by_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let syslog = udp.local_addr().unwrap();
    drop(udp);
    // The 40 players below all come from 127.0.0.1 through the cache: room for them in the
    // per-address bounds of new sessions (issue 28), which this test is not about.
    let srv = TestServer::start(&config(
        &format!(
            "segment-seconds = 2\ncache-log-listen = \"{syslog}\"\n\
             new-sessions-per-second = 100\npending-per-address = 100"
        ),
        dir.path(),
    ));
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = start_cache(cache_dir.path(), srv.addr, syslog, None);
    let path = "/hls/later.mp3/index.m3u8";
    let (head, _) = http_get(cache.addr, path, &[]);
    assert_eq!(head.status, 404, "not live yet");
    let _source = Source::start(srv.addr, "/later.mp3", "SOURCE", 1.0);
    wait_until(Duration::from_secs(20), || {
        srv.ctx
            .hls
            .output("/later.mp3")
            .is_some_and(|o| !o.window.load().segments.is_empty())
    })
    .expect("/later.mp3 packaged");
    // Past the second the 404 was kept: stale now, were it kept at all.
    std::thread::sleep(Duration::from_millis(1200));
    let players: Vec<_> = (0..40)
        .map(|_| {
            let addr = cache.addr;
            std::thread::spawn(move || http_get(addr, path, &[]).0.status)
        })
        .collect();
    let statuses: Vec<u16> = players.into_iter().map(|p| p.join().unwrap()).collect();
    assert!(statuses.iter().all(|&s| s == 200), "{statuses:?}");
}
