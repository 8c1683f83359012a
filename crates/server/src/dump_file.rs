//! Recording a mount to a file: `[[mount]] dump-file` (Icecast `<dump-file>`), with Icecast
//! 2.5's `dump-file-size-limit` (bytes) and `dump-file-time-limit` (seconds). The file name is a
//! strftime pattern in local time (`/srv/rec/live-%Y%m%d-%H%M%S.mp3`), expanded when a file is
//! opened; the file is appended to, as Icecast 2.5 `source.c:source_open_dumpfile` opens it.
//!
//! A file is opened when a mount with a `dump-file` goes live, and a new one (the pattern
//! expanded again) after each configuration reload and each SIGUSR1
//! ([`ServerCtx::new_dump_files`]). Past a limit the file is closed and recording stops until
//! the next reload or SIGUSR1, as Icecast 2.5 disables it. The limits are the mount's, not a
//! source's: a source that reconnects within the same generation appends to the same file,
//! its bytes and time counted on from the last one's, and once a limit was reached it records
//! nothing more (a source reconnecting 20 times wrote 25.5 times the size limit before,
//! issue 42).
//!
//! Off the fan-out path: one thread per server reads each recorded mount's queue like a
//! listener (absolute offsets from the live edge when the file opens, shared chunks, Ogg header
//! pages first) every [`TICK`], and writes what is new. The queue holds the audio without ICY
//! metadata, so the file holds exactly the stream a listener without metadata gets. A write
//! that fails (a full disk, a file that cannot be opened) is logged once and closes the file;
//! a recording that falls more than the queue behind (a stalled disk) skips to the oldest
//! retained byte and logs the gap. Listeners and sources never wait on it.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::config::MountConfig;
use crate::ctx::ServerCtx;
use crate::mount::live::Mount;

/// How often the recorder looks for new audio (well inside any queue's retention).
pub const TICK: Duration = Duration::from_millis(200);

/// What a mount's configuration asks for: the file name pattern and the limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpSpec {
    /// The strftime pattern of the file name.
    pub pattern: String,
    /// Close the file once more than this many bytes were written (Icecast 2.5
    /// `dump-file-size-limit`); `None` for no limit.
    pub size_limit: Option<u64>,
    /// Close the file once it has been open longer than this (Icecast 2.5
    /// `dump-file-time-limit`); `None` for no limit.
    pub time_limit: Option<Duration>,
}

impl DumpSpec {
    /// The recording `m` asks for, if any.
    pub fn of(m: &MountConfig) -> Option<DumpSpec> {
        m.dump_file.as_ref().map(|pattern| DumpSpec {
            pattern: pattern.clone(),
            size_limit: m.dump_file_size_limit.filter(|&b| b > 0),
            time_limit: m
                .dump_file_time_limit
                .filter(|&s| s > 0)
                .map(Duration::from_secs),
        })
    }

    /// The file name at local time `now`: the pattern through strftime (chrono's, which is
    /// strftime's set; a pattern chrono cannot read is used as it is).
    pub fn file_name(&self, now: chrono::DateTime<chrono::Local>) -> PathBuf {
        use std::fmt::Write as _;
        let mut out = String::new();
        match write!(out, "{}", now.format(&self.pattern)) {
            Ok(()) => PathBuf::from(out),
            Err(_) => PathBuf::from(&self.pattern),
        }
    }

    /// Whether a file that got `written` bytes in `open_for` has reached a limit.
    pub fn limit_reached(&self, written: u64, open_for: Duration) -> Option<&'static str> {
        if self.size_limit.is_some_and(|l| written > l) {
            Some("size")
        } else if self.time_limit.is_some_and(|l| open_for > l) {
            Some("time")
        } else {
            None
        }
    }
}

/// What a mount's recording of this generation leaves for its next source.
#[derive(Debug, Clone)]
struct Carried {
    generation: u64,
    /// The file, when one was open at the end; `None` once a limit was reached (or writing
    /// failed): nothing more is recorded in this generation.
    file: Option<PathBuf>,
    written: u64,
    opened: Instant,
}

