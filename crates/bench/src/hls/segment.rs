//! Every HLS segment a player fetches, verified as it arrives, and every segment it is offered
//! checked against the one before (sans-IO: [`SegmentCheck::feed`] takes the body in any
//! pieces, nothing of it is kept; [`Continuity`] compares what a player learned of two
//! segments).
//!
//! **A segment's media** comes from its own frames, never from the playlist's `EXTINF`:
//! - *packed audio* (`.mp3`, `.aac`; RFC 8216 section 3.4): the segment opens with an ID3v2
//!   tag whose `com.apple.streaming.transportStreamTimestamp` PRIV frame is the 33-bit 90 kHz
//!   timestamp of its first sample (a segment without the tag or the frame is corrupt:
//!   "MUST"); up to [`MAX_PAD`] zero bytes may follow the tag (Throng pads MP3 audio to whole
//!   1024-byte chunks, `proto::hls::id3::mp3_padding`), then MP3 or ADTS frames, chained header
//!   to header by a fresh [`StreamCheck`] per segment (the format from the response's
//!   `Content-Type`, else the URI's extension). The segment's media time is the sum of its
//!   frames' durations;
//! - *fMP4* (a segment under `EXT-X-MAP`, or `.m4s`; RFC 8216 section 3.3): top-level boxes
//!   (4 printable type characters, sizes within the body), each `moof` parsed (`mp4-atom`):
//!   its track fragment's `tfdt` is the first sample's decode time, its `trun` sample durations
//!   (or the `tfhd`/`trex` defaults) summed are the fragment's media in the track's timescale
//!   (the initialization section's `mdhd`), and the `mdat` after it must hold exactly the
//!   samples' sizes, where the `trun` data offset points. Several fragments in one segment
//!   (low-latency parts) must follow each other's decode times.
//!
//! A segment is **corrupt** ([`Break`]) when it has no valid frame or sample, frames that do not
//! chain, bytes that are no frames (garbage), a frame or box cut short at its end, no ID3
//! timestamp, or boxes that do not parse. Between segments ([`Continuity`]), a player is
//! corrupt when:
//! - a newly listed segment's media sequence number is not the previous one's + 1 while both
//!   have the same discontinuity sequence number (RFC 8216 section 6.2.2: numbers never change
//!   or skip; a discontinuity between them, even one that slid out of the window, allows it);
//! - a fetched segment's first timestamp (ID3 PRIV, `tfdt`) is not the previous segment's
//!   plus that segment's media duration, within one frame (the previous segment's mean frame
//!   or longest sample, plus one tick), for two consecutive segments without a discontinuity;
//!   90 kHz timestamps compare modulo 2^33 (they wrap, ISO/IEC 13818-1);
//! - an `EXT-X-PROGRAM-DATE-TIME` goes back: earlier than the previous tagged segment's in the
//!   same discontinuity (RFC 8216 section 4.3.2.6: the date-time of each segment's first
//!   sample, which later segments cannot precede).

use crate::hls::playlist::Listed;
use crate::verify::stream::{id3_len, Fed, StreamCheck};
use std::fmt;
use throng_proto::format::Format;
use throng_proto::hls::id3;

/// Ticks per second of packed-audio timestamps (MPEG-2 90 kHz).
pub const PTS_RATE: u32 = 90_000;
/// Largest ID3 tag read at a segment's start (bytes; Throng's titles are at most 64 KiB).
pub const MAX_TAG: usize = 192 * 1024;
/// Most zero bytes passed between a segment's ID3 tag and its first frame (bytes).
pub const MAX_PAD: usize = id3::MP3_ALIGN - 1;
/// Largest `moof` box read (bytes: about 100,000 samples).
pub const MAX_MOOF: usize = 1 << 20;
/// Largest initialization section read (bytes).
pub const MAX_INIT: usize = 256 * 1024;

/// How a segment carries its media.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Container {
    /// Packed audio (RFC 8216 section 3.4): an ID3 tag, then MP3 or ADTS frames.
    Packed(Format),
    /// Fragmented MP4 (RFC 8216 section 3.3).
    Fmp4,
    /// Neither (MPEG-TS, WebVTT, …): not verified.
    Unknown,
}

