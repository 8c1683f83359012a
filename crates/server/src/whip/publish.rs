//! One WHIP publish: a task owning the mount's feeder and registration (as a source client's
//! task does, `ingest/source.rs`) and the publisher's current WebRTC session (a str0m `Rtc`,
//! ICE-lite, DTLS-SRTP, receiving one Opus track). Its datagrams come from the WHEP engines'
//! socket through their divert hook (`fanout/whep/divert.rs`) and its answers go out of a
//! clone of that socket. Each Opus packet received goes through the Ogg muxer (`ogg_mux.rs`)
//! into the feeder, so the mount is a live Ogg/Opus mount like any other.
//!
//! A new offer for the mount with the same credentials replaces the session
//! ([`Command::Replace`]): the feeder, the mount and its listeners stay, the Ogg stream goes on.
//! The publish ends on `DELETE` of its current resource, `killsource`, the server's shutdown, a
//! feeder error, or `source-timeout` without audio, reconnects or not (`liveness.rs`); then the
//! mount ends as any source's does and its listeners follow its fallback.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use str0m::change::SdpOffer;
use str0m::format::Codec;
use str0m::media::{MediaKind, Mid};
use str0m::net::{Protocol, Receive};
use str0m::rtp::Extension;
use str0m::{Candidate, Event, IceConnectionState, Input, Output, Rtc};
use tokio::sync::{mpsc, oneshot};

use super::liveness::Liveness;
use super::ogg_mux::OggOpusMux;
use crate::ctx::ServerCtx;
use crate::fanout::whep::divert::{Divert, Diverted, DIVERT_QUEUE};
use crate::fanout::whep::engine::audio_mid;
use crate::ingest::live_mount::LiveMount;
use crate::mount::feeder::Feeder;
use crate::mount::live::Mount;
use crate::mount::stream_end::{Peer, StreamEnd};
use crate::observe::access_log::AccessEntry;

/// How often a publish with nothing to do looks at `killsource` and its timeout.
const STOP_POLL: Duration = crate::ingest::source::STOP_POLL;

/// A connected session that sent media this recently is on the air ([`Publisher::is_connected`]):
/// above the 400 ms between an Opus DTX encoder's comfort-noise frames in silence, below the
/// second a dropped network leaves before its reconnect.
pub const ON_AIR: Duration = Duration::from_millis(750);

/// Why an offer cannot become a session.
#[derive(Debug, thiserror::Error)]
pub enum OfferError {
    /// The SDP does not parse or str0m cannot answer it.
    #[error("cannot answer the offer: {0}")]
    Bad(String),
    /// The answer has no audio section the publisher sends on.
    #[error("the offer has no audio section")]
    NoAudio,
    /// The audio section does not send (`recvonly` or `inactive`): a publish of it would be a
    /// silent live mount (issue 42).
    #[error("the offer's audio is {0}: a WHIP publisher must send (sendonly or sendrecv)")]
    NotSending(&'static str),
}

/// The handle of the publish on mount `name`, if any ([`ServerCtx::whip_publishers`] keeps
/// them type-erased: `ctx` sits below this layer).
pub fn find(ctx: &ServerCtx, name: &str) -> Option<Arc<Publisher>> {
    let any = ctx.whip_publishers.lock().get(name).cloned()?;
    any.downcast::<Publisher>().ok()
}

/// A publish's handle, kept by mount name in [`ServerCtx::whip_publishers`].
#[derive(Debug)]
pub struct Publisher {
    /// The source user the publish logged in as; an offer as the same user replaces its
    /// session.
    pub user: String,
    /// The resource id of the current session (`/whip/<mount>/<id>`).
    pub session_id: Mutex<String>,
    /// Whether the current session is on the air: connected (ICE and DTLS up) with media
    /// within [`ON_AIR`]; set by the task.
    connected: Arc<std::sync::atomic::AtomicBool>,
    commands: mpsc::UnboundedSender<Command>,
}

impl Publisher {
    /// Whether the publish's current session is on the air (connected, media within
    /// [`ON_AIR`]): a new offer is then refused (`409`), never taking the mount from a
    /// publisher that is sending (issue 42); one whose network dropped goes quiet at once, so
    /// its reconnect is taken.
    pub fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }

    /// Hands a reconnect's session to the publish; `false` when the publish has ended.
    pub fn replace(&self, session: NewSession) -> bool {
        let id = session.id.clone();
        let sent = self
            .commands
            .send(Command::Replace(Box::new(session)))
            .is_ok();
        if sent {
            *self.session_id.lock() = id;
        }
        sent
    }

