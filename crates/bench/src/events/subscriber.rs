//! The event-stream engine of an events group: one `mio` loop holding this engine's slice of
//! SSE subscribers (`GET /api/v1/events`), started and stopped as the group's stages ask, from
//! the bind range's source addresses as listeners are. A subscriber is *ready* once it has its
//! response head and a `mount` event (the snapshot; the time from connect to it is its TTFB).
//! The run changes the title every `change-interval` ([`crate::run::triggers`]), each title
//! carrying its change number and trigger time on the run's one clock ([`bench_title`]); a
//! subscriber receiving one records its delivery latency on that clock (so agents on other
//! hosts measure the same thing). A change some subscriber of the engine received, triggered
//! while another was ready and connected, that the other never got is *missed* (counted at the
//! end, leaving each change `max_latency` to arrive). Session lengths and a storm apply as to
//! ICY listeners; once a second the engine reports its group's [`Snapshot`].

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use serde::{Deserialize, Serialize};
use throng_proto::sse::{Item, Parser};

use crate::net::connect::{binds_apply, parse_bind_range, start_connect};
use crate::net::url::HttpUrl;
use crate::observe::rusage;
use crate::profile::slice::{sleep_until_unix_ms, unix_us, RunClock, Slice};
use crate::stats::{Caught, FailReason, GroupTick, Snapshot};

/// The prefix of the titles a run sets; the rest is `<change> <trigger time, µs since epoch>`.
pub const TITLE_PREFIX: &str = "throng-bench ";

/// Most title changes a subscriber tracks (a bit each).
pub const MAX_CHANGES: u32 = 64;

/// The title of change number `k` triggered at `unix_us` (µs since the Unix epoch, the run's
/// clock).
pub fn bench_title(k: u32, unix_us: u64) -> String {
    format!("{TITLE_PREFIX}{k} {unix_us}")
}

/// The change number and trigger time of a title set by [`bench_title`].
pub fn parse_bench_title(title: &str) -> Option<(u32, u64)> {
    let rest = title.strip_prefix(TITLE_PREFIX)?;
    let (k, t) = rest.split_once(' ')?;
    Some((k.parse().ok()?, t.parse().ok()?))
}

/// What one events engine runs.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EventsSpec {
    /// The group's slice this engine runs.
    pub slice: Slice,
    /// How long a change may take to arrive before a subscriber that did not get it missed it
    /// (ms).
    #[serde(default = "default_latency")]
    pub max_latency_ms: f64,
}

fn default_latency() -> f64 {
    1000.0
}

