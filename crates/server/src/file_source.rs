//! A mount fed by a file looped forever, paced in real time by frame durations: the built-in
//! demo mount (a synthetic MP3 arpeggio embedded in the binary, made by `scripts/make-demo-audio.sh`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use throng_proto::format::Format;
use throng_proto::framer::{Framer, StreamParams, Unit};
use throng_proto::source_info::SourceInfo;

use crate::feeder::Feeder;
use crate::mount::{stream_headers, Mount, MountSettings, SourceKind};
use crate::ring::FeedWriter;
use crate::server::ServerCtx;

/// The demo audio: 64 kbit/s CBR MP3, 44.1 kHz, no ID3 tag (`assets/demo.mp3`).
pub static DEMO_MP3: &[u8] = include_bytes!("../../../assets/demo.mp3");

/// Frames a whole file into units and the audio parameters seen; errors if it holds no timed
/// frame of `format`.
pub fn frame_file(data: &[u8], format: Format) -> Result<(Vec<Unit>, StreamParams), String> {
    let mut framer = Framer::new(format);
    framer.push(data);
    framer.finish();
    let units: Vec<Unit> = std::iter::from_fn(|| framer.next_unit())
        .filter_map(Result::ok)
        .collect();
    if units.is_empty() || units.iter().all(|u| u.duration_us == 0) {
        return Err(format!("no timed {format:?} frames in file"));
    }
    Ok((units, framer.params()))
}

/// Starts the demo mount from the embedded file.
///
/// Errors: the embedded file holds no MP3 frames, or the mount name is taken.
pub fn start_demo(ctx: Arc<ServerCtx>) -> Result<(), String> {
    let (units, params) = frame_file(DEMO_MP3, Format::Mp3)?;
    let info = SourceInfo {
        name: "Throng demo".into(),
        description: "A synthetic arpeggio looped in real time".into(),
        genre: "Demo".into(),
        bitrate: Some("64".into()),
        ..SourceInfo::default()
    };
    let (user, pass) = ctx.source_credentials(&ctx.config.demo_mount);
    let burst = ctx.config.limits.burst_size;
    let writer = FeedWriter::new(ctx.config.limits.queue_size.max(burst) as u64);
    let settings = MountSettings {
        format: Format::Mp3,
        content_type: "audio/mpeg".into(),
        stream_headers: stream_headers(&info),
        info,
        hidden: false,
        max_listeners: None,
        burst_size: burst as u64,
        source_user: user,
        source_password: pass,
        source_ip: None,
        kind: SourceKind::File,
    };
    let mount = Arc::new(Mount::new(&ctx.config.demo_mount, settings, writer.feed()));
    mount.set_title("Throng demo", None);
    mount.set_params(params);
    ctx.registry
        .reserve(mount.clone(), usize::MAX)
        .map_err(|e| e.to_string())?;
    ctx.metrics.sources.inc();
    let feeder = Feeder::new(mount.clone(), writer, None, ctx.metrics.clone());
    tokio::spawn(loop_file(ctx, mount, feeder, units));
    Ok(())
}

/// Feeds `units` forever at real-time pace until the mount is stopped.
async fn loop_file(ctx: Arc<ServerCtx>, mount: Arc<Mount>, mut feeder: Feeder, units: Vec<Unit>) {
    let start = tokio::time::Instant::now();
    let mut media_us: u64 = 0;
    // Pre-roll one burst's worth so the first listener gets a full burst at once.
    let mut preroll_bytes = 0usize;
    'outer: loop {
        for u in &units {
            if mount.stop.load(Ordering::Relaxed) {
                break 'outer;
            }
            feeder.push_unit(u);
            mount
                .source_bytes
                .fetch_add(u.data.len() as u64, Ordering::Relaxed);
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
    }
    drop(feeder);
    ctx.registry.remove(&mount.name, mount.id);
    ctx.metrics.sources.dec();
}
