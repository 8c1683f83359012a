//! `throng bench agent`: a load host waiting for a controller (`throng bench run --agents`).
//!
//! At start it raises its open-file limit to the hard limit and measures what it can hold
//! ([`crate::dist::capacity`]: files, worker processes, ports, its CPU per listener-second from
//! a self-test), then listens (`--listen ADDR`, TLS with `--agent-cert`/`--agent-key`), or
//! serves the one controller on its standard input and output (`--stdio`, started over SSH). It
//! serves one run at a time: a controller that arrives while a run goes is refused with the
//! reason; a connection that closes before its handshake (a readiness probe) is nothing. A run:
//! the token handshake ([`crate::dist::wire`]), clock probes, the plan of its share (its
//! execution segment of every group), run here by this host's worker processes
//! ([`crate::run::local`]), each merged second sent up; the controller's heartbeat is awaited
//! every second, and without it for [`CONTROLLER_SILENCE`] (a controller that died or was cut
//! off) every listener is stopped: no orphan load. SIGTERM and SIGINT stop the run too.
//! `--once` exits after one run (a Kubernetes Job's pod).

use crate::dist::capacity::{self, Capacity};
use crate::dist::clock::Estimate;
use crate::dist::wire::{self, Reader, ToAgent, ToController, Writer, PROTOCOL, TOKEN_ENV};
use crate::profile::slice::{unix_us, RunClock};
use crate::run::local::{HostEvent, LocalHost};
use clap::Args;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Without a word from the controller for this long, the agent stops its listeners.
pub const CONTROLLER_SILENCE: Duration = Duration::from_secs(5);

/// How long a new connection has to answer the challenge.
pub const HANDSHAKE: Duration = Duration::from_secs(10);

/// Exit status and environment, for `--help`.
pub const AGENT_HELP: &str = "Environment: THRONG_BENCH_TOKEN, the shared token (required \
unless --stdio: a controller must prove it). Exit status: 0 after --once's run or a signal, 2 \
when the agent cannot start (no token, an address in use, a certificate that does not load).";

/// Arguments of `throng bench agent`.
#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Address to listen on for a controller.
    #[arg(long, default_value = "0.0.0.0:7700")]
    pub listen: String,
    /// Serve one run, then exit (a Kubernetes Job's pod).
    #[arg(long)]
    pub once: bool,
    /// Serve one controller on standard input and output (started over SSH by `bench run
    /// --agents ssh://...`); no token: SSH authenticated the controller.
    #[arg(long)]
    pub stdio: bool,
    /// Most worker processes per group (default: 2 per core).
    #[arg(long)]
    pub max_workers: Option<u32>,
    /// This host's source addresses, `FIRST-LAST`: they replace every group's bind range here.
    #[arg(long)]
    pub bind_range: Option<String>,
    /// The agent's name in the controller's report (default: the host name).
    #[arg(long)]
    pub name: Option<String>,
    /// TLS: this agent's certificate chain (PEM).
    #[arg(long, requires = "agent_key", value_name = "PEM")]
    pub agent_cert: Option<PathBuf>,
    /// TLS: this agent's private key (PEM).
    #[arg(long, requires = "agent_cert", value_name = "PEM")]
    pub agent_key: Option<PathBuf>,
    /// Skip the CPU self-test (the capacity is then files and ports only).
    #[arg(long)]
    pub no_self_test: bool,
    /// Program to run as a worker process (default: this executable).
    #[arg(long, hide = true)]
    pub worker_exe: Option<PathBuf>,
}

/// Set by SIGTERM or SIGINT.
static TERM: AtomicBool = AtomicBool::new(false);

extern "C" fn on_term(_: libc::c_int) {
    TERM.store(true, Ordering::SeqCst);
}

fn install_signals() {
    // SAFETY: the handler only stores to an atomic (async-signal-safe).
    unsafe {
        libc::signal(libc::SIGTERM, on_term as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_term as *const () as libc::sighandler_t);
    }
}

