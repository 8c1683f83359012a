//! Workers: engines run as in-process threads or as child processes of the bench.
//!
//! A worker process is the current executable re-run as `... bench worker`: it reads its
//! [`EngineSpec`] as one JSON line from stdin, writes one [`WorkerTick`] JSON line per second to
//! stdout, and stops early when stdin closes (so workers never outlive the parent). Each process
//! opens at most `max_per_worker` sockets, keeping under the per-process file limit.

use crate::icy::engine::EngineSpec;
use crate::stats::WorkerTick;
use clap::Args;
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
    /// Re-executes the current binary as `<exe> bench worker`.
    pub fn current_exe() -> std::io::Result<Launcher> {
        Ok(Launcher {
            program: std::env::current_exe()?,
            args: vec!["bench".into(), "worker".into()],
        })
    }
}

/// What workers send to the parent.
#[derive(Debug, Clone)]
pub enum WorkerMsg {
    /// One second of one worker.
    Tick(WorkerTick),
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
        specs: Vec<EngineSpec>,
        launcher: Option<&Launcher>,
        tx: Sender<WorkerMsg>,
    ) -> Result<WorkerSet, WorkerError> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut handles = Vec::new();
        for spec in specs {
            let worker = spec.worker;
            match launcher {
                None => {
                    let engine = crate::hls::player::Runner::new(spec)?;
                    let tx = tx.clone();
                    let stop = stop.clone();
                    let h = std::thread::Builder::new()
                        .name(format!("bench-worker-{worker}"))
                        .spawn(move || {
                            let r =
                                engine.run(&stop, |t| tx.send(WorkerMsg::Tick(t.clone())).is_ok());
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
    spec: EngineSpec,
    l: &Launcher,
    tx: Sender<WorkerMsg>,
) -> Result<Handle, WorkerError> {
    let worker = spec.worker;
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
                match serde_json::from_str::<WorkerTick>(&line) {
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

/// Body of `throng bench worker`: spec from stdin, ticks to stdout.
pub fn worker_command(_args: WorkerArgs) -> anyhow::Result<()> {
    let mut stdin = BufReader::new(std::io::stdin());
    let mut line = String::new();
    stdin.read_line(&mut line)?;
    let spec: EngineSpec = serde_json::from_str(&line)?;
    let engine = crate::hls::player::Runner::new(spec)?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
        stop2.store(true, Ordering::Relaxed);
    });
    let stdout = std::io::stdout();
    engine.run(&stop, |t| {
        let mut out = stdout.lock();
        serde_json::to_writer(&mut out, t).is_ok()
            && out.write_all(b"\n").is_ok()
            && out.flush().is_ok()
    })?;
    Ok(())
}

/// The stdout of a JSON-lines worker process: each tick one JSON line, flushed at once.
#[derive(Debug)]
pub struct JsonLines(std::io::StdoutLock<'static>);

impl JsonLines {
    /// Writes `tick` as one JSON line; a parent that went away is ignored (the worker stops
    /// when its stdin closes).
    pub fn send<T: serde::Serialize>(&mut self, tick: &T) {
        if let Ok(j) = serde_json::to_string(tick) {
            let _ = writeln!(self.0, "{j}");
            let _ = self.0.flush();
        }
    }
}

/// The worker side of the JSON-lines worker processes (`bench events-worker`, `bench
/// whep-worker`): reads the spec `S` as one JSON line from stdin, raises the stop flag when
/// stdin closes (the parent ended or wants the worker to stop), and runs `run` with the spec,
/// the flag and the stdout to send ticks to.
///
/// Errors: no spec on stdin or one that does not parse; else what `run` returns.
pub fn serve_json_worker<S: serde::de::DeserializeOwned>(
    run: impl FnOnce(S, Arc<AtomicBool>, JsonLines) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    let spec: S = serde_json::from_str(&line)?;
    let stop = Arc::new(AtomicBool::new(false));
    let raised = stop.clone();
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        raised.store(true, Ordering::Relaxed);
    });
    run(spec, stop, JsonLines(std::io::stdout().lock()))
}

/// The parent side: starts `<program> bench <subcommand>`, writes `spec` as one JSON line to
/// its stdin, and forwards each stdout line that parses as a `T` to `tx` from a reader thread.
/// The stdin is returned open: closing it tells the worker to stop.
///
/// Errors: the process cannot be started, or the spec cannot be written.
pub fn spawn_json_worker<S: serde::Serialize, T: serde::de::DeserializeOwned + Send + 'static>(
    program: &std::path::Path,
    subcommand: &str,
    spec: &S,
    tx: Sender<T>,
) -> std::io::Result<(Child, ChildStdin, JoinHandle<()>)> {
    let mut child = Command::new(program)
        .args(["bench", subcommand])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    writeln!(stdin, "{}", serde_json::to_string(spec)?)?;
    let stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Ok(t) = serde_json::from_str::<T>(&line) {
                let _ = tx.send(t);
            }
        }
    });
    Ok((child, stdin, reader))
}
