//! The one plan of a run, whatever its source (flags, a scenario file, a compare scenario's
//! server): its audience groups ([`GroupPlan`]: mode, URLs, stages, behaviour, rules, the
//! mode's options), the run's stages, the source and latency probe to push, the server to
//! sample, the thresholds, the live outputs, the workers and, for a run over several machines,
//! the agents.

use crate::mode::Mode;
use crate::observe::sampler::SampleTarget;
use crate::profile::slice::{Behaviour, Judge};
use crate::profile::stages::Schedule;
use crate::profile::Profile;
use crate::report::threshold::Threshold;
use crate::source::SourceConfig;
use crate::whep::probe::ProbeConfig;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The options of an events group (subscribers of `/api/v1/events`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventsOptions {
    /// The mount whose title the run changes, `http://host:port/mount` (default: the `?mount=`
    /// of the group's first URL, on its server).
    pub trigger_url: Option<String>,
    /// Admin user for the title changes.
    pub admin_user: String,
    /// Admin password for the title changes.
    pub admin_password: Option<String>,
    /// Time between two title changes (s).
    pub change_interval_s: f64,
    /// Title changes to make (0: one every interval while the run lasts).
    pub changes: u32,
    /// The default threshold on the p99 delivery latency (ms).
    pub max_latency_ms: f64,
    /// The default threshold on the server's RSS growth per subscriber (bytes; judged from
    /// 500 subscribers on the sampled server).
    pub max_rss_per_subscriber: f64,
}

impl Default for EventsOptions {
    fn default() -> EventsOptions {
        EventsOptions {
            trigger_url: None,
            admin_user: "admin".into(),
            admin_password: None,
            change_interval_s: 2.0,
            changes: 0,
            max_latency_ms: 1000.0,
            max_rss_per_subscriber: 1024.0,
        }
    }
}

/// One audience group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupPlan {
    /// The group's name (reports, metrics, `{group:NAME}` thresholds).
    pub name: String,
    /// What its clients are.
    pub mode: Mode,
    /// Its URLs; listener `i` uses `urls[i % urls.len()]`.
    pub urls: Vec<String>,
    /// Its stages.
    pub schedule: Schedule,
    /// How its listeners behave.
    pub behaviour: Behaviour,
    /// How they are judged.
    pub judge: Judge,
    /// Local source addresses (`FIRST-LAST` or `none`).
    pub bind_range: String,
    /// ICY: ask for metadata and check the blocks.
    pub icy_metadata: bool,
    /// The bitrate the user gave (kbit/s; never needed to judge).
    pub bitrate_kbps: Option<f64>,
    /// `https://`: accept any certificate.
    pub insecure: bool,
    /// `https://`: the CA file to trust.
    pub ca: Option<PathBuf>,
    /// HLS: never use blocking playlist reload.
    pub hls_no_blocking_reload: bool,
    /// Events: the title changes.
    pub events: EventsOptions,
    /// WHEP: driving threads per worker process.
    pub whep_threads: u32,
    /// Worker processes for this group on one host (`None`: one per `max_per_worker` listeners,
    /// in-process when one suffices; WHEP: at least one per CPU).
    pub workers: Option<u32>,
    /// Most sockets one worker process opens.
    pub max_per_worker: u32,
}

impl GroupPlan {
    /// A group of `mode` on `urls` with the stages, behaviour and rules of `profile` (the
    /// flags of `throng bench run`, or a compare scenario's `[profile]`).
    pub fn from_profile(name: &str, mode: Mode, urls: Vec<String>, profile: &Profile) -> GroupPlan {
        GroupPlan {
            name: name.to_owned(),
            mode,
            urls,
            schedule: profile.schedule(),
            behaviour: profile.behaviour(),
            judge: profile.judge(),
            bind_range: profile.bind_range.clone(),
            icy_metadata: profile.icy,
            bitrate_kbps: profile.bitrate_kbps,
            insecure: profile.insecure,
            ca: profile.ca.clone(),
            hls_no_blocking_reload: profile.hls_no_blocking_reload,
            events: EventsOptions::default(),
            whep_threads: 1,
            workers: profile.workers,
            max_per_worker: profile.max_per_worker,
        }
    }
}

/// An agent of a run over several machines (`[[agent]]`, `--agents`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentEntry {
    /// `host:port` of `throng bench agent --listen`, or `ssh://[user@]host[:port][/path]`.
    pub address: String,
    /// Its share of the load relative to the others (default: its capacity).
    pub weight: Option<u32>,
}

