//! `throng bench run`: a run from flags (`URL... -n N --hold 30s`, one group) or from a
//! scenario file (`scenario.toml`, any groups and stages), with thresholds, live outputs and
//! reports. The plan ([`plan`], one type for both) runs here ([`session::run_here`], this
//! machine's workers: [`local`], [`worker`]) or over agents on other hosts (`crate::dist`);
//! every run ends in the same report (`report.json`, `report.html`, plots, `--junit`), judged by
//! its thresholds. [`compare`] runs a plan per server of a compare scenario.

pub mod compare;
pub mod early_stop;
pub mod live;
pub mod local;
pub mod plan;
pub mod session;
pub mod triggers;
pub mod worker;

use crate::mode::Mode;
use crate::observe::sampler::SampleTarget;
use crate::profile::Profile;
use crate::report::summary::RunReport;
use crate::report::threshold::{with_defaults, Threshold};
use crate::run::plan::{GroupPlan, Plan, RunError};
use crate::scenario::plan::{AgentEntry, EventsOptions, Live};
use crate::source::{resolve_password, SourceConfig, SourceMethod};
use crate::whep::probe::ProbeConfig;
use clap::Args;
use std::path::{Path, PathBuf};

/// Arguments of `throng bench run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Listener URLs (`http://host:port/mount`; listeners are spread round-robin over them),
    /// or one scenario file (`scenario.toml`: groups, stages, thresholds; see
    /// docs/LOAD-TESTING.md). With a scenario the profile flags below do not apply (its groups
    /// carry theirs); `--set` changes its parameters.
    #[arg(required = true, value_name = "URL|SCENARIO.toml")]
    pub urls: Vec<String>,
    /// Set a scenario parameter, `NAME=VALUE` (repeatable): `${NAME}` in the file.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// What the simulated clients are: ICY listeners, HLS players, event-stream subscribers
    /// or WebRTC viewers. Default: HLS when the URLs end `.m3u8`, events with `--events`, WHEP
    /// with `--whep`, else ICY; choices that disagree are refused.
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,
    /// The load profile.
    #[command(flatten)]
    pub profile: Profile,
    /// A threshold, k6-style (repeatable): `ttfb.p99<500ms`, `starved.rate<0.1%`,
    /// `failed.count<1`, `mouth-to-ear{group:webrtc}.p99<300ms`. The defaults (no listener
    /// starved, corrupt or failed, all up at the end) give way to one on the same metric.
    #[arg(long = "threshold", value_name = "EXPR")]
    pub thresholds: Vec<String>,
    /// Judge only the thresholds given (drop the defaults).
    #[arg(long)]
    pub no_default_thresholds: bool,
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
    /// `--source` play speed: 1 is real time, 0.5 pushes at half the file's pace (a source
    /// falling behind).
    #[arg(long, default_value_t = 1.0)]
    pub source_speed: f64,
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
    /// `report-whep.json`). Default: `bench-results`, or `bench-results/<name>` for a
    /// scenario (its `out`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Name of the run (used in reports; default: `run`, or the scenario's).
    #[arg(long)]
    pub name: Option<String>,
    /// No live progress display (neither the bar nor the plain lines).
    #[arg(long)]
    pub no_progress: bool,
    /// Serve the bench's live series at `http://ADDR/metrics` (Prometheus text format) while
    /// the run goes.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// Keep `/metrics` up this long after the run, for a last scrape (e.g. `5s`).
    #[arg(long, default_value = "0s")]
    pub metrics_linger: crate::profile::Secs,
    /// Write the per-second timeline as NDJSON to FILE while the run goes.
    #[arg(long, value_name = "FILE")]
    pub out_timeline: Option<PathBuf>,
    /// Write a JUnit XML report (one test case per threshold) to FILE.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Event-stream runs (`--events`) and their title changes.
    #[command(flatten)]
    pub events: crate::events::EventArgs,
    /// WebRTC (WHEP) runs (`--whep`).
    #[command(flatten)]
    pub whep: crate::whep::viewer::WhepArgs,
    /// Run over bench agents on other hosts: `HOST:PORT,...` of `throng bench agent`, or
    /// `ssh://[USER@]HOST[:PORT][/PATH-TO-THRONG]` to start one there over SSH.
    #[arg(long, value_delimiter = ',', value_name = "HOST:PORT,...")]
    pub agents: Vec<String>,
    /// With `--agents`: how long to keep trying to reach the agents (e.g. `120s`).
    #[arg(long, default_value = "10s")]
    pub agent_wait: crate::profile::Secs,
    /// With `--agents`: the CA (PEM) that signed the agents' certificates: the link is TLS.
    #[arg(long, value_name = "PEM")]
    pub agent_ca: Option<PathBuf>,
    /// Program to run as a worker process (default: this executable, as `<exe> bench worker`).
    #[arg(long, hide = true)]
    pub worker_exe: Option<PathBuf>,
}

