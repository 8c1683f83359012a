//! The one worker protocol of every mode: engines run as in-process threads or as child
//! processes of the bench.
//!
//! A worker process is the current executable re-run as `... bench worker`: it reads its
//! [`WorkerSpec`] (the mode and that mode's engine spec) as one JSON line from stdin, writes
//! one [`Tick`] JSON line per tick to stdout, and stops early when stdin closes (so workers
//! never outlive the parent). Each process opens at most `max_per_worker` sockets, keeping
//! under the per-process file limit. An in-process worker (`--workers 0`) runs the same
//! [`WorkerSpec::run`] on a thread and hands its ticks over a channel.

use crate::events::subscriber::{EventsSpec, EventsTick};
use crate::hls::player::HlsEngine;
use crate::icy::engine::{Engine, EngineSpec};
use crate::mode::Mode;
use crate::stats::WorkerTick;
use crate::whep::viewer::{WhepSpec, WhepTick};
use clap::Args;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use thiserror::Error;

/// Arguments of the hidden `throng bench worker` subcommand (the spec comes on stdin).
#[derive(Debug, Args)]
pub struct WorkerArgs {}

/// How to start a worker process: a program and the arguments that select the worker mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launcher {
    /// The executable.
    pub program: PathBuf,
    /// Arguments before nothing else (e.g. `["bench", "worker"]`).
    pub args: Vec<String>,
}

impl Launcher {
    /// Runs `program` as `<program> bench worker` (`--worker-exe`).
    pub fn program(program: PathBuf) -> Launcher {
        Launcher {
            program,
            args: vec!["bench".into(), "worker".into()],
        }
    }

    /// Re-executes the current binary as `<exe> bench worker`.
    pub fn current_exe() -> std::io::Result<Launcher> {
        Ok(Launcher {
            program: std::env::current_exe()?,
            args: vec!["bench".into(), "worker".into()],
        })
    }
}

/// What one worker runs: the run's mode and that mode's engine spec (one JSON line on a
/// worker process's stdin).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "mode", content = "spec", rename_all = "lowercase")]
pub enum WorkerSpec {
    /// ICY listeners.
    Icy(EngineSpec),
    /// HLS players.
    Hls(EngineSpec),
    /// Event-stream subscribers.
    Events(EventsSpec),
    /// WHEP viewers.
    Whep(WhepSpec),
}

/// One tick of a worker (one JSON line on a worker process's stdout).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tick {
    /// One second of ICY listeners or HLS players.
    Listeners(WorkerTick),
    /// Event-stream subscribers' progress.
    Events(EventsTick),
    /// WHEP viewers' counts (and, last, the worker's result).
    Whep(WhepTick),
}

impl WorkerSpec {
    /// The mode of the spec.
    pub fn mode(&self) -> Mode {
        match self {
            WorkerSpec::Icy(_) => Mode::Icy,
            WorkerSpec::Hls(_) => Mode::Hls,
            WorkerSpec::Events(_) => Mode::Events,
            WorkerSpec::Whep(_) => Mode::Whep,
        }
    }

    /// The worker index.
    pub fn worker(&self) -> u32 {
        match self {
            WorkerSpec::Icy(s) | WorkerSpec::Hls(s) => s.worker,
            WorkerSpec::Events(s) => s.worker,
            WorkerSpec::Whep(s) => s.worker,
        }
    }

    /// Builds the mode's engine (an ICY or HLS engine checks its URLs and bind range here;
    /// events and WHEP engines check theirs when they run).
    ///
    /// Errors: [`WorkerError::Engine`] for a bad URL or bind range.
    pub fn prepare(self) -> Result<Prepared, WorkerError> {
        Ok(match self {
            WorkerSpec::Icy(s) => Prepared::Icy(Engine::new(s)?),
            WorkerSpec::Hls(s) => Prepared::Hls(HlsEngine::new(s)?),
            WorkerSpec::Events(s) => Prepared::Events(s),
            WorkerSpec::Whep(s) => Prepared::Whep(s),
        })
    }

