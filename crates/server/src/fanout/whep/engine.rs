//! One WHEP engine: a thread owning one UDP socket (non-blocking, on a mio poll with a waker
//! for commands) and its viewers' str0m `Rtc`s (ICE-lite, DTLS-SRTP, one audio track), feeding
//! each viewer the Opus packets of its mount's queue, read like a listener reads it (from the
//! live edge, following fallbacks when the mount ends).
//!
//! This file is the I/O around pure decisions: the loop reads the clock and passes `now` down
//! (`Engine::run` says where it reads it); when the media and health passes are due and how
//! long to sleep is [`super::schedule::LoopSchedule`]'s call, what a drive does with str0m's
//! timeout and whether a session is over are [`super::schedule`]'s functions, and which
//! session a datagram, a `DELETE` or a `killclient` is for is [`super::routing::Routes`]'s.
//!
//! The loop does per turn only what is due: the sessions whose str0m timeout passed (a
//! [`Timers`] heap, not a scan of every `Rtc`), the sessions that just got a datagram (driven
//! once after the socket is drained, however many datagrams came), and every
//! `MEDIA_TICK` the paced Opus packets of the connected sessions, each sealed by the session's
//! own [`SrtpSender`] straight into the pass's datagrams (gathered and sent with `sendmmsg` by
//! [`super::batch::SendBatch`]) without a str0m round: str0m runs a viewer's ICE, DTLS and
//! incoming RTCP, and sends none of its RTP (nor sender reports, which would count packets it
//! never saw). Incoming
//! datagrams go to the session that owns their source address, or, for a new address, the one
//! whose local ICE ufrag the STUN `USERNAME` names ([`stun_local_ufrag`]); a session ends with
//! its access-log line and its close hook (URL auth `listener_remove`), as a listener's does.
//!
//! Ogg pages become Opus packets with continuous RTP timestamps in
//! `throng_proto::opus_rtp`; this file is only the I/O and the session bookkeeping.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token, Waker};
use str0m::change::SdpOffer;
use str0m::format::Codec;
use str0m::media::{MediaKind, Mid, Pt};
use str0m::net::{Protocol, Receive};
use str0m::rtp::{Extension, RawPacket};
use str0m::{Candidate, Event, IceConnectionState, Input, Output, Rtc};
use throng_proto::opus_rtp::{OpusPacket, RtpClock};

use super::batch::SendBatch;
use super::pages::FeedPages;
use super::routing::{on_selected_pair, stun_local_ufrag, Route, Routes};
use super::schedule::{connect_timed_out, on_timeout, past_deadline, LoopSchedule, TimeoutStep};
use super::shared::{
    reception, session_id, set_degraded, Created, EngineShared, NewViewer, Pacer, ViewerHealth,
    WhepError,
};
use super::srtp_keys::{self, KeySlot};
use super::srtp_send::SrtpSender;
use super::timers::Timers;
use crate::audience::follow::{self, FollowerView, JoinAt, MountView, MoveFilter, Step};
use crate::audience::page::{take_page, Page};
use crate::audience::{AudiencePath, EndReason, ListenerInfo, ListenerRow};
use crate::config::LagPolicy;
use crate::mount::live::Mount;
use crate::mount::queue::Queue;
use crate::mount::registry::Fallback;
use crate::observe::metrics::MountLabel;
use crate::transcode::Transcoding;

/// Kernel socket buffers asked for (bytes): room for a burst of handshakes and a media pass.
pub const SOCKET_BUFFER: usize = 4 << 20;

/// str0m's RTCP sender-report interval for a viewer's audio stream: in effect never (ten
/// years). The engine sends the stream's RTP itself, so str0m's reports would claim no packets
/// sent and a timestamp of zero; a receiver plays without them (RFC 3550 §6.4: its receiver
/// reports, which the health pass reads, do not need them; only the round-trip time does).
const NO_SENDER_REPORTS: Duration = Duration::from_secs(10 * 365 * 86_400);

/// Most datagrams read in one loop turn before timers and media get their turn.
const READ_BATCH: usize = 1024;

const SOCKET: Token = Token(0);
const WAKER: Token = Token(1);

/// Commands to an engine thread.
enum Command {
    Add(
        Box<NewViewer>,
        tokio::sync::oneshot::Sender<Result<Created, WhepError>>,
    ),
    Remove(String, tokio::sync::oneshot::Sender<bool>),
    List(
        Option<String>,
        Page,
        tokio::sync::oneshot::Sender<Vec<ListenerRow>>,
    ),
    Kill(u64, tokio::sync::oneshot::Sender<bool>),
    /// Move the viewers `filter` takes to the mount (`moveclients`, `fallback-override`);
    /// answer how many.
    Move(MoveFilter, Arc<Mount>, tokio::sync::oneshot::Sender<usize>),
    /// Close every session (logged with the reason, hooks run) and stop the thread; answer
    /// when done.
    Shutdown(mpsc::Sender<()>, EndReason),
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Command::Add(v, _) => write!(f, "Add({})", v.info.requested_mount),
            Command::Remove(id, _) => write!(f, "Remove({id})"),
            Command::List(m, _, _) => write!(f, "List({m:?})"),
            Command::Kill(id, _) => write!(f, "Kill({id})"),
            Command::Move(filter, to, _) => write!(f, "Move({filter:?} -> {})", to.name),
            Command::Shutdown(..) => write!(f, "Shutdown"),
        }
    }
}

