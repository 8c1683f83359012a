//! One mount name's HLS packager: follows what a listener of that name hears (the live mount,
//! else its fallback, as [`crate::mount::registry::Registry::resolve`] says) through the mount's
//! queue, the way a fan-out cursor does (absolute offsets, shared chunks), re-frames the chunks
//! with [`throng_proto::framer`] and cuts segments with [`throng_proto::hls::cutter`], in the
//! container [`crate::hls::container`] chooses for the mount's format:
//! - packed audio (MP3, and AAC by default): each segment starts with the ID3 tag of
//!   [`throng_proto::hls::id3`] (PRIV timestamp from the sample count, and the title when
//!   known);
//! - fMP4 (Ogg/Opus, Ogg/FLAC, and AAC with `aac-segments = "fmp4"`): the samples (Opus packets
//!   and FLAC frames read by [`throng_proto::hls::ogg_audio`], AAC raw data blocks) go into
//!   `moof`/`mdat` segments of [`throng_proto::hls::fmp4`] whose decode time is the sample
//!   count, after an `emsg` carrying the title as ID3; each codec configuration gets an
//!   [`InitSection`] (`EXT-X-MAP`), a new one (another codec or setting) after a
//!   discontinuity. An Ogg stream of another codec (Vorbis) produces no segment;
//! - with low-latency HLS (fMP4 only), each segment is cut into parts of at most a second
//!   ([`Part`]), published as they are cut.
//!
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
use throng_proto::framer::Unit;
use throng_proto::framer::{Framer, UnitKind};
use throng_proto::hls::cutter::{self, Cutter};
use throng_proto::hls::fmp4::{self, Track};
use throng_proto::hls::id3;
use throng_proto::hls::ogg_audio::{OggAudio, OggEvent};
use throng_proto::hls::playlist::{
    reload_decision, reload_decision_parts, LowLatency, MediaPlaylist, PlaylistPart,
    PlaylistSegment, Reload,
};
use throng_proto::ogg::{self, PageParse};

use crate::audience::follow::{self, JoinAt};
use crate::config::{HlsSettings, PART_TARGET_MS};
use crate::hls::container::Container;
use crate::mount::live::Mount;

/// Segments kept beyond the playlist window, for players that fetched the playlist just before
/// the window slid.
pub const EXTRA_SEGMENTS: usize = 4;
/// How far (ms) a timeline's program date-time may run ahead of the wall clock (media that
/// arrived faster than real time) before it is re-anchored with a discontinuity.
pub const PDT_MAX_LEAD_MS: i64 = 10_000;

/// A finished segment, shared by every request for it.
#[derive(Debug)]
pub struct Segment {
    /// Media sequence number (its URI is `<seq>.<ext>`).
    pub seq: u64,
    /// `mp3`, `aac` (packed audio) or `m4s` (fMP4).
    pub ext: &'static str,
    /// Packed audio: the ID3 tag followed by whole frames; fMP4: `styp`, `emsg`, `moof`, `mdat`.
    pub data: Bytes,
    /// fMP4: the initialization section the segment needs (`EXT-X-MAP`).
    pub map: Option<Arc<InitSection>>,
    /// Low-latency HLS: its partial segments (`data` is their concatenation); empty otherwise.
    pub parts: Vec<Arc<Part>>,
    /// Play time in nanoseconds.
    pub duration_ns: u64,
    /// Preceded by a discontinuity.
    pub discontinuity: bool,
    /// Wall-clock time of its first sample, ms since the Unix epoch.
    pub pdt_ms: i64,
    /// Times it was requested (one fetch per player, or per cache miss behind a proxy).
    pub fetches: AtomicU64,
}

/// A low-latency partial segment (one CMAF chunk), served as `<seq>.<index>.m4s`.
#[derive(Debug)]
pub struct Part {
    /// The sequence number of its segment.
    pub seq: u64,
    /// Its place in the segment, from 0.
    pub index: u64,
    /// The fragment (the first part of a segment starts with `styp` and the title's `emsg`).
    pub data: Bytes,
    /// Play time in nanoseconds.
    pub duration_ns: u64,
}

