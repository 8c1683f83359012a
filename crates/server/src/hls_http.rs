//! HLS over HTTP (issue 14): `/hls/<mount>/index.m3u8` and `/hls/<mount>/<seq>.mp3|.aac`, and
//! the task driving the packagers (`hls/`).
//!
//! - `GET /hls/<mount>/index.m3u8` is the URL players are given (`hls_url` in the status
//!   documents). It is a listener request: listener authentication of `<mount>` (htpasswd, URL
//!   auth) and max-listeners apply (401/403 as for an ICY listener); admitted, it opens a session
//!   and answers a master playlist naming `index.m3u8?session=<token>`, the session's media
//!   playlist. A media-playlist request with an unknown (expired) token is admitted the same
//!   way and reopens the session under that token.
//! - Media playlists: rendered once per new segment and shared by every session (the token is
//!   only in the playlist URL), `Cache-Control: max-age=1`. They advertise
//!   `EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES`: a reload carrying `_HLS_msn=M` is held until
//!   segment `M` is cut (at most three target durations, then `503`; `400` when `M` is more
//!   than two beyond the newest), RFC 8216bis section 6.2.5.2, so a player asking for the next
//!   segment gets it the moment it exists, with no reload wasted. Segments: shared by all sessions, numbered
//!   from the packager's start time so URLs are never reused, served with `Content-Length`,
//!   `Cache-Control: public, max-age=86400, immutable`, `Accept-Ranges` and `206` for a `Range`,
//!   so any cache in front (nginx, a CDN) fans them out. CORS as for streams.
//! - Connections are kept alive (HTTP/1.1 by default, HTTP/1.0 with `Connection: keep-alive`)
//!   for further HLS requests; any other request on such a connection closes it unanswered, so
//!   clients retry it on a new connection, as they do for any closed idle connection. A
//!   response is one `writev` of head and body; the read buffer is kept across requests.

use std::fmt::Write as _;
use std::io::IoSlice;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::net::clients::{ClientSlot, HeadLimits};
use crate::net::conn::Conn;
use bytes::Bytes;
use rand::distributions::{Alphanumeric, DistString};
use throng_proto::http::{parse_request_head, RequestHead, MAX_HEAD_BYTES};
use throng_proto::listener_head::CORS_HEADERS;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::audience::{AudiencePath, ListenerInfo};
use crate::ctx::ServerCtx;
use crate::hls::session::{timeout_for, Session};
use crate::hls::{Output, Window};
use crate::respond::{admit_listener, reply, Admitted};
use throng_proto::hls::playlist::{hls_msn, reload_decision, Reload};

/// Path prefix of every HLS URL.
pub const PREFIX: &str = "/hls";

/// Content-Type of playlists (RFC 8216 section 4).
pub const PLAYLIST_TYPE: &str = "application/vnd.apple.mpegurl";

/// The playlist path of mount `name` (`/live.mp3` → `/hls/live.mp3/index.m3u8`).
pub fn hls_path(name: &str) -> String {
    format!("{PREFIX}{name}/index.m3u8")
}

/// The absolute playlist URL of mount `m` (`http://host:port/hls/<mount>/index.m3u8`, on the
/// host and port of its `listenurl`) when it is served as HLS; `hls_url` in the status documents.
/// A configured mount name has a packager whatever its format, but only a format HLS can cut
/// (MP3, AAC) is announced: an Ogg mount's playlist would never get a segment.
pub fn hls_url(ctx: &ServerCtx, m: &crate::mount::live::Mount) -> Option<String> {
    ctx.hls.output(&m.name)?;
    throng_proto::hls::cutter::segment_extension(m.settings.format)?;
    let base = m.listen_url(&ctx.config().hostname, ctx.port);
    let origin = base.strip_suffix(m.name.as_str()).unwrap_or(&base);
    // Percent-encoded as any link to a mount (`href_path`): the station page and players use it
    // as it is.
    Some(format!(
        "{origin}{}",
        hls_path(&throng_proto::mount_name::href_path(&m.name))
    ))
}

