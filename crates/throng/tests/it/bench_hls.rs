//! `throng bench run <url>.m3u8` plays HLS like a player against a real `throng serve`: a live
//! mount passes with no starved or corrupt player (every segment's frames, ID3 timestamps,
//! media sequence and program date-times verified), segment TTFB and requests per second
//! reported; when the
//! source stops (no fallback) the playlist stops growing, every player's buffer runs dry, and
//! the verdict is FAIL (exit status 1) with the players counted as starved.

use std::process::{Command, Output};
use std::time::Duration;

use crate::support::{spawn_serve, wait_segments, Ffmpeg};

fn bench(url: &str, n: &str, hold: &str, out: &std::path::Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_throng"))
        .args([
            "bench",
            "run",
            url,
            "-n",
            n,
            "--hold",
            hold,
            "--workers",
            "0",
        ])
        .args(["--no-progress", "--out"])
        .arg(out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
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

fn summary(dir: &std::path::Path) -> throng_bench::report::summary::Summary {
    let json = std::fs::read_to_string(dir.join("report.json")).unwrap();
    throng_bench::report::parse_run(&json)
        .expect("report.json parses")
        .summary
}

#[test]
fn bench_plays_hls_and_passes() {
    let (mut child, addr, _) = spawn_serve(["--listen", "127.0.0.1:0", "--source-password", "pw"]);
    wait_segments(addr, "/demo.mp3");
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let url = format!("http://{addr}/hls/demo.mp3/index.m3u8");
    let out = bench(&url, "20", "10s", dir.path())
        .wait_with_output()
        .unwrap();
    let _ = (child.kill(), child.wait());
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let s = summary(dir.path());
    assert_eq!(s.starved, 0, "{s:?}");
    assert_eq!(s.corrupt, 0, "{s:?}");
    assert_eq!(s.final_streaming, 20, "{s:?}");
    // Three startup segments each at least, every one verified whole.
    assert!(s.frames_checked >= 60, "{s:?}");
    assert!(s.media_seconds > 20.0 * 3.0 * 5.0, "{s:?}");
    assert!(s.requests_per_s.unwrap() > 0.0, "{s:?}");
    assert!(s.ttfb_p50_ms.is_some(), "{s:?}");
}

#[test]
fn players_starve_when_the_stream_stops() {
    let (mut child, addr, _) = spawn_serve(["--listen", "127.0.0.1:0", "--source-password", "pw"]);
    let source = Ffmpeg::start(addr, "/live.mp3", "pw");
    wait_segments(addr, "/live.mp3");
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let url = format!("http://{addr}/hls/live.mp3/index.m3u8");
    let run = bench(&url, "10", "40s", dir.path());
    std::thread::sleep(Duration::from_secs(6));
    drop(source);
    let out = run.wait_with_output().unwrap();
    let _ = (child.kill(), child.wait());
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let s = summary(dir.path());
    assert_eq!(s.starved, 10, "{s:?}");
}
