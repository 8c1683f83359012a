//! `--source FILE`: pushes a file to a mount as a live source, paced in real time.
//!
//! Speaks what ffmpeg's `icecast://` output sends (`PUT /mount HTTP/1.1`, `Content-Type`, Basic
//! `Authorization`, `Expect: 100-continue`, `Ice-*` headers) or libshout's legacy `SOURCE /mount
//! HTTP/1.0`. The file is split into frames (or Ogg pages) by the proto crate's framer and sent
//! in batches of about 100 ms, each no earlier than the cumulative play time of the frames
//! before it; the file loops until the source is stopped.

use crate::net::url::{HttpUrl, UrlError};
use clap::ValueEnum;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use thiserror::Error;
use throng_proto::format::Format;
use throng_proto::framer::Framer;
use throng_proto::http::parse_response_head;

/// The source protocol's request method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ValueEnum, Default)]
#[serde(rename_all = "lowercase")]
pub enum SourceMethod {
    /// `PUT /mount HTTP/1.1` with `Expect: 100-continue` (ffmpeg, libshout ≥ 2.4 HTTP mode).
    #[default]
    Put,
    /// `SOURCE /mount HTTP/1.0` (legacy libshout).
    Source,
}

/// Where and how to push the source.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SourceConfig {
    /// The audio file (MP3, ADTS-AAC or Ogg).
    pub file: PathBuf,
    /// Mount URL, e.g. `http://127.0.0.1:8000/stream` (credentials in it override `user`).
    pub url: String,
    /// Source user name.
    #[serde(default = "default_user")]
    pub user: String,
    /// Source password (no default: see [`resolve_password`]).
    pub password: String,
    /// Request method.
    #[serde(default)]
    pub method: SourceMethod,
    /// Content-Type (default: from the file extension).
    #[serde(default)]
    pub content_type: Option<String>,
    /// Play speed: 1 pushes in real time, 0.5 at half the file's pace (a source that falls
    /// behind: its listeners get half real time, whatever bitrate it announces).
    #[serde(default = "one")]
    pub speed: f64,
}

fn one() -> f64 {
    1.0
}

/// Default source user, as Icecast's (`source`).
pub(crate) fn default_user() -> String {
    "source".into()
}

/// The environment variable the source password is read from when no `--source-password` (or
/// scenario `password`) is given.
pub const PASSWORD_ENV: &str = "THRONG_SOURCE_PASSWORD";

/// The password a source push uses: `given` (flag or scenario), else the [`PASSWORD_ENV`]
/// environment variable, else the password in `url` (`http://user:pass@host/mount`). There is
/// no default password.
///
/// Errors: [`SourceError::NoPassword`] when none of the three has one.
pub fn resolve_password(given: Option<&str>, url: &str) -> Result<String, SourceError> {
    if let Some(p) = given {
        return Ok(p.to_owned());
    }
    if let Ok(p) = std::env::var(PASSWORD_ENV) {
        if !p.is_empty() {
            return Ok(p);
        }
    }
    match HttpUrl::parse(url).ok().and_then(|u| u.credentials) {
        Some((_, p)) => Ok(p),
        None => Err(SourceError::NoPassword),
    }
}

/// Source errors.
#[derive(Debug, Error)]
pub enum SourceError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file holds no frames the framer recognises.
    #[error("{0}: no audio frames found")]
    NoFrames(PathBuf),
    /// A `--latency-bursts` file that is not an MP3 file of at least one second.
    #[error("{0}: a latency burst file must be MP3 (.mp3) and at least 1 s long")]
    BadBurstFile(PathBuf),
    /// Bad URL.
    #[error(transparent)]
    Url(#[from] UrlError),
    /// An `https://` source URL: the bench pushes its source over plain HTTP.
    #[error("{0}: the bench's source speaks plain HTTP; give an http:// source URL (--source-url, scenario source_url)")]
    TlsSource(String),
    /// Connecting or talking to the server failed.
    #[error("source connection to {url}: {source}")]
    Io {
        /// The URL.
        url: String,
        /// The error.
        source: std::io::Error,
    },
    /// The server refused the source.
    #[error("server refused the source: {0}")]
    Refused(String),
    /// A source is to be pushed but no password was given (there is no default).
    #[error(
        "no source password: give --source-password (or `password` in the scenario's [source]), \
set {PASSWORD_ENV}, or put it in the source URL (http://source:PASSWORD@host/mount)"
    )]
    NoPassword,
}

