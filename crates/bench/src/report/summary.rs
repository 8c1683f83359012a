//! From merged seconds to a report: the per-second timeline, each group's summary and the
//! run's, with their exact histograms.
//!
//! The [`Aggregator`] takes every [`MergedSecond`] (the run's groups, merged over engines and
//! hosts) and every server sample, keeps the timeline rows (states at the end of the second,
//! that second's own traffic, its TTFB percentiles) and the histograms' running merge, and at
//! the end builds each group's [`Summary`] and the run's: totals from the last second, the
//! listeners up at the end from the last second the stages wanted any, hold averages (CPU,
//! bandwidth) over the seconds whose target holds, past the first two of each hold.

use crate::mode::Mode;
use crate::observe::sampler::ServerSample;
use crate::profile::stages::Schedule;
use crate::profile::Profile;
pub use crate::report::figures::{Hists, Summary};
use crate::report::threshold::Outcome;
use crate::stats::merge::MergedSecond;
use crate::stats::{GroundTruth, Hist, HistSummary, Snapshot};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Run phase a second belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// A stage is ramping the listeners (up or down).
    #[default]
    Ramp,
    /// The target holds over the whole second.
    Hold,
}

/// One group in one second of the timeline.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct GroupRow {
    /// Listeners the stages want (listeners).
    pub want: u32,
    /// Connecting (listeners).
    pub connecting: u32,
    /// Streaming (listeners).
    pub streaming: u32,
    /// Stalled on purpose (listeners).
    pub stalled: u32,
    /// Starved now (listeners).
    pub starved: u32,
    /// Down after a failure (listeners).
    pub down: u32,
    /// Listeners starved at least once so far (listeners).
    pub starved_total: u32,
    /// Listeners corrupt at least once so far (listeners).
    pub corrupt_total: u32,
    /// Failed connections so far (connections).
    pub failures_total: u64,
    /// Connection attempts this second (connections).
    pub connects: u64,
    /// Body bytes this second (bytes).
    pub bytes: u64,
    /// Media time delivered this second (µs).
    pub media_us: u64,
    /// Steady media over steady listening this second (1 = real time; `None`: nobody past
    /// their connect burst).
    pub media_rate: Option<f64>,
    /// TTFB median of the connections whose first byte came this second (ms).
    pub ttfb_p50_ms: Option<f64>,
    /// TTFB 99th percentile of those (ms).
    pub ttfb_p99_ms: Option<f64>,
    /// Longest gap between arrivals ending this second (ms).
    pub gap_max_ms: Option<f64>,
    /// The group's engines' CPU this second (% of one core).
    pub bench_cpu_pct: f64,
}

impl GroupRow {
    /// Listeners holding a connection: streaming + stalled (listeners).
    pub fn connected(&self) -> u32 {
        self.streaming + self.stalled
    }
}

/// One second of the run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Row {
    /// Second index since the start (the row covers `[second, second + 1)`).
    pub second: u32,
    /// `hold` when the target of every group holds over the second.
    pub phase: Phase,
    /// The run's stage (0-based).
    pub stage: usize,
    /// The run's total (in JSON, inline: its fields are top-level fields of the row).
    #[serde(flatten)]
    pub total: GroupRow,
    /// Each group's (in the plan's order), when the run has more than one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupRow>,
    /// Server resource use this second, when sampled.
    pub server: Option<ServerSample>,
}

/// One group of a run as reported.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GroupReport {
    /// The group's name.
    pub name: String,
    /// Its mode.
    pub mode: Mode,
    /// Its URLs.
    pub urls: Vec<String>,
    /// Its stages.
    pub stages: Schedule,
    /// Its outcome.
    pub summary: Summary,
    /// Its histograms.
    pub hists: Hists,
}

/// A lost host of a run over several machines (an agent killed or cut off).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Lost {
    /// The host (agent) name.
    pub host: String,
    /// The second it was lost at.
    pub second: u32,
    /// Listeners it held then, no longer accounted for (listeners).
    pub listeners: u32,
}