/// An fMP4 initialization section (`ftyp` + `moov`), served as `<id>.mp4`.
#[derive(Debug)]
pub struct InitSection {
    /// Its number: the sequence number of the first segment that uses it.
    pub id: u64,
    /// The boxes.
    pub data: Bytes,
    /// Ticks per second of its track's timestamps.
    pub timescale: u32,
    /// The track it describes.
    pub track: Track,
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
    /// The sequence number of the segment being cut.
    pub open_seq: u64,
    /// Low-latency HLS: the parts of the segment being cut published so far.
    pub open_parts: Vec<Arc<Part>>,
    /// Low-latency HLS is on: parts are cut and listed.
    pub low_latency: bool,
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
            open_seq: self.open_seq,
            open_parts: Vec::new(),
            low_latency: self.low_latency,
        }
    }

    /// Part `index` of segment `seq` (low-latency HLS), if published and still in memory.
    pub fn part(&self, seq: u64, index: u64) -> Option<&Arc<Part>> {
        let parts = if seq == self.open_seq {
            &self.open_parts
        } else {
            &self.segment(seq)?.parts
        };
        parts.get(usize::try_from(index).ok()?)
    }

    /// Whether part `index` of segment `seq` is the next one to be published (the preload
    /// hint, or the first part of the segment after it): a request for it is held.
    pub fn is_next_part(&self, seq: u64, index: u64) -> bool {
        self.low_latency
            && ((seq == self.open_seq && index == self.open_parts.len() as u64)
                || (seq == self.open_seq + 1 && index == 0))
    }

    /// What a playlist request carrying `_HLS_msn=msn` and `_HLS_part=part` gets from this
    /// window (RFC 8216bis section 6.2.5.2; parts count only with low-latency HLS).
    pub fn reload(&self, msn: Option<u64>, part: Option<u64>) -> Reload {
        let newest = self.segments.last().map(|s| s.seq);
        match part.filter(|_| self.low_latency) {
            Some(p) => reload_decision_parts(
                msn,
                Some(p),
                newest,
                self.open_seq,
                self.open_parts.len() as u64,
            ),
            None => reload_decision(msn, newest),
        }
    }

    /// The initialization section numbered `id`, if a segment in memory uses it.
    pub fn init(&self, id: u64) -> Option<&Arc<InitSection>> {
        self.segments
            .iter()
            .rev()
            .filter_map(|s| s.map.as_ref())
            .find(|m| m.id == id)
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
    container: Container,
    pos: u64,
    framer: Framer,
    /// Ogg: the samples of the pages.
    ogg: OggAudio,
    /// The track of the samples read last (fMP4), to tell a change.
    track: Option<Track>,
}

/// One thing the frames of a tick bring.
enum Access {
    /// A frame (packed audio) or sample (fMP4) of `samples` samples at `rate` Hz (fMP4: ticks
    /// of the track's timescale).
    Frame {
        data: Bytes,
        samples: u32,
        rate: u32,
    },
    /// The samples after this belong to this track (fMP4).
    Track(Track),
    /// A stream HLS does not carry begins (Ogg Vorbis): no samples until the next track.
    Unsupported,
}

impl Following {
    /// A follower of `mount` from offset `pos`, the Ogg header pages `headers` read first.
    fn new(mount: Arc<Mount>, container: Container, pos: u64, headers: Option<&Bytes>) -> Self {
        let format = mount.settings.format;
        let mut framer = Framer::new(format);
        if let Some(h) = headers {
            framer.push(h);
        }
        Following {
            mount,
            format,
            container,
            pos,
            framer,
            ogg: OggAudio::new(),
            track: None,
        }
    }

