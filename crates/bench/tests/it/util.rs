//! Helpers: plans for in-process runs, profiles with short timings.

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

/// Runs `profile` against `urls` without a progress display.
pub fn run(urls: Vec<String>, profile: Profile) -> RunReport {
    let plan = Plan {
        name: "test".into(),
        urls,
        profile,
        source: None,
        sample: Some(throng_bench::observe::sampler::SampleTarget::Pid(
            std::process::id(),
        )),
        launcher: None,
        progress: false,
        ..Plan::default()
    };
    execute(&plan).expect("run")
}

/// A server answering every request with `404 Not Found`.
pub fn not_found_server() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for mut c in l.incoming().flatten() {
            let mut buf = [0u8; 1024];
            let _ = c.read(&mut buf);
            let _ = c.write_all(b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n");
        }
    });
    format!("http://{addr}/missing")
}
