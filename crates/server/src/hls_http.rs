//! HLS over HTTP (issues 14 and 24): `/hls/<mount>/index.m3u8`, the media playlists and
//! segments (paths read by `throng_proto::hls::path`), the task driving the packagers
//! (`hls/`), and the receiver of the cache tier's syslog (`[hls] cache-log-listen`, from the
//! senders of `cache-log-from` only).
//!
//! - `GET /hls/<mount>/index.m3u8` is the URL players are given (`hls_url` in the status
//!   documents). It is a listener request: listener authentication of `<mount>` (htpasswd, URL
//!   auth) and max-listeners apply (401/403 as for an ICY listener); admitted, it opens a session
//!   and answers a multivariant playlist (`Cache-Control: private, no-store`) naming the
//!   session's media playlist: `s/<token>/index.m3u8` with shared playlists (`[hls] playlists =
//!   "shared"`, the default), `index.m3u8?session=<token>` per session. A media-playlist
//!   request with an unknown (expired) token is admitted the same way and reopens the session
//!   under that token.
//! - Media playlists: rendered once per new segment, the same bytes for every session, with
//!   relative segment URLs. Shared, a cache may keep one half a target duration
//!   (`Cache-Control: public, max-age=<target/2>`) and key it without the token, so Throng's
//!   request rate does not grow with the players behind it; per session `private, max-age=1`.
//!   With `[hls] blocking-reload` they advertise `EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES`: a
//!   reload carrying `_HLS_msn=M` is held until segment `M` is cut (at most three target
//!   durations, then `503`; `400` when `M` is more than two beyond the newest), RFC 8216bis
//!   section 6.2.5.2. Segments: shared by all sessions (also under `s/<token>/`, where a
//!   fetch keeps the session alive), numbered from the packager's start time so URLs are never
//!   reused, served with `Content-Length`, `Cache-Control: public, max-age=86400, immutable`,
//!   `Accept-Ranges` and `206` for a `Range`, so any cache in front fans them out. CORS as for
//!   streams. Every request Throng answers for a packaged mount counts in
//!   `throng_hls_requests_total{mount,kind}`.
//! - Signed links (`[hls] secure-link-secret`, a mount's `hls-secure-link-secret`): the
//!   multivariant playlist hands out a token signed as nginx's `secure_link_md5` checks it
//!   (`throng_proto::hls::secure_link`), and every other request of that mount must carry one,
//!   unexpired, in its path ([`link_decision`]: `403`, `410`).
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
use rand::distributions::{Alphanumeric, DistString};
use throng_proto::http::{parse_request_head, RequestHead, MAX_HEAD_BYTES};
use throng_proto::listener_head::CORS_HEADERS;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::audience::{AudiencePath, ListenerInfo};
use crate::config::PlaylistMode;
use crate::ctx::ServerCtx;
use crate::hls::admission::{SessionLimits, SessionRefused};
use crate::hls::session::{timeout_for, Fetch, Played, Session};
use crate::hls::{Output, Window};
use crate::observe::metrics::{HlsRequestLabel, OutcomeLabel};
use crate::respond::{admit_listener, reply, Admitted};
use throng_proto::hls::path::{self as hls_path, Target};
use throng_proto::hls::playlist::{hls_msn, hls_part, Reload};
use throng_proto::hls::secure_link::{self, LinkError};

/// Content-Type of playlists (RFC 8216 section 4).
pub const PLAYLIST_TYPE: &str = "application/vnd.apple.mpegurl";

/// The playlist path of mount `name` (`/live.mp3` → `/hls/live.mp3/index.m3u8`).
pub use throng_proto::hls::path::playlist_path as hls_path;

/// The absolute playlist URL of mount `m` (`http://host:port/hls/<mount>/index.m3u8`, on the
/// host and port of its `listenurl`) when it is served as HLS; `hls_url` in the status documents.
/// A configured mount name has a packager whatever its format, but only a stream HLS carries
/// is announced ([`hls_unavailable`]): another's playlist would never get a segment.
pub fn hls_url(ctx: &ServerCtx, m: &crate::mount::live::Mount) -> Option<String> {
    if hls_unavailable(ctx, m).is_some() {
        return None;
    }
    ctx.hls.output(&m.name)?;
    let base = m.listen_url(&ctx.config().hostname, ctx.port);
    let origin = base.strip_suffix(m.name.as_str()).unwrap_or(&base);
    // Percent-encoded as any link to a mount (`href_path`): the station page and players use it
    // as it is.
    Some(format!(
        "{origin}{}",
        hls_path(&throng_proto::mount_name::href_path(&m.name))
    ))
}

