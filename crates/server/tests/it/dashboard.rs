//! The Grafana dashboard (`deploy/grafana/throng-dashboard.json`) queries only metrics the
//! server exports: every PromQL expression's metric names are extracted and each is looked up
//! in a running server's `/metrics`, after traffic that creates the per-mount series (a source,
//! listeners, a listener dropped for lagging). The Prometheus scrape example is checked to
//! point at `/metrics`.

use std::collections::BTreeSet;
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use socket2::{Domain, Socket, Type};

use crate::support::*;

fn deploy(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy")
        .join(path)
}

/// Every `expr` of the dashboard's panels (rows included) and template queries.
fn expressions(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(o) => {
            for (k, v) in o {
                match (k.as_str(), v) {
                    ("expr" | "definition", serde_json::Value::String(s)) => out.push(s.clone()),
                    _ => expressions(v, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| expressions(v, out)),
        _ => {}
    }
}

/// PromQL words that are not metric names.
const KEYWORDS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "and",
    "or",
    "unless",
    "offset",
    "inf",
    "nan",
];

/// The metric names an expression reads: identifiers outside strings, label matchers
/// (`{…}`), ranges (`[…]`) and `by (…)`/`without (…)` lists, that are not followed by `(`
/// (functions and aggregations) and are not keywords, numbers or `$variables`.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let b = expr.as_bytes();
    let mut i = 0;
    let mut depth_brace = 0;
    let mut depth_bracket = 0;
    let mut skip_group = false;
    let mut group_depth = 0;
    let mut paren = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b'"' | b'\'' => {
                i += 1;
                while i < b.len() && b[i] != c {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                continue;
            }
            b'{' => depth_brace += 1,
            b'}' => depth_brace -= 1,
            b'[' => depth_bracket += 1,
            b']' => depth_bracket -= 1,
            b'(' => {
                paren += 1;
                if skip_group {
                    group_depth = paren;
                    skip_group = false;
                }
            }
            b')' => {
                if paren == group_depth {
                    group_depth = 0;
                }
                paren -= 1;
            }
            b'$' => {
                i += 1;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                continue;
            }
            c if c.is_ascii_alphabetic() || c == b'_' || c == b':' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b':')
                {
                    i += 1;
                }
                let word = &expr[start..i];
                let next = expr[i..].trim_start().chars().next();
                if depth_brace > 0 || depth_bracket > 0 || group_depth > 0 {
                    continue;
                }
                if word == "by" || word == "without" || word == "on" || word == "ignoring" {
                    skip_group = true;
                    continue;
                }
                // `sum by (…) (…)`: an aggregation with its grouping first.
                let rest = expr[i..].trim_start();
                let grouped = ["by", "without"].iter().any(|k| {
                    rest.strip_prefix(k)
                        .is_some_and(|r| r.trim_start().starts_with('('))
                });
                if next == Some('(')
                    || grouped
                    || KEYWORDS.contains(&word.to_ascii_lowercase().as_str())
                {
                    continue;
                }
                names.insert(word.to_owned());
                continue;
            }
            c if c.is_ascii_digit() => {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                    i += 1;
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    names
}

#[test]
fn metric_names_come_out_of_promql() {
    let n = metric_names(
        "sum by (mount) (rate(throng_bytes_sent_total{instance=~\"$instance\", x=\"a{b}\"}[$__rate_interval])) * 8 / clamp_min(sum without (job) (process_open_fds), 1) > bool 2",
    );
    assert_eq!(
        n.into_iter().collect::<Vec<_>>(),
        ["process_open_fds", "throng_bytes_sent_total"]
    );
    assert_eq!(
        metric_names("label_values(throng_clients, instance)")
            .into_iter()
            .collect::<Vec<_>>(),
        ["instance", "throng_clients"]
    );
}

#[test]
fn every_metric_the_dashboard_queries_is_exported() {
    let text = std::fs::read_to_string(deploy("grafana/throng-dashboard.json")).unwrap();
    let dash: serde_json::Value = serde_json::from_str(&text).expect("dashboard is JSON");
    assert!(dash["panels"].as_array().is_some_and(|p| p.len() >= 8));
    let mut exprs = Vec::new();
    expressions(&dash, &mut exprs);
    let mut wanted = BTreeSet::new();
    for e in &exprs {
        let names = metric_names(e);
        assert!(!names.is_empty(), "no metric in {e:?}");
        wanted.extend(names);
    }
    // `label_values(metric, label)`: the label is not a metric.
    wanted.remove("instance");
    for needed in [
        "throng_listeners",
        "throng_bytes_sent_total",
        "throng_slow_listeners_total",
        "throng_sources",
        "throng_relays",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "throng_event_subscribers",
        "throng_whep_degraded_viewers",
    ] {
        assert!(
            wanted.contains(needed),
            "the dashboard has no {needed} panel"
        );
    }

    // Traffic that creates every per-mount series: a source at 4× real time, a listener,
    // and a listener that never reads, dropped once it lags more than queue-size.
    let dir = tempfile::tempdir().unwrap();
    let srv = TestServer::start(&format!(
        "[limits]\nqueue-size = 100000\nburst-size = 16000\nlistener-sndbuf = 16384\n{}{}",
        crate::whep::webrtc_config(),
        crate::whep::tone_mount(dir.path(), "/tone.opus")
    ));
    let _src = Source::start(srv.addr, "/live.mp3", "PUT", 4.0);
    srv.wait_mount("/live.mp3");
    let mount = srv.ctx.registry.get("/live.mp3").unwrap();
    let mut reader = Listener::open(srv.addr, "/live.mp3", false);
    let sock = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    sock.connect(&srv.addr.into()).unwrap();
    let mut stalled: TcpStream = sock.into();
    std::io::Write::write_all(&mut stalled, b"GET /live.mp3 HTTP/1.0\r\n\r\n").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while mount
        .slow_listeners
        .load(std::sync::atomic::Ordering::Relaxed)
        == 0
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the stalled listener was never dropped"
        );
        reader.read_for(Duration::from_millis(200));
    }
    // A rejected request too.
    let _ = http_get(srv.addr, "/nothing-here.mp3", &[]);
    // A WebRTC (WHEP) session: its mount's degraded-viewers gauge is set within a second.
    srv.wait_mount("/tone.opus");
    let (_, _, offer, _) = crate::whep::Viewer::offer();
    let (status, _, _) = crate::whep::post(
        srv.addr,
        "/whep/tone.opus",
        &["Content-Type: application/sdp"],
        &offer,
    );
    assert_eq!(status, 201);
    std::thread::sleep(Duration::from_millis(1500));

    let (head, body) = http_get(srv.addr, "/metrics", &[]);
    assert_eq!(head.status, 200);
    let metrics = String::from_utf8(body).unwrap();
    let exported: BTreeSet<&str> = metrics
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    let missing: Vec<&String> = wanted
        .iter()
        .filter(|n| !exported.contains(n.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "the dashboard queries metrics /metrics does not have: {missing:?}\n{metrics}"
    );
}

#[test]
fn the_prometheus_example_scrapes_metrics() {
    let text = std::fs::read_to_string(deploy("prometheus/prometheus.yml")).unwrap();
    assert!(text.contains("scrape_configs:"));
    assert!(text.contains("metrics_path: /metrics"));
    assert!(text.contains("job_name: throng"));
}
