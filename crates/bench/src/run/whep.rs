//! WebRTC viewers (`throng bench run --whep URL -n N`): spreads the viewers over worker
//! processes (the one `bench worker` protocol of [`crate::run::worker`], one per CPU unless
//! `--workers` says otherwise, `--workers 0` for one in-process engine), each writing one
//! [`WhepTick`] per second and a last one with its [`WhepResult`]; all start their second 0 at a
//! common wall-clock time, as the ICY engine's workers do, and give their viewers their own
//! loopback addresses on a shared socket per thread (a loopback server) or their own sockets
//! over `--bind-range`. With `--latency-source` the run first pushes a stamped Ogg/Opus source
//! ([`crate::whep::probe`]) and, over the hold, a few ICY listeners of that mount measure the
//! same mouth-to-ear latency; with `--latency-bursts` it pushes an MP3 file of tone bursts
//! instead and hands its burst schedule to the workers, whose viewers time the bursts' onsets
//! ([`crate::whep::bursts`]); no ICY listener measures then. The merged [`WhepSummary`] is the `whep` part of the run's
//! [`RunReport`] (and `report-whep.json`); the per-second viewer counts and the server samples
//! make its timeline, and the setup times (POST to first packet) its TTFB. The verdict is PASS
//! when every viewer received and none failed or was degraded.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::mode::Mode;
use crate::observe::sampler::{Sampler, ServerSample};
use crate::profile::Profile;
use crate::report::summary::{Row, RunReport};
use crate::run::plan::Plan;
use crate::run::worker::{Tick, WorkerMsg, WorkerSet, WorkerSpec};
use crate::stats::{bucket_of, LogHist, Phase, HIST_BUCKETS};
use crate::whep::latency::LatencyHist;
use crate::whep::probe::{IcyProbe, LatencySource, ProbeConfig};
use crate::whep::viewer::{merge_result, WhepResult, WhepSpec, WhepTick};
use crate::whep::WhepSummary;

/// Workers to start: `--workers` if given, else one per CPU (and at least one per
/// `--max-per-worker` viewers), never more than the viewers.
pub fn effective_workers(p: &Profile) -> u32 {
    match p.workers {
        Some(w) => w.min(p.listeners),
        None => {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
            cpus.max(p.listeners.div_ceil(p.max_per_worker.max(1)))
                .min(p.listeners)
        }
    }
}

fn quantiles(h: &LatencyHist) -> (Option<f64>, Option<f64>, Option<f64>) {
    (
        h.quantile_ms(0.5),
        h.quantile_ms(0.99),
        (h.count() > 0).then(|| h.max_us as f64 / 1000.0),
    )
}

/// The viewer counts of every second, from the workers' latest ticks.
#[derive(Default)]
struct Timeline {
    latest: BTreeMap<u32, WhepTick>,
    rows: BTreeMap<u32, Row>,
}

impl Timeline {
    /// Records tick `t`, which arrived in second `second` of the run.
    fn add(&mut self, second: u32, t: &WhepTick) {
        self.latest.insert(t.worker, t.clone());
        let row = self.rows.entry(second).or_default();
        row.second = second;
        let c = &mut row.counts;
        let sum = |f: fn(&WhepTick) -> u32| self.latest.values().map(f).sum::<u32>();
        (c.started, c.streaming, c.failed) = (
            sum(|t| t.answered + t.failed),
            sum(|t| t.receiving),
            sum(|t| t.failed),
        );
        c.connecting = sum(|t| t.answered.saturating_sub(t.receiving));
        c.connects = sum(|t| t.answered);
    }

    /// The rows from second 0 to the last (a second without a tick repeats the one before),
    /// with the server samples and the phase (`hold` from `hold_from` on).
    fn finish(mut self, samples: Vec<ServerSample>, hold_from: u32) -> Vec<Row> {
        let last = self.rows.keys().next_back().copied().unwrap_or(0);
        let mut out: Vec<Row> = Vec::new();
        for s in 0..=last {
            let mut row = match self.rows.remove(&s) {
                Some(r) => r,
                None => out.last().cloned().unwrap_or_default(),
            };
            row.second = s;
            row.phase = if s >= hold_from {
                Phase::Hold
            } else {
                Phase::Ramp
            };
            row.server = samples.iter().find(|x| x.second == s).cloned();
            out.push(row);
        }
        out
    }
}