/// The container of a segment at `uri` answered with `content_type`, `has_map` when the
/// playlist names an `EXT-X-MAP` for it: fMP4 with a map, a `.m4s`/`.mp4` URI or an MP4
/// content type; else packed MP3 or ADTS by the content type, else by the extension.
pub fn container_of(uri: &str, content_type: Option<&str>, has_map: bool) -> Container {
    let path = uri.split(['?', '#']).next().unwrap_or(uri);
    let ext = path.rsplit('.').next().unwrap_or("").to_ascii_lowercase();
    let ct = content_type
        .map(|c| {
            c.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default();
    if has_map
        || matches!(ext.as_str(), "m4s" | "mp4" | "m4a" | "cmfa")
        || matches!(ct.as_str(), "audio/mp4" | "video/mp4" | "video/iso.segment")
    {
        return Container::Fmp4;
    }
    let packed = |f: Format| matches!(f, Format::Mp3 | Format::Aac).then_some(f);
    match packed(Format::from_content_type(&ct))
        .or_else(|| Format::from_path_extension(path).and_then(packed))
    {
        Some(f) => Container::Packed(f),
        None => Container::Unknown,
    }
}

/// Why a segment, or a player's sequence of segments, is corrupt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Break {
    /// A packed-audio segment that does not open with an ID3v2 tag (RFC 8216 section 3.4).
    NoTag,
    /// Its tag has no `transportStreamTimestamp` PRIV frame (section 3.4), or is over
    /// [`MAX_TAG`].
    NoTimestamp,
    /// No valid frame or sample at all.
    NoFrames,
    /// Frames that do not chain ([`Fed::broke`]).
    Frames,
    /// Bytes that are no frames (bytes).
    Garbage(u32),
    /// The body ends inside a frame, a box, or before a fragment's `mdat`.
    Truncated,
    /// An fMP4 box that does not parse, a size past the body, an `mdat` without its `moof`.
    BadBox,
    /// An `mdat` whose length is not the sum of its `trun` sample sizes, or a data offset that
    /// does not point at it.
    SampleSizes,
    /// An fMP4 segment without a usable initialization section.
    NoInit,
    /// The media sequence number after `after` is `got` (same discontinuity sequence).
    Sequence {
        /// The previous segment's number.
        after: u64,
        /// The next segment's.
        got: u64,
    },
    /// A first timestamp off the previous segment's end by `off` ticks of `rate` Hz.
    Timestamp {
        /// Ticks off (negative: earlier than the previous segment's end).
        off: i64,
        /// The clock's rate (Hz).
        rate: u32,
    },
    /// `EXT-X-PROGRAM-DATE-TIME` `back_ms` ms earlier than the previous segment's.
    PdtBack {
        /// How far back (ms).
        back_ms: i64,
    },
}

impl Break {
    /// Every kind's key, in report order (the `hls-corrupt-<key>` totals of
    /// [`crate::stats::Snapshot::extra`]).
    pub const KEYS: [&'static str; 12] = [
        "no-id3",
        "no-timestamp",
        "no-frames",
        "frames",
        "garbage",
        "truncated",
        "bad-box",
        "sample-sizes",
        "no-init",
        "sequence",
        "timestamp",
        "pdt",
    ];

    /// The kind's key (one of [`Break::KEYS`]).
    pub fn key(self) -> &'static str {
        match self {
            Break::NoTag => "no-id3",
            Break::NoTimestamp => "no-timestamp",
            Break::NoFrames => "no-frames",
            Break::Frames => "frames",
            Break::Garbage(_) => "garbage",
            Break::Truncated => "truncated",
            Break::BadBox => "bad-box",
            Break::SampleSizes => "sample-sizes",
            Break::NoInit => "no-init",
            Break::Sequence { .. } => "sequence",
            Break::Timestamp { .. } => "timestamp",
            Break::PdtBack { .. } => "pdt",
        }
    }
}

impl fmt::Display for Break {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Break::NoTag => f.write_str("no ID3 tag opens the segment"),
            Break::NoTimestamp => f.write_str("no transportStreamTimestamp in its ID3 tag"),
            Break::NoFrames => f.write_str("no valid frame"),
            Break::Frames => f.write_str("frames that do not chain"),
            Break::Garbage(n) => write!(f, "{n} bytes that are no frames"),
            Break::Truncated => f.write_str("cut short"),
            Break::BadBox => f.write_str("an MP4 box that does not parse"),
            Break::SampleSizes => f.write_str("mdat does not hold the trun's samples"),
            Break::NoInit => f.write_str("no initialization section"),
            Break::Sequence { after, got } => write!(f, "media sequence {got} after {after}"),
            Break::Timestamp { off, rate } => {
                write!(f, "timestamp off by {off} ticks of {rate} Hz")
            }
            Break::PdtBack { back_ms } => write!(f, "program date-time {back_ms} ms back"),
        }
    }
}

/// A timestamp: `ticks` of a clock of `rate` Hz (90 kHz for packed audio, wrapping at
/// 2^33; an fMP4 track's timescale, not wrapping).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// Ticks.
    pub ticks: u64,
    /// The clock's rate (Hz).
    pub rate: u32,
}

impl Stamp {
    /// The clock's wrap (ticks; 0: none).
    fn wrap(self) -> u64 {
        if self.rate == PTS_RATE {
            id3::PTS_WRAP
        } else {
            0
        }
    }

    /// This stamp `d` ticks later (wrapping where the clock wraps).
    pub fn plus(self, d: u64) -> Stamp {
        let w = self.wrap();
        let ticks = if w > 0 {
            (self.ticks % w + d % w) % w
        } else {
            self.ticks.saturating_add(d)
        };
        Stamp { ticks, ..self }
    }

    /// `self − other` in ticks, signed, the shortest way round a wrapping clock.
    pub fn minus(self, other: Stamp) -> i64 {
        let w = self.wrap();
        if w > 0 {
            let d = (self.ticks % w + w - other.ticks % w) % w;
            if d > w / 2 {
                d as i64 - w as i64
            } else {
                d as i64
            }
        } else {
            (self.ticks as i128 - other.ticks as i128).clamp(i64::MIN as i128, i64::MAX as i128)
                as i64
        }
    }
}

/// What a segment held (see the module comment).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SegmentMedia {
    /// Media time of its valid frames or samples (µs).
    pub media_us: u64,
    /// Valid frames (packed audio) or samples (fMP4).
    pub units: u32,
    /// Its first sample's timestamp, when it carries one.
    pub start: Option<Stamp>,
    /// Its media duration in the timestamp's ticks.
    pub ticks: u64,
    /// One frame in the timestamp's ticks (the mean frame, or the longest sample): the
    /// tolerance of the next segment's timestamp.
    pub unit_ticks: u64,
}

/// A segment checked: its media (what was valid of it) and what broke, if anything.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Checked {
    /// The media.
    pub media: SegmentMedia,
    /// The first reason it is corrupt.
    pub broke: Option<Break>,
    /// Bytes that were no frames (packed audio; bytes).
    pub garbage_bytes: u32,
}

/// An fMP4 initialization section, as a player needs it (RFC 8216 section 4.3.2.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Init {
    /// Its track's ID.
    pub track_id: u32,
    /// Ticks per second of its track (`mdhd`).
    pub timescale: u32,
    /// `trex` default sample duration (ticks; 0: none).
    pub default_duration: u32,
    /// `trex` default sample size (bytes; 0: none).
    pub default_size: u32,
}

