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
    /// A window with this one's target and no segments, to touch a session without offering
    /// it any.
    pub fn without_segments(&self) -> Window {
        Window {
            segments: Vec::new(),
            playlist: Bytes::new(),
            target_secs: self.target_secs,
            bandwidth: self.bandwidth,
            discontinuity_sequence: self.discontinuity_sequence,
        }
    }

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
    /// Bytes of the ID3 tag opening `data`.
    tag_len: usize,
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
            // The open segment keeps its frames: only its target changes.
            self.cutter.set_target(settings.target_ms);
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
        if follow::lagging(f.pos, q.tail(), false) {
            // Fell behind the queue (should not happen at 10 ticks a second): the lag policy of
            // a packager is skip, to the live edge.
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
            self.open.tag_len = tag.len();
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
        let mut data = open.data;
        let pad = id3::mp3_padding(open.bytes_audio as usize);
        if ext == "mp3" && pad > 0 {
            // Zeros between the tag and the frames, so the audio fills whole 1024-byte chunks:
            // timestamps ffmpeg reads without overlap (`id3::mp3_padding`).
            let mut padded = BytesMut::with_capacity(data.len() + pad);
            padded.extend_from_slice(&data[..open.tag_len]);
            padded.resize(open.tag_len + pad, 0);
            padded.extend_from_slice(&data[open.tag_len..]);
            data = padded;
        }
        if let Some(bps) = (open.bytes_audio * 8 * 1_000_000_000).checked_div(len.duration_ns) {
            self.bandwidth = self.bandwidth.max(bps);
        }
        self.segments.push_back(Arc::new(Segment {
            seq: self.next_seq,
            ext,
            data: data.freeze(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mount::live::test_support::test_mount;
    use crate::mount::live::Tuning;
    use crate::mount::queue::QueueWriter;

    /// Bytes of one test frame: MPEG-1 layer III, 64 kbit/s, 44.1 kHz, mono, no padding.
    const FRAME_LEN: usize = 208;
    /// Samples per channel of one frame.
    const FRAME_SAMPLES: u64 = 1152;
    const RATE: u32 = 44_100;
    /// Play time of one frame in ns, as the cutter counts it.
    const FRAME_NS: u64 = FRAME_SAMPLES * 1_000_000_000 / RATE as u64;
    /// Wall clock at the start of every test, ms since the epoch.
    const T0: i64 = 1_790_000_000_000;

    /// A valid frame whose payload bytes are all `fill` (so tests can tell frames apart).
    fn frame(fill: u8) -> Vec<u8> {
        let mut f = vec![fill; FRAME_LEN];
        f[..4].copy_from_slice(&[0xFF, 0xFB, 0x50, 0xC4]);
        f
    }

    fn settings(target_ms: u64, window: usize) -> HlsSettings {
        HlsSettings {
            target_ms,
            window,
            blocking_reload: false,
            playlists: crate::config::PlaylistMode::Shared,
        }
    }

    /// Frames needed to reach `target_ms`, as the cutter decides.
    fn frames_for(target_ms: u64) -> u64 {
        (target_ms * 1_000_000).div_ceil(FRAME_NS)
    }

    /// A test source: a writer feeding frames numbered from 0 (their fill byte is the number
    /// modulo 256), one chunk per `push`.
    struct Feed {
        w: QueueWriter,
        next: u64,
    }

    impl Feed {
        fn new(w: QueueWriter) -> Feed {
            Feed { w, next: 0 }
        }

        /// Appends `n` frames as one chunk.
        fn push(&mut self, n: u64) {
            let mut data = Vec::with_capacity(n as usize * FRAME_LEN);
            for _ in 0..n {
                data.extend_from_slice(&frame(self.next as u8));
                self.next += 1;
            }
            self.w.push(Bytes::from(data), false, None);
        }

        /// Appends `n` frames, one chunk each.
        fn push_each(&mut self, n: u64) {
            for _ in 0..n {
                self.push(1);
            }
        }
    }

    fn mp3_mount(name: &str) -> (Arc<Mount>, Feed) {
        let (m, w) = test_mount(name, Format::Mp3);
        (m, Feed::new(w))
    }

    /// A segment taken apart: its tag's timestamp and title, and the fill byte of each frame.
    struct Parsed {
        pts: u64,
        title: Option<String>,
        fills: Vec<u8>,
    }

    fn parse(s: &Segment) -> Parsed {
        let tag = id3::parse_tag(&s.data).expect("a segment starts with an ID3 tag");
        let audio = &s.data[tag.len..];
        // Zeros first (`id3::mp3_padding`): the audio fills whole 1024-byte chunks.
        assert_eq!(audio.len() % id3::MP3_ALIGN, 0, "audio in whole chunks");
        let zeros = audio.iter().take_while(|&&b| b == 0).count();
        let audio = &audio[zeros..];
        assert_eq!(audio.len() % FRAME_LEN, 0, "whole frames after the padding");
        assert_eq!(zeros, id3::mp3_padding(audio.len()));
        let fills = audio
            .chunks(FRAME_LEN)
            .map(|f| {
                assert_eq!(&f[..4], &[0xFF, 0xFB, 0x50, 0xC4]);
                f[4]
            })
            .collect();
        Parsed {
            pts: tag.pts_90k.expect("PRIV timestamp"),
            title: tag.title,
            fills,
        }
    }

    fn win(p: &Packager) -> Arc<Window> {
        p.window().load_full()
    }

    fn playlist(p: &Packager) -> String {
        String::from_utf8(win(p).playlist.to_vec()).unwrap()
    }

    /// The segment URIs the playlist lists.
    fn listed(p: &Packager) -> Vec<String> {
        playlist(p)
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// Checks the timestamps of `segs` (from the packager's start): within a run (the
    /// segments between two discontinuities) each segment's PRIV timestamp is the run's first
    /// one plus the samples packaged before it; a run starts at the end of the previous one.
    fn check_runs(segs: &[Arc<Segment>]) {
        let (mut base, mut samples) = (0, 0);
        for s in segs {
            if s.discontinuity {
                base = id3::pts_90k(base, samples, RATE);
                samples = 0;
            }
            let parsed = parse(s);
            assert_eq!(
                parsed.pts,
                id3::pts_90k(base, samples, RATE),
                "seq {}",
                s.seq
            );
            samples += parsed.fills.len() as u64 * FRAME_SAMPLES;
        }
    }

    #[test]
    fn a_new_packager_publishes_an_empty_playlist() {
        let p = Packager::new("/live", settings(2500, 3), 1000, T0);
        let w = win(&p);
        assert!(w.segments.is_empty());
        assert_eq!(w.target_secs, 3, "the target rounded up");
        let text = playlist(&p);
        assert!(text.contains("#EXT-X-TARGETDURATION:3\n"), "{text}");
        assert!(text.contains("#EXT-X-MEDIA-SEQUENCE:1000\n"), "{text}");
        assert!(text.contains("#EXT-X-DISCONTINUITY-SEQUENCE:0\n"), "{text}");
        assert!(!text.contains("#EXTINF"), "{text}");
        assert!(w.segment(1000).is_none());
    }

    #[test]
    fn the_first_segment_is_cut_at_the_target_duration() {
        let n = frames_for(2000);
        assert_eq!(n, 77);
        let (m, mut feed) = mp3_mount("/live");
        m.set_title("Artist - Song", None, crate::ledger::TitleSetter::Source);
        let mut p = Packager::new("/live", settings(2000, 3), 1000, T0);
        let mut updates = p.updates();
        updates.mark_unchanged();
        p.tick(Some(m.clone()), T0);
        feed.push(n - 1);
        p.tick(Some(m.clone()), T0 + 1000);
        assert!(win(&p).segments.is_empty(), "one frame short of the target");
        assert!(!updates.has_changed().unwrap());
        feed.push(1);
        let t1 = T0 + 2000;
        p.tick(Some(m.clone()), t1);
        assert!(updates.has_changed().unwrap(), "a cut wakes held requests");
        let w = win(&p);
        assert_eq!(w.segments.len(), 1);
        let s = &w.segments[0];
        assert_eq!(s.seq, 1000);
        assert_eq!(s.ext, "mp3");
        assert!(!s.discontinuity);
        assert_eq!(s.duration_ns, n * FRAME_NS);
        assert!(s.duration_ns >= 2_000_000_000 && s.duration_ns - FRAME_NS < 2_000_000_000);
        // Its last frame arrived at t1: it started its play time earlier.
        assert_eq!(s.pdt_ms, t1 - (s.duration_ns / 1_000_000) as i64);
        let parsed = parse(s);
        assert_eq!(parsed.pts, 0);
        assert_eq!(parsed.title.as_deref(), Some("Song"));
        assert_eq!(parsed.fills, (0..n as u8).collect::<Vec<u8>>());
        // 64 kbit/s of audio (frame bytes only, the tag is not counted).
        assert_eq!(
            w.bandwidth,
            n * FRAME_LEN as u64 * 8 * 1_000_000_000 / (n * FRAME_NS)
        );
        assert_eq!(w.target_secs, 2);
        assert_eq!(listed(&p), vec!["1000.mp3".to_owned()]);
        let text = playlist(&p);
        assert!(text.contains("#EXTINF:2.011,\n1000.mp3\n"), "{text}");
        assert!(!text.contains("#EXT-X-DISCONTINUITY\n"), "{text}");
    }

    #[test]
    fn timestamps_advance_by_the_samples_packaged_and_durations_sum() {
        let (m, mut feed) = mp3_mount("/live");
        let mut p = Packager::new("/live", settings(2000, 100), 0, T0);
        p.tick(Some(m.clone()), T0);
        // Ticks of 1 to 7 frames, the wall clock following the audio's play time.
        let mut fed = 0u64;
        for i in 0..300u64 {
            let n = 1 + i % 7;
            feed.push(n);
            fed += n;
            p.tick(Some(m.clone()), T0 + (fed * FRAME_NS / 1_000_000) as i64);
        }
        let w = win(&p);
        assert!(w.segments.len() > 10);
        let mut samples = 0u64;
        let mut total_ns = 0u64;
        let mut next_fill = 0u8;
        for (i, s) in w.segments.iter().enumerate() {
            assert_eq!(s.seq, i as u64);
            let parsed = parse(s);
            assert_eq!(
                parsed.pts,
                id3::pts_90k(0, samples, RATE),
                "segment {i} starts at sample {samples}"
            );
            let frames = parsed.fills.len() as u64;
            assert_eq!(frames, frames_for(2000), "segment {i} cut at the target");
            assert_eq!(s.duration_ns, frames * FRAME_NS);
            for f in parsed.fills {
                assert_eq!(f, next_fill, "no frame lost or repeated");
                next_fill = next_fill.wrapping_add(1);
            }
            if i > 0 {
                let prev = &w.segments[i - 1];
                assert_eq!(
                    s.pdt_ms,
                    prev.pdt_ms + (prev.duration_ns / 1_000_000) as i64,
                    "program date-time continuous"
                );
            }
            samples += frames * FRAME_SAMPLES;
            total_ns += s.duration_ns;
        }
        let cut = w.segments.len() as u64 * frames_for(2000);
        assert_eq!(
            total_ns,
            cut * FRAME_NS,
            "durations sum to the frames packaged"
        );
        assert!(
            fed - cut < frames_for(2000),
            "the rest is in the open segment"
        );
    }

    #[test]
    fn the_first_mount_starts_at_the_burst_point() {
        let (m, mut feed) = mp3_mount("/live");
        m.set_tuning(Tuning {
            burst_size: 80 * FRAME_LEN as u64,
            ..Tuning::default()
        });
        feed.push_each(100);
        let mut p = Packager::new("/live", settings(2000, 3), 0, T0);
        p.tick(Some(m.clone()), T0);
        let w = win(&p);
        assert_eq!(w.segments.len(), 1, "the burst is packaged at once");
        let parsed = parse(&w.segments[0]);
        assert_eq!(parsed.fills[0], 20, "starts 80 frames before the head");
        assert_eq!(parsed.fills.len() as u64, frames_for(2000));
        // A backlog keeps its timeline: the tick's last frame (the 80th) arrived now, the
        // segment's last (the 77th) three frames earlier.
        assert_eq!(
            w.segments[0].pdt_ms,
            T0 - (3 * FRAME_NS / 1_000_000) as i64 - (w.segments[0].duration_ns / 1_000_000) as i64
        );
    }

    #[test]
    fn a_change_of_mount_closes_the_segment_and_marks_a_discontinuity() {
        let n = frames_for(2000);
        let (a, mut fa) = mp3_mount("/live");
        let mut p = Packager::new("/live", settings(2000, 10), 0, T0);
        p.tick(Some(a.clone()), T0);
        fa.push(n + 10);
        p.tick(Some(a.clone()), T0 + 2300);
        assert_eq!(win(&p).segments.len(), 1);
        // The source reconnects: a new mount of the same name, with a backlog the packager
        // must not replay (a switch continues at the live edge).
        let (b, mut fb) = mp3_mount("/live");
        fb.push(50);
        p.tick(Some(b.clone()), T0 + 2400);
        let w = win(&p);
        assert_eq!(
            w.segments.len(),
            2,
            "the open segment is closed by the switch"
        );
        let short = &w.segments[1];
        assert_eq!(short.duration_ns, 10 * FRAME_NS);
        assert!(!short.discontinuity);
        assert_eq!(
            parse(short).fills,
            (n as u8..(n + 10) as u8).collect::<Vec<u8>>()
        );
        fb.push(n);
        p.tick(Some(b.clone()), T0 + 4400);
        let w = win(&p);
        assert_eq!(w.segments.len(), 3);
        let s = &w.segments[2];
        assert!(s.discontinuity);
        let parsed = parse(s);
        assert_eq!(parsed.fills[0], 50, "starts at the new mount's live edge");
        // The timeline continues where the previous mount's audio ended.
        assert_eq!(parsed.pts, id3::pts_90k(0, (n + 10) * FRAME_SAMPLES, RATE));
        let text = playlist(&p);
        assert!(
            text.contains("#EXT-X-DISCONTINUITY\n#EXT-X-PROGRAM-DATE-TIME:")
                && text.contains(&format!(
                    "#EXTINF:{:.3},\n2.mp3\n",
                    s.duration_ns as f64 / 1e9
                )),
            "{text}"
        );
        assert_eq!(text.matches("#EXT-X-DISCONTINUITY\n").count(), 1, "{text}");

        // The source goes with no fallback (nothing to follow), then comes back: one more
        // discontinuity, even though the gap produced no segment.
        fb.push(5);
        p.tick(Some(b.clone()), T0 + 4600);
        p.tick(None, T0 + 4700);
        assert_eq!(win(&p).segments.len(), 4, "the 5 frames are closed");
        p.tick(None, T0 + 5000);
        let (c, mut fc) = mp3_mount("/live");
        p.tick(Some(c.clone()), T0 + 6000);
        fc.push(n);
        p.tick(Some(c.clone()), T0 + 8000);
        let w = win(&p);
        assert_eq!(w.segments.len(), 5);
        assert!(!w.segments[3].discontinuity);
        assert!(w.segments[4].discontinuity);
        // Timestamps: each run starts where the previous one's audio ended.
        let second_run = id3::pts_90k(0, (n + 10) * FRAME_SAMPLES, RATE);
        assert_eq!(
            parse(&w.segments[4]).pts,
            id3::pts_90k(second_run, (n + 5) * FRAME_SAMPLES, RATE)
        );
        check_runs(&w.segments);
        assert_eq!(playlist(&p).matches("#EXT-X-DISCONTINUITY\n").count(), 2);

        // A switch to a fallback and back: both closes mark the next segment.
        let (fallback, mut ff) = mp3_mount("/fallback");
        fc.push(3);
        p.tick(Some(c.clone()), T0 + 8100);
        p.tick(Some(fallback.clone()), T0 + 8200);
        ff.push(n);
        p.tick(Some(fallback.clone()), T0 + 10_200);
        p.tick(Some(c.clone()), T0 + 10_300);
        fc.push(n);
        p.tick(Some(c.clone()), T0 + 12_300);
        let w = win(&p);
        let flags: Vec<bool> = w.segments.iter().map(|s| s.discontinuity).collect();
        assert_eq!(flags, [false, false, true, false, true, false, true, true]);
        assert_eq!(
            parse(&w.segments[6]).fills.len() as u64,
            n,
            "the fallback's"
        );
        check_runs(&w.segments);
    }

    #[test]
    fn a_mount_of_a_format_hls_cannot_carry_is_not_followed() {
        let (ogg, mut w) = test_mount("/live", Format::Ogg);
        let mut p = Packager::new("/live", settings(2000, 3), 0, T0);
        p.tick(Some(ogg.clone()), T0);
        w.push(Bytes::from(frame(0).repeat(100)), false, None);
        p.tick(Some(ogg), T0 + 5000);
        assert!(win(&p).segments.is_empty());
        assert_eq!(p.last_live_ms, T0, "nothing followed: the packager is idle");
    }

    #[test]
    fn discontinuity_sequence_counts_discontinuities_that_slid_out() {
        let n = frames_for(1000);
        let mut p = Packager::new("/live", settings(1000, 2), 0, T0);
        let mut t = T0;
        let mut tick = |p: &mut Packager, m: &Arc<Mount>| {
            t += 1000;
            p.tick(Some(m.clone()), t);
        };
        let (a, mut fa) = mp3_mount("/live");
        tick(&mut p, &a);
        fa.push(n);
        tick(&mut p, &a); // seq 0
        let (b, mut fb) = mp3_mount("/live");
        tick(&mut p, &b);
        fb.push(n);
        tick(&mut p, &b); // seq 1, discontinuity
        let disc_seq = |p: &Packager| -> u64 {
            let text = playlist(p);
            let line = text
                .lines()
                .find_map(|l| l.strip_prefix("#EXT-X-DISCONTINUITY-SEQUENCE:"))
                .expect("discontinuity sequence");
            line.parse().unwrap()
        };
        assert_eq!(disc_seq(&p), 0, "still listed");
        fb.push(n);
        tick(&mut p, &b); // seq 2
        assert_eq!(listed(&p), ["1.mp3", "2.mp3"]);
        assert_eq!(disc_seq(&p), 0);
        fb.push(n);
        tick(&mut p, &b); // seq 3: seq 1 is no longer listed, but still in memory
        assert_eq!(listed(&p), ["2.mp3", "3.mp3"]);
        assert_eq!(disc_seq(&p), 1);
        assert!(win(&p).segment(1).is_some_and(|s| s.discontinuity));
        for _ in 0..6 {
            fb.push(n);
            tick(&mut p, &b);
        }
        // seq 9 is the newest; 6 are kept (2 listed + 4 extra): seq 1 is gone from memory.
        let w = win(&p);
        assert_eq!(w.segments.first().map(|s| s.seq), Some(4));
        assert_eq!(disc_seq(&p), 1, "dropped discontinuities stay counted");
        // A second discontinuity, later slid out as well.
        let (c, mut fc) = mp3_mount("/live");
        tick(&mut p, &c);
        fc.push(n);
        tick(&mut p, &c); // seq 10, discontinuity
        for _ in 0..7 {
            fc.push(n);
            tick(&mut p, &c);
        }
        assert_eq!(listed(&p), ["16.mp3", "17.mp3"]);
        assert_eq!(win(&p).segments.first().map(|s| s.seq), Some(12));
        assert_eq!(disc_seq(&p), 2);
        assert!(!playlist(&p).contains("#EXT-X-DISCONTINUITY\n"));
    }

    #[test]
    fn falling_behind_the_queue_skips_to_the_live_edge_with_a_discontinuity() {
        let n = frames_for(2000);
        // A queue retaining 20 frames.
        let (t, _) = test_mount("/live", Format::Mp3);
        let w = QueueWriter::new(20 * FRAME_LEN as u64);
        let m = Arc::new(Mount::new("/live", t.settings.clone(), w.queue()));
        let mut feed = Feed::new(w);
        let mut p = Packager::new("/live", settings(2000, 10), 0, T0);
        p.tick(Some(m.clone()), T0);
        feed.push_each(10);
        p.tick(Some(m.clone()), T0 + 300);
        // 50 frames arrive before the next tick: the packager's position left the queue.
        feed.push_each(50);
        assert!(m.queue.load().tail() > 10 * FRAME_LEN as u64);
        p.tick(Some(m.clone()), T0 + 1600);
        // Then it keeps up again, 10 frames a tick.
        for i in 0..16 {
            feed.push_each(10);
            p.tick(Some(m.clone()), T0 + 1900 + i * 260);
        }
        let w = win(&p);
        assert!(w.segments.len() >= 2);
        let fills: Vec<u8> = w.segments.iter().flat_map(|s| parse(s).fills).collect();
        assert_eq!(&fills[..10], &(0..10).collect::<Vec<u8>>()[..]);
        // Packaging resumes at the head the skip found (frame 60): none of the frames that
        // left the queue, nor the retained backlog, is packaged.
        assert_eq!(fills[10], 60, "{fills:?}");
        for (i, f) in fills[10..].iter().enumerate() {
            assert_eq!(*f, 60 + i as u8);
        }
        assert!(!w.segments[0].discontinuity);
        assert!(w.segments[1].discontinuity, "the skip is marked");
        for s in &w.segments[1..] {
            assert_eq!(
                parse(s).fills.len() as u64,
                n,
                "seq {} cut at the target",
                s.seq
            );
        }
        // The timeline counts the samples packaged, with no gap.
        let mut samples = 0;
        for s in w.segments.iter() {
            let parsed = parse(s);
            assert_eq!(parsed.pts, id3::pts_90k(0, samples, RATE));
            samples += parsed.fills.len() as u64 * FRAME_SAMPLES;
        }
    }

    #[test]
    fn the_window_keeps_extra_segments_and_lists_the_newest() {
        let n = frames_for(1000);
        let (m, mut feed) = mp3_mount("/live");
        let mut p = Packager::new("/live", settings(1000, 3), 500, T0);
        p.tick(Some(m.clone()), T0);
        for i in 1..=12 {
            feed.push(n);
            p.tick(Some(m.clone()), T0 + i * 1000);
            let w = win(&p);
            let kept = (i as usize).min(3 + EXTRA_SEGMENTS);
            assert_eq!(w.segments.len(), kept, "after {i} segments");
            assert_eq!(listed(&p).len(), (i as usize).min(3));
        }
        let w = win(&p);
        let seqs: Vec<u64> = w.segments.iter().map(|s| s.seq).collect();
        assert_eq!(seqs, (505..=511).collect::<Vec<u64>>());
        assert_eq!(listed(&p), ["509.mp3", "510.mp3", "511.mp3"]);
        assert!(playlist(&p).contains("#EXT-X-MEDIA-SEQUENCE:509\n"));
        // Lookups: every segment in memory (listed or not), none dropped or not yet cut.
        for seq in 505..=511 {
            assert_eq!(w.segment(seq).map(|s| s.seq), Some(seq));
        }
        assert!(w.segment(504).is_none());
        assert!(w.segment(0).is_none());
        assert!(w.segment(512).is_none());
        assert!(w.segment(u64::MAX).is_none());
        assert!(Window::default().segment(0).is_none());
        // A window with a hole: the lookup answers by position only when the numbers agree.
        let holed = Window {
            segments: vec![w.segments[0].clone(), w.segments[2].clone()],
            ..Window::default()
        };
        assert_eq!(holed.segment(505).map(|s| s.seq), Some(505));
        assert!(holed.segment(506).is_none(), "not segment 507 in its place");
        assert!(holed.segment(507).is_none());
    }

    #[test]
    fn retune_changes_the_target_of_the_next_segments() {
        let (m, mut feed) = mp3_mount("/live");
        let mut p = Packager::new("/live", settings(2000, 5), 0, T0);
        let mut updates = p.updates();
        p.tick(Some(m.clone()), T0);
        feed.push(frames_for(2000));
        p.tick(Some(m.clone()), T0 + 2000);
        assert_eq!(win(&p).segments.len(), 1);
        // Same settings: nothing published.
        updates.mark_unchanged();
        p.retune(settings(2000, 5));
        assert!(!updates.has_changed().unwrap());
        // A reload to 4 s segments, between two segments.
        p.retune(settings(4000, 5));
        assert!(updates.has_changed().unwrap(), "republished at once");
        assert_eq!(p.settings(), settings(4000, 5));
        assert_eq!(win(&p).target_secs, 4);
        assert!(playlist(&p).contains("#EXT-X-TARGETDURATION:4\n"));
        feed.push(frames_for(4000) - 1);
        p.tick(Some(m.clone()), T0 + 6000);
        assert_eq!(win(&p).segments.len(), 1, "not cut at the old target");
        feed.push(1);
        p.tick(Some(m.clone()), T0 + 6100);
        let w = win(&p);
        assert_eq!(w.segments.len(), 2);
        assert_eq!(w.segments[1].duration_ns, frames_for(4000) * FRAME_NS);
        assert_eq!(parse(&w.segments[1]).fills.len() as u64, frames_for(4000));
        // A smaller window lists fewer segments at once.
        p.retune(settings(4000, 1));
        assert_eq!(listed(&p), ["1.mp3"]);
    }

    /// A reload while a segment is open (the usual case) keeps the length of the frames already
    /// in the open segment: it is cut at the target counting all its frames, and a switch after
    /// the reload publishes it whole (before, the cutter was replaced and the open frames
    /// forgotten).
    #[test]
    fn retune_in_the_middle_of_a_segment_keeps_its_length() {
        let (m, mut feed) = mp3_mount("/live");
        let mut p = Packager::new("/live", settings(2000, 5), 0, T0);
        p.tick(Some(m.clone()), T0);
        feed.push(20);
        p.tick(Some(m.clone()), T0 + 500);
        p.retune(settings(2000, 6));
        feed.push(frames_for(2000) - 20);
        p.tick(Some(m.clone()), T0 + 2000);
        let w = win(&p);
        assert_eq!(
            w.segments.len(),
            1,
            "cut at the target, counting all its frames"
        );
        let frames = parse(&w.segments[0]).fills.len() as u64;
        assert_eq!(w.segments[0].duration_ns, frames * FRAME_NS);
        // Open frames at a reload survive a switch that follows it.
        feed.push(10);
        p.tick(Some(m.clone()), T0 + 2300);
        p.retune(settings(2000, 5));
        let (b, _fb) = mp3_mount("/live");
        p.tick(Some(b), T0 + 2400);
        let w = win(&p);
        assert_eq!(w.segments.len(), 2, "the 10 open frames are published");
        assert_eq!(w.segments[1].duration_ns, 10 * FRAME_NS);
    }
}
