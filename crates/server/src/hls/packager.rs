//! One mount name's HLS packager: follows what a listener of that name hears (the live mount,
//! else its fallback, as [`crate::mount::registry::Registry::resolve`] says) through the mount's
//! queue, the way a fan-out cursor does (absolute offsets, shared chunks), re-frames the chunks
//! with [`throng_proto::framer`] and cuts packed-audio segments with
//! [`throng_proto::hls::cutter`]. Each segment starts with the ID3 tag of
//! [`throng_proto::hls::id3`] (PRIV timestamp from the sample count, and the title when known).
//! A change of mount (source reconnect, fallback, a return from fallback) or of format closes
//! the open segment and marks the next one `EXT-X-DISCONTINUITY`. The packager owns its state
//! and is driven by one task; readers see only the published [`Window`], and wait for the next
//! one on [`Packager::updates`] (blocking playlist reload).

use std::collections::VecDeque;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use arc_swap::ArcSwap;
use bytes::{Bytes, BytesMut};
use throng_proto::format::Format;
use throng_proto::framer::{Framer, UnitKind};
use throng_proto::hls::cutter::{self, Cutter};
use throng_proto::hls::id3;
use throng_proto::hls::playlist::{MediaPlaylist, PlaylistSegment};

use crate::audience::follow::{self, JoinAt};
use crate::config::HlsSettings;
use crate::mount::live::Mount;

/// Segments kept beyond the playlist window, for players that fetched the playlist just before
/// the window slid.
pub const EXTRA_SEGMENTS: usize = 4;

/// A finished segment, shared by every request for it.
#[derive(Debug)]
pub struct Segment {
    /// Media sequence number (its URI is `<seq>.<ext>`).
    pub seq: u64,
    /// `mp3` or `aac`.
    pub ext: &'static str,
    /// The ID3 tag followed by whole frames.
    pub data: Bytes,
    /// Play time in nanoseconds.
    pub duration_ns: u64,
    /// Preceded by a discontinuity.
    pub discontinuity: bool,
    /// Wall-clock time of its first sample, ms since the Unix epoch.
    pub pdt_ms: i64,
    /// Times it was requested (one fetch per player, or per cache miss behind a proxy).
    pub fetches: AtomicU64,
}

/// What readers see: the segments in memory and the playlist listing the newest of them.
#[derive(Debug, Default)]
pub struct Window {
    /// Segments in memory, oldest first (the playlist lists the last `window` of them).
    pub segments: Vec<Arc<Segment>>,
    /// The media playlist text (empty of segments until the first one is cut).
    pub playlist: Bytes,
    /// `EXT-X-TARGETDURATION` in seconds.
    pub target_secs: u64,
    /// Bits per second of the audio, for the master playlist's `BANDWIDTH`.
    pub bandwidth: u64,
    /// The playlist's `EXT-X-DISCONTINUITY-SEQUENCE` (a moved session's own playlist starts
    /// from it).
    pub discontinuity_sequence: u64,
}

impl Window {
    /// The segment with sequence number `seq`, if still in memory.
    pub fn segment(&self, seq: u64) -> Option<&Arc<Segment>> {
        let first = self.segments.first()?.seq;
        let s = self
            .segments
            .get(usize::try_from(seq.checked_sub(first)?).ok()?)?;
        (s.seq == seq).then_some(s)
    }
}

/// The mount being followed.
struct Following {
    mount: Arc<Mount>,
    format: Format,
    ext: &'static str,
    pos: u64,
    framer: Framer,
}

/// The segment being filled.
#[derive(Default)]
struct Open {
    data: BytesMut,
    pts_90k: u64,
    discontinuity: bool,
    title: String,
    bytes_audio: u64,
}

/// A packager for one mount name.
pub struct Packager {
    /// The mount name players ask for.
    pub name: String,
    settings: HlsSettings,
    window: Arc<ArcSwap<Window>>,
    /// Bumped after every publication of `window`, to wake held playlist requests.
    updates: tokio::sync::watch::Sender<u64>,
    following: Option<Following>,
    cutter: Cutter,
    open: Open,
    /// 90 kHz timestamp of sample 0 of the current run (same mount and sample rate).
    base_90k: u64,
    run_samples: u64,
    run_rate: u32,
    next_seq: u64,
    discontinuity_pending: bool,
    /// Discontinuities dropped from memory (those still in memory but not listed are
    /// counted when the playlist is rendered).
    discontinuity_seq: u64,
    segments: VecDeque<Arc<Segment>>,
    last_pdt_end_ms: Option<i64>,
    /// Highest bits per second of a segment so far.
    bandwidth: u64,
    /// When a mount was last followed (ms since the epoch), to retire idle packagers.
    pub last_live_ms: i64,
}

