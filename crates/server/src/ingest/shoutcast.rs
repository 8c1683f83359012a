//! SHOUTcast v1 source clients on the port after the first listen port, enabled by
//! `shoutcast-mount`, as Icecast 2.4.4 `connection.c:_handle_shoutcast_compatible` (the
//! protocol itself is in `throng_proto::shoutcast`).
//!
//! A connection sends its password line; a good one is answered `OK2\r\nicy-caps:11\r\n\r\n`,
//! then the `icy-*` headers are read and the source runs exactly as a `SOURCE` request on the
//! mount (`source::run`): same Content-Type rules (none means MP3), mount reservation, limits,
//! feeding and metadata. The mount is `shoutcast-mount`, or the one named in a
//! `/mount:password` line (Icecast-KH); the password is that mount's source password, alone or
//! as `user:password`; a mount with a URL `stream-auth` callback is decided by the callback, as
//! for HTTP sources. A wrong password is answered `invalid password\r\n` (SHOUTcast DNAS v1;
//! Icecast 2.4.4 closes silently) and closed; libshout's `!POKE` probe gets the same answer,
//! which makes it log in for real. An HTTP request line on this port (libshout sends its ICY
//! metadata updates, `GET /admin.cgi?...`, here) is served as on the HTTP port, as Icecast-KH
//! does. The `deny-ip`/`allow-ip` files apply to the TCP peer (there is no `X-Forwarded-For`).

use std::net::SocketAddr;
use std::sync::Arc;

