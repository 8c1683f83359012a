//! One bench run, whatever its mode: `throng bench run`'s flags become one [`Plan`] (the
//! mode chosen once by [`crate::mode::choose`]), [`execute`] runs it with the mode's pipeline
//! ([`listeners`] for ICY and HLS, [`events`], [`whep`]) over the one worker protocol
//! ([`worker`]), and every mode's outcome is one [`RunReport`], written as `report.json`,
//! `report.html` and plots. [`compare`] runs a plan per server of a scenario.

pub mod compare;
pub mod early_stop;
pub mod events;
pub mod listeners;
pub mod plan;
pub mod whep;
pub mod worker;

use crate::mode::Mode;
use crate::observe::sampler::SampleTarget;
use crate::profile::Profile;
use crate::report::summary::RunReport;
use crate::run::plan::{Plan, RunError};
use crate::run::worker::Launcher;
use crate::source::{resolve_password, SourceConfig, SourceMethod};
use crate::whep::probe::ProbeConfig;
use clap::Args;
use std::path::PathBuf;

/// Arguments of `throng bench run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Listener URLs (`http://host:port/mount`); listeners are spread round-robin over them.
    /// When every URL is an HLS playlist (`.m3u8`), each listener plays HLS like a player.
    #[arg(required = true)]
    pub urls: Vec<String>,
    /// What the simulated clients are: ICY listeners, HLS players, event-stream subscribers
    /// or WebRTC viewers. Default: HLS when the URLs end `.m3u8`, events with `--events`, WHEP
    /// with `--whep`, else ICY; choices that disagree are refused.
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,
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
    /// Output directory for `report.json`, `report.html` and the plots (and, for WHEP runs,
    /// `report-whep.json`).
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
    pub events: crate::events::EventArgs,
    /// WebRTC (WHEP) runs (`--whep`).
    #[command(flatten)]
    pub whep: crate::whep::viewer::WhepArgs,
    /// Program to run as a worker process (default: this executable, as `<exe> bench worker`).
    #[arg(long, hide = true)]
    pub worker_exe: Option<PathBuf>,
}

/// Runs one plan to the end with its mode's pipeline and returns its report (nothing is
/// written).
///
/// Errors: see [`RunError`].
pub fn execute(plan: &Plan) -> Result<RunReport, RunError> {
    match plan.mode {
        Mode::Icy | Mode::Hls => listeners::execute(plan),
        Mode::Events => events::execute(plan).map_err(RunError::Mode),
        Mode::Whep => whep::execute(plan).map_err(RunError::Mode),
    }
}

/// The plan of `throng bench run`'s flags: the mode (see [`crate::mode::choose`]), the source,
/// the server to sample and the latency probe.
///
/// Errors: modes that disagree, a source or probe without a password, a pidfile or process
/// name that names no single process.
pub fn plan_of(a: &RunArgs) -> anyhow::Result<Plan> {
    let mode = crate::mode::choose(a.mode, a.whep.whep, a.events.events, &a.urls)?;
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
    let probe = match &a.whep.latency_source {
        Some(url) => Some(ProbeConfig {
            url: url.clone(),
            user: a.source_user.clone(),
            password: resolve_password(a.source_password.as_deref(), url)?,
            method: a.source_method,
            bursts: a.whep.latency_bursts.clone(),
        }),
        None => {
            anyhow::ensure!(
                a.whep.latency_bursts.is_none(),
                "--latency-bursts needs --latency-source (the MP3 mount to push the bursts to)"
            );
            None
        }
    };
    Ok(Plan {
        name: a.name.clone(),
        mode,
        urls: a.urls.clone(),
        profile: a.profile.clone(),
        source,
        sample,
        launcher: a.worker_exe.clone().map(Launcher::program),
        progress: !a.no_progress,
        events: a.events.clone(),
        whep: a.whep.clone(),
        probe,
    })
}

/// Body of `throng bench run`: runs, writes the reports (`report.json`, `report.html`, the
/// plots; `report-whep.json` too for a WHEP run) and returns the verdict (true = PASS).
///
/// Errors: see [`plan_of`] and [`execute`], or reports that cannot be written.
pub fn run_command(a: RunArgs) -> anyhow::Result<bool> {
    let plan = plan_of(&a)?;
    let report = match (&plan.probe, plan.mode) {
        // A listener run beside the latency probe: ICY probes measure while it runs.
        (Some(probe), Mode::Icy | Mode::Hls) => {
            crate::run::whep::with_probe(probe, plan.whep.latency_icy, &a.out, || {
                Ok(execute(&plan)?)
            })?
        }
        _ => execute(&plan)?,
    };
    let paths = crate::report::write_run(&a.out, &report)?;
    println!("{}", crate::report::summary_table(&[&report]));
    if let Some(w) = &report.whep {
        // The WHEP figures in full, where scripts read them since WHEP runs began.
        let path = a.out.join("report-whep.json");
        std::fs::write(&path, serde_json::to_string_pretty(w)?)?;
        println!("{}", crate::run::whep::summary_text(w));
        println!("json:   {}", path.display());
    }
    println!("report: {}", paths.html.display());
    println!("json:   {}", paths.json.display());
    for e in &report.errors {
        eprintln!("error: {e}");
    }
    // Why it failed, on the console: the criterion, for how many, the first error kinds.
    for why in crate::report::verdict::reasons(&report) {
        eprintln!("FAIL: {why}");
    }
    Ok(report.summary.pass)
}
