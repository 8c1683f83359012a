//! WHEP for MP3 and AAC mounts (issue 25): each such mount is transcoded to Ogg/Opus once,
//! not per viewer, and only while it has WebRTC viewers. The first viewer of a mount starts
//! its transcoder ([`Transcoders::feed_for`]), every viewer of it holds the same
//! [`Transcoding`], and when the last one lets go (a viewer that leaves or moves drops its
//! handle) the transcoder stops. The transcoder is a thread of its own (`pipeline.rs`: symphonia
//! decodes, rubato resamples, libopus encodes; never on the async runtime's workers) writing
//! Ogg/Opus pages into a queue of the same kind as a mount's, which the WHEP engines read as
//! they read an Ogg/Opus mount's queue ([`Transcoding::queue`]): the viewers' code is one for
//! both. Titles are the mount's (the station page and `/api/v1/events` show them whatever
//! path plays the audio), so nothing of them goes through the transcoder.
//!
//! Which feed a viewer of a mount plays is [`whep_feed`], one rule for the WHEP endpoint, the
//! status documents' `whep_url` and the engines.

pub mod frames;
pub mod pipeline;
pub mod source;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use throng_proto::format::Format;

use crate::mount::live::Mount;
use crate::mount::queue::{Queue, QueueWriter};

/// Bytes of Ogg/Opus a transcoded feed retains: about 10 s at 96 kbit/s, more than a viewer
/// joining at the live edge or a slow engine pass needs.
pub const FEED_RETAIN: u64 = 128 * 1024;

/// What a WebRTC viewer of a mount of some format plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhepFeed {
    /// The mount's own Ogg/Opus pages.
    Direct,
    /// The mount's MP3 or AAC, transcoded to Ogg/Opus once per mount.
    Transcoded,
}

/// What a WHEP viewer of a mount of `format` plays; `None`: WebRTC cannot play it (WebM and
/// unframed streams).
pub fn whep_feed(format: Format) -> Option<WhepFeed> {
    match format {
        Format::Ogg => Some(WhepFeed::Direct),
        Format::Mp3 | Format::Aac => Some(WhepFeed::Transcoded),
        Format::Ebml | Format::Other => None,
    }
}

/// Why a mount's WebRTC feed cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum TranscodeError {
    /// The mount's format is neither Ogg nor MP3 nor AAC.
    #[error("WebRTC plays Ogg/Opus, MP3 and AAC mounts only")]
    NotPlayable,
    /// The transcoder thread could not be started.
    #[error("the transcoder could not start: {0}")]
    Spawn(#[from] std::io::Error),
}

/// One running transcoder, shared by every viewer of its mount; dropping the last handle stops
/// it (the thread sees the stop within [`source::POLL`] and ends the feed).
#[derive(Debug)]
pub struct Transcoding {
    /// The mount transcoded.
    pub mount: String,
    /// The Ogg/Opus feed, read as a mount's queue is.
    pub queue: Arc<Queue>,
    stop: Arc<AtomicBool>,
    /// `throng_whep_transcoders`, counting this one while it runs.
    gauge: Gauge,
}

impl Drop for Transcoding {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.gauge.dec();
        tracing::debug!(mount = %self.mount, "transcoder: its last WebRTC viewer left");
    }
}

/// The running transcoders, by mount incarnation (`Mount::id`): each entry lives as long as a
/// viewer holds its handle.
#[derive(Debug)]
pub struct Transcoders {
    running: Mutex<HashMap<u64, Weak<Transcoding>>>,
    /// `throng_whep_transcoders`.
    gauge: Gauge,
    /// `throng_whep_transcode_skipped_total`.
    skipped: Counter,
    /// Samples per channel (48 kHz) of each Opus packet written.
    frame_samples: usize,
}

impl Default for Transcoders {
    /// Unregistered metrics, packets of [`frames::DEFAULT_FRAME_MS`].
    fn default() -> Transcoders {
        Transcoders::new(Gauge::default(), Counter::default(), None)
    }
}

impl Transcoders {
    /// No transcoder running yet; `gauge` (`throng_whep_transcoders`) counts those that run,
    /// `skipped` (`throng_whep_transcode_skipped_total`) what their decoders refused; each
    /// writes Opus packets of `frame_ms` ms (`[webrtc] transcode-frame-ms`, one of
    /// [`crate::config::TRANSCODE_FRAME_MS`]; `None` or another value: [`frames::DEFAULT_FRAME_MS`]).
    pub fn new(gauge: Gauge, skipped: Counter, frame_ms: Option<u32>) -> Transcoders {
        let frame_samples = frame_ms
            .and_then(frames::frame_samples)
            .or_else(|| frames::frame_samples(frames::DEFAULT_FRAME_MS))
            .unwrap_or(frames::FRAME_SAMPLES);
        Transcoders {
            running: Mutex::default(),
            gauge,
            skipped,
            frame_samples,
        }
    }

