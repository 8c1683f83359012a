//! WebRTC (WHEP) viewers (`throng bench run --whep URL`): str0m clients that set up over WHEP
//! and receive RTP packets ([`viewer`]), each viewer's packets judged by sequence, timestamps,
//! gaps, loss and media rate ([`track`]), and mouth-to-ear latency: the stamped Opus packets
//! ([`latency`]), or for an MP3 mount tone bursts ([`bursts`]) heard from Opus packet sizes
//! ([`onset`]), and the sources and ICY listeners that measure it ([`probe`]). The report's
//! WebRTC figures ([`WhepSummary`], `report-whep.json`) are made from the WHEP groups of a run
//! report ([`summarize`]), the engines' own profiling figures among them ([`extra`]).

pub mod bursts;
pub mod latency;
pub mod onset;
pub mod probe;
pub mod track;
pub mod viewer;

use crate::mode::Mode;
use crate::report::summary::RunReport;
use crate::stats::Hist;
use std::collections::BTreeMap;

/// Names of the WHEP engine's own figures in a snapshot's `extra` ([`crate::stats::Snapshot`]):
/// running totals of each worker, merged by addition over threads, workers and hosts (so the
/// report's group summary has the run's). The engine's profiling figures, and what the rules
/// do not say on their own.
pub mod extra {
    /// Datagrams the viewers received (datagrams).
    pub const DATAGRAMS: &str = "whep.datagrams";
    /// str0m timers handled: a viewer's timeout that came due (wake-ups).
    pub const TIMER_WAKEUPS: &str = "whep.timer_wakeups";
    /// Event-loop wake-ups of the driving threads (`epoll_wait` returns) (wake-ups).
    pub const LOOP_WAKEUPS: &str = "whep.loop_wakeups";
    /// Time the driving threads spent working, not waiting (in `epoll_wait` or the pause of
    /// [`super::viewer::MIN_LOOP`]), over the hold seconds (µs, summed over threads).
    pub const HOLD_BUSY_US: &str = "whep.hold_busy_us";
    /// The hold seconds as the driving threads lived them (µs, summed over threads): the
    /// busy share's denominator.
    pub const HOLD_US: &str = "whep.hold_us";
    /// CPU of the workers over the hold seconds (µs).
    pub const HOLD_CPU_US: &str = "whep.hold_cpu_us";
    /// Time the viewers spent receiving over the hold seconds (µs): the hold CPU's denominator.
    pub const HOLD_LISTEN_US: &str = "whep.hold_listen_us";
    /// Resident memory of the workers at their latest tick (bytes; at the last one, before
    /// their viewers are disconnected). In-process, the whole bench's.
    pub const RSS_BYTES: &str = "whep.rss_bytes";
    /// Viewers that had no packet for over the max gap when the run ended (viewers).
    pub const SILENT_AT_END: &str = "whep.silent_at_end";
    /// Packets whose sequence number or timestamp went back or repeated (packets).
    pub const OUT_OF_ORDER: &str = "whep.out_of_order";
    /// Packets whose RTP timestamp did not advance by the previous packet's duration (packets;
    /// counted, not judged: a sender may leave silences out).
    pub const TS_JUMPS: &str = "whep.ts_jumps";
    /// ICE disconnections of viewers receiving (events; counted, not judged: a silence is the
    /// gap rule's).
    pub const ICE_DISCONNECTS: &str = "whep.ice_disconnects";
    /// Workers timing tone bursts (workers): the latency figures are burst onsets.
    pub const BURST_WORKERS: &str = "whep.burst_workers";
}

