//! The one worker protocol of every mode: engines run as in-process threads or as child
//! processes of the bench.
//!
//! A worker process is the current executable re-run as `... bench worker`: it reads its
//! [`WorkerSpec`] (its group's mode and that mode's engine spec, with the slice of the group
//! it runs) as one JSON line from stdin, writes one [`GroupTick`] JSON line per second to
//! stdout, takes later lines on stdin as control (`{"clock_offset_us": N}`: a new estimate of
//! the run's clock, see [`RunClock`]), and stops when stdin closes (so workers never outlive
//! their parent). Each process opens at most `max_per_worker` sockets, keeping under the
//! per-process file limit. An in-process worker runs the same [`WorkerSpec::run`] on a thread
//! and hands its ticks over a channel.

use crate::events::subscriber::EventsSpec;
use crate::hls::player::{HlsEngine, HlsSpec};
use crate::icy::engine::{Engine, IcySpec};
use crate::mode::Mode;
use crate::profile::slice::{RunClock, Slice};
use crate::stats::GroupTick;
use crate::whep::viewer::WhepSpec;
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
    /// Its arguments (e.g. `["bench", "worker"]`).
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

/// What one worker runs: its group's mode and that mode's engine spec (one JSON line on a
/// worker process's stdin).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "mode", content = "spec", rename_all = "lowercase")]
pub enum WorkerSpec {
    /// ICY listeners.
    Icy(IcySpec),
    /// HLS players.
    Hls(HlsSpec),
    /// Event-stream subscribers.
    Events(EventsSpec),
    /// WHEP viewers.
    Whep(WhepSpec),
}

/// A control line on a worker process's stdin.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Control {
    /// The run's clock minus this host's (µs).
    pub clock_offset_us: i64,
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

    /// The slice of the group the worker runs.
    pub fn slice(&self) -> &Slice {
        match self {
            WorkerSpec::Icy(s) => &s.slice,
            WorkerSpec::Hls(s) => &s.slice,
            WorkerSpec::Events(s) => &s.slice,
            WorkerSpec::Whep(s) => &s.slice,
        }
    }

    /// Builds the mode's engine and runs it to its end (or until `stop`), handing every tick
    /// to `emit`; the engine also stops when `emit` returns false (the parent went away).
    ///
    /// Errors: the engine could not start (a bad URL or bind range) or failed.
    pub fn run(
        self,
        clock: Arc<RunClock>,
        stop: &AtomicBool,
        mut emit: impl FnMut(&GroupTick) -> bool,
    ) -> anyhow::Result<()> {
        match self {
            WorkerSpec::Icy(s) => Engine::new(s, clock)?.run(stop, &mut emit)?,
            WorkerSpec::Hls(s) => HlsEngine::new(s, clock)?.run(stop, &mut emit)?,
            WorkerSpec::Events(s) => crate::events::subscriber::run(&s, clock, stop, &mut emit)?,
            WorkerSpec::Whep(s) => crate::whep::viewer::run_worker(&s, clock, stop, &mut emit)?,
        }
        Ok(())
    }
}

/// What workers send to their parent.
#[derive(Debug, Clone)]
pub enum WorkerMsg {
    /// One tick of worker `worker` (boxed: a tick carries a group's whole summary).
    Tick(usize, Box<GroupTick>),
    /// A worker ended; `error` holds its failure (and stderr) if it did not end cleanly.
    Exited {
        /// Worker index.
        worker: usize,
        /// Why it failed, if it did.
        error: Option<String>,
    },
}

/// Errors starting workers.
#[derive(Debug, Error)]
pub enum WorkerError {
    /// The worker process could not be spawned or fed.
    #[error("starting worker process {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The spec could not be written.
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

/// The running workers of one host.
pub struct WorkerSet {
    handles: Vec<Handle>,
    stop: Arc<AtomicBool>,
    clock: Arc<RunClock>,
}

impl WorkerSet {
    /// Starts one worker per spec: processes with `launcher`, else in-process threads (a
    /// spec's worker index is its place in `specs`). Every message goes to `tx`.
    ///
    /// Errors: a process that cannot be started or fed its spec.
    pub fn start(
        specs: Vec<(WorkerSpec, bool)>,
        launcher: Option<&Launcher>,
        tx: Sender<WorkerMsg>,
        clock: Arc<RunClock>,
    ) -> Result<WorkerSet, WorkerError> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut handles = Vec::new();
        for (worker, (spec, process)) in specs.into_iter().enumerate() {
            match launcher.filter(|_| process) {
                None => {
                    let tx = tx.clone();
                    let stop = stop.clone();
                    let clock = clock.clone();
                    let h = std::thread::Builder::new()
                        .name(format!("bench-worker-{worker}"))
                        .spawn(move || {
                            let r = spec.run(clock, &stop, |t| {
                                tx.send(WorkerMsg::Tick(worker, Box::new(t.clone())))
                                    .is_ok()
                            });
                            let _ = tx.send(WorkerMsg::Exited {
                                worker,
                                error: r.err().map(|e| format!("{e:#}")),
                            });
                        })
                        .map_err(|source| WorkerError::Spawn {
                            program: "thread".into(),
                            source,
                        })?;
                    handles.push(Handle::Thread(h));
                }
                Some(l) => handles.push(spawn_process(worker, &spec, l, tx.clone(), &clock)?),
            }
        }
        Ok(WorkerSet {
            handles,
            stop,
            clock,
        })
    }

