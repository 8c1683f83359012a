//! Binary upgrade in place (SIGUSR2), the old process's side: start the binary found at the
//! server's own path with the same arguments and a hand-over socket (`wire.rs`), wait for it to
//! load its configuration, then hand it everything without closing a connection:
//!
//! 1. the listen sockets; the new process builds its server around them and answers `Ready`,
//!    and only then does this one stop accepting (the kernel queues new connections meanwhile);
//! 2. every listener, taken out of the fan-out shards with its stream position and ICY state;
//! 3. every mount: its queue at the same absolute offsets (so step 2's positions stay valid),
//!    title and counters, and for a source client its connection with the bytes received but
//!    not yet framed (the source task stops between two reads, `mount/handover.rs`); a relay
//!    likewise hands over its upstream connection; a looped file continues at its queue's
//!    head; a mount whose feed had already ended (listeners in its grace period) is served
//!    until drained;
//! 4. a second pass after the requests in flight finished (a listener or source that completed
//!    its request during the hand-over; connections still silently reading their head are
//!    waited for 100 ms only, [`drain_done`]), then `End`; the new process answers `TookOver`
//!    and this one exits.
//!
//! If the new binary fails to start or to load its configuration, this process keeps serving
//! and logs why; the point of no return is the `Ready` of step 1.

pub mod adopt;
pub mod wire;

use std::collections::HashSet;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;

use crate::ctx::ServerCtx;
use crate::fanout::handover::{ExportedListener, ListenerState};
use crate::mount::freeze::FrozenFeed;
use crate::mount::handover::{FeedState, MountState};
use crate::mount::live::{Mount, SourceKind};
use crate::net::listen::ListenSocket;
use crate::upgrade::wire::{recv, send, Message, WireError, MAX_FDS, UPGRADE_FD_ENV};

/// How long the new binary may take to start and load its configuration.
pub const START_TIMEOUT: Duration = Duration::from_secs(20);

/// How long a feeding task may take to stop and hand its feed over.
pub const FREEZE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long requests in flight (an admin call, a source login) may take to finish before the
/// second pass.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(3);

/// How long connections still reading their request head are waited for before the second
/// pass: a client sends its head at once, so one still silent after this long is an idle
/// socket, and the listeners (out of the shards since the first pass) must not wait for it.
/// Such connections are closed when this process exits.
pub const HEAD_DRAIN_TIMEOUT: Duration = Duration::from_millis(100);

/// Whether the wait for requests in flight is over after `waited`: `busy` connections hold a
/// `clients` slot and are doing something (not idle: an event subscriber or a keep-alive
/// connection between requests never finishes by itself), `heads` are still reading their
/// request head. Busy ones are waited for up to [`DRAIN_TIMEOUT`], heads up to
/// [`HEAD_DRAIN_TIMEOUT`]. Before, heads were waited for as long as busy ones: one idle socket
/// stalled every listener for the full 3 s.
pub fn drain_done(busy: i64, heads: i64, waited: Duration) -> bool {
    let busy_left = busy > 0 && waited < DRAIN_TIMEOUT;
    let heads_left = heads > 0 && waited < HEAD_DRAIN_TIMEOUT;
    !(busy_left || heads_left)
}

/// Why an upgrade failed.
#[derive(Debug, Error)]
pub enum UpgradeError {
    /// The binary at the server's path could not be found or started.
    #[error("cannot start {path}: {source}")]
    Spawn {
        /// The binary.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// The new process exited before saying hello (bad configuration, crash).
    #[error("the new process exited before taking over ({0})")]
    Exited(String),
    /// The hand-over channel failed.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// The other side sent something out of order.
    #[error("unexpected hand-over message: {0}")]
    Protocol(String),
}

/// What an upgrade attempt left behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The new process took over: this one must exit without closing anything handed over.
    HandedOver,
    /// This process goes on serving (the new one failed before the point of no return, or
    /// after it, in which case what was handed over is lost).
    StillServing,
}