impl std::fmt::Debug for Packager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packager")
            .field("name", &self.name)
            .field("next_seq", &self.next_seq)
            .finish()
    }
}

impl Packager {
    /// A packager for `name`; its first segment is numbered `first_seq` (the Unix time in
    /// seconds when it starts, so segment URLs are not reused after a restart: segments last at
    /// least a second, except the one cut short by a switch).
    pub fn new(name: &str, settings: HlsSettings, first_seq: u64, now_ms: i64) -> Packager {
        let mut p = Packager {
            name: name.to_owned(),
            settings,
            window: Default::default(),
            updates: tokio::sync::watch::Sender::new(0),
            following: None,
            cutter: Cutter::new(settings.target_ms),
            open: Open::default(),
            base_90k: 0,
            run_samples: 0,
            run_rate: 0,
            next_seq: first_seq,
            discontinuity_pending: false,
            discontinuity_seq: 0,
            segments: VecDeque::new(),
            last_pdt_end_ms: None,
            bandwidth: 0,
            last_live_ms: now_ms,
        };
        p.publish_window();
        p
    }

    /// The published window, shared with readers.
    pub fn window(&self) -> Arc<ArcSwap<Window>> {
        self.window.clone()
    }

    /// A receiver that sees a change after every publication of the window (the value counts
    /// publications), for requests held until a segment is cut.
    pub fn updates(&self) -> tokio::sync::watch::Receiver<u64> {
        self.updates.subscribe()
    }

    /// The settings in force.
    pub fn settings(&self) -> HlsSettings {
        self.settings
    }

    /// Applies new settings (a reload): the next segment uses the new target.
    pub fn retune(&mut self, settings: HlsSettings) {
        if settings != self.settings {
            self.settings = settings;
            self.cutter = Cutter::new(settings.target_ms);
            self.publish_window();
        }
    }

    /// Packages what `serving` (the mount a listener of this name hears now, if any) produced
    /// since the last call; `now_ms` is the wall clock in ms since the Unix epoch.
    pub fn tick(&mut self, serving: Option<Arc<Mount>>, now_ms: i64) {
        let serving = serving.filter(|m| cutter::segment_extension(m.settings.format).is_some());
        let same = match (&self.following, &serving) {
            (Some(f), Some(m)) => f.mount.id == m.id,
            (None, None) => true,
            _ => false,
        };
        if !same {
            let first = self.following.is_none() && self.segments.is_empty();
            if self.following.take().is_some() {
                self.close_segment(now_ms);
                self.discontinuity_pending = true;
            }
            if let Some(m) = &serving {
                let q = m.queue.load();
                // The first mount starts at the burst point so a segment is ready soon; a
                // switch continues at the new mount's live edge.
                let pos = if first {
                    follow::join(&q, JoinAt::Burst(m.burst_size())).pos
                } else {
                    q.head
                };
                let format = m.settings.format;
                self.following = Some(Following {
                    mount: m.clone(),
                    format,
                    ext: cutter::segment_extension(format).unwrap_or("mp3"),
                    pos,
                    framer: Framer::new(format),
                });
                self.rebase();
            }
        }
        let Some(f) = &mut self.following else {
            return;
        };
        self.last_live_ms = now_ms;
        let q = f.mount.queue.load();
        if f.pos < q.tail() {
            // Fell behind the queue (should not happen at 10 ticks a second): skip ahead.
            f.pos = q.head;
            f.framer = Framer::new(f.format);
            self.discontinuity_pending = true;
        }
        let mut frames = Vec::new();
        if let Some(i) = q.chunk_index(f.pos) {
            for c in &q.chunks[i..] {
                let skip = (f.pos - c.start) as usize;
                f.framer.push(&c.data[skip..]);
                f.pos = c.end();
            }
            while let Some(u) = f.framer.next_unit() {
                if let Ok(u) = u {
                    if u.kind == UnitKind::Audio {
                        frames.push(u.data);
                    }
                }
            }
        }
        // The last frame of this tick arrived about now; each earlier one ended earlier by the
        // play time of the frames after it (a backlog packaged at once keeps its timeline).
        let format = f.format;
        let durs: Vec<u64> = frames
            .iter()
            .map(|fr| {
                cutter::frame_samples(format, fr).map_or(0, |(n, r)| {
                    u64::from(n) * 1_000_000_000 / u64::from(r.max(1))
                })
            })
            .collect();
        let total: u64 = durs.iter().sum();
        let mut done = 0;
        for (frame, d) in frames.into_iter().zip(durs) {
            done += d;
            let end_ms = now_ms - ((total - done) / 1_000_000) as i64;
            self.add_frame(frame, end_ms);
        }
    }