/// A top-level box header at the start of `b`: (size, type, header length); `None` when `b`
/// holds too few bytes. A size of 0 (to the end) is returned as 0.
fn box_header(b: &[u8]) -> Option<(u64, [u8; 4], usize)> {
    if b.len() < 8 {
        return None;
    }
    let size = u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    let kind = [b[4], b[5], b[6], b[7]];
    if size == 1 {
        let large: [u8; 8] = b.get(8..16)?.try_into().ok()?;
        return Some((u64::from_be_bytes(large), kind, 16));
    }
    Some((size, kind, 8))
}

/// Whether a box type is four printable ASCII characters (ISO/IEC 14496-12 section 4.2 types
/// are; garbage is not).
fn printable(kind: &[u8; 4]) -> bool {
    kind.iter().all(|c| (0x20..=0x7E).contains(c))
}

impl Init {
    /// Reads an initialization section (`ftyp`, `moov`, …): the first track's ID and
    /// timescale (the sound track when there are several), its `trex` defaults.
    ///
    /// Errors: [`Break::NoInit`] when there is no `moov`, it does not parse, or its timescale
    /// is 0.
    pub fn parse(mut b: &[u8]) -> Result<Init, Break> {
        use mp4_atom::Decode;
        while let Some((size, kind, hl)) = box_header(b) {
            let size = if size == 0 { b.len() as u64 } else { size };
            if size < hl as u64 || size > b.len() as u64 {
                return Err(Break::NoInit);
            }
            let (this, rest) = b.split_at(size as usize);
            if &kind == b"moov" {
                let moov = mp4_atom::Moov::decode(&mut &this[..]).map_err(|_| Break::NoInit)?;
                let trak = moov
                    .trak
                    .iter()
                    .find(|t| t.mdia.hdlr.handler == b"soun".into())
                    .or(moov.trak.first())
                    .ok_or(Break::NoInit)?;
                let track_id = trak.tkhd.track_id;
                let timescale = trak.mdia.mdhd.timescale;
                if timescale == 0 {
                    return Err(Break::NoInit);
                }
                let trex = moov
                    .mvex
                    .as_ref()
                    .and_then(|m| m.trex.iter().find(|t| t.track_id == track_id));
                return Ok(Init {
                    track_id,
                    timescale,
                    default_duration: trex.map_or(0, |t| t.default_sample_duration),
                    default_size: trex.map_or(0, |t| t.default_sample_size),
                });
            }
            b = rest;
        }
        Err(Break::NoInit)
    }
}

/// Where a packed-audio segment is.
#[derive(Debug)]
enum PackedStage {
    /// Gathering the ID3 tag.
    Tag(Vec<u8>),
    /// Passing the zeros after it: how many so far.
    Pad(usize),
    /// In the frames.
    Frames,
}

#[derive(Debug)]
struct Packed {
    stage: PackedStage,
    check: StreamCheck,
    fed: Fed,
    pts: Option<u64>,
    broke: Option<Break>,
}

impl Packed {
    fn new(format: Format) -> Packed {
        Packed {
            stage: PackedStage::Tag(Vec::new()),
            check: StreamCheck::new(format, 0),
            fed: Fed::default(),
            pts: None,
            broke: None,
        }
    }

    fn frames(&mut self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let f = self.check.feed(data, &mut Vec::new());
        self.fed.media_us += f.media_us;
        self.fed.units += f.units;
        self.fed.garbage += f.garbage;
        self.fed.broke |= f.broke;
    }

    fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            match &mut self.stage {
                PackedStage::Tag(buf) => {
                    if buf.len() < 10 {
                        let take = (10 - buf.len()).min(data.len());
                        buf.extend_from_slice(&data[..take]);
                        data = &data[take..];
                        if buf.len() < 10 {
                            continue;
                        }
                        match id3_len(buf) {
                            Some(len) if len <= MAX_TAG => buf.reserve(len - 10),
                            other => {
                                // No tag (or one too large to read): the bytes are judged as
                                // frames all the same (the frame check passes over a tag).
                                self.broke.get_or_insert(if other.is_none() {
                                    Break::NoTag
                                } else {
                                    Break::NoTimestamp
                                });
                                let held = std::mem::take(buf);
                                self.stage = PackedStage::Frames;
                                self.frames(&held);
                                continue;
                            }
                        }
                    }
                    let len = id3_len(buf).unwrap_or(buf.len());
                    let take = len.saturating_sub(buf.len()).min(data.len());
                    buf.extend_from_slice(&data[..take]);
                    data = &data[take..];
                    if buf.len() >= len {
                        self.pts = id3::parse_tag(buf).and_then(|t| t.pts_90k);
                        if self.pts.is_none() {
                            self.broke.get_or_insert(Break::NoTimestamp);
                        }
                        self.stage = PackedStage::Pad(0);
                    }
                }
                PackedStage::Pad(n) => {
                    let zeros = data
                        .iter()
                        .take(MAX_PAD - *n)
                        .take_while(|&&b| b == 0)
                        .count();
                    *n += zeros;
                    data = &data[zeros..];
                    if !data.is_empty() || *n == MAX_PAD {
                        self.stage = PackedStage::Frames;
                    }
                }
                PackedStage::Frames => {
                    self.frames(data);
                    return;
                }
            }
        }
    }

    fn finish(self) -> Checked {
        let f = self.fed;
        let mut broke = self.broke;
        if matches!(self.stage, PackedStage::Tag(_)) {
            broke.get_or_insert(Break::NoTag);
        }
        if f.units == 0 {
            broke.get_or_insert(Break::NoFrames);
        }
        if f.broke {
            broke.get_or_insert(Break::Frames);
        }
        if f.garbage > 0 {
            broke.get_or_insert(Break::Garbage(f.garbage));
        }
        if f.units > 0 && !self.check.at_boundary() {
            broke.get_or_insert(Break::Truncated);
        }
        let ticks = f.media_us * u64::from(PTS_RATE) / 1_000_000;
        Checked {
            media: SegmentMedia {
                media_us: f.media_us,
                units: f.units,
                start: self.pts.map(|ticks| Stamp {
                    ticks,
                    rate: PTS_RATE,
                }),
                ticks,
                unit_ticks: ticks.div_ceil(u64::from(f.units.max(1))),
            },
            broke,
            garbage_bytes: f.garbage,
        }
    }
}

