//! Every listener verified: a steady server starves nobody and every listener's frames are
//! checked; a server that goes silent starves all (`starved: gap`); one sending 70 % of real
//! time starves all by rate with no bitrate given; one that never answers starves its
//! listeners waiting; one whose stream turns to garbage makes every listener corrupt (frames
//! checked, ICY metadata blocks still framed); connect bursts stay out of the media rate.

use crate::util::{profile, run};
use throng_bench::testserver::{TestServer, TestServerConfig};

#[test]
fn steady_server_starves_no_listener_and_every_listener_is_verified() {
    let srv =
        TestServer::start("127.0.0.1:0".parse().unwrap(), TestServerConfig::default()).unwrap();
    let mut p = profile(300, 8.0);
    p.icy = true;
    p.bitrate_kbps = None;
    let r = run(vec![format!("http://{}/stream", srv.addr())], p);
    let s = &r.summary;
    assert_eq!(s.failures_total, 0, "{:?} {:?}", s.failures, r.errors);
    assert_eq!((s.starved, s.corrupt), (0, 0), "{}", r.verdict);
    assert_eq!(s.peak_streaming, 300);
    assert_eq!(s.final_streaming, 300);
    let rate = s.media_rate.unwrap();
    assert!((0.9..1.1).contains(&rate), "media rate {rate}");
    assert!(s.icy_blocks > 300, "ICY blocks checked: {}", s.icy_blocks);
    // Every listener's frames, not a sample: ~38 frames per second each.
    assert!(
        s.frames_checked > 300 * 38 * 6,
        "frames checked: {}",
        s.frames_checked
    );
    assert_eq!(s.garbage_bytes, 0);
    assert!(s.media_seconds > 300.0 * 6.0, "{}", s.media_seconds);
    assert!(s.pass, "{:?}", s.fail_reasons);
    assert!(
        r.verdict
            .starts_with("PASS: 300 of 300 listeners got ≥ 80 % of real time"),
        "{}",
        r.verdict
    );
    // The timeline covers the stages, and the sampler saw this process.
    assert!(r.timeline.len() >= 8, "{} rows", r.timeline.len());
    assert!(r.timeline.iter().any(|row| row.server.is_some()));
    assert_eq!(r.hists.ttfb.count(), 300);
}

#[test]
fn silent_server_starves_every_listener_by_gap() {
    let cfg = TestServerConfig {
        stop_after_secs: Some(3.0),
        ..TestServerConfig::default()
    };
    let srv = TestServer::start("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let r = run(
        vec![format!("http://{}/stream", srv.addr())],
        profile(200, 9.0),
    );
    let s = &r.summary;
    assert_eq!(s.failures_total, 0, "{:?}", s.failures);
    assert_eq!(s.peak_streaming, 200, "connections stay open");
    assert_eq!(s.starved, 200, "every listener must be reported starved");
    assert_eq!(s.starved_gap, 200);
    assert!(!s.pass);
    // Before the server went silent nobody was starved; the rule says when it first caught.
    assert_eq!(r.timeline[1].total.starved, 0);
    let first = s.rules.gap.first_s.unwrap();
    assert!((4..=9).contains(&first), "first gap at {first} s");
    assert!(s.longest_gap_max_ms.unwrap() > 4000.0);
    // (The rate rule may catch them in the same second: media stopped too.)
    assert!(
        s.fail_reasons
            .iter()
            .any(|f| f.starts_with("starved: gap: 200 of 200 listeners")),
        "{:?}",
        s.fail_reasons
    );
}