    /// Starts a new timestamp run at the end of the previous one.
    fn rebase(&mut self) {
        self.base_90k = id3::pts_90k(self.base_90k, self.run_samples, self.run_rate);
        self.run_samples = 0;
    }

    /// Adds one frame whose last sample arrived at `end_ms`.
    fn add_frame(&mut self, frame: Bytes, end_ms: i64) {
        let Some(format) = self.following.as_ref().map(|f| f.format) else {
            return;
        };
        let Some((samples, rate)) = cutter::frame_samples(format, &frame) else {
            return;
        };
        if rate != self.run_rate {
            self.rebase();
            self.run_rate = rate;
        }
        if self.open.data.is_empty() {
            self.open.pts_90k = id3::pts_90k(self.base_90k, self.run_samples, self.run_rate);
            self.open.discontinuity = std::mem::take(&mut self.discontinuity_pending);
            self.open.title = self
                .following
                .as_ref()
                .map(|f| f.mount.title())
                .unwrap_or_default();
            let tag = id3::segment_tag(self.open.pts_90k, Some(&self.open.title));
            self.open.data.extend_from_slice(&tag);
        }
        self.open.data.extend_from_slice(&frame);
        self.open.bytes_audio += frame.len() as u64;
        self.run_samples += u64::from(samples);
        if self.cutter.push(samples, rate) {
            self.close_segment(end_ms);
        }
    }

    /// Publishes the open segment, if it holds any frame; its last frame ended at `now_ms`.
    fn close_segment(&mut self, now_ms: i64) {
        let len = self.cutter.take();
        let open = std::mem::take(&mut self.open);
        if len.frames == 0 {
            self.discontinuity_pending |= open.discontinuity;
            return;
        }
        let dur_ms = (len.duration_ns / 1_000_000) as i64;
        // Program date-time: continuous from the previous segment while it stays within a
        // second of the wall clock (its last frame arrived just now); re-anchored otherwise.
        let wall = now_ms - dur_ms;
        let pdt_ms = match self.last_pdt_end_ms {
            Some(prev) if !open.discontinuity && (prev - wall).abs() < 1000 => prev,
            _ => wall,
        };
        self.last_pdt_end_ms = Some(pdt_ms + dur_ms);
        let ext = self.following.as_ref().map_or("mp3", |f| f.ext);
        if let Some(bps) = (open.bytes_audio * 8 * 1_000_000_000).checked_div(len.duration_ns) {
            self.bandwidth = self.bandwidth.max(bps);
        }
        self.segments.push_back(Arc::new(Segment {
            seq: self.next_seq,
            ext,
            data: open.data.freeze(),
            duration_ns: len.duration_ns,
            discontinuity: open.discontinuity,
            pdt_ms,
            fetches: AtomicU64::new(0),
        }));
        self.next_seq += 1;
        while self.segments.len() > self.settings.window + EXTRA_SEGMENTS {
            if self.segments.pop_front().is_some_and(|s| s.discontinuity) {
                self.discontinuity_seq += 1;
            }
        }
        self.publish_window();
    }

    fn publish_window(&mut self) {
        let listed = self.segments.len().min(self.settings.window);
        let first_listed = self.segments.len() - listed;
        // Discontinuities before the first listed segment, since the packager started.
        let hidden_disc = self
            .segments
            .iter()
            .take(first_listed)
            .filter(|s| s.discontinuity)
            .count() as u64;
        let listed_segs: Vec<&Arc<Segment>> = self.segments.iter().skip(first_listed).collect();
        let target = cutter::target_duration_secs(
            self.settings.target_ms,
            listed_segs.iter().map(|s| s.duration_ns),
        );
        let discontinuity_sequence = self.discontinuity_seq + hidden_disc;
        let playlist = MediaPlaylist {
            target_duration: target,
            media_sequence: listed_segs.first().map_or(self.next_seq, |s| s.seq),
            discontinuity_sequence,
            segments: listed_segs
                .iter()
                .map(|s| PlaylistSegment {
                    uri: format!("{}.{}", s.seq, s.ext),
                    duration_secs: s.duration_ns as f64 / 1e9,
                    discontinuity: s.discontinuity,
                    program_date_time_ms: Some(s.pdt_ms),
                })
                .collect(),
            ended: false,
            can_block_reload: self.settings.blocking_reload,
        };
        self.window.store(Arc::new(Window {
            segments: self.segments.iter().cloned().collect(),
            playlist: Bytes::from(playlist.render()),
            target_secs: target,
            bandwidth: self.bandwidth,
            discontinuity_sequence,
        }));
        self.updates.send_modify(|n| *n = n.wrapping_add(1));
    }
}
