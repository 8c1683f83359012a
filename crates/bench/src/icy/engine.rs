//! The ICY listener event loop: one `mio` poll, one shared read buffer, a slot of state per
//! listener, every listener's audio verified as it arrives.
//!
//! One engine runs one [`Slice`] of one group (a worker process, or a thread for small runs).
//! Its listeners start and stop as the group's stages ask (listener `i` of the group is on
//! while the target is above `i`; the engine holds its execution segment of them). Each slot
//! holds a socket, a [`Meter`] and a [`StreamCheck`]; bytes are read into one 64 KiB scratch
//! buffer and walked frame by frame in place (MP3/ADTS headers, Ogg pages, ICY metadata
//! blocks), so the cost per listener is one `read` per server write, one header parse per
//! frame and a share of `epoll_wait`. Once per second of the run's clock the engine walks all
//! slots (the rules, timeouts, reconnects, the stalled listeners' fate) and hands a
//! [`GroupTick`] to its reporter.

use crate::icy::listener::Meter;
use crate::net::connect::{binds_apply, parse_bind_range, start_connect};
use crate::net::url::{HttpUrl, UrlError};
use crate::observe::rusage;
use crate::profile::crowd::{Audience, Crowd};
use crate::profile::slice::{in_share, sleep_until_unix_ms, unix_us, RunClock, Slice};
use crate::stats::{Caught, FailReason, GroupTick, Rule, Snapshot};
use crate::verify::stream::StreamCheck;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use thiserror::Error;
use throng_proto::format::Format;
use throng_proto::http::parse_response_head;

/// Size of the shared read buffer (bytes).
const SCRATCH: usize = 64 * 1024;
/// Largest response head accepted (bytes).
const MAX_HEAD: usize = 16 * 1024;
/// Most redirects (`301`, `302`, `303`, `307`, `308` with an absolute `http://` `Location`)
/// followed per connection, as a player does (a cluster's origin sends listeners to edges).
const MAX_REDIRECTS: u8 = 5;
/// How often the bytes queued in stalled listeners' sockets are read (s).
const HELD_EVERY_S: u32 = 5;
/// Shortest time between two polls while every listener of the engine streams (µs): a server
/// writes to its listeners spread over each second, so a poll taken at once after the last
/// wakes for a handful of them; one at most every 20 ms takes the readiness of a few hundred
/// at once (50 wake-ups a second instead of thousands: a fifth less CPU per listener-second,
/// docs/BENCHMARKS.md). The cost is time resolution: an arrival is seen up to 20 ms late, so
/// gaps read up to 20 ms long (the gap rule judges seconds). Off while any listener of the
/// engine connects or waits for its response head (TTFB is exact), and once the stream
/// carries latency stamps (mouth-to-ear is exact); back on at the next tick with neither.
pub const GATHER_US: u64 = 20_000;

/// What one ICY engine runs: its slice of a group and the mode's options.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct IcySpec {
    /// The group's slice this engine runs.
    pub slice: Slice,
    /// Ask for ICY metadata (`Icy-MetaData: 1`) and check every block.
    #[serde(default)]
    pub icy_metadata: bool,
    /// The bitrate the user gave (kbit/s): compared with the stream's, and the media time of a
    /// stream of an unknown format.
    #[serde(default)]
    pub bitrate_kbps: Option<f64>,
    /// For `https://` URLs: accept any server certificate.
    #[serde(default)]
    pub insecure: bool,
    /// For `https://` URLs: PEM file of the certificate authorities to trust.
    #[serde(default)]
    pub ca: Option<PathBuf>,
}

