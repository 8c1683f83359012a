//! A listener's request (`GET` or `HEAD` on a mount): checks, the Icecast response head, then
//! hand-over of the socket to a fan-out shard. From here on the listener costs a slab slot and a
//! cursor in its shard, and nothing else. Two browser cases end here instead: Safari's probe
//! `Range: bytes=0-1` gets the 2 bytes (`206`) and is not counted as a listener, and a path
//! naming no mount but ending `.m3u` or `.xspf` gets the mount's playlist (`admin/playlist.rs`).
//! On a cluster's origin a listener may instead be redirected to an edge (`cluster/redirect.rs`):
//! every listener with `redirect = "all"`, else one refused for `max-listeners`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use crate::net::conn::Conn;
use bytes::Bytes;
use throng_proto::http::RequestHead;
use throng_proto::listener_head::{ListenerHead, PROBE_RANGE};
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

/// Whether the request asks for ICY metadata (`Icy-MetaData` with a non-zero value).
pub fn wants_icy(head: &RequestHead) -> bool {
    head.header("icy-metadata")
        .is_some_and(|v| v.trim().parse::<i64>().is_ok_and(|n| n != 0))
}

/// Builds the response head for a listener of `mount`.
pub fn response_head(ctx: &ServerCtx, mount: &Mount, metaint: Option<u32>) -> Vec<u8> {
    let date = httpdate::fmt_http_date(std::time::SystemTime::now());
    ListenerHead {
        server_id: &ctx.config().server_id,
        date: &date,
        content_type: &mount.settings.content_type,
        stream_headers: mount.settings.stream_headers.clone(),
        metaint: metaint.map(|m| m as usize),
        extra_headers: &ctx.config().http_headers_for(&mount.name),
    }
    .to_bytes()
}

/// Whether the request is Safari's probe `Range: bytes=0-1` ([`PROBE_RANGE`]).
fn is_range_probe(head: &RequestHead) -> bool {
    head.header("range")
        .is_some_and(|r| r.trim().eq_ignore_ascii_case(PROBE_RANGE))
}

/// Answers Safari's probe: the `206` head and the first 2 bytes a listener joining now would
/// get (the Ogg header pages first, if any), then closes. No listener is counted, no ICY
/// metadata is announced, and nothing of the mount changes, so the follow-up request is
/// served as any other.
async fn answer_range_probe(
    ctx: &ServerCtx,
    stream: &mut Conn,
    mount: &Mount,
    head: &RequestHead,
    peer: SocketAddr,
    user: Option<&str>,
) {
    let date = httpdate::fmt_http_date(std::time::SystemTime::now());
    let mut bytes = ListenerHead {
        server_id: &ctx.config().server_id,
        date: &date,
        content_type: &mount.settings.content_type,
        stream_headers: mount.settings.stream_headers.clone(),
        metaint: None,
        extra_headers: &ctx.config().http_headers_for(&mount.name),
    }
    .probe_bytes();
    let q = mount.queue.load();
    let (pos, headers) = q.join_point(mount.burst_size());
    let mut body: Vec<u8> = headers.map(|h| h.to_vec()).unwrap_or_default();
    if let Some(i) = q.chunk_index(pos) {
        let skip = (pos - q.chunks[i].start) as usize;
        for (n, c) in q.chunks[i..].iter().enumerate() {
            if body.len() >= 2 {
                break;
            }
            body.extend_from_slice(&c.data[if n == 0 { skip } else { 0 }..]);
        }
    }
    body.truncate(2);
    if head.method != "HEAD" {
        bytes.extend_from_slice(&body);
    }
    ctx.access_log.log(&AccessEntry {
        ip: peer.ip(),
        user,
        request_line: &head.request_line(),
        status: 206,
        bytes: bytes.len() as u64,
        referer: head.header("referer"),
        agent: head.header("user-agent"),
        duration_secs: 0,
        end: None,
    });
    tracing::debug!(%peer, mount = %mount.name, "range probe answered");
    let _ = stream.write_all(&bytes).await;
    let _ = stream.shutdown().await;
}

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

