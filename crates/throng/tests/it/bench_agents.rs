//! `throng bench` beyond one machine, on network namespaces as hosts (crate::netns): a
//! `throng serve` in one, three `throng bench agent`s in three others (each with its own
//! addresses), the controller in a fifth; only the lab's own addresses are targets.
//!
//! - A mixed run (ICY listeners, HLS players, WHEP viewers and event-stream subscribers, two
//!   stages) across the three agents, every listener verified: the merged counts equal the sum
//!   of the agents' and the server's own counts (`throng_listener_connects_total`), one agent's clock runs 250 ms ahead (libfaketime) and
//!   the controller finds it within 5 ms, and that agent's event latencies, measured on the
//!   run's one clock, are those of the others (not 250 ms more).
//! - An agent killed mid-run: the run FAILs naming it, when, and the listeners unaccounted
//!   for; the other two finish and report.
//! - A wrong token, and a plan over an agent's open-file limit, are refused with exit 2 before
//!   any listener starts (the server accepted none).
//! - A controller killed mid-run leaves no orphan load (the agents stop within 10 s); a target
//!   nobody listens on is each listener's failure, as on one machine.
//! - The link is TLS with the agent's certificate (`--agent-cert`, `--agent-key`) and the
//!   controller's CA (`--agent-ca`); another CA, or no TLS, is refused (loopback).

use crate::netns::Lab;
use crate::support::{fresh_state_dir, Serve};
use std::io::{BufRead, BufReader};
use std::net::Ipv4Addr;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "lab-shared-token";

/// A process killed when the test ends.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `throng serve` in `host` on its lab address, port 8000 (WebRTC on UDP 8001), with the demo
/// mount, HLS in 2 s segments and the admin password `adminpw`.
fn server(lab: &Lab, host: &str) -> Serve {
    let a = lab.addr(host);
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
        .keep();
    let config = dir.join("throng.toml");
    std::fs::write(
        &config,
        format!(
            "listen = [\"{a}:8000\"]\ndemo = true\n[authentication]\nsource-password = \"pw\"\nadmin-password = \"adminpw\"\n[limits]\npending-per-address = 100000\n[webrtc]\nudp-listen = \"{a}:8001\"\n[hls]\nenabled = true\nsegment-seconds = 2\n"
        ),
    )
    .unwrap();
    let mut cmd = lab.command(host, env!("CARGO_BIN_EXE_throng"));
    cmd.args(["serve", "-c"])
        .arg(&config)
        .env("THRONG_STATE_DIR", fresh_state_dir());
    Serve::spawn_cmd(cmd)
}

/// `throng bench agent` in `host` on port 7700 with `args`, its clock shifted by `offset_ms`;
/// returns once it listens.
fn agent(lab: &Lab, host: &str, offset_ms: i64, args: &[&str]) -> Proc {
    let throng = env!("CARGO_BIN_EXE_throng");
    let mut cmd = if offset_ms != 0 {
        lab.command_with_clock_offset(host, throng, offset_ms)
    } else {
        lab.command(host, throng)
    };
    let addrs = lab.addrs(host);
    let bind = format!("{}-{}", addrs[1], addrs[addrs.len() - 1]);
    cmd.args([
        "bench",
        "agent",
        "--listen",
        &format!("{}:7700", lab.addr(host)),
    ])
    .args(["--name", host, "--bind-range", &bind, "--no-self-test"])
    .args(args)
    .env("THRONG_BENCH_TOKEN", TOKEN)
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    spawn_agent(cmd)
}

fn spawn_agent(mut cmd: Command) -> Proc {
    let mut child = cmd.spawn().expect("spawning an agent");
    let mut r = BufReader::new(child.stderr.take().unwrap());
    let mut seen = Vec::new();
    loop {
        let mut line = String::new();
        assert!(
            r.read_line(&mut line).unwrap() > 0,
            "the agent exited: {seen:?}"
        );
        seen.push(line.clone());
        if line.contains("listening on") {
            break;
        }
    }
    // Keep draining its stderr so it never blocks.
    std::thread::spawn(move || {
        let mut l = String::new();
        while r.read_line(&mut l).map(|n| n > 0).unwrap_or(false) {
            l.clear();
        }
    });
    Proc(child)
}

