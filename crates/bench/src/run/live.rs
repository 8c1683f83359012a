//! The bench's live series (`--metrics-listen ADDR`): `GET /metrics` in the Prometheus text
//! format, encoded by prometheus-client and served by hyper, so a long run is watched on
//! Prometheus and Grafana as it happens (`deploy/grafana/throng-bench-dashboard.json`).
//!
//! Every series is the run's merge so far, per group (label `group`), the same figures the
//! final report gives:
//! - `throng_bench_listeners{group,state}`: states now (`want`, `connecting`, `streaming`,
//!   `stalled`, `starved`, `down`);
//! - `throng_bench_listeners_started_total`, `throng_bench_starved_listeners_total{rule}`
//!   (`rate`, `gap`, `loss`), `throng_bench_corrupt_listeners_total`,
//!   `throng_bench_failed_listeners_total`, `throng_bench_connections_total`,
//!   `throng_bench_connection_failures_total{reason}`: totals since the start;
//! - `throng_bench_media_seconds_total` (media time delivered), `throng_bench_listening_seconds_total`
//!   (wall time streamed), `throng_bench_received_bytes_total`;
//! - histograms `throng_bench_ttfb_seconds`, `throng_bench_gap_seconds`,
//!   `throng_bench_mouth_to_ear_seconds`, `throng_bench_event_latency_seconds` (buckets read off
//!   the exact HDR histograms);
//! - `throng_bench_threshold_pass{threshold}` (1 holds, 0 fails, now), the server's CPU
//!   (`throng_bench_server_cpu_cores`) and memory (`throng_bench_server_resident_memory_bytes`)
//!   when sampled, the bench's own CPU (`throng_bench_cpu_seconds_total`), the run's second and
//!   stage (`throng_bench_elapsed_seconds`, `throng_bench_stage`), and for a run over several
//!   machines each agent's listeners and clock offset (`throng_bench_agent_listeners{agent}`,
//!   `throng_bench_agent_clock_offset_seconds{agent}`).

use crate::report::summary::Hists;
use crate::stats::Snapshot;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Bucket bounds of the histograms (s).
pub const BUCKETS_S: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// One group's live figures.
#[derive(Debug, Clone, Default)]
pub struct GroupLive {
    /// The group's name.
    pub name: String,
    /// Its latest merged snapshot (states and totals).
    pub snap: Snapshot,
    /// Its histograms so far.
    pub hists: Hists,
}

/// One agent's live figures.
#[derive(Debug, Clone, Default)]
pub struct AgentLive {
    /// The agent's name.
    pub name: String,
    /// Listeners it holds now.
    pub listeners: u32,
    /// Its clock's offset from the run's (s).
    pub offset_s: f64,
}

/// What the series show now (the run loop updates it once a second).
#[derive(Debug, Clone, Default)]
pub struct LiveState {
    /// Every group's.
    pub groups: Vec<GroupLive>,
    /// Each threshold's state now.
    pub thresholds: Vec<(String, bool)>,
    /// The server's CPU now (cores), when sampled.
    pub server_cpu_cores: Option<f64>,
    /// The server's resident memory now (bytes), when sampled.
    pub server_rss_bytes: Option<u64>,
    /// The bench's own CPU so far (s).
    pub bench_cpu_s: f64,
    /// The run's second.
    pub elapsed_s: u32,
    /// The run's stage (1-based).
    pub stage: usize,
    /// The agents of a run over several machines.
    pub agents: Vec<AgentLive>,
}

#[derive(Debug)]
struct LiveCollector(Arc<Mutex<LiveState>>);

fn gauge(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: &[(Vec<(&str, String)>, f64)],
) -> std::fmt::Result {
    if rows.is_empty() {
        return Ok(());
    }
    let mut m = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in rows {
        // Whole numbers (listener counts) print as integers.
        let whole = v.fract() == 0.0 && v.abs() < 9e15;
        match (labels.is_empty(), whole) {
            (true, true) => m.encode_gauge(&(*v as i64))?,
            (true, false) => m.encode_gauge(v)?,
            (false, true) => m.encode_family(labels)?.encode_gauge(&(*v as i64))?,
            (false, false) => m.encode_family(labels)?.encode_gauge(v)?,
        }
    }
    Ok(())
}