/// Runs an upgrade: starts the new binary and hands it every socket. `stop_accepting` is
/// called once the new process is ready, before the listen sockets are handed over.
pub async fn upgrade(
    ctx: &Arc<ServerCtx>,
    sockets: &[ListenSocket],
    stop_accepting: impl FnOnce(),
) -> Outcome {
    let successor = match start_successor().await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("upgrade failed, still serving: {e}");
            return Outcome::StillServing;
        }
    };
    let pid = successor.pid;
    tracing::info!(pid, version = %successor.version, "upgrade: the new process started");
    match hand_over(ctx, successor, sockets, stop_accepting).await {
        Ok((mounts, listeners)) => {
            tracing::info!(pid, mounts, listeners, "upgrade: the new process took over");
            Outcome::HandedOver
        }
        Err(e) => {
            tracing::error!(
                pid,
                "upgrade failed during the hand-over: {e}; still serving what is left"
            );
            Outcome::StillServing
        }
    }
}

/// The new process, started and ready.
struct Successor {
    child: Child,
    sock: UnixStream,
    pid: u32,
    version: String,
}

/// The binary to start: the one at this process's path (a replaced binary shows in
/// `/proc/self/exe` with a ` (deleted)` suffix; the new file is at the path without it).
fn own_path() -> std::io::Result<std::path::PathBuf> {
    let exe = std::env::current_exe()?;
    let s = exe.to_string_lossy();
    Ok(match s.strip_suffix(" (deleted)") {
        Some(p) => p.into(),
        None => exe,
    })
}

/// Starts the new binary with this process's arguments and the hand-over socket as
/// descriptor 3, and waits for its hello.
async fn start_successor() -> Result<Successor, UpgradeError> {
    let path = own_path().map_err(|source| UpgradeError::Spawn {
        path: "the server's own binary".into(),
        source,
    })?;
    let (ours, theirs) = UnixStream::pair().map_err(|source| UpgradeError::Spawn {
        path: path.display().to_string(),
        source,
    })?;
    let theirs_fd = theirs.as_raw_fd();
    let mut cmd = Command::new(&path);
    cmd.args(std::env::args_os().skip(1))
        .env(UPGRADE_FD_ENV, "3");
    // SAFETY: only async-signal-safe calls (dup2, fcntl) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if theirs_fd == 3 {
                if libc::fcntl(3, libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(theirs_fd, 3) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|source| UpgradeError::Spawn {
        path: path.display().to_string(),
        source,
    })?;
    drop(theirs);
    let pid = child.id();
    let waited = tokio::task::spawn_blocking(move || {
        let mut sock = ours;
        sock.set_read_timeout(Some(START_TIMEOUT))?;
        let hello = recv(&mut sock);
        sock.set_read_timeout(None)?;
        Ok::<_, std::io::Error>((sock, hello))
    })
    .await
    .map_err(|e| UpgradeError::Protocol(e.to_string()))?
    .map_err(WireError::Io)?;
    match waited {
        (sock, Ok((Message::Hello { pid: said, version }, _))) if said == pid => Ok(Successor {
            child,
            sock,
            pid,
            version,
        }),
        (_, Ok((other, _))) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(UpgradeError::Protocol(format!("{other:?}")))
        }
        (_, Err(e)) => {
            let _ = child.kill();
            let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
            Err(match e {
                WireError::Closed => UpgradeError::Exited(status),
                e => UpgradeError::Exited(format!("{e}; {status}")),
            })
        }
    }
}

/// Runs blocking hand-over I/O off the async runtime.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, WireError> + Send + 'static,
) -> Result<T, UpgradeError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| UpgradeError::Protocol(e.to_string()))?
        .map_err(UpgradeError::Wire)
}

