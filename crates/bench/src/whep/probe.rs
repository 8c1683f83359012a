//! `--latency-source URL`: the bench as the live source of an Ogg/Opus mount, sending one
//! stamped 20 ms Opus packet per Ogg page in real time ([`crate::whep::latency`]), and a few ICY
//! listeners of that mount that read the stamps back, so a run reports mouth-to-ear latency
//! (source push to receipt) for ICY next to WHEP. With `--latency-bursts FILE.mp3` the source
//! is an MP3 file of tone bursts instead ([`BurstSource`], [`crate::whep::bursts`]), for an
//! MP3 mount that the server transcodes for its WebRTC viewers; ICY listeners cannot measure
//! that one (it would take decoding the MP3).
//!
//! The source speaks the same `PUT`/`SOURCE` request as `--source` and writes each page on its
//! own as it is due (TCP_NODELAY), stamping it with the wall-clock time of the write. An ICY
//! probe counts only stamps sent after it connected: the burst the server sends a new listener
//! holds older audio, which is buffering a player chooses, not delivery latency.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::net::url::HttpUrl;
use crate::profile::slice::unix_us;
use crate::source::{await_accept, load_frames, AcceptError, SourceError, SourceMethod};
use crate::stats::Hist;
use crate::whep::bursts::{burst_offsets, BurstSchedule, BURST_PERIOD_US};
use crate::whep::latency::{audio_page, header_pages, scan_stamps, PACKET_US};
use throng_proto::format::Format;

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
        let mut sock = connect_source(url, user, password, method, "audio/ogg")?;
        let io_err = |source| SourceError::Io {
            url: url.to_owned(),
            source,
        };
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

/// A running tone-burst source (`--latency-bursts`): an MP3 file of tone bursts pushed in
/// real time to an MP3 mount, frame by frame, looped ([`crate::whep::bursts`]).
pub struct BurstSource {
    stop: Arc<AtomicBool>,
    schedule: BurstSchedule,
    late_max_us: Arc<AtomicU64>,
    thread: Option<JoinHandle<Result<u64, std::io::Error>>>,
}

impl BurstSource {
    /// Reads the burst file `file` (split into MP3 frames by the proto crate's framer),
    /// connects to the mount `url` as an `audio/mpeg` source (`user`/`password`, `method`),
    /// waits for the server to accept it, then writes each frame on a new thread when it is
    /// due: the play time of the frames before it after the start, looping the file. The start
    /// is taken before this returns, so [`BurstSource::schedule`] is known at once.
    ///
    /// Errors: a file that cannot be read, is not MP3 or is shorter than a second; a bad or
    /// `https://` URL, the connection, the server refusing the source.
    pub fn start(
        url: &str,
        user: &str,
        password: &str,
        method: SourceMethod,
        file: &Path,
    ) -> Result<BurstSource, SourceError> {
        let (frames, format) = load_frames(file)?;
        let durations: Vec<u64> = frames.iter().map(|f| f.duration_us).collect();
        let (offsets, period) = burst_offsets(&durations);
        if format != Format::Mp3 || period < BURST_PERIOD_US {
            return Err(SourceError::BadBurstFile(file.into()));
        }
        let mut sock = connect_source(url, user, password, method, "audio/mpeg")?;
        // Which frames start a burst (their start is a burst offset).
        let mut at = 0u64;
        let starts_burst: Vec<bool> = durations
            .iter()
            .map(|d| {
                let b = offsets.binary_search(&at).is_ok();
                at += d;
                b
            })
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let late_max_us = Arc::new(AtomicU64::new(0));
        let (s2, late2) = (stop.clone(), late_max_us.clone());
        let start = Instant::now();
        let start_unix_us = unix_us();
        let thread = std::thread::Builder::new()
            .name("bench-burst-source".into())
            .spawn(move || {
                let mut media_us = 0u64;
                let mut sent = 0u64;
                for (f, burst) in frames.iter().zip(starts_burst).cycle() {
                    if s2.load(Ordering::Relaxed) {
                        break;
                    }
                    let due = start + Duration::from_micros(media_us);
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    if burst {
                        let late = unix_us().saturating_sub(start_unix_us + media_us);
                        late2.fetch_max(late, Ordering::Relaxed);
                    }
                    sock.write_all(&f.data)?;
                    media_us += f.duration_us;
                    sent += 1;
                }
                Ok(sent)
            })
            .map_err(|source| SourceError::Io {
                url: url.to_owned(),
                source,
            })?;
        Ok(BurstSource {
            stop,
            schedule: BurstSchedule {
                start_unix_us,
                period_us: period,
                offsets_us: offsets,
            },
            late_max_us,
            thread: Some(thread),
        })
    }

    /// When the source writes each burst (what the viewers match their onsets against).
    pub fn schedule(&self) -> &BurstSchedule {
        &self.schedule
    }

    /// Whether the source is still pushing (false once its connection failed).
    pub fn running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops pushing; returns how late the latest of its burst frames was written against the
    /// schedule (µs, the largest lateness: the measured delays may be over by as much), or why
    /// the push failed.
    pub fn stop(mut self) -> Result<u64, String> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(Ok(_))) => Ok(self.late_max_us.load(Ordering::Relaxed)),
            Some(Ok(Err(e))) => Err(format!("latency burst source: {e}")),
            _ => Err("latency burst source thread panicked".into()),
        }
    }
}