/// What an HLS path names (borrowed from the path: no allocation per request).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target<'a> {
    /// `/hls/<mount>/index.m3u8`.
    Playlist(&'a str),
    /// `/hls/<mount>/<seq>.<ext>`.
    Segment(&'a str, u64, &'a str),
}

fn parse_path(path: &str) -> Option<Target<'_>> {
    let rest = path.strip_prefix(PREFIX)?;
    let (mount, file) = rest.rsplit_once('/')?;
    if mount.len() < 2 || !throng_proto::mount_name::is_canonical(mount) {
        return None;
    }
    if file == "index.m3u8" {
        return Some(Target::Playlist(mount));
    }
    let (seq, ext) = file.split_once('.')?;
    if !matches!(ext, "mp3" | "aac") || seq.is_empty() || !seq.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(Target::Segment(mount, seq.parse().ok()?, ext))
}

/// Whether `path` is an HLS URL this module serves.
pub fn is_hls_path(path: &str) -> bool {
    parse_path(path).is_some()
}

/// The `session` query parameter, when it is a plausible token (1 to 64 ASCII alphanumerics).
fn session_token(head: &RequestHead) -> Option<&str> {
    head.query.as_deref()?.split('&').find_map(|kv| {
        let t = kv.strip_prefix("session=")?;
        (!t.is_empty() && t.len() <= 64 && t.bytes().all(|b| b.is_ascii_alphanumeric()))
            .then_some(t)
    })
}

/// Starts the task that drives the packagers (every 100 ms) and expires idle sessions (every
/// 500 ms) until the server shuts down.
pub fn start(ctx: Arc<ServerCtx>) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_millis(100));
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut shutdown = ctx.shutdown.clone();
        let mut n: u64 = 0;
        loop {
            tokio::select! {
                _ = every.tick() => {}
                _ = shutdown.changed() => {}
            }
            if *shutdown.borrow() {
                break;
            }
            let now_ms = chrono::Utc::now().timestamp_millis();
            ctx.hls.tick(&ctx.registry, &ctx.config(), now_ms);
            n += 1;
            if n.is_multiple_of(5) {
                ctx.hls.sessions.expire(
                    Instant::now(),
                    &ctx.registry,
                    &ctx.metrics,
                    &ctx.access_log,
                );
            }
        }
    });
}

/// Serves HLS requests on a connection, starting with `head` (`rest`: bytes read after it),
/// while the client keeps the connection alive, holding its `clients` unit `slot`. Between two
/// requests the connection is idle (`net/clients.rs`): under the per-address cap of idle
/// sockets, and closed if a new request finding `clients` used up takes its unit.
pub async fn handle(
    ctx: Arc<ServerCtx>,
    mut stream: Conn,
    mut head: RequestHead,
    rest: Vec<u8>,
    peer: SocketAddr,
    mut slot: ClientSlot,
) {
    let mut buf = rest;
    buf.reserve(1024);
    // Read once per connection: a config reload applies to new connections.
    let timeout = ctx.config().header_timeout();
    let per_address = HeadLimits::configured(&ctx.config().limits, false).per_address;
    loop {
        let keep = serve_one(&ctx, &mut stream, &head, peer).await && keep_alive(&head);
        if !keep {
            let _ = stream.shutdown().await;
            return;
        }
        let mark = match slot.go_idle(peer.ip(), per_address) {
            Ok(mark) => mark,
            Err(why) => {
                tracing::debug!(%peer, "keep-alive connection closed: {why}");
                let _ = stream.shutdown().await;
                return;
            }
        };
        let next = tokio::time::timeout(timeout, read_head(&mut stream, &mut buf));
        let next = tokio::select! {
            next = next => next,
            () = mark.evicted() => {
                tracing::debug!(%peer, "idle keep-alive connection closed: its clients slot taken by a new client");
                return;
            }
        };
        if !slot.wake() {
            return;
        }
        match next {
            Ok(Some(h)) if matches!(h.method.as_str(), "GET" | "HEAD") && is_hls_path(&h.path) => {
                head = h;
            }
            _ => return,
        }
    }
}

