//! Binary upgrade in place, the new process's side: take the hand-over socket named by
//! `THRONG_UPGRADE_FD`, say hello once the configuration is loaded, receive the listen sockets,
//! build the server around them and say `Ready`, then adopt every mount (a source client goes
//! on being read from its connection; a looped file continues at its queue's head; other
//! mounts are served until drained) and every listener at its stream position, and answer
//! `TookOver` (see `upgrade/mod.rs` for the old process's side).

use std::collections::HashMap;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::ctx::ServerCtx;
use crate::fanout::handover::{AdoptedListener, ListenerState};
use crate::fanout::seal::SealExport;
use crate::ingest::file::ResumedFiles as Resumed;
use crate::ingest::live_mount::LiveMount;
use crate::mount::feeder::Feeder;
use crate::mount::handover::{AdoptedRelay, FeedState, MountState};
use crate::mount::live::Mount;
use crate::net::listen::Port;
use crate::upgrade::wire::{recv, send, Message, UPGRADE_FD_ENV};
use crate::upgrade::UpgradeError;

/// The new process's end of the hand-over channel.
#[derive(Debug)]
pub struct Handover {
    sock: UnixStream,
}

/// The listen sockets received from the old process.
#[derive(Debug)]
pub struct TakenSockets {
    /// HTTP sockets, in the old process's order.
    pub http: Vec<TcpListener>,
    /// The SHOUTcast source port, if any.
    pub shoutcast: Option<TcpListener>,
    /// HTTPS sockets (`[tls] listen`, `auto`) with what each speaks.
    pub tls: Vec<(TcpListener, Port)>,
    /// When the first process of this server started.
    pub started: chrono::DateTime<chrono::Local>,
    /// Source client connections and refused connections so far.
    pub counters: (u64, u64),
}

impl Handover {
    /// The channel, when this process was started by an upgrade (`THRONG_UPGRADE_FD` names an
    /// open Unix socket); `None` otherwise. The variable is then removed from the environment,
    /// so the process's own children never see it.
    pub fn from_env() -> Option<Handover> {
        let fd: RawFd = std::env::var(UPGRADE_FD_ENV).ok()?.parse().ok()?;
        // SAFETY: the process is still single-threaded when `main` calls this (before the
        // runtime starts), so no other thread reads the environment.
        unsafe { std::env::remove_var(UPGRADE_FD_ENV) };
        // SAFETY: the old process started us with this descriptor open for us alone; we take
        // ownership of it once (the variable is gone).
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: fcntl on a descriptor we own.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        Some(Handover {
            sock: UnixStream::from(owned),
        })
    }

    /// Tells the old process this binary started and loaded its configuration.
    ///
    /// Errors: the channel failed (the old process is gone).
    pub fn hello(&mut self) -> Result<(), UpgradeError> {
        send(
            &mut self.sock,
            &Message::Hello {
                pid: std::process::id(),
                version: env!("CARGO_PKG_VERSION").to_string(),
            },
            &[],
        )?;
        Ok(())
    }

    /// Receives the listen sockets.
    ///
    /// Errors: the channel failed, or the old process sent something else.
    pub fn take_sockets(&mut self) -> Result<TakenSockets, UpgradeError> {
        let (msg, fds) = recv(&mut self.sock)?;
        let Message::ListenSockets {
            sockets,
            started,
            counters,
        } = msg
        else {
            return Err(UpgradeError::Protocol(format!("{msg:?}")));
        };
        let mut taken = TakenSockets {
            http: Vec::new(),
            shoutcast: None,
            tls: Vec::new(),
            started,
            counters,
        };
        for ((addr, port), fd) in sockets.into_iter().zip(fds) {
            let std = std::net::TcpListener::from(fd);
            std.set_nonblocking(true).map_err(wire_io)?;
            let l = TcpListener::from_std(std).map_err(wire_io)?;
            tracing::info!("upgrade: took over listen socket {addr}");
            match Port::from_wire(port) {
                Port::Shoutcast => taken.shoutcast = Some(l),
                Port::Http => taken.http.push(l),
                p => taken.tls.push((l, p)),
            }
        }
        if taken.http.is_empty() {
            return Err(UpgradeError::Protocol("no listen socket".into()));
        }
        Ok(taken)
    }

    /// Says `Ready`, adopts every mount and listener the old process sends until `End`, and
    /// answers `TookOver`. Returns the looped-file mounts to continue (started with the rest of
    /// the configuration's mounts).
    ///
    /// Errors: the channel failed or the old process sent something out of order.
    pub async fn adopt(mut self, ctx: &Arc<ServerCtx>) -> Result<Resumed, UpgradeError> {
        let ctx = ctx.clone();
        tokio::task::spawn_blocking(move || self.adopt_blocking(&ctx))
            .await
            .map_err(|e| UpgradeError::Protocol(e.to_string()))?
    }