/// Where an fMP4 segment's box walk is.
#[derive(Debug)]
enum BoxStage {
    /// Reading a box header: the bytes so far.
    Header { buf: [u8; 16], len: u8 },
    /// Keeping a `moof` whole: its bytes so far, its size.
    Moof { buf: Vec<u8>, size: usize },
    /// Passing a box's body: bytes left.
    Skip(u64),
    /// In an `mdat`'s samples: bytes left.
    Mdat(u64),
    /// Broken: nothing more is read.
    Dead,
}

/// A `moof` read, waiting for its `mdat`.
#[derive(Debug, Clone, Copy)]
struct Fragment {
    /// Sample bytes its `trun`s list, when every size is known.
    payload: Option<u64>,
    /// The first `trun`'s data offset from the start of `moof`, when base-is-moof.
    data_offset: Option<u64>,
    /// The `moof`'s size.
    moof_size: u64,
    samples: u32,
    ticks: u64,
    longest: u64,
}

#[derive(Debug)]
struct Fmp4 {
    init: Option<Init>,
    /// The body's length, when known (bytes).
    body_len: Option<u64>,
    /// Bytes read so far.
    at: u64,
    stage: BoxStage,
    pending: Option<Fragment>,
    start: Option<u64>,
    next_dts: Option<u64>,
    samples: u32,
    ticks: u64,
    longest: u64,
    broke: Option<Break>,
}

impl Fmp4 {
    fn new(init: Option<Init>, body_len: Option<u64>) -> Fmp4 {
        Fmp4 {
            init,
            body_len,
            at: 0,
            stage: BoxStage::Header {
                buf: [0; 16],
                len: 0,
            },
            pending: None,
            start: None,
            next_dts: None,
            samples: 0,
            ticks: 0,
            longest: 0,
            broke: if init.is_none() {
                Some(Break::NoInit)
            } else {
                None
            },
        }
    }

    fn die(&mut self, why: Break) {
        self.broke.get_or_insert(why);
        self.stage = BoxStage::Dead;
    }

    fn feed(&mut self, mut data: &[u8]) {
        if self.init.is_none() {
            return;
        }
        while !data.is_empty() {
            match &mut self.stage {
                BoxStage::Dead => return,
                BoxStage::Header { buf, len } => {
                    let have = *len as usize;
                    let large = have >= 4 && buf[..4] == [0, 0, 0, 1];
                    let want = if large { 16 } else { 8 };
                    let take = (want - have).min(data.len());
                    buf[have..have + take].copy_from_slice(&data[..take]);
                    data = &data[take..];
                    self.at += take as u64;
                    let have = have + take;
                    *len = have as u8;
                    let large = have >= 4 && buf[..4] == [0, 0, 0, 1];
                    if have < 8 || (large && have < 16) {
                        continue;
                    }
                    let hdr = *buf;
                    let Some((size, kind, hl)) = box_header(&hdr[..have]) else {
                        continue;
                    };
                    self.start_box(size, kind, hl as u64, &hdr[..hl]);
                }
                BoxStage::Moof { buf, size } => {
                    let take = (*size - buf.len()).min(data.len());
                    buf.extend_from_slice(&data[..take]);
                    data = &data[take..];
                    self.at += take as u64;
                    if buf.len() == *size {
                        let moof = std::mem::take(buf);
                        self.stage = BoxStage::Header {
                            buf: [0; 16],
                            len: 0,
                        };
                        self.moof(&moof);
                    }
                }
                BoxStage::Skip(left) | BoxStage::Mdat(left) => {
                    let take = (*left).min(data.len() as u64);
                    *left -= take;
                    data = &data[take as usize..];
                    self.at += take;
                    if *left == 0 {
                        let mdat = matches!(self.stage, BoxStage::Mdat(_));
                        self.stage = BoxStage::Header {
                            buf: [0; 16],
                            len: 0,
                        };
                        if mdat {
                            self.mdat_done();
                        }
                    }
                }
            }
        }
    }

    /// A box header was read (`at` is past it).
    fn start_box(&mut self, size: u64, kind: [u8; 4], hl: u64, header: &[u8]) {
        let start = self.at - hl;
        let size = match (size, self.body_len) {
            (0, Some(n)) => n.saturating_sub(start),
            (0, None) => return self.die(Break::BadBox),
            (s, _) => s,
        };
        if !printable(&kind) || size < hl || self.body_len.is_some_and(|n| start + size > n) {
            return self.die(Break::BadBox);
        }
        let body = size - hl;
        match &kind {
            b"moof" => {
                if self.pending.is_some() {
                    // A fragment without its samples.
                    return self.die(Break::Truncated);
                }
                if size as usize > MAX_MOOF {
                    return self.die(Break::BadBox);
                }
                let mut buf = Vec::with_capacity(size as usize);
                buf.extend_from_slice(header);
                if body == 0 {
                    return self.die(Break::BadBox);
                }
                self.stage = BoxStage::Moof {
                    buf,
                    size: size as usize,
                };
            }
            b"mdat" => {
                let Some(frag) = self.pending else {
                    return self.die(Break::BadBox);
                };
                if frag.payload.is_some_and(|p| p != body)
                    || frag.data_offset.is_some_and(|o| o != frag.moof_size + hl)
                {
                    return self.die(Break::SampleSizes);
                }
                self.stage = if body == 0 {
                    self.mdat_done();
                    BoxStage::Header {
                        buf: [0; 16],
                        len: 0,
                    }
                } else {
                    BoxStage::Mdat(body)
                };
            }
            _ => {
                self.stage = if body == 0 {
                    BoxStage::Header {
                        buf: [0; 16],
                        len: 0,
                    }
                } else {
                    BoxStage::Skip(body)
                };
            }
        }
    }

