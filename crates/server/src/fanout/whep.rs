//! The WHEP media engine: one thread owns the WebRTC UDP socket and every viewer's str0m `Rtc`
//! (ICE-lite, DTLS-SRTP, one audio track), and feeds each viewer the Opus packets of its mount's
//! queue, read like a listener reads it (from the live edge, following fallbacks when the mount
//! ends). Incoming datagrams go to the session whose `Rtc::accepts` them (remembered by source
//! address). This is a first step towards the goal of doing this work on the fan-out
//! shards: one thread per UDP socket drives all sessions here.
//!
//! Ogg pages become Opus packets with continuous RTP timestamps in
//! `throng_proto::opus_rtp`; this file is only the I/O and the session bookkeeping.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use str0m::change::SdpOffer;
use str0m::format::Codec;
use str0m::media::{Frequency, MediaKind, MediaTime, Mid};
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, IceConnectionState, Input, Output, Rtc};
use throng_proto::ogg;
use throng_proto::opus_rtp::{OpusDepacketizer, OpusPacket};

use crate::fanout::shard::ListenerRow;
use crate::mount::live::Mount;
use crate::mount::registry::{Fallback, Registry};
use crate::observe::metrics::{Metrics, MountLabel};

/// How often the engine looks at the queues for new pages when no datagram wakes it.
pub const MEDIA_TICK: Duration = Duration::from_millis(10);

/// A session whose peer never completes ICE and DTLS within this time is closed.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// A session whose mount ended with no live fallback is closed after this long.
pub const ENDED_GRACE: Duration = Duration::from_secs(10);

/// A viewer whose receiver reports show more loss than this fraction is degraded (issue 16).
pub const DEGRADED_LOSS: f32 = 0.01;

/// A connected viewer that sent no new receiver report for this long is degraded.
pub const REPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// How often the degraded-viewers gauges are recomputed.
pub const HEALTH_INTERVAL: Duration = Duration::from_secs(1);

/// What the server knows of a viewer's reception, from its RTCP receiver reports (RFC 3550
/// §6.4.2) as str0m sums them up.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ViewerHealth {
    /// When ICE and DTLS completed (`None`: not yet).
    pub connected_at: Option<Instant>,
    /// Highest sequence number reported received, and when that report arrived.
    pub last_report: Option<(u64, Instant)>,
    /// Fraction of packets lost in the reports of the last stats interval (0 to 1).
    pub loss: f32,
    /// Round-trip time from the last report.
    pub rtt: Option<Duration>,
}

impl ViewerHealth {
    /// Takes a stats event's reception figures in, at `now`.
    pub fn update(
        &mut self,
        max_seq: Option<u64>,
        loss: Option<f32>,
        rtt: Option<Duration>,
        now: Instant,
    ) {
        if let Some(seq) = max_seq {
            if self.last_report.is_none_or(|(s, _)| s != seq) {
                self.last_report = Some((seq, now));
            }
        }
        if let Some(l) = loss {
            self.loss = l;
        }
        if rtt.is_some() {
            self.rtt = rtt;
        }
    }

    /// Whether the viewer is degraded at `now`: connected, and with over [`DEGRADED_LOSS`]
    /// loss or no new report for [`REPORT_TIMEOUT`] (counted from the connection when none
    /// came yet). A viewer still connecting is not counted.
    pub fn is_degraded(&self, now: Instant) -> bool {
        let Some(connected) = self.connected_at else {
            return false;
        };
        let last = self.last_report.map_or(connected, |(_, t)| t);
        self.loss > DEGRADED_LOSS || now.saturating_duration_since(last) > REPORT_TIMEOUT
    }
}

/// A packet later than this behind its schedule re-anchors the pacing at now.
pub const MAX_LATE: Duration = Duration::from_millis(200);

/// A packet due further ahead than this (a source running fast) re-anchors the pacing at now.
pub const MAX_AHEAD: Duration = Duration::from_secs(3);

/// Sends Opus packets in real time: the first packet is due at once, each next one when its
/// RTP timestamp (48 kHz) says, relative to that anchor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pacer {
    anchor: Option<(Instant, u64)>,
}