/// One mount being recorded.
struct Recording {
    mount: Arc<Mount>,
    spec: DumpSpec,
    /// The generation of [`ServerCtx::new_dump_files`] the file was opened in.
    generation: u64,
    /// The open file, `None` once closed (a limit, a failure) until the next generation.
    file: Option<(PathBuf, std::fs::File)>,
    /// The next stream offset to write.
    pos: u64,
    /// Bytes written to the current file.
    written: u64,
    /// When the current file was opened.
    opened: Instant,
    /// Ogg header pages are owed before the first chunk of a file.
    headers_owed: bool,
}

impl Recording {
    /// Starts recording `mount` at its live edge, opening a file; a mount recorded before in
    /// this generation (`carried`) goes on in its file with its counts, or stays off past a
    /// limit.
    fn start(
        mount: Arc<Mount>,
        spec: DumpSpec,
        generation: u64,
        carried: Option<Carried>,
    ) -> Recording {
        let pos = mount.queue.load().head;
        let mut r = Recording {
            mount,
            spec,
            generation,
            file: None,
            pos,
            written: 0,
            opened: Instant::now(),
            headers_owed: true,
        };
        match carried.filter(|c| c.generation == generation) {
            None => r.open(),
            Some(Carried { file: None, .. }) => tracing::info!(
                mount = %r.mount.name,
                "dump file not reopened for the new source: its limit was reached (until the next reload or SIGUSR1)"
            ),
            Some(Carried {
                file: Some(path),
                written,
                opened,
                ..
            }) => {
                r.open_at(path);
                r.written = written;
                r.opened = opened;
            }
        }
        r
    }

    /// What the next source of this mount carries on from, in this generation.
    fn carried(&self) -> Carried {
        Carried {
            generation: self.generation,
            file: self.file.as_ref().map(|(p, _)| p.clone()),
            written: self.written,
            opened: self.opened,
        }
    }

    /// Opens a file named by the pattern now (appending, as Icecast).
    fn open(&mut self) {
        let path = self.spec.file_name(chrono::Local::now());
        self.open_at(path);
    }

    /// Opens (appending) the file at `path`, counting from zero.
    fn open_at(&mut self, path: PathBuf) {
        let opened = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path);
        match opened {
            Ok(f) => {
                tracing::info!(mount = %self.mount.name, file = %path.display(), "dump file opened");
                self.file = Some((path, f));
                self.written = 0;
                self.opened = Instant::now();
                self.headers_owed = true;
            }
            Err(e) => {
                tracing::error!(
                    mount = %self.mount.name,
                    file = %path.display(),
                    "cannot open the dump file, not recording until the next reload or SIGUSR1: {e}"
                );
                self.file = None;
            }
        }
    }

    /// Closes the file, saying why.
    fn close(&mut self, why: &str) {
        if let Some((path, mut f)) = self.file.take() {
            let _ = f.flush();
            tracing::info!(
                mount = %self.mount.name,
                file = %path.display(),
                bytes = self.written,
                "dump file closed: {why}"
            );
        }
    }

    /// Writes what the mount produced since the last call. Returns false once the mount's
    /// feed has ended and everything was written.
    fn step(&mut self) -> bool {
        let q = self.mount.queue.load();
        if self.pos < q.tail() {
            tracing::warn!(
                mount = %self.mount.name,
                lost = q.tail() - self.pos,
                "dump file fell behind the queue; the bytes in between are not recorded"
            );
            self.pos = q.tail();
            self.headers_owed = true;
        }
        let start = q.chunk_index(self.pos);
        if let (Some(i), Some((path, f))) = (start, self.file.as_mut()) {
            let mut result = Ok(());
            for c in &q.chunks[i..] {
                let skip = (self.pos - c.start) as usize;
                if self.headers_owed && !c.is_header {
                    if let Some(h) = &c.ogg_headers {
                        result = result.and_then(|()| f.write_all(h));
                        self.written += h.len() as u64;
                    }
                }
                self.headers_owed = false;
                result = result.and_then(|()| f.write_all(&c.data[skip..]));
                self.written += (c.data.len() - skip) as u64;
                self.pos = c.end();
                if result.is_err() {
                    break;
                }
            }
            if let Err(e) = result {
                tracing::error!(
                    mount = %self.mount.name,
                    file = %path.display(),
                    "cannot write the dump file, not recording until the next reload or SIGUSR1: {e}"
                );
                self.file = None;
            }
        } else if start.is_some() {
            // Not recording: keep up with the stream, so a new file starts at the live edge.
            self.pos = q.head;
        }
        if self.file.is_some() {
            if let Some(which) = self.spec.limit_reached(self.written, self.opened.elapsed()) {
                self.close(&format!("{which} limit reached"));
            }
        }
        !(q.ended && self.pos >= q.head)
    }
}

