//! `throng bench run` as a CI gate against a real `throng serve`: exit status 0 on a PASS
//! verdict, 1 on FAIL, documented in `--help`, and the report names the server it measured.

use std::process::{Command, Output};

/// `throng bench run URL` with a small in-process profile, writing into `out`.
fn bench_run(url: &str, out: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_throng"))
        .args([
            "bench",
            "run",
            url,
            "-n",
            "3",
            "--hold",
            "2s",
            "--workers",
            "0",
        ])
        .args(["--bitrate-kbps", "64", "--no-progress", "--out"])
        .arg(out)
        .output()
        .expect("running throng bench")
}

#[test]
fn bench_exit_status_follows_the_verdict() {
    let (mut child, addr, _) =
        crate::support::spawn_serve(["--listen", "127.0.0.1:0", "--source-password", "pw"]);
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let pass = bench_run(&format!("http://{addr}/demo.mp3"), &dir.path().join("pass"));
    // A mount that does not exist: every listener gets 404, the verdict is FAIL.
    let fail = bench_run(
        &format!("http://{addr}/missing.mp3"),
        &dir.path().join("fail"),
    );
    let _ = (child.kill(), child.wait());
    let show = |o: &Output| {
        format!(
            "{:?}\n{}\n{}",
            o.status.code(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    assert_eq!(pass.status.code(), Some(0), "{}", show(&pass));
    assert_eq!(fail.status.code(), Some(1), "{}", show(&fail));
    let json = std::fs::read_to_string(dir.path().join("pass/report.json")).unwrap();
    let report = throng_bench::report::parse_run(&json).expect("report.json parses");
    let server = report.meta.server.unwrap_or_default();
    assert!(
        server.to_lowercase().contains("throng"),
        "Server: {server:?}"
    );

    let help = Command::new(env!("CARGO_BIN_EXE_throng"))
        .args(["bench", "run", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("Exit status: 0 when the verdict is PASS, 1 when it is FAIL"),
        "{help}"
    );
}

/// The bench pushes its own source at half the pace of its frames, with no `--bitrate-kbps`:
/// the listeners get half of real time, which their frames say, so every one fails as
/// `starved: rate` (the rate check no longer needs a bitrate); at full pace all pass.
#[test]
fn a_source_at_half_speed_starves_every_listener_by_rate() {
    let (mut child, addr, _) =
        crate::support::spawn_serve(["--listen", "127.0.0.1:0", "--source-password", "pw"]);
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let demo = crate::support::asset("demo.mp3");
    let run = |speed: &str, mount: &str, out: &str| {
        Command::new(env!("CARGO_BIN_EXE_throng"))
            .args(["bench", "run", &format!("http://{addr}{mount}"), "--source"])
            .arg(&demo)
            .args(["--source-password", "pw", "--source-speed", speed])
            .args([
                "-n",
                "5",
                "--hold",
                "12s",
                "--workers",
                "0",
                "--no-progress",
            ])
            .arg("--out")
            .arg(dir.path().join(out))
            .output()
            .expect("running throng bench")
    };
    let slow = run("0.5", "/slow.mp3", "slow");
    let full = run("1", "/full.mp3", "full");
    let _ = (child.kill(), child.wait());
    let show = |o: &Output| {
        format!(
            "{:?}\n{}\n{}",
            o.status.code(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    assert_eq!(slow.status.code(), Some(1), "{}", show(&slow));
    let err = String::from_utf8_lossy(&slow.stderr);
    assert!(
        err.contains("FAIL: starved: rate: 5 of 5 listeners"),
        "{}",
        show(&slow)
    );
    let json = std::fs::read_to_string(dir.path().join("slow/report.json")).unwrap();
    let report = throng_bench::report::parse_run(&json).unwrap();
    let rate = report.summary.media_rate.unwrap();
    assert!((0.4..0.65).contains(&rate), "media rate {rate}");
    assert_eq!(full.status.code(), Some(0), "{}", show(&full));
}