/// What a session needs to know of its agent.
struct Setup {
    token: Option<String>,
    capacity: Capacity,
    max_workers: u32,
    bind_range: Option<String>,
    worker_exe: Option<PathBuf>,
}

/// Body of `throng bench agent`.
///
/// Errors: no token, an address that cannot be bound, a certificate that does not load.
pub fn agent_command(a: AgentArgs) -> anyhow::Result<()> {
    install_signals();
    let token = std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty());
    anyhow::ensure!(
        token.is_some() || a.stdio,
        "{TOKEN_ENV} is not set: the agent needs the shared token its controllers prove"
    );
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get() as u32);
    let max_workers = a.max_workers.unwrap_or(2 * cores).max(1);
    let cpu = if a.no_self_test {
        None
    } else {
        capacity::self_test()
    };
    let bind = a.bind_range.clone().unwrap_or_else(|| "none".into());
    let mut capacity = capacity::measure(max_workers, &bind, cpu);
    if let Some(n) = &a.name {
        capacity.host = n.clone();
    }
    let setup = Arc::new(Setup {
        token,
        capacity,
        max_workers,
        bind_range: a.bind_range.clone(),
        worker_exe: a.worker_exe.clone(),
    });
    let c = &setup.capacity;
    eprintln!(
        "throng bench agent: {} can hold {} listeners ({}; {} cores, open files {}, {} worker processes{})",
        c.host,
        c.listeners,
        c.limited_by,
        c.cores,
        c.fd_limit,
        c.max_workers,
        c.cpu_us_per_listener_second
            .map(|v| format!(", {v:.2} µs per listener-second"))
            .unwrap_or_default()
    );
    if a.stdio {
        let reader = Reader::new(Box::new(std::io::stdin()));
        let writer = Writer::new(Box::new(std::io::stdout()));
        session(reader, writer, "stdio".into(), &setup);
        return Ok(());
    }
    let tls = match (&a.agent_cert, &a.agent_key) {
        (Some(c), Some(k)) => {
            Some(crate::dist::link::tls_server_config(c, k).map_err(|e| anyhow::anyhow!("{e}"))?)
        }
        _ => None,
    };
    let listener = TcpListener::bind(&a.listen)
        .map_err(|e| anyhow::anyhow!("listening on {}: {e}", a.listen))?;
    listener.set_nonblocking(true)?;
    eprintln!(
        "throng bench agent: listening on {}{}",
        listener.local_addr()?,
        if tls.is_some() { " (TLS)" } else { "" }
    );
    let busy: Arc<Mutex<Option<(String, String)>>> = Arc::new(Mutex::new(None));
    let ran = Arc::new(AtomicBool::new(false));
    let mut sessions: Vec<std::thread::JoinHandle<()>> = Vec::new();
    while !TERM.load(Ordering::SeqCst) {
        if a.once && ran.load(Ordering::SeqCst) && busy.lock().map_or(true, |b| b.is_none()) {
            break;
        }
        let (sock, peer) = match listener.accept() {
            Ok(x) => x,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(50));
                sessions.retain(|h| !h.is_finished());
                continue;
            }
            Err(e) => {
                eprintln!("throng bench agent: accept: {e}");
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
        };
        let _ = sock.set_nonblocking(false);
        let (setup, busy, ran, tls) = (setup.clone(), busy.clone(), ran.clone(), tls.clone());
        sessions.push(std::thread::spawn(move || {
            let link = match &tls {
                Some(cfg) => crate::dist::link::tls_server(sock, cfg.clone()),
                None => crate::dist::link::plain(sock).map_err(|e| e.to_string()),
            };
            let (reader, writer) = match link {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("throng bench agent: {peer}: {e}");
                    return;
                }
            };
            accept_one(reader, writer, peer, &setup, &busy, &ran);
        }));
    }
    for h in sessions {
        let _ = h.join();
    }
    eprintln!("throng bench agent: stopped");
    Ok(())
}

