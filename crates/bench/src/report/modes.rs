//! The figures a mode adds to a run's report, computed from its groups' summaries and
//! histograms: the `events` block of an events run and the `whep` block (and
//! `report-whep.json`) of a WebRTC run.

use crate::events::subscriber::EventsSummary;
use crate::mode::Mode;
use crate::report::summary::RunReport;
use crate::stats::Hist;
use crate::whep::{extra, WhepSummary};
use std::collections::BTreeMap;

/// The events figures of `report`'s events groups, `changes` title changes made.
pub fn events(report: &RunReport, changes: u32) -> EventsSummary {
    let mut e = EventsSummary {
        changes,
        ..EventsSummary::default()
    };
    let mut lat = Hist::new();
    let mut snap = Hist::new();
    for g in report.groups.iter().filter(|g| g.mode == Mode::Events) {
        let s = &g.summary;
        e.subscribers += s.listeners;
        e.ready += g.hists.ttfb.count() as u32;
        e.connected_at_end += s.final_streaming;
        e.received += s.receipts;
        e.missed += s.missed.max(s.lost_units);
        lat.merge(&g.hists.event_latency);
        snap.merge(&g.hists.ttfb);
    }
    e.latency_p50_ms = lat.quantile_ms(0.5);
    e.latency_p99_ms = lat.quantile_ms(0.99);
    e.latency_max_ms = lat.max_ms();
    e.snapshot_p99_ms = snap.quantile_ms(0.99);
    let samples: Vec<&crate::observe::sampler::ServerSample> = report
        .timeline
        .iter()
        .filter_map(|r| r.server.as_ref())
        .collect();
    e.server_rss_before = samples.first().map(|s| s.rss_baseline_bytes);
    e.server_rss_ready = report.summary.server_rss_max;
    e.server_rss_per_subscriber = report.summary.server_rss_per_listener;
    e
}

/// The WebRTC figures of `report`'s WHEP groups (`report-whep.json`), from their summaries,
/// histograms and the engines' own figures ([`extra`]), and the server's from the timeline's
/// samples. `server_pid` is the sampled local server, if any (its figures come from the
/// samples, which a metrics URL gives as well). The ICY probes' latency and the burst source's
/// lateness are the run's to add.
pub fn whep(report: &RunReport, server_pid: Option<u32>) -> WhepSummary {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::sampler::ServerSample;
    use crate::whep::summary_text;

    /// A report of one WHEP group of 10 viewers over 10 s: 60 ms packets at real time .
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
        let w = whep(&report(), Some(1));
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
        let w = whep(&r, None);
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