    /// A whole `moof`.
    fn moof(&mut self, b: &[u8]) {
        use mp4_atom::Decode;
        let Some(init) = self.init else { return };
        let moof = match mp4_atom::Moof::decode(&mut &b[..]) {
            Ok(m) => m,
            Err(_) => return self.die(Break::BadBox),
        };
        let mut frag = Fragment {
            payload: Some(0),
            data_offset: None,
            moof_size: b.len() as u64,
            samples: 0,
            ticks: 0,
            longest: 0,
        };
        let mut tfdt = None;
        let mut first_run = true;
        for traf in moof
            .traf
            .iter()
            .filter(|t| t.tfhd.track_id == init.track_id)
        {
            tfdt = tfdt.or(traf.tfdt.as_ref().map(|t| t.base_media_decode_time));
            let dflt_dur = traf
                .tfhd
                .default_sample_duration
                .unwrap_or(init.default_duration);
            let dflt_size = traf.tfhd.default_sample_size.unwrap_or(init.default_size);
            for run in &traf.trun {
                if first_run {
                    first_run = false;
                    if traf.tfhd.default_base_is_moof && traf.tfhd.base_data_offset.is_none() {
                        frag.data_offset = run.data_offset.and_then(|o| u64::try_from(o).ok());
                        if run.data_offset.is_some() && frag.data_offset.is_none() {
                            return self.die(Break::SampleSizes);
                        }
                    }
                }
                for e in run.samples.iter() {
                    let d = u64::from(e.duration.unwrap_or(dflt_dur));
                    frag.samples = frag.samples.saturating_add(1);
                    frag.ticks = frag.ticks.saturating_add(d);
                    frag.longest = frag.longest.max(d);
                    let size = e.size.unwrap_or(dflt_size);
                    frag.payload = match (frag.payload, e.size.is_some() || dflt_size > 0) {
                        (Some(p), true) => Some(p + u64::from(size)),
                        _ => None,
                    };
                }
            }
        }
        if frag.samples == 0 {
            return self.die(Break::NoFrames);
        }
        // Low-latency parts: each fragment starts where the one before ended.
        if let (Some(t), Some(next)) = (tfdt, self.next_dts) {
            if t.abs_diff(next) > self.longest.max(1) {
                return self.die(Break::Timestamp {
                    off: t as i64 - next as i64,
                    rate: init.timescale,
                });
            }
        }
        if self.start.is_none() {
            self.start = tfdt;
        }
        self.next_dts = tfdt.map(|t| t + frag.ticks);
        self.pending = Some(frag);
    }

    /// The `mdat` after a `moof` is in: the fragment's samples count.
    fn mdat_done(&mut self) {
        if let Some(f) = self.pending.take() {
            self.samples = self.samples.saturating_add(f.samples);
            self.ticks = self.ticks.saturating_add(f.ticks);
            self.longest = self.longest.max(f.longest);
        }
    }

    fn finish(self) -> Checked {
        let mut broke = self.broke;
        let at_boundary = matches!(self.stage, BoxStage::Header { len: 0, .. });
        if !matches!(self.stage, BoxStage::Dead) && (!at_boundary || self.pending.is_some()) {
            broke.get_or_insert(Break::Truncated);
        }
        if self.samples == 0 {
            broke.get_or_insert(Break::NoFrames);
        }
        let rate = self.init.map_or(1, |i| i.timescale.max(1));
        Checked {
            media: SegmentMedia {
                media_us: self.ticks.saturating_mul(1_000_000) / u64::from(rate),
                units: self.samples,
                start: self.start.map(|ticks| Stamp { ticks, rate }),
                ticks: self.ticks,
                unit_ticks: self.longest,
            },
            broke,
            garbage_bytes: 0,
        }
    }
}

#[derive(Debug)]
enum Inner {
    Packed(Packed),
    Fmp4(Fmp4),
    Unknown,
}

/// One segment's check (see the module comment).
#[derive(Debug)]
pub struct SegmentCheck {
    inner: Inner,
}

impl SegmentCheck {
    /// A check of a segment in `container`; `init` is the initialization section of an fMP4
    /// segment, `body_len` the response's length when known (bytes).
    pub fn new(container: Container, init: Option<Init>, body_len: Option<u64>) -> SegmentCheck {
        SegmentCheck {
            inner: match container {
                Container::Packed(f) => Inner::Packed(Packed::new(f)),
                Container::Fmp4 => Inner::Fmp4(Fmp4::new(init, body_len)),
                Container::Unknown => Inner::Unknown,
            },
        }
    }

    /// Whether the segment's media is verified (its container is known).
    pub fn verifies(&self) -> bool {
        !matches!(self.inner, Inner::Unknown)
    }

    /// Takes the next bytes of the body.
    pub fn feed(&mut self, data: &[u8]) {
        match &mut self.inner {
            Inner::Packed(p) => p.feed(data),
            Inner::Fmp4(m) => m.feed(data),
            Inner::Unknown => {}
        }
    }

    /// The body is complete: what it held and what broke.
    pub fn finish(self) -> Checked {
        match self.inner {
            Inner::Packed(p) => p.finish(),
            Inner::Fmp4(m) => m.finish(),
            Inner::Unknown => Checked::default(),
        }
    }
}

