//! One accepted connection: read its request head (bounded in size and time), apply the access
//! filters (`filters.rs`: the client address behind trusted proxies, deny/allow files, denied
//! agents), then hand it to the source, listener, SHOUTcast metadata (`/admin.cgi`) or
//! admin/status handler, passing the client address on. Errors end here with a clear HTTP
//! status, an access-log line and a tracing line; nothing a client sends can affect another
//! client.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use throng_proto::http::{
    parse_request_head, simple_response, HeadError, RequestHead, MAX_HEAD_BYTES,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::access_log::AccessEntry;
use crate::server::ServerCtx;

/// Holds one unit of the `clients` count; released on drop unless handed to a fan-out shard
/// (which releases it when the listener goes).
#[derive(Debug)]
pub struct ClientSlot {
    ctx: Arc<ServerCtx>,
    armed: bool,
}

impl ClientSlot {
    /// Takes ownership of the unit counted at accept time.
    pub fn new(ctx: Arc<ServerCtx>) -> ClientSlot {
        ClientSlot { ctx, armed: true }
    }

    /// The count now belongs to a shard.
    pub fn hand_over(mut self) {
        self.armed = false;
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        if self.armed {
            self.ctx.clients.fetch_sub(1, Ordering::Relaxed);
            self.ctx.metrics.clients.dec();
        }
    }
}

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
    stream: &mut TcpStream,
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

/// Whether `path` is served by the admin/status HTTP stack rather than a mount.
pub fn is_admin_path(path: &str) -> bool {
    path == "/"
        || path == "/status-json.xsl"
        || path == "/metrics"
        || path == "/admin.cgi"
        || path.starts_with("/admin/")
        || path.starts_with("/api/")
}

/// Serves one connection from TCP peer `peer` (its `clients` unit was counted at accept).
pub fn handle(
    ctx: Arc<ServerCtx>,
    stream: TcpStream,
    peer: SocketAddr,
) -> impl std::future::Future<Output = ()> + Send {
    let slot = ClientSlot::new(ctx.clone());
    serve(ctx, stream, peer, Vec::new(), slot)
}

/// Serves one connection whose first bytes `already` were read by the caller (the SHOUTcast
/// port hands over HTTP requests this way), holding its `clients` unit `slot`.
pub async fn serve(
    ctx: Arc<ServerCtx>,
    mut stream: TcpStream,
    peer: SocketAddr,
    already: Vec<u8>,
    slot: ClientSlot,
) {
    let timeout = ctx.config.header_timeout();
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
                "-",
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
                "-",
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
                "-",
                400,
                &[],
                "Malformed request\n",
            )
            .await;
            return;
        }
    };
    // Boxed: the state after the head is not part of every waiting connection's.
    Box::pin(dispatch(ctx, stream, peer, head, head_len, buf, slot)).await;
}

