//! Splits a stream of bytes into frames (MP3, ADTS-AAC) or pages (Ogg), resynchronising over
//! garbage. Sans-IO: feed bytes with [`Framer::push`], take units with [`Framer::next_unit`].
//!
//! A frame is accepted only when the next frame's header confirms it (same version, layer and
//! sample rate) or when the previous frame was accepted and the header matches, so random bytes
//! that happen to look like a header are not taken for audio. ID3v2 tags are skipped silently.
//! Ogg pages must pass their CRC; header pages (BOS and codec headers, counted per codec) are
//! marked so the server can replay them to listeners who join mid-stream, as Icecast 2.4.4
//! `format_ogg.c` keeps `header_pages`.

use std::collections::HashMap;

use bytes::{Buf, Bytes, BytesMut};
use thiserror::Error;

use crate::format::Format;
use crate::ogg::{self, Codec, PageParse};
use crate::{adts, mp3};

/// Piece size for [`Format::Other`], as Icecast's generic format packs 1400-byte refbufs.
pub const OTHER_UNIT_BYTES: usize = 1400;

/// Largest ID3v2 tag skipped as metadata, in bytes; a larger declared size is treated as garbage.
pub const MAX_ID3_BYTES: usize = 1024 * 1024;

/// Garbage is reported at least every this many skipped bytes, even before sync is found.
pub const GARBAGE_REPORT_BYTES: usize = 4096;

/// What a unit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitKind {
    /// An MP3 or ADTS frame, or a piece of an unframed stream.
    Audio,
    /// An Ogg page holding a BOS or codec header packet; `new_chain` is true on the first BOS
    /// page of a (possibly chained) Ogg stream, where the header set starts anew.
    OggHeader {
        /// First page of a new header set.
        new_chain: bool,
    },
    /// An Ogg data page.
    OggPage,
}

/// One frame or page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    /// The frame's or page's bytes.
    pub data: Bytes,
    /// Play time of the unit in microseconds, 0 when unknown (headers, unframed data, or an Ogg
    /// page on which no packet ends).
    pub duration_us: u64,
    /// What the unit is.
    pub kind: UnitKind,
}

/// Errors reported between units; framing continues after them.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// Bytes that were not part of any frame or page were skipped.
    #[error("skipped {skipped} bytes that are not {format:?} frames")]
    Garbage {
        /// Bytes skipped.
        skipped: usize,
        /// The format being framed.
        format: Format,
    },
}

/// Audio parameters seen in the stream, for status pages and the load generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamParams {
    /// Sample rate in Hz (0 when unknown).
    pub sample_rate: u32,
    /// Channels (0 when unknown).
    pub channels: u8,
    /// Bitrate in kbit/s of the last MP3 frame (0 when unknown or not MP3).
    pub bitrate_kbps: u32,
    /// Codec name (`MP3`, `AAC`, `Opus`, `Vorbis`, ...), empty when unknown.
    pub codec: &'static str,
}

/// The header of the last accepted frame.
#[derive(Debug, Clone, Copy)]
enum LastHeader {
    Mp3(mp3::Mp3Header),
    Adts(adts::AdtsHeader),
}

/// What framing needs from an MP3 or ADTS frame header.
trait FrameHeader: Copy {
    /// Bytes needed to parse a header.
    const LEN: usize;
    fn parse(b: &[u8]) -> Option<Self>;
    fn frame_len(&self) -> usize;
    fn same_stream(&self, other: &Self) -> bool;
    fn duration_us(&self) -> u64;
    fn params(&self) -> StreamParams;
    fn from_last(last: &LastHeader) -> Option<Self>;
    fn into_last(self) -> LastHeader;
}

impl FrameHeader for mp3::Mp3Header {
    const LEN: usize = 4;
    fn parse(b: &[u8]) -> Option<Self> {
        mp3::parse_header(b)
    }
    fn frame_len(&self) -> usize {
        self.frame_len
    }
    fn same_stream(&self, other: &Self) -> bool {
        mp3::Mp3Header::same_stream(self, other)
    }
    fn duration_us(&self) -> u64 {
        mp3::Mp3Header::duration_us(self)
    }
    fn params(&self) -> StreamParams {
        StreamParams {
            sample_rate: self.sample_rate,
            channels: self.channels,
            bitrate_kbps: self.bitrate_kbps,
            codec: "MP3",
        }
    }
    fn from_last(last: &LastHeader) -> Option<Self> {
        match last {
            LastHeader::Mp3(h) => Some(*h),
            LastHeader::Adts(_) => None,
        }
    }
    fn into_last(self) -> LastHeader {
        LastHeader::Mp3(self)
    }
}

