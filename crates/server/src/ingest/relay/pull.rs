//! Relays: a local mount fed by a stream pulled over HTTP from another server (Icecast, Throng,
//! SHOUTcast), as Icecast 2.4.4 `slave.c` does. The fan-out does not care where bytes come from,
//! so a relay is one more feeder: it `GET`s the upstream mount (following `302`s), turns the
//! answer's headers into the local mount's settings, and pushes the body through a [`Feeder`]
//! (which de-interleaves upstream ICY metadata, so titles carry over) into a [`LiveMount`] of
//! kind [`SourceKind::Relay`].
//!
//! An always-on relay reconnects after a failure or an upstream drop with a [`Backoff`] (1 s
//! doubling to 60 s): after every [`RelayError`] and every session end that is
//! [`StreamEnd::retryable`] (all but a stop or shutdown). An on-demand relay waits until a
//! listener asks for its mount (`Registry::register_on_demand`), and disconnects once the mount
//! has had no listener for [`ON_DEMAND_LINGER`]. When a relay's feed ends, listeners move to the
//! mount's fallback if one is live, else they are closed once they have drained the queue (as
//! Icecast 2.4.4).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use thiserror::Error;
use throng_proto::format::Format;
use throng_proto::http::{parse_response_head, HeadError, ResponseHead};
use throng_proto::source_info::SourceInfo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::net::conn::ClientConn;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use crate::config::RelayConfig;
use crate::ctx::ServerCtx;
use crate::ingest::live_mount::LiveMount;
use crate::ingest::relay::client::{
    classify, relay_request, Answer, Backoff, Upstream, MAX_REDIRECTS,
};
use crate::ingest::source::SOURCE_READ_BYTES;
use crate::mount::feeder::Feeder;
use crate::mount::freeze::FrozenFeed;
use crate::mount::live::{Announcement, Mount, SourceKind};
use crate::mount::queue::QueueWriter;
use crate::mount::registry::ReserveError;
use crate::mount::stream_end::{EndedBy, Peer, StreamEnd};

/// How long a connection to an upstream may take (Icecast 2.4.4 `sock_connect_wto_bind`, 10 s).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// An on-demand relay disconnects from upstream after its mount has had no listener this long.
pub const ON_DEMAND_LINGER: Duration = Duration::from_secs(5);

/// Least delay between two failed attempts of an on-demand relay (listeners asking meanwhile
/// are served by the next attempt).
pub const ON_DEMAND_RETRY: Duration = Duration::from_secs(2);

/// Longest a relay feeds its mount before registering it while no audio came yet.
pub const PRIME_LIMIT: Duration = Duration::from_secs(2);

/// How often a running relay checks its stop flags, source-timeout and listener count.
const TICK: Duration = Duration::from_millis(250);