/// The run's latency source: stamped Ogg/Opus pages, or MP3 tone bursts.
pub enum LatencySource {
    /// `--latency-source` alone: [`ProbeSource`].
    Stamps(ProbeSource),
    /// `--latency-source` with `--latency-bursts`: [`BurstSource`].
    Bursts(BurstSource),
}

impl LatencySource {
    /// Starts the source `c` asks for.
    ///
    /// Errors: see [`ProbeSource::start`] and [`BurstSource::start`].
    pub fn start(c: &ProbeConfig) -> Result<LatencySource, SourceError> {
        Ok(match &c.bursts {
            Some(file) => LatencySource::Bursts(BurstSource::start(
                &c.url,
                &c.user,
                &c.password,
                c.method,
                file,
            )?),
            None => {
                LatencySource::Stamps(ProbeSource::start(&c.url, &c.user, &c.password, c.method)?)
            }
        })
    }

    /// The burst schedule, for a burst source.
    pub fn bursts(&self) -> Option<&BurstSchedule> {
        match self {
            LatencySource::Bursts(b) => Some(b.schedule()),
            LatencySource::Stamps(_) => None,
        }
    }

    /// Stops the source; for a burst source, how late its latest burst frame was (µs).
    ///
    /// Errors: why the push failed.
    pub fn stop(self) -> Result<Option<u64>, String> {
        match self {
            LatencySource::Stamps(s) => s.stop().map(|_| None),
            LatencySource::Bursts(b) => b.stop().map(Some),
        }
    }
}

/// Connects to the mount `url` as a live source of `content_type` (`user`/`password`, or the
/// URL's own credentials; `method`), with TCP_NODELAY, and waits for the server to accept it:
/// the one source handshake of both latency probes.
///
/// Errors: a bad or `https://` URL, the connection, the server refusing the source.
fn connect_source(
    url: &str,
    user: &str,
    password: &str,
    method: SourceMethod,
    content_type: &str,
) -> Result<TcpStream, SourceError> {
    let u = HttpUrl::parse(url)?;
    if u.tls {
        return Err(SourceError::TlsSource(url.to_owned()));
    }
    let io_err = |source| SourceError::Io {
        url: url.to_owned(),
        source,
    };
    let mut sock = TcpStream::connect_timeout(&u.addr, Duration::from_secs(5)).map_err(io_err)?;
    sock.set_nodelay(true).ok();
    let (user, password) = u
        .credentials
        .clone()
        .unwrap_or((user.to_owned(), password.to_owned()));
    let auth = throng_proto::auth::basic_authorization(&user, &password);
    let v = env!("CARGO_PKG_VERSION");
    let common = format!(
        "Host: {}\r\nUser-Agent: throng-bench/{v}\r\nContent-Type: {content_type}\r\nAuthorization: {auth}\r\nIce-Public: 0\r\nIce-Name: throng bench latency probe\r\n",
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
    Ok(sock)
}

/// ICY listeners of the probe mount, each recording the latency of the stamps it reads.
pub struct IcyProbe {
    stop: Arc<AtomicBool>,
    hist: Arc<Mutex<Hist>>,
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
        let hist = Arc::new(Mutex::new(Hist::new()));
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

    /// Stops the listeners; returns their latencies and their errors.
    pub fn stop(self) -> (Hist, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
        let h = self.hist.lock().unwrap_or_else(|p| p.into_inner()).clone();
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
    hist: &Mutex<Hist>,
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
    let mut local = Hist::new();
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
                if let Some(lat) = now.checked_sub(st) {
                    local.record_us(lat);
                }
            }
        }
    }
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
    /// `--latency-bursts`: push this MP3 file of tone bursts instead of stamped Opus (the URL
    /// is then an MP3 mount).
    pub bursts: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` MPEG-1 layer III frames of 128 kbit/s at 44.1 kHz (417 bytes, 26.1 ms each), zeros
    /// after each header.
    fn mp3_frames(n: usize) -> Vec<u8> {
        let mut f = vec![0u8; 417];
        f[..4].copy_from_slice(&[0xFF, 0xFB, 0x90, 0x64]);
        f.repeat(n)
    }

    #[test]
    fn a_burst_file_must_be_mp3_and_a_second_long_before_any_connection() {
        let dir = std::env::temp_dir().join(format!("throng-bursts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let short = dir.join("short.mp3");
        std::fs::write(&short, mp3_frames(20)).unwrap();
        let ogg = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../assets/test-tone.opus");
        // Port 9 on loopback: nothing listens, so only a refused file gets past this far.
        let url = "http://127.0.0.1:9/bursts.mp3";
        for f in [&short, &ogg] {
            let e = BurstSource::start(url, "source", "pw", SourceMethod::Put, f).err();
            assert!(
                matches!(e, Some(SourceError::BadBurstFile(_))),
                "{f:?}: {e:?}"
            );
        }
        let long = dir.join("long.mp3");
        std::fs::write(&long, mp3_frames(80)).unwrap();
        let e = BurstSource::start(url, "source", "pw", SourceMethod::Put, &long).err();
        assert!(matches!(e, Some(SourceError::Io { .. })), "{e:?}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
