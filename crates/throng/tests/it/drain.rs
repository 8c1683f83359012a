//! Draining an edge as Kubernetes stops a pod (issue 41, docs/SCALING.md "On Kubernetes"), with
//! real `throng serve` processes on loopback: an origin directing every listener to its edges
//! (`redirect = "all"`), edge A relaying it with 1,000 verified listeners (`throng bench run`
//! through the origin, reconnecting as players do), then edge B. SIGTERM to A: its
//! `/healthz/ready` turns false at once, a newcomer through the origin (`curl -L`) lands on B, a
//! newcomer at A itself is redirected to the origin, and A's listeners keep their audio (the
//! bench starves none) until `drain-timeout`; then A closes them and exits, they reconnect
//! through the origin to B (the bench, `curl -L` and ffmpeg alike), and A's ledger ends each
//! session `shutdown:drained` while B's ledger opens a new one. The edges take their public URL
//! and the cluster secret from the environment (`THRONG_PUBLIC_URL`, `THRONG_CLUSTER_SECRET`),
//! as the Helm chart passes them.

use std::ffi::OsStr;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{basic, fresh_state_dir, get, wait_until, Ffmpeg, Serve};

const SECRET: &str = "drain-cluster-secret";
const SOURCE_PW: &str = "drain-source-pw";
const ADMIN_PW: &str = "drain-admin-pw";
/// `[limits] drain-timeout` of the edges (seconds).
const DRAIN_TIMEOUT: u64 = 8;
/// Listeners on edge A when it is told to drain.
const LISTENERS: u64 = 1000;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// `throng serve --listen 127.0.0.1:PORT --config FILE` with `state` and `envs`.
fn serve(port: u16, config: &Path, state: &Path, envs: &[(&str, &str)]) -> Serve {
    let listen = format!("127.0.0.1:{port}");
    let mut all: Vec<(&str, &OsStr)> = vec![("THRONG_STATE_DIR", state.as_os_str())];
    for (k, v) in envs {
        all.push((k, OsStr::new(v)));
    }
    Serve::spawn(
        [
            OsStr::new("--listen"),
            OsStr::new(&listen),
            OsStr::new("--config"),
            config.as_os_str(),
        ],
        &all,
    )
}

/// An edge on `port` relaying `/live.mp3` from the origin at `origin`.
fn edge(dir: &Path, name: &str, port: u16, origin: SocketAddr) -> (Serve, PathBuf) {
    let config = write(
        dir,
        &format!("{name}.toml"),
        &format!(
            "workers = 1\n\
             [[relay]]\nserver = \"127.0.0.1\"\nport = {}\nmount = \"/live.mp3\"\nusername = \"edge\"\n\
             [cluster]\norigin = \"http://{origin}\"\nreport-interval = 1\n\
             [limits]\ndrain-timeout = {DRAIN_TIMEOUT}\n\
             [authentication]\nsource-password = \"{SOURCE_PW}\"\nadmin-password = \"{ADMIN_PW}\"\n\
             [logging]\naccess-log = \"\"\n",
            origin.port()
        ),
    );
    let state = fresh_state_dir();
    let url = format!("http://127.0.0.1:{port}");
    let s = serve(
        port,
        &config,
        &state,
        &[
            ("THRONG_PUBLIC_URL", url.as_str()),
            ("THRONG_CLUSTER_SECRET", SECRET),
        ],
    );
    (s, state)
}

/// `GET /healthz/ready` of `addr`: its status and JSON body.
fn ready(addr: SocketAddr) -> (u16, serde_json::Value) {
    let (status, text) = get(addr, "/healthz/ready", "");
    (status, json_body(&text))
}

/// The JSON body of a whole HTTP response `text` (`Null` when there is none).
fn json_body(text: &str) -> serde_json::Value {
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).unwrap_or(serde_json::Value::Null)
}

