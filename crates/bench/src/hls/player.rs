//! The HLS player engine: `throng bench run <url>.m3u8` plays each listener as an HLS player,
//! and verifies every one's media.
//!
//! One engine runs one [`Slice`] of one group in one `mio` loop, as the ICY engine does: its
//! players start and stop as the group's stages ask (player `i` is on while the target is above
//! `i`), leave and rejoin at the end of a session of a random length, all at once at a storm,
//! at the churn rate during a hold; a failed player reconnects after `reconnect-after`; a
//! stalled one sends its first request and never reads. Once a second of the run's clock the
//! engine reports its group's [`Snapshot`] in a [`GroupTick`].
//!
//! **A player** fetches the URL (a multivariant playlist: it follows the first variant, its
//! session's media playlist), then the media playlist, starts [`START_SEGMENTS`] segments from
//! the live edge (RFC 8216 section 6.3.3: not within three target durations of the end), and
//! fetches new segments in order over one HTTP/1.1 keep-alive connection (reopened when the
//! server closes it; a request the server closes unanswered on a reused connection is sent
//! once more), each fMP4 initialization section (`EXT-X-MAP`) before the first segment that
//! needs it. It reloads the playlist as section 6.3.4 says: one target duration after the
//! previous reload began when that one brought new segments, half a target duration when it
//! did not; when the playlist advertises `EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES` (and
//! `--hls-no-blocking-reload` is not given) it uses blocking playlist reload instead (RFC
//! 8216bis section 6.2.5.2): once the segments it knows are in, it asks at once for the
//! playlist with `_HLS_msn=<next media sequence number>`, which the server holds until that
//! segment exists. Plain `http://` only (a caching proxy is benched by giving its URL).
//!
//! **Every segment's media is verified** as it arrives ([`crate::hls::segment`]): its frames
//! (packed audio) or samples (fMP4) give its media time, its ID3 timestamp or `tfdt` must
//! continue the previous segment's, the media sequence numbers the playlists offer must follow
//! each other, and program date-times must not go back; any of those failing makes the player
//! **corrupt** (`Rule::Corrupt`, each kind also counted in the snapshot's `extra` as
//! `hls-corrupt-<kind>`). A segment's media (its valid frames) is credited when the segment
//! is complete: `media_us`, `units` (segments verified whole), and the player's buffer.
//!
//! **The rules** of a player (each counts it once, [`Caught`]):
//! - `starved: gap`, the buffer model ([`Playback`]): playback starts once [`START_SEGMENTS`]
//!   segments are in; from then on the wall time since playback started is the media played,
//!   and a player whose played time passes the media it downloaded is starved: it rebuffers
//!   and plays on from the next segment. A player still waiting for its first segments longer
//!   than `max-gap` (a player's buffer) is starved too, as an ICY listener waiting for its
//!   response head is;
//! - `starved: rate`: judged from [`RATE_TARGETS`] target durations after playback started,
//!   over the whole session since then: with `W` the wall time since playback started, `M` the
//!   media of the segments received since (the startup segments left out) and `T` the target
//!   duration, the player is starved when `M + T < min-rate × W`. Segments arrive in lumps of
//!   up to `T` seconds of media (RFC 8216 section 4.3.3.1: no segment is longer), so a healthy
//!   player's `M` trails `W` by at most one segment and `M + T ≥ W`: with 6 s segments and the
//!   default 80 %, it never trips, while a server delivering 70 % of real time trips it within
//!   `T / (min-rate − 0.7)` = 10 target durations;
//! - `corrupt`, as above; failures (a refused connection, a status other than 200, a body that
//!   is not a playlist: `bad-playlist`, one over 256 KiB: `playlist-too-large`, chunked coding
//!   that does not parse: `bad-chunk`, `EXT-X-ENDLIST` once its segments are played:
//!   `playlist-ended`, a request unanswered within `connect-timeout`, plus three target
//!   durations for a held reload: `timeout`) count by reason, as ICY failures do.
//!
//! Measures: TTFB is a segment request to the first byte of its response, a gap the time
//! between two segment arrivals, a session's longest gap recorded at its close; listening time
//! runs from playback start. The media rate's steady part is measured between arrivals, as
//! segments come in lumps: from the first segment arriving a second or more into playback (the
//! startup segments left out), each later segment's media over the time since the one before,
//! and the time a segment is overdue (more than a target duration since the last) as it
//! passes, so a healthy player's rate is real time whatever its session's length, and one
//! whose segments stop shows it. `requests` counts every request sent;
//! `bytes` every response body byte (playlists, initialization sections, segments). A session
//! (ground truth) is a player's time from its first request to its close, once it got a
//! segment (as Throng counts an HLS listener), under the mount its URL names.
//!
//! Per player the state is a few hundred bytes: no segment is copied (each body goes through
//! its check as it arrives), a playlist is kept only until parsed, and the segments it offers
//! until fetched.

use crate::hls::http::{HttpError, Piece, Reader};
use crate::hls::playlist::{self, blocking_path, dir_of, resolve, Listed, MediaPlaylist, Playlist};
use crate::hls::segment::{container_of, Break, Continuity, Init, SegmentCheck, MAX_INIT};
use crate::icy::engine::{mount_of, session_length_us, EngineError};
use crate::net::connect::{binds_apply, parse_bind_range, start_connect};
use crate::net::url::HttpUrl;
use crate::observe::rusage;
use crate::profile::crowd::{Audience, Crowd};
use crate::profile::slice::{in_share, sleep_until_unix_ms, RunClock, Slice};
use crate::stats::{Caught, FailReason, GroundTruth, GroupTick, Rule, Snapshot};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Segments downloaded before playback starts (segments; RFC 8216 section 6.3.3's three
/// target durations from the live edge).
pub const START_SEGMENTS: u32 = 3;
/// Target durations of playback before the rate rule judges a player.
pub const RATE_TARGETS: u64 = 3;
/// Target durations a held blocking reload may take (RFC 8216bis section 6.2.5.2: the server
/// answers within three).
pub const BLOCK_TARGETS: u64 = 3;
/// Largest playlist body read (bytes).
pub const MAX_PLAYLIST: usize = 256 * 1024;
/// Size of the shared read buffer (bytes).
const SCRATCH: usize = 64 * 1024;
/// The steady part of a session starts this long after playback (µs).
const STEADY_AFTER_US: u64 = 1_000_000;

/// What one HLS engine runs.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HlsSpec {
    /// The group's slice this engine runs.
    pub slice: Slice,
    /// Never use blocking playlist reload (`_HLS_msn`), even when the playlist advertises it.
    #[serde(default)]
    pub no_blocking_reload: bool,
}