/// Errors talking to an upstream server (a relay's origin, or a master's stream list).
#[derive(Debug, Error)]
pub enum RelayError {
    /// The TCP connection failed or took longer than [`CONNECT_TIMEOUT`].
    #[error("cannot connect to {upstream}: {source}")]
    Connect {
        /// `host:port`.
        upstream: String,
        /// The error (`TimedOut` after [`CONNECT_TIMEOUT`]).
        source: std::io::Error,
    },
    /// Reading or writing the connection failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// No complete response head within `header-timeout`.
    #[error("no response head within {0} s")]
    HeadTimeout(u64),
    /// The upstream closed the connection before a complete response head.
    #[error("upstream closed the connection before answering")]
    Closed,
    /// The response head is not HTTP (or too large).
    #[error("bad response head: {0}")]
    Head(#[from] HeadError),
    /// The upstream answered something other than `200` or a followable `302`.
    #[error("{upstream} answered {status} {reason}")]
    Refused {
        /// The URL asked.
        upstream: String,
        /// Status code.
        status: u16,
        /// Reason phrase (or why a redirect was not followed).
        reason: String,
    },
    /// More than [`MAX_REDIRECTS`] redirects in a row.
    #[error("more than {MAX_REDIRECTS} redirects")]
    TooManyRedirects,
    /// The local mount could not be registered (e.g. a source client holds it).
    #[error("local mount unavailable: {0}")]
    Mount(#[from] ReserveError),
    /// A response body (the master's stream list) was larger than allowed, in bytes.
    #[error("response body larger than {0} bytes")]
    BodyTooLarge(usize),
    /// A response body did not arrive completely in time, in seconds.
    #[error("response body not complete within {0} s")]
    BodyTimeout(u64),
}

impl RelayError {
    /// Whose doing the failure was: the upstream's, except a local mount held by another
    /// feeder (this server's). Every one is retried, as the end of a session is.
    pub fn by(&self) -> EndedBy {
        match self {
            RelayError::Mount(_) => EndedBy::Server,
            RelayError::Connect { .. }
            | RelayError::Io(_)
            | RelayError::HeadTimeout(_)
            | RelayError::Closed
            | RelayError::Head(_)
            | RelayError::Refused { .. }
            | RelayError::TooManyRedirects
            | RelayError::BodyTooLarge(_)
            | RelayError::BodyTimeout(_) => EndedBy::Upstream,
        }
    }
}

/// What one relay pulls and where it puts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelaySpec {
    /// Upstream server and mount.
    pub upstream: Upstream,
    /// Local mount name.
    pub local_mount: String,
    /// Basic-auth user and password sent upstream (only when both are configured, as Icecast).
    pub credentials: Option<(String, String)>,
    /// Ask for ICY metadata (`Icy-MetaData: 1`) and carry titles over.
    pub metadata: bool,
    /// Connect only while the local mount has listeners.
    pub on_demand: bool,
}

impl RelaySpec {
    /// The relay described by a `[[relay]]` section.
    pub fn from_config(c: &RelayConfig) -> RelaySpec {
        RelaySpec {
            upstream: Upstream {
                host: c.server.clone(),
                port: c.port,
                mount: c.mount.clone(),
                tls: c.tls,
            },
            local_mount: c.local().to_owned(),
            credentials: c.username.clone().zip(c.password.clone()),
            metadata: c.relay_metadata,
            on_demand: c.on_demand,
        }
    }
}

/// A running relay task; dropping the handle stops the relay too.
#[derive(Debug)]
pub struct RelayHandle {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl RelayHandle {
    /// A handle from a stop sender and the task it stops.
    pub(crate) fn from_parts(stop: watch::Sender<bool>, task: JoinHandle<()>) -> RelayHandle {
        RelayHandle { stop, task }
    }

    /// Stops the relay (disconnects upstream, ends the local mount) and waits for its task.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// Starts the relay `spec` on its own task.
pub fn spawn(ctx: Arc<ServerCtx>, spec: RelaySpec) -> RelayHandle {
    let (stop, cancel) = watch::channel(false);
    let signal = StopSignal::new(&ctx, cancel);
    let task = tokio::spawn(async move {
        if spec.on_demand {
            run_on_demand(ctx, spec, signal).await;
        } else {
            run_always(ctx, spec, signal).await;
        }
    });
    RelayHandle { stop, task }
}

/// Server shutdown or this task's own stop request (either sender gone counts as a request).
#[derive(Debug)]
pub(crate) struct StopSignal {
    pub(crate) shutdown: watch::Receiver<bool>,
    pub(crate) cancel: watch::Receiver<bool>,
}

impl StopSignal {
    /// A signal for a task stopped by `cancel` or by server shutdown.
    pub(crate) fn new(ctx: &ServerCtx, cancel: watch::Receiver<bool>) -> StopSignal {
        StopSignal {
            shutdown: ctx.shutdown.clone(),
            cancel,
        }
    }

    /// Whether a stop was asked.
    pub(crate) fn is_set(&self) -> bool {
        *self.shutdown.borrow()
            || *self.cancel.borrow()
            || self.cancel.has_changed().is_err()
            || self.shutdown.has_changed().is_err()
    }

    /// Completes when a stop is asked.
    pub(crate) async fn wait(&mut self) {
        tokio::select! {
            _ = self.shutdown.wait_for(|v| *v) => {}
            _ = self.cancel.wait_for(|v| *v) => {}
        }
    }