impl Pacer {
    /// When the packet with extended RTP timestamp `ts` is due, at `now`; re-anchors (due
    /// now) on the first packet, a timestamp before the anchor, a packet over [`MAX_LATE`]
    /// late or over [`MAX_AHEAD`] early.
    pub fn due(&mut self, ts: u64, now: Instant) -> Instant {
        if let Some((t0, ts0)) = self.anchor {
            if ts >= ts0 {
                let due = t0 + Duration::from_micros((ts - ts0) * 1_000_000 / 48_000);
                if due + MAX_LATE >= now && due <= now + MAX_AHEAD {
                    return due;
                }
            }
        }
        self.anchor = Some((now, ts));
        now
    }
}

/// Why a WHEP session could not be created.
#[derive(Debug, thiserror::Error)]
pub enum WhepError {
    /// The SDP offer does not parse (RFC 8866) or str0m refuses it.
    #[error("bad SDP offer: {0}")]
    BadOffer(String),
    /// The offer has no audio media section str0m can answer with Opus.
    #[error("the offer has no audio section accepting Opus")]
    NoAudio,
    /// The engine thread is gone (server shutting down).
    #[error("WebRTC engine stopped")]
    Stopped,
}

/// A viewer to add: the mount it plays and who it is.
#[derive(Debug)]
pub struct NewViewer {
    /// The mount served (the requested one or a live fallback); a listener slot is already
    /// taken on it (`Mount::try_add_listener`).
    pub mount: Arc<Mount>,
    /// The mount the viewer asked for (fallbacks are followed from it).
    pub requested: String,
    /// The SDP offer (`application/sdp`).
    pub offer: String,
    /// Client address.
    pub peer: SocketAddr,
    /// Listener id (`listclients`, `killclient`), from `ServerCtx::next_id`.
    pub listener_id: u64,
    /// `User-Agent` of the POST, if sent.
    pub agent: Option<String>,
    /// `Referer` of the POST, if sent.
    pub referer: Option<String>,
    /// Authenticated user, if any.
    pub user: Option<String>,
}

/// A created session: its unguessable resource id and the SDP answer.
#[derive(Debug, Clone)]
pub struct Created {
    /// Session id (the last segment of the WHEP resource URL).
    pub id: String,
    /// The SDP answer.
    pub answer: String,
}

/// Commands to the engine thread.
enum Command {
    Add(
        NewViewer,
        tokio::sync::oneshot::Sender<Result<Created, WhepError>>,
    ),
    Remove(String, tokio::sync::oneshot::Sender<bool>),
    List(
        Option<String>,
        tokio::sync::oneshot::Sender<Vec<ListenerRow>>,
    ),
    Kill(u64, tokio::sync::oneshot::Sender<bool>),
}

/// Handle to the engine thread.
#[derive(Debug, Clone)]
pub struct WhepEngine {
    tx: mpsc::Sender<Command>,
    sessions: Arc<AtomicUsize>,
    local: SocketAddr,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Command::Add(v, _) => write!(f, "Add({})", v.requested),
            Command::Remove(id, _) => write!(f, "Remove({id})"),
            Command::List(m, _) => write!(f, "List({m:?})"),
            Command::Kill(id, _) => write!(f, "Kill({id})"),
        }
    }
}

impl WhepEngine {
    /// Binds `listen` and starts the engine thread; `public` replaces the address in the ICE
    /// candidate. Errors: the socket cannot be bound.
    pub fn start(
        listen: SocketAddr,
        public: Option<IpAddr>,
        registry: Arc<Registry>,
        metrics: Arc<Metrics>,
    ) -> std::io::Result<WhepEngine> {
        // The pure-Rust crypto backend (a no-op when one is installed already).
        str0m::crypto::from_feature_flags().install_process_default();
        let socket = UdpSocket::bind(listen)?;
        let local = socket.local_addr()?;
        let candidate = SocketAddr::new(public.unwrap_or(local.ip()), local.port());
        let (tx, rx) = mpsc::channel();
        let sessions = Arc::new(AtomicUsize::new(0));
        let mut engine = Engine {
            socket,
            candidate,
            rx,
            registry,
            metrics,
            sessions: HashMap::new(),
            by_addr: HashMap::new(),
            count: sessions.clone(),
        };
        std::thread::Builder::new()
            .name("whep".into())
            .spawn(move || engine.run())?;
        Ok(WhepEngine {
            tx,
            sessions,
            local: candidate,
        })
    }

