//! The origin's redirects: a listener the origin cannot take (or any listener, with
//! `redirect = "all"`) is answered `302 Found` with `Location: <edge URL><request target>`,
//! to the registered edge with the most room that carries the mount, as Icecast-KH does for a
//! full mount with `master-redirect`. Players follow it (ffmpeg, curl -L, mpv, browsers). With
//! no such edge nothing is sent and the caller refuses or serves the listener as before.
//!
//! A draining server (`drain.rs`) sends every newcomer on with [`turn_away`], at every door.
//!
//! An edge's own relay is never redirected (it would be sent to itself): a request with the
//! Basic credentials of an edge (user `edge`, the cluster secret) or of the relay user
//! (`[authentication] relay-user`/`relay-password`) is served by the origin, so an edge's
//! `[[relay]]` sets one of them (docs/SCALING.md).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::net::conn::Conn;
use throng_proto::http::RequestHead;

use crate::cluster::{decide, drain};
use crate::ctx::ServerCtx;
use crate::respond::reply;

/// The `Location` a listener request `head` is redirected to now, when the redirect mode wants
/// one (`full`: the origin has no room for it) and an edge carrying the mount has room; the
/// edge is counted as having been sent one listener.
pub fn target(ctx: &ServerCtx, head: &RequestHead, full: bool) -> Option<String> {
    let config = ctx.config();
    let c = &config.cluster;
    if !decide::wants_redirect(c.redirect, full)
        || !matches!(head.method.as_str(), "GET" | "HEAD")
        || is_relay(&config, head)
    {
        return None;
    }
    let timeout = Duration::from_secs(c.edge_timeout);
    let edge = ctx.cluster.pick(&head.path, Instant::now(), timeout)?;
    // Reports are checked (`decide::valid_edge_url`); a header value with a control character
    // is still never written, whatever put it there (RFC 9110 section 5.5).
    Some(decide::location(&edge, &head.target)).filter(|l| !l.bytes().any(|b| b.is_ascii_control()))
}

/// Whether `head` carries the Basic credentials of an edge (user `edge`, the cluster secret) or
/// of the relay user (`[authentication] relay-user`/`relay-password`): a downstream relay,
/// never redirected, and written at every tick of its shard (`NewListener::relay`).
pub fn is_relay(config: &crate::config::Config, head: &RequestHead) -> bool {
    use throng_proto::auth::{parse_basic, secrets_equal};
    let Some(c) = head.header("authorization").and_then(parse_basic) else {
        return false;
    };
    let edge = config.cluster.secret.as_deref().filter(|s| !s.is_empty());
    let relay = config.authentication.relay_password.as_deref();
    (c.user == "edge" && edge.is_some_and(|s| secrets_equal(&c.password, s)))
        || (c.user == config.relay_user() && relay.is_some_and(|p| secrets_equal(&c.password, p)))
}

/// Answers listener request `head` from `peer` with a redirect to an edge when [`target`]
/// gives one; returns whether it did (the connection is then closed).
pub async fn answer(
    ctx: &ServerCtx,
    stream: &mut Conn,
    head: &RequestHead,
    peer: SocketAddr,
    full: bool,
) -> bool {
    let Some(location) = target(ctx, head, full) else {
        return false;
    };
    send(ctx, stream, head, peer, &location, full).await;
    true
}

/// Answers listener request `head` from `peer` with `302 Found` to `location` (a [`target`]),
/// `Content-Type: text/plain` and a one-line body, logged as [`reply`] logs; `full` (whether
/// the origin had no room for it) only goes to the tracing line. The connection is then closed.
///
/// Errors: none returned; a failed write only means the client has gone.
pub async fn send(
    ctx: &ServerCtx,
    stream: &mut Conn,
    head: &RequestHead,
    peer: SocketAddr,
    location: &str,
    full: bool,
) {
    tracing::debug!(%peer, mount = %head.path, %location, full, "listener redirected to an edge");
    let headers = [("Location", location), ("Content-Type", "text/plain")];
    let _ = reply(
        ctx,
        stream,
        peer,
        Some(head),
        302,
        &headers,
        "Moved to an edge\n",
    )
    .await;
}

/// Answers newcomer request `head` from `peer` when this server drains: a redirect with
/// `redirect_status` (`302` for a listener or an HLS player, `307` for a WHEP offer, whose
/// `POST` must be repeated as it was) to where [`drain::newcomer`] sends it, or `503` with
/// `Retry-After`; `extra` headers (CORS) go on either. Returns whether it answered (the
/// caller then stops); `false` when the server does not drain.
///
/// Errors: none returned; a failed write only means the client has gone.
pub async fn turn_away(
    ctx: &ServerCtx,
    stream: &mut Conn,
    head: &RequestHead,
    peer: std::net::SocketAddr,
    redirect_status: u16,
    extra: &[(&str, &str)],
) -> bool {
    if !ctx.drain.is_draining() {
        return false;
    }
    let config = ctx.config();
    let c = &config.cluster;
    let edge = || {
        let timeout = Duration::from_secs(c.edge_timeout);
        ctx.cluster.pick(&head.path, Instant::now(), timeout)
    };
    let decision = drain::newcomer(true, c.origin.as_deref(), edge, &head.target);
    let mut headers: Vec<(&str, &str)> = extra.to_vec();
    match &decision {
        drain::Newcomer::Redirect(location) => {
            tracing::debug!(%peer, mount = %head.path, %location, "newcomer of a draining server sent on");
            headers.push(("Location", location));
            headers.push(("Content-Type", "text/plain"));
            let _ = reply(
                ctx,
                stream,
                peer,
                Some(head),
                redirect_status,
                &headers,
                "This server is draining: moved\n",
            )
            .await;
        }
        drain::Newcomer::Refuse | drain::Newcomer::Admit => {
            tracing::debug!(%peer, mount = %head.path, "newcomer of a draining server refused");
            headers.push(("Retry-After", crate::respond::RETRY_AFTER_SECS));
            let _ = reply(
                ctx,
                stream,
                peer,
                Some(head),
                503,
                &headers,
                "This server is draining\n",
            )
            .await;
        }
    }
    true
}
