//! A mount fed by a file looped forever, paced in real time by frame durations: the built-in
//! demo mount (a synthetic MP3 arpeggio embedded in the binary, made by
//! `scripts/make-demo-audio.sh`), `[[mount]] file = ...` mounts, and webroot files named as a
//! `fallback-mount` (Icecast 2.4.4 serves those through its fallback file thread).
//! [`FileMounts`] is the set of configured file mounts, brought in line with the configuration
//! at start and at each reload.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use throng_proto::format::Format;
use throng_proto::framer::{Framer, StreamParams, Unit};
use throng_proto::source_info::SourceInfo;

use crate::ctx::ServerCtx;
use crate::ingest::live_mount::LiveMount;
use crate::mount::feeder::Feeder;
use crate::mount::live::{Announcement, Mount, SourceKind};
use crate::mount::registry::ReserveError;
use crate::mount::stream_end::StreamEnd;

/// The demo audio: 64 kbit/s CBR MP3, 44.1 kHz, no ID3 tag (`assets/demo.mp3`).
pub static DEMO_MP3: &[u8] = include_bytes!("../../../../assets/demo.mp3");

/// Why a file cannot feed a mount.
#[derive(Debug, thiserror::Error)]
pub enum FileSourceError {
    /// The file holds no frames of the format with a known duration, so it cannot be paced.
    #[error("no timed {0:?} frames in the file")]
    NoFrames(Format),
    /// The mount name is taken.
    #[error("cannot register the mount: {0}")]
    Mount(#[from] ReserveError),
    /// The file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file name does not say which format it holds.
    #[error("unknown audio format of {0} (expected .mp3, .aac, .ogg, .oga or .opus)")]
    UnknownFormat(std::path::PathBuf),
}

/// The format and Content-Type of a file, by extension.
pub fn format_of_path(path: &std::path::Path) -> Option<(Format, &'static str)> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    Some(match ext.as_str() {
        "mp3" => (Format::Mp3, "audio/mpeg"),
        "aac" => (Format::Aac, "audio/aac"),
        "ogg" | "oga" => (Format::Ogg, "application/ogg"),
        "opus" => (Format::Ogg, "audio/ogg"),
        _ => return None,
    })
}

/// Starts mount `name` looping the file at `path` in real time (an always-on mount, or a
/// webroot fallback file when `hidden`).
///
/// Errors: see [`FileSourceError`].
pub fn start_file_mount(
    ctx: Arc<ServerCtx>,
    name: &str,
    path: &std::path::Path,
    hidden: bool,
) -> Result<(), FileSourceError> {
    let (format, content_type) =
        format_of_path(path).ok_or_else(|| FileSourceError::UnknownFormat(path.to_owned()))?;
    let data = std::fs::read(path).map_err(|source| FileSourceError::Read {
        path: path.to_owned(),
        source,
    })?;
    let title = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default()
        .to_owned();
    let config = ctx.config();
    let cfg = config.mount_for(name);
    let info = SourceInfo {
        name: cfg
            .and_then(|m| m.stream_name.clone())
            .unwrap_or_else(|| title.clone()),
        ..SourceInfo::default()
    };
    start_loop(
        ctx.clone(),
        LoopSpec {
            name,
            data: &data,
            format,
            content_type,
            info,
            title: &title,
            hidden,
        },
    )
}

struct LoopSpec<'a> {
    name: &'a str,
    data: &'a [u8],
    format: Format,
    content_type: &'static str,
    info: SourceInfo,
    title: &'a str,
    hidden: bool,
}

/// The file mounts a configuration asks for: each `[[mount]] file`, and each webroot file named
/// as a `fallback-mount` that no `[[mount]] file` provides, by mount name, with whether it is
/// a (hidden) webroot fallback file.
pub fn wanted_file_mounts(config: &crate::config::Config) -> BTreeMap<String, (PathBuf, bool)> {
    let mut wanted = BTreeMap::new();
    for m in &config.mount {
        if let Some(path) = &m.file {
            wanted
                .entry(m.name.clone())
                .or_insert((path.clone(), false));
        }
    }
    let Some(webroot) = &config.paths.webroot else {
        return wanted;
    };
    for m in &config.mount {
        let Some(target) = &m.fallback_mount else {
            continue;
        };
        let path = webroot.join(target.trim_start_matches('/'));
        if !wanted.contains_key(target) && path.is_file() {
            wanted.insert(target.clone(), (path, true));
        }
    }
    wanted
}

/// The running file mounts started from the configuration (not the demo), by mount name.
#[derive(Debug, Default)]
pub struct FileMounts {
    running: BTreeMap<String, (PathBuf, bool)>,
}