    /// The UDP address announced to peers.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Open sessions.
    pub fn sessions(&self) -> usize {
        self.sessions.load(Ordering::Relaxed)
    }

    /// Creates a session for `viewer`: returns its id and SDP answer. On error the listener
    /// slot taken on `viewer.mount` is given back.
    pub async fn add(&self, viewer: NewViewer) -> Result<Created, WhepError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let mount = viewer.mount.clone();
        if self.tx.send(Command::Add(viewer, tx)).is_err() {
            mount.remove_listener();
            return Err(WhepError::Stopped);
        }
        rx.await.unwrap_or(Err(WhepError::Stopped))
    }

    /// Ends session `id`; `false` when there is none.
    pub async fn remove(&self, id: &str) -> bool {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if self.tx.send(Command::Remove(id.to_owned(), tx)).is_err() {
            return false;
        }
        rx.await.unwrap_or(false)
    }

    /// The viewers on `mount` (all when `None`) as listener rows, sorted by id.
    pub async fn list(&self, mount: Option<&str>) -> Vec<ListenerRow> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if self
            .tx
            .send(Command::List(mount.map(str::to_owned), tx))
            .is_err()
        {
            return Vec::new();
        }
        rx.await.unwrap_or_default()
    }

    /// Disconnects the viewer with listener id `id`; `false` when there is none.
    pub async fn kill(&self, id: u64) -> bool {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if self.tx.send(Command::Kill(id, tx)).is_err() {
            return false;
        }
        rx.await.unwrap_or(false)
    }
}

/// One viewer.
struct Session {
    rtc: Rtc,
    mount: Arc<Mount>,
    requested: String,
    mid: Mid,
    /// Next absolute queue offset to read; `None` until the first read (live edge).
    pos: Option<u64>,
    depack: OpusDepacketizer,
    /// Last RTP timestamp written, extended to 64 bits.
    ext_ts: Option<(u32, u64)>,
    created: Instant,
    connected: bool,
    health: ViewerHealth,
    /// Listener id, agent, referer, user.
    listener_id: u64,
    agent: Option<String>,
    referer: Option<String>,
    user: Option<String>,
    /// Opus payload bytes written.
    sent: u64,
    /// Packets read but not yet due (extended RTP timestamp, payload).
    outbox: std::collections::VecDeque<(u64, Vec<u8>)>,
    pacer: Pacer,
    /// When the session must next be driven (its str0m timeout, or now after input).
    wake: Instant,
    ended_since: Option<Instant>,
    peer: SocketAddr,
}

/// The engine thread's state.
struct Engine {
    socket: UdpSocket,
    candidate: SocketAddr,
    rx: mpsc::Receiver<Command>,
    registry: Arc<Registry>,
    metrics: Arc<Metrics>,
    sessions: HashMap<String, Session>,
    by_addr: HashMap<SocketAddr, String>,
    count: Arc<AtomicUsize>,
}