/// Why a player's connection or session failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HlsFail {
    /// A network or HTTP failure, as ICY listeners have them (`refused`, `http-404`, …).
    Net(FailReason),
    /// Chunked transfer coding that does not parse (`bad-chunk`).
    BadChunk,
    /// A body that is not the playlist asked for (`bad-playlist`).
    BadPlaylist,
    /// A playlist over [`MAX_PLAYLIST`] bytes (`playlist-too-large`).
    PlaylistTooLarge,
    /// `EXT-X-ENDLIST`, and every segment played (`playlist-ended`).
    Ended,
}

impl HlsFail {
    /// The key in reports (`bad-playlist`, `http-404`, …).
    pub fn key(&self) -> String {
        match self {
            HlsFail::Net(r) => r.key(),
            HlsFail::BadChunk => "bad-chunk".into(),
            HlsFail::BadPlaylist => "bad-playlist".into(),
            HlsFail::PlaylistTooLarge => "playlist-too-large".into(),
            HlsFail::Ended => "playlist-ended".into(),
        }
    }
}

impl From<FailReason> for HlsFail {
    fn from(r: FailReason) -> HlsFail {
        HlsFail::Net(r)
    }
}

impl From<HttpError> for HlsFail {
    fn from(e: HttpError) -> HlsFail {
        match e {
            HttpError::BadHead => HlsFail::Net(FailReason::BadHead),
            HttpError::BadChunk => HlsFail::BadChunk,
        }
    }
}

/// What [`Playback::arrive`] saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Arrival {
    /// Time since the previous segment arrived (µs; `None` for the first).
    pub gap_us: Option<u64>,
    /// The buffer ran dry before this segment came (a starvation not yet seen at a tick).
    pub starved: bool,
    /// Playback started with this segment.
    pub started: bool,
    /// Steady media this segment adds (µs; see the module comment).
    pub steady_media_us: u64,
    /// Steady listening time this segment adds (µs).
    pub steady_listen_us: u64,
}

/// What [`Playback::judge`] concluded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Judged {
    /// `starved: gap`: the buffer is empty now.
    pub gap: bool,
    /// `starved: rate` now (see the module comment).
    pub rate: bool,
}

/// One player's buffer and rate accounting (see the module comment), sans-IO: times are µs on
/// any one clock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Playback {
    /// Segments received this session.
    pub segments: u32,
    /// Media received this session (µs).
    pub downloaded_us: u64,
    /// The wall time at which media position 0 played (playback start, moved by rebuffers).
    play_ref_us: Option<u64>,
    /// When playback first started this session.
    pub started_us: Option<u64>,
    /// Media received when playback started (µs).
    media_at_start_us: u64,
    /// The buffer is empty now: rebuffering until the next segment.
    pub starved: bool,
    /// When the last segment arrived.
    last_arrival_us: Option<u64>,
    /// The last arrival counted in the steady measure (the first a second into playback, then
    /// each later one).
    steady_last_us: Option<u64>,
    /// Listening time since `steady_last_us` already counted as overdue (µs).
    steady_overdue_us: u64,
    /// The longest time between two arrivals so far (µs).
    pub longest_gap_us: u64,
}

impl Playback {
    /// Whether playback has started.
    pub fn playing(&self) -> bool {
        self.started_us.is_some()
    }

    /// Whether `now_us` is past the session's start burst (one second into playback).
    pub fn steady(&self, now_us: u64) -> bool {
        self.started_us
            .is_some_and(|s| now_us >= s + STEADY_AFTER_US)
    }

    /// A segment of `media_us` of media completed at `now_us`.
    pub fn arrive(&mut self, now_us: u64, media_us: u64) -> Arrival {
        let mut out = Arrival {
            gap_us: self.last_arrival_us.map(|t| now_us.saturating_sub(t)),
            ..Arrival::default()
        };
        if let Some(g) = out.gap_us {
            self.longest_gap_us = self.longest_gap_us.max(g);
        }
        self.last_arrival_us = Some(now_us);
        if self.steady(now_us) {
            match self.steady_last_us {
                None => self.steady_last_us = Some(now_us),
                Some(t) => {
                    out.steady_media_us = media_us;
                    out.steady_listen_us = now_us
                        .saturating_sub(t)
                        .saturating_sub(self.steady_overdue_us);
                    self.steady_overdue_us = 0;
                    self.steady_last_us = Some(now_us);
                }
            }
        }
        if let Some(r) = self.play_ref_us {
            let played = now_us.saturating_sub(r);
            if media_us > 0 && (self.starved || played > self.downloaded_us) {
                // Rebuffered: play on from here, this segment in the buffer.
                out.starved = !self.starved;
                self.starved = false;
                self.play_ref_us = Some(now_us.saturating_sub(self.downloaded_us));
            }
        }
        self.downloaded_us += media_us;
        self.segments += 1;
        if self.play_ref_us.is_none() && self.segments >= START_SEGMENTS {
            self.play_ref_us = Some(now_us);
            self.started_us.get_or_insert(now_us);
            self.media_at_start_us = self.downloaded_us;
            out.started = true;
        }
        out
    }

    /// Judges the player at `now_us`: `target_us` is the playlist's target duration, `min_rate`
    /// the rate rule's share of real time.
    pub fn judge(&mut self, now_us: u64, target_us: u64, min_rate: f64) -> Judged {
        let Some(r) = self.play_ref_us else {
            return Judged::default();
        };
        if !self.starved && now_us.saturating_sub(r) > self.downloaded_us {
            self.starved = true;
        }
        let mut out = Judged {
            gap: self.starved,
            rate: false,
        };
        if let Some(s) = self.started_us {
            let wall = now_us.saturating_sub(s);
            if wall >= RATE_TARGETS * target_us {
                let got = self.downloaded_us - self.media_at_start_us;
                out.rate = ((got + target_us) as f64) < min_rate * wall as f64;
            }
        }
        out
    }

