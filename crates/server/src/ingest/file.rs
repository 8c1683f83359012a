//! A mount fed by a file looped forever, paced in real time by frame durations: the built-in
//! demo mount (a synthetic MP3 arpeggio embedded in the binary, made by
//! `scripts/make-demo-audio.sh`), `[[mount]] file = ...` mounts, and webroot files named as a
//! `fallback-mount` (Icecast 2.4.4 serves those through its fallback file thread).

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
    let cfg = ctx.config.mount_for(name);
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
    let name = ctx.config.demo_mount.clone();
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
        &ctx.config,
        spec.name,
        Announcement {
            format: spec.format,
            content_type: spec.content_type.into(),
            info: spec.info,
            credentials: ctx.config.source_credentials(spec.name).unwrap_or_default(),
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
            if preroll_bytes < mount.settings.burst_size as usize {
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