    /// Builds the engine and runs it (see [`Prepared::run`]).
    ///
    /// Errors: the engine could not start (bad URL or bind range) or failed.
    pub fn run(self, stop: &AtomicBool, emit: impl FnMut(Tick) -> bool) -> anyhow::Result<()> {
        self.prepare()?.run(stop, emit)
    }
}

/// A worker's engine, built from its [`WorkerSpec`] and ready to run.
pub enum Prepared {
    /// ICY listeners.
    Icy(Engine),
    /// HLS players.
    Hls(HlsEngine),
    /// Event-stream subscribers.
    Events(EventsSpec),
    /// WHEP viewers.
    Whep(WhepSpec),
}

impl Prepared {
    /// Runs the engine to its end (or until `stop`), handing every tick to `emit`; an ICY or
    /// HLS engine also stops when `emit` returns false (the parent went away).
    ///
    /// Errors: the engine failed (events and WHEP: also a bad URL or bind range).
    pub fn run(self, stop: &AtomicBool, mut emit: impl FnMut(Tick) -> bool) -> anyhow::Result<()> {
        match self {
            Prepared::Icy(e) => e.run(stop, |t| emit(Tick::Listeners(t.clone())))?,
            Prepared::Hls(e) => e.run(stop, |t| emit(Tick::Listeners(t.clone())))?,
            Prepared::Events(s) => crate::events::subscriber::run(&s, stop, |t| {
                emit(Tick::Events(t));
            })?,
            Prepared::Whep(s) => crate::whep::viewer::run_worker(&s, stop, |t| {
                emit(Tick::Whep(t.clone()));
            })?,
        }
        Ok(())
    }
}

/// What workers send to the parent.
// One message per worker per second: boxing the tick would save nothing worth a pointer.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum WorkerMsg {
    /// One tick of one worker.
    Tick(Tick),
    /// A worker ended; `error` holds its failure (and stderr) if it did not end cleanly.
    Exited {
        /// Worker index.
        worker: u32,
        /// Why it failed, if it did.
        error: Option<String>,
    },
}

/// Errors starting workers.
#[derive(Debug, Error)]
pub enum WorkerError {
    /// The engine could not be prepared (bad URL, bad range).
    #[error(transparent)]
    Engine(#[from] crate::icy::engine::EngineError),
    /// The worker process could not be spawned or fed.
    #[error("starting worker process {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The spec could not be read or written.
    #[error("worker spec: {0}")]
    Spec(String),
}

enum Handle {
    Thread(JoinHandle<()>),
    Process {
        child: Child,
        stdin: Option<ChildStdin>,
        reader: Option<JoinHandle<()>>,
    },
}

/// The running workers of one bench run.
pub struct WorkerSet {
    handles: Vec<Handle>,
    stop: Arc<AtomicBool>,
}

impl WorkerSet {
    /// Starts one worker per spec: in-process threads when `launcher` is `None`, else processes.
    /// Every message goes to `tx`.
    pub fn start(
        specs: Vec<WorkerSpec>,
        launcher: Option<&Launcher>,
        tx: Sender<WorkerMsg>,
    ) -> Result<WorkerSet, WorkerError> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut handles = Vec::new();
        for spec in specs {
            let worker = spec.worker();
            match launcher {
                None => {
                    let engine = spec.prepare()?;
                    let tx = tx.clone();
                    let stop = stop.clone();
                    let h = std::thread::Builder::new()
                        .name(format!("bench-worker-{worker}"))
                        .spawn(move || {
                            let r = engine.run(&stop, |t| tx.send(WorkerMsg::Tick(t)).is_ok());
                            let _ = tx.send(WorkerMsg::Exited {
                                worker,
                                error: r.err().map(|e| e.to_string()),
                            });
                        })
                        .map_err(|source| WorkerError::Spawn {
                            program: "thread".into(),
                            source,
                        })?;
                    handles.push(Handle::Thread(h));
                }
                Some(l) => handles.push(spawn_process(spec, l, tx.clone())?),
            }
        }
        Ok(WorkerSet { handles, stop })
    }