/// Whether the connection stays open after answering `head`.
fn keep_alive(head: &RequestHead) -> bool {
    let has = |token: &str| {
        head.header("connection")
            .is_some_and(|c| c.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    };
    if head.minor_version == 0 {
        has("keep-alive")
    } else {
        !has("close")
    }
}

/// The CORS header lines, formatted once.
fn cors_lines() -> &'static str {
    static LINES: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    LINES.get_or_init(|| {
        CORS_HEADERS
            .iter()
            .map(|(k, v)| format!("{k}: {v}\r\n"))
            .collect()
    })
}

/// Appends the `Date` value, formatted at most once a second per thread, to `out`.
fn push_http_date(out: &mut String) {
    thread_local! {
        static DATE: std::cell::RefCell<(u64, String)> = const { std::cell::RefCell::new((0, String::new())) };
    }
    let now = std::time::SystemTime::now();
    let secs = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    DATE.with(|d| {
        let mut d = d.borrow_mut();
        if d.0 != secs || d.1.is_empty() {
            *d = (secs, httpdate::fmt_http_date(now));
        }
        out.push_str(&d.1);
    })
}

/// Reads the next request head into `buf` (which may already hold bytes of it) and removes it
/// from `buf`, leaving what follows; `None` when the peer closes or sends garbage.
async fn read_head(stream: &mut Conn, buf: &mut Vec<u8>) -> Option<RequestHead> {
    loop {
        if !buf.is_empty() {
            if let Ok(Some((head, len))) = parse_request_head(buf) {
                buf.drain(..len);
                return Some(head);
            }
            if buf.len() >= MAX_HEAD_BYTES {
                return None;
            }
        }
        if buf.capacity() - buf.len() < 512 {
            buf.reserve(1024);
        }
        if stream.read_buf(buf).await.ok()? == 0 {
            return None;
        }
    }
}

/// Answers `404` and asks to close.
async fn not_found(
    ctx: &ServerCtx,
    stream: &mut Conn,
    head: &RequestHead,
    peer: SocketAddr,
) -> bool {
    let _ = reply(
        ctx,
        stream,
        peer,
        Some(head),
        404,
        &[("Content-Type", "text/plain")],
        "The file you requested could not be found\n",
    )
    .await;
    false
}