/// One connection: refused when a run is going, else a session (which holds the agent).
fn accept_one(
    reader: Reader,
    writer: Writer,
    peer: SocketAddr,
    setup: &Setup,
    busy: &Mutex<Option<(String, String)>>,
    ran: &AtomicBool,
) {
    {
        let mut b = busy.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((who, since)) = b.as_ref() {
            let _ = writer.send(&ToController::Refused {
                reason: format!("busy: running a run for the controller at {who} since {since}; an agent serves one run at a time"),
            });
            return;
        }
        *b = Some((
            peer.to_string(),
            crate::observe::meta::rfc3339(unix_us() / 1000),
        ));
    }
    let planned = session(reader, writer, peer.to_string(), setup);
    if planned {
        ran.store(true, Ordering::SeqCst);
    }
    *busy.lock().unwrap_or_else(|p| p.into_inner()) = None;
}

/// Reads messages on a thread, each stamped with its arrival time on this host's clock (µs).
fn reader_thread(mut r: Reader) -> Receiver<Result<(ToAgent, u64), String>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || loop {
        match r.recv::<ToAgent>() {
            Ok(m) => {
                if tx.send(Ok((m, unix_us()))).is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = tx.send(Err(e.to_string()));
                return;
            }
        }
    });
    rx
}

