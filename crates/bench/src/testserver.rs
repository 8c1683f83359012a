//! A minimal fixed-rate streaming server, for calibrating the bench and for its tests.
//!
//! Single-threaded `mio` loop. Every listener (any `GET` path) gets a response head (`HTTP/1.0
//! 200 OK` or `ICY 200 OK`), an optional burst, then every `interval_ms` one write of
//! `bitrate × interval` bytes of valid 64 kbit/s-style MP3 frames (silent, header-only content),
//! with ICY metadata blocks interleaved when asked for. It can stop sending after a delay while
//! keeping connections open (a server that starves its listeners), or, after
//! `garbage_after_secs`, send the same number of random bytes instead of frames (the right
//! byte rate of garbage: a server that corrupts its listeners; ICY blocks stay well framed).
//! `PUT`/`SOURCE` requests are accepted (`100 Continue` when asked, then `200 OK`) and their body
//! bytes counted.
//!
//! With `hls`, it also serves one live HLS stream ([`HlsStream`]) over HTTP/1.1 keep-alive
//! (`Content-Length` bodies, requests answered in order): `GET /hls/live/index.m3u8` is a live
//! media playlist (RFC 8216 section 4.3.3) of the last `hls_window` segments, each
//! `hls_segment_secs` long (whole MP3 frames: 1152 samples at 44.1 kHz, cut on the frame at or
//! after each multiple of the segment length since the server started), with
//! `EXT-X-MEDIA-SEQUENCE`, `EXTINF` and `EXT-X-PROGRAM-DATE-TIME`; a segment is listed once the
//! server has run past its last sample. `GET /hls/live/<seq>.mp3` is that segment as packed
//! audio (RFC 8216 section 3.4: the ID3 tag of its 90 kHz timestamp, then its frames; random
//! bytes of the same length instead of the frames for a segment starting after
//! `garbage_after_secs`); a segment not listed yet is `404`. After `stop_after_secs` no segment
//! is added.

use clap::Args;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Settings of the test server.
#[derive(Debug, Clone, Args)]
pub struct TestServerConfig {
    /// Stream bitrate (kbit/s).
    #[arg(long, default_value_t = 64.0)]
    pub bitrate_kbps: f64,
    /// Time between two writes to a listener (ms).
    #[arg(long, default_value_t = 1000)]
    pub interval_ms: u64,
    /// Bytes sent right after the response head (bytes).
    #[arg(long, default_value_t = 0)]
    pub burst_bytes: usize,
    /// Stop sending audio this long after start (seconds), keeping connections open.
    #[arg(long)]
    pub stop_after_secs: Option<f64>,
    /// ICY metadata interval offered to listeners asking for it (bytes; 0 = none).
    #[arg(long, default_value_t = 16000)]
    pub metaint: usize,
    /// Answer `ICY 200 OK` instead of `HTTP/1.0 200 OK`.
    #[arg(long)]
    pub icy_status: bool,
    /// Send random bytes instead of MP3 frames from this long after start (seconds): the same
    /// byte rate, ICY blocks still framed; HLS segments starting after it carry garbage frames.
    #[arg(long)]
    pub garbage_after_secs: Option<f64>,
    /// Serve a live HLS stream too, over HTTP/1.1 keep-alive: `/hls/live/index.m3u8` (the
    /// last `--hls-window` segments, listed once complete) and `/hls/live/<seq>.mp3` (packed
    /// MP3: an ID3 timestamp tag, then the segment's frames).
    #[arg(long)]
    pub hls: bool,
    /// HLS segment length (seconds).
    #[arg(long, default_value_t = 2.0)]
    pub hls_segment_secs: f64,
    /// HLS segments listed in the playlist (segments).
    #[arg(long, default_value_t = 6)]
    pub hls_window: usize,
}

impl Default for TestServerConfig {
    fn default() -> TestServerConfig {
        TestServerConfig {
            bitrate_kbps: 64.0,
            interval_ms: 1000,
            burst_bytes: 0,
            stop_after_secs: None,
            metaint: 16000,
            icy_status: false,
            garbage_after_secs: None,
            hls: false,
            hls_segment_secs: 2.0,
            hls_window: 6,
        }
    }
}