/// Steps 1-4 of the module comment; returns the mounts and listeners adopted.
async fn hand_over(
    ctx: &Arc<ServerCtx>,
    successor: Successor,
    sockets: &[ListenSocket],
    stop_accepting: impl FnOnce(),
) -> Result<(usize, usize), UpgradeError> {
    let Successor {
        mut child, sock, ..
    } = successor;
    let mut sock = Arc::new(parking_lot::Mutex::new(sock));
    // 1. Listen sockets.
    let fds: Vec<OwnedFd> = sockets
        .iter()
        .map(|s| s.fd.try_clone())
        .collect::<std::io::Result<_>>()
        .map_err(WireError::Io)?;
    let msg = Message::ListenSockets {
        sockets: sockets.iter().map(|s| (s.addr, s.port.to_wire())).collect(),
        started: ctx.started,
        counters: (
            ctx.metrics.source_connects.get(),
            ctx.metrics.rejected.get(),
        ),
    };
    {
        let sock = sock.clone();
        let ready = blocking(move || {
            let raw: Vec<_> = fds.iter().map(|f| f.as_raw_fd()).collect();
            let mut s = sock.lock();
            send(&mut s, &msg, &raw)?;
            s.set_read_timeout(Some(START_TIMEOUT))?;
            let ready = recv(&mut s);
            s.set_read_timeout(None)?;
            ready
        })
        .await;
        match ready {
            Ok((Message::Ready, _)) => {}
            Ok((other, _)) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(UpgradeError::Protocol(format!("{other:?}")));
            }
            Err(e) => {
                let _ = child.kill();
                let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
                return Err(UpgradeError::Exited(format!("{e}; {status}")));
            }
        }
    }
    // The point of no return: the new process serves from here on.
    tracing::info!("upgrade: the new process is ready; handing over");
    stop_accepting();
    // WebRTC viewers are not carried over (their DTLS state stays here): close them now, so the
    // UDP ports, which the new process's engines bound too (SO_REUSEPORT), are its alone.
    if ctx.whep.is_some() {
        let c = ctx.clone();
        let _ = tokio::task::spawn_blocking(move || {
            if let Some(whep) = &c.whep {
                whep.shutdown(Duration::from_secs(2), crate::audience::EndReason::Shutdown);
            }
        })
        .await;
    }
    // 2-3. Listeners out of the shards, then mounts (sources frozen), then the listeners.
    let mut sent_mounts: HashSet<u64> = HashSet::new();
    let mut listeners = pass(ctx, &mut sock, &mut sent_mounts, true).await?;
    // 4. Requests in flight finish here (no new ones arrive), then a second pass.
    let start = tokio::time::Instant::now();
    loop {
        let busy = ctx.clients.open() - ctx.clients.idle() as i64;
        if drain_done(busy, ctx.clients.pending(), start.elapsed()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    listeners += pass(ctx, &mut sock, &mut sent_mounts, false).await?;
    let sock2 = sock.clone();
    let answer = blocking(move || {
        let mut s = sock2.lock();
        send(&mut s, &Message::End, &[])?;
        s.set_read_timeout(Some(Duration::from_secs(60)))?;
        recv(&mut s)
    })
    .await?;
    // The child is on its own now; it is reaped by init once this process exits.
    std::mem::forget(child);
    match answer {
        (
            Message::TookOver {
                mounts,
                listeners: adopted,
            },
            _,
        ) => {
            if adopted != listeners {
                tracing::warn!(
                    sent = listeners,
                    adopted,
                    "upgrade: not every listener was adopted"
                );
            }
            Ok((mounts, adopted))
        }
        (other, _) => Err(UpgradeError::Protocol(format!("{other:?}"))),
    }
}

/// One pass: takes the listeners out of the shards, freezes and sends every mount not sent yet
/// (with `first`, all with `MountsDone` after them), then sends the listeners. Returns how many
/// listeners were sent.
async fn pass(
    ctx: &Arc<ServerCtx>,
    sock: &mut Arc<parking_lot::Mutex<UnixStream>>,
    sent_mounts: &mut HashSet<u64>,
    first: bool,
) -> Result<usize, UpgradeError> {
    let exported = ctx.fanout.export_all().await;
    // Mounts: the live ones, and the ended ones listeners are still draining.
    let mut mounts: Vec<Arc<Mount>> = ctx.registry.list();
    for l in &exported {
        if !mounts.iter().any(|m| m.id == l.mount.id) {
            mounts.push(l.mount.clone());
        }
    }
    for mount in mounts {
        if !sent_mounts.insert(mount.id) {
            continue;
        }
        let (state, socket) = freeze(ctx, &mount).await;
        let sock = sock.clone();
        blocking(move || {
            let raw: Vec<_> = socket.iter().map(|f| f.as_raw_fd()).collect();
            send(&mut sock.lock(), &Message::Mount(Box::new(state)), &raw)
        })
        .await?;
    }
    if first {
        let sock = sock.clone();
        blocking(move || send(&mut sock.lock(), &Message::MountsDone, &[])).await?;
    }
    let n = exported.len();
    let sock = sock.clone();
    blocking(move || {
        let mut s = sock.lock();
        let mut batch: Vec<ExportedListener> = Vec::with_capacity(MAX_FDS);
        let mut it = exported.into_iter().peekable();
        while it.peek().is_some() {
            batch.clear();
            batch.extend(it.by_ref().take(MAX_FDS));
            // Plain listeners as before (an older binary reads them); TLS ones with their
            // sealing state in a message of their own.
            let (plain, tls): (Vec<&ExportedListener>, Vec<&ExportedListener>) =
                batch.iter().partition(|l| l.tls.is_none());
            if !plain.is_empty() {
                let states: Vec<ListenerState> = plain.iter().map(|l| l.state.clone()).collect();
                let raw: Vec<_> = plain.iter().map(|l| l.stream.as_raw_fd()).collect();
                send(&mut s, &Message::Listeners(states), &raw)?;
            }
            if !tls.is_empty() {
                let states = tls
                    .iter()
                    .filter_map(|l| Some((l.state.clone(), l.tls.clone()?)))
                    .collect();
                let raw: Vec<_> = tls.iter().map(|l| l.stream.as_raw_fd()).collect();
                send(&mut s, &Message::TlsListeners(states), &raw)?;
            }
        }
        // Dropping `batch` closes this process's descriptors; the connections live on in the
        // new process.
        Ok(())
    })
    .await?;
    Ok(n)
}

/// Stops the feed of `mount` (a source client, a relay or a looped file) and captures it; an
/// ended mount's queue is captured as it is, to be drained.
async fn freeze(ctx: &ServerCtx, mount: &Arc<Mount>) -> (MountState, Option<OwnedFd>) {
    let retain = ctx.config().burst_and_queue(&mount.name);
    let retain = retain.0.max(retain.1) as u64;
    let live = ctx
        .registry
        .get(&mount.name)
        .is_some_and(|m| m.id == mount.id)
        && !mount.queue.load().ended;
    let frozen: Option<FrozenFeed> = if live {
        let rx = mount.handover.request();
        match tokio::time::timeout(FREEZE_TIMEOUT, rx).await {
            Ok(Ok(f)) => Some(f),
            _ => {
                tracing::warn!(mount = %mount.name, "upgrade: the feed did not stop in time; its listeners will drain it");
                None
            }
        }
    } else {
        None
    };
    match frozen {
        Some(FrozenFeed {
            socket: Some(socket),
            leftover,
            demux,
            client: Some(client),
        }) => (
            MountState::capture(
                mount,
                retain,
                FeedState::Client {
                    leftover,
                    demux: demux.map(Into::into),
                    client,
                },
            ),
            Some(socket),
        ),
        Some(FrozenFeed {
            socket: Some(socket),
            leftover,
            demux,
            client: None,
        }) if mount.settings.kind == SourceKind::Relay => (
            MountState::capture(
                mount,
                retain,
                FeedState::Relay {
                    leftover,
                    demux: demux.map(Into::into),
                },
            ),
            Some(socket),
        ),
        Some(_) if mount.settings.kind == SourceKind::File => {
            (MountState::capture(mount, retain, FeedState::File), None)
        }
        other => {
            if live {
                tracing::warn!(mount = %mount.name, kind = ?mount.settings.kind, handed = other.is_some(), "upgrade: the feed could not be handed over; its listeners will drain its queue");
            }
            (MountState::capture(mount, retain, FeedState::Ended), None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_heads_are_not_waited_for_as_long_as_busy_requests() {
        let ms = Duration::from_millis;
        assert!(drain_done(0, 0, ms(0)), "nothing in flight");
        assert!(!drain_done(0, 1, ms(50)), "a head may still come");
        assert!(
            drain_done(0, 500, HEAD_DRAIN_TIMEOUT),
            "500 idle sockets: 100 ms"
        );
        assert!(!drain_done(1, 0, ms(2000)), "an admin call is waited for");
        assert!(drain_done(1, 500, DRAIN_TIMEOUT), "up to 3 s");
    }
}