/// Serves one controller to the end; returns whether a plan ran.
fn session(reader: Reader, writer: Writer, peer: String, setup: &Setup) -> bool {
    let nonce = wire::nonce();
    if writer
        .send(&ToController::Challenge {
            protocol: PROTOCOL,
            nonce: nonce.clone(),
            version: format!("throng-bench {}", env!("CARGO_PKG_VERSION")),
        })
        .is_err()
    {
        return false;
    }
    let rx = reader_thread(reader);
    // The handshake: a connection that closes or says nothing (a readiness probe) is nothing.
    let controller = match rx.recv_timeout(HANDSHAKE) {
        Ok(Ok((
            ToAgent::Hello {
                protocol,
                proof,
                controller,
            },
            _,
        ))) => {
            if protocol != PROTOCOL {
                let _ = writer.send(&ToController::Refused {
                    reason: format!("protocol {protocol} against this agent's {PROTOCOL}: use the same throng version on both sides"),
                });
                return false;
            }
            if let Some(t) = &setup.token {
                if !wire::verify(t, &nonce, &proof) {
                    eprintln!("throng bench agent: {peer}: wrong token, refused");
                    let _ = writer.send(&ToController::Refused {
                        reason: format!(
                            "wrong token: the controller's {TOKEN_ENV} is not this agent's"
                        ),
                    });
                    return false;
                }
            }
            controller
        }
        _ => return false,
    };
    eprintln!("throng bench agent: controller {controller} ({peer}) connected");
    if writer
        .send(&ToController::Welcome {
            capacity: setup.capacity.clone(),
        })
        .is_err()
    {
        return false;
    }
    let clock = Arc::new(RunClock::new(0));
    let mut host: Option<LocalHost> = None;
    let mut planned = false;
    let mut heard = Instant::now();
    let mut stopping = false;
    let mut children0 = crate::observe::rusage::children();
    let me0 = crate::observe::rusage::process();
    loop {
        if TERM.load(Ordering::SeqCst) && !stopping {
            stopping = true;
            if let Some(h) = host.as_mut() {
                h.stop();
            }
            if host.is_none() {
                return planned;
            }
        }
        if heard.elapsed() > CONTROLLER_SILENCE && !stopping {
            eprintln!(
                "throng bench agent: no word from the controller for {} s: stopping every listener",
                CONTROLLER_SILENCE.as_secs()
            );
            stopping = true;
            match host.as_mut() {
                Some(h) => h.stop(),
                None => return planned,
            }
        }
        // Messages first.
        let wait = if host.is_some() {
            Duration::ZERO
        } else {
            Duration::from_millis(200)
        };
        match rx.recv_timeout(wait) {
            Ok(Ok((msg, at))) => {
                heard = Instant::now();
                match msg {
                    ToAgent::Ping { id, t1 } => {
                        let _ = writer.send(&ToController::Pong {
                            id,
                            t1,
                            t2: at,
                            t3: unix_us(),
                        });
                    }
                    ToAgent::Plan {
                        share,
                        estimate,
                        name,
                    } => {
                        if host.is_some() {
                            continue;
                        }
                        let mut share = *share;
                        if let Some(b) = &setup.bind_range {
                            for g in &mut share.groups {
                                g.plan.bind_range = b.clone();
                            }
                        }
                        share.max_workers = Some(setup.max_workers);
                        set_clock(&clock, estimate);
                        share.clock_offset_us = clock.offset_us();
                        children0 = crate::observe::rusage::children();
                        match LocalHost::start(
                            &share,
                            setup
                                .worker_exe
                                .clone()
                                .map(crate::run::worker::Launcher::program),
                            clock.clone(),
                        ) {
                            Ok(h) => {
                                eprintln!(
                                    "throng bench agent: running {name}'s share: {} worker processes",
                                    h.processes
                                );
                                let _ = writer.send(&ToController::Ready {
                                    processes: h.processes,
                                });
                                planned = true;
                                host = Some(h);
                            }
                            Err(e) => {
                                let _ = writer.send(&ToController::Refused {
                                    reason: format!("the workers did not start: {e}"),
                                });
                                return planned;
                            }
                        }
                    }
                    ToAgent::Clock { estimate } => {
                        set_clock(&clock, estimate);
                        if let Some(h) = host.as_mut() {
                            h.set_clock_offset(clock.offset_us());
                        }
                    }
                    ToAgent::Heartbeat => {}
                    ToAgent::Stop => {
                        stopping = true;
                        match host.as_mut() {
                            Some(h) => h.stop(),
                            None => return planned,
                        }
                    }
                    ToAgent::Hello { .. } => {}
                }
                continue;
            }
            Ok(Err(_)) | Err(RecvTimeoutError::Disconnected) => {
                // The controller went away: stop at once.
                if !stopping {
                    eprintln!("throng bench agent: the controller closed the link: stopping every listener");
                }
                match host.as_mut() {
                    Some(h) => h.stop(),
                    None => return planned,
                }
                // Drain the run to its end, with nobody to tell.
                if let Some(mut h) = host.take() {
                    let end = Instant::now() + Duration::from_secs(8);
                    while Instant::now() < end
                        && h.next(Duration::from_millis(200)) != HostEvent::Finished
                    {
                    }
                    h.join(Duration::from_secs(2));
                }
                return planned;
            }
            Err(RecvTimeoutError::Timeout) => {}
        }
        let Some(h) = host.as_mut() else { continue };
        match h.next(Duration::from_millis(100)) {
            HostEvent::Second(m) => {
                let _ = writer.send(&ToController::Second {
                    second: m.second,
                    groups: m.groups,
                    last: m.last,
                });
            }
            HostEvent::Error(e) => {
                let _ = writer.send(&ToController::Error { message: e });
            }
            HostEvent::Lost(_) | HostEvent::Idle => {}
            HostEvent::Finished => {
                h.join(Duration::from_secs(5));
                let me = crate::observe::rusage::process();
                let ch = crate::observe::rusage::children();
                let cpu = (me.user_us + me.sys_us).saturating_sub(me0.user_us + me0.sys_us)
                    + (ch.user_us + ch.sys_us).saturating_sub(children0.user_us + children0.sys_us);
                let _ = writer.send(&ToController::Done { cpu_us: cpu });
                eprintln!("throng bench agent: run done");
                return planned;
            }
        }
    }
}

/// The run's clock from the controller's estimate of this host's (θ: this clock minus the
/// controller's): the run's clock is this one minus θ.
fn set_clock(clock: &RunClock, e: Estimate) {
    clock.set_offset_us(-e.offset_us);
}