/// The one group of a run from flags (or a compare scenario's server): `mode` on `urls` with
/// `profile`, and the events and WHEP flags.
pub fn group_of_flags(
    mode: Mode,
    urls: &[String],
    profile: &Profile,
    events: &crate::events::EventArgs,
    whep: &crate::whep::viewer::WhepArgs,
) -> GroupPlan {
    let mut g = GroupPlan::from_profile(mode.name(), mode, urls.to_vec(), profile);
    if mode == Mode::Whep && profile.max_gap == Profile::default().max_gap {
        // A WebRTC player's jitter buffer, not a stream player's seconds.
        g.judge.max_gap_ms = crate::whep::viewer::MAX_GAP.as_millis() as u32;
    }
    if mode == Mode::Events {
        g.events = EventsOptions {
            trigger_url: events.trigger_url.clone(),
            admin_user: events.admin_user.clone(),
            admin_password: events.admin_password.clone(),
            change_interval_s: events.change_interval.0,
            changes: events.changes,
            max_latency_ms: events.max_latency.0 * 1000.0,
            max_rss_per_subscriber: events.max_rss_per_subscriber,
        };
        if profile.stages.is_empty() {
            // An events run from flags holds as long as its title changes take.
            let hold = 2.0
                + f64::from(events.changes) * events.change_interval.0
                + events.max_latency.0
                + 2.0;
            g.schedule =
                crate::profile::stages::Schedule::ramp_hold(profile.listeners, profile.ramp, hold);
        }
    }
    g.whep_threads = whep.whep_threads.clamp(1, 64) as u32;
    g
}

/// The server to sample of the flags.
///
/// Errors: a pidfile or process name that names no single process.
fn sample_of(a: &RunArgs) -> anyhow::Result<Option<SampleTarget>> {
    Ok(if let Some(p) = a.pid {
        Some(SampleTarget::Pid(p))
    } else if let Some(f) = &a.pid_file {
        Some(SampleTarget::Pid(crate::observe::pidfind::pid_from_file(
            f,
        )?))
    } else if let Some(n) = &a.pid_name {
        Some(SampleTarget::Pid(crate::observe::pidfind::pid_by_name(n)?))
    } else {
        a.metrics_url.clone().map(SampleTarget::Metrics)
    })
}

/// Whether the positional arguments name a scenario file.
fn scenario_path(a: &RunArgs) -> Option<PathBuf> {
    match a.urls.as_slice() {
        [one] if one.ends_with(".toml") && !one.contains("://") => Some(PathBuf::from(one)),
        _ => None,
    }
}

/// The default thresholds of a plan's groups (see [`with_defaults`]).
fn defaults(plan: &Plan, given: Vec<Threshold>, no_defaults: bool) -> Vec<Threshold> {
    let events: Vec<&GroupPlan> = plan
        .groups
        .iter()
        .filter(|g| g.mode == Mode::Events)
        .collect();
    let max_latency = events
        .iter()
        .map(|g| g.events.max_latency_ms)
        .fold(0.0, f64::max);
    let mut all = with_defaults(given, !events.is_empty(), max_latency.max(1.0), no_defaults);
    // An events-only run with a sampled server judges the memory per subscriber, from 500
    // subscribers (below that, page-size noise).
    if !no_defaults
        && events.len() == plan.groups.len()
        && plan.sample.is_some()
        && plan.peak() >= crate::events::MIN_SUBSCRIBERS_FOR_MEMORY
    {
        let per = events[0].events.max_rss_per_subscriber;
        if let Ok(mut t) = Threshold::parse(&format!("server-rss-per-listener.value<{per}B")) {
            t.default = true;
            t.op = crate::report::threshold::Op::Le;
            all.push(t);
        }
    }
    all
}

