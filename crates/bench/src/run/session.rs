//! One run, start to verdict, whatever holds its listeners (this machine's workers, or agents
//! on other hosts): the source and latency probe pushed first, the hosts started at a common
//! second 0, the server sampled, the events groups' title changes made, and every merged second
//! turned into the timeline, the live outputs (progress, `/metrics`, the NDJSON timeline) and
//! the thresholds' live states (one with `abort-on-fail` stops the run when it fails); at the
//! end the report, its mode summaries and notes, and the verdict.
//!
//! A run whose every connection fails and none streams stops early ([`crate::run::early_stop`]);
//! one that overruns its stages by a minute is stopped. The hosts are a [`Hosts`]: a
//! [`LocalHost`] here, or the controller's agents (`crate::dist`).

use crate::mode::Mode;
use crate::observe::sampler::Sampler;
use crate::profile::slice::{unix_us, RunClock};
use crate::report::progress::Progress;
use crate::report::summary::{Aggregator, GroupInfo, Lost, RunReport};
use crate::report::threshold::Threshold;
use crate::run::live::{AgentLive, GroupLive, LiveState, MetricsServer};
use crate::run::local::{HostEvent, LocalHost};
use crate::run::plan::RunError;
use crate::scenario::plan::Plan;
use crate::source::Source;
use crate::whep::bursts::BurstSchedule;
use crate::whep::probe::{IcyProbe, LatencySource};
use std::io::Write;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Whatever holds a run's listeners: one event at a time, merged over every host.
pub trait Hosts {
    /// The next event, waiting at most `wait`.
    fn next(&mut self, wait: Duration) -> HostEvent;
    /// Stops every listener now (each host sends its last second).
    fn stop(&mut self);
    /// Waits for the hosts to end.
    fn join(&mut self, grace: Duration);
    /// Worker processes in all.
    fn processes(&self) -> u32;
    /// The agents, live (a run over several machines).
    fn agents_live(&self) -> Vec<AgentLive> {
        Vec::new()
    }
    /// The agents' part, for the report.
    fn agents_report(&self) -> Vec<serde_json::Value> {
        Vec::new()
    }
    /// CPU the hosts used outside their merged engines' own count (µs).
    fn extra_cpu_us(&self) -> u64 {
        0
    }
}

impl Hosts for LocalHost {
    fn next(&mut self, wait: Duration) -> HostEvent {
        LocalHost::next(self, wait)
    }
    fn stop(&mut self) {
        LocalHost::stop(self)
    }
    fn join(&mut self, grace: Duration) {
        LocalHost::join(self, grace)
    }
    fn processes(&self) -> u32 {
        self.processes
    }
}

/// What the hosts are started with.
#[derive(Debug, Clone)]
pub struct Start {
    /// Second 0 of the run on the run's clock (ms since the Unix epoch).
    pub start_unix_ms: u64,
    /// The latency probe's burst schedule, for WHEP viewers.
    pub bursts: Option<BurstSchedule>,
    /// The run's clock.
    pub clock: Arc<RunClock>,
}

/// How long before second 0 the hosts are started: long enough for worker processes (and
/// agents) to be ready.
pub const LEAD: Duration = Duration::from_millis(600);

