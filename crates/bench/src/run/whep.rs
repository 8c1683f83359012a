//! One `throng bench run --whep URL -n N` run: spreads the viewers over worker processes (the
//! current executable re-run as `bench whep-worker`, one per CPU unless `--workers` says
//! otherwise, `--workers 0` for one in-process engine), each reading its [`WhepSpec`] as a JSON
//! line on stdin and writing one [`WhepTick`] JSON line per second and a last one with its
//! [`crate::whep::viewer::WhepResult`]; all start their second 0 at a common wall-clock time, as the ICY
//! engine's workers do, and give their viewers their own loopback addresses on a shared
//! socket per thread (a loopback server) or their own sockets over `--bind-range`. With
//! `--latency-source` the run first pushes a stamped Ogg/Opus source ([`crate::whep::probe`])
//! and, over the hold, a few ICY listeners of that mount measure the same mouth-to-ear latency.
//! The merged [`WhepReport`] goes to `report-whep.json` and a text summary to stdout; the
//! verdict is PASS when no viewer failed or was degraded.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::profile::Profile;
use crate::run::worker::{serve_json_worker, spawn_json_worker, Launcher};
use crate::source::SourceMethod;
use crate::whep::latency::LatencyHist;
use crate::whep::probe::{IcyProbe, ProbeSource};
use crate::whep::viewer::{merge_result, run_worker, WhepArgs, WhepResult, WhepSpec, WhepTick};

/// Where and how the latency probe pushes its source.
#[derive(Debug, Clone)]
pub struct ProbeConfig {
    /// The Ogg/Opus mount URL.
    pub url: String,
    /// Source user.
    pub user: String,
    /// Source password.
    pub password: String,
    /// Request method.
    pub method: SourceMethod,
}

/// Everything a WHEP run needs.
#[derive(Debug, Clone)]
pub struct WhepPlan {
    /// WHEP endpoint URLs.
    pub urls: Vec<String>,
    /// Viewer count, ramp, hold, workers, bind range.
    pub profile: Profile,
    /// The WHEP flags.
    pub args: WhepArgs,
    /// The latency probe, if any.
    pub probe: Option<ProbeConfig>,
    /// The local server process to read CPU and memory from.
    pub server_pid: Option<u32>,
    /// Worker process launcher (default: this executable).
    pub launcher: Option<Launcher>,
}

/// The result of a WHEP run (`report-whep.json`).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct WhepReport {
    /// Viewers asked for.
    pub viewers: u32,
    /// Worker processes (0: in-process).
    pub workers: u32,
    /// Viewers whose POST got a 201 and that received media.
    pub receiving: u32,
    /// Viewers that failed to set up or received nothing.
    pub failed: u32,
    /// Viewers degraded at least once (loss over 1 % or a gap over 200 ms in a 5 s window,
    /// or packets out of order).
    pub degraded: u32,
    /// Degraded viewers by cause (a viewer may have several): `loss` (a window over 1 %),
    /// `gap` (over 200 ms), `order` (packets out of order), `silent` (no packet at the end).
    pub degraded_by: std::collections::BTreeMap<String, u32>,
    /// Longest gap of the degraded viewers, median and largest (ms).
    pub degraded_gap_p50_max_ms: Option<(u64, u64)>,
    /// Setup time, POST to first packet, median (ms).
    pub setup_p50_ms: f64,
    /// Setup time, 99th percentile (ms).
    pub setup_p99_ms: f64,
    /// Packets received per viewer per second over the hold (each viewer from the hold start
    /// or its first packet; expected 50).
    pub packets_per_viewer_second: f64,
    /// Mouth-to-ear latency (source write to viewer receipt) over every stamped packet of
    /// every viewer, median (ms); `None` without `--latency-source`.
    pub latency_p50_ms: Option<f64>,
    /// Mouth-to-ear latency, 99th percentile (ms).
    pub latency_p99_ms: Option<f64>,
    /// Mouth-to-ear latency, largest (ms).
    pub latency_max_ms: Option<f64>,
    /// Stamped packets the latency figures are made of.
    pub latency_samples: u64,
    /// The same latency for the ICY listeners of the probe mount, median (ms).
    pub icy_latency_p50_ms: Option<f64>,
    /// ICY latency, 99th percentile (ms).
    pub icy_latency_p99_ms: Option<f64>,
    /// ICY latency, largest (ms).
    pub icy_latency_max_ms: Option<f64>,
    /// Stamped packets the ICY figures are made of.
    pub icy_latency_samples: u64,
    /// CPU time of the bench's viewer engines (all workers) per viewer-second of the run (µs).
    pub client_cpu_us_per_viewer_second: f64,
    /// CPU time of the viewer engines over the hold only (set-up done) per viewer-second of
    /// the hold, by the viewers receiving (µs).
    pub client_hold_cpu_us_per_viewer_second: f64,
    /// Share of the hold the bench's driving threads spent working rather than waiting
    /// (0 to 1): near 1, the bench itself is the bottleneck and its gaps and latency are its
    /// own.
    pub client_busy_share: f64,
    /// Resident memory of the workers at the end of the hold per viewer (bytes).
    pub client_rss_per_viewer: f64,
    /// Per viewer-second of the run: datagrams received, str0m timers handled, and the
    /// workers' event-loop wake-ups (the bench's own work, for profiling).
    pub client_datagrams_timers_wakeups_per_viewer_second: (f64, f64, f64),
    /// CPU time of the server (`--pid`) per viewer-second over the run (µs).
    pub server_cpu_us_per_viewer_second: Option<f64>,
    /// The server's resident memory growth from before the run to the end of the hold, per
    /// receiving viewer (bytes).
    pub server_rss_per_viewer: Option<f64>,
    /// Run errors (a worker that failed, the probe source, the first viewer errors).
    pub errors: Vec<String>,
}

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

