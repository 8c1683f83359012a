//! The server: binds the listen sockets, starts the fan-out shards and the demo mount, accepts
//! connections until shutdown, carrying out operator commands (reload, log reopening, upgrade)
//! one at a time, then closes everything cleanly.
//!
//! The accept path is its own task per listen socket with a large backlog (4096), so a burst of
//! connects never waits on the fan-out; each connection gets a short-lived task that reads its
//! request head and dispatches it (`connection.rs`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use crate::audience::EndReason;
use crate::config::source::ConfigSource;
use crate::config::Config;
use crate::control::{Control, ControlHandle};
use crate::ctx::ServerCtx;
use crate::fanout::shard::{ShardConfig, ShardContext};
use crate::fanout::FanOut;
use crate::mount::registry::Registry;
use crate::net::clients::{limit_for, pending_limit_for, Clients, HeadLimits, HeadRefused};
use crate::net::listen::{bind, bind_pair, BindError, ListenSocket, Port};
use crate::observe::access_log::AccessLog;
use crate::observe::metrics::Metrics;
use crate::reload::{LogHook, Reloader};

/// Errors starting the server.
#[derive(Debug, Error)]
pub enum ServerError {
    /// A listen address could not be bound.
    #[error(transparent)]
    Bind(#[from] BindError),
    /// The access log could not be opened.
    #[error("cannot open access log {path}: {source}")]
    AccessLog {
        /// The path.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// The audience ledger's database could not be opened.
    #[error(transparent)]
    Ledger(#[from] crate::ledger::LedgerError),
    /// Threads or polls could not be created.
    #[error("cannot start fan-out: {0}")]
    FanOut(std::io::Error),
    /// The demo mount could not start.
    #[error("cannot start demo mount: {0}")]
    Demo(#[from] crate::ingest::file::FileSourceError),
    /// A `[[mount]] file` mount or a webroot fallback file could not start.
    #[error("cannot start a file mount: {0}")]
    FileMount(crate::ingest::file::FileSourceError),
    /// A mount's authenticator is misconfigured.
    #[error("{0}")]
    Auth(#[from] crate::auth::AuthError),
    /// The signal handlers could not be installed.
    #[error("cannot install the signal handlers: {0}")]
    Signals(std::io::Error),
    /// Taking over from the old process of a binary upgrade failed.
    #[error("upgrade: {0}")]
    Upgrade(#[from] crate::upgrade::UpgradeError),
    /// The certificates of the HTTPS sockets could not be loaded.
    #[error("{0}")]
    Tls(#[from] crate::net::tls::TlsError),
}

/// The bound listen sockets: HTTP, the SHOUTcast port, HTTPS with what each speaks.
type BoundSockets = (
    Vec<TcpListener>,
    Option<TcpListener>,
    Vec<(TcpListener, Port)>,
);

/// File mounts carried across a binary upgrade, by mount name.
pub use crate::ingest::file::ResumedFiles as Resumed;

/// A bound, not yet running server.
pub struct Server {
    ctx: Arc<ServerCtx>,
    listen_sockets: Vec<TcpListener>,
    /// The SHOUTcast source port, when `shoutcast-mount` is set.
    shoutcast: Option<TcpListener>,
    /// The HTTPS sockets (`[tls] listen` and `auto`).
    tls_sockets: Vec<(TcpListener, Port)>,
    shutdown_tx: watch::Sender<bool>,
    /// Operator commands (signals, admin `reloadconfig`).
    commands: mpsc::UnboundedReceiver<Control>,
    /// What a reload needs: the configuration source and the feeds started from it.
    reloader: Reloader,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addrs", &self.local_addrs())
            .finish()
    }
}

impl Server {
    /// Binds every listen address and starts the fan-out shards, the demo mount, file mounts,
    /// `[[relay]]` relays and the `[master]` poller. Must be called inside a tokio runtime.
    /// Passwords must already be filled in. A server bound this way has no configuration
    /// source: it refuses reloads (see [`Server::bind_source`]).
    ///
    /// Errors: see [`ServerError`].
    pub async fn bind(config: Config) -> Result<Server, ServerError> {
        Server::bind_inner(config, None).await
    }

    /// As [`Server::bind`], for `config` as `source` loaded it
    /// ([`ConfigSource::load`]); a reload (SIGHUP, admin `reloadconfig`) loads `source` again.
    ///
    /// Errors: see [`ServerError`].
    pub async fn bind_source(config: Config, source: ConfigSource) -> Result<Server, ServerError> {
        Server::bind_inner(config, Some(source)).await
    }

    /// Sets how a reload applies a changed `[logging] level` (the binary owns the log
    /// subscriber).
    pub fn set_log_hook(&mut self, hook: LogHook) {
        self.reloader.log_hook = Some(hook);
    }

    async fn bind_inner(
        config: Config,
        source: Option<ConfigSource>,
    ) -> Result<Server, ServerError> {
        let mut listen_sockets = Vec::new();
        let mut shoutcast = None;
        for (i, &addr) in config.listen.iter().enumerate() {
            if i == 0 && config.shoutcast_mount.is_some() {
                let (http, sc) = bind_pair(addr)?;
                listen_sockets.push(http);
                shoutcast = Some(sc);
            } else {
                listen_sockets.push(bind(addr)?);
            }
        }
        let mut tls_sockets = Vec::new();
        for &addr in &config.tls.listen {
            tls_sockets.push((bind(addr)?, Port::Tls));
        }
        for &addr in &config.tls.auto {
            tls_sockets.push((bind(addr)?, Port::Auto));
        }
        let mut server = Server::build(
            config,
            source,
            (listen_sockets, shoutcast, tls_sockets),
            chrono::Local::now(),
            true,
        )?;
        server.start_mounts(Resumed::new()).await?;
        Ok(server)
    }

    /// Takes over from the old process of a binary upgrade (SIGUSR2) over `handover`: its
    /// listen sockets, mounts with their sources and relays, and listeners at their stream
    /// positions (`upgrade/adopt.rs`); then starts what the configuration adds (demo, files,
    /// relays) as [`Server::bind_source`] does, and takes the Unix signals
    /// ([`Server::install_signals`]) before the old process exits. Must be called inside a
    /// multi-threaded tokio runtime.
    ///
    /// Errors: see [`ServerError`]; the old process keeps serving when this fails before the
    /// new one said it is ready.
    pub async fn adopt(
        config: Config,
        source: Option<ConfigSource>,
        mut handover: crate::upgrade::adopt::Handover,
    ) -> Result<Server, ServerError> {
        let taken = handover.take_sockets()?;
        let sockets = (taken.http, taken.shoutcast, taken.tls);
        let mut server = Server::build(config, source, sockets, taken.started, false)?;
        // The old process exits once this one took over: from then on signals are for this
        // one, so take them before saying so.
        server.install_signals().map_err(ServerError::Signals)?;
        let metrics = &server.ctx.metrics;
        metrics.source_connects.inc_by(taken.counters.0);
        metrics.rejected.inc_by(taken.counters.1);
        let resumed = handover.adopt(&server.ctx).await?;
        server.start_mounts(resumed).await?;
        // Relays the new configuration no longer has: nothing claims their connections.
        let ctx = server.ctx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(UNCLAIMED_RELAY_WAIT).await;
            for name in ctx.registry.drop_unclaimed_relays() {
                tracing::warn!(mount = %name, "upgrade: no relay is configured for this mount any more; it ends");
            }
        });
        Ok(server)
    }

    /// Builds the shared state around bound sockets and starts the fan-out shards.
    fn build(
        config: Config,
        source: Option<ConfigSource>,
        (listen_sockets, shoutcast, tls_sockets): BoundSockets,
        started: chrono::DateTime<chrono::Local>,
        recover_ledger: bool,
    ) -> Result<Server, ServerError> {
        let tls = crate::net::tls::TlsAcceptor::from_config(&config.tls)?;
        // Sessions a crash left open are closed at a normal start; after an upgrade the old
        // process's open sessions are handed over and continue.
        let ledger = crate::ledger::Ledger::start(&config, recover_ledger)?;
        let access_log = AccessLog::open(&config.logging.access_log).map_err(|source| {
            ServerError::AccessLog {
                path: config.logging.access_log.clone(),
                source,
            }
        })?;
        access_log.set_rotation(crate::observe::log_rotation::Rotation::from_logging(
            &config.logging,
        ));
        raise_open_file_limit_once();
        let mut metrics = Metrics::new();
        if let Some(l) = &ledger {
            let h = l.health();
            metrics.register_ledger(h.pending.clone(), h.failures.clone());
        }
        let metrics = Arc::new(metrics);
        let hooks = Arc::new(crate::hooks::budget::Budget::new(
            metrics.hooks_dropped.clone(),
        ));
        let filters = Arc::new(crate::net::filters::Filters::new(&config.paths));
        let config = Arc::new(config);
        let port = listen_sockets[0]
            .local_addr()
            .map(|a| a.port())
            .unwrap_or(8000);
        let auth = Arc::new(crate::auth::Authenticators::from_config(
            config.clone(),
            port,
        )?);
        let registry = Arc::new(Registry::new(config.clone()));
        if let Some(l) = &ledger {
            registry.set_ledger(l.clone());
        }
        let fallback_registry = registry.clone();
        let fanout = FanOut::start(
            config.workers,
            ShardConfig {
                write_interval: Duration::from_millis(config.limits.write_interval_ms),
                lag_policy: config.limits.lag_policy,
            },
            ShardContext {
                metrics: metrics.clone(),
                access_log: access_log.clone(),
                fallback: Arc::new(move |m| fallback_registry.fallback_target(m)),
                ledger: ledger.clone(),
            },
        )
        .map_err(ServerError::FanOut)?;
        let events = crate::fanout::events::EventHub::start(
            config.workers,
            crate::fanout::events::shard::EventShardConfig {
                heartbeat: Duration::from_millis(config.events.heartbeat_ms.max(1)),
                stall_timeout: Duration::from_millis(config.events.stall_timeout_ms.max(1)),
            },
            registry.clone(),
            metrics.clone(),
            access_log.clone(),
            port,
        )
        .map_err(ServerError::FanOut)?;
        let http = listen_sockets[0]
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], port)));
        let whep = match config.webrtc.udp_address(http) {
            Some(addr) => match crate::fanout::whep::WhepEngine::start(
                addr,
                config.webrtc.public_address,
                fanout.shards(),
                registry.clone(),
                metrics.clone(),
                access_log.clone(),
                config.webrtc.transcode_frame_ms,
            ) {
                Ok(engine) => Some(engine),
                // On by default (no `udp-listen`): a UDP port range that is taken leaves the
                // server without WebRTC rather than not starting at all.
                Err(e) if config.webrtc.udp_listen.is_none() => {
                    tracing::warn!("WebRTC is off: its UDP ports from {addr} cannot be bound ({e}); set [webrtc] udp-listen to move them");
                    None
                }
                Err(e) => return Err(ServerError::FanOut(e)),
            },
            None => None,
        };
        let clients = Clients::new(limit_for(config.limits.clients), metrics.clients.clone());
        let (shutdown_tx, shutdown) = watch::channel(false);
        let (control, commands) = ControlHandle::channel();
        let ctx = Arc::new(ServerCtx {
            control,
            config: config.clone().into(),
            registry,
            metrics,
            access_log,
            fanout,
            events,
            whep,
            clients,
            started,
            port,
            shutdown,
            auth: auth.into(),
            filters: filters.into(),
            intros: Default::default(),
            cluster: Default::default(),
            hls: Default::default(),
            new_dump_files: AtomicU64::new(0),
            whip_publishers: Default::default(),
            drain: Default::default(),
            hooks,
            next_id: AtomicU64::new(1),
            tls,
            ledger,
        });
        // Every `throng_session_ends_total{path,reason}` series exists from the start, at 0, so
        // a dashboard's rate() sees a reason's first session end.
        let _ = crate::roster::session_ends(&ctx);
        let reloader = Reloader {
            source,
            relays: Default::default(),
            files: Default::default(),
            log_hook: None,
        };
        Ok(Server {
            ctx,
            listen_sockets,
            shoutcast,
            tls_sockets,
            shutdown_tx,
            commands,
            reloader,
        })
    }

