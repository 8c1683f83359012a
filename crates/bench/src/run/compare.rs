//! `throng bench compare SCENARIO.toml`: the same profile against several servers, one after the
//! other, each started by the bench from a command line, and one side-by-side report whose
//! ratios say which server is better on each row.
//!
//! Relative paths in a scenario (the source `file`, a `command` program given with a `/`) are
//! relative to the scenario file's directory, and each command runs in that directory, so a
//! scenario works from any current directory; a missing file or program is named before any
//! server starts. A scenario takes parameters as `bench run` scenarios do (`[params]`,
//! `${name}`, `--set name=value`, `${env:NAME}`), so ports and folders are not baked in; its
//! reports go to `--out`, else its `out`, else `bench-results/<name>` under the current
//! directory. A server's `env` table sets its environment; every server gets
//! `THRONG_STATE_DIR=<out>/<server>-state` unless it sets its own, so a Throng the bench starts
//! keeps its generated passwords and ledger with the run, not in the user's state directory.
//!
//! For every `[[server]]`: start its command (own process group, output to `<out>/<name>.log`),
//! wait until the first listener URL's port accepts connections, push the scenario's source if
//! any, run the profile while sampling the server's process tree, stop the server (SIGTERM to
//! the group, SIGKILL after 5 s) and wait for its port to close.

use crate::events::EventArgs;
use crate::mode::Mode;
use crate::net::url::HttpUrl;
use crate::observe::sampler::SampleTarget;
use crate::profile::{Profile, Secs};
use crate::report::summary::RunReport;
use crate::run::execute;
use crate::run::plan::{Plan, RunError};
use crate::scenario::plan::Live;
use crate::source::{SourceConfig, SourceMethod};
use crate::whep::viewer::WhepArgs;
use clap::Args;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use thiserror::Error;

/// Arguments of `throng bench compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The scenario file (TOML).
    pub scenario: PathBuf,
    /// Output directory (default: the scenario's `out`, else `bench-results/<scenario name>`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Override the scenario's listener count (listeners).
    #[arg(long)]
    pub listeners: Option<u32>,
    /// Override the scenario's hold.
    #[arg(long)]
    pub hold: Option<Secs>,
    /// Only run the servers with these names (repeatable).
    #[arg(long)]
    pub only: Vec<String>,
    /// Set a scenario parameter, `NAME=VALUE` (repeatable): `${NAME}` in the file.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// Write a JUnit XML report (one test suite per server) to FILE.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// No live progress display.
    #[arg(long)]
    pub no_progress: bool,
    /// Program to run as a worker process (default: this executable).
    #[arg(long, hide = true)]
    pub worker_exe: Option<PathBuf>,
}

/// The source a scenario pushes to each server (file, credentials, method).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioSource {
    /// Audio file.
    pub file: PathBuf,
    /// Source user.
    #[serde(default = "crate::source::default_user")]
    pub user: String,
    /// Source password (no default: else a server's `source_password`, the
    /// `THRONG_SOURCE_PASSWORD` environment variable, or the password in the source URL).
    #[serde(default)]
    pub password: Option<String>,
    /// Request method.
    #[serde(default)]
    pub method: SourceMethod,
    /// Content-Type (default: from the extension).
    #[serde(default)]
    pub content_type: Option<String>,
}

fn default_ready() -> Secs {
    Secs(30.0)
}