/// Answers one request; false when the connection must close.
async fn serve_one(
    ctx: &Arc<ServerCtx>,
    stream: &mut Conn,
    head: &RequestHead,
    peer: SocketAddr,
) -> bool {
    let Some(target) = parse_path(&head.path) else {
        return not_found(ctx, stream, head, peer).await;
    };
    match target {
        Target::Segment(mount, seq, ext) => {
            let Some(seg) = ctx.hls.segment(mount, seq).filter(|s| s.ext == ext) else {
                return not_found(ctx, stream, head, peer).await;
            };
            seg.fetches
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let ctype = throng_proto::hls::cutter::segment_content_type(seg.ext);
            send_body(
                stream,
                head,
                ctype,
                "public, max-age=86400, immutable",
                &seg.data,
                true,
            )
            .await
        }
        Target::Playlist(mount) => {
            let token = session_token(head);
            // `_HLS_msn` counts only where blocking reload is offered (`[hls] blocking-reload`).
            let msn = head
                .query
                .as_deref()
                .and_then(hls_msn)
                .filter(|_| ctx.hls.blocking_reload(mount));
            if let Some(body) = token.and_then(|t| ctx.hls.moved_playlist(t, Instant::now())) {
                // A session moved to another mount (`moveclients`): a playlist of its own.
                return send_body(
                    stream,
                    head,
                    PLAYLIST_TYPE,
                    "private, max-age=1",
                    body.as_bytes(),
                    false,
                )
                .await;
            }
            if let (Some(t), None) = (token, msn) {
                // The common reload: the shared playlist, no clone of the output, and one look
                // at the sessions (touched if known).
                let Some(window) = ctx.hls.window(mount) else {
                    return not_found(ctx, stream, head, peer).await;
                };
                let sent = window.playlist.len() as u64;
                if ctx.hls.sessions.touch(t, &window, sent, Instant::now()) {
                    return send_playlist(stream, head, &window).await;
                }
            }
            let known = token.is_some_and(|t| ctx.hls.sessions.contains(t));
            let Some(out) = ctx.hls.output(mount) else {
                return not_found(ctx, stream, head, peer).await;
            };
            if !known {
                let target = out.window.load().target_secs;
                let t = token
                    .map(str::to_owned)
                    .unwrap_or_else(|| Alphanumeric.sample_string(&mut rand::thread_rng(), 24));
                if !admit(ctx, stream, head, peer, mount, &t, target).await {
                    return false;
                }
                if token.is_none() {
                    let window = out.window.load();
                    let body = throng_proto::hls::playlist::master(
                        &format!("index.m3u8?session={t}"),
                        window.bandwidth.max(8_000),
                    );
                    drop(window);
                    let sent = body.len() as u64;
                    let ok = send_body(
                        stream,
                        head,
                        PLAYLIST_TYPE,
                        "private, no-store",
                        body.as_bytes(),
                        false,
                    )
                    .await;
                    let w = out.window.load();
                    // The master playlist counts in the session's bytes, not its segments.
                    ctx.hls
                        .sessions
                        .touch(&t, &empty_like(&w), sent, Instant::now());
                    return ok;
                }
            }
            let token = token.unwrap_or_default();
            let window = match held_window(ctx, &out, msn, token).await {
                Ok(w) => w,
                Err(status) => {
                    let msg = if status == 400 {
                        "_HLS_msn is more than two segments ahead\n"
                    } else {
                        "the segment asked for was not cut in time\n"
                    };
                    let _ = reply(ctx, stream, peer, Some(head), status, &[], msg).await;
                    return false;
                }
            };
            ctx.hls
                .sessions
                .touch(token, &window, window.playlist.len() as u64, Instant::now());
            send_playlist(stream, head, &window).await
        }
    }
}

/// Sends `window`'s media playlist (shared by every session, `Cache-Control: max-age=1`);
/// false on a write error.
async fn send_playlist(stream: &mut Conn, head: &RequestHead, window: &Window) -> bool {
    send_body(
        stream,
        head,
        PLAYLIST_TYPE,
        "max-age=1",
        &window.playlist,
        false,
    )
    .await
}

/// The window to answer a media-playlist request with: the current one, or, for a blocking
/// reload (`_HLS_msn=msn`), the first one listing segment `msn`, waited for at most three
/// target durations (RFC 8216bis section 6.2.5.2). The session `token` is touched when the
/// request is held, so it stays a listener while it waits. `Err(400)` when `msn` is too far
/// ahead, `Err(503)` when the segment was not cut in time.
async fn held_window(
    ctx: &ServerCtx,
    out: &Output,
    msn: Option<u64>,
    token: &str,
) -> Result<Arc<Window>, u16> {
    let mut updates = out.updates.clone();
    let mut deadline = None;
    loop {
        // Marked seen before the window is read: a publication after the read wakes the wait.
        updates.borrow_and_update();
        let window = out.window.load_full();
        match reload_decision(msn, window.segments.last().map(|s| s.seq)) {
            Reload::Now => return Ok(window),
            Reload::BadRequest => return Err(400),
            Reload::Wait => {}
        }
        let until = *deadline.get_or_insert_with(|| {
            ctx.hls
                .sessions
                .touch(token, &empty_like(&window), 0, Instant::now());
            tokio::time::Instant::now() + Duration::from_secs(3 * window.target_secs.max(1))
        });
        match tokio::time::timeout_at(until, updates.changed()).await {
            Ok(Ok(())) => {}
            // The packager is gone (HLS turned off): answer what there is.
            Ok(Err(_)) => return Ok(out.window.load_full()),
            Err(_) => return Err(503),
        }
    }
}

