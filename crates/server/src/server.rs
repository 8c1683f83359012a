//! The server: binds the listen sockets, starts the fan-out shards and the demo mount, accepts
//! connections until shutdown, then closes everything cleanly.
//!
//! The accept path is its own task per listen socket with a large backlog (4096), so a burst of
//! connects never waits on the fan-out; each connection gets a short-lived task that reads its
//! request head and dispatches it (`connection.rs`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};
use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::access_log::AccessLog;
use crate::config::Config;
use crate::fanout::FanOut;
use crate::metrics::Metrics;
use crate::mount::Registry;
use crate::shard::{ShardConfig, ShardContext};

/// Listen backlog of every listen socket (the kernel caps it at `net.core.somaxconn`).
pub const LISTEN_BACKLOG: i32 = 4096;

/// Errors starting the server.
#[derive(Debug, Error)]
pub enum ServerError {
    /// A listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The error.
        source: std::io::Error,
    },
    /// The access log could not be opened.
    #[error("cannot open access log {path}: {source}")]
    AccessLog {
        /// The path.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// Threads or polls could not be created.
    #[error("cannot start fan-out: {0}")]
    FanOut(std::io::Error),
    /// The demo mount could not start.
    #[error("cannot start demo mount: {0}")]
    Demo(#[from] crate::file_source::FileSourceError),
    /// A mount's authenticator is misconfigured.
    #[error("{0}")]
    Auth(#[from] crate::auth::AuthError),
}

/// State shared by every task of a running server.
#[derive(Debug)]
pub struct ServerCtx {
    /// The configuration, passwords filled in.
    pub config: Arc<Config>,
    /// Live mounts and fallback rules.
    pub registry: Arc<Registry>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Access log.
    pub access_log: AccessLog,
    /// The fan-out shards.
    pub fanout: FanOut,
    /// Open connections of any kind.
    pub clients: Arc<AtomicI64>,
    /// The `clients` limit in force.
    pub max_clients: i64,
    /// When the server started.
    pub started: chrono::DateTime<chrono::Local>,
    /// Port used in `listenurl` (the first listen address's).
    pub port: u16,
    /// Becomes true when the server shuts down.
    pub shutdown: watch::Receiver<bool>,
    /// Listener and source authenticators of the `[[mount]]` entries.
    pub auth: crate::auth::Authenticators,
    /// Trusted proxies and the deny/allow files (`[paths]`).
    pub filters: crate::filters::Filters,
    next_id: AtomicU64,
    intros: parking_lot::Mutex<std::collections::HashMap<std::path::PathBuf, bytes::Bytes>>,
    /// Held while an intro is read, so listeners arriving together (a reconnect storm after a
    /// restart) wait for one read instead of each reading, and holding, a copy.
    intro_load: tokio::sync::Mutex<()>,
}

impl ServerCtx {
    /// A fresh id for a client.
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The intro file at `path` (read once, then cached and shared; at most 16 MiB).
    ///
    /// Errors: the file cannot be read or is larger than 16 MiB.
    pub async fn intro(&self, path: &std::path::Path) -> std::io::Result<bytes::Bytes> {
        if let Some(b) = self.intros.lock().get(path) {
            return Ok(b.clone());
        }
        let _loading = self.intro_load.lock().await;
        if let Some(b) = self.intros.lock().get(path) {
            return Ok(b.clone());
        }
        let meta = tokio::fs::metadata(path).await?;
        if meta.len() > 16 << 20 {
            return Err(std::io::Error::other("intro larger than 16 MiB"));
        }
        let b = bytes::Bytes::from(tokio::fs::read(path).await?);
        self.intros.lock().insert(path.to_owned(), b.clone());
        Ok(b)
    }

    /// Extra listener response headers for mount `name`: the global `http-headers`, then the
    /// mount's (Icecast `<http-headers>`).
    pub fn http_headers_for(&self, name: &str) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = self
            .config
            .http_headers
            .iter()
            .map(|h| (h.name.clone(), h.value.clone()))
            .collect();
        if let Some(m) = self.config.mount_for(name) {
            v.extend(
                m.http_headers
                    .iter()
                    .map(|h| (h.name.clone(), h.value.clone())),
            );
        }
        v
    }

    /// The source user and password for mount `name`: the mount's own, else user `source` with
    /// the global source password. `None` when no password is configured: then no source is
    /// accepted (an empty password is never a valid one).
    pub fn source_credentials(&self, name: &str) -> Option<(String, String)> {
        let m = self.config.mount_for(name);
        let user = m
            .and_then(|m| m.username.clone())
            .unwrap_or_else(|| "source".to_owned());
        let pass = m
            .and_then(|m| m.password.clone())
            .or_else(|| self.config.authentication.source_password.clone())
            .filter(|p| !p.is_empty())?;
        Some((user, pass))
    }
}

/// A bound, not yet running server.
pub struct Server {
    ctx: Arc<ServerCtx>,
    listeners: Vec<TcpListener>,
    /// The SHOUTcast source port, when `shoutcast-mount` is set.
    shoutcast: Option<TcpListener>,
    shutdown_tx: watch::Sender<bool>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addrs", &self.local_addrs())
            .finish()
    }
}

