//! A listener's request (`GET` or `HEAD` on a mount): decided by pure code (`decide.rs`), acted
//! on here. The executor asks `decide::find` for the mount to serve and then `decide::serve`
//! what to do with it, takes each act it is told (look a mount up, start and await an
//! on-demand relay, ask the cluster for an edge, authenticate, take a listener slot), records
//! what the act learnt and asks again, until the answer is final: a refusal, a redirect to an
//! edge, a playlist, Safari's probe, a `HEAD`, or the join: the Icecast response head
//! (`head.rs`), the intro and hand-over of the socket to a fan-out shard. From there on the
//! listener costs a slab slot and a cursor in its shard, and nothing else.
//!
//! Safari's probe `Range: bytes=0-1` gets the 2 bytes (`206`) and is not counted as a
//! listener; a path naming no mount but ending `.m3u` or `.xspf` gets the mount's playlist
//! (`admin/playlist.rs`). On a cluster's origin a listener may instead be redirected to an edge
//! (`cluster/redirect.rs`): every listener with `redirect = "all"`, else one refused for
//! `max-listeners`.

pub mod decide;
pub mod head;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use crate::net::conn::Conn;
use bytes::Bytes;
use throng_proto::http::RequestHead;
use tokio::io::AsyncWriteExt;

use crate::audience::{AudiencePath, ListenerInfo};
use crate::ctx::ServerCtx;
use crate::fanout::seal::{SealState, TlsListener};
use crate::fanout::shard::NewListener;
use crate::mount::live::Mount;
use crate::net::clients::ClientSlot;
use crate::observe::access_log::AccessEntry;
use crate::observe::metrics::MountLabel;
use crate::respond::{admit_listener, reply, Admitted};
use decide::{Find, Refusal, Request, Room, Search, Serve, Served, Where};

/// How long a listener of an on-demand mount waits for it to start (ms).
pub const ON_DEMAND_WAIT_MS: u64 = 10_000;