/// Errors that stop an engine before it runs.
#[derive(Debug, thiserror::Error)]
pub enum EventsError {
    /// A URL could not be used.
    #[error(transparent)]
    Url(#[from] crate::net::url::UrlError),
    /// The bind range could not be parsed.
    #[error(transparent)]
    Range(#[from] crate::net::connect::BadRange),
    /// The poller could not be created.
    #[error("poll: {0}")]
    Poll(#[from] io::Error),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Idle,
    Connecting,
    Head,
    Open,
    Failed,
}

struct Sub {
    id: u32,
    sock: Option<TcpStream>,
    state: State,
    target: u16,
    bind: u16,
    caught: Caught,
    /// When the connection started (µs since the engine's epoch).
    start_us: u64,
    /// When it got its snapshot (µs on the run's clock).
    ready_at: Option<u64>,
    /// The run-clock intervals it was ready over (closed ones), for the missed count.
    ready_spans: Vec<(u64, u64)>,
    /// Changes received (a bit each).
    got: u64,
    head: Vec<u8>,
    parser: Parser,
    leave_at_us: Option<u64>,
    retry_at_us: u64,
}

struct Target {
    addr: SocketAddr,
    request: Vec<u8>,
    bind: bool,
}

/// Runs the engine through its group's stages, calling `report` once a second (the last time
/// with `done`); returns early when `stop` is set or `report` returns false.
///
/// Errors: a bad URL or bind range, or no poller.
pub fn run(
    spec: &EventsSpec,
    clock: Arc<RunClock>,
    stop: &AtomicBool,
    mut report: impl FnMut(&GroupTick) -> bool,
) -> Result<(), EventsError> {
    let slice = &spec.slice;
    let binds = parse_bind_range(&slice.bind_range)?;
    let mut targets = Vec::new();
    for u in &slice.urls {
        let url = HttpUrl::parse(u)?;
        let req = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: throng-bench/{}\r\nAccept: text/event-stream\r\n\r\n",
            url.path,
            url.host_header(),
            env!("CARGO_PKG_VERSION")
        );
        targets.push(Target {
            addr: url.addr,
            request: req.into_bytes(),
            bind: binds_apply(&url.addr, &binds),
        });
    }
    let mut poll = Poll::new()?;
    let ntargets = targets.len().max(1);
    let ids = slice.ids();
    let mut subs: Vec<Sub> = ids
        .iter()
        .map(|&id| Sub {
            id,
            sock: None,
            state: State::Idle,
            target: (id as usize % ntargets) as u16,
            bind: if binds.is_empty() {
                0
            } else {
                ((id as usize / ntargets) % binds.len()) as u16
            },
            caught: Caught::default(),
            start_us: 0,
            ready_at: None,
            ready_spans: Vec::new(),
            got: 0,
            head: Vec::new(),
            parser: Parser::new(),
            leave_at_us: None,
            retry_at_us: 0,
        })
        .collect();
    sleep_until_unix_ms(slice.start_unix_ms, &|| stop.load(Ordering::Relaxed));
    let epoch = Instant::now();
    let epoch_unix = unix_us();
    let now_us = || epoch.elapsed().as_micros() as u64;
    let mut snap = Snapshot::default();
    // Changes seen by any subscriber here: number → trigger time (run clock).
    let mut seen: BTreeMap<u32, u64> = BTreeMap::new();
    let mut events = Events::with_capacity(1024);
    let mut buf = vec![0u8; 65536];
    let mut on = 0usize;
    let mut started = 0usize;
    let mut second = 0u32;
    let end_us = (slice.end_s() * 1e6) as u64;
    let storm_at = slice.behaviour.storm_at.map(|s| (s.0 * 1e6) as u64);
    let mut storm_done = false;
    let sessions = slice.behaviour.session_range_us();
    let timeout_us = u64::from(slice.judge.connect_timeout_ms) * 1000;
    loop {
        let now = now_us();
        let want = slice.on_at(&ids, now as f64 / 1e6);
        while on < want {
            connect(&mut subs[on], on, &targets, &binds, &poll, now, &mut snap);
            on += 1;
            started = started.max(on);
        }
        while on > want {
            on -= 1;
            close(&mut subs[on], &clock, epoch_unix, now);
        }
        if let (Some(at), false) = (storm_at, storm_done) {
            if now >= at {
                storm_done = true;
                for (i, s) in subs.iter_mut().enumerate().take(on) {
                    if s.state != State::Idle && s.state != State::Failed {
                        close(s, &clock, epoch_unix, now);
                        connect(s, i, &targets, &binds, &poll, now, &mut snap);
                    }
                }
            }
        }
        if sessions.is_some() {
            for (i, s) in subs.iter_mut().enumerate().take(on) {
                if s.leave_at_us.is_some_and(|t| now >= t) {
                    close(s, &clock, epoch_unix, now);
                    connect(s, i, &targets, &binds, &poll, now, &mut snap);
                }
            }
        }
        let next_tick = (u64::from(second) + 1) * 1_000_000;
        let wait = next_tick.saturating_sub(now).min(20_000);
        poll.poll(&mut events, Some(Duration::from_micros(wait)))?;
        for ev in events.iter() {
            let now = now_us();
            let i = ev.token().0;
            let Some(s) = subs.get_mut(i) else { continue };
            if s.state == State::Connecting && ev.is_writable() {
                let req = &targets[s.target as usize].request;
                let Some(sock) = s.sock.as_mut() else {
                    continue;
                };
                match sock.write(req) {
                    Ok(k) if k == req.len() => s.state = State::Head,
                    Ok(_) => fail(s, FailReason::Io, &mut snap, &clock, epoch_unix, now, slice),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == io::ErrorKind::NotConnected => {}
                    Err(e) => fail(
                        s,
                        FailReason::from_io(&e),
                        &mut snap,
                        &clock,
                        epoch_unix,
                        now,
                        slice,
                    ),
                }
            }
            if !(ev.is_readable() || ev.is_read_closed()) {
                continue;
            }
            while let Some(sock) = s.sock.as_mut() {
                match sock.read(&mut buf) {
                    Ok(0) => {
                        let why = if s.state == State::Open {
                            FailReason::ClosedWhileStreaming
                        } else {
                            FailReason::ClosedBeforeHead
                        };
                        fail(s, why, &mut snap, &clock, epoch_unix, now, slice);
                        break;
                    }
                    Ok(k) => {
                        let at_run = clock.to_run_us(epoch_unix + now);
                        let mut data = &buf[..k];
                        let owned;
                        if s.state == State::Head {
                            s.head.extend_from_slice(data);
                            match throng_proto::http::parse_response_head(&s.head) {
                                Ok(Some((head, len))) => {
                                    if head.status != 200 {
                                        fail(
                                            s,
                                            FailReason::HttpStatus(head.status),
                                            &mut snap,
                                            &clock,
                                            epoch_unix,
                                            now,
                                            slice,
                                        );
                                        break;
                                    }
                                    owned = s.head.split_off(len);
                                    s.head = Vec::new();
                                    s.state = State::Open;
                                    data = &owned;
                                }
                                Ok(None) if s.head.len() < 16384 => data = &[],
                                _ => {
                                    fail(
                                        s,
                                        FailReason::BadHead,
                                        &mut snap,
                                        &clock,
                                        epoch_unix,
                                        now,
                                        slice,
                                    );
                                    break;
                                }
                            }
                        }
                        if !data.is_empty() {
                            snap.bytes += data.len() as u64;
                            feed(s, data, now, at_run, &mut snap, &mut seen, sessions);
                        }
                        if k < buf.len() {
                            // A short read emptied the socket: the next byte to arrive raises
                            // a new edge.
                            break;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        fail(
                            s,
                            FailReason::from_io(&e),
                            &mut snap,
                            &clock,
                            epoch_unix,
                            now,
                            slice,
                        );
                        break;
                    }
                }
            }
        }
        let now = now_us();
        if now < next_tick {
            continue;
        }
        // The second's tick: timeouts, reconnects, states.
        let (mut connecting, mut open, mut down) = (0, 0, 0);
        for (i, s) in subs.iter_mut().enumerate().take(on) {
            match s.state {
                State::Connecting | State::Head => {
                    if now.saturating_sub(s.start_us) > timeout_us {
                        fail(
                            s,
                            FailReason::Timeout,
                            &mut snap,
                            &clock,
                            epoch_unix,
                            now,
                            slice,
                        );
                        down += 1;
                    } else {
                        connecting += 1;
                    }
                }
                State::Open if s.ready_at.is_some() => open += 1,
                State::Open => connecting += 1,
                State::Failed => {
                    if slice.behaviour.reconnect_after.is_some() && now >= s.retry_at_us {
                        connect(s, i, &targets, &binds, &poll, now, &mut snap);
                        connecting += 1;
                    } else {
                        down += 1;
                    }
                }
                State::Idle => {}
            }
        }
        let last = now + 500_000 >= end_us;
        let stopping = stop.load(Ordering::Relaxed);
        let done = last || stopping;
        if done {
            let end_run = clock.to_run_us(epoch_unix + now);
            for s in subs.iter_mut() {
                close(s, &clock, epoch_unix, now);
            }
            snap.lost_units += missed(&subs, &seen, end_run, spec.max_latency_ms);
        }
        snap.want = on as u32;
        snap.started = started as u32;
        snap.connecting = connecting;
        snap.streaming = open;
        snap.stalled = 0;
        snap.starved = 0;
        snap.down = down;
        let cpu = if slice.thread_cpu {
            rusage::thread()
        } else {
            rusage::process()
        };
        snap.cpu_us = cpu.user_us + cpu.sys_us;
        let tick = GroupTick {
            group: slice.group,
            second,
            done,
            snap: snap.clone(),
        };
        snap.clear_hists();
        if !report(&tick) || done {
            return Ok(());
        }
        second += 1;
    }
}

/// The (subscriber, change) pairs missed: changes seen here, triggered while a subscriber was
/// ready, long enough before the end to have arrived, that it never got.
fn missed(subs: &[Sub], seen: &BTreeMap<u32, u64>, end_run: u64, max_latency_ms: f64) -> u64 {
    let grace = (max_latency_ms * 1000.0) as u64;
    let mut n = 0;
    for s in subs {
        for (&k, &t) in seen {
            if t + grace > end_run || s.got & (1 << k) != 0 {
                continue;
            }
            let ready = s
                .ready_spans
                .iter()
                .any(|&(from, until)| from <= t && t + grace <= until);
            n += u64::from(ready);
        }
    }
    n
}

#[allow(clippy::too_many_arguments)]
fn fail(
    s: &mut Sub,
    why: FailReason,
    snap: &mut Snapshot,
    clock: &RunClock,
    epoch_unix: u64,
    now: u64,
    slice: &Slice,
) {
    *snap.failures.entry(why.key()).or_insert(0) += 1;
    s.caught.fail(snap);
    close(s, clock, epoch_unix, now);
    s.state = State::Failed;
    if let Some(d) = slice.behaviour.reconnect_after {
        s.retry_at_us = now + (d.0 * 1e6) as u64;
    }
}

fn close(s: &mut Sub, clock: &RunClock, epoch_unix: u64, now: u64) {
    if let Some(from) = s.ready_at.take() {
        s.ready_spans
            .push((from, clock.to_run_us(epoch_unix + now)));
    }
    s.sock = None;
    s.head = Vec::new();
    s.leave_at_us = None;
    if s.state != State::Failed {
        s.state = State::Idle;
    }
}

fn connect(
    s: &mut Sub,
    i: usize,
    targets: &[Target],
    binds: &[Ipv4Addr],
    poll: &Poll,
    now: u64,
    snap: &mut Snapshot,
) {
    snap.connects += 1;
    let t = &targets[s.target as usize];
    let local = (t.bind && !binds.is_empty()).then(|| binds[s.bind as usize]);
    s.start_us = now;
    s.parser = Parser::new();
    s.head = Vec::new();
    match start_connect(t.addr, local) {
        Ok(std) => {
            let mut sock = TcpStream::from_std(std);
            match poll.registry().register(
                &mut sock,
                Token(i),
                Interest::READABLE | Interest::WRITABLE,
            ) {
                Ok(()) => {
                    s.sock = Some(sock);
                    s.state = State::Connecting;
                }
                Err(e) => {
                    *snap
                        .failures
                        .entry(FailReason::from_io(&e).key())
                        .or_insert(0) += 1;
                    s.caught.fail(snap);
                    s.state = State::Failed;
                }
            }
        }
        Err(e) => {
            *snap
                .failures
                .entry(FailReason::from_io(&e).key())
                .or_insert(0) += 1;
            s.caught.fail(snap);
            s.state = State::Failed;
        }
    }
}

/// Feeds body bytes to a subscriber's parser and records what its events mean (`now`: µs since
/// the engine's epoch; `at_run`: the same instant on the run's clock).
fn feed(
    s: &mut Sub,
    data: &[u8],
    now: u64,
    at_run: u64,
    snap: &mut Snapshot,
    seen: &mut BTreeMap<u32, u64>,
    sessions: Option<(u64, u64)>,
) {
    let Sub {
        parser,
        ready_at,
        got,
        start_us,
        id,
        leave_at_us,
        ..
    } = s;
    parser.push(data, |item| {
        let Item::Event(e) = item else { return };
        snap.units += 1;
        match e.event.as_str() {
            "mount" if ready_at.is_none() => {
                *ready_at = Some(at_run);
                snap.ttfb.record_us(now.saturating_sub(*start_us));
                if let Some((lo, hi)) = sessions {
                    *leave_at_us = Some(
                        now + crate::icy::engine::session_length_us(
                            lo,
                            hi,
                            now ^ (u64::from(*id) << 32),
                        ),
                    );
                }
            }
            "title" if e.data.contains(TITLE_PREFIX) => {
                // The bench's own titles need no JSON unescaping: read the value in place.
                let title = e
                    .data
                    .split_once("\"title\":\"")
                    .and_then(|(_, rest)| rest.split_once('"'))
                    .map(|(t, _)| t);
                if let Some((k, t0)) = title.and_then(parse_bench_title) {
                    if k < MAX_CHANGES && *got & (1 << k) == 0 {
                        *got |= 1 << k;
                        seen.entry(k).or_insert(t0);
                        snap.receipts += 1;
                        if let Some(lat) = at_run.checked_sub(t0) {
                            snap.event_latency.record_us(lat);
                        }
                    }
                }
            }
            _ => {}
        }
    });
}

/// The outcome of a run's events groups (`events` in `report.json`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct EventsSummary {
    /// Subscribers the stages asked for at most.
    pub subscribers: u32,
    /// Subscribers that got their snapshot (snapshots received).
    pub ready: u32,
    /// Subscribers connected in the last second the stages wanted any.
    pub connected_at_end: u32,
    /// Title changes made.
    pub changes: u32,
    /// (subscriber, change) receipts.
    pub received: u64,
    /// (ready subscriber, change) pairs not received.
    pub missed: u64,
    /// Delivery latency, median (ms).
    pub latency_p50_ms: Option<f64>,
    /// Delivery latency, 99th percentile (ms).
    pub latency_p99_ms: Option<f64>,
    /// Delivery latency, largest (ms).
    pub latency_max_ms: Option<f64>,
    /// Time from connect to snapshot, 99th percentile (ms).
    pub snapshot_p99_ms: Option<f64>,
    /// Server RSS before the subscribers connected (bytes).
    pub server_rss_before: Option<u64>,
    /// Server RSS at most during the run (bytes).
    pub server_rss_ready: Option<u64>,
    /// RSS growth of the sampled server per subscriber it held (bytes).
    pub server_rss_per_subscriber: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bench_titles_round_trip() {
        let t = bench_title(3, 1_700_000_000_123_456);
        assert_eq!(parse_bench_title(&t), Some((3, 1_700_000_000_123_456)));
        assert_eq!(parse_bench_title("Artist - Title"), None);
    }

    #[test]
    fn a_change_is_missed_only_by_who_was_ready_for_it() {
        let sub = |spans: Vec<(u64, u64)>, got: u64| Sub {
            id: 0,
            sock: None,
            state: State::Idle,
            target: 0,
            bind: 0,
            caught: Caught::default(),
            start_us: 0,
            ready_at: None,
            ready_spans: spans,
            got,
            head: Vec::new(),
            parser: Parser::new(),
            leave_at_us: None,
            retry_at_us: 0,
        };
        let seen = BTreeMap::from([(0, 10_000_000), (1, 20_000_000), (2, 29_500_000)]);
        let subs = vec![
            // Ready all along, got change 0 only: missed 1 (2 is too close to the end).
            sub(vec![(0, 30_000_000)], 0b001),
            // Ready from 15 s: change 0 was before it.
            sub(vec![(15_000_000, 30_000_000)], 0b010),
            // Gone at 12 s.
            sub(vec![(0, 12_000_000)], 0b001),
        ];
        assert_eq!(missed(&subs, &seen, 30_000_000, 1000.0), 1);
    }
}