/// Handle to one engine thread.
#[derive(Debug, Clone)]
pub struct EngineHandle {
    tx: mpsc::Sender<Command>,
    waker: Arc<Waker>,
    /// Sessions open or being created on this engine.
    pub load: Arc<AtomicUsize>,
    /// The UDP address announced to its peers.
    pub local: SocketAddr,
    /// A clone of the engine's socket, for diverted sessions to send from (`divert.rs`).
    pub sender: Arc<std::net::UdpSocket>,
}

impl EngineHandle {
    /// Binds `addr` and starts engine `index`; `public` replaces the address in the ICE
    /// candidate. Errors: the socket cannot be bound or the thread not started.
    pub fn spawn(
        index: usize,
        addr: SocketAddr,
        public: Option<IpAddr>,
        shared: EngineShared,
    ) -> std::io::Result<EngineHandle> {
        let socket = bind(addr)?;
        let local = socket.local_addr()?;
        let sender = Arc::new(socket.try_clone()?);
        let candidate = SocketAddr::new(public.unwrap_or(local.ip()), local.port());
        let poll = Poll::new()?;
        let mut socket = UdpSocket::from_std(socket);
        poll.registry()
            .register(&mut socket, SOCKET, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let (tx, rx) = mpsc::channel();
        let load = Arc::new(AtomicUsize::new(0));
        // One DTLS certificate for all the engine's sessions: generating a key pair per session
        // was a large share of a session's setup CPU (WebRTC lets an endpoint reuse its
        // certificate, RFC 8827 §6.5; the answer's fingerprint names it).
        let cert = str0m::crypto::from_feature_flags()
            .dtls_provider
            .generate_certificate();
        let mut engine = Engine {
            index,
            cert,
            socket,
            poll,
            candidate,
            rx,
            shared,
            slots: Vec::new(),
            free: Vec::new(),
            routes: Routes::default(),
            timers: Timers::default(),
            touched: Vec::new(),
            pages: FeedPages::default(),
            out: SendBatch::default(),
            load: load.clone(),
            gauged: HashMap::new(),
            stats: Stats::default(),
        };
        std::thread::Builder::new()
            .name(format!("whep-{index}"))
            .spawn(move || engine.run())?;
        Ok(EngineHandle {
            tx,
            waker,
            load,
            local: candidate,
            sender,
        })
    }

    fn send(&self, cmd: Command) -> bool {
        if self.tx.send(cmd).is_err() {
            return false;
        }
        let _ = self.waker.wake();
        true
    }

    /// Creates a session for `viewer`; on error the listener slot taken on `viewer.mount` is
    /// given back.
    pub async fn add(&self, viewer: NewViewer) -> Result<Created, WhepError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let mount = viewer.mount.clone();
        self.load.fetch_add(1, Ordering::Relaxed);
        if !self.send(Command::Add(Box::new(viewer), tx)) {
            self.load.fetch_sub(1, Ordering::Relaxed);
            mount.remove_listener();
            return Err(WhepError::Stopped);
        }
        rx.await.unwrap_or(Err(WhepError::Stopped))
    }

    /// Ends session `id`; `false` when there is none.
    pub async fn remove(&self, id: &str) -> bool {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if !self.send(Command::Remove(id.to_owned(), tx)) {
            return false;
        }
        rx.await.unwrap_or(false)
    }

    /// The viewers on `mount` (all when `None`) on `page`, as listener rows.
    pub async fn list(&self, mount: Option<&str>, page: Page) -> Vec<ListenerRow> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if !self.send(Command::List(mount.map(str::to_owned), page, tx)) {
            return Vec::new();
        }
        rx.await.unwrap_or_default()
    }

    /// Closes every session (each logged with `why`, its close hook run) and stops the engine
    /// thread, waiting at most `timeout` (blocking: call it off the async runtime).
    pub fn shutdown(&self, timeout: Duration, why: EndReason) {
        let (tx, rx) = mpsc::channel();
        if self.send(Command::Shutdown(tx, why)) {
            let _ = rx.recv_timeout(timeout);
        }
    }

    /// Disconnects the viewer with listener id `id`; `false` when there is none here.
    pub async fn kill(&self, id: u64) -> bool {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if !self.send(Command::Kill(id, tx)) {
            return false;
        }
        rx.await.unwrap_or(false)
    }

    /// Moves the viewers `filter` takes to `to` at their next media pass (an Ogg page
    /// boundary: viewers are fed whole pages), never across formats; how many.
    pub async fn move_viewers(&self, filter: MoveFilter, to: Arc<Mount>) -> usize {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if !self.send(Command::Move(filter, to, tx)) {
            return 0;
        }
        rx.await.unwrap_or(0)
    }
}

/// A UDP socket bound to `addr` with [`SOCKET_BUFFER`]-byte kernel buffers, non-blocking, with
/// `SO_REUSEPORT`: the new process of a SIGUSR2 upgrade binds the same ports while this one
/// still holds them (viewers are not carried over: the old process stops its engines as soon
/// as it hands over, `upgrade/mod.rs`, so the ports are the new process's alone from then on).
fn bind(addr: SocketAddr) -> std::io::Result<std::net::UdpSocket> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    // Best effort: the kernel caps them at its rmem_max / wmem_max.
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
    socket.set_reuse_port(true)?;
    if addr.is_ipv4() {
        dont_fragment(&socket);
    }
    socket.bind(&addr.into())?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Sets the IPv4 "don't fragment" bit on every datagram of `socket` without path MTU