impl FrameHeader for adts::AdtsHeader {
    const LEN: usize = 7;
    fn parse(b: &[u8]) -> Option<Self> {
        adts::parse_header(b)
    }
    fn frame_len(&self) -> usize {
        self.frame_len
    }
    fn same_stream(&self, other: &Self) -> bool {
        adts::AdtsHeader::same_stream(self, other)
    }
    fn duration_us(&self) -> u64 {
        adts::AdtsHeader::duration_us(self)
    }
    fn params(&self) -> StreamParams {
        StreamParams {
            sample_rate: self.sample_rate,
            channels: self.channels,
            bitrate_kbps: 0,
            codec: "AAC",
        }
    }
    fn from_last(last: &LastHeader) -> Option<Self> {
        match last {
            LastHeader::Adts(h) => Some(*h),
            LastHeader::Mp3(_) => None,
        }
    }
    fn into_last(self) -> LastHeader {
        LastHeader::Adts(self)
    }
}

#[derive(Debug, Default)]
struct OggState {
    streams: HashMap<u32, usize>,
    in_data: bool,
    timing: Option<(u32, u32)>,
    last_granule: u64,
}

/// The framing state machine for one stream.
#[derive(Debug)]
pub struct Framer {
    format: Format,
    buf: BytesMut,
    synced: bool,
    last_header: Option<LastHeader>,
    garbage: usize,
    finished: bool,
    ogg: OggState,
    params: StreamParams,
    pending: Option<Unit>,
}

impl Framer {
    /// A framer for `format`.
    pub fn new(format: Format) -> Framer {
        Framer {
            format,
            buf: BytesMut::with_capacity(16 * 1024),
            synced: false,
            last_header: None,
            garbage: 0,
            finished: false,
            ogg: OggState::default(),
            params: StreamParams::default(),
            pending: None,
        }
    }

    /// Appends received bytes.
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// Marks the end of input: a last frame that cannot be confirmed by a following header is
    /// then accepted if complete.
    pub fn finish(&mut self) {
        self.finished = true;
    }