#[test]
fn slow_server_is_starved_by_rate_without_a_bitrate() {
    // Sends 70 % of the frames' real time: never silent, below the 80 % minimum. No bitrate is
    // given: the frames say what real time is.
    let cfg = TestServerConfig {
        bitrate_kbps: 44.8,
        ..TestServerConfig::default()
    };
    let srv = TestServer::start("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let mut p = profile(100, 9.0);
    p.bitrate_kbps = None;
    let r = run(vec![format!("http://{}/stream", srv.addr())], p);
    assert_eq!(r.summary.starved_rate, 100, "{}", r.verdict);
    assert_eq!(r.summary.starved_gap, 0);
    let rate = r.summary.media_rate.unwrap();
    assert!((0.6..0.8).contains(&rate), "media rate {rate}");
    assert!(r.summary.longest_gap_max_ms.unwrap() < 2000.0);
    assert!(
        r.summary.fail_reasons[0].starts_with("starved: rate: 100 of 100 listeners"),
        "{:?}",
        r.summary.fail_reasons
    );
}

#[test]
fn a_bitrate_the_stream_contradicts_is_noted() {
    let srv =
        TestServer::start("127.0.0.1:0".parse().unwrap(), TestServerConfig::default()).unwrap();
    let mut p = profile(10, 4.0);
    p.bitrate_kbps = Some(128.0);
    let r = run(vec![format!("http://{}/stream", srv.addr())], p);
    assert!(
        r.summary.pass,
        "the bitrate is not used to judge: {:?}",
        r.summary.fail_reasons
    );
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("128 kbit/s") && n.contains("disagrees")),
        "{:?}",
        r.notes
    );
}

#[test]
fn server_that_never_answers_starves_listeners() {
    // Accepts connections and holds them without a response head.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in l.incoming().flatten() {
            held.push(c);
        }
    });
    let r = run(vec![format!("http://{addr}/stream")], profile(50, 6.0));
    let s = &r.summary;
    assert_eq!(s.peak_streaming, 0);
    assert_eq!(
        s.starved, 50,
        "waiting for audio beyond the max gap is starving"
    );
    assert_eq!(s.final_connecting, 50);
}

#[test]
fn connect_bursts_are_left_out_of_the_media_rate() {
    // A 64 KiB burst on connect is 8 s of a 64 kbit/s stream: on a 4 s run it would read as a
    // media rate several times real time.
    let cfg = TestServerConfig {
        burst_bytes: 65_536,
        ..TestServerConfig::default()
    };
    let srv = TestServer::start("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let r = run(
        vec![format!("http://{}/stream", srv.addr())],
        profile(20, 5.0),
    );
    let s = &r.summary;
    assert!(
        s.media_seconds > 2.0 * s.listening_seconds,
        "all media over all time is inflated: {} s over {} s",
        s.media_seconds,
        s.listening_seconds
    );
    let rate = s.media_rate.unwrap();
    assert!((0.7..1.3).contains(&rate), "steady media rate {rate}");
    let svg = throng_bench::report::plots::media_rate_vs_listeners(&[&r]);
    assert!(svg.contains("connect bursts left out"));
}

#[test]
fn garbage_after_valid_frames_makes_every_listener_corrupt() {
    // From 3 s on the server sends random bytes at the same byte rate, ICY metadata blocks
    // still in place: never starved, never a failure, every listener's frames break.
    let cfg = TestServerConfig {
        garbage_after_secs: Some(3.0),
        ..TestServerConfig::default()
    };
    let srv = TestServer::start("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let mut p = profile(150, 7.0);
    p.icy = true;
    let r = run(vec![format!("http://{}/stream", srv.addr())], p);
    let s = &r.summary;
    assert_eq!(s.failures_total, 0, "{:?}", s.failures);
    assert_eq!(s.corrupt, 150, "every listener corrupt: {}", r.verdict);
    assert!(s.garbage_bytes > 0);
    assert!(
        s.icy_blocks > 150,
        "the ICY framing still checked: {}",
        s.icy_blocks
    );
    assert!(!s.pass);
    // Before the garbage nobody was corrupt; the rule says when it first caught.
    assert_eq!(r.timeline[1].total.corrupt_total, 0);
    let first = s.rules.corrupt.first_s.unwrap();
    // (The server's clock starts before the run's.)
    assert!((2..=6).contains(&first), "first corrupt at {first} s");
    assert!(
        s.fail_reasons
            .iter()
            .any(|f| f.starts_with("corrupt: 150 of 150 listeners")),
        "{:?}",
        s.fail_reasons
    );
}