/// Why mount `m` has no HLS link although HLS is on for its name (`hls_unavailable` in
/// `/api/v1/status`): HLS carries MP3 and AAC (packed audio, RFC 8216 section 3.4, or fMP4) and
/// Ogg/Opus and Ogg/FLAC (fMP4, `crate::hls::container`); an Ogg stream of another codec
/// (Vorbis, Speex: the codec the framer saw) and WebM or unframed streams are not carried.
/// `None` when it is served (or its Ogg codec is not known yet), or HLS is off for it.
pub fn hls_unavailable(ctx: &ServerCtx, m: &crate::mount::live::Mount) -> Option<&'static str> {
    let settings = ctx.config().hls_for(&m.name)?;
    match crate::hls::container(m.settings.format, settings.aac_segments) {
        None => Some(
            "not served as HLS: HLS carries MP3, AAC, Ogg/Opus and Ogg/FLAC, and this mount is \
             another format (WebM or unframed)",
        ),
        Some(_) if m.settings.format == throng_proto::format::Format::Ogg => {
            match m.params().codec {
                "" | "Opus" | "FLAC" => None,
                "Vorbis" => Some(
                    "not served as HLS: Ogg Vorbis has no HLS container Throng builds (fMP4 \
                     carries Ogg/Opus and Ogg/FLAC, packed audio MP3 and AAC)",
                ),
                _ => Some(
                    "not served as HLS: this Ogg codec has no HLS container Throng builds \
                     (fMP4 carries Ogg/Opus and Ogg/FLAC, packed audio MP3 and AAC)",
                ),
            }
        }
        Some(_) => None,
    }
}

/// Whether `path` is an HLS URL this module serves.
pub fn is_hls_path(path: &str) -> bool {
    hls_path::parse(path).is_some()
}

/// The session token of a request: in the path (`/s/<token>/`), else the `session` query
/// parameter.
fn session_token<'a>(target: &Target<'a>, head: &'a RequestHead) -> Option<&'a str> {
    target
        .token()
        .or_else(|| head.query.as_deref().and_then(hls_path::query_token))
}

/// Starts the task that drives the packagers (every 100 ms) and expires idle sessions (every
/// 500 ms) until the server shuts down, and the receiver of the cache tier's syslog when
/// `[hls] cache-log-listen` is set ([`start_cache_log_listener`]).
pub fn start(ctx: Arc<ServerCtx>) {
    if let Some(addr) = ctx.config().hls.cache_log_listen {
        if let Err(e) = start_cache_log_listener(ctx.clone(), addr) {
            tracing::error!(%addr, "cache-log-listen: cannot listen: {e}");
        }
    }
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
                    &SessionLimits::of(&ctx.config().hls),
                    &ctx.registry,
                    &ctx.metrics,
                    &ctx.access_log,
                );
            }
        }
    });
}

/// Receive buffer asked for the cache log socket (bytes): bursts of datagrams from a busy
/// cache wait there rather than being dropped.
const CACHE_LOG_RCVBUF: usize = 4 * 1024 * 1024;

