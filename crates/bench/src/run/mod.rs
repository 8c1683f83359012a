//! One bench run: optional source, workers, server sampler, progress, aggregation, reports.

pub mod compare;
pub mod events;
pub mod whep;
pub mod worker;

use crate::icy::engine::EngineSpec;
use crate::observe::sampler::{SampleTarget, Sampler};
use crate::profile::{Profile, ProfileError};
use crate::report::progress::Progress;
use crate::report::summary::{Aggregator, RunReport};
use crate::run::worker::{Launcher, WorkerError, WorkerMsg, WorkerSet};
use crate::source::{resolve_password, Source, SourceConfig, SourceError, SourceMethod};
use clap::Args;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use thiserror::Error;

/// Arguments of `throng bench run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Listener URLs (`http://host:port/mount`); listeners are spread round-robin over them.
    /// When every URL is an HLS playlist (`.m3u8`), each listener plays HLS like a player.
    #[arg(required = true)]
    pub urls: Vec<String>,
    /// The load profile.
    #[command(flatten)]
    pub profile: Profile,
    /// Push this file (MP3, AAC, Ogg) as a live source to `--source-url` (default: the first
    /// listener URL) before the listeners start.
    #[arg(long)]
    pub source: Option<PathBuf>,
    /// Mount URL for `--source`.
    #[arg(long)]
    pub source_url: Option<String>,
    /// Source user.
    #[arg(long, default_value = "source")]
    pub source_user: String,
    /// Source password (no default: required with `--source`, unless the
    /// `THRONG_SOURCE_PASSWORD` environment variable or the source URL has one).
    #[arg(long)]
    pub source_password: Option<String>,
    /// Source request method.
    #[arg(long, value_enum, default_value_t = SourceMethod::Put)]
    pub source_method: SourceMethod,
    /// Sample this local server process (and its children) every second.
    #[arg(long, group = "sample_target")]
    pub pid: Option<u32>,
    /// Sample the local process whose id is in this pidfile (e.g. `throng serve --pid-file`).
    #[arg(long, group = "sample_target")]
    pub pid_file: Option<PathBuf>,
    /// Sample the one local process whose command line contains PATTERN (like `pgrep -f`; an
    /// error when none or several unrelated processes match).
    #[arg(long, value_name = "PATTERN", group = "sample_target")]
    pub pid_name: Option<String>,
    /// Sample a Prometheus `/metrics` URL every second (for a remote server).
    #[arg(long, group = "sample_target")]
    pub metrics_url: Option<String>,
    /// Output directory for `report.json` and `report.html`.
    #[arg(long, default_value = "bench-results")]
    pub out: PathBuf,
    /// Name of the run (used in reports).
    #[arg(long, default_value = "run")]
    pub name: String,
    /// No live progress display.
    #[arg(long)]
    pub no_progress: bool,
    /// Event-stream runs (`--events`) and their title changes.
    #[command(flatten)]
    pub events: crate::run::events::EventArgs,
    /// WebRTC (WHEP) runs (`--whep`).
    #[command(flatten)]
    pub whep: crate::whep::viewer::WhepArgs,
    /// Program to run as a worker process (default: this executable, as `<exe> bench worker`).
    #[arg(long, hide = true)]
    pub worker_exe: Option<PathBuf>,
}

/// Everything needed for one run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Name of the run.
    pub name: String,
    /// Listener URLs.
    pub urls: Vec<String>,
    /// The profile.
    pub profile: Profile,
    /// Source to push first, if any.
    pub source: Option<SourceConfig>,
    /// Server to sample, if any.
    pub sample: Option<SampleTarget>,
    /// Worker process launcher (default: this executable).
    pub launcher: Option<Launcher>,
    /// Show the live progress display.
    pub progress: bool,
}