fn counter(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: &[(Vec<(&str, String)>, f64)],
) -> std::fmt::Result {
    if rows.is_empty() {
        return Ok(());
    }
    let mut m = e.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in rows {
        type Nl = prometheus_client::encoding::NoLabelSet;
        let whole = v.fract() == 0.0 && v.abs() < 9e15;
        match (labels.is_empty(), whole) {
            (true, true) => m.encode_counter::<Nl, _, f64>(&(*v as u64), None)?,
            (true, false) => m.encode_counter::<Nl, _, f64>(v, None)?,
            (false, true) => m
                .encode_family(labels)?
                .encode_counter::<Nl, _, f64>(&(*v as u64), None)?,
            (false, false) => m
                .encode_family(labels)?
                .encode_counter::<Nl, _, f64>(v, None)?,
        }
    }
    Ok(())
}

fn histogram(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    groups: &[GroupLive],
    pick: fn(&Hists) -> &crate::stats::Hist,
) -> std::fmt::Result {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for g in groups {
        let h = pick(&g.hists);
        let labels = vec![("group", g.name.clone())];
        // The encoder sums the buckets it is given into the text format's cumulative `le`
        // counts: each bucket is handed its own count (those above the last bound's, to +Inf).
        let mut below = 0u64;
        let mut buckets: Vec<(f64, u64)> = Vec::with_capacity(BUCKETS_S.len() + 1);
        for b in BUCKETS_S {
            let at_or_below = h.count_at_or_below_ms(b * 1000.0);
            buckets.push((b, at_or_below.saturating_sub(below)));
            below = below.max(at_or_below);
        }
        buckets.push((f64::MAX, h.count().saturating_sub(below)));
        m.encode_family(&labels)?
            .encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                h.sum_ms() / 1000.0,
                h.count(),
                &buckets,
                None,
            )?;
    }
    Ok(())
}