/// Serves `GET`/`HEAD` for a mount, as Icecast 2.4.4 `auth.c:add_listener_to_source`:
/// authentication on the requested mount, then the live mount or its fallback chain (an
/// on-demand relay is started and waited for), max-listeners (or `fallback-when-full`), the
/// response head, the intro, and hand-over to a fan-out shard.
pub async fn handle(
    ctx: Arc<ServerCtx>,
    mut stream: Conn,
    head: RequestHead,
    peer: SocketAddr,
    slot: ClientSlot,
) {
    let line = head.request_line();
    let requested = head.path.clone();
    if !throng_proto::mount_name::is_canonical(&requested) {
        // Never looked up: `/a/../b.mp3` is not `/b.mp3` (Icecast 2.4.4 refuses such URIs).
        tracing::debug!(%peer, path = %requested, "not a canonical mount name");
        let _ = reply(
            &ctx,
            &mut stream,
            peer,
            Some(&head),
            404,
            &[("Content-Type", "text/plain")],
            "The file you requested could not be found\n",
        )
        .await;
        return;
    }
    let live = || {
        ctx.registry
            .get(&requested)
            .filter(|m| !m.queue.load().ended)
    };
    let resolve = || ctx.registry.resolve(&requested);
    // An on-demand relay is started even when its fallback is live: Icecast 2.4.4
    // `source_find_mount` stops at a reserved on-demand relay rather than following its
    // fallback. Its fallback serves the listener only if it does not come up in time.
    let mut mount = match live() {
        None if ctx.registry.request_on_demand(&requested) => wait_for_mount(live).await,
        m => m,
    };
    if mount.is_none() {
        mount = match resolve() {
            // Nothing live along the chain, but an on-demand relay in it: start it, wait.
            None if ctx.registry.start_on_demand_fallback(&requested) => {
                wait_for_mount(resolve).await
            }
            m => m,
        };
    }
    let Some(mut mount) = mount else {
        if crate::admin::playlist::is_playlist(&requested) {
            crate::admin::playlist::serve(&ctx, &mut stream, &head, peer).await;
            return;
        }
        tracing::debug!(%peer, path = %requested, "no such mount");
        let _ = reply(
            &ctx,
            &mut stream,
            peer,
            Some(&head),
            404,
            &[("Content-Type", "text/plain")],
            "The file you requested could not be found\n",
        )
        .await;
        return;
    };
    // A pure director (`[cluster] redirect = "all"`) sends every listener to an edge.
    if crate::cluster::redirect::answer(&ctx, &mut stream, &head, peer, false).await {
        return;
    }
    let Some(Admitted {
        id,
        user,
        time_limit,
        on_close,
    }) = admit_listener(&ctx, &mut stream, peer, &head, &requested, &[], "listener").await
    else {
        return;
    };
    if is_range_probe(&head) {
        answer_range_probe(&ctx, &mut stream, &mount, &head, peer, user.as_deref()).await;
        return;
    }
    let metaint = (wants_icy(&head) && mount.settings.format.supports_icy_metadata())
        .then_some(ctx.config().limits.metaint as u32);
    if head.method == "HEAD" {
        let bytes = response_head(&ctx, &mount, metaint);
        ctx.access_log.log(&AccessEntry {
            ip: peer.ip(),
            user: user.as_deref(),
            request_line: &line,
            status: 200,
            bytes: bytes.len() as u64,
            referer: head.header("referer"),
            agent: head.header("user-agent"),
            duration_secs: 0,
            end: None,
        });
        let _ = stream.write_all(&bytes).await;
        let _ = stream.shutdown().await;
        return;
    }
    if !mount.try_add_listener() {
        let full = mount.clone();
        let next = ctx
            .config()
            .mount_for(&full.name)
            .is_some_and(|m| m.fallback_when_full)
            .then(|| {
                // The first fallback with room, as 2.4.4 walks up to 10 full mounts.
                ctx.registry
                    .live_fallbacks(&full.name, Some(full.settings.format))
                    .into_iter()
                    .find(|m| m.try_add_listener())
            })
            .flatten();
        match next {
            Some(m) => {
                tracing::debug!(%peer, from = %full.name, to = %m.name, "mount full, fallback");
                mount = m;
            }
            // An edge with room takes it (Icecast-KH `master-redirect`).
            None if crate::cluster::redirect::answer(&ctx, &mut stream, &head, peer, true)
                .await =>
            {
                return;
            }
            None => {
                tracing::info!(%peer, mount = %full.name, "max listeners reached");
                let _ = reply(
                    &ctx,
                    &mut stream,
                    peer,
                    Some(&head),
                    403,
                    &[],
                    "max listeners reached\n",
                )
                .await;
                return;
            }
        }
    }
    // The metadata interval follows the mount actually served (a fallback may be Ogg).
    let metaint = (wants_icy(&head) && mount.settings.format.supports_icy_metadata())
        .then_some(metaint.unwrap_or(ctx.config().limits.metaint as u32));
    let bytes = response_head(&ctx, &mount, metaint);
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
    let info = ListenerInfo {
        id,
        path: AudiencePath::Icy,
        ip: peer.ip(),
        request_line: line,
        agent: head.header("user-agent").map(str::to_owned),
        referer: head.header("referer").map(str::to_owned),
        started,
        requested_mount: requested,
        user,
        deadline: limit.map(|l| started + l),
        on_close,
    };
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
