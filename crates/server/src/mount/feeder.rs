//! Feeds a mount from raw bytes, whatever their origin (a source client's body, a file, a
//! relay): strips inline ICY metadata (taking its titles), frames the audio, and chunks it into
//! the mount's queue. Detects garbage where audio was announced.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use thiserror::Error;
use throng_proto::format::Format;
use throng_proto::framer::{FrameError, Framer, Unit, UnitKind};
use throng_proto::icy::{clean_title, stream_title, stream_url, IcyDemuxer, IcyError, IcyPiece};

use crate::ledger::TitleSetter;
use crate::mount::chunker::Chunker;
use crate::mount::live::Mount;
use crate::mount::ogg_retag::OggRetagger;
use crate::mount::queue::QueueWriter;
use crate::observe::metrics::{Metrics, MountLabel};

/// Consecutive bytes that are not frames of the announced format after which the source is
/// closed.
pub const GARBAGE_LIMIT: usize = 64 * 1024;

/// A pending chunk older than this is published even if shorter than a chunk's worth of audio.
pub const MAX_CHUNK_AGE: Duration = Duration::from_millis(200);

/// Why a feed must end.
#[derive(Debug, Error)]
pub enum FeederError {
    /// Too many consecutive bytes were not audio of the announced format.
    #[error("{bytes} consecutive bytes are not {format:?} audio{hint}")]
    Garbage {
        /// Bytes of garbage in a row.
        bytes: usize,
        /// The announced format.
        format: Format,
        /// What the bytes are instead, e.g. " (they look like Ogg: announce Content-Type
        /// audio/ogg)" or " (they are not audio of any known format)".
        hint: String,
    },
    /// An Ogg stream whose first valid page is not a beginning-of-stream (BOS) page: its first
    /// page was corrupt (bad CRC) or the source started mid-stream. Without the BOS and codec
    /// header pages no listener could decode it, so it is refused rather than relayed.
    #[error(
        "the Ogg stream has no valid BOS (beginning-of-stream) page: its first valid page \
         (after {skipped} bytes that are not Ogg pages) is a data page, so listeners could not \
         decode it; the first page was corrupt (bad CRC) or the stream started mid-way"
    )]
    NoOggHeaders {
        /// Bytes skipped before that page.
        skipped: usize,
    },
    /// The source's inline ICY metadata was malformed.
    #[error("bad inline ICY metadata: {0}")]
    Metadata(#[from] IcyError),
}

/// The feeding side of one mount.
#[derive(Debug)]
pub struct Feeder {
    mount: Arc<Mount>,
    framer: Framer,
    chunker: Chunker,
    demux: Option<IcyDemuxer>,
    garbage_run: usize,
    last_publish: Instant,
    published_head: u64,
    metrics: Arc<Metrics>,
    label: MountLabel,
    last_input_hint: String,
    /// Ogg mounts: puts admin title updates into the stream.
    retag: Option<OggRetagger>,
    /// Ogg mounts: whether the stream's first valid page was a BOS page (until then, a data
    /// page ends the feed with [`FeederError::NoOggHeaders`]).
    ogg_bos_seen: bool,
    /// Bytes skipped so far before the first Ogg page.
    skipped_before_first: usize,
}

/// Frames in a row that must chain (each header where the previous frame ends, same stream)
/// before `data` is said to look like MP3 or ADTS: random bytes hold a valid-looking frame
/// header every few kilobytes, but almost never three that chain.
const SNIFF_CHAIN: usize = 3;

/// Whether `data` holds [`SNIFF_CHAIN`] chained frames of a format whose headers `parse`
/// reads (or a shorter chain that runs to the end of `data`, at least two frames).
fn has_frame_chain<H>(
    data: &[u8],
    parse: impl Fn(&[u8]) -> Option<H>,
    len_of: impl Fn(&H) -> usize,
    same: impl Fn(&H, &H) -> bool,
) -> bool {
    for start in (0..data.len()).filter(|&i| data[i] == 0xFF) {
        let Some(first) = parse(&data[start..]) else {
            continue;
        };
        let mut pos = start + len_of(&first);
        let mut frames = 1;
        while frames < SNIFF_CHAIN {
            if pos >= data.len() {
                // The chain runs off the end of what was received: as good as it gets.
                if frames >= 2 {
                    return true;
                }
                break;
            }
            match parse(&data[pos..]) {
                Some(h) if same(&first, &h) => {
                    pos += len_of(&h);
                    frames += 1;
                }
                _ => break,
            }
        }
        if frames >= SNIFF_CHAIN {
            return true;
        }
    }
    false
}