/// Receives the cache tier's request logs as UDP syslog on `addr` (nginx `access_log
/// syslog:server=…`, one line per datagram) until the server shuts down; each line goes to
/// [`crate::hls::Hls::cache_log_text`]. Bound once at start: a reload does not move it. Only
/// datagrams from `[hls] cache-log-from` (default: the socket's loopback address,
/// [`crate::config::HlsConfig::cache_log_senders`], read again after a reload) are read; the
/// others are dropped and counted as [`LineOutcome::Refused`](crate::hls::cache_log::LineOutcome)
/// (one WARN a minute at most names the last such sender). Issue 42, item 4.
///
/// Errors: the socket cannot be bound.
pub fn start_cache_log_listener(ctx: Arc<ServerCtx>, addr: SocketAddr) -> std::io::Result<()> {
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    // Best effort: the kernel caps it at net.core.rmem_max.
    let _ = sock.set_recv_buffer_size(CACHE_LOG_RCVBUF);
    sock.set_nonblocking(true)?;
    sock.bind(&addr.into())?;
    let udp: std::net::UdpSocket = sock.into();
    let local = udp.local_addr()?;
    tracing::info!(
        addr = %local,
        from = ?ctx.config().hls.cache_log_from,
        "receiving HLS cache logs (UDP syslog)"
    );
    if ctx.config().hls.cache_log_from.is_none() && !local.ip().is_loopback() {
        tracing::warn!(
            addr = %local,
            "cache-log-listen reads datagrams from the loopback address only: list the caches \
             in [hls] cache-log-from"
        );
    }
    // A thread of its own that sleeps between batches: a task of the runtime would have the
    // socket in the runtime's epoll set, and every datagram would wake a worker thread (that
    // wake-up, not the line, was most of a line's cost, issue 24); while this thread sleeps
    // the datagrams only queue in the socket.
    let runtime = tokio::runtime::Handle::current();
    std::thread::Builder::new()
        .name("hls-cache-log".into())
        .spawn(move || {
            let _runtime = runtime.enter();
            let shutdown = ctx.shutdown.clone();
            // One syslog datagram: nginx sends at most 2 KB per line, RFC 5426 allows more.
            let mut buf = vec![0u8; 64 * 1024];
            let mut batch = String::new();
            let mut last = Instant::now();
            let mut refusals = Refusals::default();
            while !*shutdown.borrow() {
                // Everything queued, applied as one batch: one wake-up, one look at the
                // configuration, for many lines.
                batch.clear();
                let senders = ctx.config().hls.cache_log_senders(local);
                let mut received = 0;
                let mut refused = 0;
                while received < CACHE_LOG_BATCH {
                    match udp.recv_from(&mut buf) {
                        Ok((_, from)) if !is_cache_log_sender(&senders, from) => {
                            refusals.note(from, Instant::now());
                            refused += 1;
                            received += 1;
                        }
                        Ok((n, _)) => {
                            batch.push_str(&String::from_utf8_lossy(&buf[..n]));
                            batch.push('\n');
                            received += 1;
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                        Err(e) => {
                            tracing::debug!("cache log socket: {e}");
                            break;
                        }
                    }
                }
                if refused > 0 {
                    let label = OutcomeLabel {
                        outcome: crate::hls::cache_log::LineOutcome::Refused.as_str(),
                    };
                    ctx.metrics
                        .hls_cache_log_lines
                        .get_or_create(&label)
                        .inc_by(u64::try_from(refused).unwrap_or(u64::MAX));
                }
                if received > refused {
                    apply_cache_logs(&ctx, &batch);
                }
                let now = Instant::now();
                let pause = cache_log_pause(received, now - last);
                last = now;
                std::thread::sleep(pause);
            }
        })?;
    Ok(())
}

/// Whether a datagram from `from` may carry cache logs: its address (IPv4-mapped IPv6 read as
/// IPv4) is in one of `senders` ([`crate::config::HlsConfig::cache_log_senders`]).
pub fn is_cache_log_sender(senders: &[(std::net::IpAddr, u8)], from: SocketAddr) -> bool {
    senders
        .iter()
        .any(|&net| crate::net::filters::cidr_contains(net, from.ip()))
}

/// Datagrams the cache log receiver refused since its last WARN, which it writes at most once
/// a minute (a flood of forged datagrams writes one line a minute, not one each).
#[derive(Debug, Default)]
struct Refusals {
    /// Refused since the last WARN.
    count: u64,
    /// When the last WARN was written.
    warned: Option<Instant>,
}

impl Refusals {
    /// Notes a datagram refused from `from` at `now`, and writes the WARN if a minute has
    /// passed since the last one (or there was none).
    fn note(&mut self, from: SocketAddr, now: Instant) {
        self.count += 1;
        if self
            .warned
            .is_some_and(|w| now.duration_since(w) < Duration::from_secs(60))
        {
            return;
        }
        tracing::warn!(
            %from,
            refused = self.count,
            "cache-log-listen: datagrams from senders not in [hls] cache-log-from dropped"
        );
        self.count = 0;
        self.warned = Some(now);
    }
}

/// Most datagrams read from the cache log socket in one batch.
const CACHE_LOG_BATCH: usize = 4096;

/// Datagrams a pause of the cache log receiver lets gather, at the rate they came at: well
/// within the socket's receive buffer (even at the default `net.core.rmem_max` of 208 KiB,
/// about 200 datagrams of nginx's lines).
const CACHE_LOG_GATHER: f64 = 64.0;

/// Longest pause of the cache log receiver between two batches.
const CACHE_LOG_MAX_PAUSE: Duration = Duration::from_millis(100);

/// How long the cache log receiver waits after a batch of `received` datagrams gathered over
/// `elapsed` before reading again: long enough for about [`CACHE_LOG_GATHER`] datagrams at
/// that rate, at most [`CACHE_LOG_MAX_PAUSE`]. Lines then arrive in batches instead of waking
/// the receiver once each (issue 24: the wake-up per datagram was most of the origin's cost
/// behind a cache); a session's liveness is judged over seconds, so 100 ms of delay is
/// nothing to it. A full batch ([`CACHE_LOG_BATCH`]) reads on at once. An idle receiver looks
/// ten times a second.
pub fn cache_log_pause(received: usize, elapsed: Duration) -> Duration {
    if received >= CACHE_LOG_BATCH {
        return Duration::ZERO;
    }
    let rate = received as f64 / elapsed.as_secs_f64().max(1e-3);
    if rate <= 0.0 {
        return CACHE_LOG_MAX_PAUSE;
    }
    Duration::from_secs_f64(CACHE_LOG_GATHER / rate).min(CACHE_LOG_MAX_PAUSE)
}

/// Applies the cache log lines in `text` (one per line, blank lines skipped) at once, for the
/// UDP receiver and `POST /api/v1/hls/cache-logs`; how many had each
/// [`LineOutcome`](crate::hls::cache_log::LineOutcome), indexed by it.
pub fn apply_cache_logs(ctx: &ServerCtx, text: &str) -> [u64; crate::hls::cache_log::OUTCOMES] {
    let lines = crate::hls::cache_log::Lines {
        registry: &ctx.registry,
        config: &ctx.config(),
        metrics: &ctx.metrics,
        ledger: ctx.ledger.as_ref(),
        log: &ctx.access_log,
        now: Instant::now(),
    };
    let mut counts = [0u64; crate::hls::cache_log::OUTCOMES];
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        counts[ctx.hls.cache_log_text(line, &lines, || ctx.next_id()) as usize] += 1;
    }
    counts
}