/// Everything a run produced (the JSON report).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunReport {
    /// Name of the run (a server's name in a comparison).
    pub name: String,
    /// The mode of the run's first group (`icy`, `hls`, `events` or `whep`).
    #[serde(default)]
    pub mode: Mode,
    /// When, where and how the run was made, and the server's `Server` header.
    #[serde(default)]
    pub meta: crate::observe::meta::RunMeta,
    /// Every group's URLs.
    pub urls: Vec<String>,
    /// The flags' profile, for a run from flags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
    /// The scenario file, for a run from one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<String>,
    /// Start time (ms since the Unix epoch, the run's clock).
    pub start_unix_ms: u64,
    /// Worker processes (0 = in-process engines only).
    pub workers: u32,
    /// The verdict in one sentence (`PASS: 3,000 of 3,000 listeners got ≥ 80 % of real time,
    /// p99 TTFB 0.8 ms`).
    #[serde(default)]
    pub verdict: String,
    /// The thresholds, judged.
    #[serde(default)]
    pub thresholds: Vec<Outcome>,
    /// The run's outcome, all groups together.
    pub summary: Summary,
    /// Each group's.
    #[serde(default)]
    pub groups: Vec<GroupReport>,
    /// The run's histograms, all groups together.
    #[serde(default)]
    pub hists: Hists,
    /// Per-second timeline.
    pub timeline: Vec<Row>,
    /// Things worth knowing that are no failure (a given bitrate the stream contradicts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Problems seen (worker errors, source errors, a threshold aborting the run).
    pub errors: Vec<String>,
    /// Hosts lost during the run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost: Vec<Lost>,
    /// Each agent's part, for a run over several machines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<serde_json::Value>,
    /// The CPU of the bench's own process over the run (s): the controller's, in a run over
    /// agents (its cost merging their summaries); the in-process engines' too otherwise.
    #[serde(default)]
    pub process_cpu_s: f64,
    /// The event-stream figures of the run's events groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<crate::events::subscriber::EventsSummary>,
    /// The WebRTC figures of the run's WHEP groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whep: Option<crate::whep::WhepSummary>,
    /// The listeners' sessions and listening time per mount, in the audience ledger's units
    /// (compare with `throng report listening`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ground_truth: BTreeMap<String, GroundTruth>,
}

impl RunReport {
    /// The summary and histograms of group `name`, or of the whole run for `None`.
    pub fn figures(&self, group: Option<&str>) -> Option<(&Summary, &Hists)> {
        match group {
            None => Some((&self.summary, &self.hists)),
            Some(g) => self
                .groups
                .iter()
                .find(|x| x.name == g)
                .map(|x| (&x.summary, &x.hists)),
        }
    }
}

/// A group as the aggregator needs to know it.
#[derive(Debug, Clone, Default)]
pub struct GroupInfo {
    /// Name.
    pub name: String,
    /// Mode.
    pub mode: Mode,
    /// URLs.
    pub urls: Vec<String>,
    /// Stages.
    pub schedule: Schedule,
}

/// Collects merged seconds and server samples during a run (see the module comment).
#[derive(Debug, Default)]
pub struct Aggregator {
    groups: Vec<GroupInfo>,
    /// Each group's latest merged snapshot (its totals).
    last: Vec<Snapshot>,
    /// Each group's histograms so far.
    hists: Vec<Hists>,
    /// Each group's states in the last second the stages wanted any listener of it.
    at_end: Vec<Snapshot>,
    /// Each group's most stalled listeners at once.
    stalled_peak: Vec<u32>,
    /// Each group's most bytes held by stalled listeners.
    held_peak: Vec<u64>,
    /// The run's stages (for a row's stage).
    run_schedule: Schedule,
    rows: Vec<Row>,
    samples: BTreeMap<u32, ServerSample>,
}

/// Steady media over steady listening (`None` without any).
fn ratio(media_us: u64, listen_us: u64) -> Option<f64> {
    (listen_us > 0).then(|| media_us as f64 / listen_us as f64)
}