/// Names what `data` is when it is not audio of the `announced` format, for a source that
/// announced the wrong Content-Type (ffmpeg announces `audio/mpeg` for Ogg unless told
/// `-content_type audio/ogg`): another format only on firm evidence (an Ogg page whose CRC
/// matches, or [`SNIFF_CHAIN`] chained MP3 or ADTS frames), else "not audio of any known
/// format" (random bytes, text, a protocol error).
fn sniff_hint(data: &[u8], announced: Format) -> String {
    use throng_proto::ogg::{parse_page, PageParse};
    let ogg = announced != Format::Ogg
        && data
            .windows(4)
            .enumerate()
            .any(|(i, w)| w == b"OggS" && matches!(parse_page(&data[i..]), PageParse::Page(_)));
    let adts = announced != Format::Aac
        && has_frame_chain(
            data,
            throng_proto::adts::parse_header,
            |h| h.frame_len,
            |a, b| a.same_stream(b),
        );
    let mp3 = announced != Format::Mp3
        && has_frame_chain(
            data,
            throng_proto::mp3::parse_header,
            |h| h.frame_len,
            |a, b| a.same_stream(b),
        );
    let name = if ogg {
        "they look like Ogg: announce Content-Type audio/ogg"
    } else if adts {
        "they look like AAC (ADTS): announce Content-Type audio/aac"
    } else if mp3 {
        "they look like MP3: announce Content-Type audio/mpeg"
    } else {
        "they are not audio of any known format"
    };
    format!(" ({name})")
}

impl Feeder {
    /// A feeder for `mount` writing through `writer`; `icy_metaint` when the bytes carry inline
    /// ICY metadata (a source that sent `icy-metaint`).
    pub fn new(
        mount: Arc<Mount>,
        writer: QueueWriter,
        icy_metaint: Option<usize>,
        metrics: Arc<Metrics>,
    ) -> Feeder {
        Feeder {
            framer: Framer::new(mount.settings.format),
            chunker: Chunker::new(writer),
            demux: icy_metaint.filter(|&m| m > 0).map(IcyDemuxer::new),
            garbage_run: 0,
            last_publish: Instant::now(),
            published_head: 0,
            label: MountLabel::new(&mount.name),
            retag: (mount.settings.format == Format::Ogg).then(OggRetagger::new),
            mount,
            metrics,
            last_input_hint: String::new(),
            ogg_bos_seen: false,
            skipped_before_first: 0,
        }
    }

    /// A feeder continuing a feed carried across a binary upgrade: `writer` continues the
    /// rebuilt queue, `demux` is the source's inline ICY position, `leftover` the bytes it had
    /// received but not framed. An Ogg framer is first shown the current header pages (already
    /// in the queue, not published again) so it knows the logical streams that follow.
    ///
    /// Errors: as [`Feeder::push`], for the leftover bytes.
    pub fn resume(
        mount: Arc<Mount>,
        writer: QueueWriter,
        demux: Option<throng_proto::icy::IcyDemuxState>,
        leftover: &[u8],
        metrics: Arc<Metrics>,
    ) -> Result<Feeder, FeederError> {
        let headers = writer.queue().load().ogg_headers.clone();
        let mut f = Feeder::new(mount, writer, None, metrics);
        f.demux = demux.map(IcyDemuxer::from_state);
        // The headers in the queue came from a BOS page the old process accepted.
        f.ogg_bos_seen = headers.is_some();
        if let Some(h) = &headers {
            f.framer.push(h);
            while let Some(Ok(_)) = f.framer.next_unit() {}
            f.chunker.continue_after(h.clone());
        }
        if !leftover.is_empty() {
            f.framer.push(leftover);
            f.drain()?;
        }
        Ok(f)
    }

    /// Stops the feed for a binary upgrade: publishes every framed unit, and returns the bytes
    /// received but not framed yet and the inline ICY position.
    pub fn freeze(mut self) -> (Vec<u8>, Option<throng_proto::icy::IcyDemuxState>) {
        self.chunker.flush();
        let demux = self.demux.as_ref().map(IcyDemuxer::state);
        let framer = std::mem::replace(&mut self.framer, Framer::new(Format::Other));
        (framer.into_unconsumed(), demux)
    }

