//! The `throng-bench bench run` and `compare` command lines over real processes: exit statuses
//! (0 PASS, 1 FAIL, 2 could not run), what the reports record about the run, scenario paths
//! resolved against the scenario file, pidfile and process-name sampling, and the source
//! password that has no default.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use throng_bench::testserver::{TestServer, TestServerConfig};

/// A fresh empty directory under the system temporary directory.
pub fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "throng-bench-cli-{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs the bench binary with `args` from `cwd`.
fn bench(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_throng-bench"))
        .current_dir(cwd)
        .arg("bench")
        .args(args)
        .env_remove("THRONG_SOURCE_PASSWORD")
        .output()
        .expect("running throng-bench")
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The common arguments of a small in-process run writing into `out`.
fn small_run<'a>(url: &'a str, out: &'a str) -> Vec<&'a str> {
    vec![
        "run",
        url,
        "-n",
        "5",
        "--hold",
        "2s",
        "--bitrate-kbps",
        "64",
        "--workers",
        "0",
        "--no-progress",
        "--out",
        out,
    ]
}

#[test]
fn run_exits_zero_on_pass_and_one_on_fail() {
    let srv =
        TestServer::start("127.0.0.1:0".parse().unwrap(), TestServerConfig::default()).unwrap();
    let dir = temp_dir("exit");
    let url = format!("http://{}/stream", srv.addr());
    let o = bench(&dir, &small_run(&url, "pass"));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    // The reports say when, where, how and against what the run was made.
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("pass/report.json")).unwrap()).unwrap();
    let meta = &json["meta"];
    let server = format!("throng-bench-testserver/{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(meta["server"].as_str(), Some(server.as_str()), "{meta}");
    assert_eq!(
        meta["bench_version"].as_str(),
        Some(env!("CARGO_PKG_VERSION"))
    );
    let cmd = meta["command_line"].as_str().unwrap();
    assert!(
        cmd.contains(&format!("bench run {url} -n 5 --hold 2s")),
        "{cmd}"
    );
    let host = meta["host"].as_str().unwrap();
    assert!(!host.is_empty());
    let started = meta["started"].as_str().unwrap();
    assert!(started.len() == 20 && started.ends_with('Z'), "{started}");
    let html = std::fs::read_to_string(dir.join("pass/report.html")).unwrap();
    for want in [started, host, &server, "bench run", "--hold 2s"] {
        assert!(html.contains(want), "report.html lacks {want}");
    }

    // Nothing listens on a port just freed: every connection is refused, the verdict is FAIL.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = format!("http://{}/stream", l.local_addr().unwrap());
    drop(l);
    let o = bench(&dir, &small_run(&closed, "fail"));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("FAIL"));
    assert!(dir.join("fail/report.json").exists(), "reports are written");

    // An unusable argument: the bench cannot run at all.
    let o = bench(&dir, &small_run("ftp://nowhere/x", "bad"));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

/// A URL that answers 404 (issue 27): the run stops early, exits 1 long before its hold of a
/// minute ends, and says why on the console: the criterion, how many, the error kind. The
/// stop comes `early_stop::AFTER` (2 s) into the run (unit-tested there); the bound here is
/// 20 s, not 5: worker start-up on a loaded box (this suite runs its 20,000-listener test
/// beside it) took 9 s once, and the point is the early stop, not a time.
#[test]
fn a_404_url_stops_the_run_early_saying_why() {
    let dir = temp_dir("404");
    let url = crate::util::not_found_server();
    let began = std::time::Instant::now();
    let o = bench(
        &dir,
        &[
            "run",
            &url,
            "-n",
            "20",
            "--hold",
            "60s",
            "--no-progress",
            "--out",
            "r",
        ],
    );
    let took = began.elapsed();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        took < std::time::Duration::from_secs(20),
        "took {took:?}: {}",
        text(&o)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("FAIL: ") && err.contains("connections failed") && err.contains("http-404 ×"),
        "{}",
        text(&o)
    );
    assert!(err.contains("stopped early"), "{}", text(&o));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("r/report.json")).unwrap()).unwrap();
    let reasons = json["summary"]["fail_reasons"].as_array().unwrap();
    assert!(!reasons.is_empty(), "{json}");
    let html = std::fs::read_to_string(dir.join("r/report.html")).unwrap();
    let (why, plots) = (
        html.find("fail-reasons").unwrap(),
        html.find("<h2>Plots").unwrap(),
    );
    assert!(why < plots, "the reasons come before the plots");
}