/// A window with `w`'s target and no segments (touching a session without offering any).
fn empty_like(w: &crate::hls::Window) -> crate::hls::Window {
    crate::hls::Window {
        segments: Vec::new(),
        playlist: Bytes::new(),
        target_secs: w.target_secs,
        bandwidth: w.bandwidth,
        discontinuity_sequence: w.discontinuity_sequence,
    }
}

/// Admits a new session `token` on mount `name` as a listener (`listener/` rules:
/// authentication, then the mount a listener hears, then max-listeners); answers the refusal
/// and returns false when it is refused.
async fn admit(
    ctx: &Arc<ServerCtx>,
    stream: &mut Conn,
    head: &RequestHead,
    peer: SocketAddr,
    name: &str,
    token: &str,
    target_secs: u64,
) -> bool {
    let Some(Admitted {
        id,
        user,
        time_limit,
        on_close,
    }) = admit_listener(ctx, stream, peer, head, name, &[], "HLS session").await
    else {
        return false;
    };
    let Some(mount) = ctx.registry.resolve(name) else {
        let _ = reply(ctx, stream, peer, Some(head), 404, &[], "No stream live\n").await;
        return false;
    };
    if !mount.try_add_listener() {
        tracing::info!(%peer, mount = %mount.name, "max listeners reached (HLS)");
        let _ = reply(
            ctx,
            stream,
            peer,
            Some(head),
            403,
            &[],
            "max listeners reached\n",
        )
        .await;
        return false;
    }
    let limit = ctx.config().listening_limit(name, time_limit);
    let now = Instant::now();
    let info = ListenerInfo {
        id,
        path: AudiencePath::Hls,
        ip: peer.ip(),
        request_line: format!("GET {} HTTP/1.1", hls_path(name)),
        agent: crate::audience::record::kept_header(head.header("user-agent")),
        referer: crate::audience::record::kept_header(head.header("referer")),
        started: now,
        requested_mount: name.to_owned(),
        user,
        deadline: limit.map(|l| now + l),
        on_close,
        ledger: None,
    };
    let mut info = info;
    info.open_in_ledger(ctx.ledger.as_ref(), false);
    ctx.hls.sessions.open(
        token.to_owned(),
        Session {
            info,
            mount,
            last_seen: now,
            bytes: 0,
            offered: None,
            timeout: timeout_for(target_secs),
            moved: None,
        },
        &ctx.metrics,
    );
    true
}

/// A parsed `Range: bytes=...` against a body of `len` bytes: the inclusive byte range, or
/// `Err(())` when unsatisfiable; `Ok(None)` when absent or not a single byte range.
fn range_of(head: &RequestHead, len: u64) -> Result<Option<(u64, u64)>, ()> {
    let Some(spec) = head
        .header("range")
        .and_then(|r| r.trim().strip_prefix("bytes="))
    else {
        return Ok(None);
    };
    if spec.contains(',') {
        return Ok(None);
    }
    let Some((a, b)) = spec.split_once('-') else {
        return Ok(None);
    };
    let (a, b) = (a.trim(), b.trim());
    let (start, end) = match (a.parse::<u64>().ok(), b.parse::<u64>().ok()) {
        (Some(s), Some(e)) if s <= e => (s, e.min(len.saturating_sub(1))),
        (Some(s), None) if b.is_empty() => (s, len.saturating_sub(1)),
        (None, Some(n)) if a.is_empty() && n > 0 => (len.saturating_sub(n), len.saturating_sub(1)),
        _ => return Ok(None),
    };
    if len == 0 || start >= len {
        return Err(());
    }
    Ok(Some((start, end)))
}