    /// Steady listening time to count at `now_us` for a segment overdue: the time beyond one
    /// target duration (`target_us`) since the last steady arrival, not counted before (µs).
    pub fn overdue(&mut self, now_us: u64, target_us: u64) -> u64 {
        let Some(t) = self.steady_last_us else {
            return 0;
        };
        let over = now_us.saturating_sub(t).saturating_sub(target_us);
        let add = over.saturating_sub(self.steady_overdue_us);
        self.steady_overdue_us += add;
        add
    }

    /// The longest gap including the one running at `now_us` (µs), for a session's close.
    pub fn final_longest_gap(&self, now_us: u64) -> u64 {
        let running = self.last_arrival_us.map_or(0, |t| now_us.saturating_sub(t));
        self.longest_gap_us.max(running)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Not on.
    Idle,
    /// On, waiting for its first segments (counted as connecting).
    Starting,
    /// Playback started.
    Playing,
    /// Sent its first request and never reads.
    Stalled,
    /// A stalled player the server closed: it stays off.
    Dropped,
    /// Down after a failure.
    Failed,
}

/// What a player asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Req {
    /// The player's own URL (a multivariant or a media playlist).
    Url,
    /// The media playlist (a reload).
    Media,
    /// The initialization section of the front segment.
    Init,
    /// The front segment.
    Segment,
}

struct Player {
    /// The group's player number.
    id: u32,
    target: u16,
    bind: u16,
    stalled: bool,
    phase: Phase,
    caught: Caught,
    sock: Option<TcpStream>,
    /// The TCP connect completed.
    connected: bool,
    /// Bumped for every new connection (a read loop stops when its connection is gone).
    conn_gen: u32,
    /// The connection carried a response before the one in flight.
    reused: bool,
    /// The request in flight was sent again after an unanswered close.
    retried: bool,
    /// Request bytes not written yet.
    out: Vec<u8>,
    req: Option<Req>,
    sent_us: u64,
    got_byte: bool,
    resp: Reader,
    keep_alive: bool,
    /// A playlist or initialization section while it arrives.
    body: Vec<u8>,
    /// The initialization section arriving is over [`MAX_INIT`]: its bytes are dropped.
    discard: bool,
    body_len: Option<u64>,
    /// The check of the segment arriving.
    check: Option<Box<SegmentCheck>>,
    media_path: Option<String>,
    base: String,
    target_us: u64,
    block: bool,
    ended: bool,
    next_reload_us: u64,
    timer_gen: u32,
    queue: VecDeque<Listed>,
    cont: Continuity,
    /// The initialization section in use: its URI, and what it says (`None`: unusable).
    map: Option<(String, Option<Init>)>,
    session_start_us: u64,
    /// The session got a segment: it counts as a session.
    got_segment: bool,
    /// A segment of an unverified container was counted this session.
    unverified: bool,
    play: Playback,
    counted_us: u64,
    leave_at_us: Option<u64>,
    retry_at_us: u64,
}

impl Player {
    fn new(id: u32, target: u16, bind: u16, stalled: bool) -> Player {
        Player {
            id,
            target,
            bind,
            stalled,
            phase: Phase::Idle,
            caught: Caught::default(),
            sock: None,
            connected: false,
            conn_gen: 0,
            reused: false,
            retried: false,
            out: Vec::new(),
            req: None,
            sent_us: 0,
            got_byte: false,
            resp: Reader::new(),
            keep_alive: false,
            body: Vec::new(),
            discard: false,
            body_len: None,
            check: None,
            media_path: None,
            base: String::new(),
            target_us: 1_000_000,
            block: false,
            ended: false,
            next_reload_us: 0,
            timer_gen: 0,
            queue: VecDeque::new(),
            cont: Continuity::default(),
            map: None,
            session_start_us: 0,
            got_segment: false,
            unverified: false,
            play: Playback::default(),
            counted_us: 0,
            leave_at_us: None,
            retry_at_us: 0,
        }
    }

    /// Drops the connection.
    fn disconnect(&mut self) {
        self.sock = None;
        self.connected = false;
        self.conn_gen = self.conn_gen.wrapping_add(1);
        self.out = Vec::new();
    }
}

struct Target {
    addr: SocketAddr,
    host: String,
    path: String,
    auth: Option<String>,
    bind: bool,
    /// The mount the URL names (ground truth).
    mount: String,
}

/// One worker's HLS players. Build with [`HlsEngine::new`], drive with [`HlsEngine::run`].
pub struct HlsEngine {
    spec: HlsSpec,
    poll: Poll,
    players: Vec<Player>,
    /// How many players are on (the first `on`, by player number).
    on: usize,
    /// The most players ever on.
    started: usize,
    targets: Vec<Target>,
    binds: Vec<Ipv4Addr>,
    scratch: Vec<u8>,
    snap: Snapshot,
    /// Sessions ended per URL: count, listening time (µs).
    sessions: Vec<(u64, u64)>,
    /// Reload timers: (due µs, player, its timer generation).
    timers: BinaryHeap<Reverse<(u64, u32, u32)>>,
    epoch: Instant,
    second: u32,
}

/// The mount an HLS URL names: Throng's `/hls/<mount>/…` path gives `<mount>` (what its
/// ledger counts), any other URL its path.
pub fn hls_mount_of(url: &str) -> String {
    let path = mount_of(url);
    match throng_proto::hls::path::parse(&path) {
        Some(t) => t.mount().to_owned(),
        None => path,
    }
}

/// The HLS players as the crowd drives them (stages, sessions, churn, the storm).
impl Audience for HlsEngine {
    fn on(&self) -> usize {
        self.on
    }

    fn set_on(&mut self, on: usize) {
        self.on = on;
        self.started = self.started.max(on);
    }

    fn open_slot(&mut self, i: usize, now_us: u64) {
        self.start(i, now_us);
    }

    fn close_slot(&mut self, i: usize, now_us: u64) {
        self.close(i, now_us);
    }

    fn streaming(&self, i: usize) -> bool {
        self.players[i].phase == Phase::Playing
    }

    fn connected(&self, i: usize) -> bool {
        matches!(
            self.players[i].phase,
            Phase::Starting | Phase::Playing | Phase::Stalled
        )
    }

    fn leave_at_us(&self, i: usize) -> Option<u64> {
        self.players[i].leave_at_us
    }
}