    /// Why a relay stopped once a stop was asked: [`StreamEnd::Shutdown`] for a server shutdown,
    /// else [`StreamEnd::Stopped`] (its owner stopped it).
    pub(crate) fn end(&self) -> StreamEnd {
        if *self.shutdown.borrow() || self.shutdown.has_changed().is_err() {
            StreamEnd::Shutdown
        } else {
            StreamEnd::Stopped
        }
    }

    /// Sleeps `d`; false if a stop was asked meanwhile.
    pub(crate) async fn sleep(&mut self, d: Duration) -> bool {
        tokio::select! {
            _ = tokio::time::sleep(d) => !self.is_set(),
            _ = self.wait() => false,
        }
    }
}

/// An always-on relay: connect, feed, and after any end or failure retry with backoff.
async fn run_always(ctx: Arc<ServerCtx>, spec: RelaySpec, mut stop: StopSignal) {
    let mut backoff = Backoff::new();
    while !stop.is_set() {
        let outcome = session(&ctx, &spec, &mut stop, None).await;
        let (why, by) = match outcome {
            Ok((end, _)) if !end.retryable() => break,
            Ok((end, connected)) => {
                backoff.connected_for(connected);
                (format!("{end} after {} s", connected.as_secs()), end.by())
            }
            Err(e) => (e.to_string(), e.by()),
        };
        let delay = backoff.next_delay();
        tracing::warn!(
            mount = %spec.local_mount,
            upstream = %spec.upstream,
            ?by,
            "relay down ({why}); reconnecting in {} s",
            delay.as_secs()
        );
        if !stop.sleep(delay).await {
            break;
        }
    }
    tracing::info!(mount = %spec.local_mount, "relay stopped");
}

/// An on-demand relay: wait for a listener, feed while the mount has listeners, repeat.
async fn run_on_demand(ctx: Arc<ServerCtx>, spec: RelaySpec, mut stop: StopSignal) {
    let notify = ctx.registry.register_on_demand(&spec.local_mount);
    while !stop.is_set() {
        // A relay carried across a binary upgrade has listeners now: no wait.
        if !ctx.registry.has_adopted_relay(&spec.local_mount) {
            tokio::select! {
                _ = notify.notified() => {}
                _ = stop.wait() => break,
            }
        }
        tracing::info!(mount = %spec.local_mount, upstream = %spec.upstream, "on-demand relay: a listener asked, connecting");
        match session(&ctx, &spec, &mut stop, Some(&notify)).await {
            Ok((end, _)) if !end.retryable() => break,
            Ok((StreamEnd::Idle, connected)) => tracing::info!(
                mount = %spec.local_mount,
                "on-demand relay: no listener for {} s, disconnected after {} s",
                ON_DEMAND_LINGER.as_secs(),
                connected.as_secs()
            ),
            Ok((end, connected)) => {
                tracing::warn!(
                    mount = %spec.local_mount,
                    upstream = %spec.upstream,
                    by = ?end.by(),
                    "on-demand relay ended ({end} after {} s); waiting for listeners",
                    connected.as_secs()
                );
                // An upstream that accepts and drops at once is not retried in a tight loop.
                if connected < ON_DEMAND_RETRY && !stop.sleep(ON_DEMAND_RETRY).await {
                    break;
                }
            }
            Err(e) => {
                tracing::warn!(
                    mount = %spec.local_mount,
                    upstream = %spec.upstream,
                    by = ?e.by(),
                    "on-demand relay failed: {e}"
                );
                if !stop.sleep(ON_DEMAND_RETRY).await {
                    break;
                }
            }
        }
    }
    ctx.registry.unregister_on_demand(&spec.local_mount);
    tracing::info!(mount = %spec.local_mount, "on-demand relay stopped");
}

/// The upstream's answer, ready to stream.
struct Opened {
    stream: ClientConn,
    head: ResponseHead,
    /// Body bytes that came with the head.
    rest: Vec<u8>,
    peer: SocketAddr,
    upstream: Upstream,
}

/// Connects to `at` within [`CONNECT_TIMEOUT`], with TLS for an `https://` upstream
/// (verified against the certificates of `ca_file`, or the web PKI roots).
///
/// Errors: [`RelayError::Connect`] (a TLS handshake or certificate that fails included).
pub(crate) async fn connect(
    at: &Upstream,
    ca_file: Option<&std::path::Path>,
) -> Result<ClientConn, RelayError> {
    let addr = (at.host.as_str(), at.port);
    let err = |source| RelayError::Connect {
        upstream: at.authority(),
        source,
    };
    let open = async {
        let tcp = TcpStream::connect(addr).await?;
        if !at.tls {
            return Ok(ClientConn::Plain(tcp));
        }
        let config = crate::net::tls::client_config(ca_file)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
        ClientConn::tls(tcp, &at.host, config).await
    };
    match tokio::time::timeout(CONNECT_TIMEOUT, open).await {
        Ok(r) => r.map_err(err),
        Err(_) => Err(err(std::io::ErrorKind::TimedOut.into())),
    }
}

/// Reads a response head within `timeout`; returns it and the body bytes read with it.
///
/// Errors: [`RelayError::HeadTimeout`], [`RelayError::Closed`], [`RelayError::Head`],
/// [`RelayError::Io`].
pub(crate) async fn read_response_head(
    stream: &mut ClientConn,
    timeout: Duration,
) -> Result<(ResponseHead, Vec<u8>), RelayError> {
    let read = async {
        let mut buf = Vec::with_capacity(2048);
        loop {
            buf.reserve(2048);
            if stream.read_buf(&mut buf).await? == 0 {
                return Err(RelayError::Closed);
            }
            if let Some((head, len)) = parse_response_head(&buf)? {
                return Ok((head, buf.split_off(len)));
            }
        }
    };
    tokio::time::timeout(timeout, read)
        .await
        .unwrap_or(Err(RelayError::HeadTimeout(timeout.as_secs())))
}

/// Sends the relay request, following up to [`MAX_REDIRECTS`] `302`s to `http://` locations,
/// until an upstream answers `200` (as Icecast 2.4.4 `open_relay_connection`).
async fn open(ctx: &ServerCtx, spec: &RelaySpec) -> Result<Opened, RelayError> {
    let mut at = spec.upstream.clone();
    let credentials = spec
        .credentials
        .as_ref()
        .map(|(u, p)| (u.as_str(), p.as_str()));
    for _ in 0..=MAX_REDIRECTS {
        let ca = ctx.config().tls.ca_file.clone();
        let mut stream = connect(&at, ca.as_deref()).await?;
        let peer = stream.peer_addr()?;
        let request = relay_request(&at, &ctx.config().server_id, spec.metadata, credentials);
        stream.write_all(request.as_bytes()).await?;
        let (head, rest) = read_response_head(&mut stream, ctx.config().header_timeout()).await?;
        match classify(&head) {
            Answer::Stream => {
                return Ok(Opened {
                    stream,
                    head,
                    rest,
                    peer,
                    upstream: at,
                })
            }
            Answer::Redirect(next) => {
                tracing::info!(mount = %spec.local_mount, from = %at, to = %next, "relay redirected");
                at = next;
            }
            Answer::Refused { status, reason } => {
                return Err(RelayError::Refused {
                    upstream: at.to_string(),
                    status,
                    reason,
                })
            }
        }
    }
    Err(RelayError::TooManyRedirects)
}

/// The local mount for an upstream answer: its `Content-Type` (none means MP3, as Icecast
/// 2.4.4 `connection_complete_source`) and its `icy-*`/`ice-*` headers read as a source
/// client's (`source.c:source_apply_mount`), then the `[[mount]]` overrides.
fn relay_mount(
    ctx: &ServerCtx,
    local: &str,
    head: &ResponseHead,
    peer: SocketAddr,
) -> (Arc<Mount>, QueueWriter) {
    let content_type = head
        .header("content-type")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .unwrap_or("audio/mpeg")
        .to_owned();
    let format = Format::from_content_type(&content_type);
    let config = ctx.config();
    let mut info = SourceInfo::from_headers(&head.headers);
    info.user_agent = head.header("server").map(str::to_owned);
    let credentials = config.source_credentials(local).unwrap_or_default();
    Mount::configured(
        &config,
        local,
        Announcement {
            format,
            content_type,
            info,
            credentials,
            // As Icecast's `source_ip` stat of a relay: the upstream's address.
            source_ip: Some(peer.ip()),
            kind: SourceKind::Relay,
            force_hidden: false,
        },
    )
}

/// One connection: open upstream, register the local mount, feed it until the stream ends or
/// a stop; returns why it ended and how long the mount was fed.
async fn session(
    ctx: &Arc<ServerCtx>,
    spec: &RelaySpec,
    stop: &mut StopSignal,
    on_demand: Option<&Notify>,
) -> Result<(StreamEnd, Duration), RelayError> {
    let (mut stream, rest, mount, mut feeder) = match ctx
        .registry
        .claim_adopted_relay(&spec.local_mount)
    {
        // Carried across a binary upgrade: go on reading the same upstream connection.
        Some(a) => {
            let std = std::net::TcpStream::from(a.socket);
            let stream = match std
                .set_nonblocking(true)
                .and_then(|()| TcpStream::from_std(std))
                .map(ClientConn::Plain)
            {
                Ok(s) => s,
                Err(e) => return Ok((StreamEnd::ReadFailed(Peer::Upstream, e), Duration::ZERO)),
            };
            let feeder = match Feeder::resume(
                a.mount.clone(),
                a.writer,
                a.demux,
                &a.leftover,
                ctx.metrics.clone(),
            ) {
                Ok(f) => f,
                Err(e) => return Ok((StreamEnd::BadStream(Peer::Upstream, e), Duration::ZERO)),
            };
            tracing::info!(mount = %spec.local_mount, upstream = %spec.upstream, "relay adopted from the old process");
            (stream, Vec::new(), a.mount, feeder)
        }
        None => {
            let opened = tokio::select! {
                r = open(ctx, spec) => r?,
                _ = stop.wait() => return Ok((stop.end(), Duration::ZERO)),
            };
            let Opened {
                stream,
                head,
                rest,
                peer,
                upstream,
            } = opened;
            let (mount, writer) = relay_mount(ctx, &spec.local_mount, &head, peer);
            if ctx.registry.get(&spec.local_mount).is_some() {
                return Err(ReserveError::InUse.into());
            }
            let icy_metaint = head
                .header("icy-metaint")
                .and_then(|v| v.trim().parse::<usize>().ok());
            let feeder = Feeder::new(mount.clone(), writer, icy_metaint, ctx.metrics.clone());
            tracing::info!(
                mount = %spec.local_mount,
                %upstream,
                format = ?mount.settings.format,
                metaint = ?icy_metaint,
                "relay connected"
            );
            (stream, rest, mount, feeder)
        }
    };
    let started = Instant::now();
    let mut live = None;
    let ended = pump(
        ctx,
        &mut stream,
        &mount,
        &mut feeder,
        &rest,
        stop,
        on_demand,
        &mut live,
    )
    .await;
    if let Some(n) = on_demand {
        // Listeners that asked while this session ran were served by it: forget their request,
        // so only a listener arriving from now on starts the relay again.
        tokio::select! {
            biased;
            _ = n.notified() => {}
            _ = std::future::ready(()) => {}
        }
    }
    if matches!(ended, Ok(StreamEnd::HandedOver)) {
        let (leftover, demux) = feeder.freeze();
        let socket = stream.into_std().map(std::os::fd::OwnedFd::from).ok();
        mount.handover.answer(FrozenFeed {
            socket,
            leftover,
            demux,
            client: None,
        });
        drop(live);
        tracing::info!(mount = %spec.local_mount, "relay handed over to the upgraded server");
        return Ok((StreamEnd::HandedOver, started.elapsed()));
    }
    feeder.finish();
    drop(live);
    let end = ended?;
    tracing::info!(
        mount = %spec.local_mount,
        received = mount.source_bytes.load(Ordering::Relaxed),
        by = ?end.by(),
        "relay session ended: {end}"
    );
    Ok((end, started.elapsed()))
}

/// Feeds the upstream body into the mount until it ends, goes silent for `source-timeout`,
/// the mount is stopped, a stop is asked, or (on demand) no listener stayed for
/// [`ON_DEMAND_LINGER`]. The mount is registered (`live`) once its queue holds audio, or after
/// [`PRIME_LIMIT`] without any: a listener who joins then (the one who started an on-demand
/// relay) gets a burst at once instead of waiting on an empty queue.
///
/// Errors: the mount name was taken meanwhile ([`ReserveError`]).
#[allow(clippy::too_many_arguments)]
async fn pump(
    ctx: &Arc<ServerCtx>,
    stream: &mut ClientConn,
    mount: &Arc<Mount>,
    feeder: &mut Feeder,
    first: &[u8],
    stop: &mut StopSignal,
    on_demand: Option<&Notify>,
    live: &mut Option<LiveMount>,
) -> Result<StreamEnd, ReserveError> {
    let started = Instant::now();
    let register = |live: &mut Option<LiveMount>| -> Result<(), ReserveError> {
        if live.is_none() && (mount.queue.load().head > 0 || started.elapsed() >= PRIME_LIMIT) {
            *live = Some(LiveMount::reserve(ctx.clone(), mount.clone(), usize::MAX)?);
        }
        Ok(())
    };
    if !first.is_empty() {
        if let Err(e) = feeder.push(first) {
            return Ok(StreamEnd::BadStream(Peer::Upstream, e));
        }
    }
    register(live)?;
    let mut buf = vec![0u8; SOURCE_READ_BYTES];
    let timeout = ctx.config().source_timeout();
    let mut last_data = Instant::now();
    let mut last_listener = Instant::now();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            r = stream.read(&mut buf) => match r {
                Ok(0) => return Ok(StreamEnd::Closed(Peer::Upstream)),
                Ok(n) => {
                    last_data = Instant::now();
                    if let Err(e) = feeder.push(&buf[..n]) {
                        return Ok(StreamEnd::BadStream(Peer::Upstream, e));
                    }
                    register(live)?;
                }
                Err(e) => return Ok(StreamEnd::ReadFailed(Peer::Upstream, e)),
            },
            _ = tick.tick() => {
                register(live)?;
                if stop.is_set() {
                    return Ok(stop.end());
                }
                if mount.stop.load(Ordering::Relaxed) {
                    return Ok(StreamEnd::Killed);
                }
                if last_data.elapsed() >= timeout {
                    return Ok(StreamEnd::Silent { peer: Peer::Upstream, timeout });
                }
                if on_demand.is_some() {
                    if mount.listeners.load(Ordering::Relaxed) > 0 {
                        last_listener = Instant::now();
                    } else if last_listener.elapsed() >= ON_DEMAND_LINGER {
                        return Ok(StreamEnd::Idle);
                    }
                }
            }
            _ = stop.wait() => return Ok(stop.end()),
            _ = mount.handover.requested() => return Ok(StreamEnd::HandedOver),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_is_a_shutdown_only_when_the_server_shuts_down() {
        let (shutdown_tx, shutdown) = watch::channel(false);
        let (cancel_tx, cancel) = watch::channel(false);
        let signal = StopSignal { shutdown, cancel };
        cancel_tx.send(true).unwrap();
        assert!(matches!(signal.end(), StreamEnd::Stopped));
        shutdown_tx.send(true).unwrap();
        assert!(matches!(signal.end(), StreamEnd::Shutdown));
        let (shutdown_tx, shutdown) = watch::channel(false);
        let signal = StopSignal {
            shutdown,
            cancel: cancel_tx.subscribe(),
        };
        drop(shutdown_tx);
        assert!(matches!(signal.end(), StreamEnd::Shutdown));
        assert!(!signal.end().retryable());
    }

    #[test]
    fn relay_failures_are_the_upstreams_but_a_taken_local_mount() {
        let refused = RelayError::Refused {
            upstream: "http://o:8000/a".into(),
            status: 404,
            reason: "Not Found".into(),
        };
        assert_eq!(refused.by(), EndedBy::Upstream);
        assert_eq!(RelayError::Closed.by(), EndedBy::Upstream);
        assert_eq!(RelayError::HeadTimeout(5).by(), EndedBy::Upstream);
        assert_eq!(RelayError::Mount(ReserveError::InUse).by(), EndedBy::Server);
    }
}