    /// What `unit` brings, appended to `out`.
    fn access(&mut self, unit: Unit, out: &mut Vec<Access>) {
        match (self.container, self.format) {
            (Container::Packed(_), _) => {
                if unit.kind != UnitKind::Audio {
                    return;
                }
                if let Some((samples, rate)) = cutter::frame_samples(self.format, &unit.data) {
                    out.push(Access::Frame {
                        data: unit.data,
                        samples,
                        rate,
                    });
                }
            }
            (Container::Fmp4, Format::Aac) => {
                let Some(h) = throng_proto::adts::parse_header(&unit.data) else {
                    return;
                };
                if unit.kind != UnitKind::Audio {
                    return;
                }
                let track = Track::from_adts(&h, (unit.data[2] >> 2) & 0x0F);
                if self.track.as_ref() != Some(&track) {
                    self.track = Some(track.clone());
                    out.push(Access::Track(track));
                }
                // The raw data block without its ADTS header (7 bytes, 9 with a CRC).
                let header_len = if unit.data[1] & 1 == 1 { 7 } else { 9 };
                out.push(Access::Frame {
                    data: unit
                        .data
                        .slice(header_len..h.frame_len.min(unit.data.len())),
                    samples: h.samples,
                    rate: h.sample_rate,
                });
            }
            (Container::Fmp4, _) => {
                let PageParse::Page(page) = ogg::parse_trusted_page(&unit.data) else {
                    return;
                };
                let mut events = Vec::new();
                self.ogg.push_page(&page, &mut events);
                for e in events {
                    match e {
                        OggEvent::Track(t) => {
                            self.track = Some(t.clone());
                            out.push(Access::Track(t));
                        }
                        OggEvent::Unsupported(_) => {
                            self.track = None;
                            out.push(Access::Unsupported);
                        }
                        OggEvent::Sample { data, duration } => {
                            if let Some(t) = &self.track {
                                out.push(Access::Frame {
                                    data: Bytes::from(data),
                                    samples: duration,
                                    rate: t.timescale,
                                });
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The segment being filled.
#[derive(Default)]
struct Open {
    /// Packed audio: the ID3 tag, then the frames.
    data: BytesMut,
    /// fMP4: the samples and their durations in timescale ticks.
    samples: Vec<(Bytes, u32)>,
    /// The segment's extension (`mp3`, `aac`, `m4s`).
    ext: &'static str,
    /// fMP4: the initialization section of its track.
    map: Option<Arc<InitSection>>,
    /// fMP4: decode time of its first sample, in timescale ticks (`tfdt`).
    decode_time: u64,
    /// Low-latency HLS: the parts published so far, where the next part's samples start in
    /// `samples`, the ticks before it, and the play time of the samples since (ns).
    parts: Vec<Arc<Part>>,
    part_start: usize,
    part_ticks: u64,
    part_ns: u64,
    /// Bytes of the ID3 tag opening `data`.
    tag_len: usize,
    pts_90k: u64,
    discontinuity: bool,
    title: String,
    bytes_audio: u64,
    frames: u32,
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
    /// fMP4: the initialization section of the track being packaged.
    init: Option<Arc<InitSection>>,
    /// fMP4: the `emsg` id of the last title sent, and that title (a new title, a new id).
    title_event: (u32, String),
    /// fMP4: the `mfhd` sequence number of the last fragment (segment or part).
    fragment_seq: u32,
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
            init: None,
            title_event: (0, String::new()),
            fragment_seq: 0,
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
        let aac = self.settings.aac_segments;
        let serving =
            serving.and_then(|m| super::container(m.settings.format, aac).map(|c| (m, c)));
        let same = match (&self.following, &serving) {
            (Some(f), Some((m, c))) => f.mount.id == m.id && f.container == *c,
            (None, None) => true,
            _ => false,
        };
        if !same {
            let first = self.following.is_none() && self.segments.is_empty();
            if self.following.take().is_some() {
                self.close_segment(now_ms);
                self.discontinuity_pending = true;
            }
            if let Some((m, container)) = serving {
                let q = m.queue.load();
                // The first mount starts at the burst point so a segment is ready soon; a
                // switch continues at the new mount's live edge. Ogg: the header pages first.
                let joined = if first {
                    follow::join(&q, JoinAt::Burst(m.burst_size()))
                } else {
                    follow::Joined {
                        pos: q.head,
                        headers: q.ogg_headers.clone(),
                    }
                };
                if container != Container::Fmp4 {
                    self.init = None;
                }
                self.following = Some(Following::new(
                    m.clone(),
                    container,
                    joined.pos,
                    joined.headers.as_deref(),
                ));
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
            *f = Following::new(
                f.mount.clone(),
                f.container,
                q.head,
                q.ogg_headers.as_deref(),
            );
            self.discontinuity_pending = true;
        }
        let mut access = Vec::new();
        if let Some(i) = q.chunk_index(f.pos) {
            for c in &q.chunks[i..] {
                let skip = (f.pos - c.start) as usize;
                f.framer.push(&c.data[skip..]);
                f.pos = c.end();
            }
        }
        while let Some(u) = f.framer.next_unit() {
            if let Ok(u) = u {
                f.access(u, &mut access);
            }
        }
        // The last frame of this tick arrived about now; each earlier one ended earlier by the
        // play time of the frames after it (a backlog packaged at once keeps its timeline).
        let dur_ns = |a: &Access| match a {
            Access::Frame { samples, rate, .. } => {
                u64::from(*samples) * 1_000_000_000 / u64::from((*rate).max(1))
            }
            _ => 0,
        };
        let total: u64 = access.iter().map(dur_ns).sum();
        let mut done = 0;
        for a in access {
            done += dur_ns(&a);
            let end_ms = now_ms - ((total - done) / 1_000_000) as i64;
            match a {
                Access::Frame {
                    data,
                    samples,
                    rate,
                } => self.add_frame(data, samples, rate, end_ms),
                Access::Track(t) => self.set_track(t, end_ms),
                Access::Unsupported => {
                    self.close_segment(end_ms);
                    self.init = None;
                }
            }
        }
    }

    /// The samples after this are of track `t` (fMP4): a track other than the current one
    /// closes the open segment and starts a new initialization section, after a discontinuity
    /// when there was a track before.
    fn set_track(&mut self, t: Track, end_ms: i64) {
        if self.init.as_ref().is_some_and(|i| i.track == t) {
            return;
        }
        self.close_segment(end_ms);
        if self.init.is_some() {
            self.discontinuity_pending = true;
        }
        self.init = match fmp4::init_segment(&t) {
            Ok(data) => Some(Arc::new(InitSection {
                id: self.next_seq,
                data: Bytes::from(data),
                timescale: t.timescale,
                track: t,
            })),
            Err(e) => {
                tracing::warn!(mount = %self.name, "HLS: no initialization section: {e}");
                None
            }
        };
    }

    /// Starts a new timestamp run at the end of the previous one.
    fn rebase(&mut self) {
        self.base_90k = id3::pts_90k(self.base_90k, self.run_samples, self.run_rate);
        self.run_samples = 0;
    }

    /// Adds one frame (fMP4: one sample) of `samples` samples at `rate` Hz whose last sample
    /// arrived at `end_ms`.
    fn add_frame(&mut self, frame: Bytes, samples: u32, rate: u32, end_ms: i64) {
        let Some(container) = self.following.as_ref().map(|f| f.container) else {
            return;
        };
        if container == Container::Fmp4 && self.init.is_none() {
            return;
        }
        if rate != self.run_rate {
            self.rebase();
            self.run_rate = rate;
        }
        if self.open.frames == 0 {
            self.open.pts_90k = id3::pts_90k(self.base_90k, self.run_samples, self.run_rate);
            self.open.discontinuity = std::mem::take(&mut self.discontinuity_pending);
            self.open.title = self
                .following
                .as_ref()
                .map(|f| f.mount.title())
                .unwrap_or_default();
            match container {
                Container::Packed(ext) => {
                    let tag = id3::segment_tag(self.open.pts_90k, Some(&self.open.title));
                    self.open.data.extend_from_slice(&tag);
                    self.open.tag_len = tag.len();
                    self.open.ext = ext;
                }
                Container::Fmp4 => {
                    // In the track's timescale (its sample rate): the run's start, then the
                    // samples since, so decode times within a run are exact.
                    self.open.decode_time =
                        self.base_90k * u64::from(rate) / 90_000 + self.run_samples;
                    self.open.map = self.init.clone();
                    self.open.ext = "m4s";
                }
            }
        }
        self.open.frames += 1;
        self.open.bytes_audio += frame.len() as u64;
        match container {
            Container::Packed(_) => self.open.data.extend_from_slice(&frame),
            Container::Fmp4 => self.open.samples.push((frame, samples)),
        }
        self.run_samples += u64::from(samples);
        if self.cutter.push(samples, rate) {
            self.close_segment(end_ms);
        } else if self.parts_on(container) {
            // A part ends where one more frame of the same length would pass the part target,
            // so every part lasts at most PART-TARGET (RFC 8216bis section 4.4.3.7).
            let ns = u64::from(samples) * 1_000_000_000 / u64::from(rate.max(1));
            self.open.part_ns += ns;
            if self.open.part_ns + ns > PART_TARGET_MS * 1_000_000 {
                self.close_part();
                self.publish_window();
            }
        }
    }

    /// Whether low-latency parts are cut for segments of `container`.
    fn parts_on(&self, container: Container) -> bool {
        self.settings.low_latency && container == Container::Fmp4
    }

    /// The next `mfhd` sequence number (from 1, wrapping past 0).
    fn next_fragment(&mut self) -> u32 {
        self.fragment_seq = self.fragment_seq.wrapping_add(1).max(1);
        self.fragment_seq
    }

    /// Publishes the samples of the open segment since the last part as a part (low-latency
    /// HLS): the first part of a segment carries `styp` and the title's `emsg`.
    fn close_part(&mut self) {
        let Some(map) = self.open.map.clone() else {
            return;
        };
        let start = self.open.part_start;
        if start >= self.open.samples.len() {
            return;
        }
        let first = self.open.parts.is_empty();
        let title = self.open.title.clone();
        let id = self.title_event_id(&title);
        let tag = (first && !title.is_empty()).then(|| id3::title_tag(&title));
        let id3 = tag.as_deref().map(|tag| fmp4::TimedId3 { tag, id });
        let sequence = self.next_fragment();
        let samples: Vec<fmp4::Sample<'_>> = self.open.samples[start..]
            .iter()
            .map(|(d, n)| fmp4::Sample {
                data: d,
                duration: *n,
            })
            .collect();
        let ticks: u64 = samples.iter().map(|s| u64::from(s.duration)).sum();
        let decode = self.open.decode_time + self.open.part_ticks;
        let built = if first {
            fmp4::media_segment(sequence, map.timescale, decode, &samples, id3)
        } else {
            fmp4::fragment(sequence, map.timescale, decode, &samples, id3)
        };
        drop(samples);
        let data = match built {
            Ok(d) => Bytes::from(d),
            Err(e) => {
                tracing::warn!(mount = %self.name, "HLS: part not built: {e}");
                return;
            }
        };
        let duration_ns = ticks * 1_000_000_000 / u64::from(map.timescale.max(1));
        self.open.parts.push(Arc::new(Part {
            seq: self.next_seq,
            index: self.open.parts.len() as u64,
            data,
            duration_ns,
        }));
        self.open.part_start = self.open.samples.len();
        self.open.part_ticks += ticks;
        self.open.part_ns = 0;
    }

    /// The `emsg` id of `title`: the same as the last segment's while the title stays.
    fn title_event_id(&mut self, title: &str) -> u32 {
        if self.title_event.1 != title {
            self.title_event = (self.title_event.0.wrapping_add(1), title.to_owned());
        }
        self.title_event.0
    }

    /// Publishes the open segment, if it holds any frame; its last frame ended at `now_ms`.
    fn close_segment(&mut self, now_ms: i64) {
        if self.open.map.is_some() && self.settings.low_latency {
            // The segment is its parts: the last one ends here.
            self.close_part();
        }
        let len = self.cutter.take();
        let open = std::mem::take(&mut self.open);
        if len.frames == 0 {
            self.discontinuity_pending |= open.discontinuity;
            return;
        }
        let dur_ms = (len.duration_ns / 1_000_000) as i64;
        // Program date-time (RFC 8216 section 4.3.2.6): continuous from the previous segment
        // while it is less than a second behind the wall clock (its last frame arrived just
        // now), re-anchored forward after a stall. Never back within one timeline: media that
        // ran ahead of the clock (a source catching up after a stall) stays continuous, and
        // only a lead of `PDT_MAX_LEAD_MS` or more re-anchors it, opening a discontinuity.
        let wall = now_ms - dur_ms;
        let mut discontinuity = open.discontinuity;
        let pdt_ms = match self.last_pdt_end_ms {
            Some(prev) if !discontinuity && wall - prev < 1000 && prev - wall < PDT_MAX_LEAD_MS => {
                prev
            }
            Some(prev) if !discontinuity && prev > wall => {
                discontinuity = true;
                wall
            }
            _ => wall,
        };
        self.last_pdt_end_ms = Some(pdt_ms + dur_ms);
        let ext = open.ext;
        let mut data = open.data;
        if !open.parts.is_empty() {
            let mut whole = BytesMut::with_capacity(open.parts.iter().map(|p| p.data.len()).sum());
            for p in &open.parts {
                whole.extend_from_slice(&p.data);
            }
            data = whole;
        } else if let Some(map) = &open.map {
            let sequence = self.next_fragment();
            let samples: Vec<fmp4::Sample<'_>> = open
                .samples
                .iter()
                .map(|(d, n)| fmp4::Sample {
                    data: d,
                    duration: *n,
                })
                .collect();
            let tag = (!open.title.is_empty()).then(|| id3::title_tag(&open.title));
            let id = self.title_event_id(&open.title);
            let built = fmp4::media_segment(
                sequence,
                map.timescale,
                open.decode_time,
                &samples,
                tag.as_deref().map(|tag| fmp4::TimedId3 { tag, id }),
            );
            match built {
                Ok(b) => data = BytesMut::from(&b[..]),
                Err(e) => {
                    tracing::warn!(mount = %self.name, "HLS: fMP4 segment not built: {e}");
                    self.discontinuity_pending = true;
                    return;
                }
            }
        }
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
            map: open.map,
            parts: open.parts,
            duration_ns: len.duration_ns,
            discontinuity,
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
        let part_list = |parts: &[Arc<Part>]| -> Vec<PlaylistPart> {
            parts
                .iter()
                .map(|p| PlaylistPart {
                    uri: format!("{}.{}.m4s", p.seq, p.index),
                    duration_secs: p.duration_ns as f64 / 1e9,
                    independent: true,
                })
                .collect()
        };
        let ll_container = self.settings.low_latency && self.init.is_some();
        let low_latency = ll_container.then(|| {
            let open_map = self.open.map.as_ref().or(self.init.as_ref());
            LowLatency {
                part_target_secs: PART_TARGET_MS as f64 / 1000.0,
                open_discontinuity: if self.open.frames > 0 {
                    self.open.discontinuity
                } else {
                    self.discontinuity_pending
                },
                open_map_uri: open_map.map(|m| format!("{}.mp4", m.id)),
                open_parts: part_list(&self.open.parts),
                preload_hint: open_map
                    .map(|_| format!("{}.{}.m4s", self.next_seq, self.open.parts.len())),
            }
        });
        // Parts are listed for the segments of the last three target durations or so
        // (RFC 8216bis section 4.4.4.9 lets them go after that).
        let with_parts = listed_segs.len().saturating_sub(3);
        let playlist = MediaPlaylist {
            target_duration: target,
            media_sequence: listed_segs.first().map_or(self.next_seq, |s| s.seq),
            discontinuity_sequence,
            segments: listed_segs
                .iter()
                .enumerate()
                .map(|(i, s)| PlaylistSegment {
                    uri: format!("{}.{}", s.seq, s.ext),
                    duration_secs: s.duration_ns as f64 / 1e9,
                    discontinuity: s.discontinuity,
                    program_date_time_ms: Some(s.pdt_ms),
                    map_uri: s.map.as_ref().map(|m| format!("{}.mp4", m.id)),
                    parts: if i >= with_parts && low_latency.is_some() {
                        part_list(&s.parts)
                    } else {
                        Vec::new()
                    },
                })
                .collect(),
            ended: false,
            can_block_reload: self.settings.blocking_reload,
            low_latency,
        };
        self.window.store(Arc::new(Window {
            segments: self.segments.iter().cloned().collect(),
            playlist: Bytes::from(playlist.render()),
            target_secs: target,
            bandwidth: self.bandwidth,
            discontinuity_sequence,
            open_seq: self.next_seq,
            open_parts: self.open.parts.clone(),
            low_latency: ll_container,
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
            aac_segments: crate::config::AacSegments::Packed,
            low_latency: false,
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
    fn program_date_time_never_runs_back_within_a_timeline() {
        let n = frames_for(2000);
        let (m, mut feed) = mp3_mount("/live");
        let mut p = Packager::new("/live", settings(2000, 10), 0, T0);
        p.tick(Some(m.clone()), T0);
        feed.push(n);
        let t1 = T0 + 2000;
        p.tick(Some(m.clone()), t1);
        // The next 2 s of audio in half a second (a source catching up): continuous, not
        // re-anchored 1.5 s back.
        feed.push(n);
        p.tick(Some(m.clone()), t1 + 500);
        let w = win(&p);
        assert_eq!(w.segments.len(), 2);
        let (a, b) = (&w.segments[0], &w.segments[1]);
        assert_eq!(b.pdt_ms, a.pdt_ms + (a.duration_ns / 1_000_000) as i64);
        assert!(!b.discontinuity);
        // Twelve seconds more at once: the date-time would lead the clock by more than
        // `PDT_MAX_LEAD_MS`, so it is re-anchored and the timeline breaks there.
        feed.push(6 * n);
        p.tick(Some(m.clone()), t1 + 600);
        let w = win(&p);
        assert_eq!(w.segments.len(), 8);
        let c = &w.segments[2];
        assert!(c.discontinuity, "re-anchored back: a new timeline");
        assert!(c.pdt_ms < b.pdt_ms + (b.duration_ns / 1_000_000) as i64);
        for pair in w.segments[2..].windows(2) {
            assert!(!pair[1].discontinuity);
            assert_eq!(
                pair[1].pdt_ms,
                pair[0].pdt_ms + (pair[0].duration_ns / 1_000_000) as i64
            );
        }
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
        let (ogg, mut w) = test_mount("/live", Format::Ebml);
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

    /// An Ogg/Opus source: the header pages (`OpusHead`, `OpusTags`) as one header chunk,
    /// then `n` pages of one 20 ms packet each (TOC 0xFC: CELT FB 20 ms, 960 samples), one
    /// chunk per call of the returned closure.
    fn opus_mount(name: &str) -> (Arc<Mount>, impl FnMut(u64)) {
        use throng_proto::ogg::{build_page, FLAG_BOS};
        let (m, mut w) = test_mount(name, Format::Ogg);
        let mut head = b"OpusHead\x01\x02".to_vec();
        head.extend_from_slice(&[0x38, 0x01, 0x80, 0xBB, 0, 0, 0, 0, 0]);
        let mut headers = build_page(FLAG_BOS, 0, 5, 0, &head).unwrap();
        headers.extend(build_page(0, 0, 5, 1, b"OpusTags\0\0\0\0\0\0\0\0").unwrap());
        let headers = Bytes::from(headers);
        w.push(headers.clone(), true, Some(Arc::new(headers)));
        let mut seq = 2u32;
        let feed = move |n: u64| {
            let mut data = Vec::new();
            for _ in 0..n {
                let granule = u64::from(seq - 1) * 960;
                data.extend(build_page(0, granule, 5, seq, &[0xFC, seq as u8, 0xFE]).unwrap());
                seq += 1;
            }
            w.push(Bytes::from(data), false, None);
        };
        (m, feed)
    }

    /// The boxes of `bytes`, decoded by `mp4-atom`.
    fn boxes(mut bytes: &[u8]) -> Vec<mp4_atom::Any> {
        use mp4_atom::Decode;
        let mut out = Vec::new();
        while !bytes.is_empty() {
            out.push(mp4_atom::Any::decode(&mut bytes).expect("a box"));
        }
        out
    }

    #[test]
    fn an_opus_mount_is_packaged_as_fmp4_with_an_init_section_and_titles_in_emsg() {
        let (m, mut feed) = opus_mount("/live.opus");
        m.set_title(
            "Artist - Song",
            None,
            crate::ledger::message::TitleSetter::Source,
        );
        let mut p = Packager::new("/live.opus", settings(1000, 3), 100, T0);
        p.tick(Some(m.clone()), T0);
        // 1 s segments: 50 packets of 20 ms each.
        for i in 1..=3 {
            feed(50);
            p.tick(Some(m.clone()), T0 + i * 1000);
        }
        let w = win(&p);
        assert_eq!(w.segments.len(), 3);
        let init = w
            .init(100)
            .expect("the initialization section of the first segment");
        assert_eq!(init.timescale, 48_000);
        let parsed = boxes(&init.data);
        let mp4_atom::Any::Moov(moov) = &parsed[1] else {
            panic!("moov")
        };
        assert!(matches!(
            moov.trak[0].mdia.minf.stbl.stsd.codecs[0],
            mp4_atom::Codec::Opus(_)
        ));
        for (k, s) in w.segments.iter().enumerate() {
            assert_eq!(s.ext, "m4s");
            assert_eq!(s.duration_ns, 1_000_000_000);
            assert!(Arc::ptr_eq(s.map.as_ref().unwrap(), init));
            let b = boxes(&s.data);
            let mp4_atom::Any::Emsg(emsg) = &b[1] else {
                panic!("emsg after styp: {b:?}")
            };
            let tag = id3::parse_tag(&emsg.message_data).unwrap();
            assert_eq!(tag.title.as_deref(), Some("Song"));
            assert_eq!(emsg.id, 1, "the same title is the same event");
            let mp4_atom::Any::Moof(moof) = &b[2] else {
                panic!("moof")
            };
            // Decode times count the samples: exactly 48,000 per segment.
            let tfdt = moof.traf[0].tfdt.as_ref().unwrap().base_media_decode_time;
            assert_eq!(tfdt, k as u64 * 48_000);
            let mp4_atom::Any::Mdat(mdat) = &b[3] else {
                panic!("mdat")
            };
            assert_eq!(mdat.data.len(), 50 * 3);
        }
        let text = playlist(&p);
        assert!(text.contains("#EXT-X-VERSION:6\n"), "{text}");
        assert_eq!(
            text.matches("#EXT-X-MAP:URI=\"100.mp4\"\n").count(),
            1,
            "{text}"
        );
        assert_eq!(listed(&p), ["100.m4s", "101.m4s", "102.m4s"]);
        // A new title: a new event id.
        m.set_title("Other", None, crate::ledger::message::TitleSetter::Source);
        feed(50);
        p.tick(Some(m.clone()), T0 + 4000);
        let w = win(&p);
        let b = boxes(&w.segments[3].data);
        let mp4_atom::Any::Emsg(emsg) = &b[1] else {
            panic!("emsg")
        };
        assert_eq!(emsg.id, 2);
    }

    #[test]
    fn a_new_opus_source_keeps_the_init_section_and_an_mp3_fallback_drops_it() {
        let (a, mut fa) = opus_mount("/live.opus");
        let mut p = Packager::new("/live.opus", settings(1000, 10), 0, T0);
        p.tick(Some(a.clone()), T0);
        fa(50);
        p.tick(Some(a.clone()), T0 + 1000);
        // The source reconnects with the same codec settings: a discontinuity, same init.
        let (b, mut fb) = opus_mount("/live.opus");
        p.tick(Some(b.clone()), T0 + 1100);
        fb(50);
        p.tick(Some(b.clone()), T0 + 2100);
        let w = win(&p);
        assert_eq!(w.segments.len(), 2);
        assert!(w.segments[1].discontinuity);
        assert!(Arc::ptr_eq(
            w.segments[0].map.as_ref().unwrap(),
            w.segments[1].map.as_ref().unwrap()
        ));
        // Timestamps run on across the discontinuity.
        let tfdt = |s: &Segment| match &boxes(&s.data)[1] {
            mp4_atom::Any::Moof(m) => m.traf[0].tfdt.as_ref().unwrap().base_media_decode_time,
            other => panic!("{other:?}"),
        };
        assert_eq!(tfdt(&w.segments[1]), 48_000);
        // An MP3 fallback: packed audio, no map.
        let (mp3, mut feed) = mp3_mount("/fallback");
        p.tick(Some(mp3.clone()), T0 + 2200);
        feed.push(frames_for(1000));
        p.tick(Some(mp3.clone()), T0 + 3200);
        let w = win(&p);
        assert_eq!(w.segments.len(), 3);
        assert_eq!(w.segments[2].ext, "mp3");
        assert!(w.segments[2].map.is_none());
        assert!(w.segments[2].discontinuity);
    }

    #[test]
    fn an_ogg_vorbis_mount_gets_no_segment() {
        use throng_proto::ogg::{build_page, FLAG_BOS};
        let (m, mut w) = test_mount("/live.ogg", Format::Ogg);
        let mut vorbis = b"\x01vorbis".to_vec();
        vorbis.extend_from_slice(&[0, 0, 0, 0, 2, 0x44, 0xAC, 0, 0]);
        vorbis.extend_from_slice(&[0; 14]);
        let bos = Bytes::from(build_page(FLAG_BOS, 0, 1, 0, &vorbis).unwrap());
        w.push(bos.clone(), true, Some(Arc::new(bos)));
        let mut p = Packager::new("/live.ogg", settings(1000, 3), 0, T0);
        p.tick(Some(m.clone()), T0);
        for i in 1..200u32 {
            w.push(
                Bytes::from(build_page(0, u64::from(i) * 1024, 1, i, &[0x00; 40]).unwrap()),
                false,
                None,
            );
        }
        p.tick(Some(m.clone()), T0 + 5000);
        assert!(win(&p).segments.is_empty());
    }

    #[test]
    fn low_latency_cuts_parts_of_a_second_that_make_up_the_segment() {
        let (m, mut feed) = opus_mount("/live.opus");
        m.set_title("Song", None, crate::ledger::message::TitleSetter::Source);
        let mut p = Packager::new(
            "/live.opus",
            HlsSettings {
                low_latency: true,
                blocking_reload: true,
                ..settings(2000, 3)
            },
            100,
            T0,
        );
        p.tick(Some(m.clone()), T0);
        feed(49);
        p.tick(Some(m.clone()), T0 + 980);
        let w = win(&p);
        assert!(w.open_parts.is_empty(), "49 packets: no part yet");
        assert_eq!(w.reload(Some(100), Some(0)), Reload::Wait);
        feed(1);
        p.tick(Some(m.clone()), T0 + 1000);
        let w = win(&p);
        assert_eq!(w.open_parts.len(), 1);
        assert_eq!(w.open_parts[0].duration_ns, 1_000_000_000);
        assert_eq!(w.reload(Some(100), Some(0)), Reload::Now);
        assert_eq!(w.reload(Some(100), Some(1)), Reload::Wait);
        assert!(w.is_next_part(100, 1) && !w.is_next_part(100, 2));
        let text = playlist(&p);
        assert!(
            text.contains("#EXT-X-PART-INF:PART-TARGET=1.000\n"),
            "{text}"
        );
        assert!(
            text.ends_with(
                "#EXT-X-MAP:URI=\"100.mp4\"\n\
                 #EXT-X-PART:DURATION=1.000,URI=\"100.0.m4s\",INDEPENDENT=YES\n\
                 #EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"100.1.m4s\"\n"
            ),
            "{text}"
        );
        feed(50);
        p.tick(Some(m.clone()), T0 + 2000);
        let w = win(&p);
        assert_eq!(w.segments.len(), 1);
        let seg = &w.segments[0];
        assert_eq!(seg.parts.len(), 2);
        assert!(w.open_parts.is_empty());
        assert_eq!(w.open_seq, 101);
        // The segment is its parts, back to back: styp, emsg, then two fragments.
        let joined: Vec<u8> = seg.parts.iter().flat_map(|p| p.data.to_vec()).collect();
        assert_eq!(&seg.data[..], &joined[..]);
        let b = boxes(&seg.data);
        let kinds: Vec<String> = b.iter().map(|a| format!("{:?}", a.kind())).collect();
        assert_eq!(b.len(), 6, "{kinds:?}");
        let tfdts: Vec<u64> = b
            .iter()
            .filter_map(|a| match a {
                mp4_atom::Any::Moof(m) => {
                    Some(m.traf[0].tfdt.as_ref().unwrap().base_media_decode_time)
                }
                _ => None,
            })
            .collect();
        assert_eq!(tfdts, [0, 48_000]);
        assert!(matches!(b[1], mp4_atom::Any::Emsg(_)));
        assert_eq!(w.part(100, 1).map(|p| p.index), Some(1));
        assert_eq!(w.reload(Some(100), Some(7)), Reload::Now, "a whole segment");
        let text = playlist(&p);
        assert!(
            text.contains(
                "#EXT-X-PART:DURATION=1.000,URI=\"100.1.m4s\",INDEPENDENT=YES\n#EXTINF:2.000,\n100.m4s\n"
            ),
            "{text}"
        );
        assert!(text.ends_with("#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"101.0.m4s\"\n"));
    }
}
