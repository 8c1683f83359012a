//! Scenario files for `throng bench run scenario.toml`: a run as a load tester writes one, in
//! the load-testing world's terms: named audience groups (each with its mode, URLs, share or
//! count, profile and optional own stages), k6-style `[[stage]]`s, `[[threshold]]`s, a source
//! to push, a latency probe, agents; parameters (`[params]`, `${name}` anywhere in a string,
//! `--set name=value` on the command line, `${env:NAME}` from the environment) so ports and
//! output folders are not baked in.
//!
//! ```toml
//! name = "station"
//! [params]
//! host = "127.0.0.1"
//! port = 8000
//! [[stage]]
//! target = 2000
//! duration = "20s"
//! [[stage]]
//! target = 2000
//! duration = "60s"
//! [[group]]
//! name = "icy"
//! mode = "icy"
//! urls = ["http://${host}:${port}/live.mp3"]
//! share = 0.8
//! [[group]]
//! name = "hls"
//! mode = "hls"
//! urls = ["http://${host}:${port}/hls/live.mp3/index.m3u8"]
//! share = 0.2
//! [[threshold]]
//! metric = "ttfb"
//! stat = "p99"
//! below = "500ms"
//! ```
//!
//! A group with `share` takes that part of every stage's target; one with `count` takes the
//! run's stages scaled so its peak is `count`; one with its own `[[group.stage]]`s follows them.
//! Groups without either share what the others leave equally. Relative paths (the source file,
//! a CA file, burst file) are relative to the scenario file. [`plan`] is the plan the file
//! becomes.

pub mod plan;

use crate::mode::Mode;
use crate::profile::slice::{Behaviour, Judge};
use crate::profile::stages::{Schedule, Stage};
use crate::profile::Secs;
use crate::report::threshold::{Threshold, ThresholdError, ThresholdTable};
use crate::scenario::plan::{AgentEntry, EventsOptions, GroupPlan, Plan};
use crate::source::{SourceConfig, SourceMethod};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A scenario that could not be read.
#[derive(Debug, Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// It is not TOML, or not a scenario.
    #[error("{path}: {why}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// A `${name}` without a value.
    #[error("{path}: ${{{name}}} has no value (give it in [params] or with --set {name}=VALUE)")]
    Param {
        /// The file.
        path: PathBuf,
        /// The parameter.
        name: String,
    },
    /// A `--set` that is not `name=value`.
    #[error("--set {0:?}: expected NAME=VALUE")]
    Set(String),
    /// A threshold.
    #[error(transparent)]
    Threshold(#[from] ThresholdError),
}

/// `[source]`: the source the bench pushes before the listeners start.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SourceTable {
    /// The audio file (relative to the scenario file).
    pub file: PathBuf,
    /// The mount URL to push to (default: the first group's first URL).
    pub url: Option<String>,
    /// Source user.
    #[serde(default = "crate::source::default_user")]
    pub user: String,
    /// Source password (else `THRONG_SOURCE_PASSWORD`, or the password in the URL).
    pub password: Option<String>,
    /// Request method.
    #[serde(default)]
    pub method: SourceMethod,
    /// Content-Type (default: from the extension).
    pub content_type: Option<String>,
    /// Play speed (1: real time).
    #[serde(default = "one")]
    pub speed: f64,
}

fn one() -> f64 {
    1.0
}

/// `[latency]`: the latency probe the bench pushes (mouth-to-ear latency).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LatencyTable {
    /// The mount to push the probe to (an Ogg/Opus mount, or MP3 with `bursts`).
    pub source: String,
    /// An MP3 file of tone bursts (relative to the scenario file).
    pub bursts: Option<PathBuf>,
    /// ICY listeners of the probe mount beside a WHEP group.
    #[serde(default)]
    pub icy: u32,
    /// Source user.
    #[serde(default = "crate::source::default_user")]
    pub user: String,
    /// Source password.
    pub password: Option<String>,
}