/// What a player knows of the last segment it was offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ListedMark {
    seq: u64,
    discontinuity: u64,
    pdt_ms: Option<i64>,
}

/// What a player knows of the last segment it fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MediaMark {
    seq: u64,
    discontinuity: u64,
    /// Where the next segment's timestamp should be.
    next: Option<Stamp>,
    /// How far off it may be (ticks).
    tolerance: u64,
}

/// One player's checks between segments (see the module comment).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Continuity {
    listed: Option<ListedMark>,
    media: Option<MediaMark>,
}

impl Continuity {
    /// The last segment offered, if any.
    pub fn last_listed(&self) -> Option<u64> {
        self.listed.map(|l| l.seq)
    }

    /// A segment newly offered by a playlist, after the one offered before (RFC 8216 sections
    /// 6.2.2 and 4.3.2.6).
    ///
    /// Errors: [`Break::Sequence`] or [`Break::PdtBack`] (the segment is taken as the new
    /// reference all the same).
    pub fn listed(&mut self, s: &Listed) -> Result<(), Break> {
        let prev = self.listed;
        let same_timeline = prev.is_some_and(|p| p.discontinuity == s.discontinuity);
        let pdt_ms = match (prev, s.pdt_ms) {
            (Some(p), None) if same_timeline => p.pdt_ms,
            _ => s.pdt_ms,
        };
        self.listed = Some(ListedMark {
            seq: s.seq,
            discontinuity: s.discontinuity,
            pdt_ms,
        });
        let Some(p) = prev.filter(|_| same_timeline) else {
            return Ok(());
        };
        if s.seq != p.seq.wrapping_add(1) {
            return Err(Break::Sequence {
                after: p.seq,
                got: s.seq,
            });
        }
        if let (Some(a), Some(b)) = (p.pdt_ms, s.pdt_ms) {
            if b < a {
                return Err(Break::PdtBack { back_ms: a - b });
            }
        }
        Ok(())
    }

    /// The media of segment `seq` of discontinuity sequence number `discontinuity`, fetched
    /// after the one before (packed-audio timestamps RFC 8216 section 3.4, fMP4 `tfdt` ISO/IEC
    /// 14496-12 section 8.8.12).
    ///
    /// Errors: [`Break::Timestamp`] (the segment is taken as the new reference all the same).
    pub fn media(&mut self, seq: u64, discontinuity: u64, m: &SegmentMedia) -> Result<(), Break> {
        let prev = self.media;
        self.media = Some(MediaMark {
            seq,
            discontinuity,
            next: m.start.map(|s| s.plus(m.ticks)),
            tolerance: m.unit_ticks + 1,
        });
        let Some(p) = prev else { return Ok(()) };
        if p.seq.wrapping_add(1) != seq || p.discontinuity != discontinuity {
            return Ok(());
        }
        if let (Some(want), Some(got)) = (p.next, m.start) {
            if want.rate == got.rate {
                let off = got.minus(want);
                if off.unsigned_abs() > p.tolerance {
                    return Err(Break::Timestamp {
                        off,
                        rate: got.rate,
                    });
                }
            }
        }
        Ok(())
    }

    /// Forgets the last fetched segment (its media broke: the next is not compared with it).
    pub fn forget_media(&mut self) {
        self.media = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use throng_proto::hls::fmp4::{self, Sample, Track, TrackCodec};

    /// `n` MPEG-1 layer III frames, 64 kbit/s, 44.1 kHz, mono (208 bytes, 1152 samples each).
    fn frames(n: usize) -> Vec<u8> {
        let mut f = vec![0x55u8; 208];
        f[..4].copy_from_slice(&[0xFF, 0xFB, 0x50, 0xC4]);
        f.repeat(n)
    }

    /// A packed MP3 segment: the ID3 tag of `pts`, `pad` zeros, `n` frames.
    fn packed(pts: u64, pad: usize, n: usize) -> Vec<u8> {
        let mut s = id3::segment_tag(pts, Some("Artist - Title"));
        s.resize(s.len() + pad, 0);
        s.extend(frames(n));
        s
    }

    fn check(c: Container, init: Option<Init>, body: &[u8], piece: usize) -> Checked {
        let mut k = SegmentCheck::new(c, init, Some(body.len() as u64));
        for p in body.chunks(piece.max(1)) {
            k.feed(p);
        }
        k.finish()
    }

    const MP3: Container = Container::Packed(Format::Mp3);

    #[test]
    fn packed_segments_give_their_frames_and_timestamp() {
        let seg = packed(1234, 700, 77);
        for piece in [1, 9, 10, 11, 64, 1000, seg.len()] {
            let c = check(MP3, None, &seg, piece);
            assert_eq!(c.broke, None, "pieces of {piece}");
            assert_eq!(c.media.units, 77);
            assert_eq!(c.media.media_us, 77 * 26_122);
            assert_eq!(
                c.media.start,
                Some(Stamp {
                    ticks: 1234,
                    rate: PTS_RATE
                })
            );
            // 1152 samples at 44.1 kHz = 2351 ticks, within a tick.
            assert!(c.media.unit_ticks.abs_diff(2351) <= 1, "{:?}", c.media);
        }
    }

    #[test]
    fn broken_packed_segments_say_why() {
        let mut garbage = packed(0, 0, 20);
        let mut seed = 11u64;
        for _ in 0..3000 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            garbage.push((seed >> 56) as u8 | 1);
        }
        let c = check(MP3, None, &garbage, 500);
        assert_eq!(c.broke, Some(Break::Frames));
        assert_eq!(c.media.units, 20, "the valid frames still count");
        // Only garbage after the tag: no frame.
        let mut only = id3::segment_tag(0, None);
        only.extend_from_slice(&garbage[garbage.len() - 3000..]);
        assert_eq!(check(MP3, None, &only, 333).broke, Some(Break::NoFrames));
        // No tag.
        assert_eq!(check(MP3, None, &frames(30), 100).broke, Some(Break::NoTag));
        // A tag without the timestamp.
        let mut untimed = b"ID3\x04\x00\x00\x00\x00\x00\x05hello".to_vec();
        untimed.extend(frames(30));
        assert_eq!(
            check(MP3, None, &untimed, 7).broke,
            Some(Break::NoTimestamp)
        );
        // Cut inside the last frame.
        let seg = packed(0, 0, 30);
        assert_eq!(
            check(MP3, None, &seg[..seg.len() - 50], 64).broke,
            Some(Break::Truncated)
        );
        // More zeros than padding: garbage.
        assert!(matches!(
            check(MP3, None, &packed(0, 3000, 30), 256).broke,
            Some(Break::Garbage(_))
        ));
        // Empty.
        assert_eq!(check(MP3, None, &[], 1).broke, Some(Break::NoTag));
    }