    /// Sets a new estimate of the run's clock (see [`RunClock`]) for every worker.
    pub fn set_clock_offset(&mut self, offset_us: i64) {
        self.clock.set_offset_us(offset_us);
        let line = serde_json::to_string(&Control {
            clock_offset_us: offset_us,
        })
        .unwrap_or_default();
        for h in &mut self.handles {
            if let Handle::Process {
                stdin: Some(stdin), ..
            } = h
            {
                let _ = writeln!(stdin, "{line}").and_then(|_| stdin.flush());
            }
        }
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
        self.stop.store(true, Ordering::Relaxed);
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

impl Drop for WorkerSet {
    fn drop(&mut self) {
        // No orphan load: a set dropped without a join still stops its workers.
        self.stop.store(true, Ordering::Relaxed);
        for h in &mut self.handles {
            if let Handle::Process { child, stdin, .. } = h {
                stdin.take();
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

fn spawn_process(
    worker: usize,
    spec: &WorkerSpec,
    l: &Launcher,
    tx: Sender<WorkerMsg>,
    clock: &RunClock,
) -> Result<Handle, WorkerError> {
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
    let mut spec = spec.clone();
    // The clock as it stands now (later estimates come as control lines).
    set_offset(&mut spec, clock.offset_us());
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
                match serde_json::from_str::<GroupTick>(&line) {
                    Ok(t) => {
                        let _ = tx.send(WorkerMsg::Tick(worker, Box::new(t)));
                    }
                    Err(e) => {
                        let mut l = line;
                        l.truncate(200);
                        bad = Some(format!("bad line from worker: {e}: {l}"));
                    }
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

fn set_offset(spec: &mut WorkerSpec, us: i64) {
    match spec {
        WorkerSpec::Icy(s) => s.slice.clock_offset_us = us,
        WorkerSpec::Hls(s) => s.slice.clock_offset_us = us,
        WorkerSpec::Events(s) => s.slice.clock_offset_us = us,
        WorkerSpec::Whep(s) => s.slice.clock_offset_us = us,
    }
}

/// Body of `throng bench worker`, the one worker subcommand of every mode: its
/// [`WorkerSpec`] from stdin, one [`GroupTick`] JSON line per second to stdout (each flushed
/// at once); control lines from stdin; stops when stdin closes.
///
/// Errors: no spec on stdin or one that does not parse, or the engine's error.
pub fn worker_command(_args: WorkerArgs) -> anyhow::Result<()> {
    let mut stdin = BufReader::new(std::io::stdin());
    let mut line = String::new();
    stdin.read_line(&mut line)?;
    let spec: WorkerSpec = serde_json::from_str(&line)?;
    let clock = Arc::new(RunClock::new(spec.slice().clock_offset_us));
    // No thread for stdin: a process of one thread looks its sockets up without reference
    // counts (the kernel's `fdget` fast path), a tenth of an ICY listener's CPU. Control
    // lines and the close of stdin are read once a second, at each report.
    let mut control = ControlReader::new(stdin.buffer().to_vec())?;
    let stop = AtomicBool::new(false);
    let stdout = std::io::stdout();
    spec.run(clock.clone(), &stop, |t| {
        let mut out = stdout.lock();
        serde_json::to_writer(&mut out, t).is_ok()
            && out.write_all(b"\n").is_ok()
            && out.flush().is_ok()
            && control.read(&clock)
    })
}

/// The worker's stdin after its spec, read without blocking: control lines (a new clock
/// offset) and its close (the controller or agent is gone: the worker stops).
struct ControlReader {
    /// Bytes of a line not yet complete.
    pending: Vec<u8>,
}

impl ControlReader {
    /// Turns stdin non-blocking; `pending` is what a reader already took past the spec.
    ///
    /// Errors: the kernel's, from `fcntl(2)`.
    fn new(pending: Vec<u8>) -> std::io::Result<ControlReader> {
        // SAFETY: fcntl on fd 0 with integer flags; an invalid fd is the kernel's error.
        let r = unsafe {
            let flags = libc::fcntl(0, libc::F_GETFL);
            if flags < 0 {
                flags
            } else {
                libc::fcntl(0, libc::F_SETFL, flags | libc::O_NONBLOCK)
            }
        };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(ControlReader { pending })
    }

    /// Applies every complete control line waiting; `false` once stdin is closed or broken.
    fn read(&mut self, clock: &RunClock) -> bool {
        let mut buf = [0u8; 4096];
        let open = loop {
            // SAFETY: reading into a local buffer of the stated length.
            let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
            match n {
                0 => break false,
                n if n > 0 => self.pending.extend_from_slice(&buf[..n as usize]),
                _ => match std::io::Error::last_os_error().kind() {
                    std::io::ErrorKind::WouldBlock => break true,
                    std::io::ErrorKind::Interrupted => {}
                    _ => break false,
                },
            }
        };
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            if let Ok(c) = serde_json::from_slice::<Control>(&self.pending[..end]) {
                clock.set_offset_us(c.clock_offset_us);
            }
            self.pending.drain(..=end);
        }
        open
    }
}