    /// The transcoded feed of `mount` for one more viewer: `Ok(None)` for an Ogg mount (its
    /// viewers read its own queue), the running transcoder's handle, or a new transcoder
    /// started for this first viewer.
    ///
    /// Errors: [`TranscodeError`] (a format WebRTC cannot play, a thread that cannot start).
    pub fn feed_for(&self, mount: &Arc<Mount>) -> Result<Option<Arc<Transcoding>>, TranscodeError> {
        match whep_feed(mount.settings.format) {
            None => return Err(TranscodeError::NotPlayable),
            Some(WhepFeed::Direct) => return Ok(None),
            Some(WhepFeed::Transcoded) => {}
        }
        let mut running = self.running.lock();
        running.retain(|_, t| t.strong_count() > 0);
        if let Some(t) = running.get(&mount.id).and_then(Weak::upgrade) {
            return Ok(Some(t));
        }
        let writer = QueueWriter::new(FEED_RETAIN);
        let stop = Arc::new(AtomicBool::new(false));
        let t = Arc::new(Transcoding {
            mount: mount.name.clone(),
            queue: writer.queue(),
            stop: stop.clone(),
            gauge: self.gauge.clone(),
        });
        let m = mount.clone();
        let skipped = self.skipped.clone();
        let frame_samples = self.frame_samples;
        std::thread::Builder::new()
            .name("transcode".into())
            .spawn(move || pipeline::run(m, writer, stop, skipped, frame_samples))?;
        tracing::info!(mount = %mount.name, "transcoder started for WebRTC viewers");
        self.gauge.inc();
        running.insert(mount.id, Arc::downgrade(&t));
        Ok(Some(t))
    }

    /// How many transcoders run now.
    pub fn running(&self) -> usize {
        self.running
            .lock()
            .values()
            .filter(|t| t.strong_count() > 0)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn ogg_plays_directly_mp3_and_aac_are_transcoded_the_rest_not_at_all() {
        assert_eq!(whep_feed(Format::Ogg), Some(WhepFeed::Direct));
        assert_eq!(whep_feed(Format::Mp3), Some(WhepFeed::Transcoded));
        assert_eq!(whep_feed(Format::Aac), Some(WhepFeed::Transcoded));
        assert_eq!(whep_feed(Format::Ebml), None);
        assert_eq!(whep_feed(Format::Other), None);
    }

    fn mount(format: Format) -> (Arc<Mount>, QueueWriter) {
        crate::mount::live::test_support::test_mount("/t", format)
    }

    #[test]
    fn one_transcoder_per_mount_from_the_first_viewer_to_the_last() {
        let ts = Transcoders::default();
        let (ogg, _w) = mount(Format::Ogg);
        assert!(ts.feed_for(&ogg).unwrap().is_none());
        let (other, _w2) = mount(Format::Other);
        assert!(matches!(
            ts.feed_for(&other),
            Err(TranscodeError::NotPlayable)
        ));
        assert_eq!(ts.running(), 0);
        let (mp3, _w3) = mount(Format::Mp3);
        let a = ts.feed_for(&mp3).unwrap().expect("transcoded");
        let b = ts.feed_for(&mp3).unwrap().expect("transcoded");
        assert!(Arc::ptr_eq(&a, &b), "one per mount");
        assert_eq!(ts.running(), 1);
        let (aac, _w4) = mount(Format::Aac);
        let c = ts.feed_for(&aac).unwrap().expect("transcoded");
        assert_eq!(ts.running(), 2);
        assert_eq!(ts.gauge.get(), 2);
        let feed = a.queue.clone();
        drop(a);
        assert_eq!(ts.running(), 2, "b still plays it");
        drop(b);
        assert_eq!(ts.running(), 1);
        // The stopped thread ends its feed (it was waiting for input).
        let t0 = Instant::now();
        while !feed.load().ended {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "the transcoder stops"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(c);
        assert_eq!(ts.running(), 0);
        assert_eq!(ts.gauge.get(), 0);
        // A new first viewer starts a new one.
        let d = ts.feed_for(&mp3).unwrap().expect("transcoded");
        assert!(!d.queue.load().ended);
        assert_eq!(ts.running(), 1);
    }
}