/// What a run shows while it goes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Live {
    /// A progress bar on a terminal, a plain line every 5 s without one.
    pub progress: bool,
    /// Serve the bench's live series at `/metrics` on this address.
    pub metrics_listen: Option<String>,
    /// Keep serving them this long after the run (s), for a last scrape.
    pub metrics_linger_s: f64,
    /// Write the per-second timeline as NDJSON here while the run goes.
    pub timeline: Option<PathBuf>,
}

/// Everything needed for one run.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Name of the run.
    pub name: String,
    /// The audience groups.
    pub groups: Vec<GroupPlan>,
    /// The run's stages (the groups' are these scaled, or their own).
    pub stages: Schedule,
    /// Source to push first, if any.
    pub source: Option<SourceConfig>,
    /// The latency probe (`--latency-source`): a stamped source, or MP3 tone bursts.
    pub probe: Option<ProbeConfig>,
    /// ICY listeners of the probe mount measuring its latency beside a WHEP group (0: none).
    pub latency_icy: u32,
    /// Server to sample, if any.
    pub sample: Option<SampleTarget>,
    /// The thresholds (the defaults included).
    pub thresholds: Vec<Threshold>,
    /// Live outputs.
    pub live: Live,
    /// Program to run as a worker process (default: this executable).
    pub worker_exe: Option<PathBuf>,
    /// Agents (a run over several machines; empty: this machine).
    pub agents: Vec<AgentEntry>,
    /// The flags' profile, for the report of a run from flags.
    pub profile: Option<Profile>,
    /// The scenario file, for the report of a run from one.
    pub scenario: Option<String>,
}

impl Plan {
    /// The local server process the plan samples, if it samples one (not a metrics URL).
    pub fn server_pid(&self) -> Option<u32> {
        match &self.sample {
            Some(SampleTarget::Pid(p)) => Some(*p),
            _ => None,
        }
    }

    /// The rate rule's share of real time of the first media group (for the verdict's
    /// sentence).
    pub fn min_rate(&self) -> f64 {
        self.groups
            .iter()
            .find(|g| g.mode != Mode::Events)
            .map_or(0.8, |g| g.judge.min_rate)
    }

    /// The most listeners the run's stages ask for.
    pub fn peak(&self) -> u32 {
        self.groups.iter().map(|g| g.schedule.peak()).sum()
    }

    /// The run's length (s): its longest group's stages.
    pub fn duration_s(&self) -> f64 {
        self.groups
            .iter()
            .map(|g| g.schedule.total_secs())
            .fold(self.stages.total_secs(), f64::max)
    }

    /// Checks the plan: groups with names that differ, URLs, stages, behaviour; thresholds on
    /// groups that exist.
    ///
    /// Errors: the first problem, in words.
    pub fn validate(&self) -> Result<(), String> {
        if self.groups.is_empty() {
            return Err("no audience group".into());
        }
        for (i, g) in self.groups.iter().enumerate() {
            if self.groups[..i].iter().any(|o| o.name == g.name) {
                return Err(format!("two groups are called {:?}", g.name));
            }
            if g.urls.is_empty() {
                return Err(format!("group {}: no URL", g.name));
            }
            for u in &g.urls {
                crate::net::url::HttpUrl::parse(u).map_err(|e| format!("group {}: {e}", g.name))?;
            }
            g.schedule
                .validate()
                .map_err(|e| format!("group {}: stages: {e}", g.name))?;
            g.behaviour
                .validate()
                .map_err(|e| format!("group {}: {e}", g.name))?;
            if !(0.0..=1.0).contains(&g.judge.min_rate) {
                return Err(format!("group {}: min-rate is a share from 0 to 1", g.name));
            }
            if !(1..=15).contains(&g.judge.window_s) {
                return Err(format!("group {}: window: 1 to 15 whole seconds", g.name));
            }
            if g.max_per_worker == 0 || g.max_per_worker > 19_000 {
                return Err(format!(
                    "group {}: max-per-worker: 1 to 19000 sockets",
                    g.name
                ));
            }
            if g.mode == Mode::Events {
                let i = g.events.change_interval_s;
                if i.is_nan() || i <= 0.0 {
                    return Err(format!("group {}: change-interval must be > 0", g.name));
                }
            }
        }
        for t in &self.thresholds {
            if let Some(name) = &t.group {
                if !self.groups.iter().any(|g| &g.name == name) {
                    return Err(format!(
                        "threshold {}: no group {name:?} (groups: {})",
                        t.name(),
                        self.groups
                            .iter()
                            .map(|g| g.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
            }
        }
        Ok(())
    }
}
