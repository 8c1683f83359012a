//! HLS behind a cache (issue 24): shared media playlists a cache may keep half a target
//! duration, the session token in the path, per-session playlists where asked for,
//! `throng_hls_requests_total`, the cache tier's logs (UDP syslog and `POST
//! /api/v1/hls/cache-logs`) keeping sessions alive and opening them, and the shipped nginx
//! configuration (`deploy/nginx/hls-cache.conf`, Debian nginx started by the test) in front of
//! 500 then 2,000 `throng bench` HLS players.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use throng_proto::hls::playlist::parse;

use crate::support::*;
use crate::whep::post;

/// A file-fed MP3 mount (always on, no source client) with `hls` settings.
fn config(hls: &str, dir: &std::path::Path) -> String {
    let file = dir.join("live.mp3");
    std::fs::copy(asset("demo.mp3"), &file).unwrap();
    format!("[hls]\n{hls}\n[[mount]]\nname = \"/live.mp3\"\nfile = {file:?}\n")
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
    let (head, body) = http_get(srv.addr, "/hls/live.mp3/index.m3u8", &[]);
    assert_eq!(head.status, 200);
    assert_eq!(head.header("cache-control"), Some("private, no-store"));
    let variant = parse(std::str::from_utf8(&body).unwrap())
        .unwrap()
        .variant
        .unwrap();
    let token = variant
        .strip_prefix("s/")
        .and_then(|v| v.strip_suffix("/index.m3u8"))
        .unwrap_or_else(|| panic!("variant {variant}"));
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
    // Two sessions, each a listener.
    assert_eq!(listeners(&srv), 2);
    // Throng counted what it answered: 4 playlists (2 multivariant, 2 media), 1 segment.
    let p = "throng_hls_requests_total{mount=\"/live.mp3\"";
    assert_eq!(
        metric_sum(srv.addr, &format!("{p},kind=\"playlist\"}}")),
        4.0
    );
    assert_eq!(
        metric_sum(srv.addr, &format!("{p},kind=\"segment\"}}")),
        1.0
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
    let (head, _) = http_get(srv.addr, &format!("/hls/live.mp3/{variant}"), &[]);
    assert_eq!(head.status, 200);
    assert_eq!(head.header("cache-control"), Some("private, max-age=1"));
    assert_eq!(listeners(&srv), 1);
}

#[test]
fn cache_log_lines_keep_sessions_alive_and_open_them_on_a_segment() {
    let dir = tempfile::tempdir().unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let syslog = udp.local_addr().unwrap();
    drop(udp);
    let srv = TestServer::start(&config(
        &format!("segment-seconds = 1\ncache-log-listen = \"{syslog}\""),
        dir.path(),
    ));
    wait_segments(&srv, 2);
    let seq = srv.ctx.hls.window("/live.mp3").unwrap().segments[0].seq;
    let line = |token: &str, file: &str| {
        format!(
            "{{\"addr\":\"198.51.100.{}\",\"uri\":\"/hls/live.mp3/s/{token}/{file}\",\
             \"status\":200,\"bytes\":1000,\"agent\":\"player/1\",\"referer\":\"-\"}}",
            token.len()
        )
    };
    // The API needs the admin.
    let body = line("Tok1", &format!("{seq}.mp3"));
    let (status, _, _) = post(srv.addr, "/api/v1/hls/cache-logs", &[], &body);
    assert_eq!(status, 401);
    assert_eq!(listeners(&srv), 0);
    // A playlist of an unknown token opens nothing; a segment does; garbage is counted.
    let batch = format!(
        "{}\n{}\nnot json\n{{\"uri\":\"/live.mp3\"}}\n",
        line("Tok1", "index.m3u8"),
        line("Tok1", &format!("{seq}.mp3"))
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
        (&4.into(), &1.into(), &2.into(), &1.into()),
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
        rows.contains("198.51.100.4") && rows.contains("player/1"),
        "{rows}"
    );
    // UDP syslog as nginx sends it keeps it alive past its 3 s timeout.
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        let msg = format!(
            "<190>Nov 27 02:20:00 throng: {}",
            line("Tok1", "index.m3u8")
        );
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
