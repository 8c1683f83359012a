//! The event-stream engine of `throng bench run --events`: one `mio` loop holding this worker's
//! share of SSE subscribers (`GET /api/v1/events`), connected at the ramp rate from the bind
//! range's source addresses as listeners are. Each subscriber is *ready* once it has its
//! response head and a `mount` event (the snapshot). Title changes made by the run carry their
//! trigger time ([`bench_title`]); a subscriber receiving one records its delivery latency once
//! per change. Every [`TICK`] the engine reports what is new ([`EventsTick`]).

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use serde::{Deserialize, Serialize};
use throng_proto::sse::{Item, Parser};

use crate::net::connect::{is_loopback_v4, parse_bind_range, start_connect};
use crate::net::url::HttpUrl;

/// How often an engine reports.
pub const TICK: Duration = Duration::from_millis(250);

/// The prefix of the titles a run sets; the rest is `<change> <trigger time, µs since epoch>`.
pub const TITLE_PREFIX: &str = "throng-bench ";

/// The title of change number `k` triggered at `unix_us`.
pub fn bench_title(k: u32, unix_us: u64) -> String {
    format!("{TITLE_PREFIX}{k} {unix_us}")
}

/// The change number and trigger time of a title set by [`bench_title`].
pub fn parse_bench_title(title: &str) -> Option<(u32, u64)> {
    let rest = title.strip_prefix(TITLE_PREFIX)?;
    let (k, t) = rest.split_once(' ')?;
    Some((k.parse().ok()?, t.parse().ok()?))
}

/// Microseconds since the Unix epoch now.
pub fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// What one events engine does.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EventsSpec {
    /// Worker index (0-based).
    pub worker: u32,
    /// Number of workers.
    pub workers: u32,
    /// Event-stream URLs; subscribers are spread round-robin over them.
    pub urls: Vec<String>,
    /// Subscribers in the whole run.
    pub total: u32,
    /// New subscribers per second, whole run.
    pub ramp: f64,
    /// Source address range for loopback targets (`FIRST-LAST` or `none`).
    pub bind_range: String,
    /// Connect plus response-head timeout (s).
    pub connect_timeout_s: f64,
}

impl EventsSpec {
    /// This worker's subscribers: global ids `worker`, `worker + workers`, ...
    pub fn count(&self) -> u32 {
        let w = self.workers.max(1);
        if self.worker >= self.total {
            0
        } else {
            (self.total - self.worker).div_ceil(w)
        }
    }
}

/// What an engine reports every [`TICK`]: counts are the current totals, lists are what is new.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct EventsTick {
    /// Worker index.
    pub worker: u32,
    /// Subscribers with an open connection and a `200` head.
    pub connected: u32,
    /// Subscribers that have their snapshot.
    pub ready: u32,
    /// Subscribers whose connection failed (total).
    pub failed: u32,
    /// Failures by reason (totals).
    pub failures: BTreeMap<String, u64>,
    /// Time from connect to snapshot of the subscribers ready since the last tick (µs).
    pub ready_us: Vec<u64>,
    /// Delivery latencies of title changes received since the last tick (µs).
    pub latencies_us: Vec<u64>,
    /// (subscriber, change) receipts so far (total).
    pub received: u64,
    /// The last tick of the engine.
    pub done: bool,
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
    sock: Option<TcpStream>,
    state: State,
    target: u16,
    start_us: u64,
    ready: bool,
    got: u64,
    head: Vec<u8>,
    parser: Parser,
}