/// Arguments of `throng bench test-server`.
#[derive(Debug, Args)]
pub struct TestServerArgs {
    /// Address to listen on (port 0 picks one; the bound address is printed on stdout).
    #[arg(long, default_value = "127.0.0.1:8000")]
    pub listen: SocketAddr,
    /// Server settings.
    #[command(flatten)]
    pub config: TestServerConfig,
}

/// Counters of a running test server.
#[derive(Debug, Default)]
pub struct TestServerStats {
    /// Listeners currently connected (listeners).
    pub listeners: AtomicU64,
    /// Listener connections accepted so far (connections).
    pub accepted: AtomicU64,
    /// Body bytes received from sources (bytes).
    pub source_bytes: AtomicU64,
    /// HLS requests answered (requests).
    pub hls_requests: AtomicU64,
}

/// A test server running on its own thread.
pub struct TestServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    stats: Arc<TestServerStats>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl TestServer {
    /// Binds `listen` and serves on a new thread.
    pub fn start(listen: SocketAddr, config: TestServerConfig) -> io::Result<TestServer> {
        let listener = bind(listen)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(TestServerStats::default());
        let (s2, st2) = (stop.clone(), stats.clone());
        let thread = std::thread::Builder::new()
            .name("bench-test-server".into())
            .spawn(move || serve(listener, config, &s2, &st2))?;
        Ok(TestServer {
            addr,
            stop,
            stats,
            thread: Some(thread),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Live counters.
    pub fn stats(&self) -> &TestServerStats {
        &self.stats
    }

    /// Stops the server and closes every connection.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        None,
    )?;
    sock.set_reuse_address(true)?;
    sock.bind(&addr.into())?;
    sock.listen(4096)?;
    sock.set_nonblocking(true)?;
    Ok(TcpListener::from_std(sock.into()))
}

/// Body of `throng bench test-server`.
pub fn test_server_command(args: TestServerArgs) -> anyhow::Result<()> {
    let listener = bind(args.listen)?;
    println!("listening on {}", listener.local_addr()?);
    io::stdout().flush()?;
    let stop = AtomicBool::new(false);
    serve(listener, args.config, &stop, &TestServerStats::default())?;
    Ok(())
}

/// A repeating run of MPEG-1 layer III frames (64 kbit/s, 44.1 kHz, mono, 208 bytes each).
pub fn mp3_pattern() -> Vec<u8> {
    let mut frame = vec![0u8; FRAME_LEN];
    frame[..4].copy_from_slice(&[0xFF, 0xFB, 0x50, 0xC4]);
    frame
}

/// Bytes of one frame of [`mp3_pattern`].
pub const FRAME_LEN: usize = 208;
/// Samples of one frame.
pub const FRAME_SAMPLES: u64 = 1152;
/// The frames' sample rate (Hz).
pub const SAMPLE_RATE: u64 = 44_100;

/// A splitmix64 step: the test server's garbage (deterministic, no dependency).
fn next_random(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Appends `n` random bytes drawn from `state`.
fn push_random(out: &mut Vec<u8>, n: usize, state: &mut u64) {
    let mut left = n;
    while left > 0 {
        let r = next_random(state).to_le_bytes();
        let k = left.min(8);
        out.extend_from_slice(&r[..k]);
        left -= k;
    }
}

/// The test server's live HLS stream (see the module comment), sans-IO: what it serves at a
/// given time since its start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HlsStream {
    /// Segment length (µs).
    pub segment_us: u64,
    /// Segments listed.
    pub window: usize,
    /// Wall clock at the server's start (ms since the Unix epoch): program date-times count
    /// from it.
    pub start_unix_ms: i64,
    /// Segments starting at or after this time since the server's start carry garbage frames
    /// (µs).
    pub garbage_after_us: Option<u64>,
    /// No segment ends after this time since the server's start (µs).
    pub stop_after_us: Option<u64>,
    /// The stream started this long before the server (µs): its window is full from the
    /// first request, as a live stream's is.
    pub lead_us: u64,
}

impl HlsStream {
    /// The stream of `cfg`, started at `start_unix_ms`.
    pub fn new(cfg: &TestServerConfig, start_unix_ms: i64) -> HlsStream {
        let us = |s: f64| (s.max(0.0) * 1e6) as u64;
        HlsStream {
            segment_us: us(cfg.hls_segment_secs).max(100_000),
            window: cfg.hls_window.max(1),
            start_unix_ms,
            garbage_after_us: cfg.garbage_after_secs.map(us),
            stop_after_us: cfg.stop_after_secs.map(us),
            lead_us: us(cfg.hls_segment_secs).max(100_000) * cfg.hls_window.max(1) as u64,
        }
    }

    /// The first frame of segment `k` (frames since the start): the frame at or after
    /// `k × segment`.
    pub fn first_frame(&self, k: u64) -> u64 {
        let num = u128::from(k) * u128::from(self.segment_us) * u128::from(SAMPLE_RATE);
        let den = u128::from(FRAME_SAMPLES) * 1_000_000;
        num.div_ceil(den) as u64
    }

    /// Time of frame `f` since the start (µs).
    fn frame_us(f: u64) -> u64 {
        (u128::from(f) * u128::from(FRAME_SAMPLES) * 1_000_000 / u128::from(SAMPLE_RATE)) as u64
    }

    /// Segments complete `elapsed_us` after the server's start (segment `k` is complete once
    /// its last frame has played; the stream started [`HlsStream::lead_us`] earlier).
    pub fn available(&self, elapsed_us: u64) -> u64 {
        let t = self.stop_after_us.map_or(elapsed_us, |s| s.min(elapsed_us)) + self.lead_us;
        let frames =
            u128::from(t) * u128::from(SAMPLE_RATE) / (u128::from(FRAME_SAMPLES) * 1_000_000);
        // The largest n with first_frame(n) <= frames.
        let n = frames * u128::from(FRAME_SAMPLES) * 1_000_000
            / (u128::from(self.segment_us) * u128::from(SAMPLE_RATE));
        n as u64
    }

    /// The target duration: the segment length rounded up (s; RFC 8216 section 4.3.3.1).
    pub fn target_secs(&self) -> u64 {
        self.segment_us.div_ceil(1_000_000).max(1)
    }

    /// The media playlist `elapsed_us` after the start.
    pub fn playlist(&self, elapsed_us: u64) -> String {
        use std::fmt::Write as _;
        let avail = self.available(elapsed_us);
        let first = avail.saturating_sub(self.window as u64);
        let mut out = format!(
            "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:{}\n#EXT-X-MEDIA-SEQUENCE:{first}\n",
            self.target_secs()
        );
        for k in first..avail {
            let (a, b) = (self.first_frame(k), self.first_frame(k + 1));
            let pdt = self.start_unix_ms + (Self::frame_us(a) / 1000) as i64
                - (self.lead_us / 1000) as i64;
            let dur = (Self::frame_us(b) - Self::frame_us(a)) as f64 / 1e6;
            let _ = write!(
                out,
                "#EXT-X-PROGRAM-DATE-TIME:{}\n#EXTINF:{dur:.3},\n{k}.mp3\n",
                throng_proto::hls::playlist::iso8601_ms(pdt)
            );
        }
        out
    }

    /// Segment `k` `elapsed_us` after the start (`None` when not complete yet): its ID3 tag
    /// (the 90 kHz timestamp of its first sample), then its frames, or as many random bytes
    /// drawn from `rng` when it starts after `garbage_after_us`.
    pub fn segment(&self, k: u64, elapsed_us: u64, rng: &mut u64) -> Option<Vec<u8>> {
        if k >= self.available(elapsed_us) {
            return None;
        }
        let (a, b) = (self.first_frame(k), self.first_frame(k + 1));
        let pts = throng_proto::hls::id3::pts_90k(0, a * FRAME_SAMPLES, SAMPLE_RATE as u32);
        let mut out = throng_proto::hls::id3::segment_tag(pts, None);
        let n = (b - a) as usize * FRAME_LEN;
        if self
            .garbage_after_us
            .is_some_and(|g| Self::frame_us(a) >= g + self.lead_us)
        {
            push_random(&mut out, n, rng);
        } else {
            out.extend_from_slice(&mp3_pattern().repeat((b - a) as usize));
        }
        Some(out)
    }

    /// The answer to `GET path` `elapsed_us` after the start: status, content type, body.
    pub fn answer(
        &self,
        path: &str,
        elapsed_us: u64,
        rng: &mut u64,
    ) -> (u16, &'static str, Vec<u8>) {
        let path = path.split(['?', '#']).next().unwrap_or(path);
        if path == "/hls/live/index.m3u8" {
            return (
                200,
                "application/vnd.apple.mpegurl",
                self.playlist(elapsed_us).into_bytes(),
            );
        }
        let seg = path
            .strip_prefix("/hls/live/")
            .and_then(|f| f.strip_suffix(".mp3"))
            .and_then(|n| n.parse::<u64>().ok())
            .and_then(|k| self.segment(k, elapsed_us, rng));
        match seg {
            Some(body) => (200, "audio/mpeg", body),
            None => (404, "text/plain", b"not found\n".to_vec()),
        }
    }
}

enum ConnState {
    Head(Vec<u8>),
    Listener {
        icy: bool,
        pos: u64,
    },
    Source,
    /// HLS over keep-alive HTTP/1.1: the bytes of requests not answered yet.
    Hls(Vec<u8>),
}

struct Conn {
    sock: TcpStream,
    state: ConnState,
    pending: Vec<u8>,
    /// Close once `pending` is written (the client asked for `Connection: close`).
    close_after: bool,
}

const LISTEN: Token = Token(usize::MAX);

/// Writes what `c` has pending; `false` when the connection must close now (it failed, or
/// all is written and the client asked to close).
fn flush(c: &mut Conn) -> bool {
    while !c.pending.is_empty() {
        match c.sock.write(&c.pending) {
            Ok(0) => return false,
            Ok(n) => {
                c.pending.drain(..n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    !c.close_after
}

/// Answers every whole request in an HLS connection's buffer; `false` when it must close.
fn answer_hls(
    c: &mut Conn,
    hls: &HlsStream,
    elapsed_us: u64,
    rng: &mut u64,
    stats: &TestServerStats,
) -> bool {
    loop {
        let ConnState::Hls(buf) = &mut c.state else {
            return true;
        };
        let Some(end) = find_head_end(buf) else {
            return buf.len() <= 16384;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        buf.drain(..end);
        let mut words = head.split_whitespace();
        let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or("/"));
        let (status, ctype, body) = if method == "GET" {
            hls.answer(path, elapsed_us, rng)
        } else {
            (405, "text/plain", b"method not allowed\n".to_vec())
        };
        stats.hls_requests.fetch_add(1, Ordering::Relaxed);
        let close = head.to_ascii_lowercase().contains("connection: close");
        let reason = match status {
            200 => "OK",
            404 => "Not Found",
            _ => "Method Not Allowed",
        };
        c.pending.extend_from_slice(
            format!(
                "HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\
                 Cache-Control: no-cache\r\nServer: throng-bench-testserver/{}\r\n{}\r\n",
                body.len(),
                env!("CARGO_PKG_VERSION"),
                if close { "Connection: close\r\n" } else { "" }
            )
            .as_bytes(),
        );
        c.pending.extend_from_slice(&body);
        if close {
            // Closed once the answer is out.
            c.close_after = true;
            return flush(c);
        }
        if !flush(c) {
            return false;
        }
    }
}

fn serve(
    listener: TcpListener,
    cfg: TestServerConfig,
    stop: &AtomicBool,
    stats: &TestServerStats,
) -> io::Result<()> {
    let mut listener = listener;
    let mut poll = Poll::new()?;
    poll.registry()
        .register(&mut listener, LISTEN, Interest::READABLE)?;
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut events = Events::with_capacity(1024);
    let start = Instant::now();
    let start_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let hls = HlsStream::new(&cfg, start_unix_ms);
    let mut rng = start_unix_ms as u64;
    let interval = Duration::from_millis(cfg.interval_ms.max(1));
    let per_write = (cfg.bitrate_kbps * 1000.0 / 8.0 * interval.as_secs_f64()).round() as usize;
    let pattern = mp3_pattern();
    let first_meta = throng_proto::icy::metadata_block("throng bench test server", None);
    let mut next_write = start + interval;
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::with_capacity(per_write + 4096);
    let garbage_at = |now: Instant| {
        cfg.garbage_after_secs
            .is_some_and(|g| now.duration_since(start).as_secs_f64() >= g)
    };
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        let timeout = next_write
            .saturating_duration_since(now)
            .min(Duration::from_millis(100));
        match poll.poll(&mut events, Some(timeout)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        for ev in events.iter() {
            if ev.token() == LISTEN {
                loop {
                    match listener.accept() {
                        Ok((mut sock, _)) => {
                            let i = free.pop().unwrap_or_else(|| {
                                conns.push(None);
                                conns.len() - 1
                            });
                            if poll
                                .registry()
                                .register(
                                    &mut sock,
                                    Token(i),
                                    Interest::READABLE | Interest::WRITABLE,
                                )
                                .is_ok()
                            {
                                let _ = sock.set_nodelay(true);
                                conns[i] = Some(Conn {
                                    sock,
                                    state: ConnState::Head(Vec::new()),
                                    pending: Vec::new(),
                                    close_after: false,
                                });
                            } else {
                                free.push(i);
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(_) => break,
                    }
                }
                continue;
            }
            let i = ev.token().0;
            let mut close = false;
            let elapsed_us = start.elapsed().as_micros() as u64;
            if let Some(c) = conns.get_mut(i).and_then(|c| c.as_mut()) {
                if ev.is_writable() && matches!(c.state, ConnState::Hls(_)) && !flush(c) {
                    close = true;
                }
                while !close {
                    match c.sock.read(&mut buf) {
                        Ok(0) => {
                            close = true;
                            break;
                        }
                        Ok(n) => match &mut c.state {
                            ConnState::Head(h) => {
                                h.extend_from_slice(&buf[..n]);
                                if let Some(end) = find_head_end(h) {
                                    let head = String::from_utf8_lossy(&h[..end]).to_string();
                                    let path = head.split_whitespace().nth(1).unwrap_or("");
                                    if cfg.hls && path.starts_with("/hls/") {
                                        let all = std::mem::take(h);
                                        c.state = ConnState::Hls(all);
                                        close = !answer_hls(c, &hls, elapsed_us, &mut rng, stats);
                                    } else {
                                        let garbage =
                                            garbage_at(Instant::now()).then_some(&mut rng);
                                        start_conn(
                                            c,
                                            &head,
                                            &cfg,
                                            &pattern,
                                            &first_meta,
                                            stats,
                                            garbage,
                                        );
                                    }
                                } else if h.len() > 16384 {
                                    close = true;
                                }
                            }
                            ConnState::Hls(b) => {
                                b.extend_from_slice(&buf[..n]);
                                close = !answer_hls(c, &hls, elapsed_us, &mut rng, stats);
                            }
                            ConnState::Source => {
                                stats.source_bytes.fetch_add(n as u64, Ordering::Relaxed);
                            }
                            ConnState::Listener { .. } => {}
                        },
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(_) => {
                            close = true;
                            break;
                        }
                    }
                }
            }
            if close {
                if let Some(c) = conns[i].take() {
                    if matches!(c.state, ConnState::Listener { .. }) {
                        stats.listeners.fetch_sub(1, Ordering::Relaxed);
                    }
                    free.push(i);
                }
            }
        }
        let now = Instant::now();
        if now >= next_write {
            next_write += interval;
            if next_write < now {
                next_write = now + interval;
            }
            let sending = cfg
                .stop_after_secs
                .is_none_or(|s| now.duration_since(start).as_secs_f64() < s);
            let garbage = garbage_at(now);
            for c in conns.iter_mut().flatten() {
                let ConnState::Listener { icy, pos } = &mut c.state else {
                    continue;
                };
                if !c.pending.is_empty() {
                    match c.sock.write(&c.pending) {
                        Ok(n) => {
                            c.pending.drain(..n);
                        }
                        Err(_) => continue,
                    }
                    if !c.pending.is_empty() {
                        continue;
                    }
                }
                if !sending {
                    continue;
                }
                out.clear();
                let meta = if *icy && cfg.metaint > 0 {
                    Some(cfg.metaint)
                } else {
                    None
                };
                let rng = garbage.then_some(&mut rng);
                append_audio(&mut out, &pattern, pos, per_write, meta, &first_meta, rng);
                match c.sock.write(&out) {
                    Ok(n) if n < out.len() => c.pending.extend_from_slice(&out[n..]),
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        c.pending.extend_from_slice(&out)
                    }
                    Err(_) => {}
                }
            }
        }
    }
    Ok(())
}

fn find_head_end(h: &[u8]) -> Option<usize> {
    h.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

fn start_conn(
    c: &mut Conn,
    head: &str,
    cfg: &TestServerConfig,
    pattern: &[u8],
    first_meta: &[u8],
    stats: &TestServerStats,
    garbage: Option<&mut u64>,
) {
    let lower = head.to_ascii_lowercase();
    let method = head.split(' ').next().unwrap_or("");
    if method == "PUT" || method == "SOURCE" {
        if lower.contains("expect: 100-continue") {
            let _ = c.sock.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        let _ = c.sock.write_all(b"HTTP/1.0 200 OK\r\n\r\n");
        c.state = ConnState::Source;
        return;
    }
    let icy = lower.contains("icy-metadata: 1") && cfg.metaint > 0;
    let mut out = Vec::with_capacity(256 + cfg.burst_bytes);
    out.extend_from_slice(if cfg.icy_status {
        b"ICY 200 OK\r\n".as_slice()
    } else {
        b"HTTP/1.0 200 OK\r\n".as_slice()
    });
    out.extend_from_slice(b"Content-Type: audio/mpeg\r\nCache-Control: no-cache\r\n");
    out.extend_from_slice(
        format!(
            "Server: throng-bench-testserver/{}\r\n",
            env!("CARGO_PKG_VERSION")
        )
        .as_bytes(),
    );
    out.extend_from_slice(format!("icy-br:{}\r\n", cfg.bitrate_kbps).as_bytes());
    if icy {
        out.extend_from_slice(format!("icy-metaint:{}\r\n", cfg.metaint).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    let mut pos = 0u64;
    let meta = if icy { Some(cfg.metaint) } else { None };
    append_audio(
        &mut out,
        pattern,
        &mut pos,
        cfg.burst_bytes,
        meta,
        first_meta,
        garbage,
    );
    match c.sock.write(&out) {
        Ok(n) if n < out.len() => c.pending.extend_from_slice(&out[n..]),
        Ok(_) => {}
        Err(_) => c.pending.extend_from_slice(&out),
    }
    c.state = ConnState::Listener { icy, pos };
    stats.listeners.fetch_add(1, Ordering::Relaxed);
    stats.accepted.fetch_add(1, Ordering::Relaxed);
}

/// Appends `n` audio bytes of the repeating `pattern` from stream position `pos` (audio bytes
/// sent so far), inserting an ICY block after every `metaint` audio bytes when given (the first
/// block carries a title, later ones are empty). With `garbage`, the audio bytes are random
/// ones drawn from it instead (the blocks stay).
fn append_audio(
    out: &mut Vec<u8>,
    pattern: &[u8],
    pos: &mut u64,
    n: usize,
    metaint: Option<usize>,
    first_meta: &[u8],
    mut garbage: Option<&mut u64>,
) {
    let mut left = n;
    while left > 0 {
        let off = (*pos % pattern.len() as u64) as usize;
        let mut take = (pattern.len() - off).min(left);
        if let Some(m) = metaint {
            let to_meta = m - (*pos % m as u64) as usize;
            take = take.min(to_meta);
        }
        match garbage.as_deref_mut() {
            Some(rng) => push_random(out, take, rng),
            None => out.extend_from_slice(&pattern[off..off + take]),
        }
        *pos += take as u64;
        left -= take;
        if let Some(m) = metaint {
            if (*pos).is_multiple_of(m as u64) {
                if *pos == m as u64 {
                    out.extend_from_slice(first_meta);
                } else {
                    out.push(0);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn icy_interleaving_is_well_framed() {
        let pattern = mp3_pattern();
        let meta = throng_proto::icy::metadata_block("t", None);
        let mut out = Vec::new();
        let mut pos = 0;
        for _ in 0..7 {
            append_audio(&mut out, &pattern, &mut pos, 3000, Some(1000), &meta, None);
        }
        let mut d = throng_proto::icy::IcyDemuxer::new(1000);
        let (mut audio, mut blocks) = (0, 0);
        d.feed(&out, |p| match p {
            throng_proto::icy::IcyPiece::Audio(a) => audio += a.len(),
            throng_proto::icy::IcyPiece::Metadata(_) => blocks += 1,
        })
        .unwrap();
        assert_eq!((audio, blocks), (21_000, 21));
    }

    #[test]
    fn garbage_keeps_the_byte_rate_and_the_blocks() {
        let pattern = mp3_pattern();
        let meta = throng_proto::icy::metadata_block("t", None);
        let (mut out, mut pos, mut rng) = (Vec::new(), 0, 5u64);
        append_audio(
            &mut out,
            &pattern,
            &mut pos,
            3000,
            Some(1000),
            &meta,
            Some(&mut rng),
        );
        let mut d = throng_proto::icy::IcyDemuxer::new(1000);
        let mut audio = Vec::new();
        d.feed(&out, |p| {
            if let throng_proto::icy::IcyPiece::Audio(a) = p {
                audio.extend_from_slice(a)
            }
        })
        .unwrap();
        assert_eq!(audio.len(), 3000);
        assert!(!audio.windows(4).any(|w| w == [0xFF, 0xFB, 0x50, 0xC4]));
    }

    fn stream() -> HlsStream {
        let mut s = HlsStream::new(
            &TestServerConfig {
                hls: true,
                hls_window: 3,
                garbage_after_secs: Some(6.0),
                ..TestServerConfig::default()
            },
            1_790_000_000_000,
        );
        assert_eq!(s.lead_us, 6_000_000, "a full window at the start");
        s.lead_us = 0;
        s
    }

    #[test]
    fn hls_segments_are_whole_frames_listed_once_complete() {
        let s = stream();
        // 2 s segments of 76.56 frames: cut at frame 0, 77, 154, 230, …
        assert_eq!(
            (0..5).map(|k| s.first_frame(k)).collect::<Vec<_>>(),
            [0, 77, 154, 230, 307]
        );
        assert_eq!(s.available(2_010_000), 0, "77 frames last 2.011 s");
        assert_eq!(s.available(2_012_000), 1);
        assert_eq!(s.available(9_000_000), 4);
        let text = s.playlist(9_000_000);
        assert!(
            text.contains("#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:1\n"),
            "{text}"
        );
        assert!(text.contains("#EXTINF:2.011,\n1.mp3\n"), "{text}");
        assert!(
            text.contains("#EXT-X-PROGRAM-DATE-TIME:2026-09-21T"),
            "{text}"
        );
        assert_eq!(text.matches("#EXTINF").count(), 3);
        let mut rng = 1;
        let seg = s.segment(1, 9_000_000, &mut rng).unwrap();
        let tag = throng_proto::hls::id3::parse_tag(&seg).unwrap();
        assert_eq!(tag.pts_90k, Some(77 * 1152 * 90_000 / 44_100));
        assert_eq!(seg.len() - tag.len, 77 * FRAME_LEN);
        assert_eq!(&seg[tag.len..tag.len + 4], &[0xFF, 0xFB, 0x50, 0xC4]);
        // From 6 s: garbage frames, the tag kept.
        let bad = s.segment(3, 9_000_000, &mut rng).unwrap();
        let tag = throng_proto::hls::id3::parse_tag(&bad).unwrap();
        assert_eq!(bad.len() - tag.len, 77 * FRAME_LEN);
        assert_ne!(&bad[tag.len..tag.len + 4], &[0xFF, 0xFB, 0x50, 0xC4]);
        assert!(
            s.segment(4, 9_000_000, &mut rng).is_none(),
            "not complete yet"
        );
        assert_eq!(s.answer("/hls/live/9.mp3", 9_000_000, &mut rng).0, 404);
        assert_eq!(
            s.answer("/hls/live/index.m3u8?_HLS_msn=3", 9_000_000, &mut rng)
                .0,
            200
        );
        assert_eq!(s.answer("/x", 9_000_000, &mut rng).0, 404);
    }
}