/// Applies the access filters to a request whose head was read, then runs its handler.
async fn dispatch(
    ctx: Arc<ServerCtx>,
    mut stream: TcpStream,
    peer: SocketAddr,
    head: RequestHead,
    head_len: usize,
    buf: Vec<u8>,
    slot: ClientSlot,
) {
    let _ = stream.set_nodelay(true);
    // From here on `peer` is the client: the X-Forwarded-For address behind a trusted proxy.
    let peer = ctx.filters.client_addr(peer, &head);
    if let Err(why) = ctx.filters.admit(peer.ip(), &head) {
        tracing::info!(%peer, "request refused: {why}");
        drop(buf);
        // Boxed, as the branches below: the refusal's state is not part of every request's.
        Box::pin(forbid(&ctx, &mut stream, peer, &head)).await;
        return;
    }
    match head.method.as_str() {
        // The admin JSON API also takes PUT and DELETE; no source can use an `/api/` mount.
        "PUT" | "DELETE" if head.path.starts_with("/api/") => {
            Box::pin(crate::admin::serve(ctx, stream, buf, peer)).await;
        }
        "SOURCE" | "PUT" => {
            let body = buf[head_len..].to_vec();
            drop(buf);
            // Boxed: each branch's state lives on the heap only while it runs, so a connection
            // task (18,000 of them at once in a reconnect storm) stays small.
            Box::pin(crate::source::handle(ctx, stream, head, body, peer)).await;
        }
        "GET" | "HEAD" if head.path == "/admin.cgi" => {
            drop(buf);
            Box::pin(crate::admin_cgi::handle(ctx, stream, head, peer)).await;
        }
        "GET" | "HEAD" | "POST" if is_admin_path(&head.path) => {
            Box::pin(crate::admin::serve(ctx, stream, buf, peer)).await;
        }
        "OPTIONS" => {
            // CORS preflight for browser players (Icecast 2.4.4 cannot answer it; KH can).
            let mut headers: Vec<(&str, &str)> = throng_proto::listener_head::CORS_HEADERS.to_vec();
            headers.push(("Allow", crate::source::ALLOW));
            let line = head.request_line();
            drop((head, buf));
            let _ = Box::pin(reply(&ctx, &mut stream, peer, &line, 204, &headers, "")).await;
        }
        "GET" | "HEAD" => {
            drop(buf);
            Box::pin(crate::listener::handle(ctx, stream, head, peer, slot)).await;
        }
        _ => {
            tracing::info!(%peer, method = %head.method, "unsupported method");
            let line = head.request_line();
            drop((head, buf));
            let allow = [("Allow", crate::source::ALLOW)];
            let body = "Method not supported\n";
            let _ = Box::pin(reply(&ctx, &mut stream, peer, &line, 405, &allow, body)).await;
        }
    }
}

/// Answers a request refused by the access filters: `403 Forbidden`, logged with its agent and
/// referer (so a denied agent shows in the access log), then closes the connection.
async fn forbid(ctx: &ServerCtx, stream: &mut TcpStream, peer: SocketAddr, head: &RequestHead) {
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
    });
    if stream.write_all(&bytes).await.is_ok() {
        let _ = stream.shutdown().await;
    }
}

/// Answers a connection over the `clients` limit with 503 and closes it.
pub async fn refuse_full(ctx: Arc<ServerCtx>, mut stream: TcpStream, peer: SocketAddr) {
    let _slot = ClientSlot::new(ctx.clone());
    tracing::warn!(%peer, limit = ctx.max_clients, "client limit reached");
    let _ = reply(
        &ctx,
        &mut stream,
        peer,
        "-",
        503,
        &[],
        "Client limit reached\n",
    )
    .await;
}

/// Writes a small complete response, logs it, and shuts the connection down.
///
/// Errors: the I/O error of writing the response or shutting the socket down (the client left).
pub async fn reply(
    ctx: &ServerCtx,
    stream: &mut TcpStream,
    peer: SocketAddr,
    request_line: &str,
    status: u16,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<()> {
    let bytes = simple_response(status, headers, body);
    if status >= 400 {
        ctx.metrics.rejected.inc();
    }
    ctx.access_log.log(&AccessEntry {
        ip: peer.ip(),
        user: None,
        request_line,
        status,
        bytes: bytes.len() as u64,
        referer: None,
        agent: None,
        duration_secs: 0,
    });
    stream.write_all(&bytes).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    #[test]
    fn connection_task_stays_small() {
        // A reconnect storm holds one such task per connection at once: keep it well under the
        // 1 KiB per listener budget (the branch futures are boxed and freed after use).
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let c = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (s, peer) = l.accept().await.unwrap();
            let ctx = crate::server::Server::bind(test_config())
                .await
                .unwrap()
                .ctx();
            let fut = super::handle(ctx, s, peer);
            let n = std::mem::size_of_val(&fut);
            assert!(n <= 768, "connection future is {n} bytes");
            drop(c);
        });
    }

    fn test_config() -> crate::Config {
        let mut c = crate::Config::from_toml(
            "listen = [\"127.0.0.1:0\"]\nworkers = 1\n[logging]\naccess-log = \"\"",
        )
        .unwrap();
        c.generate_missing_passwords();
        c
    }
}
