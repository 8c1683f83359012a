//! Source clients: `SOURCE` (libshout, legacy) and `PUT` (ffmpeg's `icecast://`), as Icecast
//! 2.4.4 `connection.c:connection_complete_source` and `source.c` handle them.
//!
//! Checks in order: Basic auth (user `source`, or the mount's user, or the mount's URL
//! `stream-auth` callback instead when configured; a request without
//! credentials, such as libshout's first "poke", gets a clean 401 with `Allow`), Content-Type
//! (required for PUT), mount in use and the `sources` limit (both 403). Then
//! `HTTP/1.0 200 OK\r\n\r\n` exactly (after `100 Continue` when asked), and the body is the stream
//! until the client closes or stays silent for source-timeout; why it ended is logged as a
//! [`StreamEnd`] (whose doing it was, and whether it is retryable).
//!
//! Everything after authentication ([`run`]) is shared with SHOUTcast v1 sources
//! (`shoutcast.rs`), whose login is answered before their headers arrive.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crate::net::conn::Conn;
use throng_proto::auth::{parse_basic, secrets_equal};
use throng_proto::format::Format;
use throng_proto::http::RequestHead;
use throng_proto::source_info::SourceInfo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::auth::throttle::LoginKind;
use crate::auth::SourceAuth;
use crate::ctx::ServerCtx;
use crate::ingest::live_mount::LiveMount;
use crate::ingest::rate_limit::RateLimit;
use crate::mount::feeder::Feeder;
use crate::mount::freeze::{FrozenFeed, SourceClientState};
use crate::mount::live::{Announcement, Mount, SourceKind};
use crate::mount::registry::ReserveError;
use crate::mount::stream_end::{Peer, StreamEnd};
use crate::observe::access_log::AccessEntry;
use crate::respond::reply;
use crate::respond::{ALLOW, REALM};

/// Read buffer for a source's stream, in bytes.
pub const SOURCE_READ_BYTES: usize = 16 * 1024;

/// How often a source waiting for data checks whether it was asked to stop (admin
/// `killsource`) or has been silent for source-timeout.
pub const STOP_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// The 401 a source gets without valid credentials (Icecast 2.4.4's realm), clean enough for
/// libshout's unauthenticated poke to read `Allow` and retry with credentials.
const AUTH_HEADERS: &[(&str, &str)] = &[
    ("WWW-Authenticate", REALM),
    ("Allow", ALLOW),
    ("Content-Type", "text/plain"),
];

/// Whether a source may use `name`: it is canonical ([`throng_proto::mount_name::check`]: it
/// starts with `/`, with no empty or dot segment, no backslash and no control character, as
/// Icecast 2.4.4 `util_normalise_uri` requires), and is not a path served by the admin/status
/// routes (listeners could never reach such a mount).
pub fn valid_mount_name(name: &str) -> bool {
    throng_proto::mount_name::is_canonical(name) && !crate::respond::is_admin_path(name)
}

/// The source user and password of `name` if the request's Basic credentials match them
/// (`None`, logged, otherwise).
fn check_password(
    ctx: &ServerCtx,
    head: &RequestHead,
    peer: SocketAddr,
    name: &str,
) -> Option<(String, String)> {
    let Some((user, pass)) = ctx.config().source_credentials(name) else {
        tracing::warn!(%peer, mount = %name, "source rejected: no source password configured");
        return None;
    };
    let credentials = head.header("authorization").and_then(parse_basic);
    let accepted = credentials
        .as_ref()
        .is_some_and(|c| c.user == user && secrets_equal(&c.password, &pass));
    if accepted {
        return Some((user, pass));
    }
    if credentials.is_some() {
        tracing::info!(%peer, mount = %name, "source rejected: wrong credentials");
    } else {
        tracing::info!(%peer, mount = %name, "source without credentials (probe?): 401");
    }
    None
}