/// Serves HLS requests on a connection from `via` (its TCP or PROXY-protocol peer), starting
/// with `head` (`rest`: bytes read after it) from client `peer`, while the client keeps the
/// connection alive, holding its `clients` unit `slot`. Each later request's client is read
/// again from its own `X-Forwarded-For` when `via` is a trusted proxy (a cache in front
/// carries many players' requests on one connection) and passes the access filters, or the
/// connection closes. Between two requests the connection is idle (`net/clients.rs`): under the
/// per-address cap of idle sockets, and closed if a new request finding `clients` used up
/// takes its unit.
pub async fn handle(
    ctx: Arc<ServerCtx>,
    mut stream: Conn,
    mut head: RequestHead,
    rest: Vec<u8>,
    via: SocketAddr,
    mut peer: SocketAddr,
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
                peer = ctx.filters().client_addr(via, &h);
                if let Err(why) = ctx.filters().admit(peer.ip(), &h) {
                    tracing::info!(%peer, "request refused: {why}");
                    ctx.metrics.rejected.inc();
                    let _ = reply(&ctx, &mut stream, peer, Some(&h), 403, &[], "Forbidden\n").await;
                    return;
                }
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
    let text = "The file you requested could not be found\n";
    answer_and_close(ctx, stream, head, peer, 404, text).await
}

/// Answers `status` with the plain text `text` and asks to close.
async fn answer_and_close(
    ctx: &ServerCtx,
    stream: &mut Conn,
    head: &RequestHead,
    peer: SocketAddr,
    status: u16,
    text: &str,
) -> bool {
    let ctype = [("Content-Type", "text/plain")];
    let _ = reply(ctx, stream, peer, Some(head), status, &ctype, text).await;
    false
}