/// A group's row from its snapshot `s` of a second and its snapshot `p` of the second before.
fn group_row(s: &Snapshot, p: &Snapshot) -> GroupRow {
    GroupRow {
        want: s.want,
        connecting: s.connecting,
        streaming: s.streaming,
        stalled: s.stalled,
        starved: s.starved,
        down: s.down,
        starved_total: s.starved_listeners,
        corrupt_total: s.rules.corrupt.listeners,
        failures_total: s.failures_total(),
        connects: s.connects.saturating_sub(p.connects),
        bytes: s.bytes.saturating_sub(p.bytes),
        media_us: s.media_us.saturating_sub(p.media_us),
        media_rate: ratio(
            s.steady_media_us.saturating_sub(p.steady_media_us),
            s.steady_listen_us.saturating_sub(p.steady_listen_us),
        ),
        ttfb_p50_ms: s.ttfb.quantile_ms(0.5),
        ttfb_p99_ms: s.ttfb.quantile_ms(0.99),
        gap_max_ms: s.gap.max_ms(),
        bench_cpu_pct: s.cpu_us.saturating_sub(p.cpu_us) as f64 / 1e4,
    }
}

impl Aggregator {
    /// An aggregator for `groups` and the run's stages.
    pub fn new(groups: Vec<GroupInfo>, run_schedule: Schedule) -> Aggregator {
        let n = groups.len();
        Aggregator {
            groups,
            last: vec![Snapshot::default(); n],
            hists: vec![Hists::default(); n],
            at_end: vec![Snapshot::default(); n],
            stalled_peak: vec![0; n],
            held_peak: vec![0; n],
            run_schedule,
            rows: Vec::new(),
            samples: BTreeMap::new(),
        }
    }

    /// Adds a merged second.
    pub fn add_second(&mut self, m: &MergedSecond) {
        let mut row = Row {
            second: m.second,
            stage: self.run_schedule.stage_at(f64::from(m.second)),
            ..Row::default()
        };
        let mut hold = true;
        let mut total_now = Snapshot::default();
        let mut total_prev = Snapshot::default();
        for (g, snap) in m.groups.iter().enumerate() {
            let Some(info) = self.groups.get(g) else {
                continue;
            };
            hold &= info.schedule.is_hold_second(m.second)
                || info.schedule.target_at(f64::from(m.second)) == 0.0
                    && info.schedule.target_at(f64::from(m.second) + 1.0) == 0.0;
            let prev = &self.last[g];
            let gr = group_row(snap, prev);
            total_now.merge(snap);
            total_prev.merge_counts(prev);
            row.groups.push(gr);
            self.hists[g].add_snapshot(snap);
            if snap.want > 0 {
                self.at_end[g] = snap.clone();
                self.at_end[g].clear_hists();
            }
            self.stalled_peak[g] = self.stalled_peak[g].max(snap.stalled);
            self.held_peak[g] = self.held_peak[g].max(snap.stalled_held_bytes);
            let mut totals = snap.clone();
            totals.clear_hists();
            self.last[g] = totals;
        }
        row.phase = if hold && total_now.want > 0 {
            Phase::Hold
        } else {
            Phase::Ramp
        };
        row.total = group_row(&total_now, &total_prev);
        if row.groups.len() < 2 {
            row.groups.clear();
        }
        row.server = self.samples.get(&m.second).cloned();
        self.rows.push(row);
    }

    /// Adds a server sample (attached to its second's row, now or when that row comes).
    pub fn add_sample(&mut self, s: ServerSample) {
        if let Some(r) = self.rows.iter_mut().rev().find(|r| r.second == s.second) {
            r.server = Some(s.clone());
        }
        self.samples.insert(s.second, s);
    }

    /// The rows so far.
    pub fn rows(&self) -> &[Row] {
        &self.rows
    }

    /// Each group's latest totals.
    pub fn latest(&self) -> &[Snapshot] {
        &self.last
    }

    /// The latest server sample.
    pub fn latest_sample(&self) -> Option<&ServerSample> {
        self.samples.values().next_back()
    }