/// The outcome of a WHEP run: `whep` in `report.json`, and the whole of `report-whep.json`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WhepSummary {
    /// Viewers asked for (the most the stages want at once) (viewers).
    pub viewers: u32,
    /// Worker processes (0: in-process).
    pub workers: u32,
    /// Viewers receiving in the last second the stages wanted any (viewers).
    pub receiving: u32,
    /// Viewers with a failed connection: a POST not answered 201, no set-up, no media
    /// (viewers; by reason in the report's `failures`).
    pub failed: u32,
    /// Viewers starved, corrupt or failed at least once (viewers): a window of over 1 %
    /// loss, a gap over 200 ms, media under the minimum rate, packets out of order, silent at
    /// the end, or a failure.
    pub degraded: u32,
    /// Degraded viewers by cause (a viewer may have several): `loss` (a window of over 1 %
    /// loss), `gap` (over 200 ms between packets), `rate` (media under the minimum share of
    /// real time over a window), `order` (sequence numbers or timestamps that went back),
    /// `silent` (no packet at the end), `failed` (a failed connection).
    pub degraded_by: BTreeMap<String, u32>,
    /// With degraded viewers: every session's longest gap, median and largest (ms).
    pub degraded_gap_p50_max_ms: Option<(u64, u64)>,
    /// Setup time, POST to first packet, median (ms).
    pub setup_p50_ms: f64,
    /// Setup time, 99th percentile (ms).
    pub setup_p99_ms: f64,
    /// Packets received per viewer per second of receiving (packets/s; each viewer from its
    /// first packet).
    pub packets_per_viewer_second: f64,
    /// The packets per viewer-second real time takes at the packets' own durations
    /// (packets/s: 50 for 20 ms packets, 16.7 for 60 ms ones); `packets_per_viewer_second`
    /// should be this.
    #[serde(default)]
    pub expected_packets_per_viewer_second: f64,
    /// The packets' mean duration, from their Opus TOC bytes (ms).
    #[serde(default)]
    pub packet_ms: f64,
    /// Viewers the stages wanted at the end that were neither receiving nor setting up
    /// (viewers).
    #[serde(default)]
    pub down_at_end: u32,
    /// Mouth-to-ear latency (source write to viewer receipt, on the run's clock) over every
    /// stamped packet of every viewer, median (ms); `None` without `--latency-source`. With
    /// `--latency-bursts`, over every tone burst every viewer heard: the onset packet's arrival
    /// less the time the source wrote the MP3 frame holding the burst's start (an upper bound,
    /// see [`bursts`]).
    pub latency_p50_ms: Option<f64>,
    /// Mouth-to-ear latency, 99th percentile (ms).
    pub latency_p99_ms: Option<f64>,
    /// Mouth-to-ear latency, largest (ms).
    pub latency_max_ms: Option<f64>,
    /// Stamped packets (with `--latency-bursts`: burst onsets) the latency figures are made of.
    pub latency_samples: u64,
    /// Whether the latency figures come from MP3 tone bursts (`--latency-bursts`) rather than
    /// stamped Opus packets.
    #[serde(default)]
    pub latency_bursts: bool,
    /// With `--latency-bursts`: the largest lateness of the source's burst-frame writes against
    /// its schedule (ms; the delays may be over by as much).
    #[serde(default)]
    pub latency_source_late_max_ms: Option<f64>,
    /// The same latency for the ICY listeners of the probe mount, median (ms); `None` with
    /// `--latency-bursts` (an ICY listener would have to decode the MP3 to hear a burst).
    pub icy_latency_p50_ms: Option<f64>,
    /// ICY latency, 99th percentile (ms).
    pub icy_latency_p99_ms: Option<f64>,
    /// ICY latency, largest (ms).
    pub icy_latency_max_ms: Option<f64>,
    /// Stamped packets the ICY figures are made of.
    pub icy_latency_samples: u64,
    /// CPU time of the bench's viewer engines (all workers) per viewer-second of the run (µs).
    pub client_cpu_us_per_viewer_second: f64,
    /// CPU time of the viewer engines over the hold seconds per second of receiving over them
    /// (µs).
    pub client_hold_cpu_us_per_viewer_second: f64,
    /// Share of the hold the bench's driving threads spent working rather than waiting
    /// (0 to 1): near 1, the bench itself is the bottleneck and its gaps and latency are its
    /// own.
    pub client_busy_share: f64,
    /// Resident memory of the workers at their end (viewers still connected) per viewer
    /// (bytes).
    pub client_rss_per_viewer: f64,
    /// Per viewer-second of the run: datagrams received, str0m timers handled, and the
    /// workers' event-loop wake-ups (the bench's own work, for profiling).
    pub client_datagrams_timers_wakeups_per_viewer_second: (f64, f64, f64),
    /// CPU time of the sampled server (`--pid`, or a metrics URL) per viewer-second over the
    /// run (µs).
    pub server_cpu_us_per_viewer_second: Option<f64>,
    /// The sampled server's resident memory growth from before the run to its largest, per
    /// receiving viewer (bytes).
    pub server_rss_per_viewer: Option<f64>,
    /// Run errors (a worker that failed, the probe source, the ICY probes).
    pub errors: Vec<String>,
}