/// Errors that stop an engine before it runs.
#[derive(Debug, Error)]
pub enum EngineError {
    /// A URL could not be used.
    #[error(transparent)]
    Url(#[from] UrlError),
    /// The bind range could not be parsed.
    #[error(transparent)]
    Range(#[from] crate::net::connect::BadRange),
    /// The poller could not be created.
    #[error("poll: {0}")]
    Poll(#[from] io::Error),
    /// No URL was given.
    #[error("no listener URL given")]
    NoUrl,
    /// The TLS client configuration could not be made (`--ca`).
    #[error(transparent)]
    Tls(#[from] crate::net::tls::TlsClientError),
    /// A URL the mode cannot load (HLS players: an `https://` URL), in words.
    #[error("{0}")]
    Unsupported(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not on (before its start, after a ramp-down, or closed at a session's end).
    Idle,
    Connecting,
    Head,
    Streaming,
    Stalled,
    /// A stalled listener the server closed: it stays off.
    Dropped,
    Failed,
}

struct Slot {
    /// The group's listener number.
    id: u32,
    sock: Option<TcpStream>,
    state: State,
    target: u16,
    /// The target of the listener's own URL; `target` differs after a redirect.
    home: u16,
    /// Redirects followed on the way to this connection.
    redirects: u8,
    bind: u16,
    stalled: bool,
    caught: Caught,
    ttfb_pending: bool,
    /// The meter's first tick is behind it (its media time counts as steady from then).
    ticked: bool,
    conn_start_us: u64,
    retry_at_ms: u32,
    meter: Meter,
    check: StreamCheck,
    /// Media time per byte for a stream whose format is not verified (µs per byte; 0 when
    /// unknown).
    unverified_us_per_byte: f64,
    head: Vec<u8>,
    /// The TLS client connection of an `https://` listener (boxed: rustls's state is large).
    tls: Option<Box<rustls::ClientConnection>>,
    /// The TLS handshake is done and counted.
    handshaken: bool,
    /// While it streams: when the current session's connection started (µs since the
    /// epoch); its listening time is counted from there at its close.
    session_start_us: Option<u64>,
    /// When the listener's streaming time was last counted (µs since the epoch).
    counted_us: u64,
    /// With session lengths: when the current session leaves (µs).
    leave_at_us: Option<u64>,
}

struct Target {
    addr: SocketAddr,
    /// For `https://`: the name sent as SNI and verified.
    tls_name: Option<rustls::pki_types::ServerName<'static>>,
    request: Vec<u8>,
    path_format: Option<Format>,
    bind: bool,
}

/// One engine's event loop. Build with [`Engine::new`], drive with [`Engine::run`].
pub struct Engine {
    spec: IcySpec,
    poll: Poll,
    slots: Vec<Slot>,
    /// How many slots are on (the first `on` of `slots`, by listener number).
    on: usize,
    /// The most slots ever on (listeners started at least once).
    started: usize,
    targets: Vec<Target>,
    binds: Vec<Ipv4Addr>,
    scratch: Vec<u8>,
    /// Running totals and this second's histograms.
    snap: Snapshot,
    /// Sessions ended per URL (a slot's `home`): count, listening time (µs).
    sessions: Vec<(u64, u64)>,
    stamps: Vec<u64>,
    epoch: Instant,
    /// This host's wall clock at `epoch` (µs since the Unix epoch).
    epoch_unix_us: u64,
    second: u32,
    clock: Arc<RunClock>,
    /// The client configuration of `https://` targets.
    tls: Option<Arc<rustls::ClientConfig>>,
    /// Polls at most every [`GATHER_US`] (no listener connecting, no latency stamps).
    gather: bool,
    /// When the last poll began (µs since `epoch`).
    last_poll_us: u64,
    /// Latency stamps were seen: arrivals are timed exactly from then on.
    stamped: bool,
}

fn ms(us: u64) -> u32 {
    (us / 1000).min(u32::MAX as u64) as u32
}

/// The ICY listeners as the crowd drives them (stages, sessions, churn, the storm).
impl Audience for Engine {
    fn on(&self) -> usize {
        self.on
    }

    fn set_on(&mut self, on: usize) {
        self.on = on;
        self.started = self.started.max(on);
    }

    fn open_slot(&mut self, i: usize, now_us: u64) {
        self.connect(i, now_us);
    }

    fn close_slot(&mut self, i: usize, now_us: u64) {
        self.close(i, now_us);
    }

    fn streaming(&self, i: usize) -> bool {
        self.slots[i].state == State::Streaming
    }

    fn connected(&self, i: usize) -> bool {
        matches!(
            self.slots[i].state,
            State::Connecting | State::Head | State::Streaming | State::Stalled
        )
    }

    fn leave_at_us(&self, i: usize) -> Option<u64> {
        self.slots[i].leave_at_us
    }
}

impl Engine {
    /// Prepares the engine (parses URLs, builds requests, allocates slots). `clock` is the
    /// run's clock (latency stamps are compared on it).
    pub fn new(spec: IcySpec, clock: Arc<RunClock>) -> Result<Engine, EngineError> {
        let slice = &spec.slice;
        if slice.urls.is_empty() {
            return Err(EngineError::NoUrl);
        }
        let binds = parse_bind_range(&slice.bind_range)?;
        let mut targets = Vec::new();
        for u in &slice.urls {
            targets.push(build_target(u, spec.icy_metadata, &binds)?);
        }
        let nurls = targets.len();
        let stalled_f = slice.behaviour.stalled;
        let slots = slice
            .ids()
            .into_iter()
            .map(|id| {
                let target = (id as usize % nurls) as u16;
                Slot {
                    id,
                    sock: None,
                    state: State::Idle,
                    target,
                    home: target,
                    redirects: 0,
                    bind: if binds.is_empty() {
                        0
                    } else {
                        ((id as usize / nurls) % binds.len()) as u16
                    },
                    stalled: in_share(id, stalled_f),
                    caught: Caught::default(),
                    ttfb_pending: false,
                    ticked: false,
                    conn_start_us: 0,
                    retry_at_ms: 0,
                    meter: Meter::default(),
                    check: StreamCheck::new(Format::Other, 0),
                    unverified_us_per_byte: 0.0,
                    head: Vec::new(),
                    tls: None,
                    handshaken: false,
                    session_start_us: None,
                    counted_us: 0,
                    leave_at_us: None,
                }
            })
            .collect();
        let tls = if targets.iter().any(|t| t.tls_name.is_some()) {
            Some(crate::net::tls::client_config(
                spec.insecure,
                spec.ca.as_deref(),
            )?)
        } else {
            None
        };
        Ok(Engine {
            poll: Poll::new()?,
            slots,
            on: 0,
            started: 0,
            sessions: vec![(0, 0); nurls],
            targets,
            binds,
            scratch: vec![0u8; SCRATCH],
            snap: Snapshot::default(),
            stamps: Vec::new(),
            epoch: Instant::now(),
            epoch_unix_us: unix_us(),
            second: 0,
            clock,
            spec,
            tls,
            gather: false,
            last_poll_us: 0,
            stamped: false,
        })
    }

    fn now_us(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    /// Runs the group's stages to their end, calling `report` once per second (and once at
    /// the end with `done`). Returns early when `stop` is set or `report` returns `false`.
    pub fn run(
        mut self,
        stop: &AtomicBool,
        mut report: impl FnMut(&GroupTick) -> bool,
    ) -> Result<(), EngineError> {
        // Second 0 of every engine of every host is the same instant.
        sleep_until_unix_ms(self.spec.slice.start_unix_ms, &|| {
            stop.load(Ordering::Relaxed)
        });
        self.epoch = Instant::now();
        self.epoch_unix_us = unix_us();
        let slice = self.spec.slice.clone();
        let ids: Vec<u32> = self.slots.iter().map(|s| s.id).collect();
        let end_us = (slice.end_s() * 1e6) as u64;
        let mut crowd = Crowd::new(&slice, ids);
        let mut next_tick_us = 1_000_000u64;
        let mut events = Events::with_capacity(4096);
        loop {
            let now = self.now_us();
            let due = crowd.due(now, self.on);
            let wake = crowd.wake_us(now, self.on, next_tick_us);
            let timeout = Duration::from_micros(wake.saturating_sub(now));
            // Reads gathered (see `GATHER_US`): the readiness of many listeners in one poll.
            if self.gather && !due && timeout.as_micros() > u128::from(GATHER_US) {
                let since = now.saturating_sub(self.last_poll_us);
                if since < GATHER_US {
                    std::thread::sleep(Duration::from_micros(GATHER_US - since));
                }
            }
            self.last_poll_us = self.now_us();
            match self.poll.poll(&mut events, Some(timeout)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(EngineError::Poll(e)),
            }
            let now = self.now_us();
            for ev in events.iter() {
                let i = ev.token().0;
                let closed = ev.is_read_closed() || ev.is_error();
                self.on_event(i, closed, now);
            }
            // The stages, sessions, churn and the storm.
            crowd.step(now, &mut self);
            if now >= next_tick_us {
                let last = now + 500_000 >= end_us;
                let stopping = stop.load(Ordering::Relaxed);
                let mut tick = self.tick(now, true);
                if last || stopping {
                    self.finish(now, &mut tick);
                }
                if !report(&tick) || last || stopping {
                    return Ok(());
                }
                self.second += 1;
                next_tick_us = (self.second as u64 + 1) * 1_000_000;
            }
        }
    }

    /// Starts (or restarts) the connection of slot `i` to its own URL.
    fn connect(&mut self, i: usize, now: u64) {
        self.snap.connects += 1;
        let s = &mut self.slots[i];
        s.target = s.home;
        s.redirects = 0;
        self.open(i, now);
    }

    /// Follows a redirect of slot `i` to `location`: connects there, keeping the connection's
    /// start time (its TTFB covers the redirect). Errors: the failure to count when the
    /// location is no absolute `http://` URL or the redirect limit is reached.
    fn follow(&mut self, i: usize, location: &str, now: u64) -> Result<(), FailReason> {
        if self.slots[i].redirects >= MAX_REDIRECTS {
            return Err(FailReason::BadHead);
        }
        let url = HttpUrl::parse(location).map_err(|_| FailReason::BadHead)?;
        let t = build_target(location, self.spec.icy_metadata, &self.binds)
            .map_err(|_| FailReason::BadHead)?;
        let idx = match self
            .targets
            .iter()
            .position(|x| x.addr == url.addr && x.request == t.request)
        {
            Some(k) => k,
            None if self.targets.len() < usize::from(u16::MAX) => {
                self.targets.push(t);
                self.targets.len() - 1
            }
            None => return Err(FailReason::BadHead),
        };
        let s = &mut self.slots[i];
        s.sock = None;
        s.target = idx as u16;
        s.redirects += 1;
        let started = s.conn_start_us;
        self.open(i, now);
        self.slots[i].conn_start_us = started;
        Ok(())
    }

    /// Opens the connection of slot `i` to its current target.
    fn open(&mut self, i: usize, now: u64) {
        // A listener connecting: its TTFB is timed exactly.
        self.gather = false;
        let s = &mut self.slots[i];
        let t = &self.targets[s.target as usize];
        let local = if t.bind {
            Some(self.binds[s.bind as usize])
        } else {
            None
        };
        s.conn_start_us = now;
        s.head = Vec::new();
        s.tls = None;
        s.handshaken = false;
        s.ticked = false;
        match start_connect(t.addr, local) {
            Ok(std) => {
                let mut sock = TcpStream::from_std(std);
                match self.poll.registry().register(
                    &mut sock,
                    Token(i),
                    Interest::READABLE | Interest::WRITABLE,
                ) {
                    Ok(()) => {
                        s.sock = Some(sock);
                        s.state = State::Connecting;
                    }
                    Err(e) => self.fail(i, FailReason::from_io(&e), now),
                }
            }
            Err(e) => self.fail(i, FailReason::from_io(&e), now),
        }
    }

    /// Counts the streaming time of slot `i` up to `now` into the listening totals.
    fn count_time(&mut self, i: usize, now: u64) {
        let s = &mut self.slots[i];
        if s.state == State::Streaming {
            let dt = now.saturating_sub(s.counted_us);
            self.snap.listen_us += dt;
            if s.ticked {
                self.snap.steady_listen_us += dt;
            }
        }
        s.counted_us = now;
    }

    /// Closes slot `i` by the bench's choice (churn, storm, ramp-down, end of run), or after a
    /// failure; a streaming session's listening time is counted for its URL.
    fn close(&mut self, i: usize, now: u64) {
        self.count_time(i, now);
        let s = &mut self.slots[i];
        s.leave_at_us = None;
        if let Some(start) = s.session_start_us.take() {
            let gt = &mut self.sessions[s.home as usize];
            gt.0 += 1;
            gt.1 += now.saturating_sub(start);
        }
        if s.state == State::Streaming {
            let longest = s.meter.final_longest_gap(ms(now));
            self.snap.longest_gap.record_us(u64::from(longest) * 1000);
        }
        s.sock = None;
        s.head = Vec::new();
        s.tls = None;
        s.state = State::Idle;
    }

    fn fail(&mut self, i: usize, reason: FailReason, now: u64) {
        *self.snap.failures.entry(reason.key()).or_insert(0) += 1;
        self.close(i, now);
        let s = &mut self.slots[i];
        s.caught.fail(&mut self.snap);
        s.state = State::Failed;
        if let Some(d) = self.spec.slice.behaviour.reconnect_after {
            s.retry_at_ms = ms(now) + (d.0 * 1000.0) as u32;
        }
    }

    fn on_event(&mut self, i: usize, closed: bool, now: u64) {
        let Some(state) = self.slots.get(i).map(|s| s.state) else {
            return;
        };
        match state {
            State::Connecting => self.on_connecting(i, closed, now),
            State::Head | State::Streaming => self.on_readable(i, closed, now),
            _ => {}
        }
    }

    fn on_connecting(&mut self, i: usize, closed: bool, now: u64) {
        let s = &mut self.slots[i];
        let Some(sock) = s.sock.as_mut() else { return };
        match sock.take_error() {
            Ok(Some(e)) | Err(e) => return self.fail(i, FailReason::from_io(&e), now),
            Ok(None) => {}
        }
        match sock.peer_addr() {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                if closed {
                    self.fail(i, FailReason::Refused, now);
                }
                return;
            }
            Err(e) => return self.fail(i, FailReason::from_io(&e), now),
        }
        let t = &self.targets[s.target as usize];
        if let (Some(name), Some(config)) = (&t.tls_name, &self.tls) {
            // TLS: the request goes out once the handshake is done; read events drive it.
            let mut conn = match rustls::ClientConnection::new(config.clone(), name.clone()) {
                Ok(c) => c,
                Err(_) => return self.fail(i, FailReason::Io, now),
            };
            if conn.writer().write_all(&t.request).is_err() {
                return self.fail(i, FailReason::Io, now);
            }
            s.tls = Some(Box::new(conn));
            if let Err(e) = self
                .poll
                .registry()
                .reregister(sock, Token(i), Interest::READABLE)
            {
                return self.fail(i, FailReason::from_io(&e), now);
            }
            s.state = State::Head;
            s.head = Vec::with_capacity(512);
            if let Err(r) = flush_tls(s) {
                return self.fail(i, r, now);
            }
            return;
        }
        let req = &t.request;
        match sock.write(req) {
            Ok(k) if k == req.len() => {}
            Ok(_) => return self.fail(i, FailReason::Io, now),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) => return self.fail(i, FailReason::from_io(&e), now),
        }
        if s.stalled {
            // A stalled listener never reads; its socket is watched for the server's close
            // once a second (see `watch_stalled`), not polled.
            let _ = self.poll.registry().deregister(sock);
            s.state = State::Stalled;
        } else {
            if let Err(e) = self
                .poll
                .registry()
                .reregister(sock, Token(i), Interest::READABLE)
            {
                return self.fail(i, FailReason::from_io(&e), now);
            }
            s.state = State::Head;
            s.head = Vec::with_capacity(512);
        }
    }

    fn on_readable(&mut self, i: usize, closed: bool, now: u64) {
        if self.slots[i].tls.is_some() {
            return self.on_readable_tls(i, now);
        }
        loop {
            let s = &mut self.slots[i];
            let Some(sock) = s.sock.as_mut() else { return };
            match sock.read(&mut self.scratch) {
                Ok(0) => {
                    let r = if s.state == State::Head {
                        FailReason::ClosedBeforeHead
                    } else {
                        FailReason::ClosedWhileStreaming
                    };
                    return self.fail(i, r, now);
                }
                Ok(n) => {
                    if let Err(r) = self.consume(i, n, now) {
                        return self.fail(i, r, now);
                    }
                    // A redirect opened a new connection: its events come on their own.
                    if self.slots[i].state == State::Connecting {
                        return;
                    }
                    // A short read drained the socket: edge-triggered epoll reports new data
                    // (and a FIN that arrived after this read) with a new event.
                    if n < self.scratch.len() && !closed {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return self.fail(i, FailReason::from_io(&e), now),
            }
        }
    }

    /// Reads an `https://` listener: TLS records in, handshake messages out, plaintext to
    /// [`Engine::consume`].
    fn on_readable_tls(&mut self, i: usize, now: u64) {
        loop {
            let s = &mut self.slots[i];
            let (Some(sock), Some(conn)) = (s.sock.as_mut(), s.tls.as_mut()) else {
                return;
            };
            match conn.read_tls(sock) {
                Ok(0) => {
                    let r = if s.state == State::Head {
                        FailReason::ClosedBeforeHead
                    } else {
                        FailReason::ClosedWhileStreaming
                    };
                    return self.fail(i, r, now);
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return self.fail(i, FailReason::from_io(&e), now),
            }
            if conn.process_new_packets().is_err() {
                return self.fail(i, FailReason::Io, now);
            }
            if !s.handshaken && !conn.is_handshaking() {
                s.handshaken = true;
                self.snap
                    .handshake
                    .record_us(now.saturating_sub(s.conn_start_us));
            }
            if let Err(r) = flush_tls(s) {
                return self.fail(i, r, now);
            }
            loop {
                let s = &mut self.slots[i];
                let Some(conn) = s.tls.as_mut() else { return };
                match conn.reader().read(&mut self.scratch) {
                    Ok(0) => return self.fail(i, FailReason::ClosedWhileStreaming, now),
                    Ok(n) => {
                        if let Err(r) = self.consume(i, n, now) {
                            return self.fail(i, r, now);
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(_) => return self.fail(i, FailReason::ClosedWhileStreaming, now),
                }
            }
        }
    }

    /// Handles `n` fresh bytes in the scratch buffer for slot `i`.
    fn consume(&mut self, i: usize, n: usize, now: u64) -> Result<(), FailReason> {
        if self.slots[i].state == State::Streaming {
            self.body(i, None, n, now);
            return Ok(());
        }
        let s = &mut self.slots[i];
        s.head.extend_from_slice(&self.scratch[..n]);
        let (head, len) = match parse_response_head(&s.head) {
            Ok(Some(h)) => h,
            Ok(None) if s.head.len() > MAX_HEAD => return Err(FailReason::BadHead),
            Ok(None) => return Ok(()),
            Err(_) => return Err(FailReason::BadHead),
        };
        if matches!(head.status, 301 | 302 | 303 | 307 | 308) {
            if let Some(location) = head.header("location") {
                let location = location.trim().to_owned();
                return self.follow(i, &location, now);
            }
        }
        if head.status != 200 {
            return Err(FailReason::HttpStatus(head.status));
        }
        let format = head
            .header("content-type")
            .map(Format::from_content_type)
            .filter(|f| *f != Format::Other)
            .or(self.targets[s.target as usize].path_format)
            .unwrap_or(Format::Other);
        let metaint = head
            .header("icy-metaint")
            .and_then(|v| v.trim().parse::<u32>().ok())
            .filter(|&m| m > 0 && self.spec.icy_metadata)
            .unwrap_or(0);
        s.check = StreamCheck::new(format, metaint);
        // A stream of an unknown format: media time from bytes at the given bitrate, else at
        // its `icy-br`, else none (only gaps are judged).
        s.unverified_us_per_byte = 0.0;
        if !s.check.verifies() {
            let kbps = self.spec.bitrate_kbps.or_else(|| {
                head.header("icy-br")
                    .and_then(|v| v.split(',').next())
                    .and_then(|v| v.trim().parse::<f64>().ok())
            });
            if let Some(k) = kbps.filter(|k| *k > 0.0) {
                s.unverified_us_per_byte = 8e6 / (k * 1000.0);
            }
            self.snap.unverified += 1;
        }
        let judged = s.check.verifies() || s.unverified_us_per_byte > 0.0;
        s.meter = Meter::new(ms(now), judged);
        s.session_start_us = Some(s.conn_start_us);
        if let Some((lo, hi)) = self.spec.slice.behaviour.session_range_us() {
            s.leave_at_us = Some(now + session_length_us(lo, hi, now ^ ((i as u64) << 32)));
        }
        s.state = State::Streaming;
        s.counted_us = now;
        s.ttfb_pending = true;
        let head_buf = std::mem::take(&mut s.head);
        if head_buf.len() > len {
            self.body(i, Some(&head_buf[len..]), 0, now);
        }
        Ok(())
    }

    /// Takes body bytes of streaming slot `i`: `extra` when given, else the first `n` bytes of
    /// the scratch buffer.
    fn body(&mut self, i: usize, extra: Option<&[u8]>, n: usize, now: u64) {
        let data = match extra {
            Some(d) => d,
            None => &self.scratch[..n],
        };
        if data.is_empty() {
            return;
        }
        let s = &mut self.slots[i];
        let snap = &mut self.snap;
        if s.ttfb_pending {
            s.ttfb_pending = false;
            snap.ttfb.record_us(now.saturating_sub(s.conn_start_us));
        } else {
            let gap = now.saturating_sub(u64::from(s.meter.last_read_ms) * 1000);
            snap.gap.record_us(gap);
        }
        let now_ms = ms(now);
        s.meter.on_read(now_ms);
        snap.bytes += data.len() as u64;
        let fed = s.check.feed(data, &mut self.stamps);
        let mut media = fed.media_us;
        if !s.check.verifies() && s.unverified_us_per_byte > 0.0 {
            media = (data.len() as f64 * s.unverified_us_per_byte) as u64;
        }
        if media > 0 {
            s.meter.on_media(now_ms, media);
            snap.media_us += media;
            if s.ticked {
                snap.steady_media_us += media;
            }
        }
        snap.units += u64::from(fed.units);
        snap.garbage_bytes += u64::from(fed.garbage);
        snap.icy_blocks += u64::from(fed.blocks);
        if fed.broke {
            s.caught.catch(Rule::Corrupt, snap, self.second);
        }
        if !self.stamps.is_empty() {
            if !self.stamped {
                self.stamped = true;
                self.gather = false;
            }
            let arrived = self.clock.to_run_us(self.epoch_unix_us + now);
            for stamp in self.stamps.drain(..) {
                if let Some(lat) = arrived.checked_sub(stamp) {
                    snap.m2e.record_us(lat);
                }
            }
        }
    }

    /// Watches the stalled listeners' sockets for the server closing them (one `poll(2)` for
    /// all, `POLLRDHUP`: a close is seen even with unread data queued), and every
    /// [`HELD_EVERY_S`] seconds reads how many bytes each holds unread (`FIONREAD`).
    fn watch_stalled(&mut self, now: u64) {
        let stalled: Vec<usize> = (0..self.on)
            .filter(|&i| self.slots[i].state == State::Stalled)
            .collect();
        if stalled.is_empty() {
            return;
        }
        let mut fds: Vec<libc::pollfd> = stalled
            .iter()
            .map(|&i| libc::pollfd {
                fd: self.slots[i].sock.as_ref().map_or(-1, |s| s.as_raw_fd()),
                events: libc::POLLRDHUP,
                revents: 0,
            })
            .collect();
        // SAFETY: `fds` is a valid array of pollfd of the stated length; timeout 0.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
        let held_now = self.second.is_multiple_of(HELD_EVERY_S);
        let mut held = 0u64;
        for (k, &i) in stalled.iter().enumerate() {
            let fd = fds[k].fd;
            if held_now && fd >= 0 {
                let mut queued: libc::c_int = 0;
                // SAFETY: FIONREAD writes one c_int for a valid socket fd.
                if unsafe { libc::ioctl(fd, libc::FIONREAD, &mut queued) } == 0 {
                    held += queued.max(0) as u64;
                }
            }
            let gone = libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR;
            if rc > 0 && fds[k].revents & gone != 0 {
                let s = &mut self.slots[i];
                self.snap
                    .stalled_drop
                    .record_us(now.saturating_sub(s.conn_start_us));
                self.snap.stalled_dropped += 1;
                s.sock = None;
                s.state = State::Dropped;
            }
        }
        if held_now {
            self.snap.stalled_held_bytes = held;
        }
    }

    /// The tick of the second that just ended: the rules judged for every listener (when
    /// `judge`), the states counted, this second's histograms handed over.
    fn tick(&mut self, now: u64, judge: bool) -> GroupTick {
        let now_ms = ms(now);
        let rules = self.spec.slice.judge;
        let second = self.second;
        self.watch_stalled(now);
        let mut t = GroupTick {
            group: self.spec.slice.group,
            second,
            done: false,
            snap: Snapshot::default(),
        };
        let (mut connecting, mut streaming, mut stalled, mut starved, mut down) = (0, 0, 0, 0, 0);
        for i in 0..self.on {
            self.count_time(i, now);
            let s = &mut self.slots[i];
            match s.state {
                State::Connecting | State::Head => {
                    let waited = now_ms.saturating_sub(ms(s.conn_start_us));
                    if judge && waited > rules.connect_timeout_ms {
                        self.fail(i, FailReason::Timeout, now);
                        down += 1;
                    } else {
                        connecting += 1;
                        // Waiting for audio longer than a player's buffer is starving too.
                        if judge && waited > rules.max_gap_ms && !s.stalled {
                            starved += 1;
                            s.caught.catch(Rule::Gap, &mut self.snap, second);
                        }
                    }
                }
                State::Streaming => {
                    streaming += 1;
                    let v = s.meter.tick(now_ms, &rules);
                    s.ticked = !v.burst;
                    if judge && (v.rate || v.gap) {
                        starved += 1;
                        if v.rate {
                            s.caught.catch(Rule::Rate, &mut self.snap, second);
                        }
                        if v.gap {
                            s.caught.catch(Rule::Gap, &mut self.snap, second);
                        }
                    }
                }
                State::Stalled => stalled += 1,
                State::Failed => {
                    if judge
                        && self.spec.slice.behaviour.reconnect_after.is_some()
                        && now_ms >= s.retry_at_ms
                    {
                        self.connect(i, now);
                        connecting += 1;
                    } else {
                        down += 1;
                    }
                }
                State::Idle | State::Dropped => {}
            }
        }
        let snap = &mut self.snap;
        snap.want = self.on as u32;
        snap.started = self.started as u32;
        snap.connecting = connecting;
        snap.streaming = streaming;
        snap.stalled = stalled;
        snap.starved = starved;
        snap.down = down;
        self.gather = connecting == 0 && !self.stamped;
        let cpu = if self.spec.slice.thread_cpu {
            rusage::thread()
        } else {
            rusage::process()
        };
        snap.cpu_us = cpu.user_us + cpu.sys_us;
        t.snap = snap.clone();
        snap.clear_hists();
        t
    }

    /// Closes everything at the end of the run and adds the sessions to the last tick.
    fn finish(&mut self, now: u64, tick: &mut GroupTick) {
        for i in 0..self.slots.len() {
            if self.slots[i].state != State::Idle {
                self.close(i, now);
            }
        }
        tick.done = true;
        tick.snap.listen_us = self.snap.listen_us;
        tick.snap.steady_listen_us = self.snap.steady_listen_us;
        tick.snap.longest_gap.merge(&self.snap.longest_gap);
        for (k, &(sessions, us)) in self.sessions.iter().enumerate() {
            if sessions == 0 {
                continue;
            }
            let mount = mount_of(&self.spec.slice.urls[k]);
            tick.snap
                .ground_truth
                .entry(mount)
                .or_default()
                .add(&crate::stats::GroundTruth {
                    sessions,
                    listening_seconds: us as f64 / 1e6,
                });
        }
    }
}

/// A session length in `[lo, hi]` µs, spread evenly by `seed` (splitmix64 of it: a slot's
/// index and the time it started streaming).
pub fn session_length_us(lo: u64, hi: u64, seed: u64) -> u64 {
    if hi <= lo {
        return lo;
    }
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    z % (hi - lo + 1) + lo
}

/// The mount a listener URL names: its path without the query (`/live.mp3`).
pub fn mount_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let path = rest.find('/').map_or("/", |i| &rest[i..]);
    path.split(['?', '#']).next().unwrap_or("/").to_owned()
}

/// The target of listener URL `u`: its address and the request a listener sends (`binds`:
/// the source addresses, applied to the targets they suit, see [`binds_apply`]).
fn build_target(u: &str, icy_metadata: bool, binds: &[Ipv4Addr]) -> Result<Target, UrlError> {
    let url = HttpUrl::parse(u)?;
    let mut req = format!(
        "GET {} HTTP/1.0\r\nHost: {}\r\nUser-Agent: throng-bench/{}\r\nAccept: */*\r\n",
        url.path,
        url.host_header(),
        env!("CARGO_PKG_VERSION")
    );
    if icy_metadata {
        req.push_str("Icy-MetaData: 1\r\n");
    }
    if let Some((user, pass)) = &url.credentials {
        req.push_str(&format!(
            "Authorization: {}\r\n",
            throng_proto::auth::basic_authorization(user, pass)
        ));
    }
    req.push_str("\r\n");
    let tls_name = if url.tls {
        Some(
            rustls::pki_types::ServerName::try_from(url.host.clone())
                .map_err(|_| UrlError::Port(u.to_string()))?,
        )
    } else {
        None
    };
    Ok(Target {
        tls_name,
        addr: url.addr,
        request: req.into_bytes(),
        path_format: Format::from_path_extension(url.path.split('?').next().unwrap_or("")),
        bind: binds_apply(&url.addr, binds),
    })
}

/// Sends what rustls has to send on slot `s` (handshake messages, the request).
fn flush_tls(s: &mut Slot) -> Result<(), FailReason> {
    let (Some(sock), Some(conn)) = (s.sock.as_mut(), s.tls.as_mut()) else {
        return Ok(());
    };
    while conn.wants_write() {
        match conn.write_tls(sock) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(FailReason::from_io(&e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod ground_truth_tests {
    use super::*;

    #[test]
    fn mounts_are_url_paths_without_the_query() {
        assert_eq!(mount_of("http://127.0.0.1:8000/live.mp3"), "/live.mp3");
        assert_eq!(mount_of("https://h/a/b.ogg?x=1"), "/a/b.ogg");
        assert_eq!(mount_of("http://h"), "/");
    }

    #[test]
    fn session_lengths_stay_in_range_and_spread() {
        let (lo, hi) = (5_000_000, 120_000_000);
        let v: Vec<u64> = (0..1000)
            .map(|i| session_length_us(lo, hi, i * 7919))
            .collect();
        assert!(v.iter().all(|&x| (lo..=hi).contains(&x)));
        let mean = v.iter().sum::<u64>() as f64 / v.len() as f64;
        assert!((55e6..70e6).contains(&mean), "mean {mean}");
        assert_eq!(session_length_us(lo, lo, 3), lo);
    }
}