/// Answers one request; false when the connection must close.
async fn serve_one(
    ctx: &Arc<ServerCtx>,
    stream: &mut Conn,
    head: &RequestHead,
    peer: SocketAddr,
) -> bool {
    let Some(target) = hls_path::parse(&head.path) else {
        return not_found(ctx, stream, head, peer).await;
    };
    let token = session_token(&target, head);
    let config = ctx.config();
    let signing = config.hls_secure_link(target.mount());
    if let Err((status, why)) = link_decision(signing, &target, token, unix_now()) {
        tracing::info!(%peer, path = %head.path, "HLS request refused: {why}");
        let _ = reply(
            ctx,
            stream,
            peer,
            Some(head),
            status,
            &[],
            &format!("{why}\n"),
        )
        .await;
        return false;
    }
    match target {
        Target::Segment {
            mount,
            seq,
            ext,
            part,
            ..
        } => {
            // An fMP4 initialization section (`<id>.mp4`), a low-latency part, or a segment.
            let found = if let Some(index) = part {
                held_part(ctx, mount, seq, index)
                    .await
                    .map(|p| (p.data.clone(), "m4s"))
            } else if ext == "mp4" {
                ctx.hls.init(mount, seq).map(|i| (i.data.clone(), "mp4"))
            } else {
                ctx.hls
                    .segment(mount, seq)
                    .filter(|s| s.ext == ext)
                    .map(|s| {
                        s.fetches.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        (s.data.clone(), s.ext)
                    })
            };
            let Some((data, seg_ext)) = found else {
                return not_found(ctx, stream, head, peer).await;
            };
            count_request(ctx, &target);
            count_bytes(ctx, &target, data.len());
            // A segment fetched by a session (relative URL of a shared playlist; without a
            // token, of a per-session playlist: the address's oldest pending session of the
            // mount): alive, and at its first segment a listener.
            let now = Instant::now();
            // What this fetch sends of the segment (a range, a HEAD: less than all of it): a
            // pending session becomes a listener once that adds up to a whole segment.
            let whole = data.len() as u64;
            let sent = if head.method == "HEAD" {
                0
            } else {
                match range_of(head, whole) {
                    Ok(None) => whole,
                    Ok(Some((first, last))) => last - first + 1,
                    Err(()) => 0,
                }
            };
            let played = Played::Bytes { sent, whole };
            let fetch = match token {
                Some(t) => {
                    ctx.hls
                        .sessions
                        .played(t, now, played, &ctx.metrics, ctx.ledger.as_ref())
                }
                None if ctx.hls.playlists(mount) != Some(PlaylistMode::PerSession) => {
                    Fetch::Unknown
                }
                None => ctx.hls.sessions.fetched_from(
                    peer.ip(),
                    mount,
                    now,
                    played,
                    &ctx.metrics,
                    ctx.ledger.as_ref(),
                ),
            };
            if let Fetch::Full(_) = fetch {
                return max_listeners_reached(ctx, stream, head, peer).await;
            }
            let ctype = throng_proto::hls::cutter::segment_content_type(seg_ext);
            send_body(
                stream,
                head,
                ctype,
                "public, max-age=86400, immutable",
                &data,
                true,
            )
            .await
        }
        Target::Playlist { mount, .. } => {
            let Some(mode) = ctx.hls.playlists(mount) else {
                return not_found(ctx, stream, head, peer).await;
            };
            count_request(ctx, &target);
            // `_HLS_msn` counts only where blocking reload is offered (`[hls] blocking-reload`).
            let msn = head
                .query
                .as_deref()
                .and_then(hls_msn)
                .filter(|_| ctx.hls.blocking_reload(mount));
            // `_HLS_part` with it (low-latency mounts; `Window::reload`).
            let part = head
                .query
                .as_deref()
                .and_then(hls_part)
                .filter(|_| msn.is_some());
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
                    count_bytes(ctx, &target, window.playlist.len());
                    return send_playlist(stream, head, &window, mode).await;
                }
            }
            let known = token.is_some_and(|t| ctx.hls.sessions.contains(t));
            let Some(out) = ctx.hls.output(mount) else {
                return not_found(ctx, stream, head, peer).await;
            };
            if !known {
                let target = out.window.load().target_secs;
                let t = token.map(str::to_owned).unwrap_or_else(|| {
                    match signing {
                        // After admission below; a refused request never sees it.
                        Some((secret, secs)) => {
                            let id = Alphanumeric.sample_string(&mut rand::thread_rng(), 16);
                            secure_link::sign(&id, mount, unix_now() + secs, secret)
                        }
                        // A keyed MAC: cache-log lines of forged tokens open nothing
                        // (`hls/token.rs`).
                        None => ctx.hls.tokens.issue(config.hls.token_secret.as_deref()),
                    }
                });
                if !admit(ctx, stream, head, peer, mount, &t, target).await {
                    return false;
                }
                if token.is_none() {
                    let window = out.window.load();
                    let body = throng_proto::hls::playlist::master(
                        &hls_path::media_uri(&t, mode == PlaylistMode::Shared),
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
                        .touch(&t, &w.without_segments(), sent, Instant::now());
                    return ok;
                }
            }
            let token = token.unwrap_or_default();
            let window = match held_window(ctx, &out, msn, part, token).await {
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
            count_bytes(ctx, &target, window.playlist.len());
            send_playlist(stream, head, &window, mode).await
        }
    }
}