impl WhepSummary {
    /// The verdict, as the run's default thresholds see the WHEP groups: no viewer starved,
    /// corrupt or failed (none degraded), every viewer the stages wanted at the end up, no run
    /// error.
    pub fn pass(&self) -> bool {
        self.failed == 0 && self.degraded == 0 && self.down_at_end == 0 && self.errors.is_empty()
    }
}

/// The WebRTC figures of `report`'s WHEP groups (`report-whep.json`), from their summaries,
/// histograms and the engines' own figures ([`extra`]), and the server's from the timeline's
/// samples. `server_pid` is the sampled local server, if any (its figures come from the
/// samples, which a metrics URL gives as well). The ICY probes' latency and the burst source's
/// lateness are the run's to add.
pub fn summarize(report: &RunReport, server_pid: Option<u32>) -> WhepSummary {
    let _ = server_pid;
    let mut w = WhepSummary {
        workers: report.workers,
        errors: report.errors.clone(),
        ..WhepSummary::default()
    };
    let (mut ttfb, mut m2e, mut longest) = (Hist::new(), Hist::new(), Hist::new());
    let mut x: BTreeMap<String, f64> = BTreeMap::new();
    let (mut units, mut media_s, mut listen_s, mut cpu_s) = (0u64, 0.0, 0.0, 0.0);
    let mut hold_cpu_fallback = Vec::new();
    for g in report.groups.iter().filter(|g| g.mode == Mode::Whep) {
        let s = &g.summary;
        w.viewers += s.listeners;
        w.receiving += s.final_streaming;
        w.failed += s.failed_listeners;
        w.degraded += s.troubled;
        w.down_at_end += s.down_at_end;
        for (k, n) in [
            ("loss", s.rules.loss.listeners),
            ("gap", s.rules.gap.listeners),
            ("rate", s.rules.rate.listeners),
            ("order", s.rules.corrupt.listeners),
            ("failed", s.failed_listeners),
        ] {
            if n > 0 {
                *w.degraded_by.entry(k.to_owned()).or_insert(0) += n;
            }
        }
        ttfb.merge(&g.hists.ttfb);
        m2e.merge(&g.hists.m2e);
        longest.merge(&g.hists.longest_gap);
        for (k, v) in &s.extra {
            *x.entry(k.clone()).or_insert(0.0) += v;
        }
        units += s.units.max(s.frames_checked);
        media_s += s.media_seconds;
        listen_s += s.listening_seconds;
        cpu_s += s.bench_cpu_total_s;
        if let Some(c) = s.bench_cpu_us_per_listener_second {
            hold_cpu_fallback.push(c);
        }
    }
    let get = |k: &str| x.get(k).copied().unwrap_or(0.0);
    let silent = get(extra::SILENT_AT_END) as u32;
    if silent > 0 {
        w.degraded_by.insert("silent".into(), silent);
    }
    if w.degraded > 0 {
        if let (Some(p50), Some(max)) = (longest.quantile_ms(0.5), longest.max_ms()) {
            w.degraded_gap_p50_max_ms = Some((p50.round() as u64, max.round() as u64));
        }
    }
    w.setup_p50_ms = ttfb.quantile_ms(0.5).unwrap_or(0.0);
    w.setup_p99_ms = ttfb.quantile_ms(0.99).unwrap_or(0.0);
    if units > 0 {
        w.packets_per_viewer_second = units as f64 / f64::max(listen_s, 1e-3);
        if media_s > 0.0 {
            w.expected_packets_per_viewer_second = units as f64 / media_s;
            w.packet_ms = media_s * 1000.0 / units as f64;
        }
    }
    w.latency_p50_ms = m2e.quantile_ms(0.5);
    w.latency_p99_ms = m2e.quantile_ms(0.99);
    w.latency_max_ms = m2e.max_ms();
    w.latency_samples = m2e.count();
    w.latency_bursts = get(extra::BURST_WORKERS) > 0.0;
    let run_s = (report.timeline.len() as f64).max(1.0);
    let viewer_s = f64::from(w.viewers.max(1)) * run_s;
    w.client_cpu_us_per_viewer_second = cpu_s * 1e6 / viewer_s;
    let hold_listen = get(extra::HOLD_LISTEN_US);
    w.client_hold_cpu_us_per_viewer_second = if hold_listen > 0.0 {
        get(extra::HOLD_CPU_US) / (hold_listen / 1e6)
    } else {
        hold_cpu_fallback.iter().fold(0.0, |a, b| a + b)
    };
    let hold_us = get(extra::HOLD_US);
    if hold_us > 0.0 {
        w.client_busy_share = get(extra::HOLD_BUSY_US) / hold_us;
    }
    w.client_rss_per_viewer = get(extra::RSS_BYTES) / f64::from(w.viewers.max(1));
    w.client_datagrams_timers_wakeups_per_viewer_second = (
        get(extra::DATAGRAMS) / viewer_s,
        get(extra::TIMER_WAKEUPS) / viewer_s,
        get(extra::LOOP_WAKEUPS) / viewer_s,
    );
    let samples: Vec<&crate::observe::sampler::ServerSample> = report
        .timeline
        .iter()
        .filter_map(|r| r.server.as_ref())
        .collect();
    if !samples.is_empty() {
        // Each sample is one second's CPU, in % of a core: 1 % is 10,000 µs.
        let cpu_us: f64 = samples
            .iter()
            .map(|s| (s.cpu_user_pct + s.cpu_sys_pct) * 1e4)
            .sum();
        w.server_cpu_us_per_viewer_second = Some(cpu_us / viewer_s);
        let baseline = samples
            .iter()
            .map(|s| s.rss_baseline_bytes)
            .find(|&b| b > 0);
        let max = samples.iter().map(|s| s.rss_bytes).max();
        if let (Some(b), Some(m)) = (baseline, max) {
            if w.receiving > 0 {
                w.server_rss_per_viewer = Some((m as f64 - b as f64) / f64::from(w.receiving));
            }
        }
    }
    w
}

