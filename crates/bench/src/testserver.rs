//! A minimal fixed-rate streaming server, for calibrating the bench and for its tests.
//!
//! Single-threaded `mio` loop. Every listener (any `GET` path) gets a response head (`HTTP/1.0
//! 200 OK` or `ICY 200 OK`), an optional burst, then every `interval_ms` one write of
//! `bitrate × interval` bytes of valid 64 kbit/s-style MP3 frames (silent, header-only content),
//! with ICY metadata blocks interleaved when asked for. It can stop sending after a delay while
//! keeping connections open (a server that starves its listeners). `PUT`/`SOURCE` requests are
//! accepted (`100 Continue` when asked, then `200 OK`) and their body bytes counted.

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
    let mut frame = vec![0u8; 208];
    frame[..4].copy_from_slice(&[0xFF, 0xFB, 0x50, 0xC4]);
    frame
}

enum ConnState {
    Head(Vec<u8>),
    Listener { icy: bool, pos: u64 },
    Source,
}

struct Conn {
    sock: TcpStream,
    state: ConnState,
    pending: Vec<u8>,
}

const LISTEN: Token = Token(usize::MAX);

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
    let interval = Duration::from_millis(cfg.interval_ms.max(1));
    let per_write = (cfg.bitrate_kbps * 1000.0 / 8.0 * interval.as_secs_f64()).round() as usize;
    let pattern = mp3_pattern();
    let first_meta = throng_proto::icy::metadata_block("throng bench test server", None);
    let mut next_write = start + interval;
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::with_capacity(per_write + 4096);
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
                                .register(&mut sock, Token(i), Interest::READABLE)
                                .is_ok()
                            {
                                let _ = sock.set_nodelay(true);
                                conns[i] = Some(Conn {
                                    sock,
                                    state: ConnState::Head(Vec::new()),
                                    pending: Vec::new(),
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
            if let Some(c) = conns.get_mut(i).and_then(|c| c.as_mut()) {
                loop {
                    match c.sock.read(&mut buf) {
                        Ok(0) => {
                            close = true;
                            break;
                        }
                        Ok(n) => {
                            if let ConnState::Head(h) = &mut c.state {
                                h.extend_from_slice(&buf[..n]);
                                if let Some(end) = find_head_end(h) {
                                    let head = String::from_utf8_lossy(&h[..end]).to_string();
                                    start_conn(c, &head, &cfg, &pattern, &first_meta, stats);
                                } else if h.len() > 16384 {
                                    close = true;
                                    break;
                                }
                            } else if let ConnState::Source = c.state {
                                stats.source_bytes.fetch_add(n as u64, Ordering::Relaxed);
                            }
                        }
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
                append_audio(&mut out, &pattern, pos, per_write, meta, &first_meta);
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
/// block carries a title, later ones are empty).
fn append_audio(
    out: &mut Vec<u8>,
    pattern: &[u8],
    pos: &mut u64,
    n: usize,
    metaint: Option<usize>,
    first_meta: &[u8],
) {
    let mut left = n;
    while left > 0 {
        let off = (*pos % pattern.len() as u64) as usize;
        let mut take = (pattern.len() - off).min(left);
        if let Some(m) = metaint {
            let to_meta = m - (*pos % m as u64) as usize;
            take = take.min(to_meta);
        }
        out.extend_from_slice(&pattern[off..off + take]);
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
            append_audio(&mut out, &pattern, &mut pos, 3000, Some(1000), &meta);
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
}