/// One frame to send and its play time.
#[derive(Debug, Clone)]
pub(crate) struct Frame {
    /// The frame's bytes.
    pub(crate) data: bytes::Bytes,
    /// Its play time (µs; 0 when the framer could not tell).
    pub(crate) duration_us: u64,
}

/// Splits a file into frames with durations (the format from its extension, else MP3).
///
/// Errors: the file cannot be read, or holds no frame.
pub(crate) fn load_frames(path: &Path) -> Result<(Vec<Frame>, Format), SourceError> {
    let data = std::fs::read(path).map_err(|source| SourceError::File {
        path: path.into(),
        source,
    })?;
    let format = Format::from_path_extension(&path.to_string_lossy()).unwrap_or(Format::Mp3);
    let mut f = Framer::new(format);
    f.push(&data);
    f.finish();
    let mut frames = Vec::new();
    while let Some(r) = f.next_unit() {
        if let Ok(u) = r {
            frames.push(Frame {
                data: u.data,
                duration_us: u.duration_us,
            });
        }
    }
    if frames.is_empty() {
        return Err(SourceError::NoFrames(path.into()));
    }
    Ok((frames, format))
}

/// Live counters of a running source.
#[derive(Debug, Default)]
pub struct SourceStats {
    /// Bytes sent so far (bytes).
    pub bytes: AtomicU64,
    /// Play time sent so far (µs).
    pub audio_us: AtomicU64,
    /// Why the source stopped, if it failed.
    pub error: Mutex<Option<String>>,
}

/// A source pushing on its own thread.
pub struct Source {
    stop: Arc<AtomicBool>,
    stats: Arc<SourceStats>,
    thread: Option<JoinHandle<()>>,
}

impl Source {
    /// Connects, waits for the server to accept the source, then pushes on a new thread.
    pub fn start(cfg: &SourceConfig) -> Result<Source, SourceError> {
        let (frames, format) = load_frames(&cfg.file)?;
        let url = HttpUrl::parse(&cfg.url)?;
        if url.tls {
            return Err(SourceError::TlsSource(cfg.url.clone()));
        }
        let io_err = |source| SourceError::Io {
            url: cfg.url.clone(),
            source,
        };
        let mut sock =
            TcpStream::connect_timeout(&url.addr, Duration::from_secs(5)).map_err(io_err)?;
        sock.set_nodelay(true).ok();
        let (user, pass) = url
            .credentials
            .clone()
            .unwrap_or((cfg.user.clone(), cfg.password.clone()));
        let ctype = cfg
            .content_type
            .clone()
            .unwrap_or_else(|| format.default_mime().to_owned());
        let auth = throng_proto::auth::basic_authorization(&user, &pass);
        let req = match cfg.method {
            SourceMethod::Put => format!(
                "PUT {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: throng-bench/{v}\r\nContent-Type: {ctype}\r\nAuthorization: {auth}\r\nExpect: 100-continue\r\nIce-Public: 0\r\nIce-Name: throng bench source\r\nIce-Description: throng bench --source\r\n\r\n",
                url.path,
                url.host_header(),
                v = env!("CARGO_PKG_VERSION")
            ),
            SourceMethod::Source => format!(
                "SOURCE {} HTTP/1.0\r\nHost: {}\r\nUser-Agent: throng-bench/{v}\r\nContent-Type: {ctype}\r\nAuthorization: {auth}\r\nIce-Public: 0\r\nIce-Name: throng bench source\r\n\r\n",
                url.path,
                url.host_header(),
                v = env!("CARGO_PKG_VERSION")
            ),
        };
        sock.write_all(req.as_bytes()).map_err(io_err)?;
        await_accept(&mut sock).map_err(|e| match e {
            AcceptError::Io(source) => SourceError::Io {
                url: cfg.url.clone(),
                source,
            },
            AcceptError::Refused(s) => SourceError::Refused(s),
        })?;
        sock.set_read_timeout(None).ok();
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(SourceStats::default());
        let (s2, st2) = (stop.clone(), stats.clone());
        let speed = if cfg.speed > 0.0 && cfg.speed.is_finite() {
            cfg.speed
        } else {
            1.0
        };
        let thread = std::thread::Builder::new()
            .name("bench-source".into())
            .spawn(move || {
                if let Err(e) = push(sock, &frames, speed, &s2, &st2) {
                    *st2.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                }
            })
            .map_err(io_err)?;
        Ok(Source {
            stop,
            stats,
            thread: Some(thread),
        })
    }

