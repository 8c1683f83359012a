//! The listener event loop: one `mio` poll, one shared read buffer, a slot of state per listener.
//!
//! One engine runs per worker (a process, or a thread for small runs). Each slot holds a socket,
//! a [`Meter`] and a few flags; bytes are read into one 64 KiB scratch buffer and only counted,
//! so the cost per listener is one `read` per server write plus a share of `epoll_wait`. Once per
//! second the engine walks all slots (starvation verdicts, timeouts, reconnects) and hands a
//! [`WorkerTick`] to its reporter.

use crate::icy::listener::{Meter, Thresholds};
use crate::net::connect::{is_loopback_v4, parse_bind_range, start_connect};
use crate::net::url::{HttpUrl, UrlError};
use crate::observe::rusage;
use crate::profile::{is_sampled, is_stalled, Profile};
use crate::stats::listener_counts::ListenerCounts;
use crate::stats::{bucket_of, FailReason, LogHist, Phase, WorkerTick, HIST_BUCKETS};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use thiserror::Error;
use throng_proto::format::Format;
use throng_proto::framer::Framer;
use throng_proto::http::parse_response_head;
use throng_proto::icy::{IcyDemuxer, IcyPiece};

/// Size of the shared read buffer (bytes).
const SCRATCH: usize = 64 * 1024;
/// Largest response head accepted (bytes).
const MAX_HEAD: usize = 16 * 1024;
/// Most connects started per loop iteration, so a storm does not starve reads (connections).
const CONNECT_BATCH: u32 = 1000;
/// Most redirects (`301`, `302`, `303`, `307`, `308` with an absolute `http://` `Location`)
/// followed per connection, as a player does (a cluster's origin sends listeners to edges).
const MAX_REDIRECTS: u8 = 5;

/// What one engine does: its share of the listeners, the URLs, the profile, the common start.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EngineSpec {
    /// Worker index (0-based).
    pub worker: u32,
    /// Number of workers in the run.
    pub workers: u32,
    /// Listener URLs; listeners are spread round-robin over them.
    pub urls: Vec<String>,
    /// The run's profile (listener count and ramp are totals over all workers).
    pub profile: Profile,
    /// Common start time (ms since the Unix epoch): second 0 of every worker begins here.
    pub start_unix_ms: u64,
    /// Report CPU of the calling thread (in-process worker) instead of the whole process.
    pub thread_cpu: bool,
}

impl EngineSpec {
    /// Global listener ids of this worker: `worker`, `worker + workers`, ...
    pub fn listener_count(&self) -> u32 {
        let total = self.profile.listeners;
        let w = self.workers.max(1);
        if self.worker >= total {
            0
        } else {
            (total - self.worker).div_ceil(w)
        }
    }
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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Idle,
    Connecting,
    Head,
    Streaming,
    Stalled,
    Failed,
}

/// Optional per-listener checks (boxed: only ICY listeners and the decode sample have one).
struct Checker {
    demux: Option<IcyDemuxer>,
    framer: Option<Framer>,
}