/// Runs one WHEP plan to the end and returns its report.
///
/// Errors: bad arguments, a probe source the server refuses, workers that cannot start.
pub fn execute(plan: &Plan) -> anyhow::Result<RunReport> {
    anyhow::ensure!(!plan.urls.is_empty(), "no WHEP URL given");
    let server = crate::observe::meta::server_header(&plan.urls[0], Duration::from_secs(2));
    let (w, timeline, start_unix_ms, nproc, cpu_us) = measure(plan)?;
    let p = &plan.profile;
    let mut setup = vec![0u64; HIST_BUCKETS];
    for ms in &w.setups_ms {
        setup[bucket_of((ms * 1000.0) as u64) as usize] += 1;
    }
    let ttfb = LogHist::from_dense(&setup);
    let mut report = RunReport {
        name: plan.name.clone(),
        mode: Mode::Whep,
        meta: crate::observe::meta::RunMeta::collect(start_unix_ms, server),
        urls: plan.urls.clone(),
        profile: Some(p.clone()),
        start_unix_ms,
        workers: nproc,
        errors: w.summary.errors.clone(),
        timeline,
        ..RunReport::default()
    };
    let s = &mut report.summary;
    let ws = &w.summary;
    s.listeners = ws.viewers;
    s.peak_streaming = report
        .timeline
        .iter()
        .map(|r| r.counts.streaming)
        .max()
        .unwrap_or(0)
        .max(ws.receiving);
    s.final_streaming = ws.receiving;
    s.starved = ws.degraded;
    if ws.failed > 0 {
        s.failures
            .insert("viewer failed".into(), u64::from(ws.failed));
    }
    s.failures_total = u64::from(ws.failed);
    s.connects = report
        .timeline
        .last()
        .map_or(0, |r| u64::from(r.counts.connects));
    s.ttfb_p50_ms = Some(ws.setup_p50_ms).filter(|_| !w.setups_ms.is_empty());
    s.ttfb_p99_ms = Some(ws.setup_p99_ms).filter(|_| !w.setups_ms.is_empty());
    s.ttfb_max_ms = w.setups_ms.last().copied();
    s.bench_cpu_total_s = cpu_us as f64 / 1e6;
    s.server_rss_max = report
        .timeline
        .iter()
        .filter_map(|r| r.server.as_ref().map(|x| x.rss_bytes))
        .max();
    s.server_rss_per_listener = ws.server_rss_per_viewer;
    s.hold_seconds = p.hold.0 as u32;
    s.pass = ws.pass();
    s.fail_reasons = crate::report::verdict::whep_reasons(ws);
    report.ttfb = ttfb;
    report.whep = Some(w.summary);
    Ok(report)
}

/// What [`measure`] found: the summary and the sorted setup times (ms).
struct Measured {
    summary: WhepSummary,
    setups_ms: Vec<f64>,
}