    /// Asks every worker to stop now (they send a final tick and exit).
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in &mut self.handles {
            if let Handle::Process { stdin, .. } = h {
                stdin.take();
            }
        }
    }

    /// Waits for all workers to end (processes are killed after `grace`).
    pub fn join(mut self, grace: Duration) {
        for h in self.handles.drain(..) {
            match h {
                Handle::Thread(j) => {
                    let _ = j.join();
                }
                Handle::Process {
                    mut child,
                    stdin,
                    reader,
                } => {
                    drop(stdin);
                    let deadline = Instant::now() + grace;
                    loop {
                        match child.try_wait() {
                            Ok(Some(_)) => break,
                            Ok(None) if Instant::now() < deadline => {
                                std::thread::sleep(Duration::from_millis(20))
                            }
                            _ => {
                                let _ = child.kill();
                                let _ = child.wait();
                                break;
                            }
                        }
                    }
                    if let Some(r) = reader {
                        let _ = r.join();
                    }
                }
            }
        }
    }
}

fn spawn_process(
    spec: WorkerSpec,
    l: &Launcher,
    tx: Sender<WorkerMsg>,
) -> Result<Handle, WorkerError> {
    let worker = spec.worker();
    let spawn_err = |source| WorkerError::Spawn {
        program: l.program.display().to_string(),
        source,
    };
    let mut child = Command::new(&l.program)
        .args(&l.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn_err)?;
    let mut stdin = child.stdin.take();
    let line = serde_json::to_string(&spec).map_err(|e| WorkerError::Spec(e.to_string()))?;
    if let Some(s) = stdin.as_mut() {
        s.write_all(line.as_bytes())
            .and_then(|_| s.write_all(b"\n"))
            .and_then(|_| s.flush())
            .map_err(spawn_err)?;
    }
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let err_thread = stderr.map(|mut e| {
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = e.read_to_string(&mut s);
                s
            })
        });
        let mut bad = None;
        if let Some(out) = stdout {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                match serde_json::from_str::<Tick>(&line) {
                    Ok(t) => {
                        let _ = tx.send(WorkerMsg::Tick(t));
                    }
                    Err(e) => bad = Some(format!("bad line from worker: {e}: {line}")),
                }
            }
        }
        let err_text = err_thread.and_then(|t| t.join().ok()).unwrap_or_default();
        let error = match (bad, err_text.trim().is_empty()) {
            (Some(b), _) => Some(format!("{b}\n{err_text}")),
            (None, false) => Some(err_text.trim().to_owned()),
            (None, true) => None,
        };
        let _ = tx.send(WorkerMsg::Exited { worker, error });
    });
    Ok(Handle::Process {
        child,
        stdin,
        reader: Some(reader),
    })
}

/// Body of `throng bench worker`, the one worker subcommand of every mode: its
/// [`WorkerSpec`] from stdin, one [`Tick`] JSON line per tick to stdout (each flushed at once);
/// stops early when stdin closes.
///
/// Errors: no spec on stdin or one that does not parse, or the engine's error.
pub fn worker_command(_args: WorkerArgs) -> anyhow::Result<()> {
    let mut stdin = BufReader::new(std::io::stdin());
    let mut line = String::new();
    stdin.read_line(&mut line)?;
    let spec: WorkerSpec = serde_json::from_str(&line)?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
        stop2.store(true, Ordering::Relaxed);
    });
    let stdout = std::io::stdout();
    spec.run(&stop, |t| {
        let mut out = stdout.lock();
        serde_json::to_writer(&mut out, &t).is_ok()
            && out.write_all(b"\n").is_ok()
            && out.flush().is_ok()
    })
}
