//! One accepted connection: read its request head (bounded in size and time, holding a unit of
//! the head budget, not of `clients`), apply the access filters (`net/filters.rs`: the client
//! address behind trusted proxies, deny/allow files, denied agents), take its `clients` slot
//! (a listener within `clients`, an admin request or a source login within the reserve above
//! it; `503` with `Retry-After` when there is none), then hand it to the source, listener,
//! SHOUTcast metadata (`/admin.cgi`) or admin/status handler, passing the client address on.
//! A connection from a load balancer of `paths.proxy-protocol-from` first has its PROXY header
//! read (`net/proxy.rs`): the client it names is the peer from then on.
//! Errors end here with a clear HTTP status, an access-log line and a tracing line; nothing a
//! client sends can affect another client.

use std::net::SocketAddr;
use std::sync::Arc;

use throng_proto::http::{
    parse_request_head, simple_response, HeadError, RequestHead, MAX_HEAD_BYTES,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::net::conn::Conn;

use crate::ctx::ServerCtx;
use crate::net::clients::{ClientSlot, HeadLimits, HeadRefused, Share};
use crate::observe::access_log::AccessEntry;
use crate::respond::{is_admin_path, reply, service_unavailable, ALLOW};

/// Why no request head could be read.
#[derive(Debug)]
enum ReadHeadError {
    Head(HeadError),
    Timeout,
    Closed,
    Io(std::io::Error),
}

/// Reads a request head, after the bytes `buf` already read, within `timeout` (the caller maps
/// the elapsed timeout to [`ReadHeadError::Timeout`]); returns it, its length, and every byte
/// read (head plus any body bytes that came with it). The buffer lives only in this future,
/// which stays small: a reconnect storm holds one per connection.
#[allow(clippy::type_complexity)]
fn read_head(
    stream: &mut Conn,
    timeout: std::time::Duration,
    mut buf: Vec<u8>,
) -> tokio::time::Timeout<
    impl std::future::Future<Output = Result<(RequestHead, usize, Vec<u8>), ReadHeadError>> + '_,
> {
    tokio::time::timeout(timeout, async move {
        loop {
            if !buf.is_empty() {
                match parse_request_head(&buf) {
                    Ok(Some((head, len))) => return Ok((head, len, buf)),
                    Ok(None) => {}
                    Err(e) => return Err(ReadHeadError::Head(e)),
                }
            }
            if buf.len() >= MAX_HEAD_BYTES {
                return Err(ReadHeadError::Head(HeadError::TooLarge));
            }
            buf.reserve(1024);
            let n = stream.read_buf(&mut buf).await.map_err(ReadHeadError::Io)?;
            if n == 0 {
                return Err(ReadHeadError::Closed);
            }
        }
    })
}

/// Serves one connection from TCP peer `peer`, holding `slot` (a unit of the head budget,
/// taken at accept).
pub fn handle(
    ctx: Arc<ServerCtx>,
    stream: TcpStream,
    peer: SocketAddr,
    slot: ClientSlot,
) -> impl std::future::Future<Output = ()> + Send {
    serve(ctx, Conn::Plain(stream), peer, Vec::new(), slot)
}

/// Serves one connection on an HTTPS socket from TCP peer `peer`, holding `slot`: the TLS
/// handshake (with the certificates in force now, chosen by SNI), then the request as on the
/// HTTP port. On an `auto` socket a connection whose first byte is not a TLS handshake record
/// is served as plain HTTP. The handshake shares the request head's `header-timeout`. Its
/// ClientHello is read holding nothing; answering it (the server's computation) waits its turn
/// for a unit of the handshake budget (`TlsAcceptor::handshake_permit`) and holds it only for
/// that computation, so sockets that stall before or after it cannot starve others; a wait for
/// a turn that reaches the timeout closes the connection. A connection `on_probation` (its address is
/// over its cap of connections reading their head) must start its handshake within
/// [`crate::net::PROMPT`]: the cap is for sockets that send nothing, not for a crowd behind
/// one address reconnecting at once.
pub async fn handle_tls(
    ctx: Arc<ServerCtx>,
    stream: TcpStream,
    peer: SocketAddr,
    slot: ClientSlot,
    auto: bool,
    on_probation: bool,
) {
    let timeout = ctx.config().header_timeout();
    let deadline = tokio::time::Instant::now() + timeout;
    let first_wait = if on_probation {
        timeout.min(crate::net::PROMPT)
    } else {
        timeout
    };
    let mut first = [0u8; 1];
    match tokio::time::timeout(first_wait, stream.peek(&mut first)).await {
        Ok(Ok(1)) => {}
        Ok(_) => return,
        Err(_) => {
            tracing::debug!(%peer, "no TLS handshake within {first_wait:?}");
            return;
        }
    }
    if auto && !crate::net::tls::looks_like_tls(first[0]) {
        Box::pin(serve(ctx, Conn::Plain(stream), peer, Vec::new(), slot)).await;
        return;
    }
    let Some(config) = ctx.tls.server_config() else {
        return;
    };
    // The ClientHello is read first, holding no unit of the handshake budget: a socket that
    // stalls in it (or never sends it whole) waits on its own time, not on everyone's
    // (issue 42).
    let lazy = tokio_rustls::LazyConfigAcceptor::new(rustls::server::Acceptor::default(), stream);
    let start = match tokio::time::timeout_at(deadline, lazy).await {
        Ok(Ok(start)) => start,
        Ok(Err(e)) => {
            tracing::debug!(%peer, "TLS ClientHello unreadable: {e}");
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, "no TLS ClientHello within header-timeout");
            return;
        }
    };
    // A unit is held only while the server computes: rustls answers the ClientHello (key
    // exchange, signature, its whole first flight) within `into_stream`, synchronously.
    let Ok(permit) = tokio::time::timeout_at(deadline, ctx.tls.handshake_permit()).await else {
        log_refusal(peer, "no TLS handshake turn within header-timeout");
        return;
    };
    let handshake = start.into_stream(config);
    drop(permit);
    // The rest is I/O: the flight sent, the client's Finished awaited.
    let accepted = tokio::time::timeout_at(deadline, Box::pin(handshake)).await;
    match accepted {
        Ok(Ok(s)) => Box::pin(serve(ctx, Conn::Tls(Box::new(s)), peer, Vec::new(), slot)).await,
        Ok(Err(e)) => tracing::debug!(%peer, "TLS handshake failed: {e}"),
        Err(_) => tracing::debug!(%peer, "no TLS handshake within header-timeout"),
    }
}