/// Runs the viewers and merges the workers' results: the summary, the timeline, the common
/// start (ms since the Unix epoch), the worker processes and the engines' CPU time (µs).
fn measure(plan: &Plan) -> anyhow::Result<(Measured, Vec<Row>, u64, u32, u64)> {
    let p = &plan.profile;
    anyhow::ensure!(!plan.urls.is_empty(), "no WHEP URL given");
    anyhow::ensure!(p.listeners > 0, "-n: at least one viewer");
    let mut errors = Vec::new();
    let source = match &plan.probe {
        Some(c) => {
            let s = LatencySource::start(c)?;
            // Let the mount come up before viewers ask for it.
            std::thread::sleep(Duration::from_millis(1500));
            Some(s)
        }
        None => None,
    };
    let server_pid = plan.server_pid();
    let server_cpu0 = server_pid.and_then(proc_cpu_us);
    let server_rss0 = server_pid
        .and_then(|pid| crate::observe::sampler::read_proc(pid).ok())
        .map(|r| r.rss);
    let nproc = effective_workers(p);
    let nspecs = nproc.max(1);
    let start_unix_ms =
        crate::events::subscriber::unix_us() / 1000 + if nproc > 0 { 500 } else { 100 };
    let started = Instant::now();
    let specs = (0..nspecs)
        .map(|w| {
            WorkerSpec::Whep(WhepSpec {
                worker: w,
                workers: nspecs,
                urls: plan.urls.clone(),
                total: p.listeners,
                ramp: p.ramp,
                hold_s: p.hold.0,
                bind_range: p.bind_range.clone(),
                start_unix_ms,
                threads: plan.whep.whep_threads.clamp(1, 64) as u32,
                bursts: source.as_ref().and_then(|s| s.bursts().cloned()),
            })
        })
        .collect();
    let launcher = if nproc > 0 {
        Some(plan.launcher()?)
    } else {
        None
    };
    let (tx, rx) = mpsc::channel::<WorkerMsg>();
    let mut workers = WorkerSet::start(specs, launcher.as_ref(), tx)?;
    let (stx, srx) = mpsc::channel();
    let sampler = plan
        .sample
        .clone()
        .map(|t| Sampler::start(t, start_unix_ms, stx));
    let mut timeline = Timeline::default();
    let ramp_s = p.listeners as f64 / p.ramp.max(0.001);
    let hold_start_unix_us = (start_unix_ms as f64 * 1000.0 + ramp_s * 1e6) as u64;
    let hold_end = started + Duration::from_secs_f64(0.5 + ramp_s + p.hold.0);
    let deadline = hold_end + crate::whep::viewer::SETUP_TIMEOUT + Duration::from_secs(30);
    let mut icy = None;
    let mut server_rss1 = None;
    let mut results: Vec<Option<WhepResult>> = vec![None; nspecs as usize];
    while results.iter().any(Option::is_none) {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(WorkerMsg::Tick(Tick::Whep(t))) => {
                let ms =
                    (crate::events::subscriber::unix_us() / 1000).saturating_sub(start_unix_ms);
                timeline.add((ms / 1000) as u32, &t);
                if let Some(r) = t.result {
                    if let Some(slot) = results.get_mut(t.worker as usize) {
                        *slot = Some(r);
                    }
                }
            }
            Ok(WorkerMsg::Exited {
                worker,
                error: Some(e),
            }) => eprintln!("whep worker {worker}: {e}"),
            Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        let now_us = crate::events::subscriber::unix_us();
        if icy.is_none() && now_us >= hold_start_unix_us {
            if let Some(c) = &plan.probe {
                // ICY listeners read stamps; MP3 bursts would need decoding.
                if plan.whep.latency_icy > 0 && c.bursts.is_none() {
                    icy = Some(IcyProbe::start(&c.url, plan.whep.latency_icy, now_us)?);
                }
            }
        }
        if server_rss1.is_none() && Instant::now() + Duration::from_millis(300) >= hold_end {
            server_rss1 = Some(
                server_pid
                    .and_then(|pid| crate::observe::sampler::read_proc(pid).ok())
                    .map(|r| r.rss),
            );
        }
        if Instant::now() > deadline {
            errors.push("run exceeded its time budget; workers stopped".into());
            break;
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let server_cpu1 = server_pid.and_then(proc_cpu_us);
    workers.stop();
    workers.join(Duration::from_secs(5));
    if let Some(s) = sampler {
        s.stop();
    }
    let samples: Vec<ServerSample> = srx.try_iter().collect();
    let icy_hist = match icy {
        Some(probe) => {
            let (h, errs) = probe.stop();
            errors.extend(errs.into_iter().map(|e| format!("ICY latency probe: {e}")));
            h
        }
        None => LatencyHist::default(),
    };
    let mut source_late_us = None;
    if let Some(s) = source {
        match s.stop() {
            Ok(late) => source_late_us = late,
            Err(e) => errors.push(e),
        }
    }
    let mut all = WhepResult::default();
    for (w, r) in results.into_iter().enumerate() {
        match r {
            Some(r) => merge_result(&mut all, r),
            None => errors.push(format!("whep worker {w} sent no result")),
        }
    }
    // Viewers of workers that sent nothing count as failed.
    let missing = p.listeners.saturating_sub(all.viewers);
    if all.error_count > 0 {
        errors.push(format!(
            "{} viewer errors, the first: {}",
            all.error_count,
            all.errors.join("; ")
        ));
    }
    all.setups_ms.sort_by(f64::total_cmp);
    let pct = |q: f64| {
        let s = &all.setups_ms;
        s.get(((s.len() as f64 * q).ceil() as usize).saturating_sub(1))
            .copied()
            .unwrap_or(0.0)
    };
    let run_viewer_secs = f64::from(p.listeners) * elapsed.max(1e-3);
    let (l50, l99, lmax) = quantiles(&all.latency);
    let (i50, i99, imax) = quantiles(&icy_hist);
    let cpu_us = all.cpu_us;
    let setups_ms = all.setups_ms.clone();
    let hold_from = (ramp_s.ceil() as u32).max(1);
    let summary = WhepSummary {
        viewers: p.listeners,
        workers: nproc,
        receiving: all.receiving,
        failed: all.failed + missing,
        degraded: all.degraded,
        degraded_by: [
            ("loss", all.degraded_loss),
            ("gap", all.degraded_gap),
            ("order", all.degraded_order),
            ("silent", all.degraded_silent),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| (k.to_owned(), n))
        .collect(),
        degraded_gap_p50_max_ms: {
            let g = &mut all.degraded_max_gaps_ms;
            g.sort_unstable();
            (!g.is_empty()).then(|| (g[g.len() / 2], g[g.len() - 1]))
        },
        setup_p50_ms: pct(0.5),
        setup_p99_ms: pct(0.99),
        packets_per_viewer_second: all.hold_packets as f64 / all.hold_viewer_secs.max(1e-3),
        latency_p50_ms: l50,
        latency_p99_ms: l99,
        latency_max_ms: lmax,
        latency_samples: all.latency.count(),
        latency_bursts: plan.probe.as_ref().is_some_and(|c| c.bursts.is_some()),
        latency_source_late_max_ms: source_late_us.map(|us| us as f64 / 1000.0),
        icy_latency_p50_ms: i50,
        icy_latency_p99_ms: i99,
        icy_latency_max_ms: imax,
        icy_latency_samples: icy_hist.count(),
        client_cpu_us_per_viewer_second: all.cpu_us as f64 / run_viewer_secs,
        client_hold_cpu_us_per_viewer_second: all.hold_cpu_us as f64
            / (f64::from(all.receiving.max(1)) * (p.hold.0 - 0.3).max(1e-3)),
        client_busy_share: all.hold_busy_us as f64 / (all.hold_us.max(1)) as f64,
        client_datagrams_timers_wakeups_per_viewer_second: (
            all.datagrams as f64 / run_viewer_secs,
            all.timer_wakeups as f64 / run_viewer_secs,
            all.loop_wakeups as f64 / run_viewer_secs,
        ),
        client_rss_per_viewer: all.rss_bytes as f64 / f64::from(p.listeners),
        server_cpu_us_per_viewer_second: match (server_cpu0, server_cpu1) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / run_viewer_secs),
            _ => None,
        },
        server_rss_per_viewer: match (server_rss0, server_rss1.flatten()) {
            (Some(a), Some(b)) if all.receiving > 0 => {
                Some((b as f64 - a as f64) / f64::from(all.receiving))
            }
            _ => None,
        },
        errors,
    };
    Ok((
        Measured { summary, setups_ms },
        timeline.finish(samples, hold_from),
        start_unix_ms,
        nproc,
        cpu_us,
    ))
}