/// Seconds since the Unix epoch.
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Whether a request for `target` (session `token`, from the path or the query) may be served
/// when its mount signs tokens with `signing` (secret, validity): a token in the path must be
/// signed for this mount and not expired (`403`, `410` as nginx's `secure_link` examples
/// answer), a segment outside `/s/<token>/` and a per-session playlist are refused (`403`:
/// they would bypass the signature); the multivariant playlist (no token) passes, to be
/// admitted and handed a signed token. Unsigned mounts pass everything. `now`: Unix seconds.
fn link_decision(
    signing: Option<(&str, u64)>,
    target: &Target<'_>,
    token: Option<&str>,
    now: u64,
) -> Result<(), (u16, &'static str)> {
    let Some((secret, _)) = signing else {
        return Ok(());
    };
    match (target.token(), target, token) {
        (Some(t), _, _) => {
            secure_link::check(t, target.mount(), secret, now).map_err(|e| match e {
                LinkError::Expired => (410, "the signed HLS link has expired"),
                LinkError::Forged => (403, "the HLS link's signature does not match"),
                LinkError::Unsigned => (403, "this mount's HLS links must be signed"),
            })
        }
        (None, Target::Playlist { .. }, None) => Ok(()),
        _ => Err((403, "this mount's HLS links must be signed")),
    }
}

/// Counts a request Throng answers for a packaged mount in `throng_hls_requests_total`.
fn count_request(ctx: &ServerCtx, target: &Target<'_>) {
    ctx.metrics
        .hls_requests
        .get_or_create(&HlsRequestLabel::new(target.mount(), target.kind()))
        .inc();
}

/// Counts `bytes` of body sent for `target` in `throng_hls_bytes_total` (the bench's origin
/// bytes per second behind a cache).
fn count_bytes(ctx: &ServerCtx, target: &Target<'_>, bytes: usize) {
    ctx.metrics
        .hls_bytes
        .get_or_create(&HlsRequestLabel::new(target.mount(), target.kind()))
        .inc_by(bytes as u64);
}

/// The `Cache-Control` of a media playlist of `target_secs` target duration: shared, a cache
/// keeps it at most half a target duration (whole seconds, at least 1: a 1-second target gets
/// 1); per session, no cache keeps it.
pub fn playlist_cache_control(mode: PlaylistMode, target_secs: u64) -> String {
    match mode {
        PlaylistMode::Shared => format!("public, max-age={}", (target_secs / 2).max(1)),
        PlaylistMode::PerSession => "private, max-age=1".to_owned(),
    }
}