impl Collector for LiveCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let st = self.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let by_group = |f: fn(&Snapshot) -> f64| -> Vec<(Vec<(&str, String)>, f64)> {
            st.groups
                .iter()
                .map(|g| (vec![("group", g.name.clone())], f(&g.snap)))
                .collect()
        };
        let mut states = Vec::new();
        for g in &st.groups {
            let s = &g.snap;
            for (state, v) in [
                ("want", s.want),
                ("connecting", s.connecting),
                ("streaming", s.streaming),
                ("stalled", s.stalled),
                ("starved", s.starved),
                ("down", s.down),
            ] {
                states.push((
                    vec![("group", g.name.clone()), ("state", state.to_owned())],
                    f64::from(v),
                ));
            }
        }
        gauge(
            &mut e,
            "throng_bench_listeners",
            "Simulated listeners by group and state, now.",
            &states,
        )?;
        counter(
            &mut e,
            "throng_bench_listeners_started",
            "Listeners started at least once.",
            &by_group(|s| f64::from(s.started)),
        )?;
        let mut starved = Vec::new();
        for g in &st.groups {
            for (rule, c) in [
                ("rate", g.snap.rules.rate.listeners),
                ("gap", g.snap.rules.gap.listeners),
                ("loss", g.snap.rules.loss.listeners),
            ] {
                starved.push((
                    vec![("group", g.name.clone()), ("rule", rule.to_owned())],
                    f64::from(c),
                ));
            }
        }
        counter(
            &mut e,
            "throng_bench_starved_listeners",
            "Listeners starved at least once, by rule.",
            &starved,
        )?;
        counter(
            &mut e,
            "throng_bench_corrupt_listeners",
            "Listeners whose frames, pages or blocks did not chain at least once.",
            &by_group(|s| f64::from(s.rules.corrupt.listeners)),
        )?;
        counter(
            &mut e,
            "throng_bench_failed_listeners",
            "Listeners with at least one failed connection.",
            &by_group(|s| f64::from(s.failed_listeners)),
        )?;
        counter(
            &mut e,
            "throng_bench_connections",
            "Connection attempts.",
            &by_group(|s| s.connects as f64),
        )?;
        let mut fails = Vec::new();
        for g in &st.groups {
            for (reason, n) in &g.snap.failures {
                fails.push((
                    vec![("group", g.name.clone()), ("reason", reason.clone())],
                    *n as f64,
                ));
            }
        }
        counter(
            &mut e,
            "throng_bench_connection_failures",
            "Failed connections by reason.",
            &fails,
        )?;
        counter(
            &mut e,
            "throng_bench_media_seconds",
            "Media time delivered to the listeners (frames times their duration).",
            &by_group(|s| s.media_us as f64 / 1e6),
        )?;
        counter(
            &mut e,
            "throng_bench_listening_seconds",
            "Wall time the listeners spent streaming.",
            &by_group(|s| s.listen_us as f64 / 1e6),
        )?;
        counter(
            &mut e,
            "throng_bench_received_bytes",
            "Body bytes received.",
            &by_group(|s| s.bytes as f64),
        )?;
        histogram(
            &mut e,
            "throng_bench_ttfb_seconds",
            "Time to first audio byte.",
            &st.groups,
            |h| &h.ttfb,
        )?;
        histogram(
            &mut e,
            "throng_bench_gap_seconds",
            "Gaps between arrivals of media.",
            &st.groups,
            |h| &h.gap,
        )?;
        histogram(
            &mut e,
            "throng_bench_mouth_to_ear_seconds",
            "Mouth-to-ear latency, source write to receipt.",
            &st.groups,
            |h| &h.m2e,
        )?;
        histogram(
            &mut e,
            "throng_bench_event_latency_seconds",
            "Event-stream delivery latency, title change to receipt.",
            &st.groups,
            |h| &h.event_latency,
        )?;
        let th: Vec<(Vec<(&str, String)>, f64)> = st
            .thresholds
            .iter()
            .map(|(n, ok)| (vec![("threshold", n.clone())], if *ok { 1.0 } else { 0.0 }))
            .collect();
        gauge(
            &mut e,
            "throng_bench_threshold_pass",
            "Whether each threshold holds now (1) or fails (0).",
            &th,
        )?;
        if let Some(c) = st.server_cpu_cores {
            gauge(
                &mut e,
                "throng_bench_server_cpu_cores",
                "The sampled server's CPU (user + system), in cores.",
                &[(vec![], c)],
            )?;
        }
        if let Some(r) = st.server_rss_bytes {
            gauge(
                &mut e,
                "throng_bench_server_resident_memory_bytes",
                "The sampled server's resident memory.",
                &[(vec![], r as f64)],
            )?;
        }
        counter(
            &mut e,
            "throng_bench_cpu_seconds",
            "The bench's own CPU (its engines).",
            &[(vec![], st.bench_cpu_s)],
        )?;
        gauge(
            &mut e,
            "throng_bench_elapsed_seconds",
            "Seconds since the run's start.",
            &[(vec![], f64::from(st.elapsed_s))],
        )?;
        gauge(
            &mut e,
            "throng_bench_stage",
            "The run's stage (1-based).",
            &[(vec![], st.stage as f64)],
        )?;
        let agents: Vec<(Vec<(&str, String)>, f64)> = st
            .agents
            .iter()
            .map(|a| (vec![("agent", a.name.clone())], f64::from(a.listeners)))
            .collect();
        gauge(
            &mut e,
            "throng_bench_agent_listeners",
            "Listeners each agent holds now.",
            &agents,
        )?;
        let offsets: Vec<(Vec<(&str, String)>, f64)> = st
            .agents
            .iter()
            .map(|a| (vec![("agent", a.name.clone())], a.offset_s))
            .collect();
        gauge(
            &mut e,
            "throng_bench_agent_clock_offset_seconds",
            "Each agent's clock minus the controller's, as estimated (RFC 5905).",
            &offsets,
        )?;
        Ok(())
    }
}

/// The `/metrics` text of `state` (the Prometheus text exposition format).
pub fn render(state: &Arc<Mutex<LiveState>>) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(LiveCollector(state.clone())));
    let mut out = String::new();
    let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
    out
}

