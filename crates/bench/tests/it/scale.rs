//! More than 20,000 listeners over two worker processes and two server processes (loopback,
//! bounded in time), every one's frames verified.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use throng_bench::profile::Secs;
use throng_bench::run::execute;

const EXE: &str = env!("CARGO_BIN_EXE_throng-bench");

struct Server(Child, String);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `throng-bench bench test-server` (64 kbit/s of MP3 frames) and returns its address.
fn server() -> Server {
    let mut child = Command::new(EXE)
        .args(["bench", "test-server", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_owned();
    Server(child, addr)
}

#[test]
fn over_20000_listeners_on_two_workers() {
    let servers = [server(), server()];
    let profile = throng_bench::profile::Profile {
        listeners: 21_000,
        ramp: 6_000.0,
        hold: Secs(6.0),
        ..Default::default()
    };
    assert_eq!(profile.effective_workers(21_000), 2);
    let urls = servers
        .iter()
        .map(|s| format!("http://{}/stream", s.1))
        .collect();
    let mut plan = crate::util::plan(urls, profile);
    plan.name = "scale".into();
    plan.sample = Some(throng_bench::observe::sampler::SampleTarget::Pid(
        servers[0].0.id(),
    ));
    plan.worker_exe = Some(EXE.into());
    let r = execute(&plan).unwrap();
    let s = &r.summary;
    eprintln!("{}", throng_bench::report::summary_table(&[&r]));
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.workers, 2);
    assert_eq!(s.failures_total, 0, "{:?}", s.failures);
    assert_eq!(s.peak_streaming, 21_000);
    assert_eq!(s.starved, 0);
    // Every listener verified: all their frames chained.
    assert_eq!(s.corrupt, 0);
    assert!(s.frames_checked > 21_000 * 38 * 4, "{}", s.frames_checked);
    assert!(r.timeline.iter().all(|row| row.total.want <= 21_000));
    assert!(s.bench_cpu_pct_per_1000.is_some());
}