    #[test]
    fn containers_by_map_type_and_extension() {
        assert_eq!(container_of("12.mp3", None, false), MP3);
        assert_eq!(
            container_of("12.bin", Some("audio/aac"), false),
            Container::Packed(Format::Aac)
        );
        assert_eq!(
            container_of("12.aac?x=1", None, false),
            Container::Packed(Format::Aac)
        );
        assert_eq!(
            container_of("12.m4s", Some("audio/mpeg"), false),
            Container::Fmp4
        );
        assert_eq!(container_of("seg", None, true), Container::Fmp4);
        assert_eq!(
            container_of("12.ts", Some("video/mp2t"), false),
            Container::Unknown
        );
    }

    fn listed(seq: u64, discontinuity: u64, pdt_ms: Option<i64>) -> Listed {
        Listed {
            seq,
            uri: format!("{seq}.mp3"),
            duration_us: 2_000_000,
            discontinuity,
            discontinuity_tag: false,
            pdt_ms,
            map: None,
        }
    }

    #[test]
    fn a_sequence_jump_is_a_break_unless_a_discontinuity_came_between() {
        let mut c = Continuity::default();
        assert_eq!(c.listed(&listed(10, 0, None)), Ok(()));
        assert_eq!(c.listed(&listed(11, 0, None)), Ok(()));
        assert_eq!(
            c.listed(&listed(13, 0, None)),
            Err(Break::Sequence { after: 11, got: 13 })
        );
        // The jump is taken as the new reference.
        assert_eq!(c.listed(&listed(14, 0, None)), Ok(()));
        // A discontinuity (even one that slid out of the window) allows a jump.
        assert_eq!(c.listed(&listed(20, 1, None)), Ok(()));
        assert_eq!(c.last_listed(), Some(20));
    }

    #[test]
    fn a_program_date_time_going_back_is_a_break() {
        let mut c = Continuity::default();
        let t = 1_790_000_000_000;
        assert_eq!(c.listed(&listed(1, 0, Some(t))), Ok(()));
        assert_eq!(c.listed(&listed(2, 0, Some(t + 2000))), Ok(()));
        // Untagged: the last date-time stays the reference.
        assert_eq!(c.listed(&listed(3, 0, None)), Ok(()));
        assert_eq!(
            c.listed(&listed(4, 0, Some(t + 1500))),
            Err(Break::PdtBack { back_ms: 500 })
        );
        // Equal is not back; after a discontinuity anything goes.
        assert_eq!(c.listed(&listed(5, 0, Some(t + 1500))), Ok(()));
        assert_eq!(c.listed(&listed(6, 1, Some(t - 99_000))), Ok(()));
    }

    fn media(start: u64, ticks: u64) -> SegmentMedia {
        SegmentMedia {
            media_us: ticks * 1_000_000 / 90_000,
            units: 77,
            start: Some(Stamp {
                ticks: start,
                rate: PTS_RATE,
            }),
            ticks,
            unit_ticks: 2351,
        }
    }

    #[test]
    fn timestamps_continue_within_one_frame_and_wrap_at_33_bits() {
        let mut c = Continuity::default();
        let d = 181_035; // 77 frames
        assert_eq!(c.media(1, 0, &media(0, d)), Ok(()));
        assert_eq!(c.media(2, 0, &media(d + 2000, d)), Ok(()), "within a frame");
        let next = 2 * d + 2000;
        assert_eq!(
            c.media(3, 0, &media(next + 2353, d)),
            Err(Break::Timestamp {
                off: 2353,
                rate: PTS_RATE
            })
        );
        assert_eq!(
            c.media(4, 0, &media(next - 90_000, d)),
            Err(Break::Timestamp {
                off: -90_000 - 2353 - d as i64,
                rate: PTS_RATE
            })
        );
        // Not compared across a discontinuity, a gap in fetched numbers, or after a forget.
        assert_eq!(c.media(5, 1, &media(7, d)), Ok(()));
        assert_eq!(c.media(7, 1, &media(99, d)), Ok(()));
        c.forget_media();
        assert_eq!(c.media(8, 1, &media(5, d)), Ok(()));
        // Across the 33-bit wrap.
        let mut c = Continuity::default();
        let near = id3::PTS_WRAP - 100_000;
        assert_eq!(c.media(1, 0, &media(near, d)), Ok(()));
        assert_eq!(c.media(2, 0, &media(d - 100_000, d)), Ok(()));
        // A whole packed segment's stamp through the check, as the server writes them.
        let a = check(MP3, None, &packed(near, 0, 77), 999).media;
        let b = check(
            MP3,
            None,
            &packed((near + a.ticks) % id3::PTS_WRAP, 0, 77),
            999,
        )
        .media;
        let mut c = Continuity::default();
        assert_eq!(c.media(1, 0, &a), Ok(()));
        assert_eq!(c.media(2, 0, &b), Ok(()));
    }