/// Errors of a run.
#[derive(Debug, Error)]
pub enum RunError {
    /// The profile is invalid.
    #[error("profile: {0}")]
    Profile(#[from] ProfileError),
    /// The source could not start.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// Workers could not start.
    #[error(transparent)]
    Worker(#[from] WorkerError),
    /// The current executable could not be found.
    #[error("locating the worker executable: {0}")]
    Exe(std::io::Error),
    /// No URL.
    #[error("no listener URL given")]
    NoUrl,
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Runs one plan to the end and returns its report (nothing is written).
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
    let specs: Vec<EngineSpec> = (0..nspecs)
        .map(|w| EngineSpec {
            worker: w,
            workers: nspecs,
            urls: plan.urls.clone(),
            profile: plan.profile.clone(),
            start_unix_ms,
            thread_cpu: nproc == 0,
        })
        .collect();
    let launcher = if nproc > 0 {
        Some(match &plan.launcher {
            Some(l) => l.clone(),
            None => Launcher::current_exe().map_err(RunError::Exe)?,
        })
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
    while live_workers > 0 {
        match rx.recv_timeout(Duration::from_millis(250)) {
            Ok(WorkerMsg::Tick(t)) => {
                agg.add_tick(t);
                while let Ok(s) = srx.try_recv() {
                    agg.add_sample(s);
                }
                progress.update(&agg.live());
            }
            Ok(WorkerMsg::Exited { worker, error }) => {
                live_workers -= 1;
                if let Some(e) = error {
                    errors.push(format!("worker {worker}: {e}"));
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
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
        events: None,
    })
}

/// Body of `throng bench run`: runs, writes the reports and returns the verdict (true = PASS).
pub fn run_command(a: RunArgs) -> anyhow::Result<bool> {
    let source = match &a.source {
        Some(f) => {
            let url = a.source_url.clone().unwrap_or_else(|| a.urls[0].clone());
            let password = resolve_password(a.source_password.as_deref(), &url)?;
            Some(SourceConfig {
                file: f.clone(),
                url,
                user: a.source_user.clone(),
                password,
                method: a.source_method,
                content_type: None,
            })
        }
        None => None,
    };
    let sample = if let Some(p) = a.pid {
        Some(SampleTarget::Pid(p))
    } else if let Some(f) = &a.pid_file {
        Some(SampleTarget::Pid(crate::observe::pidfind::pid_from_file(
            f,
        )?))
    } else if let Some(n) = &a.pid_name {
        Some(SampleTarget::Pid(crate::observe::pidfind::pid_by_name(n)?))
    } else {
        a.metrics_url.clone().map(SampleTarget::Metrics)
    };
    if a.whep.whep {
        let pid = match &sample {
            Some(SampleTarget::Pid(p)) => Some(*p),
            _ => None,
        };
        let probe = match &a.whep.latency_source {
            Some(url) => Some(crate::run::whep::ProbeConfig {
                url: url.clone(),
                user: a.source_user.clone(),
                password: resolve_password(a.source_password.as_deref(), url)?,
                method: a.source_method,
            }),
            None => None,
        };
        let plan = crate::run::whep::WhepPlan {
            urls: a.urls.clone(),
            profile: a.profile.clone(),
            args: a.whep.clone(),
            probe,
            server_pid: pid,
            launcher: a.worker_exe.as_ref().map(|p| Launcher {
                program: p.clone(),
                args: vec!["bench".into(), "whep-worker".into()],
            }),
        };
        return crate::run::whep::command(&plan, &a.out);
    }
    if a.events.events {
        let plan = crate::run::events::EventsPlan {
            name: a.name.clone(),
            urls: a.urls.clone(),
            profile: a.profile.clone(),
            args: a.events.clone(),
            sample,
            launcher: a.worker_exe.as_ref().map(|p| Launcher {
                program: p.clone(),
                args: vec!["bench".into(), "events-worker".into()],
            }),
        };
        return crate::run::events::command(&plan, &a.out);
    }
    let plan = Plan {
        name: a.name.clone(),
        urls: a.urls.clone(),
        profile: a.profile.clone(),
        source,
        sample,
        launcher: a.worker_exe.as_ref().map(|p| Launcher {
            program: p.clone(),
            args: vec!["bench".into(), "worker".into()],
        }),
        progress: !a.no_progress,
    };
    let report = match &a.whep.latency_source {
        Some(url) => {
            let probe = crate::run::whep::ProbeConfig {
                url: url.clone(),
                user: a.source_user.clone(),
                password: resolve_password(a.source_password.as_deref(), url)?,
                method: a.source_method,
            };
            crate::run::whep::with_probe(&probe, a.whep.latency_icy, &a.out, || {
                Ok(execute(&plan)?)
            })?
        }
        None => execute(&plan)?,
    };
    let paths = crate::report::write_run(&a.out, &report)?;
    println!("{}", crate::report::summary_table(&[&report]));
    println!("report: {}", paths.html.display());
    println!("json:   {}", paths.json.display());
    if !report.errors.is_empty() {
        for e in &report.errors {
            eprintln!("error: {e}");
        }
    }
    Ok(report.summary.pass)
}