impl Engine {
    fn run(&mut self) {
        let mut buf = vec![0u8; 2000];
        let mut packets = Vec::new();
        let mut next_media = Instant::now();
        let mut next_health = Instant::now() + HEALTH_INTERVAL;
        let mut gauged: std::collections::HashSet<String> = Default::default();
        loop {
            loop {
                match self.rx.try_recv() {
                    Ok(cmd) => self.command(cmd),
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => {
                        self.close_all();
                        return;
                    }
                }
            }
            let now = Instant::now();
            if now >= next_media {
                self.pump_media(now, &mut packets);
                next_media = now + MEDIA_TICK;
            }
            if now >= next_health {
                self.gauge_health(now, &mut gauged);
                next_health = now + HEALTH_INTERVAL;
            }
            // Drive the sessions that are due (their timeout passed, they got input or media);
            // the earliest next timeout bounds the wait.
            let now = Instant::now();
            let due: Vec<String> = self
                .sessions
                .iter()
                .filter(|(_, s)| s.wake <= now)
                .map(|(id, _)| id.clone())
                .collect();
            for id in due {
                self.drive_and_schedule(&id);
            }
            let wake = self
                .sessions
                .values()
                .map(|s| s.wake)
                .min()
                .unwrap_or(next_media)
                .min(next_media)
                .min(next_health);
            let wait = wake
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1));
            let _ = self.socket.set_read_timeout(Some(wait));
            match self.socket.recv_from(&mut buf) {
                Ok((n, source)) => self.receive(&buf[..n], source),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => tracing::debug!("WebRTC socket: {e}"),
            }
            // Read whatever else is waiting without blocking.
            let _ = self.socket.set_nonblocking(true);
            for _ in 0..256 {
                match self.socket.recv_from(&mut buf) {
                    Ok((n, source)) => self.receive(&buf[..n], source),
                    Err(_) => break,
                }
            }
            let _ = self.socket.set_nonblocking(false);
        }
    }

    /// Sets each mount's degraded-viewers gauge (zero for mounts whose viewers all left).
    fn gauge_health(&mut self, now: Instant, gauged: &mut std::collections::HashSet<String>) {
        let mut counts: HashMap<String, i64> = HashMap::new();
        for s in self.sessions.values() {
            let n = counts.entry(s.mount.name.clone()).or_default();
            *n += i64::from(s.health.is_degraded(now));
        }
        for name in gauged.iter() {
            if !counts.contains_key(name) {
                self.metrics
                    .whep_degraded
                    .get_or_create(&MountLabel::new(name))
                    .set(0);
            }
        }
        for (name, n) in &counts {
            self.metrics
                .whep_degraded
                .get_or_create(&MountLabel::new(name))
                .set(*n);
        }
        *gauged = counts.into_keys().collect();
    }

    fn command(&mut self, cmd: Command) {
        match cmd {
            Command::Add(viewer, reply) => {
                let mount = viewer.mount.clone();
                let result = self.add(viewer);
                if result.is_err() {
                    mount.remove_listener();
                }
                let _ = reply.send(result);
            }
            Command::Remove(id, reply) => {
                let found = self.sessions.contains_key(&id);
                if found {
                    self.close(&id, "DELETE");
                }
                let _ = reply.send(found);
            }
            Command::List(mount, reply) => {
                let mut rows: Vec<ListenerRow> = self
                    .sessions
                    .values()
                    .filter(|s| mount.as_ref().is_none_or(|m| *m == s.mount.name))
                    .map(|s| ListenerRow {
                        id: s.listener_id,
                        ip: s.peer.ip(),
                        agent: s.agent.clone(),
                        referer: s.referer.clone(),
                        user: s.user.clone(),
                        connected_secs: s.created.elapsed().as_secs(),
                        mount: s.mount.name.clone(),
                        requested_mount: s.requested.clone(),
                        lag_bytes: 0,
                        sent: s.sent,
                    })
                    .collect();
                rows.sort_by_key(|r| r.id);
                let _ = reply.send(rows);
            }
            Command::Kill(listener_id, reply) => {
                let id = self
                    .sessions
                    .iter()
                    .find(|(_, s)| s.listener_id == listener_id)
                    .map(|(id, _)| id.clone());
                if let Some(id) = &id {
                    self.close(id, "killed by the admin");
                }
                let _ = reply.send(id.is_some());
            }
        }
    }

    fn add(&mut self, viewer: NewViewer) -> Result<Created, WhepError> {
        let offer = SdpOffer::from_sdp_string(&viewer.offer)
            .map_err(|e| WhepError::BadOffer(e.to_string()))?;
        let now = Instant::now();
        let mut rtc = Rtc::builder()
            .set_ice_lite(true)
            .clear_codecs()
            .enable_opus(true, false)
            .set_stats_interval(Some(Duration::from_secs(1)))
            .build(now);
        let cand = Candidate::host(self.candidate, "udp")
            .map_err(|e| WhepError::BadOffer(e.to_string()))?;
        rtc.add_local_candidate(cand);
        let answer = rtc
            .sdp_api()
            .accept_offer(offer)
            .map_err(|e| WhepError::BadOffer(e.to_string()))?;
        // The audio section of the offer, which the answer accepted.
        let mid = audio_mid(&viewer.offer).filter(|m| {
            rtc.media(*m)
                .is_some_and(|media| media.kind() == MediaKind::Audio)
        });
        let mid = mid.ok_or(WhepError::NoAudio)?;
        let id = format!(
            "{:016x}{:016x}",
            rand::random::<u64>(),
            rand::random::<u64>()
        );
        let label = MountLabel::new(&viewer.mount.name);
        self.metrics.connects.get_or_create(&label).inc();
        self.metrics.listeners.get_or_create(&label).inc();
        tracing::debug!(peer = %viewer.peer, mount = %viewer.mount.name, %id, "WHEP session created");
        self.sessions.insert(
            id.clone(),
            Session {
                rtc,
                mount: viewer.mount,
                requested: viewer.requested,
                mid,
                pos: None,
                depack: OpusDepacketizer::new(rand::random()),
                ext_ts: None,
                created: now,
                connected: false,
                health: ViewerHealth::default(),
                listener_id: viewer.listener_id,
                agent: viewer.agent,
                referer: viewer.referer,
                user: viewer.user,
                sent: 0,
                outbox: Default::default(),
                pacer: Pacer::default(),
                wake: now,
                ended_since: None,
                peer: viewer.peer,
            },
        );
        self.count.store(self.sessions.len(), Ordering::Relaxed);
        Ok(Created {
            id,
            answer: answer.to_sdp_string(),
        })
    }

    fn close(&mut self, id: &str, why: &str) {
        if let Some(mut s) = self.sessions.remove(id) {
            s.rtc.disconnect();
            s.mount.remove_listener();
            let label = MountLabel::new(&s.mount.name);
            self.metrics.listeners.get_or_create(&label).dec();
            self.by_addr.retain(|_, v| v != id);
            tracing::debug!(peer = %s.peer, mount = %s.mount.name, %id, "WHEP session closed: {why}");
        }
        self.count.store(self.sessions.len(), Ordering::Relaxed);
    }

    fn close_all(&mut self) {
        let ids: Vec<String> = self.sessions.keys().cloned().collect();
        for id in ids {
            self.close(&id, "shutdown");
        }
    }

    /// Polls one session's output until its next timeout; `None` when it is dead.
    fn drive(&mut self, id: &str) -> Option<Instant> {
        let s = self.sessions.get_mut(id)?;
        if !s.rtc.is_alive() {
            return None;
        }
        if !s.connected && s.created.elapsed() > CONNECT_TIMEOUT {
            return None;
        }
        loop {
            match s.rtc.poll_output() {
                Ok(Output::Timeout(t)) => {
                    if t <= Instant::now() {
                        if s.rtc.handle_input(Input::Timeout(Instant::now())).is_err() {
                            return None;
                        }
                        continue;
                    }
                    return Some(t);
                }
                Ok(Output::Transmit(t)) => {
                    let _ = self.socket.send_to(&t.contents, t.destination);
                }
                Ok(Output::Event(e)) => match e {
                    Event::Connected => {
                        s.connected = true;
                        s.health.connected_at = Some(Instant::now());
                    }
                    Event::MediaEgressStats(st) => s.health.update(
                        st.remote.map(|r| *r.maximum_sequence_number),
                        st.loss,
                        st.rtt,
                        Instant::now(),
                    ),
                    Event::IceConnectionStateChange(IceConnectionState::Disconnected) => {
                        return None;
                    }
                    _ => {}
                },
                Err(e) => {
                    tracing::debug!(%id, "WebRTC session error: {e}");
                    return None;
                }
            }
        }
    }

    fn receive(&mut self, data: &[u8], source: SocketAddr) {
        let Ok(contents) = data.try_into() else {
            return;
        };
        let input = Input::Receive(
            Instant::now(),
            Receive {
                proto: Protocol::Udp,
                source,
                destination: self.candidate,
                contents,
            },
        );
        let id = match self.by_addr.get(&source) {
            Some(id) if self.sessions.get(id).is_some_and(|s| s.rtc.accepts(&input)) => id.clone(),
            _ => {
                let Some(id) = self
                    .sessions
                    .iter()
                    .find(|(_, s)| s.rtc.accepts(&input))
                    .map(|(id, _)| id.clone())
                else {
                    return;
                };
                self.by_addr.insert(source, id.clone());
                id
            }
        };
        if let Some(s) = self.sessions.get_mut(&id) {
            if let Err(e) = s.rtc.handle_input(input) {
                tracing::debug!(%id, "WebRTC input refused: {e}");
            }
            s.wake = Instant::now();
        }
    }

    /// Drives session `id` and records its next timeout, or closes it when it is dead.
    fn drive_and_schedule(&mut self, id: &str) {
        match self.drive(id) {
            Some(t) => {
                if let Some(s) = self.sessions.get_mut(id) {
                    s.wake = t;
                }
            }
            None => self.close(id, "peer gone"),
        }
    }

    /// Reads each connected session's mount queue and writes the new Opus packets.
    fn pump_media(&mut self, now: Instant, packets: &mut Vec<OpusPacket>) {
        let mut ended = Vec::new();
        for (id, s) in self.sessions.iter_mut() {
            if !s.connected {
                continue;
            }
            packets.clear();
            if !read_queue(s, &self.registry, &self.metrics, packets) {
                let since = *s.ended_since.get_or_insert(now);
                if now.duration_since(since) > ENDED_GRACE {
                    ended.push(id.clone());
                }
                continue;
            }
            s.ended_since = None;
            let Some(pt) = s.rtc.writer(s.mid).and_then(|w| {
                w.payload_params()
                    .find(|p| p.spec().codec == Codec::Opus)
                    .map(|p| p.pt())
            }) else {
                continue;
            };
            for p in packets.drain(..) {
                let ext = match s.ext_ts {
                    None => u64::from(p.rtp_ts),
                    Some((last, ext)) => {
                        ext.wrapping_add(i64::from(p.rtp_ts.wrapping_sub(last) as i32) as u64)
                    }
                };
                s.ext_ts = Some((p.rtp_ts, ext));
                s.outbox.push_back((ext, p.data));
            }
            // Paced: each packet goes when its media time is due (an Ogg page brings up to
            // a second of packets at once).
            while let Some((ext, _)) = s.outbox.front() {
                if s.pacer.due(*ext, now) > now {
                    break;
                }
                let Some((ext, data)) = s.outbox.pop_front() else {
                    break;
                };
                let Some(writer) = s.rtc.writer(s.mid) else {
                    break;
                };
                s.sent += data.len() as u64;
                s.wake = now;
                let time = MediaTime::new(ext, Frequency::FORTY_EIGHT_KHZ);
                if let Err(e) = writer.write(pt, now, time, data) {
                    tracing::debug!(%id, "WebRTC write: {e}");
                }
            }
        }
        for id in ended {
            self.close(&id, "mount ended");
        }
    }
}

