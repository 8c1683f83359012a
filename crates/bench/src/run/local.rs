//! This host's share of a run: its execution segment of every group split over worker
//! processes (or in-process engines for small groups), their ticks merged second by second
//! into one [`MergedSecond`] per second ([`SecondMerger`]). A one-machine run holds every
//! listener here; an agent holds the segments its controller gave it and sends the merged
//! seconds up (the same type, so the controller merges hosts as a host merges workers).
//!
//! A worker process that exits before its last tick, or stops ticking for
//! [`WORKER_SILENCE`], is lost: its ticks so far stay counted, the rest of the run goes on
//! without it, and the loss is an error of the run.

use crate::mode::Mode;
use crate::profile::segment::{ExecutionSegment, Stripe};
use crate::profile::slice::{RunClock, Slice};
use crate::run::worker::{Launcher, WorkerMsg, WorkerSet, WorkerSpec};
use crate::scenario::plan::GroupPlan;
use crate::stats::merge::{MergedSecond, SecondMerger};
use crate::whep::bursts::BurstSchedule;
use serde::{Deserialize, Serialize};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A worker process that reports nothing for this long is lost.
pub const WORKER_SILENCE: Duration = Duration::from_secs(15);

/// One group's part on this host.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GroupShare {
    /// The group.
    pub plan: GroupPlan,
    /// This host's segment of it.
    pub segment: ExecutionSegment,
}

/// What one host runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostShare {
    /// Every group of the run (index = group), each with this host's segment.
    pub groups: Vec<GroupShare>,
    /// Second 0 of the run on this host's clock (ms since the Unix epoch).
    pub start_unix_ms: u64,
    /// The run's clock minus this host's (µs).
    pub clock_offset_us: i64,
    /// The tone-burst schedule of the latency probe (WHEP groups time their onsets on it).
    #[serde(default)]
    pub bursts: Option<BurstSchedule>,
    /// Most worker processes per group on this host (an agent's `--max-workers`).
    #[serde(default)]
    pub max_workers: Option<u32>,
}

/// Worker processes for `n` listeners of `g` on one host (0: one in-process engine); WHEP
/// viewers get one per CPU by default.
pub fn workers_for(g: &GroupPlan, n: u32, max_workers: Option<u32>) -> u32 {
    let per = g.max_per_worker.max(1);
    let w = match (g.workers, g.mode) {
        (Some(w), _) => w.min(n.max(1)),
        (None, Mode::Whep) => {
            let cpus = std::thread::available_parallelism().map_or(1, |c| c.get() as u32);
            cpus.max(n.div_ceil(per)).min(n.max(1))
        }
        (None, _) if n <= per => 0,
        (None, _) => n.div_ceil(per),
    };
    match max_workers {
        Some(m) if w > m => m.max(1),
        _ => w,
    }
}

/// What a host's run reports.
#[derive(Debug, Clone, PartialEq)]
pub enum HostEvent {
    /// A second, merged over the host's workers.
    Second(MergedSecond),
    /// Something went wrong that the report should say (a worker failed or was lost).
    Error(String),
    /// A host was lost (an agent killed or cut off); its listeners are unaccounted for.
    Lost(crate::report::summary::Lost),
    /// Every worker is done and every second is out.
    Finished,
    /// Nothing within the wait.
    Idle,
}

/// This host's workers, running.
pub struct LocalHost {
    set: Option<WorkerSet>,
    rx: Receiver<WorkerMsg>,
    merger: SecondMerger,
    /// When each worker last reported.
    heard: Vec<Instant>,
    /// Workers whose process exited.
    exited: Vec<bool>,
    /// Workers per group (processes; 0 for an in-process engine).
    pub processes: u32,
    pending: Vec<HostEvent>,
}