/// `[sample]`: the server process or metrics URL to sample every second.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SampleTable {
    /// The local process whose command line contains this.
    pub pid_name: Option<String>,
    /// The local process whose id is in this file.
    pub pid_file: Option<PathBuf>,
    /// A Prometheus `/metrics` URL.
    pub metrics_url: Option<String>,
}

/// One `[[group]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct GroupTable {
    /// Name (default: the mode, numbered if needed).
    pub name: Option<String>,
    /// Mode (`icy`, `hls`, `whep`, `events`; default: `hls` for `.m3u8` URLs, else `icy`).
    pub mode: Option<Mode>,
    /// URLs.
    pub urls: Vec<String>,
    /// Part of every stage's target (0 to 1).
    pub share: Option<f64>,
    /// The group's peak: the run's stages scaled to it.
    pub count: Option<u32>,
    /// Own stages.
    #[serde(default)]
    pub stage: Vec<Stage>,
    /// Sessions of a random length: the shortest.
    pub session_min: Option<Secs>,
    /// The longest session.
    pub session_max: Option<Secs>,
    /// Listeners that leave and rejoin per second while the target holds (listeners/s).
    pub churn_rate: Option<f64>,
    /// When (since the run's start) every listener of the group reconnects at once.
    pub storm_at: Option<Secs>,
    /// Share of the listeners that never read (0 to 1).
    #[serde(default)]
    pub stalled: f64,
    /// Reconnect a failed listener after this delay.
    pub reconnect_after: Option<Secs>,
    /// `starved: rate` below this share of real time (percent; default: the scenario's).
    pub min_rate_pct: Option<f64>,
    /// The rate rule's window.
    pub window: Option<Secs>,
    /// `starved: gap` above this gap.
    pub max_gap: Option<Secs>,
    /// `starved: loss` above this share of packets lost (percent).
    pub max_loss_pct: Option<f64>,
    /// Connect plus response-head timeout.
    pub connect_timeout: Option<Secs>,
    /// Source addresses.
    pub bind_range: Option<String>,
    /// ICY metadata.
    #[serde(default)]
    pub icy_metadata: bool,
    /// The stream's bitrate, if known (kbit/s).
    pub bitrate_kbps: Option<f64>,
    /// `https://`: accept any certificate.
    #[serde(default)]
    pub insecure: bool,
    /// `https://`: CA file (relative to the scenario file).
    pub ca: Option<PathBuf>,
    /// HLS: never use blocking reload.
    #[serde(default)]
    pub no_blocking_reload: bool,
    /// Events: the mount whose title changes.
    pub trigger_url: Option<String>,
    /// Events: admin user.
    pub admin_user: Option<String>,
    /// Events: admin password.
    pub admin_password: Option<String>,
    /// Events: time between title changes.
    pub change_interval: Option<Secs>,
    /// Events: title changes to make (default: one every interval while the run lasts).
    pub changes: Option<u32>,
    /// Events: the default p99 delivery threshold.
    pub max_latency: Option<Secs>,
    /// WHEP: driving threads per worker.
    pub whep_threads: Option<u32>,
    /// Worker processes on one host.
    pub workers: Option<u32>,
    /// Most sockets per worker process.
    pub max_per_worker: Option<u32>,
}

/// A scenario file (see the module comment).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ScenarioFile {
    /// The run's name.
    pub name: Option<String>,
    /// The output folder (default: `bench-results/<name>`, from the current directory).
    pub out: Option<PathBuf>,
    /// Parameters and their defaults.
    #[serde(default)]
    pub params: BTreeMap<String, toml::Value>,
    /// The run's stages.
    #[serde(default)]
    pub stage: Vec<Stage>,
    /// The groups.
    #[serde(default)]
    pub group: Vec<GroupTable>,
    /// The thresholds.
    #[serde(default)]
    pub threshold: Vec<ThresholdTable>,
    /// Keep only the thresholds given (no default ones).
    #[serde(default)]
    pub no_default_thresholds: bool,
    /// The source to push.
    pub source: Option<SourceTable>,
    /// The latency probe.
    pub latency: Option<LatencyTable>,
    /// The server to sample.
    pub sample: Option<SampleTable>,
    /// Agents.
    #[serde(default)]
    pub agent: Vec<AgentEntry>,
    /// Every group's default rules: `starved: rate` below this (percent).
    #[serde(default = "default_min_rate")]
    pub min_rate_pct: f64,
    /// Default window.
    #[serde(default = "default_window")]
    pub window: Secs,
    /// Default maximum gap.
    #[serde(default = "default_gap")]
    pub max_gap: Secs,
    /// Default source addresses.
    #[serde(default = "default_bind")]
    pub bind_range: String,
    /// Default worker processes per group and host.
    pub workers: Option<u32>,
    /// Default most sockets per worker process.
    pub max_per_worker: Option<u32>,
}