/// discovery (`IP_MTU_DISCOVER` = `IP_PMTUDISC_PROBE`, ip(7), as QUIC stacks such as quinn
/// do): WebRTC datagrams are kept under 1,200 bytes, and a DF datagram of an unconnected socket
/// gets IP id 0 instead of the kernel's hashed id generator (`__ip_select_ident`, a
/// per-datagram cost on the engines' hottest path). Best effort: a refusal only logs.
fn dont_fragment(socket: &socket2::Socket) {
    let v: libc::c_int = libc::IP_PMTUDISC_PROBE;
    // SAFETY: a valid socket descriptor, and an option value of the size given.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        tracing::debug!(
            "WebRTC socket: IP_MTU_DISCOVER: {}",
            std::io::Error::last_os_error()
        );
    }
}

impl Session {
    /// The queue of Ogg/Opus pages this viewer reads: its mount's own, or for an MP3 or AAC
    /// mount its transcoder's.
    fn feed_queue(&self) -> &Arc<Queue> {
        match &self.feed {
            Some(t) => &t.queue,
            None => &self.mount.queue,
        }
    }
}

/// One viewer.
struct Session {
    id: String,
    /// Its str0m state, boxed: an `Rtc` is about 10 KB, and inline it would spread the
    /// sessions a media pass scans (every 10 ms, most of them only to find no packet due) over
    /// a page each.
    rtc: Box<Rtc>,
    mount: Arc<Mount>,
    mid: Mid,
    /// The transcoder of an MP3 or AAC mount whose Ogg/Opus feed it reads (`None`: an Ogg
    /// mount, whose own queue it reads); held while the viewer plays that mount.
    feed: Option<Arc<Transcoding>>,
    /// Where its DTLS handshake leaves the SRTP keys.
    keys: Arc<KeySlot>,
    /// Its RTP sender, made from those keys once connected.
    srtp: Option<SrtpSender>,
    /// The remote end of the session's selected ICE pair, where its media goes: where str0m
    /// sends its DTLS and SRTCP ([`on_selected_pair`]), and what its peer stats name each
    /// second (a pair the peer nominates later, after a network change, is followed).
    remote: Option<SocketAddr>,
    /// The RTP sequence number of the next packet (extended; random start, RFC 3550 §5.1).
    seq: u64,
    /// Next absolute queue offset to read; `None` until the first read (live edge).
    pos: Option<u64>,
    /// Its RTP timestamps for the feed's shared packets.
    clock: RtpClock,
    /// Last RTP timestamp written, extended to 64 bits.
    ext_ts: Option<(u32, u64)>,
    connected: bool,
    /// Its unit of the budget of unconnected sessions, until it connects.
    unconnected: Option<super::unconnected::UnconnectedUnit>,
    health: ViewerHealth,
    /// The listener's facts: id, request line, agent, user, start, deadline, close hook.
    info: ListenerInfo,
    /// Opus payload bytes written.
    sent: u64,
    /// Bytes of the `201` answer, counted in the access-log line.
    answer_bytes: u64,
    /// Packets read but not yet due (extended RTP timestamp, payload, play time in 48 kHz
    /// samples).
    outbox: VecDeque<(u64, Arc<[u8]>, u32)>,
    pacer: Pacer,
    /// When the first packet of `outbox` is due (`None`: the outbox is empty, or changed
    /// since): until then a media pass skips the session without touching its outbox.
    next_due: Option<Instant>,
    /// When the follower first saw the mount's feed ended (`None` while live).
    ended_since: Option<Instant>,
    /// A move waiting for the next media pass (`moveclients`, `fallback-override`).
    moving: Option<Arc<Mount>>,
    peer: SocketAddr,
    /// Set while the session is in the engine's `touched` list.
    touched: bool,
}

/// The engine thread's state.
struct Engine {
    index: usize,
    cert: Option<str0m::config::DtlsCert>,
    socket: UdpSocket,
    poll: Poll,
    candidate: SocketAddr,
    rx: mpsc::Receiver<Command>,
    shared: EngineShared,
    /// Sessions by slot key.
    slots: Vec<Option<Session>>,
    free: Vec<usize>,
    /// Which session a datagram, a resource id or a listener id is for.
    routes: Routes,
    timers: Timers,
    /// Sessions that got input this turn, to drive once.
    touched: Vec<usize>,
    /// The feeds' packets, depacketized once for all the engine's viewers.
    pages: FeedPages,
    /// Datagrams polled from the sessions and not sent yet (flushed when full and at the
    /// end of every loop turn).
    out: SendBatch,
    load: Arc<AtomicUsize>,
    /// Degraded viewers per mount as last counted here.
    gauged: HashMap<String, i64>,
    stats: Stats,
}

/// What an engine did since its last stats line (debug log, target `throng_whep_stats`).
#[derive(Debug, Default)]
struct Stats {
    turns: u64,
    datagrams_in: u64,
    datagrams_out: u64,
    send_errors: u64,
    sendmmsg_calls: u64,
    /// Packets not sent: the session had no SRTP keys or route yet, or sealing failed.
    unsealed: u64,
    drives: u64,
    packets: u64,
    media_passes: u64,
    /// Longest media pass and the latest start of one after its tick (µs).
    media_pass_max_us: u64,
    media_late_max_us: u64,
}