    /// Each group's and the run's figures so far: summaries and histograms (for live
    /// thresholds and metrics). `extra_cpu_us`: CPU of the bench outside its engines.
    pub fn figures(&self, extra_cpu_us: u64) -> (Vec<(Summary, Hists)>, (Summary, Hists)) {
        let groups: Vec<(Summary, Hists)> = (0..self.groups.len())
            .map(|g| {
                let rows: Vec<(u32, Phase, GroupRow)> = self
                    .rows
                    .iter()
                    .map(|r| {
                        let gr = if r.groups.is_empty() {
                            r.total.clone()
                        } else {
                            r.groups[g].clone()
                        };
                        (r.second, r.phase, gr)
                    })
                    .collect();
                let s = self.summarize(
                    &self.last[g],
                    &self.at_end[g],
                    self.stalled_peak[g],
                    self.held_peak[g],
                    &self.hists[g],
                    &rows,
                    false,
                    0,
                );
                (s, self.hists[g].clone())
            })
            .collect();
        let mut last = Snapshot::default();
        let mut at_end = Snapshot::default();
        let mut hists = Hists::default();
        for g in 0..self.groups.len() {
            last.merge_counts(&self.last[g]);
            at_end.merge_counts(&self.at_end[g]);
            hists.merge(&self.hists[g]);
        }
        let rows: Vec<(u32, Phase, GroupRow)> = self
            .rows
            .iter()
            .map(|r| (r.second, r.phase, r.total.clone()))
            .collect();
        let total = self.summarize(
            &last,
            &at_end,
            self.stalled_peak.iter().sum(),
            self.held_peak.iter().sum(),
            &hists,
            &rows,
            true,
            extra_cpu_us,
        );
        (groups, (total, hists))
    }

