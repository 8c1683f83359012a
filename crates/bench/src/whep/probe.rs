//! `--latency-source URL`: the bench as the live source of an Ogg/Opus mount, sending one
//! stamped 20 ms Opus packet per Ogg page in real time ([`crate::whep::latency`]), and a few ICY
//! listeners of that mount that read the stamps back, so a run reports mouth-to-ear latency
//! (source push to receipt) for ICY next to WHEP.
//!
//! The source speaks the same `PUT`/`SOURCE` request as `--source` and writes each page on its
//! own as it is due (TCP_NODELAY), stamping it with the wall-clock time of the write. An ICY
//! probe counts only stamps sent after it connected: the burst the server sends a new listener
//! holds older audio, which is buffering a player chooses, not delivery latency.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::events::subscriber::unix_us;
use crate::net::url::HttpUrl;
use crate::source::{await_accept, AcceptError, SourceError, SourceMethod};
use crate::whep::latency::{audio_page, header_pages, scan_stamps, LatencyHist, PACKET_US};

/// A running probe source.
pub struct ProbeSource {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<u64, std::io::Error>>>,
}

impl ProbeSource {
    /// Connects to the mount `url` as a source (`user`/`password`, `method`), waits for the
    /// server to accept it, sends the header pages, then a stamped page every 20 ms on a new
    /// thread.
    ///
    /// Errors: a bad or `https://` URL, the connection, the server refusing the source.
    pub fn start(
        url: &str,
        user: &str,
        password: &str,
        method: SourceMethod,
    ) -> Result<ProbeSource, SourceError> {
        let u = HttpUrl::parse(url)?;
        if u.tls {
            return Err(SourceError::TlsSource(url.to_owned()));
        }
        let io_err = |source| SourceError::Io {
            url: url.to_owned(),
            source,
        };
        let mut sock =
            TcpStream::connect_timeout(&u.addr, Duration::from_secs(5)).map_err(io_err)?;
        sock.set_nodelay(true).ok();
        let (user, password) = u
            .credentials
            .clone()
            .unwrap_or((user.to_owned(), password.to_owned()));
        let auth = throng_proto::auth::basic_authorization(&user, &password);
        let v = env!("CARGO_PKG_VERSION");
        let common = format!(
            "Host: {}\r\nUser-Agent: throng-bench/{v}\r\nContent-Type: audio/ogg\r\nAuthorization: {auth}\r\nIce-Public: 0\r\nIce-Name: throng bench latency probe\r\n",
            u.host_header()
        );
        let req = match method {
            SourceMethod::Put => format!(
                "PUT {} HTTP/1.1\r\n{common}Expect: 100-continue\r\n\r\n",
                u.path
            ),
            SourceMethod::Source => format!("SOURCE {} HTTP/1.0\r\n{common}\r\n", u.path),
        };
        sock.write_all(req.as_bytes()).map_err(io_err)?;
        await_accept(&mut sock).map_err(|e| match e {
            AcceptError::Io(source) => SourceError::Io {
                url: url.to_owned(),
                source,
            },
            AcceptError::Refused(s) => SourceError::Refused(s),
        })?;
        sock.write_all(&header_pages()).map_err(io_err)?;
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("bench-latency-source".into())
            .spawn(move || {
                let start = Instant::now();
                let mut k = 0u64;
                while !s2.load(Ordering::Relaxed) {
                    let due = start + Duration::from_micros(k * PACKET_US);
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    sock.write_all(&audio_page(k, unix_us()))?;
                    k += 1;
                }
                Ok(k)
            })
            .map_err(io_err)?;
        Ok(ProbeSource {
            stop,
            thread: Some(thread),
        })
    }

    /// Whether the source is still pushing (false once its connection failed).
    pub fn running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops pushing; returns the packets sent, or why the push failed.
    pub fn stop(mut self) -> Result<u64, String> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(Ok(k))) => Ok(k),
            Some(Ok(Err(e))) => Err(format!("latency source: {e}")),
            _ => Err("latency source thread panicked".into()),
        }
    }
}