impl Engine {
    /// The loop: per turn, commands, the socket drained, then the media and health passes and
    /// the str0m timeouts due, then a sleep until the next of them ([`LoopSchedule`]).
    ///
    /// The clock is read here and passed down, never per datagram, per session or per event:
    /// once when the turn starts (commands and the datagrams read are stamped with it); again,
    /// when the turn had commands or datagrams, for the passes and timeouts due (a drain of up
    /// to [`READ_BATCH`] datagrams or a session's creation, DTLS handshakes and SDP, can take
    /// milliseconds, so the passes are timed after them); after a
    /// media pass, which with thousands of viewers takes milliseconds too (its duration is a
    /// stat, and the str0m timeouts that fell due meanwhile are served in this turn, as
    /// before); and just before sleeping, so the wait does not oversleep the media tick by
    /// the time the timeouts and the flush took. The only other reads are str0m's
    /// `handle_timeout` rounds in [`drive_session`].
    fn run(&mut self) {
        let mut buf = vec![0u8; 2048];
        let mut events = Events::with_capacity(16);
        let mut packets = Vec::new();
        let mut schedule = LoopSchedule::new(Instant::now());
        let mut readable = true;
        loop {
            let now = Instant::now();
            let mut busy = readable;
            loop {
                match self.rx.try_recv() {
                    Ok(Command::Shutdown(done, why)) => {
                        self.close_all(now, why);
                        let _ = done.send(());
                        return;
                    }
                    Ok(cmd) => {
                        self.command(cmd, now);
                        busy = true;
                    }
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => {
                        self.close_all(now, EndReason::Shutdown);
                        return;
                    }
                }
            }
            if readable {
                readable = self.read_socket(&mut buf, now);
                self.drive_touched(now);
            }
            // A turn that only woke for its timers still has a fresh clock.
            let now = if busy { Instant::now() } else { now };
            self.stats.turns += 1;
            let mut timers_now = now;
            if let Some(late) = schedule.media_due(now) {
                let late = late.as_micros() as u64;
                self.stats.media_late_max_us = self.stats.media_late_max_us.max(late);
                self.pump_media(now, &mut packets);
                timers_now = Instant::now();
                let took = timers_now.saturating_duration_since(now).as_micros() as u64;
                self.stats.media_pass_max_us = self.stats.media_pass_max_us.max(took);
                self.stats.media_passes += 1;
            }
            if schedule.health_due(now) {
                self.health(now);
                self.pages.sweep();
                tracing::debug!(target: "throng_whep_stats", engine = self.index, sessions = self.routes.len(), transcoders = self.shared.transcoders.running(), feeds = self.pages.len(), "{:?}", self.stats);
                self.stats = Stats::default();
            }
            while let Some(key) = self.timers.pop_due(timers_now) {
                self.drive_and_schedule(key, timers_now);
            }
            self.flush();
            if readable {
                continue;
            }
            let wait = schedule.wait(self.timers.next(), Instant::now());
            if let Err(e) = self.poll.poll(&mut events, Some(wait)) {
                if e.kind() != std::io::ErrorKind::Interrupted {
                    tracing::warn!("WebRTC engine poll: {e}");
                }
            }
            readable = events.iter().any(|e| e.token() == SOCKET);
        }
    }

    /// Reads up to [`READ_BATCH`] datagrams, stamped `now`; `true` when more may be waiting.
    fn read_socket(&mut self, buf: &mut [u8], now: Instant) -> bool {
        for _ in 0..READ_BATCH {
            match self.socket.recv_from(buf) {
                Ok((n, source)) => {
                    self.stats.datagrams_in += 1;
                    self.receive(n, buf, source, now);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // An ICMP error of an earlier send (port unreachable): try again.
                    tracing::trace!("WebRTC socket: {e}");
                }
            }
        }
        true
    }

    fn session(&mut self, key: usize) -> Option<&mut Session> {
        self.slots.get_mut(key).and_then(Option::as_mut)
    }

    /// Sets each mount's degraded-viewers gauge (summed over engines) and closes sessions past
    /// their time limit, and unconnected ones whose budget unit was taken (`unconnected.rs`).
    fn health(&mut self, now: Instant) {
        let mut counts: HashMap<String, i64> = HashMap::new();
        let mut expired = Vec::new();
        for (key, s) in self.slots.iter().enumerate() {
            let Some(s) = s else { continue };
            let n = counts.entry(s.mount.name.clone()).or_default();
            *n += i64::from(s.health.is_degraded(now));
            if past_deadline(s.info.deadline, now) {
                expired.push((key, EndReason::TimeLimit));
            } else if s.unconnected.as_ref().is_some_and(|u| u.is_evicted()) {
                // Its unit of the unconnected budget went to a lighter address's offer.
                expired.push((key, EndReason::Evicted));
            }
        }
        for (key, why) in expired {
            self.close(key, why, now);
        }
        if counts != self.gauged || !counts.is_empty() {
            let sums = self
                .shared
                .degraded
                .report(self.index, self.shared.engines, &counts);
            set_degraded(&self.shared.metrics, &sums);
        }
        self.gauged = counts;
    }