/// How a source client logged in, which decides how it is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceProtocol {
    /// `SOURCE` or `PUT`: refusals are HTTP statuses, success is `HTTP/1.0 200 OK\r\n\r\n`.
    Http,
    /// SHOUTcast v1: the login was already answered `OK2`; a later refusal just closes the
    /// connection (logged), as Icecast 2.4.4 does.
    Shoutcast,
}

/// Serves a source client; returns when its stream ends.
pub async fn handle(
    ctx: Arc<ServerCtx>,
    mut stream: Conn,
    head: RequestHead,
    body: Vec<u8>,
    peer: SocketAddr,
) {
    let name = head.path.clone();
    if !valid_mount_name(&name) {
        let _ = reply(
            &ctx,
            &mut stream,
            peer,
            Some(&head),
            400,
            &[],
            "Invalid mountpoint\n",
        )
        .await;
        return;
    }
    let sent = head.header("authorization").and_then(parse_basic);
    if head.header("authorization").is_some() {
        if let Err(wait) = ctx.auth().login_blocked(peer.ip()) {
            let retry = wait.as_secs().max(1).to_string();
            let headers = [
                ("Retry-After", retry.as_str()),
                ("Content-Type", "text/plain"),
            ];
            let body = crate::auth::THROTTLED_MESSAGE;
            let _ = reply(&ctx, &mut stream, peer, Some(&head), 429, &headers, body).await;
            return;
        }
    }
    let checked = match ctx.auth().authorize_source(&head, peer, &name, false).await {
        SourceAuth::Unconfigured => check_password(&ctx, &head, peer, &name),
        SourceAuth::Accepted { user, pass } => Some((user, pass)),
        SourceAuth::Refused => None,
    };
    let Some((user, pass)) = checked else {
        if head.header("authorization").is_some() {
            let user = sent.as_ref().map(|c| c.user.as_str());
            ctx.auth()
                .login_failed(peer.ip(), LoginKind::Source, user, Some(&name));
        }
        let body = "Authentication required\n";
        let _ = reply(
            &ctx,
            &mut stream,
            peer,
            Some(&head),
            401,
            AUTH_HEADERS,
            body,
        )
        .await;
        return;
    };
    run(
        ctx,
        stream,
        head,
        body,
        peer,
        (user, pass),
        SourceProtocol::Http,
    )
    .await;
}

/// Refuses an authenticated source with `status` and `message`: an HTTP reply, or for a
/// SHOUTcast source (already answered `OK2`) an access-log line and a close.
async fn refuse(
    ctx: &ServerCtx,
    stream: &mut Conn,
    peer: SocketAddr,
    head: &RequestHead,
    protocol: SourceProtocol,
    status: u16,
    message: &str,
) {
    match protocol {
        SourceProtocol::Http => {
            let _ = reply(ctx, stream, peer, Some(head), status, &[], message).await;
        }
        SourceProtocol::Shoutcast => {
            ctx.metrics.rejected.inc();
            ctx.access_log.log(&AccessEntry {
                ip: peer.ip(),
                user: Some("source"),
                request_line: &head.request_line(),
                status,
                bytes: 0,
                referer: head.header("referer"),
                agent: head.header("user-agent"),
                duration_secs: 0,
                end: None,
            });
            let _ = stream.shutdown().await;
        }
    }
}