/// Refuses a connection on a TLS (or `auto`) socket for a limit of the head budget (`why`)
/// before its handshake: a TLS alert (`net::tls::refuse`), never plaintext, except to a plain
/// HTTP client of an `auto` socket, which gets `503` with `Retry-After`.
pub async fn refuse_tls_head(
    ctx: Arc<ServerCtx>,
    mut stream: TcpStream,
    peer: SocketAddr,
    why: HeadRefused,
    auto: bool,
) {
    log_refusal(peer, &why.to_string());
    let first = crate::net::tls::refuse(&mut stream, auto).await;
    if first
        .first()
        .is_some_and(|&b| !crate::net::tls::looks_like_tls(b))
    {
        let mut stream = Conn::Plain(stream);
        let _ = service_unavailable(&ctx, &mut stream, peer, None, "Too many connections\n").await;
    }
}

/// Serves one connection on the SHOUTcast port (`shoutcast-mount`): a SHOUTcast v1 source, or
/// an HTTP request served as on the HTTP port.
pub async fn handle_shoutcast_port(
    ctx: Arc<ServerCtx>,
    stream: TcpStream,
    peer: SocketAddr,
    slot: ClientSlot,
) {
    if let Some(http) = crate::ingest::shoutcast::handle(ctx.clone(), stream, peer, slot).await {
        Box::pin(serve(
            ctx,
            Conn::Plain(http.stream),
            peer,
            http.already,
            http.slot,
        ))
        .await;
    }
}

