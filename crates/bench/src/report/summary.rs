//! Aggregation of worker ticks and server samples into a per-second timeline and a summary.
//!
//! Workers tick at the same whole seconds after a common start; the [`Aggregator`] sums their
//! ticks per second (carrying a worker's last cumulative counters forward if one second is
//! missing), attaches the server sample of that second, and derives the run's verdict.

use crate::observe::sampler::ServerSample;
use crate::profile::Profile;
use crate::stats::listener_counts::ListenerCounts;
use crate::stats::{LogHist, Phase, WorkerTick};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// One second of the whole run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Row {
    /// Second index since the start (the row covers `[second, second + 1)`).
    pub second: u32,
    /// `hold` when every worker was holding.
    pub phase: Phase,
    /// Listener states at the end of the second summed over the workers, their traffic during
    /// it and failures so far (in JSON, inline: its fields are top-level fields of the row).
    #[serde(flatten)]
    pub counts: ListenerCounts,
    /// Longest gap between reads seen this second (ms).
    pub max_gap_ms: u32,
    /// TTFB 50th percentile of connections that got their first byte this second (ms).
    pub ttfb_p50_ms: Option<f64>,
    /// CPU used by the bench's listener engines this second (% of one core).
    pub bench_cpu_pct: f64,
    /// Server resource use this second, when sampled.
    pub server: Option<ServerSample>,
}

/// The outcome of a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    /// Listeners asked for (listeners).
    pub listeners: u32,
    /// Stalled listeners among them (listeners).
    pub stalled: u32,
    /// Most listeners streaming at once (listeners).
    pub peak_streaming: u32,
    /// Listeners streaming in the last hold second (listeners).
    pub final_streaming: u32,
    /// Listeners connecting (not yet streaming) in the last hold second (listeners).
    pub final_connecting: u32,
    /// Listeners starved at least once (listeners).
    pub starved: u32,
    /// Failures by reason (connections).
    pub failures: BTreeMap<String, u64>,
    /// All failures (connections).
    pub failures_total: u64,
    /// Connection attempts (connections).
    pub connects: u64,
    /// TLS handshakes completed (`https://` listeners; connections).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tls_handshakes: u64,
    /// Most TLS handshakes completed in one second (handshakes/s).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tls_handshakes_peak_per_s: u64,
    /// TLS handshake time from the connect, 50th percentile (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_handshake_p50_ms: Option<f64>,
    /// TLS handshake time from the connect, 99th percentile (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_handshake_p99_ms: Option<f64>,
    /// TTFB percentiles (ms): 50th, 90th, 99th, max.
    pub ttfb_p50_ms: Option<f64>,
    /// TTFB 90th percentile (ms).
    pub ttfb_p90_ms: Option<f64>,
    /// TTFB 99th percentile (ms).
    pub ttfb_p99_ms: Option<f64>,
    /// Largest TTFB (ms, bucket upper bound).
    pub ttfb_max_ms: Option<f64>,
    /// 99th percentile of each listener's longest gap between reads (ms).
    pub longest_gap_p99_ms: Option<f64>,
    /// Largest gap between reads of any listener (ms, bucket upper bound).
    pub longest_gap_max_ms: Option<f64>,
    /// Delivered over expected bytes during the hold (ratio; 1.0 = exactly the bitrate).
    pub delivered_ratio: Option<f64>,
    /// Mean delivered bandwidth during the hold (Mbit/s).
    pub delivered_mbps: f64,
    /// Bench engine CPU during the hold (% of one core).
    pub bench_cpu_pct: f64,
    /// Bench engine CPU per 1,000 connected listeners during the hold (% of one core).
    pub bench_cpu_pct_per_1000: Option<f64>,
    /// Whole bench (parent and workers) CPU over the run (s).
    pub bench_cpu_total_s: f64,
    /// Server user CPU during the hold (% of one core, mean).
    pub server_cpu_user_pct: Option<f64>,
    /// Server system CPU during the hold (% of one core, mean).
    pub server_cpu_sys_pct: Option<f64>,
    /// Server CPU per 1,000 listeners during the hold (% of one core).
    pub server_cpu_pct_per_1000: Option<f64>,
    /// Largest server RSS (bytes).
    pub server_rss_max: Option<u64>,
    /// Resident memory added per listener: (RSS max − RSS before the first listener) ÷ peak
    /// connected listeners (bytes per listener).
    #[serde(default)]
    pub server_rss_per_listener: Option<f64>,
    /// Largest server fd count (fds).
    pub server_fds_max: Option<u64>,
    /// Largest server thread count (threads).
    pub server_threads_max: Option<u64>,
    /// ICY metadata blocks checked (blocks).
    pub icy_blocks: u64,
    /// Frames decode-checked on sampled listeners (frames).
    pub frames_checked: u64,
    /// Garbage bytes found by the frame check (bytes).
    pub garbage_bytes: u64,
    /// HLS players: requests (playlists and segments) per second over the run (requests/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_s: Option<f64>,
    /// HLS requests the server answered itself per second over the hold, from its metrics URL
    /// (`--metrics-url`): behind a cache, the origin's request rate (requests/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin_requests_per_s: Option<f64>,
    /// HLS body bytes the server sent itself per second over the hold (bytes/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin_bytes_per_s: Option<f64>,
    /// Hold seconds the hold averages are taken over (s).
    pub hold_seconds: u32,
    /// No listener starved, none failed, all non-stalled listeners streaming at the end.
    pub pass: bool,
    /// The criteria of the verdict that were not met, in words (`report::verdict`); empty
    /// for a PASS.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fail_reasons: Vec<String>,
}