use throng_proto::auth::basic_authorization;
use throng_proto::http::{HeadError, RequestHead, MAX_HEAD_BYTES};
use throng_proto::shoutcast::{
    looks_like_http, parse_headers, password_line, Login, INVALID_PASSWORD_REPLY, OK_REPLY, POKE,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::auth::SourceAuth;
use crate::ctx::ServerCtx;
use crate::ingest::source::{valid_mount_name, SourceProtocol};
use crate::net::clients::ClientSlot;
use crate::observe::access_log::AccessEntry;

/// Why a SHOUTcast login did not get as far as a source.
#[derive(Debug, thiserror::Error)]
enum LoginError {
    /// The peer closed or failed before sending a complete line or header block.
    #[error("connection closed during login")]
    Closed,
    /// Nothing complete within header-timeout.
    #[error("no complete login within header-timeout")]
    Timeout,
    /// The password line or the header block is too long or malformed.
    #[error("bad login: {0}")]
    Head(HeadError),
}

/// Reads from `stream` into `buf` until `done` finds what it needs in it, within `deadline`.
async fn read_until<T>(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    deadline: tokio::time::Instant,
    mut done: impl FnMut(&[u8]) -> Result<Option<T>, HeadError>,
) -> Result<T, LoginError> {
    loop {
        if let Some(v) = done(buf).map_err(LoginError::Head)? {
            return Ok(v);
        }
        if buf.len() >= MAX_HEAD_BYTES {
            return Err(LoginError::Head(HeadError::TooLarge));
        }
        buf.reserve(1024);
        match tokio::time::timeout_at(deadline, stream.read_buf(buf)).await {
            Err(_) => return Err(LoginError::Timeout),
            Ok(Ok(0)) | Ok(Err(_)) => return Err(LoginError::Closed),
            Ok(Ok(_)) => {}
        }
    }
}

/// Most time and bytes read and discarded after refusing a login, so that closing with unread
/// input (which makes the kernel send a reset) does not destroy the refusal before the client
/// has read it.
const DRAIN: (std::time::Duration, usize) = (std::time::Duration::from_millis(500), 64 * 1024);

/// Reads and discards what the client still sends, within [`DRAIN`], until it closes.
async fn drain(stream: &mut TcpStream) {
    let mut sink = [0u8; 4096];
    let mut left = DRAIN.1;
    let _ = tokio::time::timeout(DRAIN.0, async {
        while left > 0 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    })
    .await;
}

/// The source user and password `login` is accepted with on `mount`, if it is. A mount whose
/// URL authenticator has `stream-auth` is decided by that callback alone, as for `SOURCE`/`PUT`
/// sources (the global source password must not open it through this port): it gets the
/// secret as `user:password` when it holds a colon (ocaml-cry's form), else user `source`.
/// Other mounts take their source password ([`Login::matches`]).
async fn check_login(
    ctx: &Arc<ServerCtx>,
    login: &Login,
    mount: &str,
    peer: SocketAddr,
) -> Option<(String, String)> {
    let (user, pass) = login
        .secret
        .split_once(':')
        .unwrap_or(("source", login.secret.as_str()));
    let head = RequestHead {
        method: "SOURCE".into(),
        target: mount.to_owned(),
        path: mount.to_owned(),
        query: None,
        minor_version: 0,
        ice_protocol: false,
        headers: vec![("Authorization".into(), basic_authorization(user, pass))],
    };
    match ctx.auth().authorize_source(&head, peer, mount, false).await {
        SourceAuth::Unconfigured => ctx
            .config()
            .source_credentials(mount)
            .filter(|(u, p)| login.matches(u, p)),
        SourceAuth::Accepted { user, pass } => Some((user, pass)),
        SourceAuth::Refused => None,
    }
}

/// A connection on the SHOUTcast port that turned out to speak HTTP (libshout's ICY probe, a
/// browser): handed back with the bytes already read and its admission unit, to be served as
/// any HTTP connection.
#[derive(Debug)]
pub struct HttpOnShoutcastPort {
    /// The connection.
    pub stream: TcpStream,
    /// Bytes read so far (the start of the request head).
    pub already: Vec<u8>,
    /// Its admission unit (still of the head budget).
    pub slot: ClientSlot,
}

/// Serves one connection on the SHOUTcast port, holding its admission unit `slot` (of the head
/// budget until the login is accepted, then of `clients`): a SHOUTcast
/// v1 source login and stream; or, when the first line is an HTTP request line, hands the
/// connection back ([`HttpOnShoutcastPort`]).
pub async fn handle(
    ctx: Arc<ServerCtx>,
    mut stream: TcpStream,
    peer: SocketAddr,
    slot: ClientSlot,
) -> Option<HttpOnShoutcastPort> {
    let deadline = tokio::time::Instant::now() + ctx.config().header_timeout();
    let mut buf = Vec::with_capacity(1024);
    let first = read_until(&mut stream, &mut buf, deadline, |b| {
        Ok(password_line(b).map(|(line, used)| (looks_like_http(line), used)))
    })
    .await;
    let (is_http, used) = match first {
        Ok(v) => v,
        Err(e) => {
            tracing::info!(%peer, "SHOUTcast login failed: {e}");
            return None;
        }
    };
    if is_http {
        return Some(HttpOnShoutcastPort {
            stream,
            already: buf,
            slot,
        });
    }
    if let Err(why) = ctx.filters().check_ip(peer.ip()) {
        tracing::info!(%peer, "SHOUTcast source refused: {why}");
        ctx.metrics.rejected.inc();
        return None;
    }
    let login = Login::parse(password_line(&buf).map_or(&[][..], |(l, _)| l));
    let mount = login
        .mount
        .clone()
        .unwrap_or_else(|| ctx.config().shoutcast_default_mount().to_owned());
    let line = format!("SOURCE {mount} HTTP/1.0");
    // An address blocked for failed logins is answered as a bad password, unchecked.
    let blocked = ctx.auth().login_blocked(peer.ip()).is_err();
    let credentials = if valid_mount_name(&mount) && login.secret != POKE && !blocked {
        let c = check_login(&ctx, &login, &mount, peer).await;
        if c.is_none() {
            ctx.auth().login_failed(
                peer.ip(),
                crate::auth::throttle::LoginKind::Source,
                None,
                Some(&mount),
            );
        }
        c
    } else {
        None
    };
    let Some((user, pass)) = credentials else {
        if login.secret == POKE {
            tracing::debug!(%peer, "libshout ICY probe (!POKE): answered as a bad password");
        } else {
            tracing::warn!(%peer, %mount, "SHOUTcast source rejected: invalid password");
            ctx.metrics.rejected.inc();
            ctx.access_log.log(&AccessEntry {
                ip: peer.ip(),
                user: None,
                request_line: &line,
                status: 401,
                bytes: INVALID_PASSWORD_REPLY.len() as u64,
                referer: None,
                agent: None,
                duration_secs: 0,
                end: None,
            });
        }
        let _ = stream.write_all(INVALID_PASSWORD_REPLY).await;
        let _ = stream.shutdown().await;
        drain(&mut stream).await;
        return None;
    };
    // Logged in: from the head budget to `clients`, within the reserve sources may use.
    let mut slot = slot;
    let reserved = i64::try_from(ctx.config().limits.reserved_clients).unwrap_or(i64::MAX);
    if !slot.take_client(crate::net::clients::Share::Reserved(reserved)) {
        tracing::warn!(%peer, %mount, "SHOUTcast source refused: client limit and its reserve reached");
        ctx.metrics.rejected.inc();
        return None;
    }
    buf.drain(..used);
    if stream.write_all(OK_REPLY).await.is_err() {
        return None;
    }
    let (headers, len) = match read_until(&mut stream, &mut buf, deadline, parse_headers).await {
        Ok(h) => h,
        Err(e) => {
            tracing::info!(%peer, %mount, "SHOUTcast source gave no headers: {e}");
            return None;
        }
    };
    let body = buf.split_off(len);
    drop(buf);
    let head = RequestHead {
        method: "SOURCE".into(),
        target: mount.clone(),
        path: mount,
        query: None,
        minor_version: 0,
        ice_protocol: false,
        headers,
    };
    let _ = stream.set_nodelay(true);
    crate::ingest::source::run(
        ctx,
        stream.into(),
        head,
        body,
        peer,
        (user, pass),
        SourceProtocol::Shoutcast,
    )
    .await;
    drop(slot);
    None
}