    /// Starts the demo mount, file mounts (continuing `resumed` ones, carried across an
    /// upgrade), relays and the master poller, and an edge's reports to its origin.
    async fn start_mounts(&mut self, mut resumed: Resumed) -> Result<(), ServerError> {
        let ctx = &self.ctx;
        let config = ctx.config();
        if config.demo {
            let demo = resumed.remove(&config.demo_mount);
            crate::ingest::file::start_demo(ctx.clone(), demo)?;
        }
        self.reloader.files.resume(resumed);
        self.reloader
            .files
            .apply(ctx, &config)
            .await
            .map_err(|(_, e)| ServerError::FileMount(e))?;
        self.reloader.relays.apply(ctx, &config).await;
        crate::cluster::report::spawn(ctx.clone());
        Ok(())
    }

    /// The bound addresses (useful with port 0).
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listen_sockets
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .collect()
    }

    /// The bound HTTPS addresses (`[tls] listen`, then `auto`).
    pub fn tls_addrs(&self) -> Vec<SocketAddr> {
        self.tls_sockets
            .iter()
            .filter_map(|(l, _)| l.local_addr().ok())
            .collect()
    }

    /// The bound SHOUTcast source address (the first listen port + 1), when `shoutcast-mount`
    /// is set.
    pub fn shoutcast_addr(&self) -> Option<SocketAddr> {
        self.shoutcast.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Shared state (for tests and embedding).
    pub fn ctx(&self) -> Arc<ServerCtx> {
        self.ctx.clone()
    }

    /// The handle that sends operator commands to this server's run loop.
    pub fn control(&self) -> ControlHandle {
        self.ctx.control.clone()
    }

    /// Takes the Unix signals as commands from now on (`signals.rs`: TERM/INT stop, HUP
    /// reloads, USR1 reopens logs, USR2 upgrades); they are queued until [`Server::run`].
    /// Call it before telling anyone the server is up: until then HUP and the USRs keep their
    /// default action, which ends the process.
    ///
    /// Errors: the signal handlers cannot be installed.
    pub fn install_signals(&self) -> std::io::Result<()> {
        crate::signals::forward(self.control())
    }

    /// Serves with the Unix signals as commands (see [`Server::install_signals`]) until
    /// stopped.
    ///
    /// Errors: the signal handlers cannot be installed.
    pub async fn run_with_signals(self) -> std::io::Result<()> {
        self.install_signals()?;
        self.run(std::future::pending()).await;
        Ok(())
    }

    /// Serves until `shutdown` completes or a [`Control::Shutdown`] arrives, carrying out
    /// operator commands meanwhile; then stops sources and closes every listener.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        let Server {
            ctx,
            listen_sockets,
            shoutcast,
            tls_sockets,
            shutdown_tx,
            mut commands,
            mut reloader,
        } = self;
        if let Some(a) = shoutcast.as_ref().and_then(|l| l.local_addr().ok()) {
            tracing::info!(
                "SHOUTcast v1 sources on {a} feed {}",
                ctx.config().shoutcast_default_mount()
            );
        }
        crate::hls_http::start(ctx.clone());
        crate::dump_file::start(&ctx);
        crate::hooks::start(ctx.clone());
        crate::yp::start(ctx.clone());
        let mut sockets = Vec::new();
        for (l, port) in listen_sockets
            .into_iter()
            .map(|l| (l, Port::Http))
            .chain(shoutcast.map(|l| (l, Port::Shoutcast)))
            .chain(tls_sockets)
        {
            match ListenSocket::new(l, port) {
                Ok(s) => sockets.push(s),
                Err(e) => tracing::error!("cannot keep a listen socket: {e}"),
            }
        }
        // Logged before accepting, so it precedes any request's line.
        for a in sockets.iter() {
            match a.port {
                Port::Http => tracing::info!("listening on {}", a.addr),
                Port::Tls => tracing::info!("listening on {} (HTTPS)", a.addr),
                Port::Auto => tracing::info!("listening on {} (HTTP and HTTPS)", a.addr),
                Port::Shoutcast => {}
            }
        }
        let mut accept_tasks = start_accepting(&ctx, &sockets);
        let _housekeeping = AbortOnDrop(tokio::spawn(housekeeping()));
        // Bound and accepting: a `Type=notify` unit is up from here (`deploy/throng.service`).
        crate::observe::systemd::ready();
        tokio::pin!(shutdown);
        let mut handed_over = false;
        // How the listeners still here at the end are closed: `shutdown:drained` once a drain
        // ran its course.
        let mut closing = EndReason::Shutdown;
        loop {
            let command = tokio::select! {
                _ = &mut shutdown => break,
                c = commands.recv() => c,
                _ = tokio::time::sleep(DRAIN_CHECK), if ctx.drain.is_draining() => {
                    if drain_over(&ctx) {
                        closing = EndReason::Drained;
                        break;
                    }
                    continue;
                }
            };
            match command {
                None | Some(Control::Shutdown) => break,
                Some(Control::Terminate) => {
                    // SIGTERM drains first when `drain-timeout` says so; a second stops at once.
                    if ctx.drain.is_draining() || ctx.config().limits.drain_timeout == 0 {
                        break;
                    }
                    start_drain(&ctx, "SIGTERM");
                }
                Some(Control::Drain) => start_drain(&ctx, "POST /api/v1/drain"),
                Some(Control::Reload(reply)) => {
                    let outcome = crate::reload::reload(&ctx, &mut reloader).await;
                    if let Some(reply) = reply {
                        let _ = reply.send(outcome);
                    }
                }
                Some(Control::ReopenLogs) => crate::logs::reopen(&ctx),
                Some(Control::Upgrade) => {
                    let stop_accepting = || {
                        for t in accept_tasks.drain(..) {
                            t.abort();
                        }
                    };
                    match crate::upgrade::upgrade(&ctx, &sockets, stop_accepting).await {
                        crate::upgrade::Outcome::HandedOver => {
                            handed_over = true;
                            break;
                        }
                        crate::upgrade::Outcome::StillServing => {
                            if accept_tasks.is_empty() {
                                accept_tasks = start_accepting(&ctx, &sockets);
                            }
                        }
                    }
                }
            }
        }
        if handed_over {
            tracing::info!("exiting: the upgraded server took over");
        } else if closing == EndReason::Drained {
            let left = crate::roster::counts(&ctx).total();
            tracing::info!(
                listeners = left,
                "drained: closing the listeners still here and shutting down"
            );
        } else {
            tracing::info!("shutting down");
            crate::observe::systemd::stopping();
        }
        for t in &accept_tasks {
            t.abort();
        }
        // Event subscribers go first, before the feeds stop: they must not be told the mounts
        // stopped (after an upgrade the mounts live on in the new process, where they
        // reconnect and get the snapshot).
        let c = ctx.clone();
        let _ = tokio::task::spawn_blocking(move || c.events.shutdown()).await;
        drop(sockets);
        let _ = shutdown_tx.send(true);
        crate::reload::stop_feeds(reloader, Duration::from_secs(2)).await;
        for m in ctx.registry.list() {
            m.stop.store(true, Ordering::Relaxed);
        }
        // Give feeders a moment to publish their end, then close listeners.
        tokio::time::sleep(Duration::from_millis(50)).await;
        ctx.hls
            .sessions
            .close_all(closing, &ctx.metrics, &ctx.access_log);
        let c = ctx.clone();
        let _ = tokio::task::spawn_blocking(move || {
            c.fanout.shutdown(closing);
            if let Some(whep) = &c.whep {
                whep.shutdown(Duration::from_secs(2), closing);
            }
            // The shards logged every listener they closed: write those lines before exiting.
            c.access_log.flush(Duration::from_secs(5));
            if let Some(ledger) = &c.ledger {
                if !ledger.flush(Duration::from_secs(5)) {
                    tracing::warn!("ledger: last sessions not committed within 5 s");
                }
            }
            if c.access_log.dropped() > 0 {
                tracing::warn!(
                    lines = c.access_log.dropped(),
                    "access-log lines dropped (queue full)"
                );
            }
        })
        .await;
    }
}