    /// The bytes pushed but not yet returned as units, in stream order: a unit held back for
    /// a garbage report, then the unconsumed buffer (a partial frame or page, or a last frame
    /// not yet confirmed by the next header). A binary upgrade hands them to a fresh framer in
    /// the new process, so no received byte is lost or framed twice.
    pub fn into_unconsumed(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.buf.len());
        if let Some(u) = self.pending {
            out.extend_from_slice(&u.data);
        }
        out.extend_from_slice(&self.buf);
        out
    }

    /// Audio parameters of the most recent unit.
    pub fn params(&self) -> StreamParams {
        self.params
    }

    /// The next unit, a garbage report, or `None` when more bytes are needed.
    pub fn next_unit(&mut self) -> Option<Result<Unit, FrameError>> {
        let found = match self.format {
            Format::Mp3 => self.next_frame::<mp3::Mp3Header>(),
            Format::Aac => self.next_frame::<adts::AdtsHeader>(),
            Format::Ogg => self.next_ogg(),
            Format::Ebml | Format::Other => self.next_other(),
        };
        if self.garbage > 0 && (found.is_some() || self.garbage >= GARBAGE_REPORT_BYTES) {
            // Report skipped bytes before the unit that follows them; the unit is kept.
            if let Some(unit) = found {
                self.pending = Some(unit);
            }
            let skipped = std::mem::take(&mut self.garbage);
            return Some(Err(FrameError::Garbage {
                skipped,
                format: self.format,
            }));
        }
        found.map(Ok)
    }

    fn skip(&mut self, n: usize) {
        self.buf.advance(n);
        self.garbage += n;
        self.synced = false;
    }

    /// Skips to the next 0xFF byte (a possible frame sync), counting garbage.
    fn skip_to_sync(&mut self) {
        let n = self.buf[1..]
            .iter()
            .position(|&b| b == 0xFF)
            .map_or(self.buf.len(), |p| p + 1);
        self.skip(n);
    }

    /// Skips an ID3v2 tag at the buffer start: `Some(true)` when one was skipped, `Some(false)`
    /// when there is none, `None` when more bytes are needed. A tag declaring more than
    /// [`MAX_ID3_BYTES`] is not believed (its first byte is skipped as garbage), so a source
    /// cannot make the server buffer up to the 256 MiB an ID3 size field allows.
    fn skip_id3(&mut self) -> Option<bool> {
        if !self.buf.starts_with(b"ID3") {
            return Some(false);
        }
        if self.buf.len() < 10 {
            return None;
        }
        let b = &self.buf;
        let size = ((b[6] as usize & 0x7F) << 21)
            | ((b[7] as usize & 0x7F) << 14)
            | ((b[8] as usize & 0x7F) << 7)
            | (b[9] as usize & 0x7F);
        let total = 10 + size + if b[5] & 0x10 != 0 { 10 } else { 0 };
        if total > MAX_ID3_BYTES {
            self.skip(1);
            return Some(false);
        }
        if self.buf.len() < total {
            return None;
        }
        self.buf.advance(total);
        Some(true)
    }

    /// The next MP3 or ADTS frame: a header confirmed by the next one, or trusted because the
    /// previous frame of the same stream was accepted.
    fn next_frame<H: FrameHeader>(&mut self) -> Option<Unit> {
        if let Some(u) = self.pending.take() {
            return Some(u);
        }
        loop {
            match self.skip_id3() {
                None => return None,
                Some(true) => continue,
                Some(false) => {}
            }
            if self.buf.len() < H::LEN {
                return None;
            }
            let Some(h) = H::parse(&self.buf) else {
                self.skip_to_sync();
                continue;
            };
            let last = self.last_header.as_ref().and_then(H::from_last);
            let trusted = self.synced && last.is_some_and(|l| l.same_stream(&h));
            let len = h.frame_len();
            if self.buf.len() < len {
                return None;
            }
            if !trusted {
                if self.buf.len() < len + H::LEN {
                    if !self.finished {
                        return None;
                    }
                } else if !H::parse(&self.buf[len..]).is_some_and(|n| n.same_stream(&h)) {
                    self.skip_to_sync();
                    continue;
                }
            }
            self.synced = true;
            self.last_header = Some(h.into_last());
            self.params = h.params();
            return Some(Unit {
                data: self.buf.split_to(len).freeze(),
                duration_us: h.duration_us(),
                kind: UnitKind::Audio,
            });
        }
    }

    fn next_ogg(&mut self) -> Option<Unit> {
        if let Some(u) = self.pending.take() {
            return Some(u);
        }
        loop {
            if self.buf.is_empty() {
                return None;
            }
            let (len, kind, duration_us) = match ogg::parse_page(&self.buf) {
                PageParse::Incomplete => return None,
                PageParse::Invalid => {
                    let n = self.buf[1..]
                        .windows(4)
                        .position(|w| w == b"OggS")
                        .map_or(self.buf.len().saturating_sub(3).max(1), |p| p + 1);
                    self.skip(n);
                    continue;
                }
                PageParse::Page(page) => {
                    let (kind, dur) = classify_page(&mut self.ogg, &mut self.params, &page);
                    (page.bytes.len(), kind, dur)
                }
            };
            self.synced = true;
            return Some(Unit {
                data: self.buf.split_to(len).freeze(),
                duration_us,
                kind,
            });
        }
    }

    fn next_other(&mut self) -> Option<Unit> {
        if self.buf.is_empty() || (self.buf.len() < OTHER_UNIT_BYTES && !self.finished) {
            return None;
        }
        let n = self.buf.len().min(OTHER_UNIT_BYTES);
        Some(Unit {
            data: self.buf.split_to(n).freeze(),
            duration_us: 0,
            kind: UnitKind::Audio,
        })
    }
}