impl FileMounts {
    /// Makes the running file mounts those of `config` ([`wanted_file_mounts`]): a mount no
    /// longer wanted, or now on another file, is stopped (its listeners go to its fallback, as
    /// after `killsource`); a new one starts. A webroot fallback file is not started while
    /// another feed holds its mount name (a source client takes precedence). Returns one line
    /// per change, for the reload's summary.
    ///
    /// Errors: the first file mount that cannot start (the others were still tried).
    pub async fn apply(
        &mut self,
        ctx: &Arc<ServerCtx>,
        config: &crate::config::Config,
    ) -> Result<Vec<String>, (Vec<String>, FileSourceError)> {
        let wanted = wanted_file_mounts(config);
        let mut changes = Vec::new();
        let stale: Vec<String> = self
            .running
            .iter()
            .filter(|(name, spec)| wanted.get(*name) != Some(spec))
            .map(|(name, _)| name.clone())
            .collect();
        for name in stale {
            self.running.remove(&name);
            stop_file_mount(ctx, &name).await;
            if !wanted.contains_key(&name) {
                changes.push(format!("file mount {name} stopped"));
            }
        }
        let mut failed = None;
        for (name, (path, fallback_file)) in wanted {
            if self.running.contains_key(&name) {
                continue;
            }
            if fallback_file && ctx.registry.get(&name).is_some() {
                continue;
            }
            match start_file_mount(ctx.clone(), &name, &path, fallback_file) {
                Ok(()) => {
                    tracing::info!("{} plays on {name}", path.display());
                    changes.push(format!("file mount {name} started ({})", path.display()));
                    self.running.insert(name, (path, fallback_file));
                }
                Err(e) => {
                    tracing::error!(mount = %name, "file mount cannot start: {e}");
                    failed.get_or_insert(e);
                }
            }
        }
        match failed {
            None => Ok(changes),
            Some(e) => Err((changes, e)),
        }
    }
}

/// Stops the file-fed mount `name`, if one is live, and waits (at most 2 s) until it is
/// unregistered, so the name can be taken again at once.
async fn stop_file_mount(ctx: &ServerCtx, name: &str) {
    let Some(m) = ctx
        .registry
        .get(name)
        .filter(|m| m.settings.kind == SourceKind::File)
    else {
        return;
    };
    m.stop.store(true, Ordering::Relaxed);
    for _ in 0..100 {
        if ctx.registry.get(name).is_none_or(|n| n.id != m.id) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tracing::warn!(mount = %name, "file mount still registered 2 s after its stop");
}

/// Frames a whole file into units and the audio parameters seen.
///
/// Errors: [`FileSourceError::NoFrames`] when it holds no timed frame of `format`.
pub fn frame_file(
    data: &[u8],
    format: Format,
) -> Result<(Vec<Unit>, StreamParams), FileSourceError> {
    let mut framer = Framer::new(format);
    framer.push(data);
    framer.finish();
    let units: Vec<Unit> = std::iter::from_fn(|| framer.next_unit())
        .filter_map(Result::ok)
        .collect();
    if units.iter().all(|u| u.duration_us == 0) {
        return Err(FileSourceError::NoFrames(format));
    }
    Ok((units, framer.params()))
}

/// Starts the demo mount from the embedded file.
///
/// Errors: see [`FileSourceError`].
pub fn start_demo(ctx: Arc<ServerCtx>) -> Result<(), FileSourceError> {
    let info = SourceInfo {
        name: "Throng demo".into(),
        description: "A synthetic arpeggio looped in real time".into(),
        genre: "Demo".into(),
        bitrate: Some("64".into()),
        ..SourceInfo::default()
    };
    let name = ctx.config().demo_mount.clone();
    start_loop(
        ctx,
        LoopSpec {
            name: &name,
            data: DEMO_MP3,
            format: Format::Mp3,
            content_type: "audio/mpeg",
            info,
            title: "Throng demo",
            hidden: false,
        },
    )
}

fn start_loop(ctx: Arc<ServerCtx>, spec: LoopSpec<'_>) -> Result<(), FileSourceError> {
    let (units, params) = frame_file(spec.data, spec.format)?;
    let (mount, writer) = Mount::configured(
        &ctx.config(),
        spec.name,
        Announcement {
            format: spec.format,
            content_type: spec.content_type.into(),
            info: spec.info,
            credentials: ctx
                .config()
                .source_credentials(spec.name)
                .unwrap_or_default(),
            source_ip: None,
            kind: SourceKind::File,
            force_hidden: spec.hidden,
        },
    );
    mount.set_title(spec.title, None);
    mount.set_params(params);
    let live = LiveMount::reserve(ctx.clone(), mount.clone(), usize::MAX)?;
    let feeder = Feeder::new(mount.clone(), writer, None, ctx.metrics.clone());
    tokio::spawn(loop_file(live, mount, feeder, units));
    Ok(())
}

/// Feeds `units` forever at real-time pace until the mount is stopped (admin `killsource`), then
/// logs why it ended; the mount stays registered while `_live` is held.
async fn loop_file(_live: LiveMount, mount: Arc<Mount>, mut feeder: Feeder, units: Vec<Unit>) {
    let start = tokio::time::Instant::now();
    let mut media_us: u64 = 0;
    // Pre-roll one burst's worth so the first listener gets a full burst at once.
    let mut preroll_bytes = 0usize;
    let end = 'outer: loop {
        for u in &units {
            if mount.stop.load(Ordering::Relaxed) {
                break 'outer StreamEnd::Killed;
            }
            feeder.push_unit(u);
            if preroll_bytes < mount.burst_size() as usize {
                preroll_bytes += u.data.len();
                continue;
            }
            media_us += u.duration_us;
            let due = start + Duration::from_micros(media_us);
            if due > tokio::time::Instant::now() + Duration::from_millis(50) {
                feeder.flush();
                tokio::time::sleep_until(due).await;
            }
        }
    };
    feeder.finish();
    tracing::info!(mount = %mount.name, by = ?end.by(), "file mount ended: {end}");
}