/// Body of the hidden `bench whep-worker`: its [`WhepSpec`] from stdin, [`WhepTick`] lines to
/// stdout; stops early when stdin closes.
///
/// Errors: no spec on stdin, or the engine could not start.
pub fn worker_command() -> anyhow::Result<()> {
    serve_json_worker(|spec: WhepSpec, stop, mut out| run_worker(&spec, &stop, |t| out.send(t)))
}

fn quantiles(h: &LatencyHist) -> (Option<f64>, Option<f64>, Option<f64>) {
    (
        h.quantile_ms(0.5),
        h.quantile_ms(0.99),
        (h.count() > 0).then(|| h.max_us as f64 / 1000.0),
    )
}

/// Runs one WHEP plan to the end and returns its report.
///
/// Errors: bad arguments, a probe source the server refuses, workers that cannot start.
pub fn execute(plan: &WhepPlan) -> anyhow::Result<WhepReport> {
    let p = &plan.profile;
    anyhow::ensure!(!plan.urls.is_empty(), "no WHEP URL given");
    anyhow::ensure!(p.listeners > 0, "-n: at least one viewer");
    let mut errors = Vec::new();
    let source = match &plan.probe {
        Some(c) => {
            let s = ProbeSource::start(&c.url, &c.user, &c.password, c.method)?;
            // Let the mount come up before viewers ask for it.
            std::thread::sleep(Duration::from_millis(1500));
            Some(s)
        }
        None => None,
    };
    let server_cpu0 = plan.server_pid.and_then(proc_cpu_us);
    let server_rss0 = plan
        .server_pid
        .and_then(|pid| crate::observe::sampler::read_proc(pid).ok())
        .map(|r| r.rss);
    let nproc = effective_workers(p);
    let nspecs = nproc.max(1);
    let start_unix_ms =
        crate::events::subscriber::unix_us() / 1000 + if nproc > 0 { 500 } else { 100 };
    let (tx, rx) = mpsc::channel::<WhepTick>();
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    let mut children = Vec::new();
    let started = Instant::now();
    for w in 0..nspecs {
        let spec = WhepSpec {
            worker: w,
            workers: nspecs,
            urls: plan.urls.clone(),
            total: p.listeners,
            ramp: p.ramp,
            hold_s: p.hold.0,
            bind_range: p.bind_range.clone(),
            start_unix_ms,
            threads: plan.args.whep_threads.clamp(1, 64) as u32,
        };
        if nproc == 0 {
            let (tx, stop) = (tx.clone(), stop.clone());
            threads.push(std::thread::spawn(move || {
                if let Err(e) = run_worker(&spec, &stop, |t| {
                    let _ = tx.send(t.clone());
                }) {
                    eprintln!("whep worker: {e}");
                }
            }));
        } else {
            let l = match &plan.launcher {
                Some(l) => l.clone(),
                None => Launcher::current_exe()?,
            };
            let (child, stdin, reader) =
                spawn_json_worker(&l.program, "whep-worker", &spec, tx.clone())?;
            threads.push(reader);
            children.push((child, Some(stdin)));
        }
    }
    drop(tx);
    let ramp_s = p.listeners as f64 / p.ramp.max(0.001);
    let hold_start_unix_us = (start_unix_ms as f64 * 1000.0 + ramp_s * 1e6) as u64;
    let hold_end = started + Duration::from_secs_f64(0.5 + ramp_s + p.hold.0);
    let deadline = hold_end + crate::whep::viewer::SETUP_TIMEOUT + Duration::from_secs(30);
    let mut icy = None;
    let mut server_rss1 = None;
    let mut results: Vec<Option<WhepResult>> = vec![None; nspecs as usize];
    while results.iter().any(Option::is_none) {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(t) => {
                if let Some(r) = t.result {
                    if let Some(slot) = results.get_mut(t.worker as usize) {
                        *slot = Some(r);
                    }
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        let now_us = crate::events::subscriber::unix_us();
        if icy.is_none() && now_us >= hold_start_unix_us {
            if let Some(c) = &plan.probe {
                if plan.args.latency_icy > 0 {
                    icy = Some(IcyProbe::start(&c.url, plan.args.latency_icy, now_us)?);
                }
            }
        }
        if server_rss1.is_none() && Instant::now() + Duration::from_millis(300) >= hold_end {
            server_rss1 = Some(
                plan.server_pid
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
    let server_cpu1 = plan.server_pid.and_then(proc_cpu_us);
    stop.store(true, Ordering::Relaxed);
    for (_, stdin) in &mut children {
        stdin.take();
    }
    for (mut c, _) in children {
        let end = Instant::now() + Duration::from_secs(5);
        while matches!(c.try_wait(), Ok(None)) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        let _ = c.wait();
    }
    for t in threads {
        let _ = t.join();
    }
    let icy_hist = match icy {
        Some(probe) => {
            let (h, errs) = probe.stop();
            errors.extend(errs.into_iter().map(|e| format!("ICY latency probe: {e}")));
            h
        }
        None => LatencyHist::default(),
    };
    if let Some(s) = source {
        if let Err(e) = s.stop() {
            errors.push(e);
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
    Ok(WhepReport {
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
    })
}

/// The text summary of a report (a few lines for the terminal).
pub fn summary_text(r: &WhepReport) -> String {
    let ms = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1} ms"));
    let mut s = format!(
        "WHEP viewers: {} asked, {} receiving, {} failed, {} degraded {:?} ({} worker processes)\n\
         setup (POST to first packet): p50 {:.0} ms, p99 {:.0} ms\n\
         packets per viewer-second over the hold: {:.1} (expected 50)\n\
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
    if r.latency_samples > 0 || r.icy_latency_samples > 0 {
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
    s += &format!("verdict: {}", if pass(r) { "PASS" } else { "FAIL" });
    s
}

/// The verdict: every viewer received, none degraded, no run error.
pub fn pass(r: &WhepReport) -> bool {
    r.failed == 0 && r.degraded == 0 && r.receiving == r.viewers && r.errors.is_empty()
}

/// Body of `throng bench run --whep`: runs, writes `report-whep.json` in `out`, prints the
/// summary, returns the verdict.
///
/// Errors: as [`execute`], or the report cannot be written.
pub fn command(plan: &WhepPlan, out: &Path) -> anyhow::Result<bool> {
    let r = execute(plan)?;
    std::fs::create_dir_all(out)?;
    let path = out.join("report-whep.json");
    std::fs::write(&path, serde_json::to_string_pretty(&r)?)?;
    println!("{}", summary_text(&r));
    println!("json:   {}", path.display());
    for e in &r.errors {
        eprintln!("error: {e}");
    }
    Ok(pass(&r))
}

/// The latency probe around a listener (ICY) run: pushes the stamped source of `probe`, lets
/// the mount come up, runs `f`, and meanwhile `icy` ICY probe listeners of the mount measure
/// mouth-to-ear latency; writes `latency-icy.json` in `out` and prints the figures. So a plain
/// `throng bench run --latency-source URL URL` gives the ICY figure next to the WHEP one.
///
/// Errors: the probe source refused, or `f`'s error.
pub fn with_probe<T>(
    probe: &ProbeConfig,
    icy: u32,
    out: &Path,
    f: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let source = ProbeSource::start(&probe.url, &probe.user, &probe.password, probe.method)?;
    std::thread::sleep(Duration::from_millis(1500));
    let listeners = IcyProbe::start(&probe.url, icy, crate::events::subscriber::unix_us())?;
    let r = f();
    let (h, mut errors) = listeners.stop();
    if let Err(e) = source.stop() {
        errors.push(e);
    }
    let (p50, p99, max) = quantiles(&h);
    let ms = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1} ms"));
    println!(
        "mouth-to-ear latency, ICY probes: p50 {}, p99 {}, max {} ({} packets)",
        ms(p50),
        ms(p99),
        ms(max),
        h.count()
    );
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
        let r = WhepReport {
            viewers: 2,
            receiving: 2,
            latency_p50_ms: Some(40.0),
            latency_samples: 10,
            ..WhepReport::default()
        };
        let s = summary_text(&r);
        assert!(s.contains("WHEP: p50 40.0 ms"), "{s}");
        assert!(s.ends_with("verdict: PASS"), "{s}");
        let bad = WhepReport { degraded: 1, ..r };
        assert!(!pass(&bad));
    }
}