/// One server of a scenario.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioServer {
    /// Name used in the report.
    pub name: String,
    /// Command line that starts the server in the foreground. It runs in the scenario file's
    /// directory; a program given with a `/` is relative to it, a bare name is looked up in
    /// `PATH`.
    pub command: Vec<String>,
    /// Listener URLs.
    pub urls: Vec<String>,
    /// Mount URL the source is pushed to (default: the first listener URL).
    #[serde(default)]
    pub source_url: Option<String>,
    /// Source password for this server (default: the scenario source's).
    #[serde(default)]
    pub source_password: Option<String>,
    /// How long to wait for the port to answer.
    #[serde(default = "default_ready")]
    pub ready_timeout: Secs,
    /// Sample this Prometheus URL instead of the process tree.
    #[serde(default)]
    pub metrics_url: Option<String>,
    /// Listeners for this server instead of the profile's (e.g. one process at 18,000 beside
    /// a cluster at 100,000); `--listeners` overrides both.
    #[serde(default)]
    pub listeners: Option<u32>,
    /// URLs that must answer `200` (status line read, then closed) before the run starts,
    /// after the source is pushed (e.g. every edge of a cluster, once its relay is up).
    #[serde(default)]
    pub ready_urls: Vec<String>,
    /// Environment variables of the server's command (`THRONG_STATE_DIR`, say).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// A compare scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Name (default: the file stem).
    #[serde(default)]
    pub name: Option<String>,
    /// Output directory, relative to the scenario file (default: `bench-results/<name>` under
    /// the current directory).
    #[serde(default)]
    pub out: Option<PathBuf>,
    /// Parameters and their defaults (`${name}` in any string, `--set name=value`).
    #[serde(default)]
    pub params: BTreeMap<String, toml::Value>,
    /// What the simulated clients are (`icy`, `hls`, `events`, `whep`; default: HLS when
    /// every URL of a server ends `.m3u8`, else ICY).
    #[serde(default)]
    pub mode: Option<Mode>,
    /// The profile every server gets.
    #[serde(default)]
    pub profile: Profile,
    /// The flags of an events run (`mode = "events"`): `admin_password`, `changes`, ...
    #[serde(default)]
    pub events: EventArgs,
    /// The flags of a WHEP run (`mode = "whep"`): `whep_threads`.
    #[serde(default)]
    pub whep: WhepArgs,
    /// The source pushed to each server, if any.
    #[serde(default)]
    pub source: Option<ScenarioSource>,
    /// The servers, in run order.
    #[serde(rename = "server")]
    pub servers: Vec<ScenarioServer>,
    /// The scenario file's directory, which relative paths are resolved against (set by
    /// [`Scenario::load`]; the current directory otherwise).
    #[serde(skip)]
    pub base: PathBuf,
}

/// Compare errors.
#[derive(Debug, Error)]
pub enum CompareError {
    /// The scenario could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The scenario is not valid TOML for a scenario.
    #[error("parsing {path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The error.
        source: Box<toml::de::Error>,
    },
    /// The scenario has no servers or an empty command.
    #[error("scenario: {0}")]
    Invalid(String),
    /// A file or program the scenario names does not exist.
    #[error("{what} {path} not found (relative paths in a scenario are relative to its directory, {base})")]
    Missing {
        /// What it is (`source file`, `server throng: program`).
        what: String,
        /// The path as resolved (or the bare program name looked up in `PATH`).
        path: PathBuf,
        /// The scenario's directory.
        base: PathBuf,
    },
    /// A server did not start.
    #[error("server {name}: {why}")]
    Server {
        /// The server.
        name: String,
        /// What happened.
        why: String,
    },
    /// A run failed.
    #[error("server {name}: {source}")]
    Run {
        /// The server.
        name: String,
        /// The error.
        source: RunError,
    },
}

impl Scenario {
    /// Reads and checks a scenario file.
    ///
    /// Errors: see [`CompareError`].
    pub fn load(path: &Path) -> Result<Scenario, CompareError> {
        Scenario::load_with(path, &[])
    }

    /// Reads and checks a scenario file with `--set NAME=VALUE` parameters.
    ///
    /// Errors: see [`CompareError`].
    pub fn load_with(path: &Path, sets: &[String]) -> Result<Scenario, CompareError> {
        let text = std::fs::read_to_string(path).map_err(|source| CompareError::Read {
            path: path.into(),
            source,
        })?;
        let doc = crate::scenario::substituted(&text, path, sets)
            .map_err(|e| CompareError::Invalid(e.to_string()))?;
        let mut s: Scenario = doc.try_into().map_err(|source| CompareError::Parse {
            path: path.into(),
            source: Box::new(source),
        })?;
        s.base = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if s.servers.is_empty() {
            return Err(CompareError::Invalid("no [[server]]".into()));
        }
        for srv in &s.servers {
            if srv.command.is_empty() || srv.urls.is_empty() {
                return Err(CompareError::Invalid(format!(
                    "server {}: command and urls must not be empty",
                    srv.name
                )));
            }
        }
        s.profile
            .validate()
            .map_err(|e| CompareError::Invalid(e.to_string()))?;
        Ok(s)
    }
}

impl Scenario {
    /// `p` resolved against the scenario's directory (unchanged when absolute).
    pub fn resolve(&self, p: &Path) -> PathBuf {
        self.base.join(p)
    }

    /// The program `srv` runs: a path with a `/` resolved against the scenario's directory, a
    /// bare name found in `PATH`.
    ///
    /// Errors: [`CompareError::Missing`] when it does not exist.
    pub fn program(&self, srv: &ScenarioServer) -> Result<PathBuf, CompareError> {
        let prog = Path::new(&srv.command[0]);
        let missing = |path: PathBuf| CompareError::Missing {
            what: format!("server {}: program", srv.name),
            path,
            base: self.base.clone(),
        };
        if srv.command[0].contains('/') {
            let p = self.resolve(prog);
            return if p.is_file() { Ok(p) } else { Err(missing(p)) };
        }
        std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .map(|d| d.join(prog))
            .find(|p| p.is_file())
            .ok_or_else(|| missing(prog.into()))
    }