/// Sends a `200` (or `206`/`416` for a `Range` when `ranges`) with `body`, `Content-Length`,
/// the caching policy `cache`, CORS and the connection header; false on a write error.
async fn send_body(
    stream: &mut Conn,
    head: &RequestHead,
    ctype: &str,
    cache: &str,
    body: &[u8],
    ranges: bool,
) -> bool {
    let len = body.len() as u64;
    let range = if ranges {
        range_of(head, len)
    } else {
        Ok(None)
    };
    let (status, reason, part, extra) = match range {
        Ok(None) => (200, "OK", body, None),
        Ok(Some((s, e))) => (
            206,
            "Partial Content",
            &body[s as usize..=e as usize],
            Some(format!("Content-Range: bytes {s}-{e}/{len}\r\n")),
        ),
        Err(()) => (
            416,
            "Range Not Satisfiable",
            &body[..0],
            Some(format!("Content-Range: bytes */{len}\r\n")),
        ),
    };
    let mut out = String::with_capacity(640);
    let _ = write!(
        out,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\
         Cache-Control: {cache}\r\nDate: ",
        part.len(),
    );
    push_http_date(&mut out);
    out.push_str("\r\n");
    if let Some(extra) = extra {
        out.push_str(&extra);
    }
    if ranges {
        out.push_str("Accept-Ranges: bytes\r\n");
    }
    out.push_str(cors_lines());
    out.push_str(if keep_alive(head) {
        "Connection: keep-alive\r\n\r\n"
    } else {
        "Connection: close\r\n\r\n"
    });
    let bytes = out.into_bytes();
    if head.method == "HEAD" {
        return stream.write_all(&bytes).await.is_ok();
    }
    write_both(stream, &bytes, part).await
}

/// Writes `head` then `body`, both in one `writev` when the socket takes them; false on a
/// write error.
async fn write_both(stream: &mut Conn, mut head: &[u8], mut body: &[u8]) -> bool {
    while !head.is_empty() {
        let n = match stream
            .write_vectored(&[IoSlice::new(head), IoSlice::new(body)])
            .await
        {
            Ok(0) | Err(_) => return false,
            Ok(n) => n,
        };
        let h = n.min(head.len());
        head = &head[h..];
        body = &body[n - h..];
    }
    body.is_empty() || stream.write_all(body).await.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(raw: &str) -> RequestHead {
        parse_request_head(raw.as_bytes()).unwrap().unwrap().0
    }

    #[test]
    fn paths() {
        assert_eq!(
            parse_path("/hls/live.mp3/index.m3u8"),
            Some(Target::Playlist("/live.mp3"))
        );
        assert_eq!(
            parse_path("/hls/radio/a.aac/1700000000.aac"),
            Some(Target::Segment("/radio/a.aac", 1_700_000_000, "aac"))
        );
        assert_eq!(parse_path("/hls/live.mp3/x.mp3"), None);
        assert_eq!(parse_path("/hls/live.mp3/1.ogg"), None);
        assert_eq!(parse_path("/hls/../a/index.m3u8"), None);
        assert_eq!(parse_path("/hls/index.m3u8"), None);
        assert_eq!(parse_path("/live.mp3"), None);
        assert_eq!(hls_path("/live.mp3"), "/hls/live.mp3/index.m3u8");
    }

    #[test]
    fn tokens_and_keep_alive() {
        let h = head("GET /hls/a/index.m3u8?x=1&session=Ab3 HTTP/1.1\r\n\r\n");
        assert_eq!(session_token(&h), Some("Ab3"));
        assert!(keep_alive(&h));
        let h = head("GET /hls/a/index.m3u8?session=a%20b HTTP/1.0\r\n\r\n");
        assert_eq!(session_token(&h), None);
        assert!(!keep_alive(&h));
        let h = head("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
        assert!(keep_alive(&h));
        let h = head("GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
        assert!(!keep_alive(&h));
    }

    #[test]
    fn ranges() {
        let r = |v: &str| range_of(&head(&format!("GET / HTTP/1.1\r\nRange: {v}\r\n\r\n")), 100);
        assert_eq!(r("bytes=0-9"), Ok(Some((0, 9))));
        assert_eq!(r("bytes=90-200"), Ok(Some((90, 99))));
        assert_eq!(r("bytes=50-"), Ok(Some((50, 99))));
        assert_eq!(r("bytes=-10"), Ok(Some((90, 99))));
        assert_eq!(r("bytes=100-"), Err(()));
        assert_eq!(r("bytes=0-1,5-6"), Ok(None));
        assert_eq!(r("items=0-1"), Ok(None));
    }
}