    /// Ends the publish if `id` is its current session; whether it was.
    pub async fn stop(&self, id: &str) -> bool {
        let (tx, rx) = oneshot::channel();
        if self
            .commands
            .send(Command::Stop(id.to_owned(), tx))
            .is_err()
        {
            return false;
        }
        rx.await.unwrap_or(false)
    }
}

/// Commands to a publish task.
#[derive(Debug)]
enum Command {
    /// A reconnect: this session replaces the current one (boxed: an `Rtc` is ~10 KB).
    Replace(Box<NewSession>),
    /// `DELETE` of resource id: end the publish if it is the current session.
    Stop(String, oneshot::Sender<bool>),
}

/// The registration of a session's ufrag in the divert table, undone when dropped.
#[derive(Debug)]
struct Registration {
    divert: Arc<Divert>,
    ufrag: String,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.divert.unregister(&self.ufrag);
    }
}

/// A WebRTC session answered and registered for its datagrams, not yet run.
pub struct NewSession {
    /// Its resource id (32 hex digits).
    pub id: String,
    rtc: Rtc,
    mid: Mid,
    datagrams: mpsc::Receiver<Diverted>,
    _registration: Registration,
}

impl std::fmt::Debug for NewSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewSession")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Answers `offer` at `now` with a session whose ICE candidate is `candidate` (the first WHEP
/// engine's address), registered in `divert`; returns it and the SDP answer.
///
/// Errors: [`OfferError`] when the offer cannot be answered or has no audio.
pub fn answer(
    offer: &str,
    candidate: SocketAddr,
    divert: &Arc<Divert>,
    now: Instant,
) -> Result<(NewSession, String), OfferError> {
    let sdp = SdpOffer::from_sdp_string(offer).map_err(|e| OfferError::Bad(e.to_string()))?;
    let mut rtc = Rtc::builder()
        .set_ice_lite(true)
        .clear_codecs()
        .enable_opus(true, false)
        .clear_extension_map()
        .set_extension(4, Extension::RtpMid)
        .build(now);
    let cand = Candidate::host(candidate, "udp").map_err(|e| OfferError::Bad(e.to_string()))?;
    rtc.add_local_candidate(cand);
    let answer = rtc
        .sdp_api()
        .accept_offer(sdp)
        .map_err(|e| OfferError::Bad(e.to_string()))?;
    let mid = audio_mid(offer)
        .filter(|m| rtc.media(*m).is_some_and(|m| m.kind() == MediaKind::Audio))
        .ok_or(OfferError::NoAudio)?;
    // Our side of the answer receives only if the publisher sends.
    let ours = rtc.media(mid).map(|m| m.direction());
    if !ours.is_some_and(|d| d.is_receiving()) {
        let theirs = if ours.is_some_and(|d| d.is_sending()) {
            "recvonly"
        } else {
            "inactive"
        };
        return Err(OfferError::NotSending(theirs));
    }
    let ufrag = rtc.direct_api().local_ice_credentials().ufrag;
    let (tx, datagrams) = mpsc::channel(DIVERT_QUEUE);
    divert.register(ufrag.clone(), tx);
    let session = NewSession {
        id: format!("{:032x}", rand::random::<u128>()),
        rtc,
        mid,
        datagrams,
        _registration: Registration {
            divert: divert.clone(),
            ufrag,
        },
    };
    Ok((session, answer.to_sdp_string()))
}

/// What the publish's access-log line and log lines say about its first request.
#[derive(Debug, Clone)]
pub struct Origin {
    /// The publisher's address (of its first `POST`).
    pub peer: SocketAddr,
    /// Its request line.
    pub request_line: String,
    /// Its `User-Agent`.
    pub agent: Option<String>,
    /// Its `Referer`.
    pub referer: Option<String>,
}

/// Starts the publish of `mount` (registered by `live`, fed through `feeder`) with its first
/// `session`, as source `user`; registers its handle in `ctx` and spawns its task.
pub fn start(
    ctx: Arc<ServerCtx>,
    mount: Arc<Mount>,
    feeder: Feeder,
    live: LiveMount,
    session: NewSession,
    user: String,
    origin: Origin,
) -> Arc<Publisher> {
    let (tx, commands) = mpsc::unbounded_channel();
    let connected = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let publisher = Arc::new(Publisher {
        user,
        session_id: Mutex::new(session.id.clone()),
        connected: connected.clone(),
        commands: tx,
    });
    ctx.whip_publishers
        .lock()
        .insert(mount.name.clone(), publisher.clone());
    let handle = publisher.clone();
    tokio::spawn(async move {
        let run = Run {
            mount,
            feeder,
            mux: OggOpusMux::new(rand::random()),
            liveness: Liveness::new(Instant::now(), ctx.config().source_timeout()),
            session: Some(Session::from(session)),
            commands,
            connected,
        };
        run.go(ctx, live, handle, origin).await;
    });
    publisher
}