/// Everything a run produced (the JSON report).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunReport {
    /// Name of the run (a server's name in a comparison).
    pub name: String,
    /// What the simulated clients were: `icy`, `hls`, `events` or `whep`.
    #[serde(default)]
    pub mode: crate::mode::Mode,
    /// When, where and how the run was made, and the server's `Server` header.
    #[serde(default)]
    pub meta: crate::observe::meta::RunMeta,
    /// Listener URLs.
    pub urls: Vec<String>,
    /// The profile.
    pub profile: Option<Profile>,
    /// Start time (ms since the Unix epoch).
    pub start_unix_ms: u64,
    /// Worker processes (0 = in-process).
    pub workers: u32,
    /// Per-second timeline.
    pub timeline: Vec<Row>,
    /// TTFB of every connection.
    pub ttfb: LogHist,
    /// Each listener's longest gap between reads.
    pub longest_gaps: LogHist,
    /// The outcome.
    pub summary: Summary,
    /// Problems seen (worker errors, source errors).
    pub errors: Vec<String>,
    /// The outcome of an events run (`--events`), absent for listener runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<crate::events::subscriber::EventsSummary>,
    /// The outcome of a WHEP run (`--whep`), absent for other runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whep: Option<crate::whep::WhepSummary>,
    /// ICY runs: the listeners' sessions and listening time per mount, in the audience
    /// ledger's units (compare with `throng report listening`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ground_truth: BTreeMap<String, crate::stats::GroundTruth>,
}