/// The plan of `throng bench run`'s flags, or of its scenario file with the flags applied.
///
/// Errors: modes that disagree, a bad scenario, a bad threshold, a source or probe without a
/// password, a pidfile or process name that names no single process.
pub fn plan_of(a: &RunArgs) -> anyhow::Result<(Plan, PathBuf)> {
    let mut given: Vec<Threshold> = a
        .thresholds
        .iter()
        .map(|t| Threshold::parse(t))
        .collect::<Result<_, _>>()?;
    let (mut plan, out, no_defaults) = match scenario_path(a) {
        Some(path) => {
            let file = crate::scenario::read(&path, &a.set)?;
            let mut plan = file
                .plan(&path, a.source_password.as_deref())
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            let mut from_file = std::mem::take(&mut plan.thresholds);
            from_file.append(&mut given);
            given = from_file;
            if let Some(s) = &file.sample {
                plan.sample = if let Some(n) = &s.pid_name {
                    Some(SampleTarget::Pid(crate::observe::pidfind::pid_by_name(n)?))
                } else if let Some(f) = &s.pid_file {
                    Some(SampleTarget::Pid(crate::observe::pidfind::pid_from_file(
                        &crate::scenario::resolve(&path, f),
                    )?))
                } else {
                    s.metrics_url.clone().map(SampleTarget::Metrics)
                };
            }
            if let Some(p) = &a.events.admin_password {
                for g in &mut plan.groups {
                    if g.mode == Mode::Events && g.events.admin_password.is_none() {
                        g.events.admin_password = Some(p.clone());
                    }
                }
            }
            if a.profile.workers.is_some() {
                for g in &mut plan.groups {
                    g.workers = a.profile.workers;
                }
            }
            let out = a.out.clone().unwrap_or_else(|| match &file.out {
                Some(o) => o.clone(),
                None => PathBuf::from("bench-results").join(&plan.name),
            });
            (
                plan,
                out,
                a.no_default_thresholds || file.no_default_thresholds,
            )
        }
        None => {
            let mode = crate::mode::choose(a.mode, a.whep.whep, a.events.events, &a.urls)?;
            a.profile.validate()?;
            let group = group_of_flags(mode, &a.urls, &a.profile, &a.events, &a.whep);
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
                        speed: a.source_speed,
                    })
                }
                None => None,
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
            let plan = Plan {
                name: a.name.clone().unwrap_or_else(|| "run".into()),
                stages: group.schedule.clone(),
                groups: vec![group],
                source,
                latency_icy: if probe.is_some() {
                    a.whep.latency_icy
                } else {
                    0
                },
                probe,
                profile: Some(a.profile.clone()),
                ..Plan::default()
            };
            let out = a
                .out
                .clone()
                .unwrap_or_else(|| PathBuf::from("bench-results"));
            (plan, out, a.no_default_thresholds)
        }
    };
    if let Some(n) = &a.name {
        plan.name = n.clone();
    }
    if let Some(s) = sample_of(a)? {
        plan.sample = Some(s);
    }
    plan.thresholds = defaults(&plan, given, no_defaults);
    plan.live = Live {
        progress: !a.no_progress,
        metrics_listen: a.metrics_listen.clone(),
        metrics_linger_s: a.metrics_linger.0,
        timeline: a.out_timeline.clone(),
    };
    plan.worker_exe = a.worker_exe.clone();
    for addr in &a.agents {
        plan.agents.push(AgentEntry {
            address: addr.clone(),
            weight: None,
        });
    }
    plan.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok((plan, out))
}

/// Runs `plan` (here, or over its agents) and returns its report (nothing is written).
///
/// Errors: see [`RunError`].
pub fn execute(plan: &Plan) -> Result<RunReport, RunError> {
    session::run_here(plan)
}

/// Writes a run's reports into `out` and prints the verdict, the thresholds and where the
/// reports are; `junit` gets the JUnit XML too.
///
/// Errors: a file that cannot be written.
pub fn write_and_print(report: &RunReport, out: &Path, junit: Option<&Path>) -> anyhow::Result<()> {
    let paths = crate::report::write_run(out, report)?;
    if let Some(w) = &report.whep {
        // The WHEP figures in full, where scripts read them since WHEP runs began.
        let path = out.join("report-whep.json");
        std::fs::write(&path, serde_json::to_string_pretty(w)?)?;
        println!("{}", crate::whep::summary_text(w));
    }
    if let Some(j) = junit {
        if let Some(d) = j.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(d)?;
        }
        std::fs::write(j, crate::report::junit::render(&[report]))?;
    }
    println!("{}", report.verdict);
    print!("{}", crate::report::threshold_lines(report));
    print!("{}", crate::report::group_lines(report));
    println!();
    println!("{}", crate::report::summary_table(&[report]));
    for n in &report.notes {
        println!("note: {n}");
    }
    println!("report: {}", paths.html.display());
    println!("json:   {}", paths.json.display());
    if junit.is_some() {
        println!(
            "junit:  {}",
            junit.map(|j| j.display().to_string()).unwrap_or_default()
        );
    }
    for e in &report.errors {
        eprintln!("error: {e}");
    }
    // Why it failed, on the console: the rule, for how many, from when.
    for why in crate::report::verdict::reasons(report) {
        eprintln!("FAIL: {why}");
    }
    Ok(())
}

/// Body of `throng bench run`: runs, writes the reports and returns the verdict (true =
/// PASS).
///
/// Errors: see [`plan_of`] and [`execute`], or reports that cannot be written.
pub fn run_command(a: RunArgs) -> anyhow::Result<bool> {
    let (plan, out) = plan_of(&a)?;
    let report = if plan.agents.is_empty() {
        execute(&plan)?
    } else {
        crate::dist::controller::run(
            &plan,
            &crate::dist::controller::Options {
                wait: std::time::Duration::from_secs_f64(a.agent_wait.0),
                ca: a.agent_ca.clone(),
            },
        )?
    };
    write_and_print(&report, &out, a.junit.as_deref())?;
    Ok(report.summary.pass)
}