/// The session being run.
struct Session {
    id: String,
    /// Its peer connected (str0m's `Event::Connected`).
    connected: bool,
    /// When its last media packet came.
    last_media: Option<Instant>,
    rtc: Rtc,
    mid: Mid,
    datagrams: mpsc::Receiver<Diverted>,
    _registration: Registration,
}

impl From<NewSession> for Session {
    fn from(s: NewSession) -> Session {
        Session {
            id: s.id,
            connected: false,
            last_media: None,
            rtc: s.rtc,
            mid: s.mid,
            datagrams: s.datagrams,
            _registration: s._registration,
        }
    }
}

/// Why a drive of the session stopped.
enum DriveEnd {
    /// The session is over (ICE gave up, DTLS failed): wait for a reconnect.
    SessionGone(String),
    /// The feeder refused the stream: the publish ends.
    Feed(StreamEnd),
}

/// What woke the task.
enum Wake {
    Datagram(Option<Diverted>),
    Timer,
    Command(Option<Command>),
    Shutdown,
}

/// The task's state.
struct Run {
    mount: Arc<Mount>,
    feeder: Feeder,
    mux: OggOpusMux,
    liveness: Liveness,
    session: Option<Session>,
    commands: mpsc::UnboundedReceiver<Command>,
    /// The current session is connected (shared with [`Publisher::is_connected`]).
    connected: Arc<std::sync::atomic::AtomicBool>,
}

impl Run {
    /// Runs the publish until it ends, then ends the mount and logs.
    async fn go(
        mut self,
        ctx: Arc<ServerCtx>,
        live: LiveMount,
        handle: Arc<Publisher>,
        origin: Origin,
    ) {
        let started = Instant::now();
        let socket = match ctx.whep.as_ref() {
            Some(w) => w.divert_socket().1,
            None => return,
        };
        let name = self.mount.name.clone();
        let end = self.feed(&ctx, &socket).await;
        // The handle goes first, so a reconnect from now on starts a new publish.
        {
            let mut map = ctx.whip_publishers.lock();
            let ours = Arc::as_ptr(&handle).cast::<()>();
            if map
                .get(&name)
                .is_some_and(|p| Arc::as_ptr(p).cast::<()>() == ours)
            {
                map.remove(&name);
            }
        }
        self.session = None;
        let tail = self.mux.flush();
        if !tail.is_empty() {
            let _ = self.feeder.push(&tail);
        }
        self.feeder.finish();
        drop(live);
        let received = self.mount.source_bytes.load(Ordering::Relaxed);
        let stats = self.mux.stats();
        tracing::info!(
            peer = %origin.peer,
            mount = %name,
            received,
            audio_secs = self.mux.granule() / 48_000,
            packets = stats.packets,
            filled = stats.filled,
            late = stats.late,
            skipped = stats.skipped,
            by = ?end.by(),
            "WHIP publish ended: {end}"
        );
        ctx.access_log.log(&AccessEntry {
            ip: origin.peer.ip(),
            user: Some(&handle.user),
            request_line: &origin.request_line,
            status: 201,
            bytes: received,
            referer: origin.referer.as_deref(),
            agent: origin.agent.as_deref(),
            duration_secs: started.elapsed().as_secs(),
            end: None,
        });
    }