/// The text summary of a report (a few lines for the terminal).
pub fn summary_text(r: &WhepSummary) -> String {
    let ms = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1} ms"));
    let mut s = format!(
        "WHEP viewers: {} asked, {} receiving, {} failed, {} degraded {:?} ({} worker processes)\n\
         setup (POST to first packet): p50 {:.0} ms, p99 {:.0} ms\n\
         packets per viewer-second over the hold: {:.1} (expected 50 with 20 ms packets)\n\
         bench CPU per viewer-second: {:.1} us (hold only: {:.1} us), bench memory per viewer: {:.0} KiB, bench busy {:.0} % of the hold\n",
        r.viewers,
        r.receiving,
        r.failed,
        r.degraded,
        r.degraded_by,
        r.workers,
        r.setup_p50_ms,
        r.setup_p99_ms,
        r.packets_per_viewer_second,
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

/// The latency probe around a listener (ICY) run: pushes the source of `probe`, lets the
/// mount come up, runs `f`, and meanwhile `icy` ICY probe listeners of the mount measure
/// mouth-to-ear latency; writes `latency-icy.json` in `out` and prints the figures. So a plain
/// `throng bench run --latency-source URL URL` gives the ICY figure next to the WHEP one. With
/// `--latency-bursts` the MP3 burst source feeds the mount for the run's listeners, and the
/// ICY latency is not measured (it would take decoding the MP3): the figures are `null`.
///
/// Errors: the probe source refused, or `f`'s error.
pub fn with_probe<T>(
    probe: &ProbeConfig,
    icy: u32,
    out: &Path,
    f: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let source = LatencySource::start(probe)?;
    std::thread::sleep(Duration::from_millis(1500));
    let listeners = match probe.bursts {
        None => Some(IcyProbe::start(
            &probe.url,
            icy,
            crate::events::subscriber::unix_us(),
        )?),
        Some(_) => None,
    };
    let r = f();
    let (h, mut errors) = match listeners {
        Some(l) => l.stop(),
        None => (LatencyHist::default(), Vec::new()),
    };
    if let Err(e) = source.stop() {
        errors.push(e);
    }
    let (p50, p99, max) = quantiles(&h);
    let ms = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1} ms"));
    if probe.bursts.is_some() {
        println!("mouth-to-ear latency, ICY probes: not measured (an MP3 burst source)");
    } else {
        println!(
            "mouth-to-ear latency, ICY probes: p50 {}, p99 {}, max {} ({} packets)",
            ms(p50),
            ms(p99),
            ms(max),
            h.count()
        );
    }
    let j = serde_json::json!({
        "icy_latency_p50_ms": p50, "icy_latency_p99_ms": p99, "icy_latency_max_ms": max,
        "icy_latency_samples": h.count(), "errors": errors,
    });
    std::fs::create_dir_all(out)?;
    std::fs::write(
        out.join("latency-icy.json"),
        serde_json::to_string_pretty(&j)?,
    )?;
    for e in &errors {
        eprintln!("error: {e}");
    }
    r
}