/// How often a drain checks whether it is over (its audience left, `drain-timeout` passed).
pub const DRAIN_CHECK: Duration = Duration::from_millis(250);

/// Starts a drain (`cluster/drain.rs`), asked by `by` (a signal, the API), unless one runs.
fn start_drain(ctx: &ServerCtx, by: &str) {
    if !ctx.drain.begin(std::time::Instant::now()) {
        tracing::info!("{by}: already draining");
        return;
    }
    let config = ctx.config();
    let timeout = config.limits.drain_timeout;
    let members = crate::roster::counts(ctx).total();
    let to = match &config.cluster.origin {
        Some(origin) => format!("the origin {origin}"),
        None => "an edge with room (else 503)".to_string(),
    };
    tracing::info!(
        listeners = members,
        drain_timeout_s = timeout,
        "{by}: draining: new listeners go to {to}; the {members} here are kept until they leave or {timeout} s pass"
    );
    crate::observe::systemd::stopping();
}

/// Whether the drain that runs is over (`cluster/drain.rs`: its audience left or
/// `[limits] drain-timeout` passed).
fn drain_over(ctx: &ServerCtx) -> bool {
    let Some(since) = ctx.drain.since() else {
        return false;
    };
    let timeout = Duration::from_secs(ctx.config().limits.drain_timeout);
    crate::cluster::drain::over(
        since,
        std::time::Instant::now(),
        timeout,
        crate::roster::counts(ctx).total(),
    )
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One accept task per socket.
fn start_accepting(
    ctx: &Arc<ServerCtx>,
    sockets: &[ListenSocket],
) -> Vec<tokio::task::JoinHandle<()>> {
    sockets
        .iter()
        .filter_map(|s| match s.listener() {
            Ok(l) => Some(tokio::spawn(accept_loop(ctx.clone(), l, s.port))),
            Err(e) => {
                tracing::error!("cannot accept on {}: {e}", s.addr);
                None
            }
        })
        .collect()
}

/// How long relays carried across a binary upgrade wait for their relay task to claim them.
pub const UNCLAIMED_RELAY_WAIT: Duration = Duration::from_secs(10);

/// Interval between returns of freed heap memory to the system.
pub const TRIM_INTERVAL: Duration = Duration::from_secs(10);

/// Periodic upkeep: after a reconnect storm thousands of short-lived connection states were
/// freed at once; glibc keeps such memory in its arenas, so give it back to the system.
async fn housekeeping() {
    let mut tick = tokio::time::interval(TRIM_INTERVAL);
    loop {
        tick.tick().await;
        release_free_memory();
    }
}

/// Returns free heap pages to the system (glibc `malloc_trim`; a no-op elsewhere).
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory; it is safe to call at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// How long the accept loop waits for a free `clients` slot before accepting anyway and
/// answering 503. In a reconnect storm, listeners reconnect while their old connections are
/// still being closed; waiting keeps the new ones in the kernel's listen backlog until the
/// hang-ups are processed, instead of refusing them.
pub const ADMISSION_WAIT: Duration = Duration::from_secs(2);

/// Admission at the `clients` limit, or with the budget of connections reading their head
/// (`pending-clients`) used up. Called with one accepted connection in hand (the accept
/// loop takes no other meanwhile, so further connections wait in the kernel's listen backlog,
/// costing no file descriptor): waits up to [`ADMISSION_WAIT`] for a slot, once per overload
/// episode. A TLS reconnect storm thus waits in the backlog while the handshakes ahead of it
/// are done (they free their head units), rather than being refused. While the server stays full after such a wait (`overloaded`), connections are
/// accepted at once instead of one every wait: a listener then gets 503 once its head is read,
/// while an admin request or a source login may take a slot of `reserved-clients`. Connections
/// still reading their head never fill `clients` (they have their own budget), so idle sockets
/// cannot start an overload episode.
async fn admission(ctx: &ServerCtx, overloaded: &mut bool) {
    let heads = pending_limit_for(ctx.config().limits.pending_clients);
    let full = || ctx.clients.is_full() || ctx.clients.pending() >= heads;
    if !full() {
        *overloaded = false;
        return;
    }
    if *overloaded {
        return;
    }
    let start = tokio::time::Instant::now();
    while full() && start.elapsed() < ADMISSION_WAIT {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    *overloaded = full();
}

/// Raises the soft open-file limit to the hard limit, once per process, and logs the new value
/// (it sizes `clients = 0` and `pending-clients = 0`).
fn raise_open_file_limit_once() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| match crate::net::listen::raise_open_file_limit() {
        Ok((before, after)) if after > before => {
            tracing::info!("open-file limit raised from {before} to {after}");
        }
        Ok((_, after)) => tracing::info!("open-file limit {after}"),
        Err(e) => tracing::warn!("cannot raise the open-file limit: {e}"),
    });
}

