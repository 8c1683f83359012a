//! Starvation detection: a steady server starves nobody; a server that goes silent starves all.

use crate::util::{profile, run};
use throng_bench::testserver::{TestServer, TestServerConfig};

#[test]
fn steady_server_starves_no_listener() {
    let srv =
        TestServer::start("127.0.0.1:0".parse().unwrap(), TestServerConfig::default()).unwrap();
    let mut p = profile(300, 8.0);
    p.icy = true;
    p.decode_sample = 0.1;
    let r = run(vec![format!("http://{}/stream", srv.addr())], p);
    let s = &r.summary;
    assert_eq!(s.failures_total, 0, "{:?} {:?}", s.failures, r.errors);
    assert_eq!(s.starved, 0);
    assert_eq!(s.peak_streaming, 300);
    assert_eq!(s.final_streaming, 300);
    let ratio = s.delivered_ratio.unwrap();
    assert!((0.95..1.05).contains(&ratio), "delivered ratio {ratio}");
    assert!(s.icy_blocks > 300, "ICY blocks checked: {}", s.icy_blocks);
    assert!(
        s.frames_checked > 1000,
        "frames checked: {}",
        s.frames_checked
    );
    assert_eq!(s.garbage_bytes, 0);
    assert!(s.pass);
    // The timeline covers ramp and hold, and the sampler saw this process.
    assert!(r.timeline.len() >= 8, "{} rows", r.timeline.len());
    assert!(r.timeline.iter().any(|row| row.server.is_some()));
    assert_eq!(r.ttfb.count(), 300);
}

#[test]
fn silent_server_starves_every_listener() {
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
    assert!(!s.pass);
    // Before the server went silent nobody was starved.
    assert_eq!(r.timeline[1].counts.starved, 0);
    assert!(s.longest_gap_max_ms.unwrap() > 4000.0);
}

#[test]
fn slow_server_is_starved_by_rate() {
    // Sends 70 % of the announced bitrate: never silent, but below the 80 % threshold.
    let cfg = TestServerConfig {
        bitrate_kbps: 44.8,
        ..TestServerConfig::default()
    };
    let srv = TestServer::start("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let r = run(
        vec![format!("http://{}/stream", srv.addr())],
        profile(100, 8.0),
    );
    assert_eq!(r.summary.starved, 100);
    assert!(r.summary.longest_gap_max_ms.unwrap() < 2000.0);
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
fn connect_bursts_are_not_plotted_as_delivered_rate() {
    // A 64 KiB burst on connect is 8 s of a 64 kbit/s stream: on a 4 s run it would show as a
    // delivered rate several times the bitrate.
    let cfg = TestServerConfig {
        burst_bytes: 65_536,
        ..TestServerConfig::default()
    };
    let srv = TestServer::start("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let r = run(
        vec![format!("http://{}/stream", srv.addr())],
        profile(20, 4.0),
    );
    let sum =
        |f: fn(&throng_bench::report::summary::Row) -> u64| r.timeline.iter().map(f).sum::<u64>();
    let bytes = sum(|x| x.counts.bytes);
    let burst = sum(|x| x.counts.burst_bytes);
    let steady = sum(|x| x.counts.steady_bytes());
    let expected = sum(|x| x.counts.steady_expected_bytes());
    assert!(burst >= 20 * 65_536, "bursts: {burst} of {bytes} bytes");
    assert!(
        bytes > 2 * sum(|x| x.counts.expected_bytes),
        "the raw rate is inflated"
    );
    let ratio = steady as f64 / expected as f64;
    assert!(
        (0.7..1.3).contains(&ratio),
        "steady {steady} / expected {expected}"
    );
    let svg = throng_bench::report::plots::bandwidth_vs_listeners(&[&r]);
    assert!(svg.contains("connect bursts left out"));
}
