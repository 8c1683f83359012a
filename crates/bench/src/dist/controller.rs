//! The controller of a run over agents (`throng bench run --agents`, or `[[agent]]` in a
//! scenario): it reaches every agent (TCP, TLS with `--agent-ca`, or SSH), proves the shared
//! token, estimates each agent's clock (RFC 5905 §8, [`crate::dist::clock`]), splits every
//! group over the agents by capacity or weight (k6's execution segments), refuses a plan an
//! agent cannot hold and a latency threshold tighter than the clocks' uncertainty (exit 2,
//! before any listener starts), then runs the plan as a one-machine run does
//! ([`crate::run::session`]) with the agents as its hosts: their merged seconds merged again
//! exactly ([`SecondMerger`]), so the report, the thresholds, the live series and `compare` are
//! those of a one-machine run, plus a per-agent table.
//!
//! Faults are results: an agent that stops reporting for [`AGENT_SILENCE`] or whose link
//! closes is lost ("agent B lost at 41 s: 20,000 listeners unaccounted for", a FAIL) while the
//! others finish; the controller heartbeats every second and re-estimates the clocks every
//! [`CLOCK_EVERY`], and an agent stops its listeners when the heartbeats stop.

use crate::dist::capacity::{self, Capacity};
use crate::dist::clock::{estimate, Estimate, Exchange};
use crate::dist::wire::{self, Reader, ToAgent, ToController, Writer, PROTOCOL, TOKEN_ENV};
use crate::profile::segment::ExecutionSegment;
use crate::profile::slice::unix_us;
use crate::report::summary::{Lost, RunReport};
use crate::run::live::AgentLive;
use crate::run::local::{GroupShare, HostEvent, HostShare};
use crate::run::plan::{Plan, RunError};
use crate::run::session::{Hosts, Start};
use crate::stats::merge::SecondMerger;
use crate::stats::{GroupTick, Snapshot};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// An agent that reports nothing for this long is lost.
pub const AGENT_SILENCE: Duration = Duration::from_secs(5);

/// How often the clocks are estimated again during a run.
pub const CLOCK_EVERY: Duration = Duration::from_secs(10);

/// Clock exchanges per estimate.
pub const EXCHANGES: u32 = 8;

/// How long before second 0 the agents get their plans.
pub const LEAD: Duration = Duration::from_secs(2);

/// How the controller reaches its agents.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// How long to keep trying to reach them.
    pub wait: Duration,
    /// The CA of their certificates (TLS).
    pub ca: Option<PathBuf>,
}

/// One agent, reached.
struct Agent {
    /// Its name in the report (its host's, else its address).
    name: String,
    address: String,
    writer: Writer,
    capacity: Capacity,
    estimate: Estimate,
    /// Exchanges since the last estimate.
    exchanges: Vec<Exchange>,
    /// Its ssh process, for an `ssh://` agent.
    ssh: Option<std::process::Child>,
}

enum Msg {
    From(usize, ToController, u64),
    Gone(usize, String),
}

fn reader_thread(k: usize, mut r: Reader, tx: Sender<Msg>) {
    std::thread::spawn(move || loop {
        match r.recv::<ToController>() {
            Ok(m) => {
                if tx.send(Msg::From(k, m, unix_us())).is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = tx.send(Msg::Gone(k, e.to_string()));
                return;
            }
        }
    });
}

