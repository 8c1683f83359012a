//! The bench as a CI gate, k6-style, over real processes and sockets: thresholds on p99 TTFB
//! that pass and fail around a server slow to answer on purpose (exit 0 and 1, ✔/✘ lines, a
//! JUnit file, the HTML report opening with the verdict), `abort-on-fail` stopping a run early,
//! a scenario file with two groups and stages reported per group (`--set` parameters), the
//! NDJSON timeline, and the live `/metrics` scraped by a real Prometheus (Debian's package)
//! during a run, its last values matching the final report.

use crate::cli::temp_dir;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;
use throng_bench::testserver::{TestServer, TestServerConfig};

fn bench(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_throng-bench"))
        .current_dir(cwd)
        .arg("bench")
        .args(args)
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

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap_or_else(|e| panic!("{path:?}: {e}")))
        .unwrap()
}

#[test]
fn a_ttfb_threshold_passes_and_fails_around_a_slow_server() {
    // Every response head comes 300 ms late.
    let url = crate::util::delayed_server(Duration::from_millis(300));
    let dir = temp_dir("ttfb");
    let run = |threshold: &str, out: &str| {
        bench(
            &dir,
            &[
                "run",
                &url,
                "-n",
                "20",
                "--hold",
                "3s",
                "--workers",
                "0",
                "--no-progress",
                "--threshold",
                threshold,
                "--junit",
                &format!("{out}/junit.xml"),
                "--out",
                out,
            ],
        )
    };
    let pass = run("ttfb.p99<500ms", "pass");
    let fail = run("ttfb.p99<100ms", "fail");
    assert_eq!(pass.status.code(), Some(0), "{}", text(&pass));
    assert_eq!(fail.status.code(), Some(1), "{}", text(&fail));
    let out = String::from_utf8_lossy(&pass.stdout);
    assert!(out.contains("✔ ttfb.p99<500ms: 3"), "{out}");
    assert!(
        out.contains("✔ starved.count<1: 0"),
        "the defaults are judged too: {out}"
    );
    let out = String::from_utf8_lossy(&fail.stdout);
    assert!(out.contains("✘ ttfb.p99<100ms: 3"), "{out}");
    let err = String::from_utf8_lossy(&fail.stderr);
    assert!(err.contains("FAIL: threshold ttfb.p99<100ms: 3"), "{err}");
    // The value is the exact p99 (within 0.1 %): 300 ms and a little.
    let r = json(&dir.join("fail/report.json"));
    let p99 = r["summary"]["ttfb_p99_ms"].as_f64().unwrap();
    assert!((300.0..400.0).contains(&p99), "{p99}");
    assert_eq!(
        r["thresholds"][4]["name"], "ttfb.p99<100ms",
        "{}",
        r["thresholds"]
    );
    assert_eq!(r["thresholds"][4]["pass"], false);
    // JUnit: one test case per threshold, the failed one with its value.
    let junit = std::fs::read_to_string(dir.join("fail/junit.xml")).unwrap();
    assert!(
        junit.contains(
            "<testcase classname=\"throng-bench.run.thresholds\" name=\"ttfb.p99&lt;100ms\""
        ),
        "{junit}"
    );
    assert!(
        junit.contains("<failure message=\"ttfb.p99&lt;100ms: 3"),
        "{junit}"
    );
    // The HTML report's first line is the verdict.
    let html = std::fs::read_to_string(dir.join("fail/report.html")).unwrap();
    let body = html.split("<body>").nth(1).unwrap();
    let first = body.trim_start().lines().next().unwrap();
    assert!(
        first.starts_with(
            "<p class=\"verdict fail\">FAIL: 20 of 20 listeners got ≥ 80 % of real time"
        ),
        "{first}"
    );
    let html = std::fs::read_to_string(dir.join("pass/report.html")).unwrap();
    let first = html
        .split("<body>")
        .nth(1)
        .unwrap()
        .trim_start()
        .lines()
        .next()
        .unwrap()
        .to_owned();
    assert!(
        first.starts_with("<p class=\"verdict pass\">PASS: 20 of 20"),
        "{first}"
    );
}

