//! HLS players against the test server's live HLS stream (`TestServerConfig::hls`), in-process
//! runs over real sockets: a healthy stream (every player streams, none starved or corrupt, the
//! media rate about real time, every segment verified), garbage frames after valid segments
//! (every player corrupt, the verdict FAIL, the reason naming `corrupt`), and a server whose
//! answers are not HLS (failures by reason, never a panic).

use std::io::{Read, Write};
use throng_bench::mode::Mode;
use throng_bench::profile::{Profile, Secs};
use throng_bench::report::summary::RunReport;
use throng_bench::report::threshold::with_defaults;
use throng_bench::run::{execute, group_of_flags};
use throng_bench::scenario::plan::Plan;
use throng_bench::testserver::{TestServer, TestServerConfig};

/// A run of `players` HLS players of `url` holding `hold_s` seconds, in-process, with the
/// default thresholds.
fn run(url: String, players: u32, hold_s: f64) -> RunReport {
    let profile = Profile {
        listeners: players,
        ramp: 1000.0,
        hold: Secs(hold_s),
        workers: Some(0),
        ..Profile::default()
    };
    let group = group_of_flags(
        Mode::Hls,
        &[url],
        &profile,
        &Default::default(),
        &Default::default(),
    );
    let plan = Plan {
        name: "hls".into(),
        stages: group.schedule.clone(),
        groups: vec![group],
        profile: Some(profile),
        thresholds: with_defaults(vec![], false, 1000.0, false),
        ..Plan::default()
    };
    execute(&plan).expect("run")
}

/// A test server with an HLS stream of 1 s segments (its window full from the start).
fn hls_server(garbage_after_secs: Option<f64>) -> (TestServer, String) {
    let cfg = TestServerConfig {
        hls: true,
        hls_segment_secs: 1.0,
        garbage_after_secs,
        ..TestServerConfig::default()
    };
    let srv = TestServer::start("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let url = format!("http://{}/hls/live/index.m3u8", srv.addr());
    (srv, url)
}

#[test]
fn a_healthy_stream_plays_every_player_whole() {
    let (srv, url) = hls_server(None);
    let r = run(url, 20, 10.0);
    let s = &r.summary;
    eprintln!(
        "{}; media rate {:?}, {} segments, {:?} requests/s, ttfb p50 {:?} ms, longest gap p99 {:?} ms",
        r.verdict, s.media_rate, s.frames_checked, s.requests_per_s, s.ttfb_p50_ms,
        s.longest_gap_p99_ms
    );
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(s.failures_total, 0, "{:?}", s.failures);
    assert_eq!((s.peak_streaming, s.final_streaming), (20, 20), "{s:?}");
    assert_eq!((s.starved, s.corrupt), (0, 0), "{s:?}");
    let rate = s.media_rate.expect("a media rate");
    assert!((0.95..1.05).contains(&rate), "media rate {rate}");
    // About 3 startup segments and one a second for each player, every one verified.
    assert!(
        s.frames_checked >= 20 * 10,
        "segments verified: {}",
        s.frames_checked
    );
    assert_eq!(s.garbage_bytes, 0);
    assert!(s.requests_per_s.unwrap() > 20.0, "{:?}", s.requests_per_s);
    assert!(s.ttfb_p50_ms.is_some());
    assert!(s.pass, "{} {:?}", r.verdict, s.fail_reasons);
    assert!(s.extra.is_empty(), "no corruption counted: {:?}", s.extra);
    // The players' sessions, under the mount the URL names (`/hls/<mount>/…`, as Throng's).
    let gt = &r.ground_truth["/live"];
    assert_eq!(gt.sessions, 20);
    assert!(gt.listening_seconds > 20.0 * 9.0, "{gt:?}");
    assert!(
        srv.stats()
            .hls_requests
            .load(std::sync::atomic::Ordering::Relaxed)
            > 200
    );
}

#[test]
fn garbage_after_valid_segments_makes_every_player_corrupt() {
    let (_srv, url) = hls_server(Some(3.0));
    let r = run(url, 10, 7.0);
    let s = &r.summary;
    assert_eq!(s.failures_total, 0, "{:?}", s.failures);
    assert_eq!(s.corrupt, 10, "{s:?}");
    assert!(!s.pass);
    assert!(s.garbage_bytes > 0);
    // Valid segments came first: verified, media credited.
    assert!(s.frames_checked >= 10 * 3, "{}", s.frames_checked);
    // Whole segments of garbage after the tag: no frame in them.
    assert!(
        s.extra
            .get("hls-corrupt-no-frames")
            .is_some_and(|&n| n >= 10.0),
        "{:?}",
        s.extra
    );
    let reasons = throng_bench::report::verdict::reasons(&r);
    assert!(
        reasons.iter().any(|l| l.starts_with("corrupt: 10 of 10")),
        "{reasons:?}"
    );
    assert!(r.verdict.starts_with("FAIL"), "{}", r.verdict);
}

/// A server answering each request by its path: `/page.m3u8` an HTML page, `/hls.m3u8` a
/// playlist of segments that are 404, anything else closing without an answer.
fn bad_server() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            std::thread::spawn(move || loop {
                let mut buf = [0u8; 2048];
                let n = match c.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                let req = String::from_utf8_lossy(&buf[..n]).to_string();
                let path = req.split_whitespace().nth(1).unwrap_or("").to_owned();
                let (status, body) = if path == "/page.m3u8" {
                    ("200 OK", "<html>no playlist</html>".to_owned())
                } else if path.starts_with("/hls.m3u8") {
                    let mut p = "#EXTM3U\n#EXT-X-TARGETDURATION:1\n".to_owned();
                    for k in 0..5 {
                        p.push_str(&format!("#EXTINF:1.0,\n{k}.mp3\n"));
                    }
                    ("200 OK", p)
                } else if path.ends_with(".mp3") {
                    ("404 Not Found", String::new())
                } else {
                    return;
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                if c.write_all(head.as_bytes()).is_err() {
                    return;
                }
            });
        }
    });
    format!("http://{addr}")
}

#[test]
fn answers_that_are_not_hls_are_failures_by_reason() {
    let base = bad_server();
    for (path, key) in [
        ("/page.m3u8", "bad-playlist"),
        ("/hls.m3u8", "http-404"),
        ("/gone.m3u8", "closed-before-head"),
    ] {
        let r = run(format!("{base}{path}"), 5, 2.0);
        let s = &r.summary;
        assert_eq!(s.failures.get(key), Some(&5), "{path}: {:?}", s.failures);
        assert_eq!(s.failed_listeners, 5, "{path}");
        assert!(!s.pass, "{path}");
    }
}