/// Runs the engine until `stop` is set, calling `report` every [`TICK`] and once at the end
/// (with `done`).
///
/// Errors: a bad URL or bind range, or no poller.
pub fn run(
    spec: &EventsSpec,
    stop: &AtomicBool,
    mut report: impl FnMut(EventsTick),
) -> Result<(), EventsError> {
    let binds = parse_bind_range(&spec.bind_range)?;
    let mut targets = Vec::new();
    for u in &spec.urls {
        let url = HttpUrl::parse(u)?;
        let req = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: throng-bench/{}\r\nAccept: text/event-stream\r\n\r\n",
            url.path,
            url.host_header(),
            env!("CARGO_PKG_VERSION")
        );
        targets.push((url.addr, req.into_bytes(), is_loopback_v4(&url.addr)));
    }
    let mut poll = Poll::new()?;
    let n = spec.count();
    let w = spec.workers.max(1);
    let mut subs: Vec<Sub> = (0..n)
        .map(|k| Sub {
            sock: None,
            state: State::Idle,
            target: ((spec.worker + k * w) as usize % targets.len().max(1)) as u16,
            start_us: 0,
            ready: false,
            got: 0,
            head: Vec::new(),
            parser: Parser::new(),
        })
        .collect();
    let epoch = Instant::now();
    let mut tick = EventsTick {
        worker: spec.worker,
        ..Default::default()
    };
    let mut events = Events::with_capacity(1024);
    let mut next_start = 0usize;
    let mut last_tick = Instant::now();
    let mut buf = vec![0u8; 65536];
    let timeout_us = (spec.connect_timeout_s * 1e6) as u64;
    let fail = |tick: &mut EventsTick, s: &mut Sub, why: &str| {
        s.sock = None;
        s.state = State::Failed;
        tick.failed += 1;
        *tick.failures.entry(why.to_owned()).or_default() += 1;
    };
    loop {
        // Start the subscribers due by the ramp (global id / ramp seconds after the start).
        let elapsed = epoch.elapsed().as_secs_f64();
        while next_start < subs.len() {
            let id = spec.worker + next_start as u32 * w;
            if id as f64 / spec.ramp > elapsed {
                break;
            }
            let s = &mut subs[next_start];
            let (addr, _, bind) = &targets[s.target as usize];
            let local: Option<Ipv4Addr> =
                (*bind && !binds.is_empty()).then(|| binds[(id / w) as usize % binds.len()]);
            s.start_us = unix_us();
            match start_connect(*addr, local) {
                Ok(std) => {
                    let mut sock = TcpStream::from_std(std);
                    if poll
                        .registry()
                        .register(
                            &mut sock,
                            Token(next_start),
                            Interest::READABLE | Interest::WRITABLE,
                        )
                        .is_ok()
                    {
                        s.sock = Some(sock);
                        s.state = State::Connecting;
                    } else {
                        fail(&mut tick, s, "register");
                    }
                }
                Err(e) => fail(&mut tick, s, &format!("connect: {}", e.kind())),
            }
            next_start += 1;
        }
        poll.poll(&mut events, Some(Duration::from_millis(20)))?;
        for ev in events.iter() {
            let now_us = unix_us();
            let i = ev.token().0;
            let Some(s) = subs.get_mut(i) else { continue };
            if s.state == State::Connecting && ev.is_writable() {
                let req = &targets[s.target as usize].1;
                let sock = s.sock.as_mut().expect("a connecting socket");
                match sock.write(req) {
                    Ok(k) if k == req.len() => s.state = State::Head,
                    Ok(_) => fail(&mut tick, s, "request not sent whole"),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == io::ErrorKind::NotConnected => {}
                    Err(e) => fail(&mut tick, s, &format!("connect: {}", e.kind())),
                }
            }
            if !(ev.is_readable() || ev.is_read_closed()) {
                continue;
            }
            while let Some(sock) = s.sock.as_mut() {
                match sock.read(&mut buf) {
                    Ok(0) => {
                        if s.state == State::Open {
                            tick.connected -= 1;
                        }
                        fail(&mut tick, s, "closed by server");
                        break;
                    }
                    Ok(k) => {
                        let mut data = &buf[..k];
                        if s.state == State::Head {
                            s.head.extend_from_slice(data);
                            match throng_proto::http::parse_response_head(&s.head) {
                                Ok(Some((head, len))) => {
                                    if head.status != 200 {
                                        fail(&mut tick, s, &format!("http-{}", head.status));
                                        break;
                                    }
                                    let rest = s.head.split_off(len);
                                    s.head = Vec::new();
                                    s.state = State::Open;
                                    tick.connected += 1;
                                    feed(s, &rest, now_us, &mut tick);
                                }
                                Ok(None) if s.head.len() < 16384 => {}
                                _ => {
                                    fail(&mut tick, s, "bad head");
                                    break;
                                }
                            }
                            data = &[];
                        }
                        if !data.is_empty() {
                            feed(s, data, now_us, &mut tick);
                        }
                        if k < buf.len() {
                            // A short read emptied the socket: the next byte to arrive raises
                            // a new edge, so no read to `WouldBlock` (one syscall less per
                            // event, the bench's main cost).
                            break;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        if s.state == State::Open {
                            tick.connected -= 1;
                        }
                        fail(&mut tick, s, &format!("read: {}", e.kind()));
                        break;
                    }
                }
            }
        }
        let done = stop.load(Ordering::Relaxed);
        if done || last_tick.elapsed() >= TICK {
            // Connections without a head after the connect timeout fail.
            let now_us = unix_us();
            for s in subs.iter_mut() {
                if matches!(s.state, State::Connecting | State::Head)
                    && now_us.saturating_sub(s.start_us) > timeout_us
                {
                    fail(&mut tick, s, "timeout");
                }
            }
            last_tick = Instant::now();
            tick.done = done;
            report(tick.clone());
            tick.ready_us.clear();
            tick.latencies_us.clear();
            if done {
                return Ok(());
            }
        }
    }
}