/// Serves one connection whose first bytes `already` were read by the caller (the SHOUTcast
/// port hands over HTTP requests this way), holding its admission unit `slot` (of the head
/// budget, or already of `clients`).
pub async fn serve(
    ctx: Arc<ServerCtx>,
    mut stream: Conn,
    peer: SocketAddr,
    already: Vec<u8>,
    mut slot: ClientSlot,
) {
    let timeout = ctx.config().header_timeout();
    // From a load balancer of `paths.proxy-protocol-from`, the client's address comes from its
    // PROXY header (`net/proxy.rs`). Boxed: most connections never wait here. On a TLS
    // connection the header would precede the handshake: not read there (a load balancer in
    // front of a TLS socket terminates TLS itself or uses a plain or `auto` socket).
    // The header has its own short deadline (`proxy::deadline`), and the connection's unit of
    // the head budget moves from the balancer to the client it names, under the client's
    // per-address cap: a balancer carries thousands of clients.
    let (peer, already) = if already.is_empty()
        && matches!(stream, Conn::Plain(_))
        && ctx.filters().accepts_proxy_protocol(peer.ip())
    {
        let deadline = crate::net::proxy::deadline(timeout);
        let (client, already) =
            match Box::pin(crate::net::proxy::read(&mut stream, peer, deadline)).await {
                Ok(got) => got,
                Err(e) => {
                    tracing::info!(%peer, "connection from a load balancer closed: {e}");
                    return;
                }
            };
        let exempt = ctx.filters().is_trusted_proxy(client.ip());
        let limits = HeadLimits::configured(&ctx.config().limits, exempt);
        if let Err(why) = slot.move_head(client.ip(), limits) {
            // Boxed, as every refusal: its state is not part of every connection's.
            Box::pin(refuse_client(&ctx, stream, client, why)).await;
            return;
        }
        (client, already)
    } else {
        (peer, already)
    };
    let read = read_head(&mut stream, timeout, already).await;
    let (head, head_len, buf) = match read.unwrap_or(Err(ReadHeadError::Timeout)) {
        Ok(h) => h,
        Err(ReadHeadError::Closed) => return,
        Err(ReadHeadError::Io(e)) => {
            tracing::debug!(%peer, "read error before request head: {e}");
            return;
        }
        Err(ReadHeadError::Timeout) => {
            tracing::info!(%peer, "no request head within header-timeout");
            let _ = reply(
                &ctx,
                &mut stream,
                peer,
                None,
                408,
                &[],
                "Request head timed out\n",
            )
            .await;
            return;
        }
        Err(ReadHeadError::Head(HeadError::TooLarge)) => {
            tracing::info!(%peer, "request head over {MAX_HEAD_BYTES} bytes");
            let _ = reply(
                &ctx,
                &mut stream,
                peer,
                None,
                431,
                &[],
                "Request head too large\n",
            )
            .await;
            return;
        }
        Err(ReadHeadError::Head(HeadError::Malformed(why))) => {
            tracing::info!(%peer, "malformed request head: {why}");
            let _ = reply(
                &ctx,
                &mut stream,
                peer,
                None,
                400,
                &[],
                "Malformed request\n",
            )
            .await;
            return;
        }
    };
    let (mut head, mut head_len, mut buf) = (head, head_len, buf);
    crate::alias::apply(&ctx.config().paths, &mut head, &mut buf, &mut head_len);
    // Boxed: the state after the head is not part of every waiting connection's.
    Box::pin(dispatch(ctx, stream, peer, head, head_len, buf, slot)).await;
}