impl HlsEngine {
    /// Prepares the players (parses the URLs, allocates their state). `clock` is the run's
    /// clock (HLS players take no latency stamps, so only the slice's start matters).
    ///
    /// Errors: no URL, a URL that does not parse or resolve, an `https://` URL, a bad bind
    /// range, a poller that cannot be made.
    pub fn new(spec: HlsSpec, clock: Arc<RunClock>) -> Result<HlsEngine, EngineError> {
        let _ = clock;
        let slice = &spec.slice;
        if slice.urls.is_empty() {
            return Err(EngineError::NoUrl);
        }
        let binds = parse_bind_range(&slice.bind_range)?;
        let mut targets = Vec::new();
        for u in &slice.urls {
            let url = HttpUrl::parse(u)?;
            if url.tls {
                return Err(EngineError::Unsupported(format!(
                    "{u}: HLS players speak plain http:// only"
                )));
            }
            targets.push(Target {
                addr: url.addr,
                host: url.host_header(),
                path: url.path.clone(),
                auth: url.credentials.as_ref().map(|(u, p)| {
                    format!(
                        "Authorization: {}\r\n",
                        throng_proto::auth::basic_authorization(u, p)
                    )
                }),
                bind: binds_apply(&url.addr, &binds),
                mount: hls_mount_of(u),
            });
        }
        let nurls = targets.len();
        let stalled = slice.behaviour.stalled;
        let players = slice
            .ids()
            .into_iter()
            .map(|id| {
                let bind = if binds.is_empty() {
                    0
                } else {
                    ((id as usize / nurls) % binds.len()) as u16
                };
                Player::new(
                    id,
                    (id as usize % nurls) as u16,
                    bind,
                    in_share(id, stalled),
                )
            })
            .collect();
        Ok(HlsEngine {
            poll: Poll::new()?,
            players,
            on: 0,
            started: 0,
            sessions: vec![(0, 0); nurls],
            targets,
            binds,
            scratch: vec![0u8; SCRATCH],
            snap: Snapshot::default(),
            timers: BinaryHeap::new(),
            epoch: Instant::now(),
            second: 0,
            spec,
        })
    }

    fn now_us(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    /// Runs the group's stages to their end, calling `report` once per second (and once at the
    /// end with `done`). Returns early when `stop` is set or `report` returns `false`.
    ///
    /// Errors: the poller failed.
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
        let slice = self.spec.slice.clone();
        let ids: Vec<u32> = self.players.iter().map(|p| p.id).collect();
        let end_us = (slice.end_s() * 1e6) as u64;
        let mut crowd = Crowd::new(&slice, ids);
        let mut next_tick_us = 1_000_000u64;
        let mut events = Events::with_capacity(4096);
        loop {
            let now = self.now_us();
            let mut wake = crowd.wake_us(now, self.on, next_tick_us);
            if let Some(Reverse((due, _, _))) = self.timers.peek() {
                wake = wake.min(*due);
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
                if i >= self.players.len() {
                    continue;
                }
                let closed = ev.is_read_closed() || ev.is_error();
                if self.players[i].phase == Phase::Stalled {
                    self.on_stalled(i, ev.is_writable(), closed, now);
                    continue;
                }
                if ev.is_writable() {
                    self.on_writable(i, now);
                }
                if ev.is_readable() || closed {
                    self.on_readable(i, closed, now);
                }
            }
            // Reload timers due.
            while let Some(Reverse((due, i, generation))) = self.timers.peek().copied() {
                if due > now {
                    break;
                }
                self.timers.pop();
                let i = i as usize;
                if self
                    .players
                    .get(i)
                    .is_some_and(|p| p.timer_gen == generation)
                {
                    self.next_request(i, now);
                }
            }
            // The stages, sessions, churn and the storm.
            crowd.step(now, &mut self);
            if now >= next_tick_us {
                let last = now + 500_000 >= end_us;
                let stopping = stop.load(Ordering::Relaxed);
                let mut tick = self.tick(now);
                if last || stopping {
                    self.finish(now, &mut tick);
                }
                if !report(&tick) || last || stopping {
                    return Ok(());
                }
                self.second += 1;
                next_tick_us = (u64::from(self.second) + 1) * 1_000_000;
            }
        }
    }

    /// Starts (or restarts) player `i`'s session from its URL.
    fn start(&mut self, i: usize, now: u64) {
        let p = &mut self.players[i];
        p.disconnect();
        p.phase = Phase::Starting;
        p.req = None;
        p.retried = false;
        p.media_path = None;
        p.base = dir_of(&self.targets[p.target as usize].path);
        p.block = false;
        p.ended = false;
        p.queue.clear();
        p.cont = Continuity::default();
        p.map = None;
        p.session_start_us = now;
        p.got_segment = false;
        p.unverified = false;
        p.play = Playback::default();
        p.counted_us = now;
        p.leave_at_us = None;
        p.timer_gen = p.timer_gen.wrapping_add(1);
        self.request(i, Req::Url, now);
    }