impl LocalHost {
    /// Starts the workers of `share`: processes with `launcher`, in-process engines for
    /// groups small enough.
    ///
    /// Errors: a worker process that cannot be started.
    pub fn start(
        share: &HostShare,
        launcher: Option<Launcher>,
        clock: Arc<RunClock>,
    ) -> Result<LocalHost, crate::run::worker::WorkerError> {
        let mut specs = Vec::new();
        let mut stream_groups = Vec::new();
        let mut processes = 0;
        for (g, gs) in share.groups.iter().enumerate() {
            let peak = gs.plan.schedule.peak();
            let n = gs.segment.ids(peak).len() as u32;
            if n == 0 {
                continue;
            }
            let w = workers_for(&gs.plan, n, share.max_workers);
            let parts = w.max(1);
            processes += w;
            for k in 0..parts {
                let slice = Slice {
                    group: g as u16,
                    name: gs.plan.name.clone(),
                    urls: gs.plan.urls.clone(),
                    schedule: gs.plan.schedule.clone(),
                    segment: gs.segment.then(Stripe::even(parts, k)),
                    behaviour: gs.plan.behaviour.clone(),
                    judge: gs.plan.judge,
                    start_unix_ms: share.start_unix_ms,
                    clock_offset_us: share.clock_offset_us,
                    thread_cpu: w == 0,
                    bind_range: gs.plan.bind_range.clone(),
                };
                specs.push((spec_of(&gs.plan, slice, share), w > 0));
                stream_groups.push(g as u16);
            }
        }
        let launcher = if processes > 0 {
            Some(match launcher {
                Some(l) => l,
                None => Launcher::current_exe().map_err(|source| {
                    crate::run::worker::WorkerError::Spawn {
                        program: "the current executable".into(),
                        source,
                    }
                })?,
            })
        } else {
            None
        };
        let (tx, rx) = mpsc::channel();
        let n = specs.len();
        let set = WorkerSet::start(specs, launcher.as_ref(), tx, clock)?;
        Ok(LocalHost {
            set: Some(set),
            rx,
            merger: SecondMerger::new(&stream_groups, share.groups.len()),
            heard: vec![Instant::now(); n],
            exited: vec![false; n],
            processes,
            pending: Vec::new(),
        })
    }

    /// The next event, waiting at most `wait`.
    pub fn next(&mut self, wait: Duration) -> HostEvent {
        if let Some(e) = self.pending.pop() {
            return e;
        }
        if let Some(m) = self.merger.pop() {
            return HostEvent::Second(m);
        }
        if self.merger.finished() {
            return HostEvent::Finished;
        }
        match self.rx.recv_timeout(wait) {
            Ok(WorkerMsg::Tick(w, t)) => {
                if let Some(h) = self.heard.get_mut(w) {
                    *h = Instant::now();
                }
                self.merger.add(w, *t);
            }
            Ok(WorkerMsg::Exited { worker, error }) => {
                if let Some(x) = self.exited.get_mut(worker) {
                    *x = true;
                }
                let lost = !self.merger.stopped(worker);
                if lost {
                    self.merger.lose(worker);
                }
                match (error, lost) {
                    (Some(e), _) => self
                        .pending
                        .push(HostEvent::Error(format!("worker {worker}: {e}"))),
                    (None, true) => self.pending.push(HostEvent::Error(format!(
                        "worker {worker} ended before the run did"
                    ))),
                    (None, false) => {}
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                for w in 0..self.merger.len() {
                    self.merger.lose(w);
                }
            }
        }
        // A worker silent for too long is lost (the others go on).
        for w in 0..self.heard.len() {
            if !self.merger.stopped(w) && self.heard[w].elapsed() > WORKER_SILENCE {
                self.merger.lose(w);
                self.pending.push(HostEvent::Error(format!(
                    "worker {w} reported nothing for {} s: lost",
                    WORKER_SILENCE.as_secs()
                )));
            }
        }
        if let Some(e) = self.pending.pop() {
            return e;
        }
        match self.merger.pop() {
            Some(m) => HostEvent::Second(m),
            None if self.merger.finished() => HostEvent::Finished,
            None => HostEvent::Idle,
        }
    }

    /// Sets a new estimate of the run's clock for every worker.
    pub fn set_clock_offset(&mut self, offset_us: i64) {
        if let Some(s) = self.set.as_mut() {
            s.set_clock_offset(offset_us);
        }
    }

    /// Asks every worker to stop now (each sends its last tick).
    pub fn stop(&mut self) {
        if let Some(s) = self.set.as_mut() {
            s.stop();
        }
    }

    /// Waits for the workers to end (processes killed after `grace`).
    pub fn join(&mut self, grace: Duration) {
        if let Some(s) = self.set.take() {
            s.join(grace);
        }
    }
}

/// The engine spec of group `g` for `slice`.
fn spec_of(g: &GroupPlan, slice: Slice, share: &HostShare) -> WorkerSpec {
    match g.mode {
        Mode::Icy => WorkerSpec::Icy(crate::icy::engine::IcySpec {
            slice,
            icy_metadata: g.icy_metadata,
            bitrate_kbps: g.bitrate_kbps,
            insecure: g.insecure,
            ca: g.ca.clone(),
        }),
        Mode::Hls => WorkerSpec::Hls(crate::hls::player::HlsSpec {
            slice,
            no_blocking_reload: g.hls_no_blocking_reload,
        }),
        Mode::Events => WorkerSpec::Events(crate::events::subscriber::EventsSpec {
            slice,
            max_latency_ms: g.events.max_latency_ms,
        }),
        Mode::Whep => WorkerSpec::Whep(crate::whep::viewer::WhepSpec {
            slice,
            threads: g.whep_threads.clamp(1, 64),
            bursts: share.bursts.clone(),
        }),
    }
}