    /// Checks, before anything starts, that the source file and every server's program exist
    /// and that every source push has a password.
    ///
    /// Errors: [`CompareError::Missing`], or [`CompareError::Server`] for a missing password.
    pub fn check_paths(&self) -> Result<(), CompareError> {
        if let Some(src) = &self.source {
            let f = self.resolve(&src.file);
            if !f.is_file() {
                return Err(CompareError::Missing {
                    what: "source file".into(),
                    path: f,
                    base: self.base.clone(),
                });
            }
        }
        for srv in &self.servers {
            self.program(srv)?;
            self.source_config(srv)?;
        }
        Ok(())
    }

    /// The source pushed to `srv`, if the scenario has one, with its password resolved (the
    /// server's `source_password`, the scenario's `password`, then
    /// [`resolve_password`](crate::source::resolve_password)).
    ///
    /// Errors: [`CompareError::Server`] when no password is found.
    pub fn source_config(
        &self,
        srv: &ScenarioServer,
    ) -> Result<Option<SourceConfig>, CompareError> {
        let Some(s) = &self.source else {
            return Ok(None);
        };
        let url = srv
            .source_url
            .clone()
            .unwrap_or_else(|| srv.urls[0].clone());
        let given = srv.source_password.as_deref().or(s.password.as_deref());
        let password =
            crate::source::resolve_password(given, &url).map_err(|e| CompareError::Server {
                name: srv.name.clone(),
                why: e.to_string(),
            })?;
        Ok(Some(SourceConfig {
            file: self.resolve(&s.file),
            url,
            user: s.user.clone(),
            password,
            method: s.method,
            content_type: s.content_type.clone(),
            speed: 1.0,
        }))
    }
}

/// A server process started by the bench (its own process group).
pub struct ServerProcess {
    child: Child,
}

impl ServerProcess {
    /// Starts `program` with `args` and environment `env` in directory `dir`, output written
    /// to `log`.
    ///
    /// Errors: the log cannot be created, or the program not started.
    pub fn start(
        program: &Path,
        args: &[String],
        env: &BTreeMap<String, String>,
        dir: &Path,
        log: &Path,
    ) -> std::io::Result<ServerProcess> {
        if let Some(d) = log.parent() {
            std::fs::create_dir_all(d)?;
        }
        let out = std::fs::File::create(log)?;
        let err = out.try_clone()?;
        // An absolute program: a relative one would be ambiguous with `current_dir`.
        let program = std::path::absolute(program)?;
        let child = Command::new(program)
            .args(args)
            .envs(env)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()?;
        Ok(ServerProcess { child })
    }

    /// The root process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process already exited (with its status).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGTERM to the group, SIGKILL after `grace`.
    pub fn stop(mut self, grace: Duration) {
        let pgid = self.child.id() as libc::pid_t;
        // SAFETY: signalling our own child's process group.
        unsafe { libc::kill(-pgid, libc::SIGTERM) };
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if self.exited().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // SAFETY: as above; the group may already be gone.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

/// Waits until `url`'s port accepts a TCP connection (true) or `timeout` passes (false).
pub fn wait_port(url: &HttpUrl, timeout: Duration, server: &mut ServerProcess) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&url.addr, Duration::from_millis(200)).is_ok() {
            return true;
        }
        if server.exited().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// Whether a `GET` of `url` answers with status 200 (only the status line is read).
fn answers_200(url: &HttpUrl) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = TcpStream::connect_timeout(&url.addr, Duration::from_millis(500)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let req = format!(
        "GET {} HTTP/1.0\r\nHost: {}\r\n\r\n",
        url.path,
        url.host_header()
    );
    if s.write_all(req.as_bytes()).is_err() {
        return false;
    }
    let mut buf = [0u8; 64];
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
        if buf[..got].contains(&b'\n') {
            break;
        }
    }
    let line = String::from_utf8_lossy(&buf[..got]);
    line.split_whitespace().nth(1) == Some("200")
}