/// Runs `plan` on the hosts `start` starts, and returns its report, judged.
///
/// Errors: see [`RunError`] (a plan that makes no sense, a source the server refuses, hosts
/// that cannot start).
pub fn run(
    plan: &Plan,
    lead: Duration,
    start: impl FnOnce(&Start) -> Result<Box<dyn Hosts>, RunError>,
) -> Result<RunReport, RunError> {
    plan.validate().map_err(RunError::Plan)?;
    let cpu0 = crate::observe::rusage::process();
    let clock = Arc::new(RunClock::new(0));
    let mut errors = Vec::new();
    let source = match &plan.source {
        Some(cfg) => {
            let s = Source::start(cfg)?;
            // Let the server fill its burst buffer before listeners arrive.
            std::thread::sleep(Duration::from_millis(1500));
            Some(s)
        }
        None => None,
    };
    let probe = match &plan.probe {
        Some(c) => {
            let s = LatencySource::start(c)?;
            std::thread::sleep(Duration::from_millis(1500));
            Some(s)
        }
        None => None,
    };
    let first_url = plan.groups[0].urls[0].clone();
    let server = crate::observe::meta::server_header(&first_url, Duration::from_secs(2));
    let start_unix_ms = unix_us() / 1000 + lead.as_millis() as u64;
    let info = Start {
        start_unix_ms,
        bursts: probe.as_ref().and_then(|p| p.bursts().cloned()),
        clock: clock.clone(),
    };
    let meta = crate::observe::meta::RunMeta::collect(start_unix_ms, server);
    let mut hosts = start(&info)?;
    let (stx, srx) = mpsc::channel();
    let sampler = plan
        .sample
        .clone()
        .map(|t| Sampler::start(t, start_unix_ms, stx));
    let live = Arc::new(Mutex::new(LiveState::default()));
    let metrics = match &plan.live.metrics_listen {
        Some(addr) => Some(
            MetricsServer::start(addr, live.clone())
                .map_err(|e| RunError::Plan(format!("--metrics-listen {addr}: {e}")))?,
        ),
        None => None,
    };
    let mut triggers = Vec::new();
    for (g, gp) in plan.groups.iter().enumerate() {
        if gp.mode == Mode::Events {
            let t = crate::run::triggers::Triggers::start(gp, start_unix_ms, clock.clone())
                .map_err(RunError::Mode)?;
            triggers.push((g, t));
        }
    }
    let icy_probe = match (&plan.probe, plan.latency_icy) {
        (Some(p), n) if n > 0 && p.bursts.is_none() => {
            Some(IcyProbe::start(&p.url, n, start_unix_ms * 1000)?)
        }
        _ => None,
    };
    let mut timeline = match &plan.live.timeline {
        Some(p) => {
            if let Some(d) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(d).ok();
            }
            Some(std::io::BufWriter::new(std::fs::File::create(p).map_err(
                |e| RunError::Plan(format!("--out-timeline {}: {e}", p.display())),
            )?))
        }
        None => None,
    };
    let infos: Vec<GroupInfo> = plan
        .groups
        .iter()
        .map(|g| GroupInfo {
            name: g.name.clone(),
            mode: g.mode,
            urls: g.urls.clone(),
            schedule: g.schedule.clone(),
        })
        .collect();
    let mut agg = Aggregator::new(infos, plan.stages.clone());
    let progress = Progress::new(
        plan.live.progress,
        &plan.name,
        plan.peak(),
        plan.stages.stages.len(),
    );
    let mut lost: Vec<Lost> = Vec::new();
    let deadline = Instant::now() + lead + Duration::from_secs_f64(plan.duration_s() + 60.0);
    let mut stopped = false;
    let started = Instant::now();
    let mut ever_connected = false;
    loop {
        match hosts.next(Duration::from_millis(250)) {
            HostEvent::Second(m) => {
                while let Ok(s) = srx.try_recv() {
                    agg.add_sample(s);
                }
                agg.add_second(&m);
                let Some(row) = agg.rows().last().cloned() else {
                    continue;
                };
                progress.update(&row);
                if let Some(w) = timeline.as_mut() {
                    let mut line = serde_json::to_value(&row).unwrap_or_default();
                    if let Some(o) = line.as_object_mut() {
                        o.insert(
                            "unix_ms".into(),
                            (start_unix_ms + u64::from(row.second) * 1000 + 1000).into(),
                        );
                    }
                    let _ = writeln!(w, "{line}").and_then(|_| w.flush());
                }
                let own = crate::observe::rusage::process();
                let (figs, (total, total_h)) =
                    agg.figures(own.user_us + own.sys_us + hosts.extra_cpu_us());
                let states = live_thresholds(&plan.thresholds, plan, &figs, &total, &total_h);
                {
                    let mut st = live.lock().unwrap_or_else(|p| p.into_inner());
                    st.groups = plan
                        .groups
                        .iter()
                        .zip(agg.latest())
                        .zip(&figs)
                        .map(|((g, snap), (_, hists))| GroupLive {
                            name: g.name.clone(),
                            snap: snap.clone(),
                            hists: hists.clone(),
                        })
                        .collect();
                    st.thresholds = states.iter().map(|(t, ok)| (t.name(), *ok)).collect();
                    st.server_cpu_cores = row
                        .server
                        .as_ref()
                        .map(|s| (s.cpu_user_pct + s.cpu_sys_pct) / 100.0);
                    st.server_rss_bytes = row.server.as_ref().map(|s| s.rss_bytes);
                    st.bench_cpu_s = total.bench_cpu_total_s;
                    st.elapsed_s = row.second + 1;
                    st.stage = row.stage + 1;
                    st.agents = hosts.agents_live();
                }
                ever_connected |= row.total.connected() > 0;
                if !stopped {
                    let elapsed = f64::from(row.second + 1);
                    if let Some((t, _)) = states
                        .iter()
                        .find(|(t, ok)| !ok && t.abort_on_fail && elapsed >= t.delay_abort_eval_s)
                    {
                        errors.push(format!(
                            "threshold {} failed at {} s: the run was aborted (abort-on-fail)",
                            t.name(),
                            row.second + 1
                        ));
                        hosts.stop();
                        stopped = true;
                    }
                }
                if !stopped {
                    let mut tot = crate::stats::Snapshot::default();
                    for s in agg.latest() {
                        tot.merge_counts(s);
                    }
                    if let Some(why) =
                        crate::run::early_stop::all_failing(started.elapsed(), &tot, ever_connected)
                    {
                        errors.push(why);
                        hosts.stop();
                        stopped = true;
                    }
                }
                if m.last {
                    break;
                }
            }
            HostEvent::Error(e) => errors.push(e),
            HostEvent::Lost(l) => lost.push(l),
            HostEvent::Finished => break,
            HostEvent::Idle => {}
        }
        if !stopped && Instant::now() > deadline {
            errors.push("run exceeded its time budget; listeners stopped".into());
            hosts.stop();
            stopped = true;
        }
        for s in source.iter() {
            if let Some(e) = s
                .stats()
                .error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
            {
                errors.push(format!("source: {e}"));
            }
        }
    }
    hosts.join(Duration::from_secs(5));
    if let Some(s) = sampler {
        s.stop();
    }
    while let Ok(s) = srx.try_recv() {
        agg.add_sample(s);
    }
    let mut changes = 0;
    for (_, t) in triggers {
        let (made, e) = t.stop();
        changes += made;
        if let Some(e) = e {
            errors.push(e);
        }
    }
    let icy_latency = icy_probe.map(|p| p.stop());
    let probe_result = probe.map(|p| p.stop());
    if let Some(s) = source {
        s.stop();
    }
    let own = crate::observe::rusage::process();
    let (timeline_rows, groups, summary, hists, ground_truth) =
        agg.finish(own.user_us + own.sys_us + hosts.extra_cpu_us());
    let mut report = RunReport {
        name: plan.name.clone(),
        mode: plan.groups[0].mode,
        meta,
        urls: plan.groups.iter().flat_map(|g| g.urls.clone()).collect(),
        profile: plan.profile.clone(),
        scenario: plan.scenario.clone(),
        start_unix_ms,
        workers: hosts.processes(),
        summary,
        groups,
        hists,
        timeline: timeline_rows,
        errors,
        lost,
        agents: hosts.agents_report(),
        ground_truth,
        process_cpu_s: ((own.user_us + own.sys_us).saturating_sub(cpu0.user_us + cpu0.sys_us))
            as f64
            / 1e6,
        ..RunReport::default()
    };
    notes(plan, &mut report);
    if plan.groups.iter().any(|g| g.mode == Mode::Events) {
        report.events = Some(crate::report::modes::events(&report, changes));
    }
    if plan.groups.iter().any(|g| g.mode == Mode::Whep) {
        let mut w = crate::report::modes::whep(&report, plan.server_pid());
        if let Some((hist, errs)) = icy_latency {
            w.icy_latency_p50_ms = hist.quantile_ms(0.5);
            w.icy_latency_p99_ms = hist.quantile_ms(0.99);
            w.icy_latency_max_ms = hist.max_ms();
            w.icy_latency_samples = hist.count();
            w.errors.extend(errs);
        }
        match &probe_result {
            Some(Ok(Some(late))) => w.latency_source_late_max_ms = Some(*late as f64 / 1000.0),
            Some(Err(e)) => w.errors.push(format!("latency source: {e}")),
            _ => {}
        }
        // The summary keeps every run error (its verdict is the run's), the report gains the
        // probes'.
        for e in &w.errors {
            if !report.errors.contains(e) {
                report.errors.push(e.clone());
            }
        }
        report.whep = Some(w);
    }
    let min_rate = plan.min_rate();
    crate::report::verdict::judge(&mut report, &plan.thresholds, min_rate);
    progress.finish(&report.summary);
    if let Some(m) = metrics {
        // The final figures, for a last scrape.
        let (figs, _) = agg.figures(0);
        {
            let mut st = live.lock().unwrap_or_else(|p| p.into_inner());
            for (g, (_, h)) in st.groups.iter_mut().zip(figs) {
                g.hists = h;
            }
            st.thresholds = report
                .thresholds
                .iter()
                .map(|o| (o.name.clone(), o.pass))
                .collect();
        }
        if plan.live.metrics_linger_s > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(plan.live.metrics_linger_s));
        }
        m.stop();
    }
    Ok(report)
}

