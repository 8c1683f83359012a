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
use crate::ledger::TitleSetter;
use crate::mount::feeder::Feeder;
use crate::mount::freeze::FrozenFeed;
use crate::mount::live::{Announcement, Mount, SourceKind};
use crate::mount::queue::QueueWriter;
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
    resume: Option<Resumed>,
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
        resume,
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
        let path = crate::config::webroot_file(webroot, target);
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
    /// File mounts carried across a binary upgrade, continued by the next [`FileMounts::apply`]
    /// instead of started afresh.
    resumed: ResumedFiles,
}

impl FileMounts {
    /// Hands the file mounts carried across a binary upgrade to the next
    /// [`FileMounts::apply`]; those it does not start (the new configuration has no such file
    /// mount) end then, and their listeners go to the mount's fallback.
    pub fn resume(&mut self, resumed: ResumedFiles) {
        self.resumed = resumed;
    }

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
            let resume = self.resumed.remove(&name);
            match start_file_mount(ctx.clone(), &name, &path, fallback_file, resume) {
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
        // Carried-over file mounts the configuration no longer has end here.
        self.resumed.clear();
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
pub fn start_demo(ctx: Arc<ServerCtx>, resume: Option<Resumed>) -> Result<(), FileSourceError> {
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
        resume,
    )
}

/// A file mount's rebuilt mount and queue writer after a binary upgrade
/// (`mount/handover.rs`): the loop continues them instead of starting afresh.
pub type Resumed = (Arc<Mount>, QueueWriter);

/// File mounts carried across a binary upgrade, by mount name.
pub type ResumedFiles = std::collections::HashMap<String, Resumed>;

fn start_loop(
    ctx: Arc<ServerCtx>,
    spec: LoopSpec<'_>,
    resume: Option<Resumed>,
) -> Result<(), FileSourceError> {
    let (units, params) = frame_file(spec.data, spec.format)?;
    if let Some((mount, writer)) = resume {
        // The loop goes on where the old process stopped it, already a burst ahead.
        let first = resume_index(&units, writer.head());
        mount.set_params(params);
        let live = LiveMount::reserve(ctx.clone(), mount.clone(), usize::MAX)?;
        let feeder = Feeder::new(mount.clone(), writer, None, ctx.metrics.clone());
        tokio::spawn(loop_file(live, mount, feeder, units, first, false));
        return Ok(());
    }
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
    mount.set_params(params);
    let live = LiveMount::reserve(ctx.clone(), mount.clone(), usize::MAX)?;
    // Titled once registered, so the title reaches the ledger's play log.
    mount.set_title(spec.title, None, TitleSetter::File);
    let feeder = Feeder::new(mount.clone(), writer, None, ctx.metrics.clone());
    tokio::spawn(loop_file(live, mount, feeder, units, 0, true));
    Ok(())
}

/// Feeds `units` forever at real-time pace, from unit `first` on, until the mount is stopped
/// (admin `killsource`), then logs why it ended; the mount stays registered while `_live` is
/// held. With `preroll`, one burst's worth goes out at once first, so the first listener gets
/// a full burst (a loop resumed after an upgrade is already that far ahead). A binary upgrade
/// stops it between two units: everything is published and the new process continues at the
/// queue's head.
async fn loop_file(
    _live: LiveMount,
    mount: Arc<Mount>,
    mut feeder: Feeder,
    units: Vec<Unit>,
    first: usize,
    preroll: bool,
) {
    let start = tokio::time::Instant::now();
    let mut media_us: u64 = 0;
    let mut preroll_bytes = if preroll { 0 } else { usize::MAX };
    let mut index = first % units.len().max(1);
    let end = loop {
        if mount.stop.load(Ordering::Relaxed) {
            break StreamEnd::Killed;
        }
        if mount.handover.is_requested() {
            break StreamEnd::HandedOver;
        }
        let u = &units[index];
        index = (index + 1) % units.len();
        feeder.push_unit(u);
        if preroll_bytes < mount.burst_size() as usize {
            preroll_bytes += u.data.len();
            continue;
        }
        media_us += u.duration_us;
        let due = start + Duration::from_micros(media_us);
        if due > tokio::time::Instant::now() + Duration::from_millis(50) {
            feeder.flush();
            tokio::select! {
                _ = tokio::time::sleep_until(due) => {}
                _ = mount.handover.requested() => {}
            }
        }
    };
    if matches!(end, StreamEnd::HandedOver) {
        let (leftover, _) = feeder.freeze();
        debug_assert!(leftover.is_empty(), "a file feeds whole units");
        mount.handover.answer(FrozenFeed {
            socket: None,
            leftover: Vec::new(),
            demux: None,
            client: None,
        });
        tracing::info!(mount = %mount.name, "file mount handed over to the upgraded server");
        return;
    }
    feeder.finish();
    tracing::info!(mount = %mount.name, by = ?end.by(), "file mount ended: {end}");
}

/// The unit of a looped file at which a feed that has produced `head` bytes continues: the
/// loop restarts after `sum(unit sizes)` bytes, so `head` modulo that is the offset into the
/// file; a file changed since (no unit starts there) continues at the next unit.
pub fn resume_index(units: &[Unit], head: u64) -> usize {
    let total: u64 = units.iter().map(|u| u.data.len() as u64).sum();
    if total == 0 {
        return 0;
    }
    let mut at = head % total;
    for (i, u) in units.iter().enumerate() {
        if at == 0 {
            return i;
        }
        at = at.saturating_sub(u.data.len() as u64);
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resumed_loop_continues_at_the_unit_after_the_head() {
        let (units, _) = frame_file(DEMO_MP3, Format::Mp3).unwrap();
        let sizes: Vec<u64> = units.iter().map(|u| u.data.len() as u64).collect();
        let total: u64 = sizes.iter().sum();
        assert_eq!(resume_index(&units, 0), 0);
        assert_eq!(resume_index(&units, sizes[0]), 1);
        assert_eq!(resume_index(&units, sizes[0] + sizes[1]), 2);
        assert_eq!(resume_index(&units, 3 * total + sizes[0]), 1);
        assert_eq!(
            resume_index(&units, total - sizes[sizes.len() - 1]),
            units.len() - 1
        );
        // Inside a unit (the file changed): the next one.
        assert_eq!(resume_index(&units, 1), 1);
    }
}