    /// Feeds received bytes.
    ///
    /// Errors: [`FeederError::Garbage`] after [`GARBAGE_LIMIT`] bytes without a frame,
    /// [`FeederError::Metadata`] for malformed inline metadata.
    pub fn push(&mut self, data: &[u8]) -> Result<(), FeederError> {
        if self.garbage_run > 0 {
            self.last_input_hint = sniff_hint(data, self.mount.settings.format);
        }
        match &mut self.demux {
            Some(d) => {
                let mut blocks = Vec::new();
                let framer = &mut self.framer;
                let mut audio = 0usize;
                d.feed(data, |p| match p {
                    IcyPiece::Audio(a) => {
                        audio += a.len();
                        framer.push(a);
                    }
                    IcyPiece::Metadata(m) if !m.is_empty() => blocks.push(m),
                    IcyPiece::Metadata(_) => {}
                })?;
                self.count_received(audio);
                for m in blocks {
                    if let Some(t) = stream_title(&m) {
                        // Sources repeat their block; only a change goes out to listeners.
                        // (Compared as stored: without control characters.)
                        if clean_title(&t) != self.mount.title() {
                            self.mount.set_title(
                                &t,
                                stream_url(&m).as_deref(),
                                TitleSetter::Source,
                            );
                        }
                    }
                }
            }
            None => {
                self.count_received(data.len());
                self.framer.push(data);
            }
        }
        let mut r = self.drain();
        if let Err(FeederError::Garbage { hint, format, .. }) = &mut r {
            // The whole run arrived in this read: name what it is from it.
            if hint.is_empty() {
                *hint = sniff_hint(data, *format);
            }
        }
        r
    }

    fn count_received(&self, n: usize) {
        self.mount
            .source_bytes
            .fetch_add(n as u64, Ordering::Relaxed);
        self.metrics
            .source_bytes
            .get_or_create(&self.label)
            .inc_by(n as u64);
    }

    fn drain(&mut self) -> Result<(), FeederError> {
        while let Some(r) = self.framer.next_unit() {
            match r {
                Ok(unit) => {
                    self.garbage_run = 0;
                    if self.mount.settings.format == Format::Ogg && !self.ogg_bos_seen {
                        if unit.kind != (UnitKind::OggHeader { new_chain: true }) {
                            return Err(FeederError::NoOggHeaders {
                                skipped: self.skipped_before_first,
                            });
                        }
                        self.ogg_bos_seen = true;
                    }
                    self.forward(unit);
                }
                Err(FrameError::Garbage { skipped, format }) => {
                    self.garbage_run += skipped;
                    if !self.ogg_bos_seen {
                        self.skipped_before_first += skipped;
                    }
                    tracing::debug!(mount = %self.mount.name, skipped, "skipped non-audio bytes");
                    if self.garbage_run >= GARBAGE_LIMIT {
                        return Err(FeederError::Garbage {
                            bytes: self.garbage_run,
                            format,
                            hint: self.last_input_hint.clone(),
                        });
                    }
                }
            }
        }
        self.mount.set_params(self.framer.params());
        self.maybe_flush();
        Ok(())
    }

    /// Feeds one unit that is already framed (a file source).
    pub fn push_unit(&mut self, unit: &Unit) {
        self.count_received(unit.data.len());
        self.forward(unit.clone());
        self.maybe_flush();
    }

    /// Hands a unit to the chunker, through the Ogg retagger on Ogg mounts.
    fn forward(&mut self, unit: Unit) {
        match &mut self.retag {
            Some(r) => {
                let chunker = &mut self.chunker;
                r.push(&self.mount, unit, &mut |u| chunker.push(&u));
            }
            None => self.chunker.push(&unit),
        }
    }

    fn maybe_flush(&mut self) {
        let head = self.chunker.head();
        if head != self.published_head {
            self.published_head = head;
            self.last_publish = Instant::now();
        } else if self.last_publish.elapsed() >= MAX_CHUNK_AGE {
            self.chunker.flush();
            self.published_head = self.chunker.head();
            self.last_publish = Instant::now();
        }
    }

    /// Publishes whatever is pending.
    pub fn flush(&mut self) {
        self.chunker.flush();
    }

