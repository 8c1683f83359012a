//! `throng bench run --events` against a real `throng serve`: subscribers (in-process and in
//! worker processes) all get their snapshot and every title change, the report carries the
//! events figures, and the exit status follows the verdict (a refused title change is FAIL).

use std::process::{Command, Output};

fn bench_events(url: &str, out: &std::path::Path, workers: &str, password: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_throng"))
        .args([
            "bench",
            "run",
            "--events",
            url,
            "-n",
            "20",
            "--workers",
            workers,
        ])
        .args(["--max-per-worker", "10", "--bind-range", "none"])
        .args(["--changes", "2", "--change-interval", "500ms"])
        .args(["--admin-password", password, "--no-progress", "--out"])
        .arg(out)
        .output()
        .expect("running throng bench")
}

fn show(o: &Output) -> String {
    format!(
        "{:?}\n{}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn events_bench_measures_title_delivery_and_gates_on_it() {
    let (mut child, addr, _) = crate::support::spawn_serve([
        "--listen",
        "127.0.0.1:0",
        "--source-password",
        "pw",
        "--admin-password",
        "adminpw",
    ]);
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let url = format!("http://{addr}/api/v1/events?mount=/demo.mp3");
    let inproc = bench_events(&url, &dir.path().join("a"), "0", "adminpw");
    let procs = bench_events(&url, &dir.path().join("b"), "2", "adminpw");
    let refused = bench_events(&url, &dir.path().join("c"), "0", "wrong");
    let _ = (child.kill(), child.wait());
    assert_eq!(inproc.status.code(), Some(0), "{}", show(&inproc));
    assert_eq!(procs.status.code(), Some(0), "{}", show(&procs));
    assert_eq!(refused.status.code(), Some(1), "{}", show(&refused));
    for run in ["a", "b"] {
        let json = std::fs::read_to_string(dir.path().join(run).join("report.json")).unwrap();
        let report = throng_bench::report::parse_run(&json).expect("report.json parses");
        let ev = report.events.expect("events summary");
        assert_eq!(ev.ready, 20, "{run}");
        assert_eq!(ev.received, 40, "{run}");
        assert_eq!(ev.missed, 0, "{run}");
        assert!(ev.latency_p99_ms.is_some(), "{run}");
    }
    assert!(String::from_utf8_lossy(&inproc.stdout).contains("delivery p99 (ms)"));
}