/// Polls `find` every 50 ms for up to [`ON_DEMAND_WAIT_MS`] while an on-demand mount starts.
async fn wait_for_mount(find: impl Fn() -> Option<Arc<Mount>>) -> Option<Arc<Mount>> {
    let until = Instant::now() + std::time::Duration::from_millis(ON_DEMAND_WAIT_MS);
    loop {
        if let Some(m) = find() {
            return Some(m);
        }
        if Instant::now() >= until {
            return None;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The live mount at `place` for requested path `requested`, if any: the mount itself (not
/// ended), or the first live one along its fallback chain.
fn look(ctx: &ServerCtx, requested: &str, place: Where) -> Option<Arc<Mount>> {
    match place {
        Where::Requested => ctx
            .registry
            .get(requested)
            .filter(|m| !m.queue.load().ended),
        Where::Chain => ctx.registry.resolve(requested),
    }
}

/// Asks an on-demand relay at `place` for `requested` to start (the mount itself, or one in
/// its fallback chain); returns whether one was.
fn start_on_demand(ctx: &ServerCtx, requested: &str, place: Where) -> bool {
    match place {
        Where::Requested => ctx.registry.request_on_demand(requested),
        Where::Chain => ctx.registry.start_on_demand_fallback(requested),
    }
}

/// Answers `refusal` to `head` from `peer` and closes; `mount` names the full mount in the
/// tracing line of [`Refusal::Full`].
async fn refuse(
    ctx: &ServerCtx,
    stream: &mut Conn,
    head: &RequestHead,
    peer: SocketAddr,
    refusal: Refusal,
    mount: &str,
) {
    match refusal {
        Refusal::NotCanonical => {
            tracing::debug!(%peer, path = %head.path, "not a canonical mount name");
        }
        Refusal::NoMount => tracing::debug!(%peer, path = %head.path, "no such mount"),
        Refusal::Full => tracing::info!(%peer, mount = %mount, "max listeners reached"),
    }
    let (status, headers) = (refusal.status(), refusal.headers());
    let _ = reply(
        ctx,
        stream,
        peer,
        Some(head),
        status,
        headers,
        refusal.body(),
    )
    .await;
}

/// Serves `GET`/`HEAD` for a mount, as Icecast 2.4.4 `auth.c:add_listener_to_source`:
/// the live mount or its fallback chain (an on-demand relay is started and waited for),
/// authentication on the requested mount, max-listeners (or `fallback-when-full`), the
/// response head, the intro, and hand-over to a fan-out shard (`decide.rs` has the order).
pub async fn handle(
    ctx: Arc<ServerCtx>,
    mut stream: Conn,
    head: RequestHead,
    peer: SocketAddr,
    slot: ClientSlot,
) {
    let req = Request::of(&head);
    let requested = head.path.as_str();
    let mut search = Search::default();
    let mut found = None;
    loop {
        match decide::find(&req, &search) {
            Find::Refuse(refusal) => {
                refuse(&ctx, &mut stream, &head, peer, refusal, requested).await;
                return;
            }
            Find::Look(place) => {
                found = look(&ctx, requested, place);
                search.looked(place, found.is_some());
            }
            Find::AwaitOnDemand(place) => {
                found = if start_on_demand(&ctx, requested, place) {
                    wait_for_mount(|| look(&ctx, requested, place)).await
                } else {
                    None
                };
                search.awaited(place, found.is_some());
            }
            Find::ServePlaylist => {
                crate::admin::playlist::serve(&ctx, &mut stream, &head, peer).await;
                return;
            }
            Find::Found => break,
        }
    }
    // `Found` comes only after a step found a mount.
    if let Some(mount) = found {
        serve(ctx, stream, head, peer, slot, req, mount).await;
    }
}

/// Serves listener request `head` (flags `req`) from `peer` once `mount` was found for it.
async fn serve(
    ctx: Arc<ServerCtx>,
    mut stream: Conn,
    head: RequestHead,
    peer: SocketAddr,
    slot: ClientSlot,
    req: Request,
    mut mount: Arc<Mount>,
) {
    // A draining server sends newcomers on (`cluster/drain.rs`), as every door does.
    if crate::cluster::redirect::turn_away(&ctx, &mut stream, &head, peer, 302, &[]).await {
        return;
    }
    let mut served = Served::new(mount.settings.format.supports_icy_metadata());
    let mut admitted = None;
    loop {
        match decide::serve(&req, &served) {
            Serve::AskEdge { full } => {
                let edge = crate::cluster::redirect::target(&ctx, &head, full);
                if full {
                    served.edge_when_full = Some(edge);
                } else {
                    served.edge_for_all = Some(edge);
                }
            }
            Serve::Redirect { location, full } => {
                crate::cluster::redirect::send(&ctx, &mut stream, &head, peer, &location, full)
                    .await;
                return;
            }
            Serve::Authenticate => {
                let path = &head.path;
                match admit_listener(&ctx, &mut stream, peer, &head, path, &[], "listener").await {
                    Some(a) => {
                        admitted = Some(a);
                        served.admitted = true;
                    }
                    None => return,
                }
            }
            Serve::AnswerProbe => {
                let user = admitted.as_ref().and_then(|a: &Admitted| a.user.as_deref());
                let bytes = head::probe_answer(&ctx, &mount, req.head_only);
                log_answer(&ctx, &head, peer, user, 206, bytes.len());
                tracing::debug!(%peer, mount = %mount.name, "range probe answered");
                let _ = stream.write_all(&bytes).await;
                let _ = stream.shutdown().await;
                return;
            }
            Serve::AnswerHead { icy } => {
                let user = admitted.as_ref().and_then(|a: &Admitted| a.user.as_deref());
                let metaint = icy.then_some(ctx.config().metaint_for(&mount.name));
                let bytes = head::response_head(&ctx, &mount, metaint);
                log_answer(&ctx, &head, peer, user, 200, bytes.len());
                let _ = stream.write_all(&bytes).await;
                let _ = stream.shutdown().await;
                return;
            }
            Serve::TakeSlot => {
                served.room = Some(if mount.try_add_listener() {
                    Room::Taken
                } else {
                    let config = ctx.config();
                    let settings = config.mount_for(&mount.name);
                    Room::Full {
                        fallback_when_full: settings.is_some_and(|m| m.fallback_when_full),
                    }
                });
            }
            Serve::TakeFallbackSlot => {
                // The first fallback with room, as 2.4.4 walks up to 10 full mounts.
                let next = ctx
                    .registry
                    .live_fallbacks(&mount.name, Some(mount.settings.format))
                    .into_iter()
                    .find(|m| m.try_add_listener());
                served.room = Some(match next {
                    Some(m) => {
                        tracing::debug!(%peer, from = %mount.name, to = %m.name, "mount full, fallback");
                        served.icy_format = m.settings.format.supports_icy_metadata();
                        mount = m;
                        Room::Fallback
                    }
                    None => Room::FallbacksFull,
                });
            }
            Serve::Refuse(refusal) => {
                refuse(&ctx, &mut stream, &head, peer, refusal, &mount.name).await;
                return;
            }
            Serve::Join { icy } => {
                // `Join` comes only after `Authenticate` admitted the listener.
                if let Some(admitted) = admitted {
                    let metaint = icy.then_some(ctx.config().metaint_for(&mount.name));
                    join(ctx, stream, head, peer, slot, mount, metaint, admitted).await;
                }
                return;
            }
        }
    }
}

/// Logs the answer of `len` bytes (status `status`) to `head` from `peer`, by `user`, in the
/// access log: a request answered at once, with no listener counted.
fn log_answer(
    ctx: &ServerCtx,
    head: &RequestHead,
    peer: SocketAddr,
    user: Option<&str>,
    status: u16,
    len: usize,
) {
    ctx.access_log.log(&AccessEntry {
        ip: peer.ip(),
        user,
        request_line: &head.request_line(),
        status,
        bytes: len as u64,
        referer: head.header("referer"),
        agent: head.header("user-agent"),
        duration_secs: 0,
        end: None,
    });
}

/// Hands the listener admitted as `admitted` over to a fan-out shard on `mount`, whose slot it
/// holds: the response head (`metaint`: the ICY metadata interval, bytes), the intro of the
/// requested mount, the socket (over TLS with its transmit keys, `fanout/seal.rs`), the
/// metrics and its record. A socket that cannot be taken over gives its slot back.
#[allow(clippy::too_many_arguments)]
async fn join(
    ctx: Arc<ServerCtx>,
    stream: Conn,
    head: RequestHead,
    peer: SocketAddr,
    slot: ClientSlot,
    mount: Arc<Mount>,
    metaint: Option<u32>,
    admitted: Admitted,
) {
    let Admitted {
        id,
        user,
        time_limit,
        on_close,
    } = admitted;
    let requested = head.path.clone();
    let bytes = head::response_head(&ctx, &mount, metaint);
    let intro = match ctx
        .config()
        .mount_for(&requested)
        .and_then(|m| m.intro.clone())
    {
        Some(path) => match ctx.intros.get(&path).await {
            Ok(b) => Some(b),
            Err(e) => {
                tracing::warn!(mount = %requested, "cannot read intro {}: {e}", path.display());
                None
            }
        },
        None => None,
    };
    // Over TLS the shard gets the socket and the transmit keys only (`fanout/seal.rs`).
    let (stream, tls_conn) = stream.into_parts();
    let tls = match tls_conn.map(SealState::from_rustls).transpose() {
        Ok(t) => t.map(|s| Box::new(TlsListener::new(s))),
        Err(e) => {
            tracing::warn!(%peer, "cannot take over TLS listener: {e}");
            mount.remove_listener();
            return;
        }
    };
    let std_stream = match stream.into_std() {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(%peer, "cannot take over listener socket: {e}");
            mount.remove_listener();
            return;
        }
    };
    if ctx.config().limits.listener_sndbuf > 0 {
        let _ = socket2::SockRef::from(&std_stream)
            .set_send_buffer_size(ctx.config().limits.listener_sndbuf);
    }
    let label = MountLabel::new(&mount.name);
    ctx.metrics.connects.get_or_create(&label).inc();
    ctx.metrics.listeners.get_or_create(&label).inc();
    let limit = ctx.config().listening_limit(&requested, time_limit);
    let started = Instant::now();
    let relay = crate::cluster::redirect::is_relay(&ctx.config(), &head);
    let mut info = ListenerInfo {
        id,
        path: AudiencePath::Icy,
        ip: peer.ip(),
        request_line: head.request_line(),
        agent: crate::audience::record::kept_header(head.header("user-agent")),
        referer: crate::audience::record::kept_header(head.header("referer")),
        started,
        requested_mount: requested,
        user,
        deadline: limit.map(|l| started + l),
        on_close,
        ledger: None,
    };
    info.open_in_ledger(ctx.ledger.as_ref(), relay);
    tracing::debug!(%peer, mount = %mount.name, id = info.id, "listener joined");
    ctx.fanout.join(NewListener {
        stream: std_stream,
        mount,
        head: Bytes::from(bytes),
        intro,
        metaint,
        info,
        client_slot: slot,
        tls,
        relay,
    });
}