/// Limits on connections still reading their head from `peer`, from the configuration in
/// force. A trusted proxy (`paths.x-forwarded-for`) carries many clients' connections, so the
/// per-address cap does not apply to it; nor to a load balancer of `paths.proxy-protocol-from`,
/// whose connections count against the client its PROXY header names once it is read
/// (`connection.rs`).
fn head_limits(ctx: &ServerCtx, peer: std::net::IpAddr) -> HeadLimits {
    let filters = ctx.filters();
    let exempt = filters.is_trusted_proxy(peer) || filters.accepts_proxy_protocol(peer);
    HeadLimits::configured(&ctx.config().limits, exempt)
}

async fn accept_loop(ctx: Arc<ServerCtx>, listener: TcpListener, port: Port) {
    let mut overloaded = false;
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                admission(&ctx, &mut overloaded).await;
                // A connection reading its head holds a unit of the head budget, not of
                // `clients`: the handler moves it to `clients` once the request is known.
                let tls = matches!(port, Port::Tls | Port::Auto);
                let limits = head_limits(&ctx, peer.ip());
                let started = match ctx.clients.start_head(peer.ip(), limits) {
                    // On a TLS socket an address over its cap is let in on probation: it must
                    // start its handshake at once (`connection::handle_tls`), so a crowd behind
                    // one address reconnecting over TLS is served and silent sockets are not.
                    Err(HeadRefused::PerAddress) if tls => ctx
                        .clients
                        .start_head(
                            peer.ip(),
                            HeadLimits {
                                per_address: u32::MAX,
                                ..limits
                            },
                        )
                        .map(|slot| (slot, true)),
                    started => started.map(|slot| (slot, false)),
                };
                let (slot, on_probation) = match started {
                    Ok(started) => started,
                    Err(why) if tls => {
                        let auto = port == Port::Auto;
                        tokio::spawn(crate::connection::refuse_tls_head(
                            ctx.clone(),
                            stream,
                            peer,
                            why,
                            auto,
                        ));
                        continue;
                    }
                    Err(why) => {
                        tokio::spawn(crate::connection::refuse_head(
                            ctx.clone(),
                            stream,
                            peer,
                            why,
                        ));
                        continue;
                    }
                };
                let ctx = ctx.clone();
                match port {
                    Port::Shoutcast => {
                        tokio::spawn(crate::connection::handle_shoutcast_port(
                            ctx, stream, peer, slot,
                        ));
                    }
                    Port::Http => {
                        tokio::spawn(crate::connection::handle(ctx, stream, peer, slot));
                    }
                    Port::Tls | Port::Auto => {
                        let auto = port == Port::Auto;
                        tokio::spawn(crate::connection::handle_tls(
                            ctx,
                            stream,
                            peer,
                            slot,
                            auto,
                            on_probation,
                        ));
                    }
                }
            }
            Err(e) => {
                // EMFILE/ENFILE and friends: back off instead of spinning.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn connection_task_stays_small() {
        // A reconnect storm holds one such task per connection at once: keep it well under the
        // 1 KiB per listener budget (the branch futures are boxed and freed after use).
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let c = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (s, peer) = l.accept().await.unwrap();
            let ctx = super::Server::bind(test_config()).await.unwrap().ctx();
            let limits = super::head_limits(&ctx, peer.ip());
            let slot = ctx.clients.start_head(peer.ip(), limits).unwrap();
            let fut = crate::connection::handle(ctx, s, peer, slot);
            let n = std::mem::size_of_val(&fut);
            assert!(n <= 768, "connection future is {n} bytes");
            drop(c);
        });
    }

    fn test_config() -> crate::config::Config {
        let mut c = crate::config::Config::from_toml(
            "listen = [\"127.0.0.1:0\"]\nworkers = 1\n[logging]\naccess-log = \"\"",
        )
        .unwrap();
        c.generate_missing_passwords();
        c
    }
}