/// Reads the pages added to `s`'s mount since its position into `out`, switching to a live
/// fallback when the mount ended; `false` when the mount ended with nowhere to go.
fn read_queue(
    s: &mut Session,
    registry: &Registry,
    metrics: &Metrics,
    out: &mut Vec<OpusPacket>,
) -> bool {
    let mut q = s.mount.queue.load();
    if q.ended && s.pos.is_none_or(|p| p >= q.head) {
        match registry.fallback_target(&s.mount) {
            Fallback::Live(m) if !Arc::ptr_eq(&m, &s.mount) => {
                tracing::debug!(from = %s.mount.name, to = %m.name, requested = %s.requested, "WHEP viewer follows fallback");
                s.mount.remove_listener();
                metrics
                    .listeners
                    .get_or_create(&MountLabel::new(&s.mount.name))
                    .dec();
                m.force_add_listener();
                metrics
                    .listeners
                    .get_or_create(&MountLabel::new(&m.name))
                    .inc();
                s.mount = m;
                s.pos = None;
                q = s.mount.queue.load();
            }
            Fallback::Starting => return true,
            _ => return false,
        }
    }
    let pos = match s.pos {
        Some(p) if p >= q.tail() => p,
        _ => {
            // Join (or rejoin after lagging) at the live edge: the current header pages, then
            // the newest chunk.
            let start = q.chunks.last().map_or(q.head, |c| c.start);
            let headers = q
                .chunks
                .last()
                .and_then(|c| {
                    if c.is_header {
                        None
                    } else {
                        c.ogg_headers.clone()
                    }
                })
                .or_else(|| {
                    if q.chunks.is_empty() {
                        q.ogg_headers.clone()
                    } else {
                        None
                    }
                });
            if let Some(h) = headers {
                push_pages(&mut s.depack, &h, out);
            }
            start
        }
    };
    let mut at = pos;
    if let Some(i) = q.chunk_index(pos) {
        for c in &q.chunks[i..] {
            let skip = at.saturating_sub(c.start) as usize;
            push_pages(&mut s.depack, &c.data[skip.min(c.data.len())..], out);
            at = c.end();
        }
    }
    s.pos = Some(at.max(pos));
    true
}