/// Binds a listen socket on `addr` (backlog [`LISTEN_BACKLOG`], dual-stack on `[::]`).
pub(crate) fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        // Dual-stack on `[::]`, as Icecast 2.4 sets IPV6_V6ONLY=0.
        let _ = socket.set_only_v6(false);
    }
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    socket.set_nonblocking(true)?;
    TcpListener::from_std(socket.into())
}

/// The process's open-file limit (RLIMIT_NOFILE soft limit).
pub fn open_file_limit() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0 {
        r.rlim_cur
    } else {
        1024
    }
}

/// Starts every `[[mount]] file` mount, and every webroot file named as a `fallback-mount`
/// that is not otherwise a mount.
fn start_file_mounts(ctx: &Arc<ServerCtx>) -> Result<(), ServerError> {
    use crate::file_source::start_file_mount;
    for m in &ctx.config.mount {
        if let Some(path) = &m.file {
            start_file_mount(ctx.clone(), &m.name, path, false)?;
        }
    }
    let Some(webroot) = &ctx.config.paths.webroot else {
        return Ok(());
    };
    for m in &ctx.config.mount {
        let Some(target) = &m.fallback_mount else {
            continue;
        };
        let path = webroot.join(target.trim_start_matches('/'));
        if ctx.registry.get(target).is_none()
            && !ctx
                .config
                .mount
                .iter()
                .any(|o| &o.name == target && o.file.is_some())
            && path.is_file()
        {
            start_file_mount(ctx.clone(), target, &path, true)?;
            tracing::info!("fallback file {} plays on {target}", path.display());
        }
    }
    Ok(())
}

