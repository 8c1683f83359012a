//! `GET /api/v1/events[?mount=/x]`: the now-playing event stream's request (public,
//! read-only, CORS-enabled). Checks the `mount` filter (an unknown or hidden mount gets `404`
//! with a JSON error, as the other `/api/v1` errors), builds the first bytes (head, `retry:`,
//! then the snapshot or, with a `Last-Event-ID` still in the ring, nothing: the replay follows
//! from the log) and hands the socket to an event shard
//! (`fanout/events/`), over HTTPS with its transmit keys (sealed there as audio is). `HEAD`
//! gets the head alone.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::net::conn::Conn;
use throng_proto::http::{parse_query, simple_response, RequestHead};
use tokio::io::AsyncWriteExt;

use crate::audience::{AudiencePath, ListenerInfo};
use crate::ctx::ServerCtx;
use crate::fanout::events::shard::NewSubscriber;
use crate::fanout::seal::{SealState, TlsListener};
use crate::net::clients::{ClientSlot, HeadLimits};
use crate::observe::access_log::AccessEntry;
use crate::respond::service_unavailable;

/// The path of the event stream.
pub const PATH: &str = "/api/v1/events";

/// Serves one event-stream request from `peer`, holding its `clients` unit `slot`.
pub async fn handle(
    ctx: Arc<ServerCtx>,
    mut stream: Conn,
    head: RequestHead,
    peer: SocketAddr,
    mut slot: ClientSlot,
) {
    let query = head.query.as_deref().map(parse_query).unwrap_or_default();
    let filter = query
        .iter()
        .find(|(k, _)| k == "mount")
        .map(|(_, v)| v.clone());
    if let Some(name) = &filter {
        if ctx.registry.get(name).is_none_or(|m| m.hidden()) {
            let body = serde_json::json!({ "ok": false, "message": "Mount not found" });
            let bytes = simple_response(
                404,
                &[
                    ("Content-Type", "application/json; charset=utf-8"),
                    ("Cache-Control", "no-cache"),
                    ("Access-Control-Allow-Origin", "*"),
                ],
                &body.to_string(),
            );
            ctx.metrics.rejected.inc();
            log(&ctx, &head, peer, 404, bytes.len());
            if stream.write_all(&bytes).await.is_ok() {
                let _ = stream.shutdown().await;
            }
            return;
        }
    }
    let date = httpdate::fmt_http_date(std::time::SystemTime::now());
    let response_head = throng_proto::sse::response_head(&ctx.config().server_id, &date);
    if head.method == "HEAD" {
        log(&ctx, &head, peer, 200, response_head.len());
        if stream.write_all(&response_head).await.is_ok() {
            let _ = stream.shutdown().await;
        }
        return;
    }
    // A subscriber sends nothing more: it is an idle connection, under the per-address cap of
    // idle sockets, and the first closed when a new request finds `clients` used up.
    let per_address = HeadLimits::configured(&ctx.config().limits, false).per_address;
    if let Err(why) = slot.go_idle(peer.ip(), per_address) {
        tracing::info!(%peer, "event subscriber refused: {why}");
        let _ = service_unavailable(
            &ctx,
            &mut stream,
            peer,
            Some(&head),
            "Too many connections\n",
        )
        .await;
        return;
    }
    let last_seen = throng_proto::sse::last_event_id(head.header("last-event-id"), &query);
    let (first, next) = ctx
        .events
        .first_bytes(&response_head, filter.as_deref(), last_seen);
    // The subscriber's access-log line is written when it ends (its bytes, duration and end
    // reason, as a listener's), by its event shard.
    let info = ListenerInfo {
        id: ctx.next_id(),
        path: AudiencePath::Events,
        ip: peer.ip(),
        request_line: head.request_line(),
        agent: crate::audience::record::kept_header(head.header("user-agent")),
        referer: crate::audience::record::kept_header(head.header("referer")),
        started: std::time::Instant::now(),
        requested_mount: filter.clone().unwrap_or_default(),
        user: None,
        deadline: None,
        on_close: None,
        ledger: None,
    };
    // Over TLS the event shard gets the socket and the transmit keys only (`fanout/seal.rs`).
    let (stream, tls_conn) = stream.into_parts();
    let tls = match tls_conn.map(SealState::from_rustls).transpose() {
        Ok(t) => t.map(|s| Box::new(TlsListener::new(s))),
        Err(e) => {
            tracing::warn!(%peer, "cannot take over TLS event subscriber: {e}");
            return;
        }
    };
    let Ok(std_stream) = stream.into_std() else {
        return;
    };
    let sndbuf = ctx.config().events.sndbuf;
    if sndbuf > 0 {
        let _ = socket2::SockRef::from(&std_stream).set_send_buffer_size(sndbuf);
    }
    ctx.events.subscribe(NewSubscriber {
        stream: std_stream,
        first,
        next,
        filter: filter.map(Into::into),
        info,
        client_slot: slot,
        tls,
    });
}

/// The access-log line of an event-stream request answered at once (`HEAD`, a refusal); a
/// subscriber's line is written when it ends (`fanout/events/shard.rs`).
fn log(ctx: &ServerCtx, head: &RequestHead, peer: SocketAddr, status: u16, bytes: usize) {
    ctx.access_log.log(&AccessEntry {
        ip: peer.ip(),
        user: None,
        request_line: &head.request_line(),
        status,
        bytes: bytes as u64,
        referer: head.header("referer"),
        agent: head.header("user-agent"),
        duration_secs: 0,
        end: None,
    });
}