    #[allow(clippy::too_many_arguments)]
    fn summarize(
        &self,
        last: &Snapshot,
        at_end: &Snapshot,
        stalled_peak: u32,
        held_peak: u64,
        h: &Hists,
        rows: &[(u32, Phase, GroupRow)],
        with_server: bool,
        extra_cpu_us: u64,
    ) -> Summary {
        let mut s = Summary {
            listeners: rows.iter().map(|r| r.2.want).max().unwrap_or(0),
            started: last.started,
            stalled: stalled_peak,
            peak_streaming: rows.iter().map(|r| r.2.streaming).max().unwrap_or(0),
            final_streaming: at_end.streaming,
            final_connecting: at_end.connecting,
            want_at_end: at_end.want,
            down_at_end: at_end
                .want
                .saturating_sub(at_end.streaming + at_end.connecting + at_end.stalled)
                .saturating_sub(last.stalled_dropped),
            starved: last.starved_listeners,
            starved_rate: last.rules.rate.listeners,
            starved_gap: last.rules.gap.listeners,
            starved_loss: last.rules.loss.listeners,
            corrupt: last.rules.corrupt.listeners,
            failed_listeners: last.failed_listeners,
            troubled: last.troubled_listeners,
            rules: last.rules,
            failures: last.failures.clone(),
            failures_total: last.failures_total(),
            connects: last.connects,
            media_seconds: last.media_us as f64 / 1e6,
            listening_seconds: last.listen_us as f64 / 1e6,
            media_rate: ratio(last.steady_media_us, last.steady_listen_us),
            bitrate_kbps_measured: (last.media_us > 0 && last.bytes > 0)
                .then(|| last.bytes as f64 * 8.0 / (last.media_us as f64 / 1e6) / 1000.0),
            tls_handshakes: h.handshake.count(),
            tls_handshake_p50_ms: h.handshake.quantile_ms(0.5),
            tls_handshake_p99_ms: h.handshake.quantile_ms(0.99),
            ttfb_p50_ms: h.ttfb.quantile_ms(0.5),
            ttfb_p90_ms: h.ttfb.quantile_ms(0.9),
            ttfb_p99_ms: h.ttfb.quantile_ms(0.99),
            ttfb_max_ms: h.ttfb.max_ms(),
            gap_p99_ms: h.gap.quantile_ms(0.99),
            longest_gap_p99_ms: h.longest_gap.quantile_ms(0.99),
            longest_gap_max_ms: h.longest_gap.max_ms(),
            m2e_p50_ms: h.m2e.quantile_ms(0.5),
            m2e_p99_ms: h.m2e.quantile_ms(0.99),
            m2e_max_ms: h.m2e.max_ms(),
            event_latency_p50_ms: h.event_latency.quantile_ms(0.5),
            event_latency_p99_ms: h.event_latency.quantile_ms(0.99),
            event_latency_max_ms: h.event_latency.max_ms(),
            bench_cpu_total_s: (last.cpu_us + extra_cpu_us) as f64 / 1e6,
            icy_blocks: last.icy_blocks,
            frames_checked: last.units,
            garbage_bytes: last.garbage_bytes,
            unverified: u64::from(last.unverified),
            receipts: last.receipts,
            units: last.units,
            stalled_dropped: last.stalled_dropped,
            stalled_drop_p50_ms: h.stalled_drop.quantile_ms(0.5),
            stalled_drop_max_ms: h.stalled_drop.max_ms(),
            stalled_held_bytes_max: held_peak,
            extra: last.extra.clone(),
            ..Summary::default()
        };
        s.delivered_ratio = s.media_rate;
        let any_events = self.groups.iter().any(|g| g.mode == Mode::Events);
        let any_whep = self.groups.iter().any(|g| g.mode == Mode::Whep);
        if any_events && !any_whep {
            s.missed = last.lost_units;
        } else {
            s.lost_units = last.lost_units;
        }
        if last.requests > 0 && !rows.is_empty() {
            s.requests_per_s = Some(last.requests as f64 / rows.len() as f64);
        }
        // Hold averages skip the first two seconds of each hold (bursts and late connects).
        let mut hold: Vec<&(u32, Phase, GroupRow)> = Vec::new();
        let mut run = 0;
        for r in rows {
            if r.1 == Phase::Hold {
                run += 1;
                if run > 2 {
                    hold.push(r);
                }
            } else {
                run = 0;
            }
        }
        s.hold_seconds = hold.len() as u32;
        if !hold.is_empty() {
            let n = hold.len() as f64;
            let bytes: u64 = hold.iter().map(|r| r.2.bytes).sum();
            s.delivered_mbps = bytes as f64 * 8.0 / n / 1e6;
            s.bench_cpu_pct = hold.iter().map(|r| r.2.bench_cpu_pct).sum::<f64>() / n;
            let conn = hold.iter().map(|r| f64::from(r.2.connected())).sum::<f64>() / n;
            if conn > 0.0 {
                s.bench_cpu_pct_per_1000 = Some(s.bench_cpu_pct / (conn / 1000.0));
                s.bench_cpu_us_per_listener_second = Some(s.bench_cpu_pct * 1e4 / conn);
            }
            if with_server {
                let srv: Vec<&ServerSample> =
                    hold.iter().filter_map(|r| self.samples.get(&r.0)).collect();
                if !srv.is_empty() {
                    let m = srv.len() as f64;
                    let u = srv.iter().map(|x| x.cpu_user_pct).sum::<f64>() / m;
                    let y = srv.iter().map(|x| x.cpu_sys_pct).sum::<f64>() / m;
                    s.server_cpu_user_pct = Some(u);
                    s.server_cpu_sys_pct = Some(y);
                    let mean = |v: Vec<f64>| {
                        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
                    };
                    s.origin_requests_per_s =
                        mean(srv.iter().filter_map(|x| x.hls_requests_per_s).collect());
                    s.origin_bytes_per_s =
                        mean(srv.iter().filter_map(|x| x.hls_bytes_per_s).collect());
                    if conn > 0.0 {
                        s.server_cpu_pct_per_1000 = Some((u + y) / (conn / 1000.0));
                        s.server_cpu_us_per_listener_second = Some((u + y) * 1e4 / conn);
                    }
                }
            }
        }
        if with_server {
            let all: Vec<&ServerSample> = self.samples.values().collect();
            if !all.is_empty() {
                s.server_rss_max = all.iter().map(|x| x.rss_bytes).max();
                let baseline = all.iter().map(|x| x.rss_baseline_bytes).find(|&b| b > 0);
                let peak = rows.iter().map(|r| r.2.connected()).max().unwrap_or(0);
                if let (Some(max), Some(base)) = (s.server_rss_max, baseline) {
                    s.server_rss_per_listener =
                        (peak > 0).then(|| max.saturating_sub(base) as f64 / f64::from(peak));
                }
                s.server_fds_max = all.iter().map(|x| x.fds).max();
                s.server_threads_max = all.iter().map(|x| x.threads).max();
            }
        }
        s
    }