/// Reaches the agent at `address` (retrying until `until`): the two halves of its link, and its
/// ssh process for an `ssh://` agent.
fn connect(
    address: &str,
    o: &Options,
    until: Instant,
) -> Result<(Reader, Writer, Option<std::process::Child>), String> {
    if let Some(rest) = address.strip_prefix("ssh://") {
        return crate::dist::ssh::start(rest).map(|(r, w, c)| (r, w, Some(c)));
    }
    let host = address
        .rsplit_once(':')
        .map(|(h, _)| h.trim_start_matches('[').trim_end_matches(']'))
        .unwrap_or(address)
        .to_owned();
    let mut last = String::new();
    loop {
        match address.to_socket_addrs() {
            Ok(addrs) => {
                for a in addrs {
                    match TcpStream::connect_timeout(&a, Duration::from_secs(3)) {
                        Ok(s) => {
                            let link = match &o.ca {
                                Some(ca) => crate::dist::link::tls_client(s, &host, ca),
                                None => crate::dist::link::plain(s).map_err(|e| e.to_string()),
                            };
                            return link.map(|(r, w)| (r, w, None));
                        }
                        Err(e) => last = format!("{a}: {e}"),
                    }
                }
            }
            Err(e) => last = e.to_string(),
        }
        if Instant::now() >= until {
            return Err(format!("agent {address}: not reached ({last})"));
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Waits for one message of agent `k` (others' go back to `pending`).
fn wait_for(
    rx: &Receiver<Msg>,
    k: usize,
    timeout: Duration,
    pending: &mut Vec<Msg>,
) -> Result<(ToController, u64), String> {
    // A message of this agent already taken while waiting for another comes first.
    if let Some(i) = pending
        .iter()
        .position(|m| matches!(m, Msg::From(j, ..) | Msg::Gone(j, _) if *j == k))
    {
        return match pending.remove(i) {
            Msg::From(_, m, at) => Ok((m, at)),
            Msg::Gone(_, e) => Err(e),
        };
    }
    let end = Instant::now() + timeout;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Msg::From(j, m, at)) if j == k => return Ok((m, at)),
            Ok(Msg::Gone(j, e)) if j == k => return Err(e),
            Ok(other) => pending.push(other),
            Err(_) => return Err(format!("no answer in {} s", timeout.as_secs())),
        }
    }
}

/// Estimates agent `k`'s clock with [`EXCHANGES`] exchanges.
fn probe(
    a: &Agent,
    k: usize,
    rx: &Receiver<Msg>,
    pending: &mut Vec<Msg>,
) -> Result<Estimate, String> {
    let mut ex = Vec::new();
    for id in 0..EXCHANGES {
        let t1 = unix_us();
        a.writer
            .send(&ToAgent::Ping { id, t1 })
            .map_err(|e| e.to_string())?;
        match wait_for(rx, k, Duration::from_secs(5), pending)? {
            (ToController::Pong { t1, t2, t3, .. }, t4) => ex.push(Exchange { t1, t2, t3, t4 }),
            (other, _) => return Err(format!("unexpected {other:?}")),
        }
    }
    estimate(&ex).ok_or_else(|| "no clock exchange".to_owned())
}

/// Runs `plan` over its agents and returns its report.
///
/// Errors: an agent not reached, refusing (a wrong token, busy), or unable to hold its share;
/// a latency threshold tighter than the clocks; see also [`crate::run::session::run`].
pub fn run(plan: &Plan, o: &Options) -> Result<RunReport, RunError> {
    let token = std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty());
    let until = Instant::now() + o.wait;
    let (tx, rx) = mpsc::channel();
    let mut agents: Vec<Agent> = Vec::new();
    let mut pending = Vec::new();
    let me = crate::observe::meta::host_name();
    for (k, entry) in plan.agents.iter().enumerate() {
        let (reader, writer, ssh) = connect(&entry.address, o, until).map_err(RunError::Agents)?;
        reader_thread(k, reader, tx.clone());
        let fail = |why: String| RunError::Agents(format!("agent {}: {why}", entry.address));
        let nonce = match wait_for(&rx, k, Duration::from_secs(15), &mut pending).map_err(fail)? {
            (ToController::Challenge { protocol, nonce, .. }, _) if protocol == PROTOCOL => nonce,
            (ToController::Challenge { protocol, version, .. }, _) => {
                return Err(fail(format!(
                    "speaks protocol {protocol} ({version}), this controller {PROTOCOL}: use the same throng version"
                )))
            }
            (ToController::Refused { reason }, _) => return Err(fail(format!("refused: {reason}"))),
            (other, _) => return Err(fail(format!("unexpected {other:?}"))),
        };
        let proof = match (&token, &ssh) {
            (Some(t), _) => wire::proof(t, &nonce),
            (None, Some(_)) => String::new(),
            (None, None) => {
                return Err(RunError::Agents(format!(
                    "{TOKEN_ENV} is not set: the agents need the shared token"
                )))
            }
        };
        writer
            .send(&ToAgent::Hello {
                protocol: PROTOCOL,
                proof,
                controller: me.clone(),
            })
            .map_err(|e| fail(e.to_string()))?;
        let capacity =
            match wait_for(&rx, k, Duration::from_secs(15), &mut pending).map_err(fail)? {
                (ToController::Welcome { capacity }, _) => capacity,
                (ToController::Refused { reason }, _) => {
                    return Err(fail(format!("refused: {reason}")))
                }
                (other, _) => return Err(fail(format!("unexpected {other:?}"))),
            };
        let mut a = Agent {
            name: String::new(),
            address: entry.address.clone(),
            writer,
            capacity,
            estimate: Estimate::default(),
            exchanges: Vec::new(),
            ssh,
        };
        a.estimate = probe(&a, k, &rx, &mut pending).map_err(fail)?;
        agents.push(a);
    }
    // Names: the host names, unless two agents share one (then their addresses).
    for k in 0..agents.len() {
        let host = agents[k].capacity.host.clone();
        let dup = agents.iter().filter(|x| x.capacity.host == host).count() > 1;
        agents[k].name = if dup || host.is_empty() {
            agents[k].address.clone()
        } else {
            host
        };
    }
    // A latency threshold tighter than the clocks cannot be judged.
    let worst = agents
        .iter()
        .map(|a| a.estimate.uncertainty_us)
        .max()
        .unwrap_or(0);
    for t in &plan.thresholds {
        if t.metric.crosses_clocks() && t.limit * 1000.0 <= worst as f64 {
            return Err(RunError::Agents(format!(
                "threshold {} is tighter than the agents' clocks are known ({:.2} ms): it cannot be judged",
                t.name(),
                worst as f64 / 1000.0
            )));
        }
    }
    // The split, by weight or capacity, and each agent's check.
    let weights: Vec<u32> = plan
        .agents
        .iter()
        .zip(&agents)
        .map(|(e, a)| e.weight.unwrap_or(a.capacity.listeners).max(1))
        .collect();
    let whole = HostShare {
        groups: plan
            .groups
            .iter()
            .map(|g| GroupShare {
                plan: g.clone(),
                segment: ExecutionSegment::whole(),
            })
            .collect(),
        start_unix_ms: 0,
        clock_offset_us: 0,
        bursts: None,
        max_workers: None,
    };
    let mut shares = Vec::new();
    for (k, a) in agents.iter().enumerate() {
        let mut s = capacity::split(&whole, &weights, k);
        s.max_workers = Some(a.capacity.max_workers);
        capacity::check(&a.name, &a.capacity, &s).map_err(RunError::Agents)?;
        shares.push(s);
    }
    let agents = Arc::new(Mutex::new(agents));
    let ngroups = plan.groups.len();
    let a2 = agents.clone();
    let report = crate::run::session::run(plan, LEAD, move |start: &Start| {
        let list = a2.lock().unwrap_or_else(|p| p.into_inner());
        for (k, a) in list.iter().enumerate() {
            let mut s = shares[k].clone();
            s.start_unix_ms =
                (start.start_unix_ms as i64 + a.estimate.offset_us / 1000).max(0) as u64;
            s.clock_offset_us = -a.estimate.offset_us;
            s.bursts = start.bursts.clone();
            a.writer
                .send(&ToAgent::Plan {
                    share: Box::new(s),
                    estimate: a.estimate,
                    name: a.name.clone(),
                })
                .map_err(|e| RunError::Agents(format!("agent {}: {e}", a.name)))?;
        }
        let mut processes = vec![0u32; list.len()];
        for k in 0..list.len() {
            match wait_for(&rx, k, Duration::from_secs(20), &mut pending) {
                Ok((ToController::Ready { processes: p }, _)) => processes[k] = p,
                Ok((ToController::Refused { reason }, _)) => {
                    return Err(RunError::Agents(format!(
                        "agent {}: {reason}",
                        list[k].name
                    )))
                }
                Ok((other, _)) => {
                    return Err(RunError::Agents(format!(
                        "agent {}: unexpected {other:?}",
                        list[k].name
                    )))
                }
                Err(e) => return Err(RunError::Agents(format!("agent {}: {e}", list[k].name))),
            }
        }
        let n = list.len();
        let mut stream_groups = Vec::new();
        for _ in 0..n {
            for g in 0..ngroups {
                stream_groups.push(g as u16);
            }
        }
        drop(list);
        let remote = RemoteHosts {
            agents: a2.clone(),
            rx,
            pending: std::mem::take(&mut pending),
            merger: SecondMerger::new(&stream_groups, ngroups),
            ngroups,
            heard: vec![Instant::now(); n],
            done: vec![None; n],
            lost: vec![None; n],
            last: vec![vec![Snapshot::default(); ngroups]; n],
            peak: vec![0; n],
            latency: vec![crate::report::summary::Hists::default(); n],
            processes,
            events: Vec::new(),
            last_beat: Instant::now(),
            last_clock: Instant::now(),
            second: 0,
        };
        Ok(Box::new(remote) as Box<dyn Hosts>)
    });
    for a in agents.lock().unwrap_or_else(|p| p.into_inner()).iter_mut() {
        if let Some(mut c) = a.ssh.take() {
            let end = Instant::now() + Duration::from_secs(5);
            while Instant::now() < end && c.try_wait().ok().flatten().is_none() {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
    report
}

/// The agents of a run, as the run loop's hosts.
struct RemoteHosts {
    agents: Arc<Mutex<Vec<Agent>>>,
    rx: Receiver<Msg>,
    pending: Vec<Msg>,
    merger: SecondMerger,
    ngroups: usize,
    heard: Vec<Instant>,
    /// Each agent's CPU, once it said it is done (µs).
    done: Vec<Option<u64>>,
    /// The second each agent was lost at.
    lost: Vec<Option<u32>>,
    /// Each agent's last snapshot of every group.
    last: Vec<Vec<Snapshot>>,
    /// Each agent's most listeners at once.
    peak: Vec<u32>,
    /// Each agent's latency histograms (mouth-to-ear, event delivery), on the run's clock.
    latency: Vec<crate::report::summary::Hists>,
    processes: Vec<u32>,
    events: Vec<HostEvent>,
    last_beat: Instant,
    last_clock: Instant,
    /// The latest second handed out.
    second: u32,
}

impl RemoteHosts {
    fn stream(&self, agent: usize, group: usize) -> usize {
        agent * self.ngroups + group
    }

    fn lose(&mut self, k: usize, why: &str) {
        if self.lost[k].is_some() || self.done[k].is_some() {
            return;
        }
        for g in 0..self.ngroups {
            let s = self.stream(k, g);
            self.merger.lose(s);
        }
        let second = self.second + 1;
        self.lost[k] = Some(second);
        let listeners: u32 = self.last[k].iter().map(|s| s.want).sum();
        let name = self.agents.lock().unwrap_or_else(|p| p.into_inner())[k]
            .name
            .clone();
        eprintln!("throng bench: agent {name} lost at {second} s ({why})");
        self.events.push(HostEvent::Lost(Lost {
            host: name,
            second,
            listeners,
        }));
    }

    fn handle(&mut self, m: Msg) {
        match m {
            Msg::From(k, msg, at) => {
                self.heard[k] = Instant::now();
                match msg {
                    ToController::Second {
                        second,
                        groups,
                        last,
                    } => {
                        let want: u32 = groups.iter().map(|s| s.want).sum();
                        self.peak[k] = self.peak[k].max(want);
                        for (g, snap) in groups.into_iter().enumerate().take(self.ngroups) {
                            self.latency[k].m2e.merge(&snap.m2e);
                            self.latency[k].event_latency.merge(&snap.event_latency);
                            self.latency[k].ttfb.merge(&snap.ttfb);
                            let mut keep = snap.clone();
                            keep.clear_hists();
                            self.last[k][g] = keep;
                            let s = self.stream(k, g);
                            self.merger.add(
                                s,
                                GroupTick {
                                    group: g as u16,
                                    second,
                                    done: last,
                                    snap,
                                },
                            );
                        }
                    }
                    ToController::Error { message } => {
                        let name = self.agents.lock().unwrap_or_else(|p| p.into_inner())[k]
                            .name
                            .clone();
                        self.events
                            .push(HostEvent::Error(format!("agent {name}: {message}")));
                    }
                    ToController::Done { cpu_us } => self.done[k] = Some(cpu_us),
                    ToController::Pong { t1, t2, t3, .. } => {
                        let mut list = self.agents.lock().unwrap_or_else(|p| p.into_inner());
                        let a = &mut list[k];
                        a.exchanges.push(Exchange { t1, t2, t3, t4: at });
                        if a.exchanges.len() as u32 >= EXCHANGES {
                            if let Some(e) = estimate(&a.exchanges) {
                                a.estimate = e;
                                let _ = a.writer.send(&ToAgent::Clock { estimate: e });
                            }
                            a.exchanges.clear();
                        }
                    }
                    _ => {}
                }
            }
            Msg::Gone(k, why) => {
                if self.done[k].is_none() {
                    self.lose(k, &why);
                }
            }
        }
    }
}

impl Hosts for RemoteHosts {
    fn next(&mut self, wait: Duration) -> HostEvent {
        if let Some(e) = self.events.pop() {
            return e;
        }
        if let Some(m) = self.merger.pop() {
            self.second = m.second;
            return HostEvent::Second(m);
        }
        if self.merger.finished() {
            return HostEvent::Finished;
        }
        for m in std::mem::take(&mut self.pending) {
            self.handle(m);
        }
        match self.rx.recv_timeout(wait) {
            Ok(m) => self.handle(m),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                for k in 0..self.heard.len() {
                    self.lose(k, "every link closed");
                }
            }
        }
        // Heartbeats, clock probes, silent agents.
        if self.last_beat.elapsed() >= Duration::from_secs(1) {
            self.last_beat = Instant::now();
            let probe = self.last_clock.elapsed() >= CLOCK_EVERY;
            if probe {
                self.last_clock = Instant::now();
            }
            let list = self.agents.lock().unwrap_or_else(|p| p.into_inner());
            for (k, a) in list.iter().enumerate() {
                if self.lost[k].is_some() || self.done[k].is_some() {
                    continue;
                }
                let _ = a.writer.send(&ToAgent::Heartbeat);
                if probe {
                    for id in 0..EXCHANGES {
                        let _ = a.writer.send(&ToAgent::Ping { id, t1: unix_us() });
                        std::thread::sleep(Duration::from_millis(2));
                    }
                }
            }
        }
        for k in 0..self.heard.len() {
            if self.heard[k].elapsed() > AGENT_SILENCE {
                self.lose(k, "silent");
            }
        }
        if let Some(e) = self.events.pop() {
            return e;
        }
        match self.merger.pop() {
            Some(m) => {
                self.second = m.second;
                HostEvent::Second(m)
            }
            None if self.merger.finished() => HostEvent::Finished,
            None => HostEvent::Idle,
        }
    }

    fn stop(&mut self) {
        let list = self.agents.lock().unwrap_or_else(|p| p.into_inner());
        for a in list.iter() {
            let _ = a.writer.send(&ToAgent::Stop);
        }
    }

    fn join(&mut self, grace: Duration) {
        let end = Instant::now() + grace;
        while Instant::now() < end
            && (0..self.done.len()).any(|k| self.done[k].is_none() && self.lost[k].is_none())
        {
            match self.rx.recv_timeout(Duration::from_millis(100)) {
                Ok(m) => self.handle(m),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
    }

    fn processes(&self) -> u32 {
        self.processes.iter().sum()
    }

    fn agents_live(&self) -> Vec<AgentLive> {
        let list = self.agents.lock().unwrap_or_else(|p| p.into_inner());
        list.iter()
            .enumerate()
            .map(|(k, a)| AgentLive {
                name: a.name.clone(),
                listeners: self.last[k].iter().map(|s| s.connected()).sum(),
                offset_s: a.estimate.offset_us as f64 / 1e6,
            })
            .collect()
    }

    fn agents_report(&self) -> Vec<serde_json::Value> {
        let list = self.agents.lock().unwrap_or_else(|p| p.into_inner());
        list.iter()
            .enumerate()
            .map(|(k, a)| {
                let mut t = Snapshot::default();
                for s in &self.last[k] {
                    t.merge_counts(s);
                }
                serde_json::json!({
                    "name": a.name,
                    "address": a.address,
                    "host": a.capacity.host,
                    "capacity": a.capacity,
                    "clock_offset_ms": a.estimate.offset_us as f64 / 1000.0,
                    "clock_uncertainty_ms": a.estimate.uncertainty_us as f64 / 1000.0,
                    "clock_samples": a.estimate.samples,
                    "listeners": self.peak[k],
                    "started": t.started,
                    "starved": t.starved_listeners,
                    "corrupt": t.rules.corrupt.listeners,
                    "failed": t.failed_listeners,
                    "connects": t.connects,
                    "media_seconds": t.media_us as f64 / 1e6,
                    "ttfb_p99_ms": self.latency[k].ttfb.quantile_ms(0.99),
                    "m2e_p99_ms": self.latency[k].m2e.quantile_ms(0.99),
                    "event_latency_p50_ms": self.latency[k].event_latency.quantile_ms(0.5),
                    "event_latency_p99_ms": self.latency[k].event_latency.quantile_ms(0.99),
                    "engines_cpu_s": t.cpu_us as f64 / 1e6,
                    "agent_cpu_s": self.done[k].map(|c| c as f64 / 1e6),
                    "worker_processes": self.processes[k],
                    "lost_at_s": self.lost[k],
                    "summary": t,
                })
            })
            .collect()
    }

    fn extra_cpu_us(&self) -> u64 {
        // Each agent's own work (merging, its link) beyond its engines'.
        (0..self.done.len())
            .map(|k| {
                let engines: u64 = self.last[k].iter().map(|s| s.cpu_us).sum();
                self.done[k].unwrap_or(0).saturating_sub(engines)
            })
            .sum()
    }
}