/// `throng bench run <args>` in `host` (the controller), with `token`.
fn controller(lab: &Lab, host: &str, token: &str, args: &[String]) -> Output {
    lab.command(host, env!("CARGO_BIN_EXE_throng"))
        .args(["bench", "run"])
        .args(args)
        .env("THRONG_BENCH_TOKEN", token)
        .output()
        .expect("running the controller")
}

fn show(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The sum of a counter of the server's `/metrics`, read from `from` (a lab host).
fn server_counter(lab: &Lab, from: &str, server: Ipv4Addr, name: &str) -> f64 {
    let out = lab.run(
        from,
        &[
            "curl",
            "-sS",
            "--max-time",
            "10",
            &format!("http://{server}:8000/metrics"),
        ],
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Waits (up to 40 s) until the demo mount's media playlist lists 3 segments, read from `from`:
/// HLS players start 3 segments from the live edge.
fn wait_hls(lab: &Lab, from: &str, server: Ipv4Addr) {
    let get = |path: &str| {
        let out = lab.run(
            from,
            &[
                "curl",
                "-sS",
                "--max-time",
                "5",
                &format!("http://{server}:8000{path}"),
            ],
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let began = Instant::now();
    loop {
        let master = get("/hls/demo.mp3/index.m3u8");
        if let Some(variant) = master
            .lines()
            .rfind(|l| !l.is_empty() && !l.starts_with('#'))
        {
            if get(&format!("/hls/demo.mp3/{variant}"))
                .matches("#EXTINF")
                .count()
                >= 3
            {
                return;
            }
        }
        assert!(
            began.elapsed() < Duration::from_secs(40),
            "no 3 HLS segments: {master}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn agents_of(lab: &Lab, hosts: &[&str]) -> String {
    hosts
        .iter()
        .map(|h| format!("{}:7700", lab.addr(h)))
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn a_mixed_run_over_three_agents_merges_exactly_on_one_clock() {
    let lab = Lab::with_addresses(&["srv", "ctl", "a1", "a2", "a3"], 4);
    let srv = server(&lab, "srv");
    let s = lab.addr("srv");
    let _a1 = agent(&lab, "a1", 0, &[]);
    let _a2 = agent(&lab, "a2", 250, &[]);
    let _a3 = agent(&lab, "a3", 0, &[]);
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let scenario = dir.path().join("mixed.toml");
    std::fs::write(
        &scenario,
        format!(
            r#"name = "mixed"
[[stage]]
target = 150
duration = "3s"
[[stage]]
target = 300
duration = "3s"
[[stage]]
target = 300
duration = "8s"
[[group]]
name = "icy"
mode = "icy"
urls = ["http://{s}:8000/demo.mp3"]
share = 0.6
icy-metadata = true
[[group]]
name = "hls"
mode = "hls"
urls = ["http://{s}:8000/hls/demo.mp3/index.m3u8"]
share = 0.15
[[group]]
name = "webrtc"
mode = "whep"
urls = ["http://{s}:8000/whep/demo.mp3"]
share = 0.05
[[group]]
name = "page"
mode = "events"
urls = ["http://{s}:8000/api/v1/events?mount=/demo.mp3"]
share = 0.2
admin-password = "adminpw"
change-interval = "1s"
"#
        ),
    )
    .unwrap();
    wait_hls(&lab, "ctl", s);
    let before = server_counter(&lab, "ctl", s, "throng_listener_connects_total");
    let out = dir.path().join("out");
    let o = controller(
        &lab,
        "ctl",
        TOKEN,
        &[
            scenario.display().to_string(),
            "--agents".into(),
            agents_of(&lab, &["a1", "a2", "a3"]),
            "--no-progress".into(),
            "--out".into(),
            out.display().to_string(),
        ],
    );
    let after = server_counter(&lab, "ctl", s, "throng_listener_connects_total");
    drop(srv);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    let agents = r["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 3, "{}", r["agents"]);
    // The merge is the sum of the agents' summaries, exactly.
    for key in ["started", "connects", "failed", "starved"] {
        let sum: u64 = agents.iter().map(|a| a[key].as_u64().unwrap()).sum();
        assert_eq!(
            sum,
            r["summary"][if key == "failed" {
                "failed_listeners"
            } else {
                key
            }]
            .as_u64()
            .unwrap(),
            "{key}"
        );
    }
    let media: f64 = agents
        .iter()
        .map(|a| a["media_seconds"].as_f64().unwrap())
        .sum();
    assert!((media - r["summary"]["media_seconds"].as_f64().unwrap()).abs() < 1e-3);
    // Every group reached its share, every one of its listeners verified.
    let groups = r["groups"].as_array().unwrap();
    let modes: Vec<&str> = groups.iter().map(|g| g["mode"].as_str().unwrap()).collect();
    assert_eq!(modes, ["icy", "hls", "whep", "events"]);
    for (g, n) in groups.iter().zip([180, 45, 15, 60]) {
        let gs = &g["summary"];
        assert_eq!(gs["started"], n, "{}", g["name"]);
        assert_eq!(gs["troubled"], 0, "{}: {gs}", g["name"]);
        assert!(
            gs["frames_checked"].as_u64().unwrap() > 0,
            "{}: {gs}",
            g["name"]
        );
    }
    // ... and the server's own count of listeners: every ICY connection, HLS session (one per
    // player, each keeping its session's playlist URL) and WHEP viewer (subscribers are not
    // listeners of the mount), and the controller's one request for the `Server` header.
    let started = |i: usize| groups[i]["summary"]["started"].as_f64().unwrap();
    assert_eq!(
        after - before,
        groups[0]["summary"]["connects"].as_f64().unwrap() + started(1) + started(2) + 1.0,
        "{}",
        show(&o)
    );
    // Each agent holds about a third (its capacity is the same).
    for a in agents {
        let n = a["started"].as_u64().unwrap();
        assert!((95..=105).contains(&n), "{a}");
    }
    // One clock: a2 is 250 ms ahead, found within 5 ms; its latencies corrected.
    let a2 = agents.iter().find(|a| a["name"] == "a2").unwrap();
    let offset = a2["clock_offset_ms"].as_f64().unwrap();
    assert!((offset - 250.0).abs() < 5.0, "a2's offset {offset} ms");
    let a1 = agents.iter().find(|a| a["name"] == "a1").unwrap();
    assert!(a1["clock_offset_ms"].as_f64().unwrap().abs() < 5.0);
    let lat2 = a2["event_latency_p50_ms"]
        .as_f64()
        .expect("a2 timed title changes");
    let lat1 = a1["event_latency_p50_ms"]
        .as_f64()
        .expect("a1 timed title changes");
    assert!(
        lat2 < 100.0 && (lat2 - lat1).abs() < 50.0,
        "a2 {lat2} ms, a1 {lat1} ms"
    );
    assert_eq!(r["events"]["missed"], 0, "{}", r["events"]);
}

#[test]
fn a_lost_agent_fails_the_run_and_the_others_finish() {
    let lab = Lab::with_addresses(&["srv", "ctl", "a1", "a2", "a3"], 4);
    let srv = server(&lab, "srv");
    let s = lab.addr("srv");
    let _a1 = agent(&lab, "a1", 0, &[]);
    let _a2 = agent(&lab, "a2", 0, &[]);
    let mut a3 = agent(&lab, "a3", 0, &[]);
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let out = dir.path().join("out");
    let url = format!("http://{s}:8000/demo.mp3");
    let args = [
        url,
        "-n".into(),
        "150".into(),
        "--ramp".into(),
        "150".into(),
        "--hold".into(),
        "14s".into(),
        "--agents".into(),
        agents_of(&lab, &["a1", "a2", "a3"]),
        "--no-progress".into(),
        "--out".into(),
        out.display().to_string(),
    ];
    let began = Instant::now();
    let run = std::thread::scope(|sc| {
        let h = sc.spawn(|| controller(&lab, "ctl", TOKEN, &args));
        // Mid-run, a3 dies.
        std::thread::sleep(Duration::from_secs(8));
        let _ = a3.0.kill();
        let _ = a3.0.wait();
        h.join().unwrap()
    });
    drop(srv);
    assert_eq!(run.status.code(), Some(1), "{}", show(&run));
    assert!(began.elapsed() < Duration::from_secs(60));
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        err.contains("FAIL: agent a3 lost at ") && err.contains("listeners unaccounted for"),
        "{}",
        show(&run)
    );
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    let lost = &r["lost"][0];
    assert_eq!(lost["host"], "a3");
    let n = lost["listeners"].as_u64().unwrap();
    assert!((45..=55).contains(&n), "{lost}");
    // The others finished: their listeners streamed to the end, none starved.
    for a in r["agents"].as_array().unwrap() {
        if a["name"] == "a3" {
            assert!(a["lost_at_s"].as_u64().is_some(), "{a}");
            continue;
        }
        assert_eq!(a["starved"], 0, "{a}");
        assert!(a["lost_at_s"].is_null(), "{a}");
        assert!(a["agent_cpu_s"].as_f64().is_some(), "{a} said it was done");
    }
}

#[test]
fn a_wrong_token_and_a_plan_over_an_agents_files_are_refused() {
    let lab = Lab::with_addresses(&["srv", "ctl", "a1", "a2", "a3"], 4);
    let srv = server(&lab, "srv");
    let s = lab.addr("srv");
    let _a1 = agent(&lab, "a1", 0, &[]);
    let _a2 = agent(&lab, "a2", 0, &[]);
    // a3 may hold 400 files in one process.
    let a3 = {
        let throng = env!("CARGO_BIN_EXE_throng");
        let addrs = lab.addrs("a3");
        let bind = format!("{}-{}", addrs[1], addrs[addrs.len() - 1]);
        let mut cmd = lab.command("a3", "prlimit");
        cmd.args(["--nofile=400:400", "--", throng, "bench", "agent"])
            .args(["--listen", &format!("{}:7700", lab.addr("a3"))])
            .args(["--name", "a3", "--bind-range", &bind, "--no-self-test"])
            .args(["--max-workers", "1"])
            .env("THRONG_BENCH_TOKEN", TOKEN)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        spawn_agent(cmd)
    };
    let url = format!("http://{s}:8000/demo.mp3");
    let before = server_counter(&lab, "ctl", s, "throng_listener_connects_total");
    let base = |n: &str| {
        vec![
            url.clone(),
            "-n".into(),
            n.into(),
            "--hold".into(),
            "5s".into(),
            "--agents".into(),
            agents_of(&lab, &["a1", "a2", "a3"]),
            "--no-progress".into(),
            "--out".into(),
            std::env::temp_dir()
                .join("throng-refused")
                .display()
                .to_string(),
        ]
    };
    let began = Instant::now();
    let wrong = controller(&lab, "ctl", "not-the-token", &base("30"));
    assert_eq!(wrong.status.code(), Some(2), "{}", show(&wrong));
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert!(err.contains("refused: wrong token"), "{}", show(&wrong));
    // Even split (weights 1): 1,500 listeners, 500 for a3, over its 300 per process.
    let scenario = std::env::temp_dir().join(format!("throng-over-{}.toml", std::process::id()));
    std::fs::write(
        &scenario,
        format!(
            "[[stage]]\ntarget = 1500\nduration = \"5s\"\n[[group]]\nurls = [\"{url}\"]\n{}",
            ["a1", "a2", "a3"]
                .iter()
                .map(|h| format!(
                    "[[agent]]\naddress = \"{}:7700\"\nweight = 1\n",
                    lab.addr(h)
                ))
                .collect::<String>()
        ),
    )
    .unwrap();
    let over = controller(
        &lab,
        "ctl",
        TOKEN,
        &[scenario.display().to_string(), "--no-progress".into()],
    );
    assert_eq!(over.status.code(), Some(2), "{}", show(&over));
    let err = String::from_utf8_lossy(&over.stderr);
    assert!(
        err.contains("agent a3")
            && err.contains("open-file limit 400")
            && err.contains("the plan gives it 500"),
        "{}",
        show(&over)
    );
    assert!(began.elapsed() < Duration::from_secs(40));
    // Before any listener started: the server accepted none.
    let after = server_counter(&lab, "ctl", s, "throng_listener_connects_total");
    assert_eq!(after, before);
    drop((a3, srv));
    let _ = std::fs::remove_file(scenario);
}

#[test]
fn a_dead_controller_leaves_no_orphan_load_and_unreachable_targets_are_failures() {
    let lab = Lab::with_addresses(&["srv", "ctl", "a1", "a2"], 4);
    let srv = server(&lab, "srv");
    let s = lab.addr("srv");
    let _a1 = agent(&lab, "a1", 0, &[]);
    let _a2 = agent(&lab, "a2", 0, &[]);
    let agents = agents_of(&lab, &["a1", "a2"]);
    // A target nobody listens on: each agent's listeners fail as any listener's would.
    let out = std::env::temp_dir().join(format!("throng-unreach-{}", std::process::id()));
    let o = controller(
        &lab,
        "ctl",
        TOKEN,
        &[
            format!("http://{s}:8999/demo.mp3"),
            "-n".into(),
            "20".into(),
            "--hold".into(),
            "20s".into(),
            "--agents".into(),
            agents.clone(),
            "--no-progress".into(),
            "--out".into(),
            out.display().to_string(),
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("connections failed") && err.contains("refused ×"),
        "{}",
        show(&o)
    );
    let _ = std::fs::remove_dir_all(&out);
    // A controller killed mid-run: the agents stop their listeners within 10 s.
    let mut ctl = lab
        .command("ctl", env!("CARGO_BIN_EXE_throng"))
        .args([
            "bench",
            "run",
            &format!("http://{s}:8000/demo.mp3"),
            "-n",
            "60",
        ])
        .args(["--hold", "120s", "--no-progress", "--agents", &agents])
        .env("THRONG_BENCH_TOKEN", TOKEN)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let listeners = || server_counter(&lab, "srv", s, "throng_listeners{");
    let up = Instant::now();
    while listeners() < 60.0 && up.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(listeners(), 60.0, "the run got going");
    let _ = ctl.kill();
    let _ = ctl.wait();
    let killed = Instant::now();
    while listeners() > 0.0 && killed.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(250));
    }
    let took = killed.elapsed();
    assert_eq!(listeners(), 0.0, "orphan load after {took:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    drop(srv);
}

/// A CA and an agent certificate it signed for 127.0.0.1, as PEM files in `dir`: (ca, cert,
/// key).
fn tls_files(
    dir: &std::path::Path,
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let paths = (
        dir.join("ca.pem"),
        dir.join("agent.pem"),
        dir.join("agent.key"),
    );
    std::fs::write(&paths.0, ca.pem()).unwrap();
    std::fs::write(&paths.1, cert.pem()).unwrap();
    std::fs::write(&paths.2, key.serialize_pem()).unwrap();
    paths
}

#[test]
fn the_link_is_tls_with_the_agents_certificate() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (ca, cert, key) = tls_files(dir.path());
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let (other_ca, _, _) = tls_files(&other);
    let (mut server, addr, _) =
        crate::support::spawn_serve(["--listen", "127.0.0.1:0", "--source-password", "pw"]);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_throng"));
    cmd.args(["bench", "agent", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--no-self-test", "--agent-cert"])
        .arg(&cert)
        .arg("--agent-key")
        .arg(&key)
        .env("THRONG_BENCH_TOKEN", TOKEN)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let _agent = spawn_agent(cmd);
    let run = |extra: &[&std::ffi::OsStr], out: &str| {
        Command::new(env!("CARGO_BIN_EXE_throng"))
            .args([
                "bench",
                "run",
                &format!("http://{addr}/demo.mp3"),
                "-n",
                "10",
            ])
            .args([
                "--hold",
                "3s",
                "--no-progress",
                "--agents",
                &format!("127.0.0.1:{port}"),
            ])
            .args(extra)
            .arg("--out")
            .arg(dir.path().join(out))
            .env("THRONG_BENCH_TOKEN", TOKEN)
            .output()
            .unwrap()
    };
    let ok = run(&["--agent-ca".as_ref(), ca.as_os_str()], "ok");
    let wrong_ca = run(&["--agent-ca".as_ref(), other_ca.as_os_str()], "wrong");
    let plain = run(&[], "plain");
    let _ = (server.kill(), server.wait());
    assert_eq!(ok.status.code(), Some(0), "{}", show(&ok));
    assert_eq!(wrong_ca.status.code(), Some(2), "{}", show(&wrong_ca));
    assert_eq!(plain.status.code(), Some(2), "{}", show(&plain));
}

/// `--agents ssh://root@HOST:PORT/PATH`: the controller starts the agent over a real OpenSSH
/// session (an sshd of the test's own in the agent's namespace, key authentication) and the run
/// goes over that session's standard input and output; when the controller ends, so does the
/// agent.
#[test]
fn an_agent_started_over_ssh_runs_its_share() {
    let lab = Lab::with_addresses(&["srv", "ctl", "a1"], 4);
    let srv = server(&lab, "srv");
    let s = lab.addr("srv");
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let d = dir.path();
    for (name, kind) in [("host_key", "ed25519"), ("client_key", "ed25519")] {
        let o = Command::new("ssh-keygen")
            .args(["-q", "-t", kind, "-N", "", "-f"])
            .arg(d.join(name))
            .output()
            .expect("ssh-keygen (openssh-client, scripts/install-deps.sh)");
        assert!(o.status.success(), "{o:?}");
    }
    std::fs::copy(d.join("client_key.pub"), d.join("authorized_keys")).unwrap();
    let a1 = lab.addr("a1");
    std::fs::write(
        d.join("sshd_config"),
        format!(
            "Port 2222\nListenAddress {a1}\nHostKey {hk}\nAuthorizedKeysFile {ak}\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nStrictModes no\nUsePAM no\nPidFile none\nLogLevel ERROR\n",
            hk = d.join("host_key").display(),
            ak = d.join("authorized_keys").display()
        ),
    )
    .unwrap();
    std::fs::create_dir_all("/run/sshd").ok();
    let _sshd = Proc(
        lab.command("a1", "/usr/sbin/sshd")
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sshd (openssh-server, scripts/install-deps.sh)"),
    );
    assert!(
        lab.wait_tcp(
            "ctl",
            format!("{a1}:2222").parse().unwrap(),
            Duration::from_secs(10)
        ),
        "sshd did not come up"
    );
    let addrs = lab.addrs("a1");
    let agent = format!(
        "ssh://root@{a1}:2222{}?bind-range={}-{}&no-self-test",
        env!("CARGO_BIN_EXE_throng"),
        addrs[1],
        addrs[addrs.len() - 1]
    );
    let out = d.join("out");
    let o = lab
        .command("ctl", env!("CARGO_BIN_EXE_throng"))
        .args(["bench", "run", &format!("http://{s}:8000/demo.mp3"), "-n", "30"])
        .args(["--hold", "4s", "--no-progress", "--agents", &agent, "--out"])
        .arg(&out)
        .env_remove("THRONG_BENCH_TOKEN")
        .env(
            "THRONG_BENCH_SSH_OPTS",
            format!(
                "-i {} -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no -o LogLevel=ERROR",
                d.join("client_key").display()
            ),
        )
        .output()
        .unwrap();
    drop(srv);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(r["summary"]["started"], 30);
    assert_eq!(r["agents"][0]["started"], 30, "{}", r["agents"]);
    assert!(r["agents"][0]["address"]
        .as_str()
        .unwrap()
        .starts_with("ssh://"));
}
