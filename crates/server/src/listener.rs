//! A listener's request (`GET` or `HEAD` on a mount): checks, the Icecast response head, then
//! hand-over of the socket to a fan-out shard. From here on the listener costs a slab slot and a
//! cursor in its shard, and nothing else.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use throng_proto::http::RequestHead;
use throng_proto::listener_head::ListenerHead;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::access_log::AccessEntry;
use crate::connection::{reply, ClientSlot};
use crate::metrics::MountLabel;
use crate::mount::Mount;
use crate::server::ServerCtx;
use crate::shard::{ListenerInfo, NewListener};

/// Whether the request asks for ICY metadata (`Icy-MetaData` with a non-zero value).
pub fn wants_icy(head: &RequestHead) -> bool {
    head.header("icy-metadata")
        .is_some_and(|v| v.trim().parse::<i64>().is_ok_and(|n| n != 0))
}

/// Builds the response head for a listener of `mount`.
pub fn response_head(ctx: &ServerCtx, mount: &Mount, metaint: Option<u32>) -> Vec<u8> {
    let date = httpdate::fmt_http_date(std::time::SystemTime::now());
    ListenerHead {
        server_id: &ctx.config.server_id,
        date: &date,
        content_type: &mount.settings.content_type,
        stream_headers: mount.settings.stream_headers.clone(),
        metaint: metaint.map(|m| m as usize),
        extra_headers: &[],
    }
    .to_bytes()
}

/// Serves `GET`/`HEAD` for a mount.
pub async fn handle(
    ctx: Arc<ServerCtx>,
    mut stream: TcpStream,
    head: RequestHead,
    peer: SocketAddr,
    slot: ClientSlot,
) {
    let line = head.request_line();
    let Some(mount) = ctx.registry.get(&head.path) else {
        tracing::debug!(%peer, path = %head.path, "no such mount");
        let _ = reply(
            &ctx,
            &mut stream,
            peer,
            &line,
            404,
            &[("Content-Type", "text/plain")],
            "The file you requested could not be found\n",
        )
        .await;
        return;
    };
    let metaint = (wants_icy(&head) && mount.settings.format.supports_icy_metadata())
        .then_some(ctx.config.limits.metaint as u32);
    let bytes = response_head(&ctx, &mount, metaint);
    if head.method == "HEAD" {
        ctx.access_log.log(&AccessEntry {
            ip: peer.ip(),
            user: None,
            request_line: &line,
            status: 200,
            bytes: bytes.len() as u64,
            referer: head.header("referer"),
            agent: head.header("user-agent"),
            duration_secs: 0,
        });
        let _ = stream.write_all(&bytes).await;
        let _ = stream.shutdown().await;
        return;
    }
    if !mount.try_add_listener() {
        tracing::info!(%peer, mount = %mount.name, "max listeners reached");
        let _ = reply(
            &ctx,
            &mut stream,
            peer,
            &line,
            403,
            &[],
            "max listeners reached\n",
        )
        .await;
        return;
    }
    let std_stream = match stream.into_std() {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(%peer, "cannot take over listener socket: {e}");
            mount.remove_listener();
            return;
        }
    };
    if ctx.config.limits.listener_sndbuf > 0 {
        let _ = socket2::SockRef::from(&std_stream)
            .set_send_buffer_size(ctx.config.limits.listener_sndbuf);
    }
    let label = MountLabel::new(&mount.name);
    ctx.metrics.connects.get_or_create(&label).inc();
    ctx.metrics.listeners.get_or_create(&label).inc();
    let info = ListenerInfo {
        id: ctx.next_id(),
        ip: peer.ip(),
        request_line: line,
        agent: head.header("user-agent").map(str::to_owned),
        referer: head.header("referer").map(str::to_owned),
        started: Instant::now(),
    };
    tracing::debug!(%peer, mount = %mount.name, id = info.id, "listener joined");
    slot.hand_over();
    ctx.fanout.join(NewListener {
        stream: std_stream,
        mount,
        head: Bytes::from(bytes),
        metaint,
        info,
    });
}