fn default_min_rate() -> f64 {
    80.0
}
fn default_window() -> Secs {
    Secs(5.0)
}
fn default_gap() -> Secs {
    Secs(4.0)
}
fn default_bind() -> String {
    "127.0.0.2-127.0.0.40".into()
}

/// Replaces `${name}` (from `params`) and `${env:NAME}` in `s`.
fn substitute(s: &str, params: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let Some(j) = after.find('}') else {
            out.push_str(&rest[i..]);
            return Ok(out);
        };
        let name = &after[..j];
        let value = match name.strip_prefix("env:") {
            Some(var) => std::env::var(var).map_err(|_| name.to_owned())?,
            None => params.get(name).cloned().ok_or_else(|| name.to_owned())?,
        };
        out.push_str(&value);
        rest = &after[j + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Applies the parameters to every string of `v`; a table value that is one whole `${name}`
/// whose value is a number or a boolean becomes that value (so `target = "${n}"` is a number),
/// an array element stays a string (a command line's argument).
fn apply(v: &mut toml::Value, params: &BTreeMap<String, String>) -> Result<(), String> {
    apply_in(v, params, true)
}

fn apply_in(
    v: &mut toml::Value,
    params: &BTreeMap<String, String>,
    typed: bool,
) -> Result<(), String> {
    match v {
        toml::Value::String(s) => {
            let whole =
                typed && s.starts_with("${") && s.ends_with('}') && s.matches("${").count() == 1;
            let new = substitute(s, params)?;
            if whole {
                if let Ok(i) = new.parse::<i64>() {
                    *v = toml::Value::Integer(i);
                    return Ok(());
                }
                if let Ok(f) = new.parse::<f64>() {
                    *v = toml::Value::Float(f);
                    return Ok(());
                }
                if let Ok(b) = new.parse::<bool>() {
                    *v = toml::Value::Boolean(b);
                    return Ok(());
                }
            }
            *s = new;
        }
        toml::Value::Array(a) => {
            for x in a {
                apply_in(x, params, matches!(x, toml::Value::Table(_)))?;
            }
        }
        toml::Value::Table(t) => {
            for (k, x) in t.iter_mut() {
                if k != "params" {
                    apply_in(x, params, true)?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// A parameter's value as text.
fn text_of(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Reads a scenario file with `--set NAME=VALUE` overrides: its parameters substituted, its
/// tables checked.
///
/// Errors: see [`ScenarioError`].
pub fn read(path: &Path, sets: &[String]) -> Result<ScenarioFile, ScenarioError> {
    let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
        path: path.into(),
        source,
    })?;
    parse(&text, path, sets)
}

/// [`read`] of the text of a file at `path`.
///
/// Errors: see [`ScenarioError`].
pub fn parse(text: &str, path: &Path, sets: &[String]) -> Result<ScenarioFile, ScenarioError> {
    let doc = substituted(text, path, sets)?;
    doc.try_into::<ScenarioFile>()
        .map_err(|e| ScenarioError::Parse {
            path: path.into(),
            why: e.to_string(),
        })
}

/// The TOML document `text` (of the file at `path`) with its parameters (`[params]`, then
/// `sets`) substituted: any file with parameters (a `bench run` or a `bench compare`
/// scenario) reads through this.
///
/// Errors: not TOML, a `--set` that is not `NAME=VALUE`, a `${name}` without a value.
pub fn substituted(text: &str, path: &Path, sets: &[String]) -> Result<toml::Value, ScenarioError> {
    let perr = |why: String| ScenarioError::Parse {
        path: path.into(),
        why,
    };
    let mut doc: toml::Value = toml::from_str(text).map_err(|e| perr(e.to_string()))?;
    let mut params: BTreeMap<String, String> = BTreeMap::new();
    if let Some(toml::Value::Table(p)) = doc.get("params") {
        for (k, v) in p {
            params.insert(k.clone(), text_of(v));
        }
    }
    for s in sets {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| ScenarioError::Set(s.clone()))?;
        params.insert(k.trim().to_owned(), v.to_owned());
    }
    apply(&mut doc, &params).map_err(|name| ScenarioError::Param {
        path: path.into(),
        name,
    })?;
    if let Some(toml::Value::Table(p)) = doc.get_mut("params") {
        for (k, v) in params.iter() {
            p.insert(k.clone(), toml::Value::String(v.clone()));
        }
    }
    Ok(doc)
}

/// `p` relative to the scenario file's directory (absolute paths unchanged).
pub fn resolve(base: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_owned()
    } else {
        base.parent().unwrap_or(Path::new(".")).join(p)
    }
}

impl ScenarioFile {
    /// The groups with their stages and rules settled (see the module comment).
    ///
    /// Errors: shares over 1, a group with both `share` and `count`, no stage for a group.
    pub fn groups(&self, base: &Path) -> Result<Vec<GroupPlan>, String> {
        let run = Schedule {
            stages: self.stage.clone(),
        };
        let given: f64 = self.group.iter().filter_map(|g| g.share).sum();
        if given > 1.0 + 1e-9 {
            return Err(format!("the groups' shares add up to {given}, over 1"));
        }
        let unshared = self
            .group
            .iter()
            .filter(|g| g.share.is_none() && g.count.is_none() && g.stage.is_empty())
            .count();
        let rest = if unshared > 0 {
            (1.0 - given).max(0.0) / unshared as f64
        } else {
            0.0
        };
        let mode_of = |g: &GroupTable| match g.mode {
            Some(m) => m,
            None if !g.urls.is_empty() && g.urls.iter().all(|u| crate::mode::is_hls_url(u)) => {
                Mode::Hls
            }
            None => Mode::Icy,
        };
        let mut out = Vec::new();
        for (i, g) in self.group.iter().enumerate() {
            let mode = mode_of(g);
            let name = g.name.clone().unwrap_or_else(|| {
                let same = self
                    .group
                    .iter()
                    .filter(|x| x.name.is_none() && mode_of(x) == mode)
                    .count();
                if same > 1 {
                    format!("{mode}-{}", i + 1)
                } else {
                    mode.to_string()
                }
            });
            if g.share.is_some() && g.count.is_some() {
                return Err(format!("group {name}: give share or count, not both"));
            }
            let schedule = if !g.stage.is_empty() {
                Schedule {
                    stages: g.stage.clone(),
                }
            } else if run.stages.is_empty() {
                return Err(format!(
                    "group {name}: no stages (give [[stage]]s, or [[group.stage]]s of its own)"
                ));
            } else if let Some(c) = g.count {
                let peak = run.peak().max(1);
                run.scaled(f64::from(c) / f64::from(peak))
            } else {
                run.scaled(g.share.unwrap_or(rest))
            };
            let pct = |v: Option<f64>, d: f64| v.unwrap_or(d) / 100.0;
            let mut judge = Judge {
                min_rate: pct(g.min_rate_pct, self.min_rate_pct),
                window_s: g.window.unwrap_or(self.window).0.round().clamp(1.0, 15.0) as u32,
                max_gap_ms: (g.max_gap.unwrap_or(self.max_gap).0 * 1000.0) as u32,
                ..Judge::default()
            };
            if mode == Mode::Whep && g.max_gap.is_none() {
                // A WebRTC player's jitter buffer, not a stream player's seconds.
                judge.max_gap_ms = crate::whep::viewer::MAX_GAP.as_millis() as u32;
            }
            if let Some(l) = g.max_loss_pct {
                judge.max_loss = l / 100.0;
            }
            if let Some(t) = g.connect_timeout {
                judge.connect_timeout_ms = (t.0 * 1000.0) as u32;
            }
            let mut events = EventsOptions {
                trigger_url: g.trigger_url.clone(),
                admin_password: g.admin_password.clone(),
                ..EventsOptions::default()
            };
            if let Some(u) = &g.admin_user {
                events.admin_user = u.clone();
            }
            if let Some(c) = g.change_interval {
                events.change_interval_s = c.0;
            }
            if let Some(c) = g.changes {
                events.changes = c;
            }
            if let Some(m) = g.max_latency {
                events.max_latency_ms = m.0 * 1000.0;
            }
            out.push(GroupPlan {
                name,
                mode,
                urls: g.urls.clone(),
                schedule,
                behaviour: Behaviour {
                    session_min: g.session_min,
                    session_max: g.session_max,
                    churn_rate: g.churn_rate,
                    storm_at: g.storm_at,
                    stalled: g.stalled,
                    reconnect_after: g.reconnect_after,
                },
                judge,
                bind_range: g
                    .bind_range
                    .clone()
                    .unwrap_or_else(|| self.bind_range.clone()),
                icy_metadata: g.icy_metadata,
                bitrate_kbps: g.bitrate_kbps,
                insecure: g.insecure,
                ca: g.ca.as_ref().map(|c| resolve(base, c)),
                hls_no_blocking_reload: g.no_blocking_reload,
                events,
                whep_threads: g.whep_threads.unwrap_or(1),
                workers: g.workers.or(self.workers),
                max_per_worker: g.max_per_worker.or(self.max_per_worker).unwrap_or(15_000),
            });
        }
        Ok(out)
    }

    /// The thresholds given (without the defaults).
    ///
    /// Errors: see [`ThresholdError`].
    pub fn thresholds(&self) -> Result<Vec<Threshold>, ThresholdError> {
        self.threshold.iter().map(|t| t.threshold()).collect()
    }

    /// The source to push, its password settled.
    ///
    /// Errors: no password anywhere.
    pub fn source(
        &self,
        base: &Path,
        first_url: &str,
        password: Option<&str>,
    ) -> Result<Option<SourceConfig>, crate::source::SourceError> {
        let Some(s) = &self.source else {
            return Ok(None);
        };
        let url = s.url.clone().unwrap_or_else(|| first_url.to_owned());
        let password = crate::source::resolve_password(s.password.as_deref().or(password), &url)?;
        Ok(Some(SourceConfig {
            file: resolve(base, &s.file),
            url,
            user: s.user.clone(),
            password,
            method: s.method,
            content_type: s.content_type.clone(),
            speed: s.speed,
        }))
    }

    /// The plan of the file (its groups, stages, thresholds given, source, agents); the run
    /// level (sampling, live outputs, the defaults among the thresholds) is the caller's.
    ///
    /// Errors: see [`ScenarioFile::groups`], thresholds, the source's password.
    pub fn plan(&self, path: &Path, source_password: Option<&str>) -> Result<Plan, String> {
        let groups = self.groups(path)?;
        let first = groups
            .first()
            .and_then(|g| g.urls.first().cloned())
            .unwrap_or_default();
        let mut stages = Schedule {
            stages: self.stage.clone(),
        };
        if stages.stages.is_empty() {
            stages = groups
                .iter()
                .max_by(|a, b| a.schedule.total_secs().total_cmp(&b.schedule.total_secs()))
                .map(|g| g.schedule.clone())
                .unwrap_or_default();
        }
        let probe = match &self.latency {
            Some(l) => Some(crate::whep::probe::ProbeConfig {
                url: l.source.clone(),
                user: l.user.clone(),
                password: crate::source::resolve_password(
                    l.password.as_deref().or(source_password),
                    &l.source,
                )
                .map_err(|e| e.to_string())?,
                method: SourceMethod::Put,
                bursts: l.bursts.as_ref().map(|b| resolve(path, b)),
            }),
            None => None,
        };
        Ok(Plan {
            name: self.name.clone().unwrap_or_else(|| {
                path.file_stem()
                    .map_or("scenario".into(), |s| s.to_string_lossy().into_owned())
            }),
            groups,
            stages,
            source: self
                .source(path, &first, source_password)
                .map_err(|e| e.to_string())?,
            probe,
            latency_icy: self.latency.as_ref().map_or(0, |l| l.icy),
            thresholds: self.thresholds().map_err(|e| e.to_string())?,
            agents: self.agent.clone(),
            scenario: Some(path.display().to_string()),
            ..Plan::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATION: &str = r#"
name = "station"
[params]
port = 8000
listeners = 1000
[[stage]]
target = "${listeners}"
duration = "10s"
[[stage]]
target = "${listeners}"
duration = "30s"
[[group]]
name = "icy"
urls = ["http://127.0.0.1:${port}/live.mp3"]
share = 0.7
stalled = 0.05
[[group]]
urls = ["http://127.0.0.1:${port}/hls/live.mp3/index.m3u8"]
[[group]]
name = "webrtc"
mode = "whep"
urls = ["http://127.0.0.1:${port}/whep/live.mp3"]
count = 20
[[group]]
name = "page"
mode = "events"
urls = ["http://127.0.0.1:${port}/api/v1/events?mount=/live.mp3"]
count = 50
admin-password = "${env:THRONG_TEST_NO_SUCH_VARIABLE_X}"
[[threshold]]
metric = "ttfb"
stat = "p99"
below = "500ms"
"#;

    #[test]
    fn a_station_scenario_becomes_groups() {
        let path = Path::new("/tmp/station.toml");
        // The environment variable is missing: named.
        let e = parse(STATION, path, &[]).unwrap_err().to_string();
        assert!(e.contains("env:THRONG_TEST_NO_SUCH_VARIABLE_X"), "{e}");
        let text = STATION.replace("${env:THRONG_TEST_NO_SUCH_VARIABLE_X}", "secret");
        let f = parse(&text, path, &["port=9100".into(), "listeners=2000".into()]).unwrap();
        let g = f.groups(path).unwrap();
        assert_eq!(g.len(), 4);
        assert_eq!((g[0].name.as_str(), g[0].mode), ("icy", Mode::Icy));
        assert_eq!(g[0].schedule.peak(), 1400);
        assert_eq!(g[0].behaviour.stalled, 0.05);
        assert_eq!(g[0].urls[0], "http://127.0.0.1:9100/live.mp3");
        // The unnamed .m3u8 group is HLS and takes what the shares leave.
        assert_eq!((g[1].name.as_str(), g[1].mode), ("hls", Mode::Hls));
        assert_eq!(g[1].schedule.peak(), 600);
        assert_eq!(g[2].schedule.peak(), 20);
        assert_eq!(g[2].judge.max_gap_ms, 200, "a WebRTC jitter buffer");
        assert_eq!(g[3].events.admin_password.as_deref(), Some("secret"));
        assert_eq!(g[3].schedule.total_secs(), 40.0);
        let p = f.plan(path, None).unwrap();
        assert_eq!(p.thresholds.len(), 1);
        assert_eq!(p.stages.peak(), 2000);
        assert!(p.validate().is_ok());
    }

    #[test]
    fn mistakes_are_named() {
        let path = Path::new("s.toml");
        let e = parse("[[group]]\nurls = [\"http://h/${nope}\"]\n", path, &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("${nope} has no value"), "{e}");
        let e = parse("[[group]]\nurls = []\nlisteners = 3\n", path, &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `listeners`"), "{e}");
        let f = parse("[[group]]\nurls = [\"http://h/a\"]\n", path, &[]).unwrap();
        assert!(f.groups(path).unwrap_err().contains("no stages"));
        assert!(matches!(
            parse("", path, &["x".into()]),
            Err(ScenarioError::Set(_))
        ));
    }
}