/// Applies the access filters to a request whose head was read, then runs its handler.
async fn dispatch(
    ctx: Arc<ServerCtx>,
    mut stream: Conn,
    peer: SocketAddr,
    head: RequestHead,
    head_len: usize,
    buf: Vec<u8>,
    mut slot: ClientSlot,
) {
    let _ = stream.set_nodelay(true);
    // From here on `peer` is the client: the X-Forwarded-For address behind a trusted proxy
    // (`via` is the connection's own peer: a keep-alive HLS connection reads each request's).
    let via = peer;
    let peer = ctx.filters().client_addr(peer, &head);
    if let Err(why) = ctx.filters().admit(peer.ip(), &head) {
        tracing::info!(%peer, "request refused: {why}");
        drop(buf);
        // Boxed, as the branches below: the refusal's state is not part of every request's.
        Box::pin(forbid(&ctx, &mut stream, peer, &head)).await;
        return;
    }
    // The request is known: move from the head budget to the `clients` count.
    if let Some(share) = share_of(&ctx, &head) {
        if !slot.take_client(share) {
            drop(buf);
            let max = ctx.clients.max();
            let reason = match share {
                Share::Listener => format!("client limit ({max}) reached"),
                Share::Reserved(r) => format!("client limit ({max}) and its reserve ({r}) reached"),
            };
            // An origin sends a listener it has no slot for to an edge with room.
            if share == Share::Listener
                && Box::pin(crate::cluster::redirect::answer(
                    &ctx,
                    &mut stream,
                    &head,
                    peer,
                    true,
                ))
                .await
            {
                return;
            }
            log_refusal(peer, &reason);
            let body = "Client limit reached\n";
            let _ = Box::pin(service_unavailable(
                &ctx,
                &mut stream,
                peer,
                Some(&head),
                body,
            ))
            .await;
            return;
        }
    }
    match head.method.as_str() {
        // The admin JSON API also takes PUT and DELETE; no source can use an `/api/` mount.
        "PUT" | "DELETE" if head.path.starts_with("/api/") => {
            Box::pin(crate::admin::serve(ctx, stream, buf, peer)).await;
        }
        "POST" | "DELETE" | "OPTIONS" if crate::whep::is_whep_path(&head.path) => {
            let body = buf[head_len..].to_vec();
            drop(buf);
            Box::pin(crate::whep::handle(ctx, stream, head, body, peer)).await;
        }
        "POST" | "DELETE" | "OPTIONS" | "PATCH" if crate::whip::is_whip_path(&head.path) => {
            let body = buf[head_len..].to_vec();
            drop(buf);
            Box::pin(crate::whip::handle(ctx, stream, head, body, peer)).await;
        }
        "SOURCE" | "PUT" => {
            let body = buf[head_len..].to_vec();
            drop(buf);
            // Boxed: each branch's state lives on the heap only while it runs, so a connection
            // task (18,000 of them at once in a reconnect storm) stays small.
            Box::pin(crate::ingest::source::handle(ctx, stream, head, body, peer)).await;
        }
        "GET" | "HEAD" if head.path == crate::event_stream::PATH => {
            drop(buf);
            Box::pin(crate::event_stream::handle(ctx, stream, head, peer, slot)).await;
        }
        "GET" | "HEAD" if head.path == "/admin.cgi" => {
            drop(buf);
            Box::pin(crate::admin::cgi::handle(ctx, stream, head, peer)).await;
        }
        "GET" | "HEAD" | "POST" if is_admin_path(&head.path) => {
            Box::pin(crate::admin::serve(ctx, stream, buf, peer)).await;
        }
        "OPTIONS" => {
            // CORS preflight for browser players (Icecast 2.4.4 cannot answer it; KH can).
            let mut headers: Vec<(&str, &str)> = throng_proto::listener_head::CORS_HEADERS.to_vec();
            headers.push(("Allow", ALLOW));
            drop(buf);
            let _ = Box::pin(reply(
                &ctx,
                &mut stream,
                peer,
                Some(&head),
                204,
                &headers,
                "",
            ))
            .await;
        }
        "GET" | "HEAD" if crate::hls_http::is_hls_path(&head.path) => {
            let rest = buf[head_len..].to_vec();
            drop(buf);
            Box::pin(crate::hls_http::handle(
                ctx, stream, head, rest, via, peer, slot,
            ))
            .await;
        }
        // A webroot file (`[paths] fileserve`), when no mount has its name.
        "GET" | "HEAD" if crate::admin::fileserve::wants(&ctx, &head.path) => {
            Box::pin(crate::admin::serve(ctx, stream, buf, peer)).await;
        }
        "GET" | "HEAD" => {
            drop(buf);
            Box::pin(crate::listener::handle(ctx, stream, head, peer, slot)).await;
        }
        _ => {
            tracing::info!(%peer, method = %head.method, "unsupported method");
            drop(buf);
            let allow = [("Allow", ALLOW)];
            let body = "Method not supported\n";
            let head = Some(&head);
            let _ = Box::pin(reply(&ctx, &mut stream, peer, head, 405, &allow, body)).await;
        }
    }
}