    /// Carries out `cmd` at `now`.
    fn command(&mut self, cmd: Command, now: Instant) {
        match cmd {
            Command::Add(viewer, reply) => {
                let mount = viewer.mount.clone();
                let result = self.add(*viewer, now);
                if result.is_err() {
                    mount.remove_listener();
                    self.load.fetch_sub(1, Ordering::Relaxed);
                }
                let _ = reply.send(result);
            }
            Command::Remove(id, reply) => {
                let key = self.routes.by_id(&id);
                if let Some(key) = key {
                    self.close(key, EndReason::HungUp, now);
                }
                let _ = reply.send(key.is_some());
            }
            Command::Move(filter, to, reply) => {
                let mut n = 0;
                for s in self.slots.iter_mut().flatten() {
                    if follow::may_move(
                        s.mount.id,
                        s.mount.settings.format,
                        to.id,
                        to.settings.format,
                    ) && filter.takes(&s.mount.name, &s.info.requested_mount)
                    {
                        s.moving = Some(to.clone());
                        n += 1;
                    }
                }
                let _ = reply.send(n);
            }
            Command::List(mount, page, reply) => {
                let rows = self
                    .slots
                    .iter()
                    .flatten()
                    .filter(|s| s.info.id > page.after)
                    .filter(|s| mount.as_ref().is_none_or(|m| *m == s.mount.name))
                    .map(|s| s.info.row(&s.mount.name, now, 0, s.sent));
                let rows = take_page(rows, page);
                let _ = reply.send(rows);
            }
            Command::Kill(listener_id, reply) => {
                let key = self.routes.by_listener(listener_id);
                if let Some(key) = key {
                    self.close(key, EndReason::Killed, now);
                }
                let _ = reply.send(key.is_some());
            }
            Command::Shutdown(done, why) => {
                self.close_all(now, why);
                let _ = done.send(());
            }
        }
    }

    /// Creates a session for `viewer` at `now`: its `Rtc`, its slot, its indexes.
    fn add(&mut self, viewer: NewViewer, now: Instant) -> Result<Created, WhepError> {
        let offer = SdpOffer::from_sdp_string(&viewer.offer)
            .map_err(|e| WhepError::BadOffer(e.to_string()))?;
        // No header extensions but the mid: in particular no transport-wide congestion
        // control, whose feedback (a datagram from every viewer every ~100 ms, sequence
        // bookkeeping for every packet sent) only serves a bandwidth estimate that a
        // fixed-rate audio track does not use. Loss and RTT still come from receiver reports.
        let mut config = Rtc::builder()
            .set_ice_lite(true)
            .clear_codecs()
            .enable_opus(true, false)
            .clear_extension_map()
            .set_extension(4, Extension::RtpMid)
            .set_rtp_mode(true)
            // Peer stats each second name the selected ICE pair; the receiver reports come as
            // raw RTCP events (`drive_session`), since str0m's stream stats cover only the RTP
            // it sent, which is none.
            .set_stats_interval(Some(Duration::from_secs(1)))
            .enable_raw_packets(true)
            .set_rtcp_report_interval_audio(NO_SENDER_REPORTS);
        if let Some(cert) = &self.cert {
            config = config.set_dtls_cert(cert.clone());
        }
        let (mut rtc, keys) = srtp_keys::build_rtc(config, now);
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
        // An MP3 or AAC mount's first viewer starts its transcoder, the next ones share it.
        let feed = self.shared.transcoders.feed_for(&viewer.mount)?;
        let ufrag = rtc.direct_api().local_ice_credentials().ufrag;
        let id = session_id(self.index);
        let label = MountLabel::new(&viewer.mount.name);
        self.shared.metrics.connects.get_or_create(&label).inc();
        self.shared.metrics.listeners.get_or_create(&label).inc();
        tracing::debug!(peer = %viewer.peer, mount = %viewer.mount.name, %id, "WHEP session created");
        let answer = answer.to_sdp_string();
        let key = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        self.routes.insert(key, id.clone(), viewer.info.id, ufrag);
        self.slots[key] = Some(Session {
            id: id.clone(),
            rtc: Box::new(rtc),
            mount: viewer.mount,
            mid,
            feed,
            keys,
            srtp: None,
            remote: None,
            seq: u64::from(rand::random::<u16>()),
            pos: None,
            clock: RtpClock::new(rand::random()),
            ext_ts: None,
            connected: false,
            unconnected: Some(viewer.unconnected),
            health: ViewerHealth::default(),
            info: viewer.info,
            sent: 0,
            answer_bytes: answer.len() as u64,
            outbox: VecDeque::new(),
            pacer: Pacer::default(),
            next_due: None,
            ended_since: None,
            moving: None,
            peer: viewer.peer,
            touched: false,
        });
        self.timers.schedule(key, now);
        Ok(Created { id, answer })
    }

    /// Ends session `key` at `now` for `why`: unindexed, its listener slot and gauges given
    /// back, its access-log line written and its close hook run.
    fn close(&mut self, key: usize, why: EndReason, now: Instant) {
        let Some(mut s) = self.slots.get_mut(key).and_then(Option::take) else {
            return;
        };
        self.free.push(key);
        self.timers.cancel(key);
        self.routes.remove(key);
        s.rtc.disconnect();
        s.mount.remove_listener();
        self.load.fetch_sub(1, Ordering::Relaxed);
        let metrics = &self.shared.metrics;
        let label = MountLabel::new(&s.mount.name);
        metrics.listeners.get_or_create(&label).dec();
        metrics.disconnects.get_or_create(&label).inc();
        metrics.count_end(AudiencePath::Whep.as_str(), why.key());
        tracing::debug!(peer = %s.peer, mount = %s.mount.name, id = %s.id, "WHEP session closed: {}", why.key());
        let bytes = s.answer_bytes + s.sent;
        s.info
            .log_end(&self.shared.access_log, &s.mount.name, 201, bytes, now, why);
    }

    /// Ends every session at `now` with `why` (shutdown, or a drain's end).
    fn close_all(&mut self, now: Instant, why: EndReason) {
        for key in 0..self.slots.len() {
            self.close(key, why, now);
        }
    }

    /// Sends the datagrams gathered in `out`.
    fn flush(&mut self) {
        flush_out(&mut self.out, self.socket.as_raw_fd(), &mut self.stats);
    }