/// The `/metrics` server, running.
pub struct MetricsServer {
    /// The address it listens on.
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Serves `state` at `http://ADDR/metrics` on a thread of its own.
    ///
    /// Errors: the address cannot be bound.
    pub fn start(addr: &str, state: Arc<Mutex<LiveState>>) -> std::io::Result<MetricsServer> {
        let std_listener = std::net::TcpListener::bind(addr)?;
        std_listener.set_nonblocking(true)?;
        let bound = std_listener.local_addr()?;
        let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("bench-metrics".into())
            .spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_io()
                    .build()
                else {
                    return;
                };
                rt.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(std_listener) else {
                        return;
                    };
                    loop {
                        tokio::select! {
                            _ = &mut rx => return,
                            accepted = listener.accept() => {
                                let Ok((stream, _)) = accepted else { continue };
                                let state = state.clone();
                                tokio::spawn(async move {
                                    let svc = hyper::service::service_fn(move |req| {
                                        let state = state.clone();
                                        async move { Ok::<_, std::convert::Infallible>(respond(&req, &state)) }
                                    });
                                    let io = hyper_util::rt::TokioIo::new(stream);
                                    let _ = hyper::server::conn::http1::Builder::new()
                                        .serve_connection(io, svc)
                                        .await;
                                });
                            }
                        }
                    }
                });
            })?;
        Ok(MetricsServer {
            addr: bound,
            stop: Some(tx),
            thread: Some(thread),
        })
    }

    /// Stops serving.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn respond(
    req: &hyper::Request<hyper::body::Incoming>,
    state: &Arc<Mutex<LiveState>>,
) -> hyper::Response<http_body_util::Full<bytes::Bytes>> {
    let (status, ctype, body) = if req.uri().path() == "/metrics" {
        (
            200,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            render(state),
        )
    } else {
        (
            404,
            "text/plain",
            "throng bench: the live series are at /metrics\n".into(),
        )
    };
    hyper::Response::builder()
        .status(status)
        .header("content-type", ctype)
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_series_render_in_the_text_format() {
        let mut g = GroupLive {
            name: "icy".into(),
            ..GroupLive::default()
        };
        g.snap.streaming = 7;
        g.snap.media_us = 12_500_000;
        g.snap.failures.insert("http-503".into(), 2);
        g.hists.ttfb.record_us(3000);
        g.hists.ttfb.record_us(700_000);
        let st = Arc::new(Mutex::new(LiveState {
            groups: vec![g],
            thresholds: vec![("ttfb.p99<500ms".into(), false)],
            ..LiveState::default()
        }));
        let text = render(&st);
        assert!(
            text.contains("throng_bench_listeners{group=\"icy\",state=\"streaming\"} 7"),
            "{text}"
        );
        assert!(
            text.contains("throng_bench_media_seconds_total{group=\"icy\"} 12.5"),
            "{text}"
        );
        assert!(
            text.contains(
                "throng_bench_connection_failures_total{group=\"icy\",reason=\"http-503\"} 2"
            ),
            "{text}"
        );
        assert!(
            text.contains("throng_bench_ttfb_seconds_bucket{le=\"0.005\",group=\"icy\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("throng_bench_ttfb_seconds_count{group=\"icy\"} 2"),
            "{text}"
        );
        // Cumulative, as the text format's `le` buckets are: 3 ms in every bucket from 5 ms,
        // 700 ms from 1 s, both in +Inf (never more than the count).
        assert!(
            text.contains("throng_bench_ttfb_seconds_bucket{le=\"0.5\",group=\"icy\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("throng_bench_ttfb_seconds_bucket{le=\"1.0\",group=\"icy\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("throng_bench_ttfb_seconds_bucket{le=\"+Inf\",group=\"icy\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("throng_bench_threshold_pass{threshold=\"ttfb.p99<500ms\"} 0"),
            "{text}"
        );
    }

    #[test]
    fn it_is_served_over_http() {
        let st = Arc::new(Mutex::new(LiveState::default()));
        let srv = MetricsServer::start("127.0.0.1:0", st).unwrap();
        let text = crate::observe::sampler::http_get(
            &format!("http://{}/metrics", srv.addr),
            std::time::Duration::from_secs(5),
        )
        .unwrap();
        assert!(text.contains("throng_bench_elapsed_seconds 0"), "{text}");
        srv.stop();
    }
}