/// Waits until every URL of `urls` answers 200 (true) or `timeout` passes (false).
pub fn wait_ready(urls: &[HttpUrl], timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    let mut pending: Vec<&HttpUrl> = urls.iter().collect();
    while Instant::now() < deadline {
        pending.retain(|u| !answers_200(u));
        if pending.is_empty() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

/// Waits until nothing accepts on `url`'s port (up to `timeout`).
pub fn wait_port_closed(url: &HttpUrl, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline
        && TcpStream::connect_timeout(&url.addr, Duration::from_millis(200)).is_ok()
    {
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs every server of the scenario and returns their reports in order.
pub fn run_scenario(
    scenario: &Scenario,
    out: &Path,
    progress: bool,
    worker_exe: Option<PathBuf>,
) -> Result<Vec<RunReport>, CompareError> {
    let mut reports = Vec::new();
    for srv in &scenario.servers {
        let err = |why: String| CompareError::Server {
            name: srv.name.clone(),
            why,
        };
        let first = HttpUrl::parse(&srv.urls[0]).map_err(|e| err(e.to_string()))?;
        // A leftover server on the port would be measured instead of this one.
        if TcpStream::connect_timeout(&first.addr, Duration::from_millis(200)).is_ok() {
            return Err(err(format!(
                "something already listens on {}; stop it first",
                first.addr
            )));
        }
        let log = out.join(format!("{}.log", srv.name));
        let mut env = srv.env.clone();
        if !env.contains_key("THRONG_STATE_DIR") {
            let state = std::path::absolute(out.join(format!("{}-state", srv.name)))
                .unwrap_or_else(|_| out.join(format!("{}-state", srv.name)));
            env.insert("THRONG_STATE_DIR".into(), state.display().to_string());
        }
        eprintln!("== {}: starting {}", srv.name, srv.command.join(" "));
        let program = scenario.program(srv)?;
        let mut proc =
            ServerProcess::start(&program, &srv.command[1..], &env, &scenario.base, &log)
                .map_err(|e| err(format!("starting {}: {e}", program.display())))?;
        if !wait_port(
            &first,
            Duration::from_secs_f64(srv.ready_timeout.0),
            &mut proc,
        ) {
            proc.stop(Duration::from_secs(2));
            return Err(err(format!(
                "port {} did not answer (log: {})",
                first.addr,
                log.display()
            )));
        }
        let source = scenario.source_config(srv)?;
        let ready: Vec<HttpUrl> = srv
            .ready_urls
            .iter()
            .map(|u| HttpUrl::parse(u))
            .collect::<Result<_, _>>()
            .map_err(|e| err(e.to_string()))?;
        // The source is pushed by `execute`; a scenario whose servers need it before they are
        // ready (relays of a pushed source) cannot list ready URLs.
        if !ready.is_empty() && !wait_ready(&ready, Duration::from_secs_f64(srv.ready_timeout.0)) {
            proc.stop(Duration::from_secs(2));
            return Err(err(format!(
                "the ready URLs did not all answer 200 (log: {})",
                log.display()
            )));
        }
        let mut profile = scenario.profile.clone();
        if let Some(n) = srv.listeners {
            profile.listeners = n;
        }
        let mode = crate::mode::choose(scenario.mode, false, false, &srv.urls)
            .map_err(|e| err(e.to_string()))?;
        let group =
            crate::run::group_of_flags(mode, &srv.urls, &profile, &scenario.events, &scenario.whep);
        let mut plan = Plan {
            name: srv.name.clone(),
            stages: group.schedule.clone(),
            groups: vec![group],
            source,
            sample: Some(match &srv.metrics_url {
                Some(u) => SampleTarget::Metrics(u.clone()),
                None => SampleTarget::Pid(proc.pid()),
            }),
            worker_exe: worker_exe.clone(),
            live: Live {
                progress,
                ..Live::default()
            },
            profile: Some(profile.clone()),
            ..Plan::default()
        };
        plan.thresholds = crate::report::threshold::with_defaults(
            Vec::new(),
            mode == Mode::Events,
            scenario.events.max_latency.0 * 1000.0,
            false,
        );
        let result = execute(&plan);
        proc.stop(Duration::from_secs(5));
        wait_port_closed(&first, Duration::from_secs(10));
        let report = result.map_err(|source| CompareError::Run {
            name: srv.name.clone(),
            source,
        })?;
        eprintln!(
            "== {}: {} ({} starved, {} failures)",
            srv.name,
            if report.summary.pass { "PASS" } else { "FAIL" },
            report.summary.starved,
            report.summary.failures_total
        );
        for why in crate::report::verdict::reasons(&report) {
            eprintln!("   FAIL: {why}");
        }
        reports.push(report);
        // Let TIME_WAIT sockets and the machine settle before the next server.
        std::thread::sleep(Duration::from_secs(2));
    }
    Ok(reports)
}

/// Body of `throng bench compare`: runs every server, writes the report and returns the
/// verdict (true when every server's verdict is PASS).
pub fn compare_command(a: CompareArgs) -> anyhow::Result<bool> {
    let mut scenario = Scenario::load_with(&a.scenario, &a.set)?;
    if let Some(n) = a.listeners {
        scenario.profile.listeners = n;
        for s in &mut scenario.servers {
            s.listeners = None;
        }
    }
    if let Some(h) = a.hold {
        scenario.profile.hold = h;
    }
    if !a.only.is_empty() {
        scenario.servers.retain(|s| a.only.contains(&s.name));
    }
    let name = scenario.name.clone().unwrap_or_else(|| {
        a.scenario
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_else(|| "compare".into())
    });
    let out = a
        .out
        .clone()
        .or(scenario.out.as_ref().map(|o| scenario.resolve(o)))
        .unwrap_or_else(|| PathBuf::from("bench-results").join(&name));
    // Refuse before the first server starts rather than after it ran.
    scenario.check_paths()?;
    for srv in &scenario.servers {
        crate::mode::choose(scenario.mode, false, false, &srv.urls)
            .map_err(|e| anyhow::anyhow!("server {}: {e}", srv.name))?;
    }
    let reports = run_scenario(&scenario, &out, !a.no_progress, a.worker_exe.clone())?;
    let refs: Vec<&RunReport> = reports.iter().collect();
    let paths = crate::report::write_compare(&out, &a.scenario.display().to_string(), &refs)?;
    if let Some(j) = &a.junit {
        std::fs::write(j, crate::report::junit::render(&refs))?;
    }
    for r in &refs {
        println!("{}: {}", r.name, r.verdict);
    }
    println!("{}", crate::report::summary_table(&refs));
    println!("report: {}", paths.html.display());
    println!("json:   {}", paths.json.display());
    Ok(reports.iter().all(|r| r.summary.pass))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_scenario_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../bench/scenarios/throng-vs-icecast.toml");
        let s = Scenario::load(&path).unwrap();
        assert!(s.servers.len() >= 2);
        assert_eq!(s.profile.listeners, 10_000);
    }

    #[test]
    fn a_scenario_can_name_tls_targets() {
        let s: Scenario = toml::from_str(
            "[profile]\nlisteners = 10\nca = \"cert.pem\"\n\
             [[server]]\nname = \"throng-tls\"\ncommand = [\"throng\", \"serve\"]\n\
             urls = [\"https://localhost:8443/demo.mp3\"]\n\
             source_url = \"http://127.0.0.1:8000/demo.mp3\"\n",
        )
        .unwrap();
        assert_eq!(s.profile.ca.as_deref(), Some(Path::new("cert.pem")));
        let url = HttpUrl::parse(&s.servers[0].urls[0]).unwrap();
        assert!(url.tls && url.port == 8443);
    }

    #[test]
    fn shipped_scenarios_name_files_relative_to_themselves() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/scenarios");
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_none_or(|x| x != "toml") {
                continue;
            }
            let s = Scenario::load(&path).unwrap();
            // The cluster scenarios serve the built-in demo mount: no source.
            if let Some(src) = s.source.as_ref() {
                assert!(s.resolve(&src.file).is_file(), "{}", path.display());
            }
            for srv in &s.servers {
                let prog = s.resolve(Path::new(&srv.command[0]));
                if srv.name != "throng" {
                    assert!(prog.is_file(), "{}: {}", path.display(), prog.display());
                }
            }
        }
    }

    #[test]
    fn a_scenario_can_compare_events_or_whep_runs() {
        let s: Scenario = toml::from_str(
            "mode = \"events\"\n[profile]\nlisteners = 10\n\
             [events]\nadmin_password = \"pw\"\nchanges = 3\n\
             [whep]\nwhep_threads = 2\n\
             [[server]]\nname = \"throng\"\ncommand = [\"throng\", \"serve\"]\n\
             urls = [\"http://127.0.0.1:8000/api/v1/events?mount=/a.mp3\"]\n",
        )
        .unwrap();
        assert_eq!(s.mode, Some(Mode::Events));
        assert_eq!(s.events.changes, 3);
        assert_eq!(
            s.events.admin_user, "admin",
            "unset flags keep their defaults"
        );
        assert_eq!(s.whep.whep_threads, 2);
        let bad = "mode = \"whep\"\n[[server]]\nname = \"x\"\ncommand = [\"x\"]\n\
                   urls = [\"http://h/a/index.m3u8\"]\n";
        let s: Scenario = toml::from_str(bad).unwrap();
        assert!(crate::mode::choose(s.mode, false, false, &s.servers[0].urls).is_err());
    }
}
