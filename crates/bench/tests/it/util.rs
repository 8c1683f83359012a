//! Helpers: plans for in-process runs, profiles with short timings, small misbehaving servers.

use std::io::{Read, Write};
use std::time::Duration;
use throng_bench::mode::Mode;
use throng_bench::profile::{Profile, Secs};
use throng_bench::report::summary::RunReport;
use throng_bench::run::execute;
use throng_bench::run::plan::Plan;

/// A profile of `n` listeners at 64 kbit/s holding `hold_s` seconds, in-process.
pub fn profile(n: u32, hold_s: f64) -> Profile {
    Profile {
        listeners: n,
        ramp: 2000.0,
        hold: Secs(hold_s),
        bitrate_kbps: Some(64.0),
        workers: Some(0),
        ..Profile::default()
    }
}

/// The plan of one ICY group of `profile` against `urls`, with the default thresholds, this
/// process sampled, no progress display.
pub fn plan(urls: Vec<String>, profile: Profile) -> Plan {
    let group = throng_bench::run::group_of_flags(
        Mode::Icy,
        &urls,
        &profile,
        &Default::default(),
        &Default::default(),
    );
    Plan {
        name: "test".into(),
        stages: group.schedule.clone(),
        groups: vec![group],
        sample: Some(throng_bench::observe::sampler::SampleTarget::Pid(
            std::process::id(),
        )),
        thresholds: throng_bench::report::threshold::with_defaults(vec![], false, 1000.0, false),
        profile: Some(profile),
        ..Plan::default()
    }
}

/// Runs `profile` against `urls` without a progress display.
pub fn run(urls: Vec<String>, profile: Profile) -> RunReport {
    execute(&plan(urls, profile)).expect("run")
}

/// A server answering every request with `404 Not Found`.
pub fn not_found_server() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            let mut buf = [0u8; 1024];
            let _ = c.read(&mut buf);
            let _ = c.write_all(b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n");
        }
    });
    format!("http://{addr}/missing")
}

/// A 64 kbit/s MP3 stream server that waits `delay` before each response head (a server slow
/// to answer, on purpose): one thread per listener, a write of one second of frames a second.
pub fn delayed_server(delay: Duration) -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut c = c;
                let mut buf = [0u8; 1024];
                let _ = c.read(&mut buf);
                std::thread::sleep(delay);
                let head = "HTTP/1.0 200 OK\r\nContent-Type: audio/mpeg\r\nicy-br: 64\r\n\r\n";
                if c.write_all(head.as_bytes()).is_err() {
                    return;
                }
                // 38 frames of 208 bytes = 0.99 s of a 64 kbit/s, 44.1 kHz MP3.
                let second = throng_bench::testserver::mp3_pattern().repeat(38);
                loop {
                    if c.write_all(&second).is_err() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(992));
                }
            });
        }
    });
    format!("http://{addr}/slow.mp3")
}