    /// Live counters.
    pub fn stats(&self) -> &SourceStats {
        &self.stats
    }

    /// Stops pushing, closes the connection and returns the final counters.
    pub fn stop(mut self) -> Arc<SourceStats> {
        self.shutdown();
        self.stats.clone()
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Source {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Why [`await_accept`] did not see the source accepted.
pub(crate) enum AcceptError {
    /// The connection failed.
    Io(std::io::Error),
    /// The server answered with an error status (or closed).
    Refused(String),
}

/// Reads response heads until a 200 (skipping `100 Continue`). After a 100, silence for a
/// second also counts as accepted (Icecast master sends the 200 only at the end).
pub(crate) fn await_accept(sock: &mut TcpStream) -> Result<(), AcceptError> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    let mut got_continue = false;
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(AcceptError::Io)?;
    loop {
        while let Some((head, len)) = parse_response_head(&buf)
            .map_err(|e| AcceptError::Refused(format!("bad response head: {e}")))?
        {
            buf.drain(..len);
            match head.status {
                100 => {
                    got_continue = true;
                    sock.set_read_timeout(Some(Duration::from_secs(1)))
                        .map_err(AcceptError::Io)?;
                }
                200 => return Ok(()),
                s => return Err(AcceptError::Refused(format!("{s} {}", head.reason))),
            }
        }
        match sock.read(&mut tmp) {
            Ok(0) => return Err(AcceptError::Refused("connection closed".into())),
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
            Err(e)
                if got_continue
                    && matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
            {
                return Ok(())
            }
            Err(e) => return Err(AcceptError::Io(e)),
        }
    }
}

/// Sends frames in ~100 ms batches, each at the play time of what was sent before it (divided
/// by `speed`).
fn push(
    mut sock: TcpStream,
    frames: &[Frame],
    speed: f64,
    stop: &AtomicBool,
    stats: &SourceStats,
) -> std::io::Result<()> {
    let known: Vec<u64> = frames
        .iter()
        .map(|f| f.duration_us)
        .filter(|&d| d > 0)
        .collect();
    let fallback = if known.is_empty() {
        // Unknown durations: assume 128 kbit/s.
        (frames.iter().map(|f| f.data.len() as u64).sum::<u64>() * 8 * 1_000_000 / 128_000)
            / frames.len() as u64
    } else {
        known.iter().sum::<u64>() / known.len() as u64
    };
    let start = Instant::now();
    let mut sent_us = 0u64;
    let mut batch = Vec::with_capacity(64 * 1024);
    let mut batch_us = 0u64;
    let mut i = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let f = &frames[i % frames.len()];
        i += 1;
        batch.extend_from_slice(&f.data);
        batch_us += if f.duration_us > 0 {
            f.duration_us
        } else {
            fallback
        };
        if batch_us < 100_000 {
            continue;
        }
        let due = start + Duration::from_secs_f64(sent_us as f64 / 1e6 / speed);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        sock.write_all(&batch)?;
        stats.bytes.fetch_add(batch.len() as u64, Ordering::Relaxed);
        sent_us += batch_us;
        stats.audio_us.store(sent_us, Ordering::Relaxed);
        batch.clear();
        batch_us = 0;
    }
    Ok(())
}