    /// The report's parts at the end: the timeline, each group's report, the run's summary
    /// and histograms, the sessions per mount. `extra_cpu_us`: CPU of the bench outside its
    /// engines (the parent process, a controller).
    pub fn finish(
        &self,
        extra_cpu_us: u64,
    ) -> (
        Vec<Row>,
        Vec<GroupReport>,
        Summary,
        Hists,
        BTreeMap<String, GroundTruth>,
    ) {
        let (groups, (total, hists)) = self.figures(extra_cpu_us);
        let reports = groups
            .into_iter()
            .zip(&self.groups)
            .map(|((summary, hists), info)| GroupReport {
                name: info.name.clone(),
                mode: info.mode,
                urls: info.urls.clone(),
                stages: info.schedule.clone(),
                summary,
                hists,
            })
            .collect();
        let mut gt: BTreeMap<String, GroundTruth> = BTreeMap::new();
        for s in &self.last {
            for (k, g) in &s.ground_truth {
                gt.entry(k.clone()).or_default().add(g);
            }
        }
        (self.rows.clone(), reports, total, hists, gt)
    }
}

/// Figures of one histogram for a report table.
pub fn hist_summary(h: &Hist) -> HistSummary {
    HistSummary::of(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::stages::Stage;
    use crate::profile::Secs;

    fn snap(want: u32, streaming: u32, media_s: u64, cpu_ms: u64) -> Snapshot {
        Snapshot {
            want,
            streaming,
            started: want,
            media_us: media_s * 1_000_000,
            steady_media_us: media_s * 1_000_000,
            steady_listen_us: media_s * 1_000_000,
            listen_us: media_s * 1_000_000,
            bytes: media_s * 8000,
            cpu_us: cpu_ms * 1000,
            ..Snapshot::default()
        }
    }

    #[test]
    fn seconds_become_rows_and_a_summary() {
        let schedule = Schedule {
            stages: vec![
                Stage {
                    target: 2000,
                    duration: Secs(2.0),
                },
                Stage {
                    target: 2000,
                    duration: Secs(6.0),
                },
            ],
        };
        let info = GroupInfo {
            name: "icy".into(),
            mode: Mode::Icy,
            urls: vec!["http://h/x.mp3".into()],
            schedule: schedule.clone(),
        };
        let mut a = Aggregator::new(vec![info], schedule);
        for s in 0..8u32 {
            let mut x = snap(2000, 2000, u64::from(s + 1) * 2000, u64::from(s) * 20);
            x.ttfb.record_us(500);
            a.add_second(&MergedSecond {
                second: s,
                groups: vec![x],
                last: s == 7,
            });
        }
        let (rows, groups, total, hists, _) = a.finish(0);
        assert_eq!(rows.len(), 8);
        assert_eq!(rows[1].phase, Phase::Ramp);
        assert_eq!(rows[5].phase, Phase::Hold);
        assert_eq!(rows[5].total.media_us, 2_000_000_000);
        assert_eq!(rows[5].total.media_rate, Some(1.0));
        assert!((rows[5].total.bench_cpu_pct - 2.0).abs() < 1e-9);
        assert_eq!(total.media_rate, Some(1.0));
        assert_eq!(total.hold_seconds, 4);
        assert!((total.bench_cpu_pct_per_1000.unwrap() - 1.0).abs() < 1e-9);
        assert!((total.bench_cpu_us_per_listener_second.unwrap() - 10.0).abs() < 1e-9);
        assert_eq!((total.want_at_end, total.down_at_end), (2000, 0));
        assert_eq!(hists.ttfb.count(), 8);
        assert_eq!(groups[0].summary.listeners, 2000);
        assert!(rows[0].groups.is_empty(), "one group: no per-group rows");
    }
}