/// Answers a request refused by the access filters: `403 Forbidden`, logged with its agent and
/// referer (so a denied agent shows in the access log), then closes the connection.
async fn forbid(ctx: &ServerCtx, stream: &mut Conn, peer: SocketAddr, head: &RequestHead) {
    let bytes = simple_response(403, &[("Content-Type", "text/plain")], "Forbidden\n");
    ctx.metrics.rejected.inc();
    ctx.access_log.log(&AccessEntry {
        ip: peer.ip(),
        user: None,
        request_line: &head.request_line(),
        status: 403,
        bytes: bytes.len() as u64,
        referer: head.header("referer"),
        agent: head.header("user-agent"),
        duration_secs: 0,
        end: None,
    });
    if stream.write_all(&bytes).await.is_ok() {
        let _ = stream.shutdown().await;
    }
}

/// Which share of `clients` a request takes once its head is read: admin/status requests,
/// the SHOUTcast metadata update and source logins may use the reserve above `clients`
/// (`reserved-clients`), so listeners filling the server never lock out the operator or the
/// encoder; listeners take the plain share. `None` for requests answered at once (`OPTIONS`,
/// unsupported methods), which hold their head unit until they are answered.
fn share_of(ctx: &ServerCtx, head: &RequestHead) -> Option<Share> {
    let reserved =
        Share::Reserved(i64::try_from(ctx.config().limits.reserved_clients).unwrap_or(i64::MAX));
    match head.method.as_str() {
        "PUT" | "DELETE" if head.path.starts_with("/api/") => Some(reserved),
        "SOURCE" | "PUT" => Some(reserved),
        "POST" if crate::whep::is_whep_path(&head.path) => Some(Share::Listener),
        // A WHIP publisher is a source: the reserve, as `SOURCE` and `PUT`.
        "POST" if crate::whip::is_whip_path(&head.path) => Some(reserved),
        // Event-stream subscribers are many and public: listeners' share.
        "GET" | "HEAD" if head.path == crate::event_stream::PATH => Some(Share::Listener),
        "GET" | "HEAD" | "POST" if is_admin_path(&head.path) => Some(reserved),
        "GET" | "HEAD" => Some(Share::Listener),
        _ => None,
    }
}

/// Refuses a connection for a limit of the head budget (`why`; from a load balancer, its
/// client's): `503` with `Retry-After`, logged.
async fn refuse_client(ctx: &ServerCtx, mut stream: Conn, client: SocketAddr, why: HeadRefused) {
    log_refusal(client, &why.to_string());
    let _ = service_unavailable(ctx, &mut stream, client, None, "Too many connections\n").await;
}

/// Logs a connection refused for a limit: a warning at most once a second (an attacker opening
/// thousands of connections must not flood the log), a debug line otherwise.
fn log_refusal(peer: SocketAddr, reason: &str) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST_WARNED: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if LAST_WARNED.swap(now, Ordering::Relaxed) != now {
        tracing::warn!(%peer, "{reason}: answered 503 (more this second are logged at debug level)");
    } else {
        tracing::debug!(%peer, "{reason}: answered 503");
    }
}

/// Answers a connection refused a unit of the head budget (`pending-clients` or
/// `pending-per-address` reached) with 503 and `Retry-After`, and closes it.
pub async fn refuse_head(
    ctx: Arc<ServerCtx>,
    stream: TcpStream,
    peer: SocketAddr,
    why: HeadRefused,
) {
    refuse_client(&ctx, Conn::Plain(stream), peer, why).await;
}