#[test]
fn abort_on_fail_stops_the_run_early() {
    let cfg = TestServerConfig {
        stop_after_secs: Some(1.0),
        ..TestServerConfig::default()
    };
    let srv = TestServer::start("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let dir = temp_dir("abort");
    let scenario = dir.join("abort.toml");
    std::fs::write(
        &scenario,
        format!(
            r#"name = "abort"
[[stage]]
target = 10
duration = "1s"
[[stage]]
target = 10
duration = "60s"
[[group]]
name = "icy"
urls = ["http://{}/stream"]
workers = 0
[[threshold]]
metric = "starved"
stat = "count"
below = 1
abort-on-fail = true
"#,
            srv.addr()
        ),
    )
    .unwrap();
    let began = std::time::Instant::now();
    let o = bench(
        &dir,
        &[
            "run",
            scenario.to_str().unwrap(),
            "--no-progress",
            "--out",
            "r",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        began.elapsed() < Duration::from_secs(30),
        "{:?}",
        began.elapsed()
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("the run was aborted (abort-on-fail)"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_scenario_runs_two_groups_over_stages_and_reports_each() {
    let a = TestServer::start("127.0.0.1:0".parse().unwrap(), TestServerConfig::default()).unwrap();
    let b = TestServer::start("127.0.0.1:0".parse().unwrap(), TestServerConfig::default()).unwrap();
    let dir = temp_dir("scenario-groups");
    let scenario = dir.join("station.toml");
    std::fs::write(
        &scenario,
        r#"name = "station"
[params]
a = "127.0.0.1:9"
b = "127.0.0.1:9"
n = 40
[[stage]]
target = "${n}"
duration = "2s"
[[stage]]
target = "${n}"
duration = "4s"
[[group]]
name = "big"
urls = ["http://${a}/stream"]
share = 0.75
icy-metadata = true
workers = 0
[[group]]
name = "small"
urls = ["http://${b}/stream"]
workers = 0
[[threshold]]
metric = "ttfb"
stat = "p99"
below = "3s"
group = "small"
"#,
    )
    .unwrap();
    // The test server writes each listener once a second, so TTFB spreads over 0–1 s (a
    // loaded machine adds to it): the threshold is there to be named per group, not to bind.
    let o = bench(
        &dir,
        &[
            "run",
            scenario.to_str().unwrap(),
            "--set",
            &format!("a={}", a.addr()),
            "--set",
            &format!("b={}", b.addr()),
            "--set",
            "n=80",
            "--no-progress",
            "--out-timeline",
            "timeline.ndjson",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // The scenario's name picks the folder: bench-results/station.
    let r = json(&dir.join("bench-results/station/report.json"));
    let groups = r["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0]["name"], "big");
    assert_eq!(groups[0]["summary"]["listeners"], 60);
    assert_eq!(groups[1]["summary"]["listeners"], 20);
    assert!(groups[0]["summary"]["icy_blocks"].as_u64().unwrap() > 0);
    assert_eq!(r["summary"]["started"], 80);
    assert_eq!(
        r["thresholds"].as_array().unwrap().last().unwrap()["name"],
        "ttfb{group:small}.p99<3000ms"
    );
    // Each row has both groups.
    let row = &r["timeline"][4];
    assert_eq!(row["groups"].as_array().unwrap().len(), 2, "{row}");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("group big (icy): 60 started")
            && out.contains("group small (icy): 20 started"),
        "{out}"
    );
    // The NDJSON timeline: one line per second, the same rows.
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(dir.join("timeline.ndjson"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), r["timeline"].as_array().unwrap().len());
    assert_eq!(lines[4]["streaming"], row["streaming"]);
    assert!(lines[4]["unix_ms"].as_u64().unwrap() > 1_700_000_000_000);
}

/// A free TCP port on loopback.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// The value of the PromQL `query` now, from Prometheus at `port`.
fn prom(port: u16, query: &str) -> Option<f64> {
    let url = format!(
        "http://127.0.0.1:{port}/api/v1/query?query={}",
        query
            .replace('+', "%2B")
            .replace('\\', "%5C")
            .replace('{', "%7B")
            .replace('}', "%7D")
            .replace('"', "%22")
            .replace(' ', "%20")
    );
    let body = throng_bench::observe::sampler::http_get(&url, Duration::from_secs(5)).ok()?;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

#[test]
fn a_real_prometheus_scrapes_the_live_series_and_they_match_the_report() {
    assert!(
        Command::new("prometheus").arg("--version").output().is_ok(),
        "prometheus missing: run scripts/install-deps.sh"
    );
    let srv =
        TestServer::start("127.0.0.1:0".parse().unwrap(), TestServerConfig::default()).unwrap();
    let dir = temp_dir("prometheus");
    let (metrics, web) = (free_port(), free_port());
    std::fs::write(
        dir.join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: throng-bench\n    static_configs:\n      - targets: ['127.0.0.1:{metrics}']\n"
        ),
    )
    .unwrap();
    let prometheus = Command::new("prometheus")
        .current_dir(&dir)
        .args([
            "--config.file=prometheus.yml",
            "--storage.tsdb.path=data",
            &format!("--web.listen-address=127.0.0.1:{web}"),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _guard = Kill(prometheus);
    // Ready before the run starts, or a loaded machine's slow start misses the run's scrapes.
    let ready = format!("http://127.0.0.1:{web}/-/ready");
    let t0 = std::time::Instant::now();
    while throng_bench::observe::sampler::http_get(&ready, Duration::from_secs(2)).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "prometheus not ready: {}",
            std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let url = format!("http://{}/stream", srv.addr());
    let metrics_addr = format!("127.0.0.1:{metrics}");
    let o = bench(
        &dir,
        &[
            "run",
            &url,
            "-n",
            "30",
            "--hold",
            "6s",
            "--workers",
            "0",
            "--no-progress",
            "--metrics-listen",
            &metrics_addr,
            "--metrics-linger",
            "3s",
            "--out",
            "r",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r = json(&dir.join("r/report.json"));
    let s = &r["summary"];
    // `last_over_time`: the bench has gone by now, and Prometheus marks its series stale at
    // the first failed scrape, which an instant query would return as no value.
    let q = |query: &str| {
        let query = if query.starts_with("max_over_time") {
            query.to_string()
        } else if let Some(inner) = query.strip_prefix("sum(") {
            format!("sum(last_over_time({}[5m]))", inner.trim_end_matches(')'))
        } else {
            format!("last_over_time({query}[5m])")
        };
        let query = query.as_str();
        prom(web, query).unwrap_or_else(|| {
            panic!(
                "no value for {query}: {}",
                std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
            )
        })
    };
    // Scraped during the run: the streaming listeners were seen at 30.
    assert_eq!(
        q("max_over_time(throng_bench_listeners{state=\"streaming\"}[5m])"),
        30.0
    );
    // The last scrape (after the run) holds the final figures of the report.
    assert_eq!(
        q("throng_bench_listeners_started_total"),
        s["started"].as_f64().unwrap()
    );
    assert_eq!(
        q("throng_bench_connections_total"),
        s["connects"].as_f64().unwrap()
    );
    let ttfb =
        throng_bench::stats::Hist::from_base64(r["hists"]["ttfb"].as_str().unwrap()).unwrap();
    assert_eq!(q("throng_bench_ttfb_seconds_count"), ttfb.count() as f64);
    assert_eq!(ttfb.count(), 30);
    // The buckets are the text format's cumulative ones, read off the same histogram: +Inf
    // holds every value, and `le` 30 s every TTFB of this loopback run.
    assert_eq!(
        q("throng_bench_ttfb_seconds_bucket{le=\"+Inf\"}"),
        ttfb.count() as f64
    );
    assert_eq!(
        q("throng_bench_ttfb_seconds_bucket{le=~\"30(\\\\.0)?\"}"),
        ttfb.count_at_or_below_ms(30_000.0) as f64
    );
    assert_eq!(
        q("throng_bench_ttfb_seconds_bucket{le=\"0.25\"}"),
        ttfb.count_at_or_below_ms(250.0) as f64
    );
    let media = q("throng_bench_media_seconds_total");
    let want = s["media_seconds"].as_f64().unwrap();
    assert!(
        (media - want).abs() < 1e-6 * want.max(1.0),
        "{media} against {want}"
    );
    assert_eq!(q("sum(throng_bench_starved_listeners_total)"), 0.0);
    assert_eq!(
        q("throng_bench_threshold_pass{threshold=\"starved.count<1\"}"),
        1.0
    );
}

/// The metric names a PromQL expression reads (identifiers starting `throng_bench_`), with a
/// histogram's `_bucket`, `_sum` and `_count` taken back to its name.
fn bench_metrics(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find("throng_bench_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let mut name = tail[..end].to_owned();
        for suffix in ["_bucket", "_sum", "_count"] {
            if let Some(base) = name.strip_suffix(suffix) {
                name = base.to_owned();
            }
        }
        out.push(name);
        rest = &tail[end..];
    }
    out
}

/// The Grafana dashboard of a run (`deploy/grafana/throng-bench-dashboard.json`) queries only
/// series the bench serves at `/metrics`.
#[test]
fn the_bench_dashboard_queries_only_the_benchs_series() {
    use throng_bench::run::live::{render, AgentLive, GroupLive, LiveState};
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/grafana/throng-bench-dashboard.json");
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut exprs = Vec::new();
    fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    match (k.as_str(), x) {
                        ("expr" | "definition", serde_json::Value::String(s)) => {
                            out.push(s.clone())
                        }
                        _ => walk(x, out),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    walk(&dash, &mut exprs);
    assert!(exprs.len() > 20, "{} expressions", exprs.len());
    let mut st = LiveState {
        groups: vec![GroupLive {
            name: "icy".into(),
            ..GroupLive::default()
        }],
        thresholds: vec![("ttfb.p99<500ms".into(), true)],
        server_cpu_cores: Some(0.5),
        server_rss_bytes: Some(1 << 20),
        agents: vec![AgentLive {
            name: "a1".into(),
            ..AgentLive::default()
        }],
        ..LiveState::default()
    };
    st.groups[0].snap.failures.insert("refused".into(), 1);
    let text = render(&std::sync::Arc::new(std::sync::Mutex::new(st)));
    let served: std::collections::BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let mut missing = Vec::new();
    for e in &exprs {
        for name in bench_metrics(e) {
            let counter = name.strip_suffix("_total").unwrap_or(&name);
            if !served.contains(name.as_str()) && !served.contains(counter) {
                missing.push(name);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "the dashboard queries series /metrics lacks: {missing:?}\n{text}"
    );
}