    /// Ends the feed: the framer gives up its last frame (which no following header can confirm
    /// any more) and everything is published. Garbage at the very end is ignored.
    pub fn finish(mut self) {
        self.framer.finish();
        let _ = self.drain();
        self.chunker.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mount::handover::QueueState;
    use crate::mount::live::test_support::test_mount;

    /// Everything a queue holds, from offset 0, and the Ogg headers a listener joining at its
    /// last chunk gets.
    fn bytes_of(writer_queue: &crate::mount::queue::Queue) -> (Vec<u8>, Option<Vec<u8>>) {
        let s = writer_queue.load();
        assert_eq!(s.tail(), 0, "the test queue retains everything");
        let headers = s
            .chunks
            .last()
            .and_then(|c| c.ogg_headers.as_ref().map(|h| h.to_vec()));
        (
            s.chunks.iter().flat_map(|c| c.data.to_vec()).collect(),
            headers,
        )
    }

    /// The queue bytes of `data` fed whole, and fed in two processes cut at `cut`.
    #[allow(clippy::type_complexity)]
    fn whole_and_carried(
        format: Format,
        data: &[u8],
        cut: usize,
    ) -> ((Vec<u8>, Option<Vec<u8>>), (Vec<u8>, Option<Vec<u8>>)) {
        let metrics = Arc::new(Metrics::new());
        let (m, _) = test_mount("/a", format);
        let w = QueueWriter::new(1 << 26);
        let m = Arc::new(Mount::new("/a", m.settings.clone(), w.queue()));
        let mut f = Feeder::new(m.clone(), w, None, metrics.clone());
        f.push(data).unwrap();
        f.finish();
        let whole = bytes_of(&m.queue);

        let w = QueueWriter::new(1 << 26);
        let m1 = Arc::new(Mount::new("/b", m.settings.clone(), w.queue()));
        let mut f = Feeder::new(m1.clone(), w, None, metrics.clone());
        f.push(&data[..cut]).unwrap();
        let (leftover, demux) = f.freeze();
        let (chunks, head, headers) = QueueState::from_snapshot(&m1.queue.load()).into_chunks();
        let w = QueueWriter::resume(1 << 26, chunks, head, headers);
        let m2 = Arc::new(Mount::new("/b", m.settings.clone(), w.queue()));
        let mut f = Feeder::resume(m2.clone(), w, demux, &leftover, metrics).unwrap();
        f.push(&data[cut..]).unwrap();
        f.finish();
        (whole, bytes_of(&m2.queue))
    }

    fn asset(name: &str) -> Vec<u8> {
        std::fs::read(format!(
            "{}/../../assets/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    }

    /// Deterministic pseudo-random bytes (xorshift).
    fn random_bytes(n: usize, mut x: u64) -> Vec<u8> {
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn random_bytes_are_not_named_mp3_or_aac() {
        for seed in 1..20u64 {
            let data = random_bytes(64 * 1024, seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            for announced in [Format::Ogg, Format::Mp3, Format::Aac] {
                assert_eq!(
                    sniff_hint(&data, announced),
                    " (they are not audio of any known format)",
                    "seed {seed}, announced {announced:?}"
                );
            }
        }
    }

    #[test]
    fn real_streams_under_the_wrong_type_are_named() {
        let mp3 = asset("demo.mp3");
        let aac = asset("test-tone.aac");
        let ogg = asset("test-tone.opus");
        assert!(sniff_hint(&mp3[..16 * 1024], Format::Ogg).contains("look like MP3"));
        assert!(sniff_hint(&aac[..16 * 1024], Format::Ogg).contains("look like AAC"));
        assert!(sniff_hint(&ogg[..16 * 1024], Format::Mp3).contains("look like Ogg"));
    }

    #[test]
    fn an_ogg_stream_without_its_bos_page_is_refused() {
        let mut data = asset("test-tone.opus");
        data[22] ^= 0xFF; // the first page's CRC
        let metrics = Arc::new(Metrics::new());
        let (m, _) = test_mount("/a", Format::Ogg);
        let w = QueueWriter::new(1 << 26);
        let m = Arc::new(Mount::new("/a", m.settings.clone(), w.queue()));
        let mut f = Feeder::new(m.clone(), w, None, metrics);
        let err = f.push(&data).unwrap_err();
        assert!(
            matches!(err, FeederError::NoOggHeaders { skipped } if skipped > 0),
            "{err}"
        );
        // Nothing was published.
        f.finish();
        assert!(bytes_of(&m.queue).0.is_empty());
    }

    #[test]
    fn an_mp3_feed_frozen_anywhere_and_resumed_queues_the_same_bytes() {
        let data = asset("demo.mp3");
        for cut in [1, 150, 209, 5_000, 10_001, data.len() / 2] {
            let (whole, carried) = whole_and_carried(Format::Mp3, &data, cut);
            assert!(whole.0.len() > 10_000);
            assert!(whole == carried, "cut at {cut}");
        }
    }

    #[test]
    fn an_ogg_opus_feed_frozen_after_its_headers_and_resumed_queues_the_same_bytes() {
        let data = asset("test-tone.opus");
        for cut in [data.len() / 3, data.len() / 2 + 7, data.len() - 100] {
            let (whole, carried) = whole_and_carried(Format::Ogg, &data, cut);
            assert!(whole.0.len() > 1_000);
            // A listener joining after the upgrade gets the header pages first.
            assert!(whole.1.is_some());
            assert!(whole == carried, "cut at {cut}");
        }
    }
}
