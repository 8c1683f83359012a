//! The HLS player engine: `throng bench run <url>.m3u8` plays each listener like an HLS player.
//!
//! A player fetches the playlist URL (a master playlist: it follows the first variant, the
//! session's media playlist), then the media playlist, starts three segments from the live edge
//! (RFC 8216 section 6.3.3: not within three target durations of the end), fetches new segments
//! in order over one keep-alive connection, and reloads the playlist as section 6.3.4 says: one
//! target duration after the previous reload began when that one brought new segments, half a
//! target duration when it did not. When the playlist advertises
//! `EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES` it uses blocking playlist reload instead, as
//! hls.js does in low-latency mode (RFC 8216bis section 6.2.5.2): once the segments it knows
//! are in, it asks at once for the playlist with `_HLS_msn=<next sequence number>`, which the
//! server holds until that segment is cut (`--hls-no-blocking-reload` turns this off). Its
//! buffer model: the
//! seconds of audio downloaded, minus the wall time since playback started; playback starts once
//! [`START_SEGMENTS`] segments are in. A player whose buffer runs dry is starved (once counted,
//! it waits for the next segment and plays on). Segment TTFB (request to first response byte)
//! goes in the run's TTFB histogram, requests in `requests_total`; the verdict is the ICY one.
//! Plain HTTP only, so a caching proxy (nginx, a CDN edge) is benched by giving its URL.