/// Sends `window`'s media playlist (the same bytes for every session) with the caching
/// policy of `mode` ([`playlist_cache_control`]); false on a write error.
async fn send_playlist(
    stream: &mut Conn,
    head: &RequestHead,
    window: &Window,
    mode: PlaylistMode,
) -> bool {
    send_body(
        stream,
        head,
        PLAYLIST_TYPE,
        &playlist_cache_control(mode, window.target_secs),
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
    part: Option<u64>,
    token: &str,
) -> Result<Arc<Window>, u16> {
    let mut updates = out.updates.clone();
    let mut deadline = None;
    loop {
        // Marked seen before the window is read: a publication after the read wakes the wait.
        updates.borrow_and_update();
        let window = out.window.load_full();
        match window.reload(msn, part) {
            Reload::Now => return Ok(window),
            Reload::BadRequest => return Err(400),
            Reload::Wait => {}
        }
        let until = *deadline.get_or_insert_with(|| {
            ctx.hls
                .sessions
                .touch(token, &window.without_segments(), 0, Instant::now());
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

/// Part `index` of segment `seq` of mount `mount` (low-latency HLS): at once when published;
/// held, when it is the next part to be published (the playlist's `EXT-X-PRELOAD-HINT`, RFC
/// 8216bis section 6.2.6: "the server MUST hold the request until the resource is available"),
/// at most three part targets; `None` when it does not come, or is not the next part.
async fn held_part(
    ctx: &ServerCtx,
    mount: &str,
    seq: u64,
    index: u64,
) -> Option<Arc<crate::hls::packager::Part>> {
    let out = ctx.hls.output(mount)?;
    let mut updates = out.updates.clone();
    let until =
        tokio::time::Instant::now() + Duration::from_millis(3 * crate::config::PART_TARGET_MS);
    loop {
        updates.borrow_and_update();
        let window = out.window.load();
        if let Some(p) = window.part(seq, index) {
            return Some(p.clone());
        }
        if !window.is_next_part(seq, index) {
            return None;
        }
        drop(window);
        match tokio::time::timeout_at(until, updates.changed()).await {
            Ok(Ok(())) => {}
            _ => return None,
        }
    }
}

/// Admits a new session `token` on mount `name` (`hls/admission.rs`: the address's new and
/// pending sessions and the table's bound first, refused `503` with `Retry-After: 1`; then the
/// `listener/` rules: authentication, the mount a listener hears, max-listeners) as a pending
/// session, which takes its listener slot at its first segment; answers the refusal and
/// returns false when it is refused.
async fn admit(
    ctx: &Arc<ServerCtx>,
    stream: &mut Conn,
    head: &RequestHead,
    peer: SocketAddr,
    name: &str,
    token: &str,
    target_secs: u64,
) -> bool {
    // A draining server sends new players on (`cluster/drain.rs`); its sessions play on.
    if crate::cluster::redirect::turn_away(ctx, stream, head, peer, 302, &[]).await {
        return false;
    }
    let limits = SessionLimits::of(&ctx.config().hls);
    if let Err(why) = ctx
        .hls
        .sessions
        .may_open(peer.ip(), &limits, Instant::now())
    {
        refuse_session(ctx, stream, head, peer, why).await;
        return false;
    }
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
    if !mount.has_room() {
        tracing::info!(%peer, mount = %mount.name, "max listeners reached (HLS)");
        return max_listeners_reached(ctx, stream, head, peer).await;
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
    let opened = ctx.hls.sessions.open_pending(
        token.to_owned(),
        Session {
            info,
            mount,
            fetched: false,
            played: 0,
            last_seen: now,
            bytes: 0,
            offered: None,
            timeout: timeout_for(target_secs),
            moved: None,
        },
        &limits,
        &ctx.metrics,
        &ctx.access_log,
        now,
    );
    match opened {
        Ok(()) => true,
        Err(why) => {
            refuse_session(ctx, stream, head, peer, why).await;
            false
        }
    }
}

/// Answers `403 max listeners reached` (a playlist request on a full mount, or a session's
/// first segment finding it full) and asks to close.
async fn max_listeners_reached(
    ctx: &ServerCtx,
    stream: &mut Conn,
    head: &RequestHead,
    peer: SocketAddr,
) -> bool {
    answer_and_close(ctx, stream, head, peer, 403, "max listeners reached\n").await
}

/// Answers a new session refused by `hls/admission.rs`: `503` with `Retry-After: 1` (players
/// retry), logged at debug level (a flood is many of them) and counted in
/// `throng_hls_sessions_refused_total{reason}`.
async fn refuse_session(
    ctx: &ServerCtx,
    stream: &mut Conn,
    head: &RequestHead,
    peer: SocketAddr,
    why: SessionRefused,
) {
    tracing::debug!(%peer, "HLS session refused: {why}");
    ctx.metrics
        .hls_sessions_refused
        .get_or_create(&OutcomeLabel { outcome: why.key() })
        .inc();
    let _ = reply(
        ctx,
        stream,
        peer,
        Some(head),
        503,
        &[("Retry-After", "1")],
        &format!("{why}\n"),
    )
    .await;
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
    fn signed_links() {
        let signing = Some(("s3cret", 3600));
        let t = secure_link::sign("Ab3", "/a", 1_000, "s3cret");
        fn at(p: &str) -> Target<'_> {
            hls_path::parse(p).unwrap()
        }
        let media = format!("/hls/a/s/{t}/index.m3u8");
        let seg = format!("/hls/a/s/{t}/17.mp3");
        let media = at(&media);
        let seg = at(&seg);
        assert_eq!(link_decision(signing, &media, media.token(), 999), Ok(()));
        assert_eq!(link_decision(signing, &seg, seg.token(), 999), Ok(()));
        assert_eq!(
            link_decision(signing, &seg, seg.token(), 1_001)
                .unwrap_err()
                .0,
            410
        );
        let forged = at("/hls/a/s/Ab3-1000-AAAAAAAAAAAAAAAAAAAAAA/17.mp3");
        assert_eq!(
            link_decision(signing, &forged, forged.token(), 1)
                .unwrap_err()
                .0,
            403
        );
        let other = format!("/hls/b/s/{t}/17.mp3");
        let other = at(&other);
        assert_eq!(
            link_decision(signing, &other, other.token(), 1)
                .unwrap_err()
                .0,
            403,
            "signed for another mount"
        );
        let plain = at("/hls/a/17.mp3");
        assert_eq!(link_decision(signing, &plain, None, 1).unwrap_err().0, 403);
        let multivariant = at("/hls/a/index.m3u8");
        assert_eq!(link_decision(signing, &multivariant, None, 1), Ok(()));
        assert_eq!(
            link_decision(signing, &multivariant, Some("q"), 1)
                .unwrap_err()
                .0,
            403,
            "a per-session playlist"
        );
        assert_eq!(link_decision(None, &plain, None, 1), Ok(()));
    }

    #[test]
    fn playlist_caching() {
        assert_eq!(
            playlist_cache_control(PlaylistMode::Shared, 6),
            "public, max-age=3"
        );
        assert_eq!(
            playlist_cache_control(PlaylistMode::Shared, 1),
            "public, max-age=1"
        );
        assert_eq!(
            playlist_cache_control(PlaylistMode::PerSession, 6),
            "private, max-age=1"
        );
    }

    #[test]
    fn tokens_and_keep_alive() {
        let h = head("GET /hls/a/index.m3u8?x=1&session=Ab3 HTTP/1.1\r\n\r\n");
        let t = hls_path::parse("/hls/a/index.m3u8").unwrap();
        assert_eq!(session_token(&t, &h), Some("Ab3"));
        let p = hls_path::parse("/hls/a/s/Path7/index.m3u8").unwrap();
        assert_eq!(
            session_token(&p, &h),
            Some("Path7"),
            "the path's token wins"
        );
        assert!(keep_alive(&h));
        let h = head("GET /hls/a/index.m3u8?session=a%20b HTTP/1.0\r\n\r\n");
        assert_eq!(session_token(&t, &h), None);
        assert!(!keep_alive(&h));
        let h = head("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
        assert!(keep_alive(&h));
        let h = head("GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
        assert!(!keep_alive(&h));
    }

    #[test]
    fn cache_logs_are_read_from_listed_senders_only() {
        let at = |s: &str| -> SocketAddr { s.parse().unwrap() };
        let default = crate::config::HlsConfig::default().cache_log_senders(at("0.0.0.0:514"));
        assert!(is_cache_log_sender(&default, at("127.0.0.1:40000")));
        assert!(is_cache_log_sender(
            &default,
            at("[::ffff:127.0.0.1]:40000")
        ));
        assert!(!is_cache_log_sender(&default, at("127.0.0.2:40000")));
        assert!(!is_cache_log_sender(&default, at("192.0.2.1:40000")));
        let listed = crate::config::HlsConfig {
            cache_log_from: Some(vec!["10.1.0.0/16".into(), "2001:db8::5".into()]),
            ..Default::default()
        }
        .cache_log_senders(at("[::]:514"));
        assert!(is_cache_log_sender(&listed, at("10.1.200.3:9")));
        assert!(is_cache_log_sender(&listed, at("[::ffff:10.1.0.1]:9")));
        assert!(is_cache_log_sender(&listed, at("[2001:db8::5]:9")));
        assert!(!is_cache_log_sender(&listed, at("10.2.0.1:9")));
        assert!(
            !is_cache_log_sender(&listed, at("[::1]:9")),
            "listed: no loopback default"
        );
    }

    #[test]
    fn cache_log_batches_gather_about_64_datagrams_at_most_100_ms() {
        let ms = Duration::from_millis;
        // A quiet cache: the longest pause.
        assert_eq!(cache_log_pause(0, ms(100)), ms(100));
        assert_eq!(cache_log_pause(33, ms(100)), ms(100), "330 lines/s");
        // 3,200 lines/s: 20 ms gathers 64.
        assert_eq!(cache_log_pause(320, ms(100)), ms(20));
        // 40,000 lines/s: 1.6 ms.
        assert_eq!(cache_log_pause(4000, ms(100)), Duration::from_micros(1600));
        // A full batch reads on at once.
        assert_eq!(cache_log_pause(CACHE_LOG_BATCH, ms(1000)), Duration::ZERO);
        assert!(cache_log_pause(10, Duration::ZERO) <= ms(100));
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