    /// Polls one session's output at `now` (input or a timer) until its next timeout; `None`
    /// when it is dead ([`drive_session`]; a media pass drives the sessions it writes to
    /// itself).
    fn drive(&mut self, key: usize, now: Instant) -> Option<Instant> {
        let fd = self.socket.as_raw_fd();
        let s = self.slots.get_mut(key)?.as_mut()?;
        drive_session(s, now, &mut self.out, fd, &mut self.stats)
    }

    /// Hands the datagram `buf[..n]` from `source`, received at `now`, to its session
    /// ([`Routes::route`]: the owner of the address, else by STUN ufrag, else none: dropped)
    /// and marks the session to drive.
    fn receive(&mut self, n: usize, buf: &[u8], source: SocketAddr, now: Instant) {
        let data = &buf[..n];
        let Ok(contents) = data.try_into() else {
            return;
        };
        let input = Input::Receive(
            now,
            Receive {
                proto: Protocol::Udp,
                source,
                destination: self.candidate,
                contents,
            },
        );
        let ufrag = stun_local_ufrag(data);
        let mut route = self.routes.route(source, ufrag);
        let key = loop {
            let found = match route {
                Route::Known(k) | Route::ByUfrag(k) => self.slots[k]
                    .as_ref()
                    .is_some_and(|s| s.rtc.accepts(&input))
                    .then_some(k),
                Route::Drop => {
                    // No viewer's: perhaps a WHIP publisher's (`divert.rs`).
                    let d = super::divert::Diverted {
                        data: data.to_vec(),
                        source,
                        destination: self.candidate,
                        at: now,
                    };
                    self.shared.divert.offer(d, ufrag);
                    return;
                }
            };
            if let Some(k) = found {
                break k;
            }
            route = self.routes.after(route, ufrag);
        };
        if !matches!(route, Route::Known(_)) {
            self.routes.learn(source, key);
        }
        let Some(s) = self.slots[key].as_mut() else {
            return;
        };
        if let Err(e) = s.rtc.handle_input(input) {
            tracing::debug!(id = %s.id, "WebRTC input refused: {e}");
        }
        if !s.touched {
            s.touched = true;
            self.touched.push(key);
        }
    }

    /// Drives every session that got input since the last call, once each, at `now`.
    fn drive_touched(&mut self, now: Instant) {
        let touched = std::mem::take(&mut self.touched);
        for &key in &touched {
            if let Some(s) = self.session(key) {
                s.touched = false;
                self.drive_and_schedule(key, now);
            }
        }
        self.touched = touched;
        self.touched.clear();
    }

    /// Drives session `key` at `now` (input or a timer) and records its next timeout, or
    /// closes it when it is dead.
    fn drive_and_schedule(&mut self, key: usize, now: Instant) {
        match self.drive(key, now) {
            Some(t) => self.timers.schedule(key, t),
            None => self.close(key, EndReason::Vanished, now),
        }
    }

    /// Reads each connected session's mount queue, writes the Opus packets due and drives each
    /// session written to right after its packets ([`drive_session`]).
    fn pump_media(&mut self, now: Instant, packets: &mut Vec<OpusPacket>) {
        let mut ended = Vec::new();
        let fd = self.socket.as_raw_fd();
        // Each feed's head and end, read once per pass: most passes bring most viewers nothing
        // (a packet is due every 20 to 120 ms, a pass runs every 10 ms), and those are skipped
        // without reading their queue.
        // (The feed is held for the pass, so its address names no other queue meanwhile.)
        let mut heads: Vec<(Arc<Queue>, u64, bool)> = Vec::new();
        for (key, slot) in self.slots.iter_mut().enumerate() {
            let Some(s) = slot else { continue };
            if !s.connected || packet_not_due(s, now) {
                continue;
            }
            let feed = s.feed_queue();
            let (head, feed_ended) = match heads.iter().find(|h| Arc::ptr_eq(&h.0, feed)) {
                Some(&(_, head, e)) => (head, e),
                None => {
                    let q = feed.load();
                    heads.push((feed.clone(), q.head, q.ended));
                    (q.head, q.ended)
                }
            };
            if nothing_to_do(s, head, feed_ended, now) {
                continue;
            }
            packets.clear();
            if let Err(why) = read_queue(s, &self.shared, &mut self.pages, now, packets) {
                ended.push((key, why));
                continue;
            }
            if s.srtp.is_none() {
                match make_sender(s) {
                    Ok(true) => {}
                    // Not yet (the keys come with the DTLS handshake, before `Connected`).
                    Ok(false) => continue,
                    Err(e) => {
                        // Keys of a profile the sender cannot seal for: nothing can be sent.
                        tracing::warn!(id = %s.id, "WHEP session cannot send: {e}");
                        ended.push((key, EndReason::WriteFailed));
                        continue;
                    }
                }
            }
            for p in packets.drain(..) {
                let ext = match s.ext_ts {
                    None => u64::from(p.rtp_ts),
                    Some((last, ext)) => {
                        ext.wrapping_add(i64::from(p.rtp_ts.wrapping_sub(last) as i32) as u64)
                    }
                };
                s.ext_ts = Some((p.rtp_ts, ext));
                s.outbox.push_back((ext, p.data, p.samples));
            }
            // Paced: each packet goes when its media time is due (an Ogg page brings up to
            // a second of packets at once).
            s.next_due = None;
            while let Some((ext, ..)) = s.outbox.front() {
                let due = s.pacer.due(*ext, now);
                if due > now {
                    s.next_due = Some(due);
                    break;
                }
                let Some((ext, data, _)) = s.outbox.pop_front() else {
                    break;
                };
                // The Opus packet is the RTP payload as it is (RFC 7587 §4.2), sealed into
                // the pass's datagrams for the ICE pair str0m uses.
                let (Some(tx), Some(to)) = (s.srtp.as_mut(), s.remote) else {
                    self.stats.unsealed += 1;
                    continue;
                };
                let index = s.seq;
                let room = tx.room(data.len());
                let pushed = self
                    .out
                    .push_with(room, to, |buf| tx.seal(index, ext as u32, &data, buf).ok());
                s.seq = s.seq.wrapping_add(1);
                match pushed {
                    Some(full) => {
                        s.sent += data.len() as u64;
                        self.stats.packets += 1;
                        self.stats.datagrams_out += 1;
                        if full {
                            flush_out(&mut self.out, fd, &mut self.stats);
                        }
                    }
                    None => self.stats.unsealed += 1,
                }
            }
        }
        for (key, why) in ended {
            self.close(key, why, now);
        }
    }
}