/// Starts the recorder thread of `ctx`'s server; it ends when the server shuts down.
pub fn start(ctx: &Arc<ServerCtx>) {
    let weak = Arc::downgrade(ctx);
    let spawned = std::thread::Builder::new()
        .name("dump-file".into())
        .spawn(move || run(&weak));
    if let Err(e) = spawned {
        tracing::error!("cannot start the dump-file thread, no mount is recorded: {e}");
    }
}

/// The recorder's loop.
fn run(ctx: &Weak<ServerCtx>) {
    let mut recordings: HashMap<u64, Recording> = HashMap::new();
    // By mount name: what the last source's recording left (this generation only).
    let mut carried: HashMap<String, Carried> = HashMap::new();
    loop {
        std::thread::sleep(TICK);
        let Some(ctx) = ctx.upgrade() else { break };
        if *ctx.shutdown.borrow() {
            for r in recordings.values_mut() {
                r.step();
                r.close("server stopping");
            }
            break;
        }
        let config = ctx.config();
        let generation = ctx.new_dump_files.load(Ordering::Relaxed);
        carried.retain(|_, c| c.generation == generation);
        for m in ctx.registry.list() {
            // A new source of a mount whose last source is still being written out waits
            // for it: it goes on from what that one leaves.
            if recordings.contains_key(&m.id) || recordings.values().any(|r| r.mount.name == m.name)
            {
                continue;
            }
            if let Some(spec) = config.mount_for(&m.name).and_then(DumpSpec::of) {
                let before = carried.remove(&m.name);
                recordings.insert(m.id, Recording::start(m, spec, generation, before));
            }
        }
        recordings.retain(|_, r| {
            let spec = config.mount_for(&r.mount.name).and_then(DumpSpec::of);
            let Some(spec) = spec else {
                r.step();
                r.close("dump-file removed from the configuration");
                return false;
            };
            if r.generation != generation || r.spec != spec {
                r.step();
                r.close("new file (reload or SIGUSR1)");
                r.spec = spec;
                r.generation = generation;
                r.open();
            }
            if r.step() {
                true
            } else {
                carried.insert(r.mount.name.clone(), r.carried());
                r.close("the source ended");
                false
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone as _;

    fn spec(size: Option<u64>, secs: Option<u64>) -> DumpSpec {
        DumpSpec::of(&MountConfig {
            name: "/live".into(),
            dump_file: Some("/rec/live-%Y%m%d-%H%M%S.mp3".into()),
            dump_file_size_limit: size,
            dump_file_time_limit: secs,
            ..MountConfig::default()
        })
        .unwrap()
    }

    #[test]
    fn names_are_strftime_patterns_in_local_time() {
        let at = chrono::Local
            .with_ymd_and_hms(2026, 11, 27, 3, 4, 5)
            .unwrap();
        assert_eq!(
            spec(None, None).file_name(at),
            PathBuf::from("/rec/live-20261127-030405.mp3")
        );
        assert!(DumpSpec::of(&MountConfig::default()).is_none());
    }

    #[test]
    fn limits_as_icecast_2_5_with_zero_meaning_none() {
        let s = spec(Some(1000), Some(60));
        assert_eq!(s.limit_reached(1000, Duration::from_secs(60)), None);
        assert_eq!(s.limit_reached(1001, Duration::ZERO), Some("size"));
        assert_eq!(s.limit_reached(0, Duration::from_secs(61)), Some("time"));
        let none = spec(Some(0), Some(0));
        assert_eq!(none.limit_reached(u64::MAX, Duration::MAX), None);
    }
}