/// The demo MP3 the source tests push.
fn demo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../assets/demo.mp3")
}

#[test]
fn pushing_a_source_needs_a_password() {
    let srv =
        TestServer::start("127.0.0.1:0".parse().unwrap(), TestServerConfig::default()).unwrap();
    let dir = temp_dir("password");
    let url = format!("http://{}/stream", srv.addr());
    let demo = demo();
    let mut args = small_run(&url, "nopass");
    args.extend(["--source", demo.to_str().unwrap()]);
    let o = bench(&dir, &args);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no source password"), "{err}");
    assert!(err.contains("THRONG_SOURCE_PASSWORD"), "{err}");
    assert!(!err.contains("hackme"), "{err}");

    // From the environment.
    let o = Command::new(env!("CARGO_BIN_EXE_throng-bench"))
        .current_dir(&dir)
        .arg("bench")
        .args(&args)
        .env("THRONG_SOURCE_PASSWORD", "from-env")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// A `sleep 60` whose command line starts with `sleep-<tag>` (a stand-in server to sample).
fn sleeper(tag: &str) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    Command::new("sleep")
        .arg0(format!("sleep-{tag}"))
        .arg("60")
        .spawn()
        .unwrap()
}

#[test]
fn server_found_by_pidfile_or_unique_name() {
    let srv =
        TestServer::start("127.0.0.1:0".parse().unwrap(), TestServerConfig::default()).unwrap();
    let dir = temp_dir("pid");
    let url = format!("http://{}/stream", srv.addr());
    let tag = format!("bench-cli-{}", std::process::id());
    let mut a = sleeper(&tag);
    let mut b = sleeper(&tag);
    std::thread::sleep(std::time::Duration::from_millis(200));

    // Two servers match the name: a clear error listing both, not a sample of the wrong one.
    let mut args = small_run(&url, "two");
    args.extend(["--pid-name", &tag]);
    let two = bench(&dir, &args);

    // The pidfile names one of them: it is sampled.
    std::fs::write(dir.join("server.pid"), format!("{}\n", a.id())).unwrap();
    let mut args = small_run(&url, "pidfile");
    args.extend(["--pid-file", "server.pid"]);
    let by_file = bench(&dir, &args);

    let _ = (b.kill(), b.wait());
    std::thread::sleep(std::time::Duration::from_millis(200));
    // Only one is left: the name finds it.
    let mut args = small_run(&url, "name");
    args.extend(["--pid-name", &tag]);
    let by_name = bench(&dir, &args);
    let _ = (a.kill(), a.wait());

    assert_eq!(two.status.code(), Some(2), "{}", text(&two));
    let err = String::from_utf8_lossy(&two.stderr);
    assert!(err.contains("matches 2 processes"), "{err}");
    assert!(err.contains(&a.id().to_string()) && err.contains(&b.id().to_string()));
    for (o, out) in [(&by_file, "pidfile"), (&by_name, "name")] {
        assert_eq!(o.status.code(), Some(0), "{}", text(o));
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join(out).join("report.json")).unwrap())
                .unwrap();
        let sampled = json["timeline"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["server"]["processes"].as_u64() == Some(1));
        assert!(sampled, "{out}: the sleeper was sampled");
    }
}

/// A scenario in `dir` whose server is `program` (relative to `dir`) running the bench's test
/// server on `port`, pushing `audio/demo.mp3` (relative to `dir`), results in `dir/results`.
fn write_scenario(dir: &Path, program: &str, port: u16) -> PathBuf {
    let path = dir.join("scenario.toml");
    std::fs::write(
        &path,
        format!(
            r#"out = "results"
[profile]
listeners = 5
ramp = 100
hold = "2s"
bitrate_kbps = 64
workers = 0

[source]
file = "audio/demo.mp3"
password = "pw"

[[server]]
name = "test"
command = ["{program}", "bench", "test-server", "--listen", "127.0.0.1:{port}"]
urls = ["http://127.0.0.1:{port}/stream"]
"#
        ),
    )
    .unwrap();
    path
}