impl Server {
    /// Binds every listen address and starts the fan-out shards, the demo mount, file mounts,
    /// `[[relay]]` relays and the `[master]` poller (`relay::start_all`). Must be called inside
    /// a tokio runtime. Passwords must already be filled in.
    ///
    /// Errors: see [`ServerError`].
    pub async fn bind(config: Config) -> Result<Server, ServerError> {
        let mut listeners = Vec::new();
        let mut shoutcast = None;
        for (i, &addr) in config.listen.iter().enumerate() {
            if i == 0 && config.shoutcast_mount.is_some() {
                let (http, sc) = crate::shoutcast::bind_pair(addr)?;
                listeners.push(http);
                shoutcast = Some(sc);
            } else {
                listeners.push(bind(addr).map_err(|source| ServerError::Bind { addr, source })?);
            }
        }
        let access_log = AccessLog::open(&config.logging.access_log).map_err(|source| {
            ServerError::AccessLog {
                path: config.logging.access_log.clone(),
                source,
            }
        })?;
        let metrics = Arc::new(Metrics::new());
        let clients = Arc::new(AtomicI64::new(0));
        let filters = crate::filters::Filters::new(&config.paths);
        let config = Arc::new(config);
        let auth = crate::auth::Authenticators::from_config(&config)?;
        let registry = Arc::new(Registry::new(config.clone()));
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
                clients: clients.clone(),
                fallback: Arc::new(move |m| fallback_registry.fallback_target(m)),
            },
        )
        .map_err(ServerError::FanOut)?;
        let max_clients = if config.limits.clients == 0 {
            open_file_limit().saturating_sub(64).max(16) as i64
        } else {
            config.limits.clients as i64
        };
        let port = listeners[0].local_addr().map(|a| a.port()).unwrap_or(8000);
        let (shutdown_tx, shutdown) = watch::channel(false);
        let ctx = Arc::new(ServerCtx {
            config,
            registry,
            metrics,
            access_log,
            fanout,
            clients,
            max_clients,
            started: chrono::Local::now(),
            port,
            shutdown,
            auth,
            filters,
            next_id: AtomicU64::new(1),
            intros: Default::default(),
            intro_load: Default::default(),
        });
        if ctx.config.demo {
            crate::file_source::start_demo(ctx.clone())?;
        }
        start_file_mounts(&ctx)?;
        crate::relay::start_all(&ctx);
        Ok(Server {
            ctx,
            listeners,
            shoutcast,
            shutdown_tx,
        })
    }

    /// The bound addresses (useful with port 0).
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners
            .iter()
            .filter_map(|l| l.local_addr().ok())
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

    /// Serves until `shutdown` completes, then stops sources and closes every listener.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        let Server {
            ctx,
            listeners,
            shoutcast,
            shutdown_tx,
        } = self;
        let mut accept_tasks = Vec::new();
        for l in listeners {
            accept_tasks.push(tokio::spawn(accept_loop(ctx.clone(), l, Port::Http)));
        }
        if let Some(l) = shoutcast {
            if let Ok(a) = l.local_addr() {
                tracing::info!(
                    "SHOUTcast v1 sources on {a} feed {}",
                    crate::shoutcast::default_mount(&ctx.config)
                );
            }
            accept_tasks.push(tokio::spawn(accept_loop(ctx.clone(), l, Port::Shoutcast)));
        }
        accept_tasks.push(tokio::spawn(housekeeping()));
        for a in ctx.config.listen.iter() {
            tracing::info!("listening on {a}");
        }
        shutdown.await;
        tracing::info!("shutting down");
        for t in &accept_tasks {
            t.abort();
        }
        let _ = shutdown_tx.send(true);
        for m in ctx.registry.list() {
            m.stop.store(true, Ordering::Relaxed);
        }
        // Give feeders a moment to publish their end, then close listeners.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let c = ctx.clone();
        let _ = tokio::task::spawn_blocking(move || {
            c.fanout.shutdown();
            // The shards logged every listener they closed: write those lines before exiting.
            c.access_log.flush(Duration::from_secs(5));
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

/// Admission at the `clients` limit. Called with one accepted connection in hand (the accept
/// loop takes no other meanwhile, so further connections wait in the kernel's listen backlog,
/// costing no file descriptor): waits up to [`ADMISSION_WAIT`] for a slot, once per overload
/// episode. While the server stays full after such a wait (`overloaded`), connections are
/// answered 503 at once instead of one every wait.
async fn admission(ctx: &ServerCtx, overloaded: &mut bool) {
    let full = || ctx.clients.load(Ordering::Relaxed) >= ctx.max_clients;
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

/// What a listen socket speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Port {
    /// HTTP: sources, listeners, admin.
    Http,
    /// SHOUTcast v1 source logins (`shoutcast.rs`).
    Shoutcast,
}

async fn accept_loop(ctx: Arc<ServerCtx>, listener: TcpListener, port: Port) {
    let mut overloaded = false;
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                admission(&ctx, &mut overloaded).await;
                let n = ctx.clients.fetch_add(1, Ordering::Relaxed) + 1;
                ctx.metrics.clients.inc();
                let ctx = ctx.clone();
                if n > ctx.max_clients {
                    tokio::spawn(crate::connection::refuse_full(ctx, stream, peer));
                } else if port == Port::Shoutcast {
                    tokio::spawn(crate::shoutcast::handle(ctx, stream, peer));
                } else {
                    tokio::spawn(crate::connection::handle(ctx, stream, peer));
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
    fn listeners_arriving_together_share_one_intro() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("intro.mp3");
            std::fs::write(&path, vec![1u8; 256 * 1024]).unwrap();
            let mut c = crate::Config::from_toml(
                "listen = [\"127.0.0.1:0\"]\nworkers = 1\n[logging]\naccess-log = \"\"",
            )
            .unwrap();
            c.generate_missing_passwords();
            let ctx = super::Server::bind(c).await.unwrap().ctx();
            // A cold cache and many listeners at once (a reconnect storm after a restart): one
            // buffer, not one copy each.
            let tasks: Vec<_> = (0..32)
                .map(|_| {
                    let (ctx, path) = (ctx.clone(), path.clone());
                    tokio::spawn(async move { ctx.intro(&path).await.unwrap() })
                })
                .collect();
            let mut ptrs = std::collections::HashSet::new();
            for t in tasks {
                ptrs.insert(t.await.unwrap().as_ptr() as usize);
            }
            assert_eq!(ptrs.len(), 1);
        });
    }
}