/// User plus system CPU time of process `pid` in µs, from `/proc/<pid>/stat` (fields 14 and
/// 15, in clock ticks of 1/100 s on Linux).
fn proc_cpu_us(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks * 10_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_default_to_one_per_cpu_and_never_exceed_the_viewers() {
        let p = Profile {
            listeners: 1,
            ..Profile::default()
        };
        assert_eq!(effective_workers(&p), 1);
        let p = Profile {
            listeners: 2000,
            workers: Some(3),
            ..Profile::default()
        };
        assert_eq!(effective_workers(&p), 3);
        let p = Profile {
            listeners: 2000,
            max_per_worker: 100,
            ..Profile::default()
        };
        assert_eq!(effective_workers(&p), 20);
    }

    #[test]
    fn the_summary_gives_latency_and_the_verdict() {
        let r = WhepSummary {
            viewers: 2,
            receiving: 2,
            latency_p50_ms: Some(40.0),
            latency_samples: 10,
            ..WhepSummary::default()
        };
        let s = summary_text(&r);
        assert!(s.contains("WHEP: p50 40.0 ms"), "{s}");
        assert!(s.ends_with("verdict: PASS"), "{s}");
        let bursts = WhepSummary {
            latency_bursts: true,
            latency_source_late_max_ms: Some(0.4),
            ..r.clone()
        };
        let s = summary_text(&bursts);
        assert!(
            s.contains("WHEP (MP3 tone bursts, an upper bound): p50 40.0 ms")
                && s.contains("10 burst onsets; the source wrote up to 0.4 ms late")
                && s.contains("ICY: not measured"),
            "{s}"
        );
        let bad = WhepSummary { degraded: 1, ..r };
        assert!(!bad.pass());
    }

    #[test]
    fn the_timeline_sums_the_workers_latest_ticks_and_fills_gaps() {
        let tick = |worker, answered, receiving, failed| WhepTick {
            worker,
            answered,
            receiving,
            failed,
            result: None,
        };
        let mut t = Timeline::default();
        t.add(0, &tick(0, 2, 1, 0));
        t.add(0, &tick(1, 3, 2, 1));
        t.add(2, &tick(0, 4, 4, 0));
        let rows = t.finish(Vec::new(), 2);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].counts.streaming, 3);
        assert_eq!(rows[0].counts.connecting, 2);
        assert_eq!(rows[0].counts.failed, 1);
        assert_eq!(
            rows[1].counts.streaming, 3,
            "a second without ticks repeats"
        );
        assert_eq!(rows[1].second, 1);
        assert_eq!(rows[2].counts.streaming, 6);
        assert_eq!(rows[2].phase, Phase::Hold);
        assert_eq!(rows[1].phase, Phase::Ramp);
    }

    #[test]
    fn a_whep_report_has_the_html_report_and_the_summary_rows() {
        let mut r = RunReport {
            name: "w".into(),
            mode: Mode::Whep,
            whep: Some(WhepSummary {
                viewers: 3,
                receiving: 3,
                ..WhepSummary::default()
            }),
            ..RunReport::default()
        };
        r.summary.pass = true;
        let table = crate::report::summary_table(&[&r]);
        assert!(
            table.contains("| WHEP viewers receiving | 3 / 3 |"),
            "{table}"
        );
        let html = crate::report::html::render("t", &[&r]);
        assert!(html.contains("WHEP viewers receiving"), "{html}");
        assert!(html.contains("mode: whep"), "{html}");
        let back = crate::report::parse_run(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back.mode, Mode::Whep);
        assert_eq!(back.whep, r.whep);
    }
}