#[test]
fn scenario_paths_are_relative_to_the_scenario_file() {
    let dir = temp_dir("scenario");
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::create_dir_all(dir.join("audio")).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_throng-bench"), dir.join("bin/server")).unwrap();
    std::fs::copy(demo(), dir.join("audio/demo.mp3")).unwrap();
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    let scenario = write_scenario(&dir, "bin/server", port);
    let elsewhere = temp_dir("elsewhere");
    let o = bench(
        &elsewhere,
        &["compare", scenario.to_str().unwrap(), "--no-progress"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(dir.join("results/compare.html").exists(), "{}", text(&o));
    assert!(dir.join("results/test.log").exists());

    // A missing program is named, before anything starts, without a backtrace.
    let scenario = write_scenario(&dir, "bin/no-such-server", port);
    let o = Command::new(env!("CARGO_BIN_EXE_throng-bench"))
        .current_dir(&elsewhere)
        .args([
            "bench",
            "compare",
            scenario.to_str().unwrap(),
            "--no-progress",
        ])
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("bin/no-such-server") && err.contains("not found"),
        "{err}"
    );
    assert!(!err.contains("backtrace"), "{err}");

    // So is a missing source file.
    std::fs::remove_file(dir.join("audio/demo.mp3")).unwrap();
    let scenario = write_scenario(&dir, "bin/server", port);
    let o = bench(
        &elsewhere,
        &["compare", scenario.to_str().unwrap(), "--no-progress"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("source file") && err.contains("audio/demo.mp3"),
        "{err}"
    );
}

/// Every scenario shipped in `bench/scenarios/` parses and validates, and every script it runs
/// (a program under `scripts/`) exists, so a typo in a scenario fails CI rather than the next
/// benchmark run. Release binaries (`target/release/...`) are not built in CI and not checked.
#[test]
fn shipped_scenarios_load_and_their_scripts_exist() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/scenarios");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let scenario = throng_bench::run::compare::Scenario::load(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for srv in &scenario.servers {
            if srv.command[0].contains("scripts/") {
                scenario
                    .program(srv)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            }
        }
        checked += 1;
    }
    assert!(
        checked >= 5,
        "only {checked} scenarios in {}",
        dir.display()
    );
}

#[test]
fn conflicting_modes_are_refused_naming_both_choices() {
    let dir = temp_dir("modes");
    let icy = "http://127.0.0.1:9/live.mp3";
    let hls = "http://127.0.0.1:9/hls/live.mp3/index.m3u8";
    let cases: [(&[&str], &str, &str); 5] = [
        (&["run", icy, "--whep", "--events"], "--whep", "--events"),
        (&["run", hls, "--events"], "--events", ".m3u8 URL"),
        (
            &["run", icy, "--mode", "icy", "--whep"],
            "--mode icy",
            "--whep",
        ),
        (&["run", hls, "--mode", "icy"], "--mode icy", ".m3u8 URL"),
        (&["run", hls, icy], "index.m3u8", "live.mp3"),
    ];
    for (args, first, second) in cases {
        let o = bench(&dir, args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(
            err.contains(first) && err.contains(second),
            "{args:?}: {}",
            text(&o)
        );
        assert!(!dir.join("bench-results").exists(), "{args:?}: nothing ran");
    }
}

#[test]
fn the_worker_subcommand_refuses_a_spec_without_a_mode() {
    use std::io::Write as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_throng-bench"))
        .args(["bench", "worker"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{{\"worker\":0}}").unwrap();
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    assert!(!o.status.success(), "{}", text(&o));
    // The hidden per-mode worker subcommands are gone: one protocol for every mode.
    for gone in ["events-worker", "whep-worker"] {
        let o = bench(Path::new("."), &[gone]);
        assert_eq!(o.status.code(), Some(2), "{gone}: {}", text(&o));
    }
}

/// Every `bench run` scenario shipped in `bench/scenarios/run/` reads and makes a valid plan
/// (its parameters given where they have no default).
#[test]
fn shipped_run_scenarios_make_plans() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/scenarios/run");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let f = throng_bench::scenario::read(&path, &["admin_password=x".into()])
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let plan = f
            .plan(&path, None)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        plan.validate()
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        checked += 1;
    }
    assert!(
        checked >= 2,
        "only {checked} scenarios in {}",
        dir.display()
    );
}