/// Runs an authenticated source client: checks its Content-Type, reserves mount `head.path`
/// (refused with 403 when in use or at the `sources` limit), answers it as `protocol` wants,
/// then feeds the mount from `body` (bytes read with the head) and the rest of the stream until
/// it ends. `credentials` are the source user and password that metadata updates will accept.
pub async fn run(
    ctx: Arc<ServerCtx>,
    mut stream: Conn,
    head: RequestHead,
    body: Vec<u8>,
    peer: SocketAddr,
    credentials: (String, String),
    protocol: SourceProtocol,
) {
    let line = head.request_line();
    let name = head.path.clone();
    let (user, pass) = credentials;
    let content_type = match head.header("content-type") {
        Some(ct) => ct.to_owned(),
        None if head.method == "PUT" => {
            let msg = "No Content-type given\n";
            refuse(&ctx, &mut stream, peer, &head, protocol, 403, msg).await;
            return;
        }
        // Icecast 2.4.4 accepts a SOURCE without Content-Type as MP3 (deprecated).
        None => "audio/mpeg".to_owned(),
    };
    let format = Format::from_content_type(&content_type);
    let config = ctx.config();
    // The `[[mount]]` overrides are applied by `Mount::configured` (and again at reloads).
    let info = SourceInfo::from_headers(&head.headers);
    let limits = &config.limits;
    let (mount, writer) = Mount::configured(
        &config,
        &name,
        Announcement {
            format,
            content_type,
            info,
            credentials: (user, pass),
            source_ip: Some(peer.ip()),
            kind: SourceKind::Client,
            force_hidden: false,
        },
    );
    let live = match LiveMount::reserve(ctx.clone(), mount.clone(), limits.sources) {
        Ok(live) => live,
        Err(e @ ReserveError::InUse) | Err(e @ ReserveError::TooManySources) => {
            tracing::warn!(%peer, mount = %name, "source rejected: {e}");
            let msg = match e {
                ReserveError::InUse => "Mountpoint in use\n",
                ReserveError::TooManySources => "too many sources connected\n",
            };
            refuse(&ctx, &mut stream, peer, &head, protocol, 403, msg).await;
            return;
        }
    };
    // Liquidsoap depends on exactly this reply (savonet/liquidsoap#792).
    let mut answer: Vec<u8> = Vec::new();
    if protocol == SourceProtocol::Http
        && head
            .header("expect")
            .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
    {
        answer.extend_from_slice(b"HTTP/1.1 100 Continue\r\nContent-Length: 0\r\n\r\n");
    }
    if protocol == SourceProtocol::Http {
        answer.extend_from_slice(b"HTTP/1.0 200 OK\r\n\r\n");
    }
    if !answer.is_empty() && stream.write_all(&answer).await.is_err() {
        return;
    }
    ctx.metrics.source_connects.inc();
    tracing::info!(%peer, mount = %name, format = ?format, ?protocol, "source connected");
    let icy_metaint = head
        .header("icy-metaint")
        .and_then(|v| v.trim().parse::<usize>().ok());
    let feeder = Feeder::new(mount.clone(), writer, icy_metaint, ctx.metrics.clone());
    let session = SourceClientState {
        peer,
        request_line: line,
        agent: head.header("user-agent").map(str::to_owned),
        referer: head.header("referer").map(str::to_owned),
        connected_ms: 0,
    };
    feed(ctx, stream, mount, feeder, live, &body, session).await;
}

/// Goes on feeding a mount from a source client's connection carried across a binary upgrade
/// (`upgrade/`): `feeder` already holds the bytes the old process had not framed.
pub async fn resume(
    ctx: Arc<ServerCtx>,
    stream: std::net::TcpStream,
    mount: Arc<Mount>,
    feeder: Feeder,
    live: LiveMount,
    session: SourceClientState,
) {
    let stream = match stream
        .set_nonblocking(true)
        .and_then(|()| tokio::net::TcpStream::from_std(stream).map(Conn::from))
    {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(mount = %mount.name, "cannot resume the source: {e}");
            return;
        }
    };
    feed(ctx, stream, mount, feeder, live, &[], session).await;
}