/// Classifies an Ogg page as header or data and computes its duration from granule positions.
fn classify_page(
    st: &mut OggState,
    params: &mut StreamParams,
    page: &ogg::Page<'_>,
) -> (UnitKind, u64) {
    if page.is_bos() {
        if st.in_data {
            st.streams.clear();
            st.in_data = false;
            st.timing = None;
            st.last_granule = 0;
        }
        let new_chain = st.streams.is_empty();
        let codec = page
            .first_packet()
            .map(Codec::identify)
            .unwrap_or(Codec::Unknown);
        let left = codec
            .header_packets()
            .saturating_sub(page.packets_completed());
        st.streams.insert(page.serial, left);
        if st.timing.is_none() {
            if let Some(rate) = codec.granule_rate() {
                st.timing = Some((page.serial, rate));
                *params = StreamParams {
                    sample_rate: match codec {
                        Codec::Opus { .. } => 48_000,
                        _ => rate,
                    },
                    channels: match codec {
                        Codec::Vorbis { channels, .. } | Codec::Opus { channels } => channels,
                        _ => 0,
                    },
                    bitrate_kbps: 0,
                    codec: codec.name(),
                };
            }
        }
        return (UnitKind::OggHeader { new_chain }, 0);
    }
    if let Some(left) = st.streams.get_mut(&page.serial) {
        if *left > 0 {
            *left = left.saturating_sub(page.packets_completed());
            return (UnitKind::OggHeader { new_chain: false }, 0);
        }
    }
    st.in_data = true;
    let mut dur = 0;
    if let Some((serial, rate)) = st.timing {
        if serial == page.serial && page.granule != u64::MAX {
            if page.granule > st.last_granule {
                // u128: a source controls granule positions; a jump must not overflow.
                let us = (page.granule - st.last_granule) as u128 * 1_000_000 / rate as u128;
                // A jump of more than an hour is a discontinuity, not a page's play time.
                dur = if us > 3_600_000_000 { 0 } else { us as u64 };
            }
            st.last_granule = page.granule;
        }
    }
    (UnitKind::OggPage, dur)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ogg::{build_page, FLAG_BOS};

    /// A valid MPEG-1 layer III 64 kbit/s 44.1 kHz mono frame (208 bytes) filled with `fill`.
    fn mp3_frame(fill: u8) -> Vec<u8> {
        let mut f = vec![fill; 208];
        f[..4].copy_from_slice(&[0xFF, 0xFB, 0x50, 0xC4]);
        f
    }

    fn collect(fr: &mut Framer) -> (Vec<Unit>, usize) {
        let mut units = Vec::new();
        let mut garbage = 0;
        while let Some(r) = fr.next_unit() {
            match r {
                Ok(u) => units.push(u),
                Err(FrameError::Garbage { skipped, .. }) => garbage += skipped,
            }
        }
        (units, garbage)
    }

    #[test]
    fn unconsumed_bytes_reframed_by_a_fresh_framer_lose_and_repeat_nothing() {
        let stream: Vec<u8> = (0..12).flat_map(|i| mp3_frame(i as u8)).collect();
        for cut in [1, 100, 208, 416, 1000, 2000] {
            let mut a = Framer::new(Format::Mp3);
            a.push(&stream[..cut]);
            let mut units = collect(&mut a).0;
            let mut b = Framer::new(Format::Mp3);
            b.push(&a.into_unconsumed());
            b.push(&stream[cut..]);
            b.finish();
            units.extend(collect(&mut b).0);
            let fills: Vec<u8> = units.iter().map(|u| u.data[4]).collect();
            assert_eq!(fills, (0..12).collect::<Vec<u8>>(), "cut at {cut}");
        }
    }

    #[test]
    fn mp3_frames_split_in_any_piece_size() {
        let stream: Vec<u8> = (0..20).flat_map(|i| mp3_frame(i as u8)).collect();
        for piece in [1, 3, 208, 500, 10_000] {
            let mut fr = Framer::new(Format::Mp3);
            let mut units = Vec::new();
            for c in stream.chunks(piece) {
                fr.push(c);
                units.extend(collect(&mut fr).0);
            }
            fr.finish();
            let (rest, garbage) = collect(&mut fr);
            units.extend(rest);
            assert_eq!(garbage, 0);
            assert_eq!(units.len(), 20, "piece {piece}");
            assert!(units
                .iter()
                .all(|u| u.data.len() == 208 && u.duration_us == 26122));
            assert_eq!(fr.params().bitrate_kbps, 64);
        }
    }

    #[test]
    fn mp3_garbage_is_skipped_and_reported() {
        let mut stream = b"ID3\x03\0\0\0\0\0\x02ab".to_vec(); // 12-byte ID3v2 tag: not garbage
        stream.extend_from_slice(&[0x12, 0xFF, 0xFB, 0x00, 0x55]); // 5 bytes of garbage
        for i in 0..5 {
            stream.extend(mp3_frame(i));
        }
        stream.extend_from_slice(&[0xAA; 100]);
        for i in 0..5 {
            stream.extend(mp3_frame(i));
        }
        let mut fr = Framer::new(Format::Mp3);
        fr.push(&stream);
        fr.finish();
        let (units, garbage) = collect(&mut fr);
        assert_eq!(units.len(), 10);
        assert_eq!(garbage, 105);
    }

    #[test]
    fn pure_garbage_is_reported_without_sync() {
        let mut fr = Framer::new(Format::Mp3);
        fr.push(&vec![0x41; 10_000]);
        let (units, garbage) = collect(&mut fr);
        assert!(units.is_empty());
        assert!(garbage >= GARBAGE_REPORT_BYTES);
    }

    #[test]
    fn adts_frames() {
        let frame = |len: usize| {
            let mut f = vec![0u8; len];
            f[..7].copy_from_slice(&[
                0xFF,
                0xF1,
                0x50,
                0x80 | ((len >> 11) as u8 & 3),
                (len >> 3) as u8,
                ((len as u8 & 7) << 5) | 0x1F,
                0xFC,
            ]);
            f
        };
        let stream: Vec<u8> = [300, 310, 290, 305]
            .iter()
            .flat_map(|&l| frame(l))
            .collect();
        let mut fr = Framer::new(Format::Aac);
        fr.push(&stream);
        fr.finish();
        let (units, garbage) = collect(&mut fr);
        assert_eq!(garbage, 0);
        assert_eq!(
            units.iter().map(|u| u.data.len()).collect::<Vec<_>>(),
            [300, 310, 290, 305]
        );
        assert_eq!(units[0].duration_us, 23219);
    }

    fn opus_stream(serial: u32, granules: &[u64]) -> Vec<u8> {
        let mut head = b"OpusHead\x01\x02\x38\x01\x80\xbb\0\0\0\0\0".to_vec();
        head.truncate(19);
        let mut s = build_page(FLAG_BOS, 0, serial, 0, &head).unwrap();
        s.extend(build_page(0, 0, serial, 1, b"OpusTags\0\0\0\0\0\0\0\0").unwrap());
        for (i, g) in granules.iter().enumerate() {
            s.extend(build_page(0, *g, serial, 2 + i as u32, &[0xAB; 150]).unwrap());
        }
        s
    }

    #[test]
    fn ogg_headers_pages_and_chains() {
        let mut stream = opus_stream(7, &[960, 1920, 2880]);
        stream.extend_from_slice(b"junk!");
        stream.extend(opus_stream(8, &[960]));
        let mut fr = Framer::new(Format::Ogg);
        for c in stream.chunks(100) {
            fr.push(c);
        }
        let (units, garbage) = collect(&mut fr);
        assert_eq!(garbage, 5);
        let kinds: Vec<UnitKind> = units.iter().map(|u| u.kind).collect();
        use UnitKind::*;
        assert_eq!(
            kinds,
            [
                OggHeader { new_chain: true },
                OggHeader { new_chain: false },
                OggPage,
                OggPage,
                OggPage,
                OggHeader { new_chain: true },
                OggHeader { new_chain: false },
                OggPage,
            ]
        );
        assert_eq!(units[2].duration_us, 20_000);
        assert_eq!(units[3].duration_us, 20_000);
        assert_eq!(units[7].duration_us, 20_000);
        assert_eq!(fr.params().codec, "Opus");
    }

    #[test]
    fn other_format_passes_pieces() {
        let mut fr = Framer::new(Format::Other);
        fr.push(&[1u8; 3000]);
        let (units, _) = collect(&mut fr);
        assert_eq!(units.len(), 2);
        fr.finish();
        let (units, _) = collect(&mut fr);
        assert_eq!(units[0].data.len(), 200);
    }
}