use crate::icy::engine::{EngineError, EngineSpec};
use crate::net::connect::{is_loopback_v4, parse_bind_range, start_connect};
use crate::net::url::HttpUrl;
use crate::observe::rusage;
use crate::stats::listener_counts::ListenerCounts;
use crate::stats::{bucket_of, FailReason, LogHist, Phase, WorkerTick, HIST_BUCKETS};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use std::collections::{BTreeMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use throng_proto::hls::playlist;
use throng_proto::http::parse_response_head;

/// Segments downloaded before playback starts (segments).
pub const START_SEGMENTS: usize = 3;
/// Largest playlist body kept (bytes).
const MAX_PLAYLIST: usize = 256 * 1024;
/// Largest response head (bytes).
const MAX_HEAD: usize = 16 * 1024;
/// How often timers are checked (µs).
const TIMER_US: u64 = 20_000;

struct Target {
    addr: SocketAddr,
    host: String,
    path: String,
    auth: Option<String>,
    bind: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Req {
    Master,
    Media,
    Segment(u64, f64),
}

#[derive(Default)]
struct Player {
    sock: Option<TcpStream>,
    target: u16,
    bind: u16,
    connected: bool,
    failed: bool,
    retry_at_us: u64,
    inflight: Option<Req>,
    out: Vec<u8>,
    sent_at_us: u64,
    first_byte: bool,
    head: Vec<u8>,
    body: Vec<u8>,
    remaining: Option<usize>,
    close_after: bool,
    media_path: Option<String>,
    base: String,
    target_us: u64,
    next_poll_us: u64,
    /// The server holds `_HLS_msn` reloads and this player uses them.
    block: bool,
    queue: VecDeque<(u64, String, f64)>,
    last_seq: Option<u64>,
    downloaded_us: u64,
    segments: usize,
    play_start_us: Option<u64>,
    starved_now: bool,
    ever_starved: bool,
    started: bool,
}

#[derive(Default)]
struct Counters {
    connects: u32,
    bytes: u64,
    ttfb: Vec<u64>,
    failures: BTreeMap<String, u64>,
    starved_total: u32,
    requests: u64,
}

/// One worker's HLS players.
pub struct HlsEngine {
    spec: EngineSpec,
    poll: Poll,
    players: Vec<Player>,
    targets: Vec<Target>,
    binds: Vec<Ipv4Addr>,
    scratch: Vec<u8>,
    c: Counters,
    epoch: Instant,
}

fn dir_of(path: &str) -> String {
    let p = path.split('?').next().unwrap_or(path);
    match p.rfind('/') {
        Some(i) => p[..=i].to_owned(),
        None => "/".to_owned(),
    }
}

/// The media playlist `path` with the blocking-reload directive `_HLS_msn=msn` added to its
/// query (RFC 8216bis section 6.2.5.1).
fn blocking_path(path: &str, msn: u64) -> String {
    let sep = if path.contains('?') { '&' } else { '?' };
    format!("{path}{sep}_HLS_msn={msn}")
}

/// Resolves a playlist URI against the directory `base` (absolute paths and `http://host/...`
/// URLs on the same server keep their path).
fn resolve(base: &str, uri: &str) -> String {
    if let Some(rest) = uri.strip_prefix("http://") {
        return rest.find('/').map_or("/".into(), |i| rest[i..].to_owned());
    }
    if uri.starts_with('/') {
        uri.to_owned()
    } else {
        format!("{base}{uri}")
    }
}

impl HlsEngine {
    /// Prepares the players of this worker.
    pub fn new(spec: EngineSpec) -> Result<HlsEngine, EngineError> {
        if spec.urls.is_empty() {
            return Err(EngineError::NoUrl);
        }
        let binds = parse_bind_range(&spec.profile.bind_range)?;
        let mut targets = Vec::new();
        for u in &spec.urls {
            let url = HttpUrl::parse(u)?;
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
                bind: !binds.is_empty() && is_loopback_v4(&url.addr),
            });
        }
        let n = spec.listener_count();
        let w = spec.workers.max(1);
        let players = (0..n)
            .map(|k| {
                let id = spec.worker + k * w;
                Player {
                    target: (id as usize % targets.len()) as u16,
                    bind: if binds.is_empty() {
                        0
                    } else {
                        ((id as usize / targets.len()) % binds.len()) as u16
                    },
                    ..Player::default()
                }
            })
            .collect();
        Ok(HlsEngine {
            poll: Poll::new()?,
            players,
            targets,
            binds,
            scratch: vec![0u8; 64 * 1024],
            c: Counters::default(),
            epoch: Instant::now(),
            spec,
        })
    }

    fn now_us(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    /// Runs the profile (ramp, then hold), calling `report` once per second and once at the end.
    pub fn run(
        mut self,
        stop: &AtomicBool,
        mut report: impl FnMut(&WorkerTick) -> bool,
    ) -> Result<(), EngineError> {
        crate::profile::sleep_until_unix_ms(self.spec.start_unix_ms);
        self.epoch = Instant::now();
        let n = self.players.len() as u32;
        let rate = self.spec.profile.worker_ramp(n);
        let hold_us = (self.spec.profile.hold.0 * 1e6) as u64;
        let mut started = 0u32;
        let mut hold_start: Option<u64> = if n == 0 { Some(0) } else { None };
        let mut next_tick = 1_000_000u64;
        let mut next_timer = 0u64;
        let mut second = 0u32;
        let mut events = Events::with_capacity(4096);
        loop {
            let now = self.now_us();
            let wake =
                next_tick
                    .min(next_timer)
                    .min(if started < n { now + 1000 } else { u64::MAX });
            let timeout = Duration::from_micros(wake.saturating_sub(now));
            match self.poll.poll(&mut events, Some(timeout)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(EngineError::Poll(e)),
            }
            let now = self.now_us();
            for ev in events.iter() {
                let i = ev.token().0;
                if ev.is_writable() {
                    self.on_writable(i, now);
                }
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    self.on_readable(i, now);
                }
            }
            if started < n {
                let due = (((now as f64 / 1e6) * rate).floor() as u32 + 1).min(n);
                while started < due {
                    let p = &mut self.players[started as usize];
                    p.started = true;
                    self.request(started as usize, Req::Master, now);
                    started += 1;
                }
                if started == n {
                    hold_start = Some(now);
                }
            }
            if now >= next_timer {
                next_timer = now + TIMER_US;
                for i in 0..self.players.len() {
                    self.on_timer(i, now);
                }
            }
            if now >= next_tick {
                let phase = if hold_start.is_some() {
                    Phase::Hold
                } else {
                    Phase::Ramp
                };
                let t = self.tick(second, phase, started, now);
                if !report(&t) {
                    return Ok(());
                }
                second += 1;
                next_tick = (second as u64 + 1) * 1_000_000;
                let finished = hold_start.is_some_and(|hs| now + 500_000 >= hs + hold_us);
                if finished || stop.load(Ordering::Relaxed) {
                    let now = self.now_us();
                    let mut t = self.tick(second, Phase::Done, started, now);
                    t.longest_gaps = Some(LogHist::default());
                    for p in &mut self.players {
                        p.sock = None;
                    }
                    report(&t);
                    return Ok(());
                }
            }
        }
    }

    /// Sends request `req` for player `i`, connecting first when it has no connection.
    fn request(&mut self, i: usize, req: Req, now: u64) {
        let t = &self.targets[self.players[i].target as usize];
        let p = &self.players[i];
        let path = match &req {
            Req::Master => t.path.clone(),
            Req::Media => {
                let path = p.media_path.clone().unwrap_or_else(|| t.path.clone());
                match p.last_seq.filter(|_| p.block) {
                    Some(last) => blocking_path(&path, last + 1),
                    None => path,
                }
            }
            Req::Segment(..) => {
                let (_, uri, _) = p.queue.front().expect("a queued segment");
                resolve(&p.base, uri)
            }
        };
        let mut out = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: throng-bench/{} (HLS)\r\nAccept: */*\r\n",
            t.host,
            env!("CARGO_PKG_VERSION")
        );
        if let (Req::Master, Some(a)) = (&req, &t.auth) {
            out.push_str(a);
        }
        out.push_str("\r\n");
        let (addr, local) = (t.addr, t.bind.then(|| self.binds[p.bind as usize]));
        self.c.requests += 1;
        let p = &mut self.players[i];
        p.inflight = Some(req);
        p.out = out.into_bytes();
        p.sent_at_us = now;
        p.first_byte = false;
        p.head.clear();
        p.body.clear();
        p.remaining = None;
        if p.sock.is_none() {
            self.c.connects += 1;
            match start_connect(addr, local) {
                Ok(std) => {
                    let mut sock = TcpStream::from_std(std);
                    if let Err(e) = self.poll.registry().register(
                        &mut sock,
                        Token(i),
                        Interest::READABLE | Interest::WRITABLE,
                    ) {
                        return self.fail(i, FailReason::from_io(&e), now);
                    }
                    let p = &mut self.players[i];
                    p.sock = Some(sock);
                    p.connected = false;
                }
                Err(e) => self.fail(i, FailReason::from_io(&e), now),
            }
        } else {
            self.flush(i, now);
        }
    }

    fn flush(&mut self, i: usize, now: u64) {
        let p = &mut self.players[i];
        let Some(sock) = p.sock.as_mut() else { return };
        while !p.out.is_empty() {
            match sock.write(&p.out) {
                Ok(0) => return self.fail(i, FailReason::Reset, now),
                Ok(n) => {
                    p.out.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.fail(i, FailReason::from_io(&e), now),
            }
        }
    }

    fn on_writable(&mut self, i: usize, now: u64) {
        let Some(p) = self.players.get_mut(i) else {
            return;
        };
        let Some(sock) = p.sock.as_mut() else { return };
        if !p.connected {
            match sock.take_error() {
                Ok(Some(e)) | Err(e) => return self.fail(i, FailReason::from_io(&e), now),
                Ok(None) => {}
            }
            match sock.peer_addr() {
                Ok(_) => p.connected = true,
                Err(e) if e.kind() == io::ErrorKind::NotConnected => return,
                Err(e) => return self.fail(i, FailReason::from_io(&e), now),
            }
        }
        self.flush(i, now);
    }

    fn on_readable(&mut self, i: usize, now: u64) {
        loop {
            let Some(p) = self.players.get_mut(i) else {
                return;
            };
            let Some(sock) = p.sock.as_mut() else { return };
            match sock.read(&mut self.scratch) {
                Ok(0) => {
                    if p.inflight.is_some() {
                        let why = if p.remaining.is_some() {
                            FailReason::ClosedWhileStreaming
                        } else {
                            FailReason::ClosedBeforeHead
                        };
                        return self.fail(i, why, now);
                    }
                    // An idle keep-alive connection closed by the server: reconnect on demand.
                    p.sock = None;
                    return;
                }
                Ok(n) => {
                    if p.inflight.is_none() {
                        return self.fail(i, FailReason::BadHead, now);
                    }
                    self.c.bytes += n as u64;
                    let data = self.scratch[..n].to_vec();
                    if let Err(why) = self.on_data(i, &data, now) {
                        return self.fail(i, why, now);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.fail(i, FailReason::from_io(&e), now),
            }
        }
    }

    fn on_data(&mut self, i: usize, mut data: &[u8], now: u64) -> Result<(), FailReason> {
        let p = &mut self.players[i];
        if !p.first_byte {
            p.first_byte = true;
            if matches!(p.inflight, Some(Req::Segment(..))) {
                self.c.ttfb.push(now.saturating_sub(p.sent_at_us));
            }
        }
        if p.remaining.is_none() {
            p.head.extend_from_slice(data);
            let Some((head, len)) =
                parse_response_head(&p.head).map_err(|_| FailReason::BadHead)?
            else {
                if p.head.len() > MAX_HEAD {
                    return Err(FailReason::BadHead);
                }
                return Ok(());
            };
            if head.status != 200 {
                return Err(FailReason::HttpStatus(head.status));
            }
            let cl = head
                .header("content-length")
                .and_then(|v| v.trim().parse::<usize>().ok())
                .ok_or(FailReason::BadHead)?;
            p.close_after = head
                .header("connection")
                .is_some_and(|c| c.eq_ignore_ascii_case("close"))
                || (head.version == "HTTP/1.0"
                    && !head
                        .header("connection")
                        .is_some_and(|c| c.eq_ignore_ascii_case("keep-alive")));
            p.remaining = Some(cl);
            let rest = p.head.split_off(len);
            p.head.clear();
            return self.on_body(i, &rest, now);
        }
        let take = data.len().min(p.remaining.unwrap_or(0));
        if take < data.len() {
            data = &data[..take];
        }
        self.on_body(i, data, now)
    }

    fn on_body(&mut self, i: usize, data: &[u8], now: u64) -> Result<(), FailReason> {
        let p = &mut self.players[i];
        let rem = p.remaining.unwrap_or(0);
        let take = data.len().min(rem);
        if !matches!(p.inflight, Some(Req::Segment(..))) {
            if p.body.len() + take > MAX_PLAYLIST {
                return Err(FailReason::BadHead);
            }
            p.body.extend_from_slice(&data[..take]);
        }
        p.remaining = Some(rem - take);
        if rem - take > 0 {
            return Ok(());
        }
        // The response is complete.
        let req = p.inflight.take();
        p.remaining = None;
        if p.close_after {
            p.sock = None;
        }
        match req {
            Some(Req::Master) => {
                let text = String::from_utf8_lossy(&p.body).into_owned();
                let pl = playlist::parse(&text).ok_or(FailReason::BadHead)?;
                let base = dir_of(&self.targets[p.target as usize].path);
                match pl.variant {
                    Some(v) => {
                        let media = resolve(&base, &v);
                        p.base = dir_of(&media);
                        p.media_path = Some(media);
                        self.request(i, Req::Media, now);
                    }
                    None => {
                        p.base = base;
                        p.media_path = Some(self.targets[p.target as usize].path.clone());
                        self.on_media(i, &pl, now);
                    }
                }
            }
            Some(Req::Media) => {
                let text = String::from_utf8_lossy(&p.body).into_owned();
                let pl = playlist::parse(&text).ok_or(FailReason::BadHead)?;
                self.on_media(i, &pl, now);
            }
            Some(Req::Segment(_, dur)) => {
                p.queue.pop_front();
                p.downloaded_us += (dur * 1e6) as u64;
                p.segments += 1;
                if p.play_start_us.is_none() && p.segments >= START_SEGMENTS {
                    p.play_start_us = Some(now);
                }
                if p.starved_now {
                    // Rebuffered: play on from here.
                    p.starved_now = false;
                    let played = p.downloaded_us.saturating_sub((dur * 1e6) as u64);
                    p.play_start_us = Some(now.saturating_sub(played));
                }
                self.next_request(i, now);
            }
            None => {}
        }
        Ok(())
    }

    fn on_media(&mut self, i: usize, pl: &playlist::ParsedPlaylist, now: u64) {
        let p = &mut self.players[i];
        p.target_us = pl.target_duration.max(1) * 1_000_000;
        p.block = pl.can_block_reload && !self.spec.profile.hls_no_blocking_reload;
        let fresh: Vec<_> = match p.last_seq {
            None => {
                let skip = pl.segments.len().saturating_sub(START_SEGMENTS);
                pl.segments[skip..].to_vec()
            }
            Some(last) => pl
                .segments
                .iter()
                .filter(|(n, _, _)| *n > last)
                .cloned()
                .collect(),
        };
        if let Some((n, _, _)) = fresh.last() {
            p.last_seq = Some(*n);
        }
        // RFC 8216 section 6.3.4: the next reload one target duration after the previous one
        // began when the playlist changed, half a target duration when it did not.
        p.next_poll_us = if p.block && p.last_seq.is_some() {
            // Blocking reload: the server answers when the next segment exists.
            now
        } else if fresh.is_empty() {
            p.sent_at_us + p.target_us / 2
        } else {
            p.sent_at_us + p.target_us
        };
        p.queue.extend(fresh);
        self.next_request(i, now);
    }

    fn next_request(&mut self, i: usize, now: u64) {
        let p = &self.players[i];
        if p.inflight.is_some() || p.failed {
            return;
        }
        if let Some((n, _, d)) = p.queue.front() {
            let req = Req::Segment(*n, *d);
            self.request(i, req, now);
        } else if p.media_path.is_some() && now >= p.next_poll_us {
            self.request(i, Req::Media, now);
        }
    }

    fn on_timer(&mut self, i: usize, now: u64) {
        let p = &mut self.players[i];
        if !p.started {
            return;
        }
        if p.failed {
            if let Some(d) = self.spec.profile.reconnect_after {
                if now >= p.retry_at_us {
                    p.failed = false;
                    p.inflight = None;
                    p.media_path = None;
                    p.last_seq = None;
                    p.queue.clear();
                    let _ = d;
                    self.request(i, Req::Master, now);
                }
            }
            return;
        }
        if let Some(start) = p.play_start_us {
            let played = now.saturating_sub(start);
            if played > p.downloaded_us && !p.starved_now {
                p.starved_now = true;
                if !p.ever_starved {
                    p.ever_starved = true;
                    self.c.starved_total += 1;
                }
            }
        }
        let mut timeout = (self.spec.profile.connect_timeout.0 * 1e6) as u64;
        if p.block && p.inflight == Some(Req::Media) {
            // A held reload lasts up to three target durations (RFC 8216bis 6.2.5.2).
            timeout += 3 * p.target_us;
        }
        if p.inflight.is_some() && now.saturating_sub(p.sent_at_us) > timeout {
            return self.fail(i, FailReason::Timeout, now);
        }
        self.next_request(i, now);
    }

    fn fail(&mut self, i: usize, why: FailReason, now: u64) {
        *self.c.failures.entry(why.key()).or_insert(0) += 1;
        let p = &mut self.players[i];
        p.sock = None;
        p.inflight = None;
        p.failed = true;
        if let Some(d) = self.spec.profile.reconnect_after {
            p.retry_at_us = now + (d.0 * 1e6) as u64;
        }
    }

    fn tick(&mut self, second: u32, phase: Phase, started: u32, _now: u64) -> WorkerTick {
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
        let bps = self
            .spec
            .profile
            .bitrate_kbps
            .map(|k| (k * 1000.0 / 8.0) as u64);
        for p in &self.players {
            if !p.started {
                continue;
            }
            if p.failed {
                t.counts.failed += 1;
            } else if p.play_start_us.is_none() {
                t.counts.connecting += 1;
            } else {
                t.counts.streaming += 1;
                t.counts.expected_bytes += bps.unwrap_or(0);
                if p.starved_now {
                    t.counts.starved += 1;
                }
            }
        }
        t.counts.connects = std::mem::take(&mut self.c.connects);
        t.counts.bytes = std::mem::take(&mut self.c.bytes);
        let mut dense = vec![0u64; HIST_BUCKETS];
        for us in self.c.ttfb.drain(..) {
            dense[bucket_of(us) as usize] += 1;
        }
        t.ttfb = LogHist::from_dense(&dense);
        t.counts.failures_total = self.c.failures.clone();
        t.counts.starved_total = self.c.starved_total;
        t.requests_total = self.c.requests;
        let cpu = if self.spec.thread_cpu {
            rusage::thread()
        } else {
            rusage::process()
        };
        t.cpu_user_us = cpu.user_us;
        t.cpu_sys_us = cpu.sys_us;
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_paths() {
        assert_eq!(dir_of("/hls/a.mp3/index.m3u8?s=1"), "/hls/a.mp3/");
        assert_eq!(resolve("/hls/a.mp3/", "12.mp3"), "/hls/a.mp3/12.mp3");
        assert_eq!(resolve("/hls/a.mp3/", "/x/1.aac"), "/x/1.aac");
        assert_eq!(resolve("/b/", "http://cdn:80/y/2.aac"), "/y/2.aac");
        assert_eq!(
            blocking_path("/hls/a.mp3/index.m3u8?session=x", 12),
            "/hls/a.mp3/index.m3u8?session=x&_HLS_msn=12"
        );
        assert_eq!(blocking_path("/p.m3u8", 3), "/p.m3u8?_HLS_msn=3");
    }
}