/// Makes session `s`'s [`SrtpSender`] once what it needs is known: the Opus payload type the
/// answer settled on, the SRTP keys and the SSRC of str0m's `StreamTx` (as the answer's
/// `a=ssrc` names it) (`Ok(false)`: not yet); the `mid` header extension
/// goes on every packet when the offer mapped it, as str0m's own packets have it. Errors:
/// keys that fit no profile the sender seals for.
fn make_sender(s: &mut Session) -> Result<bool, super::srtp_send::SrtpError> {
    let pt = opus_pt(&s.rtc, s.mid);
    let ssrc = s
        .rtc
        .direct_api()
        .stream_tx_by_mid(s.mid, None)
        .map(|tx| *tx.ssrc());
    let (Some(pt), Some(ssrc), Some(keys)) = (pt, ssrc, s.keys.get()) else {
        return Ok(false);
    };
    let mid_ext = s
        .rtc
        .media(s.mid)
        .and_then(|m| m.remote_extmap().id_of(Extension::RtpMid));
    let mid: &str = &s.mid;
    let tx = SrtpSender::new(
        &keys,
        &srtp_keys::provider(),
        ssrc,
        *pt,
        mid_ext.map(|id| (id, mid)),
    )?;
    tracing::debug!(id = %s.id, ssrc, profile = %keys.profile, "WHEP session sealing its SRTP");
    s.srtp = Some(tx);
    Ok(true)
}

/// Drives session `s` at `now` (input or a timer): its str0m output polled, its datagrams
/// gathered into `out` (sent on `fd` when full), its events applied; the session's next
/// timeout, or `None` when it is over.
fn drive_session(
    s: &mut Session,
    now: Instant,
    out: &mut SendBatch,
    fd: std::os::fd::RawFd,
    stats: &mut Stats,
) -> Option<Instant> {
    stats.drives += 1;
    if !s.rtc.is_alive() {
        return None;
    }
    if connect_timed_out(s.connected, s.info.started, now) {
        return None;
    }
    let mut now = now;
    loop {
        match s.rtc.poll_output() {
            Ok(Output::Timeout(t)) => match on_timeout(t, now) {
                TimeoutStep::Wait(at) => return Some(at),
                TimeoutStep::Round => {
                    // A clock read per round (not per poll): str0m acts on the time it is
                    // given (its RTCP and ICE intervals count from it), and the clock passed
                    // in can be milliseconds old when a session late in a turn is driven.
                    now = Instant::now();
                    if s.rtc.handle_input(Input::Timeout(now)).is_err() {
                        return None;
                    }
                }
            },
            Ok(Output::Transmit(t)) => {
                stats.datagrams_out += 1;
                if on_selected_pair(&t.contents) {
                    s.remote = Some(t.destination);
                }
                if out.push(&t.contents, t.destination) {
                    flush_out(out, fd, stats);
                }
            }
            Ok(Output::Event(e)) => match e {
                Event::Connected => {
                    s.connected = true;
                    s.unconnected = None;
                    s.health.connected_at = Some(now);
                }
                Event::PeerStats(ps) => {
                    if let Some(pair) = ps.selected_candidate_pair {
                        s.remote = Some(pair.remote.addr);
                        // The ICE consent checks' round trip (the receiver reports carry none:
                        // no sender reports go out).
                        s.health.rtt = pair.current_round_trip_time.or(s.health.rtt);
                    }
                }
                Event::RawPacket(raw) => {
                    // The viewer's receiver report on the stream this engine sends.
                    let ssrc = s.srtp.as_ref().map(SrtpSender::ssrc);
                    if let (RawPacket::RtcpRx(rtcp), Some(ssrc)) = (&*raw, ssrc) {
                        if let Some((max_seq, loss)) = reception(rtcp, ssrc) {
                            s.health.update(Some(max_seq), Some(loss), None, now);
                        }
                    }
                }
                Event::IceConnectionStateChange(IceConnectionState::Disconnected) => {
                    return None;
                }
                _ => {}
            },
            Err(e) => {
                tracing::debug!(id = %s.id, "WebRTC session error: {e}");
                return None;
            }
        }
    }
}

/// Whether a media pass at `now` can skip `s` on what its own fields say: its next packet is
/// not due yet, and no move or time limit waits. (Its feed is read when that packet is due:
/// pages coming meanwhile only wait a packet's time in the queue; most passes are such, with
/// packets of 60 ms and a pass every 10 ms.)
fn packet_not_due(s: &Session, now: Instant) -> bool {
    s.next_due.is_some_and(|due| due > now)
        && s.moving.is_none()
        && !past_deadline(s.info.deadline, now)
}