struct Slot {
    sock: Option<TcpStream>,
    state: State,
    target: u16,
    /// The target of the listener's own URL; `target` differs after a redirect.
    home: u16,
    /// Redirects followed on the way to this connection.
    redirects: u8,
    bind: u16,
    stalled: bool,
    sampled: bool,
    ever_starved: bool,
    ttfb_pending: bool,
    conn_start_us: u64,
    retry_at_ms: u32,
    longest_gap_ms: u32,
    streamed: bool,
    meter: Meter,
    head: Vec<u8>,
    check: Option<Box<Checker>>,
    /// The TLS client connection of an `https://` listener (boxed: rustls's state is large).
    tls: Option<Box<rustls::ClientConnection>>,
    /// The TLS handshake is done and counted.
    handshaken: bool,
    /// While it streams: when the current session's connection started (µs since the
    /// epoch); its listening time is counted from there at its close.
    session_start_us: Option<u64>,
    /// With `--session-min`/`--session-max`: when the current session leaves (µs).
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

/// Counters reset every second, plus cumulative ones.
#[derive(Default)]
struct Counters {
    connects: u32,
    bytes: u64,
    ttfb: Vec<u64>,
    max_gap_ms: u32,
    failures: BTreeMap<String, u64>,
    icy_blocks: u64,
    frames: u64,
    garbage: u64,
    starved_total: u32,
    /// Durations of the TLS handshakes completed this second, from the connect (µs).
    handshakes: Vec<u64>,
    /// Per URL (a slot's `home`): sessions ended and their listening time (µs), cumulative.
    sessions: Vec<(u64, u64)>,
}

/// One worker's event loop. Build with [`Engine::new`], drive with [`Engine::run`].
pub struct Engine {
    spec: EngineSpec,
    poll: Poll,
    slots: Vec<Slot>,
    targets: Vec<Target>,
    binds: Vec<Ipv4Addr>,
    scratch: Vec<u8>,
    th: Thresholds,
    bps: Option<u32>,
    c: Counters,
    epoch: Instant,
    /// The client configuration of `https://` targets.
    tls: Option<Arc<rustls::ClientConfig>>,
}

fn ms(us: u64) -> u32 {
    (us / 1000).min(u32::MAX as u64) as u32
}

impl Engine {
    /// Prepares the engine (parses URLs, builds requests, allocates slots).
    pub fn new(spec: EngineSpec) -> Result<Engine, EngineError> {
        if spec.urls.is_empty() {
            return Err(EngineError::NoUrl);
        }
        let binds = parse_bind_range(&spec.profile.bind_range)?;
        let mut targets = Vec::new();
        for u in &spec.urls {
            targets.push(build_target(u, &spec.profile, !binds.is_empty())?);
        }
        let n = spec.listener_count();
        let w = spec.workers.max(1);
        let stalled_f = spec.profile.effective_stalled_fraction();
        let sample_f = spec.profile.decode_sample;
        let mut slots = Vec::with_capacity(n as usize);
        for k in 0..n {
            let id = spec.worker + k * w;
            let target = (id as usize % targets.len()) as u16;
            slots.push(Slot {
                sock: None,
                state: State::Idle,
                target,
                home: target,
                redirects: 0,
                bind: if binds.is_empty() {
                    0
                } else {
                    ((id as usize / targets.len()) % binds.len()) as u16
                },
                stalled: is_stalled(id, stalled_f),
                sampled: is_sampled(id, sample_f),
                ever_starved: false,
                ttfb_pending: false,
                conn_start_us: 0,
                retry_at_ms: 0,
                longest_gap_ms: 0,
                streamed: false,
                meter: Meter::default(),
                head: Vec::new(),
                check: None,
                tls: None,
                handshaken: false,
                session_start_us: None,
                leave_at_us: None,
            });
        }
        let tls = if targets.iter().any(|t| t.tls_name.is_some()) {
            let p = &spec.profile;
            Some(crate::net::tls::client_config(p.insecure, p.ca.as_deref())?)
        } else {
            None
        };
        let p = &spec.profile;
        let th = Thresholds {
            window: p.window_secs(),
            min_rate_pct: p.min_rate_pct,
            max_gap_ms: (p.max_gap.0 * 1000.0) as u32,
        };
        let bps = p.bitrate_kbps.map(|k| (k * 1000.0 / 8.0).round() as u32);
        let targets_len = targets.len();
        Ok(Engine {
            poll: Poll::new()?,
            slots,
            targets,
            binds,
            scratch: vec![0u8; SCRATCH],
            th,
            bps,
            c: Counters {
                sessions: vec![(0, 0); targets_len],
                ..Counters::default()
            },
            epoch: Instant::now(),
            spec,
            tls,
        })
    }

