//! The HTTP vocabulary shared by every handler: small complete replies (logged and counted),
//! the `503` of a connection refused for a limit (with `Retry-After`), the `Allow` and
//! `WWW-Authenticate` values Icecast 2.4.4 sends, and which paths belong to the admin/status
//! stack rather than to a mount.

use std::net::SocketAddr;

use crate::net::conn::Conn;
use throng_proto::http::{simple_response, RequestHead};
use tokio::io::AsyncWriteExt;

use crate::auth::ListenerAuth;
use crate::ctx::ServerCtx;
use crate::observe::access_log::AccessEntry;

/// Methods advertised in `Allow`. PUT is accepted but not listed: libshout ≥ 2.4 switches from
/// `SOURCE` to `PUT` when `Allow` lists it, and Icecast 2.4.4 sends no `Allow`, so leaving it out
/// keeps libshout on exactly the path it takes with Icecast 2.4.4.
pub const ALLOW: &str = "GET, HEAD, OPTIONS, SOURCE";

/// `WWW-Authenticate` value of every 401, as Icecast 2.4.4 sends it.
pub const REALM: &str = "Basic realm=\"Icecast2 Server\"";

/// Seconds a client refused for a limit is asked to wait before trying again (`Retry-After` of
/// every `503`, RFC 9110 §10.2.3).
pub const RETRY_AFTER_SECS: &str = "5";

/// Most bytes of a request body any endpoint reads: the API's bodies are small JSON objects of
/// strings (`admin/api.rs`), a WHEP offer a few KiB of SDP (`whep/mod.rs`).
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// Whether `path` is served by the admin/status HTTP stack rather than a mount (`/static/…` is
/// the station page's files: no mount can be listened to under it; `/status.xsl`, Icecast's
/// HTML status page, is the station page too; `/healthz/…` are the probes of `admin/health.rs`).
pub fn is_admin_path(path: &str) -> bool {
    path == "/"
        || path == "/status.xsl"
        || path == "/status-json.xsl"
        || path == "/metrics"
        || path.starts_with("/healthz/")
        || path == "/admin.cgi"
        || path.starts_with("/admin/")
        || path.starts_with("/api/")
        || path.starts_with("/static/")
}

/// Writes a small complete response, logs it, and shuts the connection down. `request` is the
/// request answered, when its head was read: the access-log line carries its request line,
/// `User-Agent` and `Referer` (`-` for each when there is no head, e.g. a head that timed out).
///
/// Errors: the I/O error of writing the response or shutting the socket down (the client left).
pub async fn reply(
    ctx: &ServerCtx,
    stream: &mut Conn,
    peer: SocketAddr,
    request: Option<&RequestHead>,
    status: u16,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<()> {
    let bytes = simple_response(status, headers, body);
    if status >= 400 {
        ctx.metrics.rejected.inc();
    }
    let line = request.map(RequestHead::request_line);
    ctx.access_log.log(&AccessEntry {
        ip: peer.ip(),
        user: None,
        request_line: line.as_deref().unwrap_or("-"),
        status,
        bytes: bytes.len() as u64,
        referer: request.and_then(|h| h.header("referer")),
        agent: request.and_then(|h| h.header("user-agent")),
        duration_secs: 0,
        end: None,
    });
    stream.write_all(&bytes).await?;
    stream.shutdown().await
}

/// A listener request that authentication let in ([`admit_listener`]).
pub struct Admitted {
    /// Its listener id (sent to URL auth's `listener_add` as `client=`).
    pub id: u64,
    /// Authenticated user name, if any.
    pub user: Option<String>,
    /// Most time it may listen (URL auth `icecast-auth-timelimit`).
    pub time_limit: Option<std::time::Duration>,
    /// Run when it leaves (URL auth `listener_remove`).
    pub on_close: Option<crate::audience::CloseHook>,
}

/// Authorizes the listener request `head` from `peer` for mount `mount` under a fresh listener
/// id (an ICY listener, an HLS playlist, a WHEP offer; `what` names it in the log): `Some` when
/// it may listen; else the refusal is logged and answered ([`refuse_listener`], after the
/// `extra` headers) and `None` is returned.
#[allow(clippy::too_many_arguments)]
pub async fn admit_listener(
    ctx: &ServerCtx,
    stream: &mut Conn,
    peer: SocketAddr,
    head: &RequestHead,
    mount: &str,
    extra: &[(&str, &str)],
    what: &str,
) -> Option<Admitted> {
    let id = ctx.next_id();
    match ctx.auth().authorize_listener(head, peer, mount, id).await {
        ListenerAuth::Allowed {
            user,
            time_limit,
            on_close,
        } => {
            // Listener hooks run where URL auth's listener_add and listener_remove do.
            let on_close = crate::hooks::listener_attached(
                ctx,
                mount,
                crate::hooks::ListenerFacts {
                    id,
                    ip: peer.ip(),
                    agent: head.header("user-agent").map(str::to_owned),
                    user: user.clone(),
                },
                on_close,
            );
            Some(Admitted {
                id,
                user,
                time_limit,
                on_close,
            })
        }
        ListenerAuth::Refused {
            status,
            message,
            retry_after,
        } => {
            tracing::info!(%peer, mount, status, "{what} refused: {message}");
            refuse_listener(
                ctx,
                stream,
                peer,
                head,
                extra,
                status,
                &message,
                retry_after,
            )
            .await;
            None
        }
    }
}

/// Answers a listener request that authentication refused (`ListenerAuth::Refused`): `status`
/// with `message` as the body, after the `extra` headers (CORS for browser requests), plus
/// `WWW-Authenticate` (Basic, [`REALM`]) on a 401 and `Retry-After` (seconds) when given, as
/// Icecast 2.4.4 `auth.c` answers a refused listener. The same answer for ICY listeners, HLS
/// playlists and WHEP offers.
///
/// Errors: none returned; a failed write only means the client has gone.
#[allow(clippy::too_many_arguments)]
pub async fn refuse_listener(
    ctx: &ServerCtx,
    stream: &mut Conn,
    peer: SocketAddr,
    request: &RequestHead,
    extra: &[(&str, &str)],
    status: u16,
    message: &str,
    retry_after: Option<u64>,
) {
    let retry = retry_after.map(|s| s.to_string());
    let mut headers: Vec<(&str, &str)> = extra.to_vec();
    if status == 401 {
        headers.push(("WWW-Authenticate", REALM));
    }
    if let Some(r) = &retry {
        headers.push(("Retry-After", r));
    }
    let _ = reply(ctx, stream, peer, Some(request), status, &headers, message).await;
}

/// Answers a connection refused for a limit (`clients`, its reserve, or the budget of
/// connections reading their head): `503 Service Unavailable` with `Retry-After`
/// ([`RETRY_AFTER_SECS`]) and `body`, logged as [`reply`] does, then closes it.
///
/// Errors: as [`reply`].
pub async fn service_unavailable(
    ctx: &ServerCtx,
    stream: &mut Conn,
    peer: SocketAddr,
    request: Option<&RequestHead>,
    body: &str,
) -> std::io::Result<()> {
    let headers = [
        ("Content-Type", "text/plain"),
        ("Retry-After", RETRY_AFTER_SECS),
    ];
    reply(ctx, stream, peer, request, 503, &headers, body).await
}