/// The origin's edges (URL → `/api/v1/cluster` entry).
fn edges(origin: SocketAddr) -> Vec<serde_json::Value> {
    let (_, text) = get(origin, "/api/v1/cluster", &basic("admin", ADMIN_PW));
    json_body(&text)["edges"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn carries(origin: SocketAddr, url: &str) -> bool {
    edges(origin)
        .iter()
        .any(|e| e["url"] == url && e["mounts"].get("/live.mp3").is_some())
}

/// `curl -sS -L --max-time SECS URL`: the effective URL (where the redirects led) and the
/// bytes received.
fn curl_follow(url: &str, secs: u32) -> (String, usize) {
    let out = Command::new("curl")
        .args([
            "-sS",
            "-L",
            "--max-time",
            &secs.to_string(),
            "-o",
            "/dev/null",
        ])
        .args(["-w", "%{url_effective} %{size_download}"])
        .arg(url)
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (url, size) = text.rsplit_once(' ').unwrap_or((&text, "0"));
    (url.to_owned(), size.trim().parse().unwrap_or(0))
}

/// ffmpeg as a player: reads `url` (following redirects) for `secs` seconds and decodes it;
/// returns its error lines.
fn ffmpeg_play(url: &str, secs: u32) -> String {
    let out = Command::new("ffmpeg")
        .args([
            "-nostdin",
            "-v",
            "error",
            "-t",
            &secs.to_string(),
            "-i",
            url,
        ])
        .args(["-f", "null", "-"])
        .stdout(Stdio::null())
        .output()
        .expect("ffmpeg");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Sessions of `report sessions` of the ledger in `state`: (mount, end_reason) per row.
fn ledger_sessions(state: &Path) -> Vec<(String, String)> {
    let (header, r) = crate::support::report_sessions(state);
    let col = |n: &str| header.iter().position(|h| h == n).unwrap();
    let (mount, reason) = (col("mount"), col("end_reason"));
    r.into_iter()
        .map(|row| (row[mount].clone(), row[reason].clone()))
        .collect()
}

#[test]
fn a_drained_edge_keeps_its_listeners_until_drain_timeout_then_they_move_to_the_other_edge() {
    let dir = tempfile::tempdir().unwrap();
    let origin_port = free_port();
    let origin_config = write(
        dir.path(),
        "origin.toml",
        &format!(
            "[cluster]\nsecret = \"{SECRET}\"\nredirect = \"all\"\nedge-timeout = 3\n\
             [authentication]\nsource-password = \"{SOURCE_PW}\"\nadmin-password = \"{ADMIN_PW}\"\n\
             [logging]\naccess-log = \"\"\n"
        ),
    );
    let origin = serve(origin_port, &origin_config, &fresh_state_dir(), &[]);
    let _source = Ffmpeg::start(origin.addr, "/live.mp3", SOURCE_PW);
    assert!(
        wait_until(Duration::from_secs(15), || get(
            origin.addr,
            "/status-json.xsl",
            ""
        )
        .1
        .contains("/live.mp3")),
        "the origin's source never came"
    );
    let origin_url = format!("http://{}/live.mp3", origin.addr);

    // Edge A alone: the director sends every listener there.
    let (port_a, port_b) = (free_port(), free_port());
    let (url_a, url_b) = (
        format!("http://127.0.0.1:{port_a}"),
        format!("http://127.0.0.1:{port_b}"),
    );
    let (edge_a, state_a) = edge(dir.path(), "a", port_a, origin.addr);
    assert!(
        wait_until(Duration::from_secs(20), || carries(origin.addr, &url_a)),
        "edge A never registered: {:?}\nA: {:?}\norigin: {:?}",
        edges(origin.addr),
        edge_a.stderr(),
        origin.stderr()
    );
    let (status, r) = ready(edge_a.addr);
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["ready"], true);

    // 1,000 listeners through the origin, each verified frame by frame, reconnecting 1 s after
    // losing their stream, as players do.
    let report = dir.path().join("bench");
    let hold = 30;
    let mut bench = Command::new(env!("CARGO_BIN_EXE_throng"))
        .args(["bench", "run", &origin_url, "-n", &LISTENERS.to_string()])
        .args(["--ramp", "500", "--hold", &format!("{hold}s")])
        .args(["--reconnect-after", "1s", "--no-progress", "--workers", "0"])
        .args(["--no-default-thresholds", "--threshold", "starved.count<1"])
        .arg("--out")
        .arg(&report)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("throng bench");
    let on = |addr: SocketAddr| ready(addr).1["listeners"].as_u64().unwrap_or(0);
    assert!(
        wait_until(Duration::from_secs(30), || on(edge_a.addr) >= LISTENERS),
        "edge A has {} listeners",
        on(edge_a.addr)
    );
    // A player and a curl on A too, before B comes (the director would pick B, the emptier).
    let curl_on_a = Command::new("curl")
        .args(["-sS", "-L", "--max-time", "60", "-o", "/dev/null"])
        .args(["-w", "%{url_effective} %{size_download}"])
        .arg(&origin_url)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_until(Duration::from_secs(10), || on(edge_a.addr) > LISTENERS));

    let (edge_b, state_b) = edge(dir.path(), "b", port_b, origin.addr);
    assert!(
        wait_until(Duration::from_secs(20), || carries(origin.addr, &url_b)),
        "edge B never registered: {:?}",
        edges(origin.addr)
    );

    // SIGTERM: not ready at once, newcomers go to B.
    let before = edge_a.stderr().len();
    let t0 = Instant::now();
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(edge_a.pid() as i32, libc::SIGTERM) };
    assert!(
        wait_until(Duration::from_secs(1), || ready(edge_a.addr).0 == 503),
        "edge A still ready after SIGTERM: {:?}",
        ready(edge_a.addr)
    );
    let not_ready = t0.elapsed();
    let (_, r) = ready(edge_a.addr);
    assert_eq!(r["ready"], false, "{r}");
    assert_eq!(r["draining"], true, "{r}");
    assert!(
        r["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["key"] == "draining"),
        "{r}"
    );
    edge_a.wait_line(before, "draining");
    // The origin heard A's draining report at once.
    assert!(
        wait_until(Duration::from_secs(3), || edges(origin.addr)
            .iter()
            .any(|e| e["url"] == url_a && e["draining"] == true)),
        "{:?}",
        edges(origin.addr)
    );
    let (landed, bytes) = curl_follow(&origin_url, 2);
    assert_eq!(
        landed,
        format!("{url_b}/live.mp3"),
        "a newcomer went elsewhere"
    );
    assert!(bytes > 8_000, "{bytes} bytes from B");
    // A newcomer at A itself is sent to the origin.
    let (status, _) = get(edge_a.addr, "/live.mp3", "");
    assert_eq!(status, 302);
    let direct = Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "-w", "%{redirect_url}"])
        .arg(format!("{url_a}/live.mp3?player=x"))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&direct.stdout),
        format!("http://{}/live.mp3?player=x", origin.addr)
    );

    // A keeps its listeners until the drain timeout.
    std::thread::sleep(Duration::from_secs(DRAIN_TIMEOUT - 2).saturating_sub(t0.elapsed()));
    let kept = on(edge_a.addr);
    assert!(kept > LISTENERS, "edge A kept only {kept} listeners");
    let mut a = edge_a;
    assert!(
        wait_until(Duration::from_secs(DRAIN_TIMEOUT + 10), || !a.running()),
        "edge A did not exit after its drain"
    );
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_secs(DRAIN_TIMEOUT),
        "edge A exited after {took:?}, before drain-timeout"
    );
    let lines = a.stderr();
    assert!(
        lines.iter().any(|l| l.contains("drained")),
        "{:?}",
        &lines[before..]
    );

    // Its listeners reconnect through the origin to B.
    assert!(
        wait_until(Duration::from_secs(20), || on(edge_b.addr) >= LISTENERS),
        "edge B has {} listeners",
        on(edge_b.addr)
    );
    let moved = t0.elapsed();
    let out = curl_on_a.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.starts_with(&format!("{url_a}/live.mp3 ")),
        "the curl listener was not on A: {text}"
    );
    // A player pressing play again: curl -L and ffmpeg both land on B and decode.
    let (landed, _) = curl_follow(&origin_url, 2);
    assert_eq!(landed, format!("{url_b}/live.mp3"));
    let errors = ffmpeg_play(&origin_url, 3);
    assert!(errors.trim().is_empty(), "ffmpeg errors: {errors}");

    // The bench: every listener had audio all along (no starved one) and came back.
    let status = bench.wait().unwrap();
    let mut err = String::new();
    if let Some(mut e) = bench.stderr.take() {
        use std::io::Read as _;
        let _ = e.read_to_string(&mut err);
    }
    let v: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(report.join("report.json")).unwrap_or_default(),
    )
    .unwrap_or_default();
    assert!(
        status.success(),
        "bench failed (a listener starved): {err}\n{}",
        v["summary"]
    );

    // A's ledger ended its sessions as drained; B's opened new ones.
    let a_rows = ledger_sessions(&state_a);
    let drained = a_rows
        .iter()
        .filter(|(m, why)| m == "/live.mp3" && why == "shutdown:drained")
        .count() as u64;
    assert!(
        drained >= LISTENERS,
        "{drained} sessions of A ended shutdown:drained; reasons: {:?}",
        a_rows
            .iter()
            .map(|(_, w)| w.as_str())
            .collect::<std::collections::BTreeSet<_>>()
    );
    // The bench has left B: its sessions are committed within a moment.
    let mut on_b = 0;
    wait_until(Duration::from_secs(10), || {
        on_b = ledger_sessions(&state_b)
            .iter()
            .filter(|(m, why)| m == "/live.mp3" && why == "client:hung-up")
            .count() as u64;
        on_b >= LISTENERS
    });
    assert!(on_b >= LISTENERS, "B's ledger has {on_b} ended sessions");
    // The figures docs/SCALING.md quotes ("On Kubernetes").
    eprintln!(
        "drain: not ready after {not_ready:?}; A kept {kept} listeners; exited after {took:?}; \
         {LISTENERS} on B after {moved:?}; ledger: A {drained} shutdown:drained, B {on_b} sessions; \
         bench: {}",
        v["summary"]
    );
    drop(edge_b);
}