    fn adopt_blocking(&mut self, ctx: &Arc<ServerCtx>) -> Result<Resumed, UpgradeError> {
        let rt = tokio::runtime::Handle::current();
        send(&mut self.sock, &Message::Ready, &[])?;
        let mut mounts: HashMap<u64, Arc<Mount>> = HashMap::new();
        let mut resumed = Resumed::new();
        let mut listeners = 0usize;
        let mut max_id = 0u64;
        loop {
            let (msg, fds) = recv(&mut self.sock)?;
            match msg {
                Message::Mount(state) => {
                    let _guard = rt.enter();
                    let fd = fds.into_iter().next();
                    let (old_id, mount) = install_mount(ctx, *state, fd, &mut resumed);
                    mounts.insert(old_id, mount);
                }
                Message::MountsDone => {}
                Message::Listeners(_) | Message::TlsListeners(_) => {
                    let states: Vec<(ListenerState, Option<SealExport>)> = match msg {
                        Message::Listeners(s) => s.into_iter().map(|s| (s, None)).collect(),
                        Message::TlsListeners(s) => {
                            s.into_iter().map(|(s, t)| (s, Some(t))).collect()
                        }
                        _ => Vec::new(),
                    };
                    for ((state, tls), fd) in states.into_iter().zip(fds) {
                        let stream = std::net::TcpStream::from(fd);
                        let Some(mount) = mounts.get(&state.mount_id).cloned() else {
                            tracing::warn!(
                                id = state.id,
                                "upgrade: a listener's mount is unknown; closing it"
                            );
                            continue;
                        };
                        if stream.set_nonblocking(true).is_err() {
                            continue;
                        }
                        max_id = max_id.max(state.id);
                        let (client_slot, _) = ctx.clients.admit();
                        ctx.fanout.adopt(AdoptedListener {
                            stream,
                            mount,
                            state,
                            client_slot,
                            tls,
                        });
                        listeners += 1;
                    }
                }
                Message::End => break,
                other => return Err(UpgradeError::Protocol(format!("{other:?}"))),
            }
        }
        ctx.next_id.fetch_max(max_id + 1, Ordering::Relaxed);
        // Under systemd this process is the service's main process from now on (before the old
        // one exits, so systemd never sees the service without one).
        crate::observe::systemd::main_pid(std::process::id());
        send(
            &mut self.sock,
            &Message::TookOver {
                mounts: mounts.len(),
                listeners,
            },
            &[],
        )?;
        tracing::info!(
            mounts = mounts.len(),
            listeners,
            "upgrade: took over from the old process"
        );
        Ok(resumed)
    }
}

fn wire_io(e: std::io::Error) -> UpgradeError {
    UpgradeError::Wire(e.into())
}

/// Rebuilds one mount and restarts its feed; returns its old id and the mount listeners join.
fn install_mount(
    ctx: &Arc<ServerCtx>,
    state: MountState,
    socket: Option<OwnedFd>,
    resumed: &mut Resumed,
) -> (u64, Arc<Mount>) {
    let old_id = state.old_id;
    let name = state.name.clone();
    let feed = state.feed.clone();
    let (mount, writer) = state.rebuild();
    // The new binary read the configuration again: its max-listeners, hidden and burst apply.
    mount.retune(&ctx.config());
    match feed {
        FeedState::Client {
            leftover,
            demux,
            client,
        } => {
            let Some(socket) = socket else {
                tracing::warn!(mount = %name, "upgrade: a source arrived without its connection");
                return (old_id, mount);
            };
            let live = match LiveMount::reserve(ctx.clone(), mount.clone(), usize::MAX) {
                Ok(live) => live,
                Err(e) => {
                    tracing::warn!(mount = %name, "upgrade: cannot register the source's mount: {e}");
                    return (old_id, mount);
                }
            };
            match Feeder::resume(
                mount.clone(),
                writer,
                demux.map(Into::into),
                &leftover,
                ctx.metrics.clone(),
            ) {
                Ok(feeder) => {
                    tracing::info!(peer = %client.peer, mount = %name, "upgrade: source adopted");
                    tokio::spawn(crate::ingest::source::resume(
                        ctx.clone(),
                        std::net::TcpStream::from(socket),
                        mount.clone(),
                        feeder,
                        live,
                        client,
                    ));
                }
                Err(e) => {
                    tracing::warn!(mount = %name, "upgrade: the source's last bytes are bad: {e}")
                }
            }
        }
        FeedState::File => {
            resumed.insert(name, (mount.clone(), writer));
        }
        FeedState::Relay { leftover, demux } => match socket {
            Some(socket) => ctx.registry.adopt_relay(AdoptedRelay {
                socket,
                mount: mount.clone(),
                writer,
                leftover,
                demux: demux.map(Into::into),
            }),
            None => {
                tracing::warn!(mount = %name, "upgrade: a relay arrived without its connection")
            }
        },
        FeedState::Ended => {}
    }
    (old_id, mount)
}