    fn now_us(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    /// Runs the whole profile, calling `report` once per second (and once at the end with
    /// `phase == Done`). Returns early when `stop` is set or `report` returns `false`.
    pub fn run(
        mut self,
        stop: &AtomicBool,
        mut report: impl FnMut(&WorkerTick) -> bool,
    ) -> Result<(), EngineError> {
        // Align second 0 with the common start time.
        crate::profile::sleep_until_unix_ms(self.spec.start_unix_ms);
        self.epoch = Instant::now();
        let n = self.slots.len() as u32;
        let total = self.spec.profile.listeners.max(1);
        let rate = self.spec.profile.worker_ramp(n);
        let hold_us = (self.spec.profile.hold.0 * 1e6) as u64;
        let churn_rate = self.spec.profile.effective_churn_rate() * n as f64 / total as f64;
        let storm_at_us = self
            .spec
            .profile
            .effective_storm_at()
            .map(|s| (s * 1e6) as u64);
        let sessions_range = self.spec.profile.session_range_us();
        let mut next_leave_scan = 0u64;
        let mut storm_done = false;
        let mut churn_acc = 0.0f64;
        let mut churn_cursor = 0usize;
        let mut last_churn_us = 0u64;
        let mut started = 0u32;
        let mut hold_start_us: Option<u64> = if n == 0 { Some(0) } else { None };
        let mut next_tick_us = 1_000_000u64;
        let mut second = 0u32;
        let mut events = Events::with_capacity(4096);
        loop {
            let now = self.now_us();
            let ramping = started < n;
            let mut wake = next_tick_us;
            if ramping {
                wake = wake.min(now + 1000);
            }
            if (churn_rate > 0.0 && hold_start_us.is_some()) || sessions_range.is_some() {
                wake = wake.min(now + 100_000);
            }
            let timeout = Duration::from_micros(wake.saturating_sub(now));
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
            // Ramp: start the listeners that are due.
            if started < n {
                let due = (((now as f64 / 1e6) * rate).floor() as u32 + 1).min(n);
                let mut batch = 0;
                while started < due && batch < CONNECT_BATCH {
                    self.connect(started as usize, now);
                    started += 1;
                    batch += 1;
                }
                if started == n {
                    hold_start_us = Some(now);
                }
            }
            // Sessions of a random length: those due leave and rejoin at once (checked every
            // 100 ms).
            if sessions_range.is_some() && now >= next_leave_scan {
                next_leave_scan = now + 100_000;
                for i in 0..self.slots.len() {
                    if self.slots[i].leave_at_us.is_some_and(|t| now >= t) {
                        self.close(i, now);
                        self.connect(i, now);
                    }
                }
            }
            if let Some(hs) = hold_start_us {
                let in_hold = now.saturating_sub(hs);
                if churn_rate > 0.0 {
                    let dt = now.saturating_sub(last_churn_us.max(hs)) as f64 / 1e6;
                    last_churn_us = now;
                    churn_acc += dt * churn_rate;
                    while churn_acc >= 1.0 {
                        churn_acc -= 1.0;
                        if let Some(i) = self.next_streaming(&mut churn_cursor) {
                            self.close(i, now);
                            self.connect(i, now);
                        }
                    }
                }
                if let (Some(at), false) = (storm_at_us, storm_done) {
                    if in_hold >= at {
                        storm_done = true;
                        for i in 0..self.slots.len() {
                            if matches!(
                                self.slots[i].state,
                                State::Connecting | State::Head | State::Streaming | State::Stalled
                            ) {
                                self.close(i, now);
                                self.connect(i, now);
                            }
                        }
                    }
                }
            }
            if now >= next_tick_us {
                let phase = if hold_start_us.is_some() {
                    Phase::Hold
                } else {
                    Phase::Ramp
                };
                let tick = self.tick(second, phase, started, now, true);
                if !report(&tick) {
                    return Ok(());
                }
                second += 1;
                next_tick_us = (second as u64 + 1) * 1_000_000;
                let finished = hold_start_us.is_some_and(|hs| now + 500_000 >= hs + hold_us);
                if finished || stop.load(Ordering::Relaxed) {
                    let now = self.now_us();
                    let done = self.finish(second, started, now);
                    report(&done);
                    return Ok(());
                }
            }
        }
    }

    fn next_streaming(&self, cursor: &mut usize) -> Option<usize> {
        let n = self.slots.len();
        for _ in 0..n {
            let i = *cursor % n;
            *cursor = (i + 1) % n;
            if self.slots[i].state == State::Streaming {
                return Some(i);
            }
        }
        None
    }

    /// Starts (or restarts) the connection of slot `i` to its own URL.
    fn connect(&mut self, i: usize, now: u64) {
        self.c.connects += 1;
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
        let t = build_target(location, &self.spec.profile, !self.binds.is_empty())
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
        let s = &mut self.slots[i];
        let t = &self.targets[s.target as usize];
        let local = if t.bind {
            Some(self.binds[s.bind as usize])
        } else {
            None
        };
        s.conn_start_us = now;
        s.head = Vec::new();
        s.check = None;
        s.tls = None;
        s.handshaken = false;
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

    /// Closes slot `i` by the bench's choice (churn, storm, end of run), or after a failure;
    /// a streaming session's listening time is counted for its URL.
    fn close(&mut self, i: usize, now: u64) {
        let s = &mut self.slots[i];
        s.leave_at_us = None;
        if let Some(start) = s.session_start_us.take() {
            let gt = &mut self.c.sessions[s.home as usize];
            gt.0 += 1;
            gt.1 += now.saturating_sub(start);
        }
        if s.state == State::Streaming {
            s.longest_gap_ms = s.longest_gap_ms.max(s.meter.final_longest_gap(ms(now)));
        }
        s.sock = None;
        s.head = Vec::new();
        s.check = None;
        s.tls = None;
        s.state = State::Idle;
    }

    fn fail(&mut self, i: usize, reason: FailReason, now: u64) {
        *self.c.failures.entry(reason.key()).or_insert(0) += 1;
        self.close(i, now);
        let s = &mut self.slots[i];
        s.state = State::Failed;
        if let Some(d) = self.spec.profile.reconnect_after {
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
                self.c.handshakes.push(now.saturating_sub(s.conn_start_us));
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
        let s = &mut self.slots[i];
        if s.state == State::Streaming {
            return on_body(s, &self.scratch[..n], now, &mut self.c);
        }
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
        let bps = self.bps.unwrap_or_else(|| {
            head.header("icy-br")
                .and_then(|v| v.split(',').next())
                .and_then(|v| v.trim().parse::<f64>().ok())
                .map(|k| (k * 1000.0 / 8.0) as u32)
                .unwrap_or(0)
        });
        let format = head
            .header("content-type")
            .map(Format::from_content_type)
            .filter(|f| *f != Format::Other)
            .or(self.targets[s.target as usize].path_format)
            .unwrap_or(Format::Other);
        let metaint = head
            .header("icy-metaint")
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&m| m > 0);
        let demux = if self.spec.profile.icy {
            metaint.map(IcyDemuxer::new)
        } else {
            None
        };
        let framer = if s.sampled && format != Format::Other {
            Some(Framer::new(format))
        } else {
            None
        };
        s.check = if demux.is_some() || framer.is_some() {
            Some(Box::new(Checker { demux, framer }))
        } else {
            None
        };
        s.meter = Meter::new(ms(now), bps);
        s.session_start_us = Some(s.conn_start_us);
        if let Some((lo, hi)) = self.spec.profile.session_range_us() {
            s.leave_at_us = Some(now + session_length_us(lo, hi, now ^ ((i as u64) << 32)));
        }
        s.state = State::Streaming;
        s.streamed = true;
        s.ttfb_pending = true;
        let head_buf = std::mem::take(&mut s.head);
        if head_buf.len() > len {
            on_body(s, &head_buf[len..], now, &mut self.c)?;
        }
        Ok(())
    }

    fn tick(
        &mut self,
        second: u32,
        phase: Phase,
        started: u32,
        now: u64,
        judge: bool,
    ) -> WorkerTick {
        let now_ms = ms(now);
        let timeout_ms = (self.spec.profile.connect_timeout.0 * 1000.0) as u32;
        let mut t = WorkerTick {
            worker: self.spec.worker,
            second,
            phase,
            counts: ListenerCounts {
                started,
                ..ListenerCounts::default()
            },
            ..WorkerTick::default()
        };
        let mut max_gap = std::mem::take(&mut self.c.max_gap_ms);
        for i in 0..self.slots.len() {
            let s = &mut self.slots[i];
            match s.state {
                State::Connecting | State::Head => {
                    let waited = now_ms.saturating_sub(ms(s.conn_start_us));
                    if judge && waited > timeout_ms {
                        self.fail(i, FailReason::Timeout, now);
                        t.counts.failed += 1;
                    } else {
                        t.counts.connecting += 1;
                        // Waiting for audio longer than a player's buffer is starving too.
                        if judge && waited > self.th.max_gap_ms && !s.stalled {
                            t.counts.starved += 1;
                            if !s.ever_starved {
                                s.ever_starved = true;
                                self.c.starved_total += 1;
                            }
                        }
                    }
                }
                State::Streaming if !judge => t.counts.streaming += 1,
                State::Streaming => {
                    t.counts.streaming += 1;
                    let v = s.meter.tick(now_ms, &self.th);
                    t.counts.expected_bytes += s.meter.expected_bps as u64;
                    if v.burst {
                        t.counts.burst_bytes += v.bytes as u64;
                        t.counts.burst_expected_bytes += s.meter.expected_bps as u64;
                    }
                    max_gap = max_gap.max(v.ongoing_gap_ms);
                    if v.starved {
                        t.counts.starved += 1;
                        if !s.ever_starved {
                            s.ever_starved = true;
                            self.c.starved_total += 1;
                        }
                    }
                }
                State::Stalled => t.counts.stalled += 1,
                State::Failed => {
                    if judge
                        && self.spec.profile.reconnect_after.is_some()
                        && now_ms >= s.retry_at_ms
                    {
                        self.connect(i, now);
                        t.counts.connecting += 1;
                    } else {
                        t.counts.failed += 1;
                    }
                }
                State::Idle => {}
            }
        }
        t.counts.connects = std::mem::take(&mut self.c.connects);
        t.counts.bytes = std::mem::take(&mut self.c.bytes);
        t.max_gap_ms = max_gap;
        let mut dense = vec![0u64; HIST_BUCKETS];
        for us in self.c.ttfb.drain(..) {
            dense[bucket_of(us) as usize] += 1;
        }
        t.ttfb = LogHist::from_dense(&dense);
        let mut dense = vec![0u64; HIST_BUCKETS];
        for us in self.c.handshakes.drain(..) {
            dense[bucket_of(us) as usize] += 1;
        }
        t.handshakes = LogHist::from_dense(&dense);
        t.counts.failures_total = self.c.failures.clone();
        t.counts.starved_total = self.c.starved_total;
        t.icy_blocks_total = self.c.icy_blocks;
        t.frames_total = self.c.frames;
        t.garbage_bytes_total = self.c.garbage;
        let cpu = if self.spec.thread_cpu {
            rusage::thread()
        } else {
            rusage::process()
        };
        t.cpu_user_us = cpu.user_us;
        t.cpu_sys_us = cpu.sys_us;
        t
    }

    /// Closes everything and builds the final tick (with the longest-gap histogram).
    fn finish(&mut self, second: u32, started: u32, now: u64) -> WorkerTick {
        let mut t = self.tick(second, Phase::Done, started, now, false);
        let mut dense = vec![0u64; HIST_BUCKETS];
        for i in 0..self.slots.len() {
            self.close(i, now);
            let s = &self.slots[i];
            if s.streamed && !s.stalled {
                dense[bucket_of(s.longest_gap_ms as u64 * 1000) as usize] += 1;
            }
        }
        t.longest_gaps = Some(LogHist::from_dense(&dense));
        for (k, &(sessions, us)) in self.c.sessions.iter().enumerate() {
            if sessions == 0 {
                continue;
            }
            let mount = mount_of(&self.spec.urls[k]);
            let gt = t.ground_truth.entry(mount).or_default();
            gt.add(&crate::stats::GroundTruth {
                sessions,
                listening_seconds: us as f64 / 1e6,
            });
        }
        t
    }
}

/// A session length in `[lo, hi]` µs, spread evenly by `seed` (splitmix64 of it: a slot's
/// index and the time it started streaming).
fn session_length_us(lo: u64, hi: u64, seed: u64) -> u64 {
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
fn mount_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let path = rest.find('/').map_or("/", |i| &rest[i..]);
    path.split(['?', '#']).next().unwrap_or("/").to_owned()
}

/// Counts body bytes for a streaming slot and runs its optional checks.
fn on_body(s: &mut Slot, data: &[u8], now: u64, c: &mut Counters) -> Result<(), FailReason> {
    if data.is_empty() {
        return Ok(());
    }
    if s.ttfb_pending {
        s.ttfb_pending = false;
        c.ttfb.push(now.saturating_sub(s.conn_start_us));
    }
    let now_ms = ms(now);
    let gap = now_ms.saturating_sub(s.meter.last_read_ms);
    if gap > c.max_gap_ms {
        c.max_gap_ms = gap;
    }
    s.meter.on_read(now_ms, data.len());
    c.bytes += data.len() as u64;
    if let Some(chk) = s.check.as_deref_mut() {
        let Checker { demux, framer } = chk;
        match demux {
            Some(d) => {
                let mut blocks = 0u64;
                let r = d.feed(data, |p| match p {
                    IcyPiece::Audio(a) => {
                        if let Some(f) = framer.as_mut() {
                            f.push(a);
                        }
                    }
                    IcyPiece::Metadata(_) => blocks += 1,
                });
                c.icy_blocks += blocks;
                if r.is_err() {
                    return Err(FailReason::IcyFraming);
                }
            }
            None => {
                if let Some(f) = framer.as_mut() {
                    f.push(data);
                }
            }
        }
        if let Some(f) = framer.as_mut() {
            drain_framer(f, c);
        }
    }
    Ok(())
}

/// The target of listener URL `u`: its address and the request a listener sends (`bind`: a
/// bind range is in use, applied to loopback IPv4 targets).
fn build_target(u: &str, profile: &Profile, bind: bool) -> Result<Target, UrlError> {
    let url = HttpUrl::parse(u)?;
    let mut req = format!(
        "GET {} HTTP/1.0\r\nHost: {}\r\nUser-Agent: throng-bench/{}\r\nAccept: */*\r\n",
        url.path,
        url.host_header(),
        env!("CARGO_PKG_VERSION")
    );
    if profile.icy {
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
        bind: bind && is_loopback_v4(&url.addr),
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

fn drain_framer(f: &mut Framer, c: &mut Counters) {
    while let Some(r) = f.next_unit() {
        match r {
            Ok(_) => c.frames += 1,
            Err(throng_proto::framer::FrameError::Garbage { skipped, .. }) => {
                c.garbage += skipped as u64
            }
            #[allow(unreachable_patterns)]
            Err(_) => c.garbage += 1,
        }
    }
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