    /// Sends request `req` of player `i`, connecting first when it has no connection.
    fn request(&mut self, i: usize, req: Req, now: u64) {
        let t = &self.targets[self.players[i].target as usize];
        let p = &self.players[i];
        let path = match req {
            Req::Url => t.path.clone(),
            Req::Media => {
                let path = p.media_path.clone().unwrap_or_else(|| t.path.clone());
                match p.cont.last_listed().filter(|_| p.block) {
                    Some(last) => blocking_path(&path, last + 1),
                    None => path,
                }
            }
            Req::Init => {
                let uri = p.queue.front().and_then(|s| s.map.as_deref()).unwrap_or("");
                resolve(&p.base, uri)
            }
            Req::Segment => {
                let uri = p.queue.front().map_or("", |s| s.uri.as_str());
                resolve(&p.base, uri)
            }
        };
        let mut out = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: throng-bench/{} (HLS)\r\nAccept: */*\r\n",
            t.host,
            env!("CARGO_PKG_VERSION")
        );
        if let Some(a) = &t.auth {
            out.push_str(a);
        }
        out.push_str("\r\n");
        let (addr, local) = (
            t.addr,
            t.bind
                .then(|| self.binds[p.bind as usize % self.binds.len()]),
        );
        self.snap.requests += 1;
        let p = &mut self.players[i];
        p.req = Some(req);
        p.out = out.into_bytes();
        p.sent_us = now;
        p.got_byte = false;
        p.resp = Reader::new();
        p.body = Vec::new();
        p.discard = false;
        p.body_len = None;
        p.check = None;
        if p.sock.is_some() {
            p.reused = true;
            self.flush(i, now);
            return;
        }
        p.reused = false;
        self.snap.connects += 1;
        match start_connect(addr, local) {
            Ok(std) => {
                let mut sock = TcpStream::from_std(std);
                if let Err(e) = self.poll.registry().register(
                    &mut sock,
                    Token(i),
                    Interest::READABLE | Interest::WRITABLE,
                ) {
                    return self.fail(i, FailReason::from_io(&e).into(), now);
                }
                let p = &mut self.players[i];
                p.sock = Some(sock);
                p.connected = false;
                p.conn_gen = p.conn_gen.wrapping_add(1);
            }
            Err(e) => self.fail(i, FailReason::from_io(&e).into(), now),
        }
    }

    /// Writes what is left of player `i`'s request.
    fn flush(&mut self, i: usize, now: u64) {
        let p = &mut self.players[i];
        if !p.connected {
            return;
        }
        let Some(sock) = p.sock.as_mut() else { return };
        while !p.out.is_empty() {
            match sock.write(&p.out) {
                Ok(0) => return self.fail(i, FailReason::Reset.into(), now),
                Ok(n) => {
                    p.out.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.fail(i, FailReason::from_io(&e).into(), now),
            }
        }
        if p.stalled && p.phase == Phase::Starting && p.req == Some(Req::Url) {
            // Sent: from now on it never reads (the server's close is still seen).
            p.phase = Phase::Stalled;
        }
    }

    /// Whether player `i`'s connect completed (checked on its first event); fails it when the
    /// connect did.
    fn check_connected(&mut self, i: usize, closed: bool, now: u64) -> bool {
        let p = &mut self.players[i];
        if p.connected {
            return true;
        }
        let Some(sock) = p.sock.as_mut() else {
            return false;
        };
        match sock.take_error() {
            Ok(Some(e)) | Err(e) => {
                self.fail(i, FailReason::from_io(&e).into(), now);
                return false;
            }
            Ok(None) => {}
        }
        match sock.peer_addr() {
            Ok(_) => {
                p.connected = true;
                true
            }
            Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                if closed {
                    self.fail(i, FailReason::Refused.into(), now);
                }
                false
            }
            Err(e) => {
                self.fail(i, FailReason::from_io(&e).into(), now);
                false
            }
        }
    }

    fn on_writable(&mut self, i: usize, now: u64) {
        if self.players[i].sock.is_none() || !self.check_connected(i, false, now) {
            return;
        }
        self.flush(i, now);
    }

    /// A stalled player's events: its request is written, then only the server's close counts.
    fn on_stalled(&mut self, i: usize, writable: bool, closed: bool, now: u64) {
        if writable && !self.players[i].out.is_empty() {
            self.on_writable(i, now);
        }
        if closed && self.players[i].phase == Phase::Stalled {
            let p = &mut self.players[i];
            self.snap
                .stalled_drop
                .record_us(now.saturating_sub(p.session_start_us));
            self.snap.stalled_dropped += 1;
            p.disconnect();
            p.phase = Phase::Dropped;
        }
    }

    fn on_readable(&mut self, i: usize, closed: bool, now: u64) {
        if self.players[i].sock.is_none() || !self.check_connected(i, closed, now) {
            return;
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        let generation = self.players[i].conn_gen;
        loop {
            let p = &mut self.players[i];
            if p.conn_gen != generation {
                break;
            }
            let Some(sock) = p.sock.as_mut() else { break };
            match sock.read(&mut scratch) {
                Ok(0) => {
                    self.on_eof(i, now);
                    break;
                }
                Ok(n) => {
                    if let Err(why) = self.on_bytes(i, &scratch[..n], now) {
                        self.fail(i, why, now);
                        break;
                    }
                    // A short read drained the socket: edge-triggered epoll reports new data
                    // (and a FIN after this read) with a new event.
                    if n < scratch.len() && !closed {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    if self.players[i].req.is_none() {
                        // An idle connection reset: a new one for the next request.
                        self.players[i].disconnect();
                    } else if !self.resend(i, now) {
                        self.fail(i, FailReason::from_io(&e).into(), now);
                    }
                    break;
                }
            }
        }
        self.scratch = scratch;
    }

    /// The server closed player `i`'s connection.
    fn on_eof(&mut self, i: usize, now: u64) {
        let p = &mut self.players[i];
        if p.req.is_none() {
            // An idle keep-alive connection closed: reconnect when the next request goes.
            p.disconnect();
            return;
        }
        if p.resp.closed() {
            // A body framed by the close.
            p.keep_alive = false;
            if let Err(why) = self.on_done(i, now) {
                self.fail(i, why, now);
            }
            return;
        }
        if self.resend(i, now) {
            return;
        }
        let p = &self.players[i];
        let why = if p.resp.has_head() {
            FailReason::ClosedWhileStreaming
        } else {
            FailReason::ClosedBeforeHead
        };
        self.fail(i, why.into(), now);
    }

    /// Sends player `i`'s request again on a new connection when the server closed (or reset)
    /// a kept-alive one as the request went, before any byte of the answer: once per request
    /// (RFC 9112 section 9.3.1). Returns whether it did.
    fn resend(&mut self, i: usize, now: u64) -> bool {
        let p = &mut self.players[i];
        let Some(req) = p.req else { return false };
        if !p.reused || p.retried || !p.resp.untouched() {
            return false;
        }
        p.disconnect();
        p.retried = true;
        self.request(i, req, now);
        true
    }

    /// Bytes read for player `i`.
    fn on_bytes(&mut self, i: usize, data: &[u8], now: u64) -> Result<(), HlsFail> {
        let generation = self.players[i].conn_gen;
        let mut at = 0;
        // Until the reader wants more (all used) or the response is done: a body's end may
        // need no byte at all.
        loop {
            let p = &mut self.players[i];
            if p.conn_gen != generation {
                return Ok(());
            }
            if at == data.len() && !p.resp.has_head() {
                break;
            }
            let Some(req) = p.req else {
                // Bytes nobody asked for.
                return Err(FailReason::BadHead.into());
            };
            if !p.got_byte {
                p.got_byte = true;
                if req == Req::Segment {
                    self.snap.ttfb.record_us(now.saturating_sub(p.sent_us));
                }
            }
            let (used, piece) = p.resp.next(&data[at..])?;
            at += used;
            match piece {
                Piece::More => break,
                Piece::Head(h) => {
                    if h.status != 200 {
                        return Err(FailReason::HttpStatus(h.status).into());
                    }
                    p.keep_alive = h.keep_alive;
                    p.body_len = h.content_length;
                    match req {
                        Req::Url | Req::Media => {
                            if h.content_length.is_some_and(|n| n > MAX_PLAYLIST as u64) {
                                return Err(HlsFail::PlaylistTooLarge);
                            }
                        }
                        Req::Init => {}
                        Req::Segment => {
                            let (uri, has_map) = p
                                .queue
                                .front()
                                .map_or(("", false), |s| (s.uri.as_str(), s.map.is_some()));
                            let container = container_of(uri, h.content_type.as_deref(), has_map);
                            let init = p.map.as_ref().and_then(|m| m.1);
                            let check = SegmentCheck::new(container, init, h.content_length);
                            if !check.verifies() && !p.unverified {
                                p.unverified = true;
                                self.snap.unverified += 1;
                            }
                            p.check = Some(Box::new(check));
                        }
                    }
                }
                Piece::Body(b) => {
                    self.snap.bytes += b.len() as u64;
                    match req {
                        Req::Url | Req::Media => {
                            if p.body.len() + b.len() > MAX_PLAYLIST {
                                return Err(HlsFail::PlaylistTooLarge);
                            }
                            p.body.extend_from_slice(b);
                        }
                        Req::Init => {
                            // An oversized section is not kept: it is read as none.
                            if p.discard || p.body.len() + b.len() > MAX_INIT {
                                p.discard = true;
                                p.body = Vec::new();
                            } else {
                                p.body.extend_from_slice(b);
                            }
                        }
                        Req::Segment => {
                            if let Some(c) = p.check.as_deref_mut() {
                                c.feed(b);
                            }
                        }
                    }
                }
                Piece::Done => {
                    self.on_done(i, now)?;
                    let p = &self.players[i];
                    if at < data.len() && p.conn_gen == generation && p.req.is_some() {
                        // Bytes after a whole response, before the next was asked for.
                        return Err(FailReason::BadHead.into());
                    }
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Player `i`'s response is complete.
    fn on_done(&mut self, i: usize, now: u64) -> Result<(), HlsFail> {
        let p = &mut self.players[i];
        let req = p.req.take();
        p.retried = false;
        if !p.keep_alive {
            p.disconnect();
        }
        let body = std::mem::take(&mut p.body);
        match req {
            Some(Req::Url) => {
                let text = String::from_utf8_lossy(&body);
                match playlist::parse(&text).map_err(|_| HlsFail::BadPlaylist)? {
                    Playlist::Multivariant { variant } => {
                        let media = resolve(&p.base, &variant);
                        p.base = dir_of(&media);
                        p.media_path = Some(media);
                        drop(text);
                        self.request(i, Req::Media, now);
                    }
                    Playlist::Media(m) => {
                        p.media_path = Some(self.targets[p.target as usize].path.clone());
                        drop(text);
                        self.on_playlist(i, m, now);
                    }
                }
            }
            Some(Req::Media) => {
                let text = String::from_utf8_lossy(&body);
                match playlist::parse(&text).map_err(|_| HlsFail::BadPlaylist)? {
                    Playlist::Media(m) => {
                        drop(text);
                        self.on_playlist(i, m, now);
                    }
                    Playlist::Multivariant { .. } => return Err(HlsFail::BadPlaylist),
                }
            }
            Some(Req::Init) => {
                let uri = p
                    .queue
                    .front()
                    .and_then(|s| s.map.clone())
                    .unwrap_or_default();
                let init = Init::parse(&body);
                p.map = Some((uri, init.ok()));
                if let Err(b) = init {
                    self.corrupt(i, b);
                }
                self.next_request(i, now);
            }
            Some(Req::Segment) => self.on_segment(i, now),
            None => {}
        }
        Ok(())
    }

    /// A media playlist arrived for player `i` (RFC 8216 sections 6.3.3 and 6.3.4).
    fn on_playlist(&mut self, i: usize, m: MediaPlaylist, now: u64) {
        let no_blocking = self.spec.no_blocking_reload;
        let p = &mut self.players[i];
        p.target_us = m.target_duration_s.max(1) * 1_000_000;
        p.block = m.can_block_reload && !no_blocking;
        p.ended = m.ended;
        let fresh: Vec<Listed> = match p.cont.last_listed() {
            None => {
                let skip = m.segments.len().saturating_sub(START_SEGMENTS as usize);
                m.segments.into_iter().skip(skip).collect()
            }
            Some(last) => m.segments.into_iter().filter(|s| s.seq > last).collect(),
        };
        let mut breaks = Vec::new();
        for s in &fresh {
            if let Err(b) = p.cont.listed(s) {
                breaks.push(b);
            }
        }
        // A playlist that brought nothing new waits half a target duration, even with
        // blocking reload (a server that answers a held reload early is not asked in a loop).
        p.next_reload_us = if fresh.is_empty() {
            p.sent_us + p.target_us / 2
        } else if p.block {
            now
        } else {
            p.sent_us + p.target_us
        };
        p.queue.extend(fresh);
        if p.next_reload_us > now {
            p.timer_gen = p.timer_gen.wrapping_add(1);
            self.timers
                .push(Reverse((p.next_reload_us, i as u32, p.timer_gen)));
        }
        for b in breaks {
            self.corrupt(i, b);
        }
        self.next_request(i, now);
    }

    /// Player `i`'s front segment is complete: its media checked and credited.
    fn on_segment(&mut self, i: usize, now: u64) {
        let second = self.second;
        let p = &mut self.players[i];
        let Some(s) = p.queue.pop_front() else {
            return;
        };
        let check = p.check.take();
        let verified = check.as_ref().is_some_and(|c| c.verifies());
        let checked = check.map(|c| c.finish()).unwrap_or_default();
        p.got_segment = true;
        let mut breaks = Vec::new();
        if verified {
            match checked.broke {
                Some(b) => {
                    breaks.push(b);
                    p.cont.forget_media();
                }
                None => {
                    if let Err(b) = p.cont.media(s.seq, s.discontinuity, &checked.media) {
                        breaks.push(b);
                    }
                }
            }
        }
        // An unverified container: its EXTINF is all there is to go by.
        let media = if verified {
            checked.media.media_us
        } else {
            s.duration_us
        };
        let snap = &mut self.snap;
        if verified && checked.broke.is_none() {
            snap.units += 1;
        }
        snap.garbage_bytes += u64::from(checked.garbage_bytes);
        let was_playing = p.play.playing();
        let arrival = p.play.arrive(now, media);
        if let Some(g) = arrival.gap_us {
            snap.gap.record_us(g);
        }
        if arrival.starved {
            p.caught.catch(Rule::Gap, snap, second);
        }
        if !was_playing && p.play.playing() {
            p.phase = Phase::Playing;
            p.counted_us = now;
            if let Some((lo, hi)) = self.spec.slice.behaviour.session_range_us() {
                p.leave_at_us =
                    Some(now + session_length_us(lo, hi, now ^ (u64::from(p.id) << 32)));
            }
        }
        snap.media_us += media;
        snap.steady_media_us += arrival.steady_media_us;
        snap.steady_listen_us += arrival.steady_listen_us;
        for b in breaks {
            self.corrupt(i, b);
        }
        self.next_request(i, now);
    }

    /// Sends player `i`'s next request, if one is due: the front segment's initialization
    /// section, the front segment, or a playlist reload.
    fn next_request(&mut self, i: usize, now: u64) {
        let p = &self.players[i];
        if p.req.is_some() || !matches!(p.phase, Phase::Starting | Phase::Playing) {
            return;
        }
        if let Some(front) = p.queue.front() {
            let need_init = front
                .map
                .as_ref()
                .is_some_and(|m| p.map.as_ref().is_none_or(|(u, _)| u != m));
            let req = if need_init { Req::Init } else { Req::Segment };
            self.request(i, req, now);
        } else if p.ended {
            self.fail(i, HlsFail::Ended, now);
        } else if p.media_path.is_some() && now >= p.next_reload_us {
            self.request(i, Req::Media, now);
        }
    }

    /// Player `i` is corrupt (`b` says why).
    fn corrupt(&mut self, i: usize, b: Break) {
        *self
            .snap
            .extra
            .entry(format!("hls-corrupt-{}", b.key()))
            .or_insert(0.0) += 1.0;
        self.players[i]
            .caught
            .catch(Rule::Corrupt, &mut self.snap, self.second);
    }

    /// Counts player `i`'s playing time up to `now` into the listening totals (and an overdue
    /// segment's time into the steady part, see the module comment).
    fn count_time(&mut self, i: usize, now: u64) {
        let p = &mut self.players[i];
        if p.phase == Phase::Playing {
            self.snap.listen_us += now.saturating_sub(p.counted_us);
            self.snap.steady_listen_us += p.play.overdue(now, p.target_us);
        }
        p.counted_us = now;
    }

    /// Closes player `i` by the bench's choice (churn, storm, session end, ramp-down, end of
    /// run) or after a failure; a session that got a segment counts for its URL.
    fn close(&mut self, i: usize, now: u64) {
        self.count_time(i, now);
        let p = &mut self.players[i];
        p.leave_at_us = None;
        if p.got_segment {
            let gt = &mut self.sessions[p.target as usize];
            gt.0 += 1;
            gt.1 += now.saturating_sub(p.session_start_us);
            self.snap
                .longest_gap
                .record_us(p.play.final_longest_gap(now));
        }
        p.got_segment = false;
        p.disconnect();
        p.req = None;
        p.check = None;
        p.body = Vec::new();
        p.queue = VecDeque::new();
        p.resp = Reader::new();
        p.timer_gen = p.timer_gen.wrapping_add(1);
        p.phase = Phase::Idle;
    }

    fn fail(&mut self, i: usize, why: HlsFail, now: u64) {
        *self.snap.failures.entry(why.key()).or_insert(0) += 1;
        self.close(i, now);
        let p = &mut self.players[i];
        p.caught.fail(&mut self.snap);
        p.phase = Phase::Failed;
        if let Some(d) = self.spec.slice.behaviour.reconnect_after {
            p.retry_at_us = now + (d.0 * 1e6) as u64;
        }
    }

    /// The tick of the second that just ended: every player judged, the states counted, this
    /// second's histograms handed over.
    fn tick(&mut self, now: u64) -> GroupTick {
        let judge = self.spec.slice.judge;
        let second = self.second;
        let (mut connecting, mut streaming, mut stalled, mut starved, mut down) = (0, 0, 0, 0, 0);
        for i in 0..self.on {
            self.count_time(i, now);
            let p = &self.players[i];
            if let Some(req) = p.req {
                if matches!(p.phase, Phase::Starting | Phase::Playing) {
                    let mut limit = u64::from(judge.connect_timeout_ms) * 1000;
                    if req == Req::Media && p.block {
                        limit += BLOCK_TARGETS * p.target_us;
                    }
                    if now.saturating_sub(p.sent_us) > limit {
                        self.fail(i, FailReason::Timeout.into(), now);
                    }
                }
            }
            let p = &mut self.players[i];
            match p.phase {
                Phase::Starting => {
                    connecting += 1;
                    // Waiting for media longer than a player's buffer is starving too.
                    let waited = now.saturating_sub(p.session_start_us);
                    if waited > u64::from(judge.max_gap_ms) * 1000 {
                        starved += 1;
                        p.caught.catch(Rule::Gap, &mut self.snap, second);
                    }
                }
                Phase::Playing => {
                    streaming += 1;
                    let v = p.play.judge(now, p.target_us, judge.min_rate);
                    if v.gap || v.rate {
                        starved += 1;
                    }
                    if v.gap {
                        p.caught.catch(Rule::Gap, &mut self.snap, second);
                    }
                    if v.rate {
                        p.caught.catch(Rule::Rate, &mut self.snap, second);
                    }
                }
                Phase::Stalled => stalled += 1,
                Phase::Failed => {
                    if self.spec.slice.behaviour.reconnect_after.is_some() && now >= p.retry_at_us {
                        self.start(i, now);
                        connecting += 1;
                    } else {
                        down += 1;
                    }
                }
                Phase::Idle | Phase::Dropped => {}
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
        let cpu = if self.spec.slice.thread_cpu {
            rusage::thread()
        } else {
            rusage::process()
        };
        snap.cpu_us = cpu.user_us + cpu.sys_us;
        let t = GroupTick {
            group: self.spec.slice.group,
            second,
            done: false,
            snap: snap.clone(),
        };
        snap.clear_hists();
        t
    }

    /// Closes every player at the end of the run and adds the sessions to the last tick.
    fn finish(&mut self, now: u64, tick: &mut GroupTick) {
        for i in 0..self.players.len() {
            if self.players[i].phase != Phase::Idle {
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
            tick.snap
                .ground_truth
                .entry(self.targets[k].mount.clone())
                .or_default()
                .add(&GroundTruth {
                    sessions,
                    listening_seconds: us as f64 / 1e6,
                });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000;

    /// A player fed segments of `seg_s` seconds of media arriving every `every_s` seconds (the
    /// first three at once at 0.1 s), judged at every whole second up to `until_s`: the first
    /// second each rule caught it.
    fn play(seg_s: f64, every_s: f64, target_s: u64, until_s: u64) -> (Option<u64>, Option<u64>) {
        let mut p = Playback::default();
        let seg = (seg_s * 1e6) as u64;
        for _ in 0..3 {
            assert!(p.arrive(S / 10, seg).gap_us.is_none_or(|g| g == 0));
        }
        assert!(p.playing());
        let mut next = S / 10 + (every_s * 1e6) as u64;
        let (mut gap, mut rate) = (None, None);
        for sec in 1..=until_s {
            while next <= sec * S {
                if p.arrive(next, seg).starved {
                    gap.get_or_insert(sec);
                }
                next += (every_s * 1e6) as u64;
            }
            let j = p.judge(sec * S, target_s * S, 0.8);
            if j.gap {
                gap.get_or_insert(sec);
            }
            if j.rate {
                rate.get_or_insert(sec);
            }
        }
        (gap, rate)
    }

    #[test]
    fn healthy_players_in_lumps_are_never_starved() {
        for (seg, target) in [(6.0, 6), (2.0, 2), (1.0, 1), (5.9, 6)] {
            assert_eq!(
                play(seg, seg, target, 600),
                (None, None),
                "{seg} s segments"
            );
        }
    }

    #[test]
    fn a_slow_server_is_starved_by_rate_then_by_its_buffer() {
        // 70 % of real time: 6 s of media every 8.57 s.
        let (gap, rate) = play(6.0, 6.0 / 0.7, 6, 600);
        let rate = rate.expect("caught by rate");
        assert!((18..=60).contains(&rate), "rate from {rate} s");
        // The buffer (18 s) loses 2.6 s a segment: dry before the fifth late one, at 42 s.
        let gap = gap.expect("caught by its buffer");
        assert!((40..=45).contains(&gap), "gap from {gap} s");
        assert!(rate < gap);
        // 90 % is above the 80 % rule: only the buffer catches it, in the end.
        let (gap, rate) = play(2.0, 2.0 / 0.9, 2, 300);
        assert_eq!(rate, None);
        assert!(gap.is_some());
    }

    #[test]
    fn a_silent_server_starves_once_the_buffer_is_played() {
        let mut p = Playback::default();
        for _ in 0..3 {
            p.arrive(0, 2 * S);
        }
        assert!(!p.judge(5 * S, 2 * S, 0.8).gap);
        let j = p.judge(7 * S, 2 * S, 0.8);
        assert!(j.gap && j.rate, "{j:?}");
        // A segment after the silence: it plays on from there, the starvation already seen.
        let a = p.arrive(9 * S, 2 * S);
        assert!(!a.starved && !p.starved);
        assert_eq!(a.gap_us, Some(9 * S));
        assert!(!p.judge(10 * S, 2 * S, 0.8).gap);
        assert!(p.judge(12 * S, 2 * S, 0.8).gap);
        assert_eq!(p.final_longest_gap(20 * S), 11 * S);
    }

    #[test]
    fn a_dry_buffer_between_ticks_is_seen_at_the_arrival() {
        let mut p = Playback::default();
        for _ in 0..3 {
            p.arrive(0, S);
        }
        // Played 3 s by 3.0 s; the next segment comes at 3.5 s, before any judgement.
        let a = p.arrive(3 * S + S / 2, S);
        assert!(a.starved);
        assert!(!p.judge(4 * S, S, 0.8).gap, "rebuffered");
        assert!(p.steady(S) && !p.steady(S / 2));
    }

    #[test]
    fn the_steady_rate_is_measured_between_arrivals() {
        // 2 s segments arriving every 2 s from 1.3 s: the first a second into playback sets the
        // mark; each later one adds its media over the time since.
        let mut p = Playback::default();
        for _ in 0..3 {
            p.arrive(0, 2 * S);
        }
        let (mut media, mut listen) = (0, 0);
        for k in 0..5u64 {
            let a = p.arrive(S + S * 3 / 10 + 2 * k * S, 2 * S);
            media += a.steady_media_us;
            listen += a.steady_listen_us;
            listen += p.overdue(S * 3 / 10 + 2 * k * S + 2 * S, 2 * S);
        }
        assert_eq!((media, listen), (8 * S, 8 * S));
        // Then nothing: past a target duration, the silence counts as it passes.
        let last = S + S * 3 / 10 + 8 * S;
        assert_eq!(p.overdue(last + S, 2 * S), 0);
        assert_eq!(p.overdue(last + 3 * S, 2 * S), S);
        assert_eq!(p.overdue(last + 5 * S, 2 * S), 2 * S);
        // A late segment: the rest of its interval, not what was counted already.
        let a = p.arrive(last + 6 * S, 2 * S);
        assert_eq!((a.steady_media_us, a.steady_listen_us), (2 * S, 3 * S));
    }

    #[test]
    fn a_player_is_a_few_hundred_bytes() {
        // Its heap: the URL paths, the segments offered until fetched, a check while one
        // arrives; no segment body.
        let size = std::mem::size_of::<Player>();
        assert!(size <= 576, "{size} bytes");
    }

    #[test]
    fn failure_keys() {
        assert_eq!(HlsFail::BadPlaylist.key(), "bad-playlist");
        assert_eq!(HlsFail::from(FailReason::HttpStatus(404)).key(), "http-404");
        assert_eq!(HlsFail::from(HttpError::BadChunk).key(), "bad-chunk");
        assert_eq!(HlsFail::from(HttpError::BadHead).key(), "bad-head");
        assert_eq!(
            hls_mount_of("http://127.0.0.1:8000/hls/live.mp3/index.m3u8"),
            "/live.mp3"
        );
        assert_eq!(hls_mount_of("http://h/x/index.m3u8?s=1"), "/x/index.m3u8");
    }
}