/// Whether a media pass at `now` has nothing to do for `s`, whose feed's head is `head` and
/// which has ended or not (`feed_ended`): no packet waiting, nothing new to read, no move, no
/// end to follow and no time limit reached (what [`read_queue`] would find, without reading
/// the queue).
fn nothing_to_do(s: &Session, head: u64, feed_ended: bool, now: Instant) -> bool {
    s.outbox.is_empty()
        && s.moving.is_none()
        && !feed_ended
        && s.ended_since.is_none()
        && s.pos.is_some_and(|p| p >= head)
        && !past_deadline(s.info.deadline, now)
}

/// Sends the datagrams gathered in `out` on the socket `fd`, counting drops and calls in
/// `stats`.
fn flush_out(out: &mut SendBatch, fd: std::os::fd::RawFd, stats: &mut Stats) {
    let done = out.flush(fd);
    stats.send_errors += done.dropped;
    stats.sendmmsg_calls += done.calls;
}

/// Reads the pages added to `s`'s mount since its position into `out`, by the audience
/// follower's rules (`audience::follow`): a waiting move applies first (viewers are fed whole
/// pages, so every pass is on a page boundary); a viewer joins, and rejoins after lagging, at
/// the live edge with the header pages in force there (the lag policy of a viewer is always
/// skip: a browser's jitter buffer cannot take a backlog); when the mount ended it drains,
/// then follows the live fallback, waits for an on-demand one, or ends. `Err`: the session
/// ends, and why.
fn read_queue(
    s: &mut Session,
    shared: &EngineShared,
    pages: &mut FeedPages,
    now: Instant,
    out: &mut Vec<OpusPacket>,
) -> Result<(), EndReason> {
    if let Some(to) = s.moving.take() {
        if !to.queue.load().ended && to.id != s.mount.id {
            switch(s, to, shared, "WHEP viewer moved")?;
        }
    }
    let mut q = s.feed_queue().load();
    let fallback = if q.ended {
        s.ended_since.get_or_insert(now);
        Some(shared.registry.fallback_target(&s.mount))
    } else {
        s.ended_since = None;
        None
    };
    let successor = match &fallback {
        Some(Fallback::Live(m)) if m.id != s.mount.id => Some(m.clone()),
        _ => None,
    };
    let view = FollowerView {
        pos: s.pos.unwrap_or(q.head),
        pending: false,
        past_deadline: s.info.deadline.is_some_and(|d| now >= d),
    };
    let mount = MountView {
        tail: q.tail(),
        head: q.head,
        ended_at: s.ended_since,
        successor: successor.is_some(),
    };
    match follow::step(view, mount, now, LagPolicy::Skip) {
        Step::End(why) => return Err(why),
        Step::Switch => {
            if let Some(m) = successor {
                switch(s, m, shared, "WHEP viewer follows fallback")?;
                q = s.feed_queue().load();
            }
        }
        Step::SkipAhead => s.pos = None,
        Step::Follow => {}
    }
    if s.pos.is_some_and(|p| p >= q.head) {
        // Nothing new since the last read: the common case on most passes.
        let starting = matches!(fallback, Some(Fallback::Starting));
        return match follow::idle(q.ended, false, starting) {
            Some(why) => Err(why),
            None => Ok(()),
        };
    }
    // At the live edge: the header pages the join replays carry no audio, and the viewer's
    // clock re-anchors on a new stream by itself, so they are not read.
    let pos = s
        .pos
        .unwrap_or_else(|| follow::join(&q, JoinAt::LiveEdge).pos);
    // The feed's pages are depacketized once per engine (`pages.rs`); the viewer stamps the
    // shared packets with its own clock.
    let clock = &mut s.clock;
    let at = pages.read(
        s.feed.as_ref().map_or(&s.mount.queue, |t| &t.queue),
        &q,
        pos,
        |p| clock.stamp(p, out),
    );
    s.pos = Some(at);
    Ok(())
}

/// Moves viewer `s` to mount `to` (its counts follow), to join it at the live edge at this
/// pass, reading `to`'s feed (its own queue, or its transcoder's, started if it is the first
/// viewer there; the one it leaves stops if it was the last); `what` is logged. `Err`: `to`'s
/// transcoder could not start, and the session ends.
fn switch(
    s: &mut Session,
    to: Arc<Mount>,
    shared: &EngineShared,
    what: &str,
) -> Result<(), EndReason> {
    tracing::debug!(from = %s.mount.name, to = %to.name, requested = %s.info.requested_mount, "{what}");
    let feed = shared.transcoders.feed_for(&to).map_err(|e| {
        tracing::warn!(to = %to.name, "WHEP viewer cannot follow: {e}");
        EndReason::SourceEnded
    })?;
    s.mount.move_listener_to(&to, &shared.metrics);
    s.mount = to;
    s.feed = feed;
    s.pos = None;
    s.ended_since = None;
    Ok(())
}

/// The Opus payload type the peer accepted on media `mid` (its first, as it prefers them).
fn opus_pt(rtc: &Rtc, mid: Mid) -> Option<Pt> {
    let media = rtc.media(mid)?;
    media.remote_pts().iter().copied().find(|pt| {
        rtc.codec_config()
            .params()
            .iter()
            .any(|p| p.pt() == *pt && p.spec().codec == Codec::Opus)
    })
}

/// The `a=mid` of the first audio media section of an SDP (RFC 8866 §5.14, RFC 8843 §15).
pub fn audio_mid(sdp: &str) -> Option<Mid> {
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
