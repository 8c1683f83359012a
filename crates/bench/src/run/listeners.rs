//! ICY listeners and HLS players: the audio pipeline of a run. An optional source is pushed
//! first, the workers ramp and hold their listeners, the server is sampled every second, and
//! the [`Aggregator`] turns the workers' per-second ticks into the timeline and the summary;
//! the verdict needs no listener starved or failed and every non-stalled one streaming at the
//! end. A run whose every connection fails stops early ([`crate::run::early_stop`]).

use crate::icy::engine::EngineSpec;
use crate::mode::Mode;
use crate::observe::sampler::Sampler;
use crate::report::progress::Progress;
use crate::report::summary::{Aggregator, RunReport};
use crate::run::plan::{Plan, RunError};
use crate::run::worker::{Tick, WorkerMsg, WorkerSet, WorkerSpec};
use crate::source::Source;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Runs an ICY or HLS plan to the end and returns its report (nothing is written).
///
/// Errors: an invalid profile, no URL, a source or workers that could not start.
pub fn execute(plan: &Plan) -> Result<RunReport, RunError> {
    plan.profile.validate()?;
    if plan.urls.is_empty() {
        return Err(RunError::NoUrl);
    }
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
    // What the server says it is, for the report (one short request before the listeners).
    let server = crate::observe::meta::server_header(&plan.urls[0], Duration::from_secs(2));
    let nproc = plan.profile.effective_workers();
    let start_unix_ms = unix_ms() + if nproc > 0 { 500 } else { 100 };
    let nspecs = nproc.max(1);
    let specs: Vec<WorkerSpec> = (0..nspecs)
        .map(|w| {
            let spec = EngineSpec {
                worker: w,
                workers: nspecs,
                urls: plan.urls.clone(),
                profile: plan.profile.clone(),
                start_unix_ms,
                thread_cpu: nproc == 0,
            };
            match plan.mode {
                Mode::Hls => WorkerSpec::Hls(spec),
                _ => WorkerSpec::Icy(spec),
            }
        })
        .collect();
    let launcher = if nproc > 0 {
        Some(plan.launcher().map_err(RunError::Exe)?)
    } else {
        None
    };
    let (tx, rx) = mpsc::channel();
    let meta = crate::observe::meta::RunMeta::collect(start_unix_ms, server);
    let mut workers = WorkerSet::start(specs, launcher.as_ref(), tx)?;
    let (stx, srx) = mpsc::channel();
    let sampler = plan
        .sample
        .clone()
        .map(|t| Sampler::start(t, start_unix_ms, stx));
    let progress = Progress::new(plan.progress, &plan.name, plan.profile.listeners);
    let mut agg = Aggregator::default();
    let mut live_workers = nspecs;
    let budget = plan.profile.ramp_secs() + plan.profile.hold.0 + 30.0;
    let deadline = Instant::now() + Duration::from_secs_f64(budget);
    let mut stopped = false;
    let started = Instant::now();
    let mut ever_connected = false;
    while live_workers > 0 {
        match rx.recv_timeout(Duration::from_millis(250)) {
            Ok(WorkerMsg::Tick(Tick::Listeners(t))) => {
                agg.add_tick(t);
                while let Ok(s) = srx.try_recv() {
                    agg.add_sample(s);
                }
                let live = agg.live();
                progress.update(&live);
                ever_connected |= live.counts.connected() > 0;
                if !stopped {
                    let why = crate::run::early_stop::all_failing(
                        started.elapsed(),
                        &live.counts,
                        ever_connected,
                    );
                    if let Some(why) = why {
                        errors.push(why);
                        workers.stop();
                        stopped = true;
                    }
                }
            }
            Ok(WorkerMsg::Exited { worker, error }) => {
                live_workers -= 1;
                if let Some(e) = error {
                    errors.push(format!("worker {worker}: {e}"));
                }
            }
            Ok(WorkerMsg::Tick(_)) | Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if !stopped && Instant::now() > deadline {
            errors.push("run exceeded its time budget; workers stopped".into());
            workers.stop();
            stopped = true;
        }
        if let Some(s) = &source {
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
    workers.join(Duration::from_secs(5));
    if let Some(s) = sampler {
        s.stop();
    }
    while let Ok(s) = srx.try_recv() {
        agg.add_sample(s);
    }
    if let Some(s) = source {
        s.stop();
    }
    let (timeline, mut summary, ttfb, longest_gaps) = agg.finish(&plan.profile, nproc);
    // Whole-bench CPU: workers' processes plus this process (which includes in-process engines).
    let me = crate::observe::rusage::process();
    let own = (me.user_us + me.sys_us) as f64 / 1e6;
    summary.bench_cpu_total_s = if nproc > 0 {
        summary.bench_cpu_total_s + own
    } else {
        own
    };
    if !errors.is_empty() {
        summary.pass = false;
    }
    progress.finish(&summary);
    Ok(RunReport {
        name: plan.name.clone(),
        mode: plan.mode,
        meta,
        urls: plan.urls.clone(),
        profile: Some(plan.profile.clone()),
        start_unix_ms,
        workers: nproc,
        timeline,
        ttfb,
        longest_gaps,
        summary,
        errors,
        ground_truth: agg.ground_truth(),
        ..RunReport::default()
    })
}