/// The `a=mid` of the first audio media section of an SDP (RFC 8866 §5.14, RFC 8843 §15).
fn audio_mid(sdp: &str) -> Option<Mid> {
    let mut in_audio = false;
    for line in sdp.lines() {
        let line = line.trim_end();
        if let Some(m) = line.strip_prefix("m=") {
            in_audio = m.starts_with("audio ");
        } else if in_audio {
            if let Some(mid) = line.strip_prefix("a=mid:") {
                return Some(Mid::from(mid));
            }
        }
    }
    None
}

/// Pushes every Ogg page in `data` (whole pages, back to back) to `depack`.
fn push_pages(depack: &mut OpusDepacketizer, mut data: &[u8], out: &mut Vec<OpusPacket>) {
    while !data.is_empty() {
        match ogg::parse_page(data) {
            ogg::PageParse::Page(page) => {
                let len = page.bytes.len();
                depack.push_page(&page, out);
                data = &data[len..];
            }
            _ => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pacer_spreads_a_page_of_packets_in_real_time() {
        let t0 = Instant::now();
        let mut p = Pacer::default();
        assert_eq!(p.due(1000, t0), t0);
        // A page of 50 packets arriving at once: due 20 ms apart.
        assert_eq!(p.due(1000 + 960, t0), t0 + Duration::from_millis(20));
        assert_eq!(p.due(1000 + 49 * 960, t0), t0 + Duration::from_millis(980));
        // The next page, 100 ms late: packets go at once but keep the schedule.
        let late = t0 + Duration::from_millis(1100);
        assert_eq!(
            p.due(1000 + 50 * 960, late),
            t0 + Duration::from_millis(1000)
        );
        // 300 ms late (a source switch, a stall): re-anchored.
        let later = t0 + Duration::from_millis(1340);
        assert_eq!(p.due(1000 + 51 * 960, later), later);
        // Far ahead (a source pushing too fast): re-anchored too.
        assert_eq!(p.due(1000 + 500 * 960, later), later);
    }

    #[test]
    fn health_needs_reports_and_low_loss() {
        let t0 = Instant::now();
        let mut h = ViewerHealth::default();
        // Still connecting: never degraded.
        assert!(!h.is_degraded(t0 + Duration::from_secs(60)));
        h.connected_at = Some(t0);
        assert!(!h.is_degraded(t0 + Duration::from_secs(5)));
        // No report at all 5 s after connecting.
        assert!(h.is_degraded(t0 + Duration::from_millis(5001)));
        h.update(
            Some(100),
            Some(0.0),
            Some(Duration::from_millis(2)),
            t0 + Duration::from_secs(4),
        );
        assert!(!h.is_degraded(t0 + Duration::from_secs(8)));
        // The same report again is not a new one.
        h.update(Some(100), None, None, t0 + Duration::from_secs(8));
        assert!(h.is_degraded(t0 + Duration::from_millis(9001)));
        h.update(Some(150), Some(0.02), None, t0 + Duration::from_secs(10));
        assert!(h.is_degraded(t0 + Duration::from_secs(10)), "2 % loss");
        h.update(Some(200), Some(0.005), None, t0 + Duration::from_secs(11));
        assert!(!h.is_degraded(t0 + Duration::from_secs(11)), "0.5 % loss");
        assert_eq!(h.rtt, Some(Duration::from_millis(2)));
    }
}