/// Every threshold's state now.
fn live_thresholds<'a>(
    thresholds: &'a [Threshold],
    plan: &Plan,
    groups: &[(
        crate::report::summary::Summary,
        crate::report::summary::Hists,
    )],
    total: &crate::report::summary::Summary,
    total_h: &crate::report::summary::Hists,
) -> Vec<(&'a Threshold, bool)> {
    thresholds
        .iter()
        .map(|t| {
            let (s, h) = match &t.group {
                None => (total, total_h),
                Some(name) => match plan.groups.iter().position(|g| &g.name == name) {
                    Some(i) => (&groups[i].0, &groups[i].1),
                    None => return (t, false),
                },
            };
            (t, t.judge(s, h).pass)
        })
        .collect()
}

/// The notes of a run: a given bitrate the stream contradicts, media that could not be
/// verified.
fn notes(plan: &Plan, r: &mut RunReport) {
    for (g, rep) in plan.groups.iter().zip(&r.groups) {
        let s = &rep.summary;
        if let (Some(given), Some(measured)) = (g.bitrate_kbps, s.bitrate_kbps_measured) {
            if (measured - given).abs() > given * 0.1 {
                r.notes.push(format!(
                    "group {}: the bitrate given ({given:.0} kbit/s) disagrees with the stream's: {measured:.1} kbit/s as delivered (bytes over media time); the verdict does not use it",
                    g.name
                ));
            }
        }
        if s.unverified > 0 {
            r.notes.push(format!(
                "group {}: {} sessions of a format the bench cannot verify (not MP3, ADTS or Ogg): judged by {}",
                g.name,
                s.unverified,
                if g.bitrate_kbps.is_some() {
                    "their bytes at the bitrate given, and gaps"
                } else {
                    "gaps only (give --bitrate-kbps to judge their rate from bytes)"
                }
            ));
        }
    }
}

/// Runs `plan` on this machine.
///
/// Errors: see [`run`].
pub fn run_here(plan: &Plan) -> Result<RunReport, RunError> {
    let launcher = plan
        .worker_exe
        .clone()
        .map(crate::run::worker::Launcher::program);
    run(plan, LEAD, |s| {
        let share = crate::run::local::HostShare {
            groups: plan
                .groups
                .iter()
                .map(|g| crate::run::local::GroupShare {
                    plan: g.clone(),
                    segment: crate::profile::segment::ExecutionSegment::whole(),
                })
                .collect(),
            start_unix_ms: s.start_unix_ms,
            clock_offset_us: 0,
            bursts: s.bursts.clone(),
            max_workers: None,
        };
        let host = LocalHost::start(&share, launcher, s.clock.clone())?;
        Ok(Box::new(host) as Box<dyn Hosts>)
    })
}