    /// Feeds the mount until the publish ends; why it ended.
    async fn feed(&mut self, ctx: &ServerCtx, socket: &UdpSocket) -> StreamEnd {
        let headers = self.mux.headers();
        if let Err(e) = self.feeder.push(&headers) {
            return StreamEnd::BadStream(Peer::Client, e);
        }
        let mut shutdown = ctx.shutdown.clone();
        let timeout = ctx.config().source_timeout();
        loop {
            let now = Instant::now();
            let mut next = now + STOP_POLL;
            self.connected.store(
                self.session.as_ref().is_some_and(|s| {
                    s.connected && s.last_media.is_some_and(|t| t.elapsed() < ON_AIR)
                }),
                Ordering::Relaxed,
            );
            if let Some(s) = &mut self.session {
                match drive(
                    s,
                    socket,
                    &mut self.mux,
                    &mut self.feeder,
                    &mut self.liveness,
                ) {
                    Ok(t) => next = next.min(t),
                    Err(DriveEnd::Feed(end)) => return end,
                    Err(DriveEnd::SessionGone(why)) => {
                        tracing::info!(mount = %self.mount.name, "WHIP session lost ({why}); waiting for a reconnect");
                        self.session = None;
                    }
                }
            }
            if self.mount.stop.load(Ordering::Relaxed) {
                return StreamEnd::Killed;
            }
            if self.liveness.expired(now) {
                return StreamEnd::Silent {
                    peer: Peer::Client,
                    timeout,
                };
            }
            let wake = {
                let datagram = async {
                    match &mut self.session {
                        Some(s) => s.datagrams.recv().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    d = datagram => Wake::Datagram(d),
                    _ = tokio::time::sleep_until(next.into()) => Wake::Timer,
                    c = self.commands.recv() => Wake::Command(c),
                    _ = shutdown.changed() => Wake::Shutdown,
                }
            };
            match wake {
                Wake::Datagram(Some(d)) => {
                    let Some(s) = &mut self.session else { continue };
                    let Ok(contents) = d.data.as_slice().try_into() else {
                        continue;
                    };
                    let input = Input::Receive(
                        d.at,
                        Receive {
                            proto: Protocol::Udp,
                            source: d.source,
                            destination: d.destination,
                            contents,
                        },
                    );
                    if let Err(e) = s.rtc.handle_input(input) {
                        tracing::debug!(id = %s.id, "WHIP input refused: {e}");
                    }
                }
                Wake::Datagram(None) => self.session = None,
                Wake::Timer => {
                    if let Some(s) = &mut self.session {
                        if s.rtc.handle_input(Input::Timeout(Instant::now())).is_err() {
                            self.session = None;
                        }
                    }
                }
                Wake::Command(Some(Command::Replace(new))) => {
                    tracing::info!(mount = %self.mount.name, "WHIP publisher reconnected");
                    if let Some(mut old) = self.session.take() {
                        old.rtc.disconnect();
                    }
                    self.session = Some(Session::from(*new));
                    self.mux.restart();
                }
                Wake::Command(Some(Command::Stop(id, reply))) => {
                    let current = self.session.as_ref().is_some_and(|s| s.id == id);
                    let _ = reply.send(current);
                    if current {
                        return StreamEnd::Closed(Peer::Client);
                    }
                }
                Wake::Command(None) => return StreamEnd::Stopped,
                Wake::Shutdown => return StreamEnd::Shutdown,
            }
        }
    }
}

/// Polls the session's output: sends its datagrams on `socket`, muxes its audio into
/// `feeder`; returns when str0m next wants the time.
fn drive(
    s: &mut Session,
    socket: &UdpSocket,
    mux: &mut OggOpusMux,
    feeder: &mut Feeder,
    liveness: &mut Liveness,
) -> Result<Instant, DriveEnd> {
    if !s.rtc.is_alive() {
        return Err(DriveEnd::SessionGone("closed".into()));
    }
    loop {
        match s.rtc.poll_output() {
            Ok(Output::Timeout(t)) => return Ok(t),
            Ok(Output::Transmit(t)) => {
                // Non-blocking: a full socket buffer drops the datagram, as for viewers.
                let _ = socket.send_to(&t.contents, t.destination);
            }
            Ok(Output::Event(Event::MediaData(m))) => {
                if m.mid != s.mid || m.params.spec().codec != Codec::Opus {
                    continue;
                }
                liveness.media(Instant::now());
                s.last_media = Some(Instant::now());
                let pages = mux.push(m.time.numer(), &m.data);
                if !pages.is_empty() {
                    feeder
                        .push(&pages)
                        .map_err(|e| DriveEnd::Feed(StreamEnd::BadStream(Peer::Client, e)))?;
                }
            }
            Ok(Output::Event(Event::Connected)) => {
                s.connected = true;
                tracing::info!("WHIP publisher connected");
            }
            Ok(Output::Event(Event::IceConnectionStateChange(
                IceConnectionState::Disconnected,
            ))) => {
                return Err(DriveEnd::SessionGone("ICE disconnected".into()));
            }
            Ok(Output::Event(_)) => {}
            Err(e) => return Err(DriveEnd::SessionGone(e.to_string())),
        }
    }
}