/// Feeds the mount until the source ends, then logs why and writes its access-log line; or,
/// when a binary upgrade asks for it, hands the connection and the unframed bytes over.
async fn feed(
    ctx: Arc<ServerCtx>,
    mut stream: Conn,
    mount: Arc<Mount>,
    mut feeder: Feeder,
    live: LiveMount,
    first: &[u8],
    session: SourceClientState,
) {
    let started = Instant::now() - std::time::Duration::from_millis(session.connected_ms);
    let peer = session.peer;
    let name = mount.name.clone();
    let end = ingest(&ctx, &mut stream, &mount, &mut feeder, first).await;
    if matches!(end, StreamEnd::HandedOver) {
        let (leftover, demux) = feeder.freeze();
        let socket = stream
            .into_std()
            .map(std::os::fd::OwnedFd::from)
            .map_err(|e| tracing::warn!(%peer, mount = %name, "cannot hand the source over: {e}"))
            .ok();
        let handed = mount.handover.answer(FrozenFeed {
            socket,
            leftover,
            demux,
            client: Some(SourceClientState {
                connected_ms: started.elapsed().as_millis() as u64,
                ..session
            }),
        });
        drop(live);
        if handed {
            tracing::info!(%peer, mount = %name, "source handed over to the upgraded server");
        }
        return;
    }
    feeder.finish(); // publishes the last frames and marks the feed ended
    drop(live);
    let received = mount.source_bytes.load(Ordering::Relaxed);
    tracing::info!(
        %peer,
        mount = %name,
        received,
        by = ?end.by(),
        retryable = end.retryable(),
        "source ended: {end}"
    );
    ctx.access_log.log(&AccessEntry {
        ip: peer.ip(),
        user: Some("source"),
        request_line: &session.request_line,
        status: 200,
        bytes: received,
        referer: session.referer.as_deref(),
        agent: session.agent.as_deref(),
        duration_secs: started.elapsed().as_secs(),
        end: None,
    });
}

/// Reads the stream until it ends; returns why it ended.
async fn ingest(
    ctx: &ServerCtx,
    stream: &mut Conn,
    mount: &Mount,
    feeder: &mut Feeder,
    first: &[u8],
) -> StreamEnd {
    if !first.is_empty() {
        if let Err(e) = feeder.push(first) {
            return StreamEnd::BadStream(Peer::Client, e);
        }
    }
    let mut buf = vec![0u8; SOURCE_READ_BYTES];
    let mut shutdown = ctx.shutdown.clone();
    let timeout = ctx.config().source_timeout();
    let mut last_data = Instant::now();
    let started = last_data;
    let mut limit = ctx
        .config()
        .mount_for(&mount.name)
        .and_then(|c| c.limit_rate)
        .and_then(RateLimit::new);
    loop {
        if mount.stop.load(Ordering::Relaxed) {
            return StreamEnd::Killed;
        }
        if mount.handover.is_requested() {
            return StreamEnd::HandedOver;
        }
        // Over `limit-rate`: wait before reading on, a stop poll at a time (a kill or a
        // shutdown still ends the source promptly); the wait is not silence.
        if let Some(wait) = limit.as_ref().map(|l| l.wait(started.elapsed())) {
            if !wait.is_zero() {
                tokio::time::sleep(wait.min(STOP_POLL)).await;
                last_data = Instant::now();
                continue;
            }
        }
        // Reading is cancel-safe: waking every STOP_POLL to look at `mount.stop` loses nothing,
        // and a silent source is stopped as promptly as a busy one.
        let read = tokio::select! {
            r = stream.read(&mut buf) => r,
            _ = tokio::time::sleep(STOP_POLL) => {
                if last_data.elapsed() >= timeout {
                    return StreamEnd::Silent { peer: Peer::Client, timeout };
                }
                continue;
            }
            _ = shutdown.changed() => return StreamEnd::Shutdown,
            _ = mount.handover.requested() => return StreamEnd::HandedOver,
        };
        match read {
            Ok(0) => return StreamEnd::Closed(Peer::Client),
            Ok(n) => {
                last_data = Instant::now();
                if let Err(e) = feeder.push(&buf[..n]) {
                    return StreamEnd::BadStream(Peer::Client, e);
                }
                if let Some(l) = &mut limit {
                    l.record(n);
                }
            }
            Err(e) => return StreamEnd::ReadFailed(Peer::Client, e),
        }
    }
}