/// `60 ms`, or `mean 47.3 ms` for a duration that is no whole number of ms.
fn duration_text(ms: f64) -> String {
    if (ms - ms.round()).abs() < 0.05 {
        format!("{ms:.0} ms")
    } else {
        format!("mean {ms:.1} ms")
    }
}

/// The text summary of a report (a few lines for the terminal).
pub fn summary_text(r: &WhepSummary) -> String {
    let ms = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1} ms"));
    let packets = if r.packet_ms > 0.0 {
        format!(
            "{:.1} ({:.1} expected from their {} duration)",
            r.packets_per_viewer_second,
            r.expected_packets_per_viewer_second,
            duration_text(r.packet_ms)
        )
    } else {
        format!("{:.1} (no packet received)", r.packets_per_viewer_second)
    };
    let mut s = format!(
        "WHEP viewers: {} asked, {} receiving, {} failed, {} degraded {:?} ({} worker processes)\n\
         setup (POST to first packet): p50 {:.0} ms, p99 {:.0} ms\n\
         packets per viewer-second: {packets}\n\
         bench CPU per viewer-second: {:.1} us (hold only: {:.1} us), bench memory per viewer: {:.0} KiB, bench busy {:.0} % of the hold\n",
        r.viewers,
        r.receiving,
        r.failed,
        r.degraded,
        r.degraded_by,
        r.workers,
        r.setup_p50_ms,
        r.setup_p99_ms,
        r.client_cpu_us_per_viewer_second,
        r.client_hold_cpu_us_per_viewer_second,
        r.client_rss_per_viewer / 1024.0,
        r.client_busy_share * 100.0,
    );
    if let Some(c) = r.server_cpu_us_per_viewer_second {
        s += &format!("server CPU per viewer-second: {c:.1} us");
        if let Some(m) = r.server_rss_per_viewer {
            s += &format!(", server memory per viewer: {:.1} KiB", m / 1024.0);
        }
        s += "\n";
    }
    if r.latency_bursts {
        s += &format!(
            "mouth-to-ear latency, WHEP (MP3 tone bursts, an upper bound): p50 {}, p99 {}, max {} ({} burst onsets; the source wrote up to {} late)\n",
            ms(r.latency_p50_ms),
            ms(r.latency_p99_ms),
            ms(r.latency_max_ms),
            r.latency_samples,
            ms(r.latency_source_late_max_ms),
        );
        s += "mouth-to-ear latency, ICY: not measured (an MP3 burst source: it would take decoding)\n";
    } else if r.latency_samples > 0 || r.icy_latency_samples > 0 {
        s += &format!(
            "mouth-to-ear latency, WHEP: p50 {}, p99 {}, max {} ({} packets)\n",
            ms(r.latency_p50_ms),
            ms(r.latency_p99_ms),
            ms(r.latency_max_ms),
            r.latency_samples
        );
        s += &format!(
            "mouth-to-ear latency, ICY:  p50 {}, p99 {}, max {} ({} packets)\n",
            ms(r.icy_latency_p50_ms),
            ms(r.icy_latency_p99_ms),
            ms(r.icy_latency_max_ms),
            r.icy_latency_samples
        );
    }
    s += &format!("verdict: {}", if r.pass() { "PASS" } else { "FAIL" });
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::sampler::ServerSample;

    /// A report of one WHEP group of 10 viewers over 10 s: 60 ms packets at real time (built
    /// field by field: the report layer is above this one).
    fn report() -> RunReport {
        let mut r = RunReport {
            mode: Mode::Whep,
            workers: 2,
            ..RunReport::default()
        };
        r.groups.push(Default::default());
        let g = &mut r.groups[0];
        g.name = "whep".into();
        g.mode = Mode::Whep;
        let s = &mut g.summary;
        (s.listeners, s.started, s.final_streaming, s.want_at_end) = (10, 10, 10, 10);
        (s.units, s.frames_checked) = (1500, 1500);
        (s.media_seconds, s.listening_seconds, s.bench_cpu_total_s) = (90.0, 90.0, 0.05);
        for (k, v) in [
            (extra::DATAGRAMS, 1700.0),
            (extra::HOLD_BUSY_US, 100_000.0),
            (extra::HOLD_US, 1_000_000.0),
            (extra::HOLD_CPU_US, 20_000.0),
            (extra::HOLD_LISTEN_US, 50_000_000.0),
            (extra::RSS_BYTES, 10_240_000.0),
        ] {
            s.extra.insert(k.into(), v);
        }
        for ms in [40, 45, 50, 300] {
            g.hists.ttfb.record_us(ms * 1000);
        }
        g.hists.m2e.record_us(120_000);
        r.summary = r.groups[0].summary.clone();
        for second in 0..10 {
            r.timeline.push(Default::default());
            let row = r.timeline.last_mut().expect("just pushed");
            row.second = second;
            row.server = Some(ServerSample {
                second,
                cpu_user_pct: 1.0,
                cpu_sys_pct: 1.0,
                rss_bytes: 2_000_000 + u64::from(second) * 10_000,
                rss_baseline_bytes: 1_000_000,
                ..ServerSample::default()
            });
        }
        r
    }

    #[test]
    fn the_summary_comes_from_the_whep_groups() {
        let w = summarize(&report(), Some(1));
        assert_eq!(
            (w.viewers, w.receiving, w.failed, w.degraded),
            (10, 10, 0, 0)
        );
        assert_eq!(w.workers, 2);
        assert!((w.packets_per_viewer_second - 16.67).abs() < 0.01, "{w:?}");
        assert!(
            (w.expected_packets_per_viewer_second - 16.67).abs() < 0.01,
            "{w:?}"
        );
        assert!((w.packet_ms - 60.0).abs() < 1e-9);
        assert!((w.setup_p50_ms - 45.0).abs() < 0.1 && (w.setup_p99_ms - 300.0).abs() < 0.5);
        assert_eq!(w.latency_samples, 1);
        assert!(!w.latency_bursts);
        assert!((w.client_busy_share - 0.1).abs() < 1e-9);
        assert!((w.client_hold_cpu_us_per_viewer_second - 400.0).abs() < 1e-9);
        assert!((w.client_cpu_us_per_viewer_second - 500.0).abs() < 1e-9);
        assert!((w.client_rss_per_viewer - 1_024_000.0).abs() < 1e-9);
        assert!((w.client_datagrams_timers_wakeups_per_viewer_second.0 - 17.0).abs() < 1e-9);
        // 2 % of a core for 10 s over 100 viewer-seconds; memory from 1 MB to 2.09 MB.
        assert!((w.server_cpu_us_per_viewer_second.unwrap() - 2000.0).abs() < 1e-6);
        assert!((w.server_rss_per_viewer.unwrap() - 109_000.0).abs() < 1e-6);
        assert!(w.pass());
        let text = summary_text(&w);
        assert!(
            text.contains(
                "packets per viewer-second: 16.7 (16.7 expected from their 60 ms duration)"
            ),
            "{text}"
        );
        assert!(text.ends_with("verdict: PASS"), "{text}");
    }

    #[test]
    fn rules_and_failures_degrade_and_the_verdict_agrees() {
        let mut r = report();
        let s = &mut r.groups[0].summary;
        s.troubled = 3;
        s.failed_listeners = 1;
        s.rules.loss.listeners = 1;
        s.rules.corrupt.listeners = 1;
        s.extra.insert(extra::SILENT_AT_END.into(), 1.0);
        s.extra.insert(extra::BURST_WORKERS.into(), 2.0);
        r.groups[0].hists.longest_gap.record_us(250_000);
        let w = summarize(&r, None);
        assert_eq!(w.degraded, 3);
        let by: Vec<(&str, u32)> = w
            .degraded_by
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect();
        assert_eq!(
            by,
            vec![("failed", 1), ("loss", 1), ("order", 1), ("silent", 1)]
        );
        assert_eq!(w.degraded_gap_p50_max_ms, Some((250, 250)));
        assert!(w.latency_bursts);
        assert!(!w.pass());
        assert!(summary_text(&w).contains("WHEP (MP3 tone bursts, an upper bound)"));
        // One viewer down at the end, or a run error, fails it too.
        let down = WhepSummary {
            down_at_end: 1,
            ..WhepSummary::default()
        };
        assert!(!down.pass());
        let err = WhepSummary {
            errors: vec!["worker 1 ended before the run did".into()],
            ..WhepSummary::default()
        };
        assert!(!err.pass());
        assert!(WhepSummary::default().pass());
    }

    #[test]
    fn the_text_gives_latency_and_mixed_durations() {
        let r = WhepSummary {
            viewers: 2,
            receiving: 2,
            latency_p50_ms: Some(40.0),
            latency_samples: 10,
            packets_per_viewer_second: 21.1,
            expected_packets_per_viewer_second: 21.1,
            packet_ms: 47.32,
            ..WhepSummary::default()
        };
        let s = summary_text(&r);
        assert!(s.contains("WHEP: p50 40.0 ms"), "{s}");
        assert!(
            s.contains("21.1 (21.1 expected from their mean 47.3 ms duration)"),
            "{s}"
        );
        assert!(s.ends_with("verdict: PASS"), "{s}");
        let none = summary_text(&WhepSummary::default());
        assert!(none.contains("0.0 (no packet received)"), "{none}");
    }
}