/// ICY listeners of the probe mount, each recording the latency of the stamps it reads.
pub struct IcyProbe {
    stop: Arc<AtomicBool>,
    hist: Arc<Mutex<LatencyHist>>,
    threads: Vec<JoinHandle<()>>,
    /// Probes whose connection failed or closed early.
    failed: Arc<Mutex<Vec<String>>>,
}

impl IcyProbe {
    /// Starts `n` listeners of `url` (a plain `GET`, no ICY metadata). Stamps received before
    /// `record_from` (µs since the Unix epoch) are not recorded.
    ///
    /// Errors: a bad or `https://` URL.
    pub fn start(url: &str, n: u32, record_from: u64) -> Result<IcyProbe, SourceError> {
        let u = HttpUrl::parse(url)?;
        if u.tls {
            return Err(SourceError::TlsSource(url.to_owned()));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let hist = Arc::new(Mutex::new(LatencyHist::default()));
        let failed = Arc::new(Mutex::new(Vec::new()));
        let threads = (0..n)
            .map(|_| {
                let (u, stop, hist, failed) =
                    (u.clone(), stop.clone(), hist.clone(), failed.clone());
                std::thread::spawn(move || {
                    if let Err(e) = icy_listen(&u, &stop, &hist, record_from) {
                        failed
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(e.to_string());
                    }
                })
            })
            .collect();
        Ok(IcyProbe {
            stop,
            hist,
            threads,
            failed,
        })
    }

    /// Stops the listeners; returns their latencies (sealed) and their errors.
    pub fn stop(self) -> (LatencyHist, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
        let mut h = self.hist.lock().unwrap_or_else(|p| p.into_inner()).clone();
        h.seal();
        let f = self
            .failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        (h, f)
    }
}

fn icy_listen(
    u: &HttpUrl,
    stop: &AtomicBool,
    hist: &Mutex<LatencyHist>,
    record_from: u64,
) -> std::io::Result<()> {
    let mut s = TcpStream::connect_timeout(&u.addr, Duration::from_secs(5))?;
    let connected = unix_us();
    s.set_read_timeout(Some(Duration::from_millis(200)))?;
    write!(
        s,
        "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: throng-bench/{}\r\n\r\n",
        u.path,
        u.host_header(),
        env!("CARGO_PKG_VERSION")
    )?;
    let mut buf = vec![0u8; 16 * 1024];
    let (mut carry, mut stamps) = (Vec::new(), Vec::new());
    let mut local = LatencyHist::default();
    let mut got_head = false;
    let mut head = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let n = match s.read(&mut buf) {
            Ok(0) => return Err(std::io::Error::other("ICY probe: connection closed")),
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(e) => return Err(e),
        };
        let now = unix_us();
        let mut data = &buf[..n];
        if !got_head {
            head.extend_from_slice(data);
            let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") else {
                continue;
            };
            if !head.starts_with(b"HTTP/1.1 200") && !head.starts_with(b"HTTP/1.0 200") {
                let line = String::from_utf8_lossy(&head);
                return Err(std::io::Error::other(format!(
                    "ICY probe: {}",
                    line.lines().next().unwrap_or("")
                )));
            }
            got_head = true;
            carry = head.split_off(end + 4);
            data = &[];
        }
        scan_stamps(&mut carry, data, &mut stamps);
        for st in stamps.drain(..) {
            if st >= connected.max(record_from) {
                local.record(now, st);
            }
        }
    }
    local.seal();
    hist.lock().unwrap_or_else(|p| p.into_inner()).merge(&local);
    Ok(())
}

/// Where and how the latency probe pushes its source.
#[derive(Debug, Clone)]
pub struct ProbeConfig {
    /// The Ogg/Opus mount URL.
    pub url: String,
    /// Source user.
    pub user: String,
    /// Source password.
    pub password: String,
    /// Request method.
    pub method: SourceMethod,
}