    fn opus_track() -> Track {
        let mut head = b"OpusHead".to_vec();
        head.extend_from_slice(&[1, 2, 0x38, 1, 0x80, 0xBB, 0, 0, 0, 0, 0]);
        Track::from_opus_head(&head).unwrap()
    }

    /// An fMP4 Opus segment: `n` 20 ms samples (960 ticks at 48 kHz) from `decode_time`.
    fn m4s(seq: u32, decode_time: u64, n: usize) -> Vec<u8> {
        let data = vec![0xF8u8; 40];
        let samples: Vec<Sample<'_>> = (0..n)
            .map(|_| Sample {
                data: &data,
                duration: 960,
            })
            .collect();
        let tag = id3::title_tag("A - B");
        fmp4::media_segment(
            seq,
            48_000,
            decode_time,
            &samples,
            Some(fmp4::TimedId3 { tag: &tag, id: 1 }),
        )
        .unwrap()
    }

    #[test]
    fn fmp4_segments_give_their_samples_and_decode_time() {
        let track = opus_track();
        assert!(matches!(track.codec, TrackCodec::Opus(_)));
        let init = Init::parse(&fmp4::init_segment(&track).unwrap()).unwrap();
        assert_eq!((init.timescale, init.track_id), (48_000, fmp4::TRACK_ID));
        let seg = m4s(1, 96_000, 100);
        for piece in [1, 7, 8, 9, 100, seg.len()] {
            let c = check(Container::Fmp4, Some(init), &seg, piece);
            assert_eq!(c.broke, None, "pieces of {piece}");
            assert_eq!(c.media.units, 100);
            assert_eq!(c.media.ticks, 96_000);
            assert_eq!(c.media.media_us, 2_000_000);
            assert_eq!(
                c.media.start,
                Some(Stamp {
                    ticks: 96_000,
                    rate: 48_000
                })
            );
        }
        // Parts: two fragments in one segment, each after the other.
        let data = [0xF8u8; 40];
        let s = |n| {
            vec![
                Sample {
                    data: &data,
                    duration: 960
                };
                n
            ]
        };
        let mut parts = fmp4::media_segment(1, 48_000, 0, &s(50), None).unwrap();
        parts.extend(fmp4::fragment(2, 48_000, 48_000, &s(50), None).unwrap());
        let c = check(Container::Fmp4, Some(init), &parts, 77);
        assert_eq!((c.broke, c.media.ticks), (None, 96_000));
        let mut bad = fmp4::media_segment(1, 48_000, 0, &s(50), None).unwrap();
        bad.extend(fmp4::fragment(2, 48_000, 50_000, &s(50), None).unwrap());
        assert_eq!(
            check(Container::Fmp4, Some(init), &bad, 77).broke,
            Some(Break::Timestamp {
                off: 2000,
                rate: 48_000
            })
        );
    }

    #[test]
    fn fmp4_decode_times_continue_between_segments() {
        let init = Init::parse(&fmp4::init_segment(&opus_track()).unwrap()).unwrap();
        let one = |seq: u32, t: u64| check(Container::Fmp4, Some(init), &m4s(seq, t, 100), 500);
        let mut c = Continuity::default();
        assert_eq!(c.media(10, 0, &one(1, 0).media), Ok(()));
        assert_eq!(c.media(11, 0, &one(2, 96_000).media), Ok(()));
        assert_eq!(
            c.media(12, 0, &one(3, 192_000 + 960).media),
            Ok(()),
            "one sample"
        );
        assert_eq!(
            c.media(13, 0, &one(4, 288_960 + 962).media),
            Err(Break::Timestamp {
                off: 962,
                rate: 48_000
            })
        );
        assert_eq!(
            c.media(14, 0, &one(5, 0).media),
            Err(Break::Timestamp {
                off: -(288_960 + 962 + 96_000),
                rate: 48_000
            })
        );
    }

    #[test]
    fn broken_fmp4_segments_say_why() {
        let init = Init::parse(&fmp4::init_segment(&opus_track()).unwrap()).unwrap();
        let seg = m4s(1, 0, 10);
        // No initialization section.
        assert_eq!(
            check(Container::Fmp4, None, &seg, 50).broke,
            Some(Break::NoInit)
        );
        // Cut short: with its length known, the last box overruns the body; without (a
        // chunked body), it ends inside a box.
        let cut = &seg[..seg.len() - 3];
        assert_eq!(
            check(Container::Fmp4, Some(init), cut, 50).broke,
            Some(Break::BadBox)
        );
        let mut k = SegmentCheck::new(Container::Fmp4, Some(init), None);
        k.feed(cut);
        assert_eq!(k.finish().broke, Some(Break::Truncated));
        // Garbage where a box should be.
        let mut g = seg.clone();
        g.extend_from_slice(&[0x9C, 0x01, 0xFE, 0x33, 0x80, 0x81, 0x82, 0x83, 0, 0]);
        assert_eq!(
            check(Container::Fmp4, Some(init), &g, 50).broke,
            Some(Break::BadBox)
        );
        // An mdat longer than its samples (the last box: size + 1, one byte more).
        let mut long = seg.clone();
        let at = long.len() - 8 - 400;
        let size = u32::from_be_bytes(long[at..at + 4].try_into().unwrap());
        assert_eq!(&long[at + 4..at + 8], b"mdat");
        long[at..at + 4].copy_from_slice(&(size + 1).to_be_bytes());
        long.push(0);
        assert_eq!(
            check(Container::Fmp4, Some(init), &long, 50).broke,
            Some(Break::SampleSizes)
        );
        // A bad initialization section.
        assert_eq!(Init::parse(b"\0\0\0\x08ftyp"), Err(Break::NoInit));
        assert_eq!(Init::parse(&[0xFF; 40]), Err(Break::NoInit));
    }
}