/// Collects ticks and samples during a run.
#[derive(Debug, Default)]
pub struct Aggregator {
    ticks: BTreeMap<u32, Vec<WorkerTick>>,
    samples: BTreeMap<u32, ServerSample>,
    latest: HashMap<u32, WorkerTick>,
    ttfb: LogHist,
    gaps: LogHist,
    handshakes: LogHist,
    handshakes_per_s: BTreeMap<u32, u64>,
    ground_truth: BTreeMap<String, crate::stats::GroundTruth>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Aggregator {
    /// Adds a worker tick.
    pub fn add_tick(&mut self, t: WorkerTick) {
        self.ttfb.merge(&t.ttfb);
        self.handshakes.merge(&t.handshakes);
        if !t.handshakes.is_empty() {
            *self.handshakes_per_s.entry(t.second).or_insert(0) += t.handshakes.count();
        }
        if let Some(g) = &t.longest_gaps {
            self.gaps.merge(g);
        }
        for (mount, g) in &t.ground_truth {
            self.ground_truth.entry(mount.clone()).or_default().add(g);
        }
        self.latest.insert(t.worker, t.clone());
        self.ticks.entry(t.second).or_default().push(t);
    }

    /// The workers' sessions and listening time per mount, summed over their last ticks.
    pub fn ground_truth(&self) -> BTreeMap<String, crate::stats::GroundTruth> {
        self.ground_truth.clone()
    }

    /// Adds a server sample.
    pub fn add_sample(&mut self, s: ServerSample) {
        self.samples.insert(s.second, s);
    }

    /// Live totals over the latest tick of every worker (for the progress display and the
    /// early stop): listener states and the failures so far.
    pub fn live(&self) -> Row {
        let mut r = Row::default();
        for t in self.latest.values() {
            r.counts.add_states(&t.counts);
            r.counts.add_failures(&t.counts);
        }
        r.server = self.samples.values().next_back().cloned();
        r
    }

    /// Builds the timeline and summary.
    pub fn finish(&self, profile: &Profile, workers: u32) -> (Vec<Row>, Summary, LogHist, LogHist) {
        let nworkers = self.latest.len().max(1);
        let mut rows = Vec::new();
        let mut last: HashMap<u32, WorkerTick> = HashMap::new();
        let mut prev_cpu: HashMap<u32, u64> = HashMap::new();
        for (&second, ticks) in &self.ticks {
            let mut r = Row {
                second,
                phase: Phase::Hold,
                ..Row::default()
            };
            let mut ttfb = LogHist::default();
            for t in ticks {
                if t.phase == Phase::Done {
                    continue;
                }
                r.counts.add_traffic(&t.counts);
                r.max_gap_ms = r.max_gap_ms.max(t.max_gap_ms);
                ttfb.merge(&t.ttfb);
                if t.phase == Phase::Ramp {
                    r.phase = Phase::Ramp;
                }
                let cpu = t.cpu_user_us + t.cpu_sys_us;
                let before = prev_cpu.insert(t.worker, cpu).unwrap_or(0);
                r.bench_cpu_pct += cpu.saturating_sub(before) as f64 / 1e4;
                last.insert(t.worker, t.clone());
            }
            if ticks.iter().all(|t| t.phase == Phase::Done) {
                continue;
            }
            if last.len() < nworkers {
                r.phase = Phase::Ramp;
            }
            for t in last.values() {
                r.counts.add_states(&t.counts);
                r.counts.add_failures(&t.counts);
            }
            r.ttfb_p50_ms = ttfb.quantile_ms(0.5);
            r.server = self.samples.get(&second).cloned();
            rows.push(r);
        }
        let summary = self.summarize(profile, workers, &rows);
        (rows, summary, self.ttfb.clone(), self.gaps.clone())
    }

    fn summarize(&self, profile: &Profile, _workers: u32, rows: &[Row]) -> Summary {
        let mut s = Summary {
            listeners: profile.listeners,
            ..Summary::default()
        };
        for t in self.latest.values() {
            s.starved += t.counts.starved_total;
            for (k, v) in &t.counts.failures_total {
                *s.failures.entry(k.clone()).or_insert(0) += v;
            }
            s.icy_blocks += t.icy_blocks_total;
            s.frames_checked += t.frames_total;
            s.garbage_bytes += t.garbage_bytes_total;
            s.bench_cpu_total_s += (t.cpu_user_us + t.cpu_sys_us) as f64 / 1e6;
        }
        s.failures_total = s.failures.values().sum();
        let requests: u64 = self.latest.values().map(|t| t.requests_total).sum();
        s.requests_per_s =
            (requests > 0 && !rows.is_empty()).then(|| requests as f64 / rows.len() as f64);
        s.connects = self
            .ticks
            .values()
            .flatten()
            .map(|t| t.counts.connects as u64)
            .sum();
        s.stalled = (0..profile.listeners)
            .filter(|&i| crate::profile::is_stalled(i, profile.effective_stalled_fraction()))
            .count() as u32;
        s.peak_streaming = rows.iter().map(|r| r.counts.streaming).max().unwrap_or(0);
        s.tls_handshakes = self.handshakes.count();
        s.tls_handshakes_peak_per_s = self.handshakes_per_s.values().copied().max().unwrap_or(0);
        s.tls_handshake_p50_ms = self.handshakes.quantile_ms(0.5);
        s.tls_handshake_p99_ms = self.handshakes.quantile_ms(0.99);
        s.ttfb_p50_ms = self.ttfb.quantile_ms(0.5);
        s.ttfb_p90_ms = self.ttfb.quantile_ms(0.9);
        s.ttfb_p99_ms = self.ttfb.quantile_ms(0.99);
        s.ttfb_max_ms = self.ttfb.quantile_ms(1.0);
        s.longest_gap_p99_ms = self.gaps.quantile_ms(0.99);
        s.longest_gap_max_ms = self.gaps.quantile_ms(1.0);
        // Hold averages skip the first two hold seconds (bursts and late connects settle).
        let hold: Vec<&Row> = rows
            .iter()
            .filter(|r| r.phase == Phase::Hold)
            .skip(2)
            .collect();
        if let Some(last) = rows.iter().rev().find(|r| r.phase == Phase::Hold) {
            s.final_streaming = last.counts.streaming;
            s.final_connecting = last.counts.connecting;
        }
        s.hold_seconds = hold.len() as u32;
        if !hold.is_empty() {
            let n = hold.len() as f64;
            let bytes: u64 = hold.iter().map(|r| r.counts.bytes).sum();
            let expected: u64 = hold.iter().map(|r| r.counts.expected_bytes).sum();
            s.delivered_ratio = (expected > 0).then(|| bytes as f64 / expected as f64);
            s.delivered_mbps = bytes as f64 * 8.0 / n / 1e6;
            s.bench_cpu_pct = hold.iter().map(|r| r.bench_cpu_pct).sum::<f64>() / n;
            let conn = hold
                .iter()
                .map(|r| r.counts.connected() as f64)
                .sum::<f64>()
                / n;
            if conn > 0.0 {
                s.bench_cpu_pct_per_1000 = Some(s.bench_cpu_pct / (conn / 1000.0));
            }
            let srv: Vec<&ServerSample> = hold.iter().filter_map(|r| r.server.as_ref()).collect();
            if !srv.is_empty() {
                let m = srv.len() as f64;
                let u = srv.iter().map(|x| x.cpu_user_pct).sum::<f64>() / m;
                let y = srv.iter().map(|x| x.cpu_sys_pct).sum::<f64>() / m;
                s.server_cpu_user_pct = Some(u);
                s.server_cpu_sys_pct = Some(y);
                let mean =
                    |v: Vec<f64>| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
                s.origin_requests_per_s =
                    mean(srv.iter().filter_map(|x| x.hls_requests_per_s).collect());
                s.origin_bytes_per_s = mean(srv.iter().filter_map(|x| x.hls_bytes_per_s).collect());
                if conn > 0.0 {
                    s.server_cpu_pct_per_1000 = Some((u + y) / (conn / 1000.0));
                }
            }
        }
        let all: Vec<&ServerSample> = self.samples.values().collect();
        if !all.is_empty() {
            s.server_rss_max = all.iter().map(|x| x.rss_bytes).max();
            let baseline = all.iter().map(|x| x.rss_baseline_bytes).find(|&b| b > 0);
            let peak = rows.iter().map(|r| r.counts.connected()).max().unwrap_or(0);
            if let (Some(max), Some(base)) = (s.server_rss_max, baseline) {
                s.server_rss_per_listener =
                    (peak > 0).then(|| max.saturating_sub(base) as f64 / peak as f64);
            }
            s.server_fds_max = all.iter().map(|x| x.fds).max();
            s.server_threads_max = all.iter().map(|x| x.threads).max();
        }
        s.fail_reasons = listener_reasons(&s);
        s.pass = s.fail_reasons.is_empty();
        s
    }
}

/// The criteria an ICY or HLS run's summary fails (empty when it passes them): no listener
/// starved, no connection failed, every non-stalled listener streaming (or still connecting)
/// at the end.
pub fn listener_reasons(s: &Summary) -> Vec<String> {
    let mut r = Vec::new();
    if s.starved > 0 {
        r.push(format!(
            "{} of {} listeners starved (less than the minimum share of the bitrate, or a gap over the maximum)",
            s.starved, s.listeners
        ));
    }
    if s.failures_total > 0 {
        r.push(format!(
            "{} connections failed ({} listeners asked for): {}",
            s.failures_total,
            s.listeners,
            crate::stats::first_kinds(&s.failures)
        ));
    }
    let up = s.final_streaming + s.final_connecting + s.stalled;
    if up < s.listeners {
        r.push(format!(
            "{} of {} listeners streaming at the end ({} connecting, {} stalled on purpose)",
            s.final_streaming, s.listeners, s.final_connecting, s.stalled
        ));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tick(worker: u32, second: u32, phase: Phase, streaming: u32, cpu_ms: u64) -> WorkerTick {
        WorkerTick {
            worker,
            second,
            phase,
            counts: ListenerCounts {
                streaming,
                started: streaming,
                bytes: streaming as u64 * 8000,
                expected_bytes: streaming as u64 * 8000,
                ..ListenerCounts::default()
            },
            cpu_user_us: cpu_ms * 1000,
            ..WorkerTick::default()
        }
    }

    #[test]
    fn row_json_keeps_the_counters_inline() {
        let json = serde_json::to_string(&Row::default()).unwrap();
        assert_eq!(
            json,
            r#"{"second":0,"phase":"ramp","started":0,"connecting":0,"streaming":0,"stalled":0,"#
                .to_owned()
                + r#""starved":0,"starved_total":0,"failed":0,"connects":0,"bytes":0,"#
                + r#""expected_bytes":0,"burst_bytes":0,"burst_expected_bytes":0,"failures_total":{},"max_gap_ms":0,"ttfb_p50_ms":null,"#
                + r#""bench_cpu_pct":0.0,"server":null}"#
        );
        assert_eq!(serde_json::from_str::<Row>(&json).unwrap(), Row::default());
    }

    #[test]
    fn sums_workers_and_judges() {
        let p = Profile {
            listeners: 2000,
            ..Profile::default()
        };
        let mut a = Aggregator::default();
        for s in 0..8 {
            let ph = if s < 2 { Phase::Ramp } else { Phase::Hold };
            a.add_tick(tick(0, s, ph, 1000, 10 * s as u64));
            a.add_tick(tick(1, s, ph, 1000, 10 * s as u64));
        }
        let (rows, sum, _, _) = a.finish(&p, 2);
        assert_eq!(rows.len(), 8);
        assert_eq!(rows[5].counts.streaming, 2000);
        assert!((rows[5].bench_cpu_pct - 2.0).abs() < 1e-9);
        assert_eq!(sum.delivered_ratio, Some(1.0));
        assert!((sum.bench_cpu_pct_per_1000.unwrap() - 1.0).abs() < 1e-9);
        assert!(sum.pass);

        let mut a = Aggregator::default();
        let mut t = tick(0, 3, Phase::Hold, 1000, 0);
        t.counts.starved_total = 3;
        a.add_tick(t);
        let (_, sum, _, _) = a.finish(&p, 1);
        assert_eq!(sum.starved, 3);
        assert!(!sum.pass);
    }

    #[test]
    fn listener_reasons_name_the_criterion_and_the_count() {
        let mut s = Summary {
            listeners: 100,
            final_streaming: 100,
            ..Summary::default()
        };
        assert!(listener_reasons(&s).is_empty());
        s.starved = 4;
        s.failures_total = 150;
        s.failures.insert("http-404".into(), 150);
        s.final_streaming = 0;
        let r = listener_reasons(&s);
        assert_eq!(r.len(), 3, "{r:?}");
        assert!(r[0].starts_with("4 of 100 listeners starved"), "{r:?}");
        assert!(r[1].ends_with("http-404 ×150"), "{r:?}");
        assert!(r[2].starts_with("0 of 100 listeners streaming"), "{r:?}");
    }
}