/// Feeds body bytes to a subscriber's parser and records what its events mean.
fn feed(s: &mut Sub, data: &[u8], now_us: u64, tick: &mut EventsTick) {
    let Sub {
        parser,
        ready,
        got,
        start_us,
        ..
    } = s;
    parser.push(data, |item| {
        let Item::Event(e) = item else { return };
        match e.event.as_str() {
            "mount" if !*ready => {
                *ready = true;
                tick.ready += 1;
                tick.ready_us.push(now_us.saturating_sub(*start_us));
            }
            "title" if e.data.contains(TITLE_PREFIX) => {
                // The bench's own titles need no JSON unescaping: read the value in place.
                let title = e
                    .data
                    .split_once("\"title\":\"")
                    .and_then(|(_, rest)| rest.split_once('"'))
                    .map(|(t, _)| t);
                if let Some((k, t0)) = title.and_then(parse_bench_title) {
                    if k < 64 && *got & (1 << k) == 0 {
                        *got |= 1 << k;
                        tick.received += 1;
                        tick.latencies_us.push(now_us.saturating_sub(t0));
                    }
                }
            }
            _ => {}
        }
    });
}

/// The outcome of an events run (`events` in `report.json`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct EventsSummary {
    /// Subscribers asked for.
    pub subscribers: u32,
    /// Subscribers that got their snapshot.
    pub ready: u32,
    /// Subscribers still connected at the end.
    pub connected_at_end: u32,
    /// Title changes made.
    pub changes: u32,
    /// (subscriber, change) pairs received.
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
    /// Server RSS once every subscriber was ready (bytes).
    pub server_rss_ready: Option<u64>,
    /// RSS growth of the sampled server (the first URL's) per subscriber it holds (bytes).
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
    fn shares_cover_every_subscriber_once() {
        let spec = |worker| EventsSpec {
            worker,
            workers: 3,
            urls: vec![],
            total: 10,
            ramp: 1.0,
            bind_range: "none".into(),
            connect_timeout_s: 1.0,
        };
        assert_eq!((0..3).map(|w| spec(w).count()).sum::<u32>(), 10);
    }
}
