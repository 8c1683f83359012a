//! Every ICY listener's stream verified as it arrives, with no copy of it: MP3 and ADTS frames
//! chained header to header by their lengths, Ogg pages by capture pattern, CRC and page
//! sequence, ICY metadata blocks by the metaint (sans-IO: [`StreamCheck::feed`] takes each read
//! as it comes, in any pieces).
//!
//! What counts is **media time**: each complete frame adds its duration (samples ÷ rate, as
//! its header says), each Ogg data page the growth of its granule position (RFC 3533 §6, at the
//! rate of the stream's identification header: Opus 48 kHz, RFC 7845 §4; Vorbis, FLAC and
//! Speex from theirs). Media time is self-describing, so the bitrate is never needed to judge.
//!
//! A stream starts *searching*: bytes are kept (at most [`SEARCH_MAX`]) until a frame header is
//! confirmed by the next one at exactly its length (two headers of the same stream), or an Ogg
//! page whose CRC is right; what came before is garbage (a server may start a listener
//! mid-frame, as Icecast 2.4.4 starts MP3 listeners at a buffer boundary). ID3v2 tags are passed
//! over. Once in sync, each unit must begin where the previous one ended: a header that is not
//! one of the same stream, a wrong page CRC, a page out of sequence or an ICY metadata block
//! that is not one is a **break** (the listener is *corrupt*), and the check searches again.
//! Frames then cost one header parse each and nothing is copied; the state is about 60 bytes
//! (an Ogg stream adds a boxed page-header buffer, a search a boxed buffer while it lasts).

use crate::verify::ogg::OggWalk;
use throng_proto::format::Format;
use throng_proto::{adts, mp3};

/// Most bytes kept while searching for sync (bytes); beyond it the oldest half is garbage.
pub const SEARCH_MAX: usize = 16 * 1024;
/// Most bytes kept while searching an Ogg stream for a whole page with a good CRC (bytes).
pub const SEARCH_MAX_OGG: usize = 70 * 1024;

/// The stream's framing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Mp3,
    Adts,
    Ogg,
    /// Unknown: nothing is verified.
    Other,
}

/// What one [`StreamCheck::feed`] found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fed {
    /// Media time of the units completed (µs).
    pub media_us: u64,
    /// Units completed (frames or pages).
    pub units: u32,
    /// Bytes passed over as garbage while searching (bytes).
    pub garbage: u32,
    /// ICY metadata blocks passed (blocks).
    pub blocks: u32,
    /// The chain broke (see the module comment): the listener is corrupt.
    pub broke: bool,
}

/// Where the ICY metadata framing is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Meta {
    /// Audio bytes until the next length byte.
    Audio(u32),
    /// Inside a block: bytes left, and whether its first byte was seen.
    Block { left: u16, first: bool },
}

/// One listener's stream check (see the module comment).
#[derive(Debug)]
pub struct StreamCheck {
    kind: Kind,
    metaint: u32,
    meta: Meta,
    /// Bytes left of the unit (frame, page body, ID3 tag) being passed over.
    skip: u32,
    /// Media time of the unit being passed over, credited at its end (µs).
    pending_us: u32,
    /// Whether the unit being passed over counts as a unit when it ends.
    pending_unit: bool,
    /// A header split between two reads.
    hdr: [u8; 10],
    hdr_len: u8,
    /// The stream's identity from its first header (version, layer, rate / profile, rate).
    identity: u32,
    /// Searching for sync: the bytes kept.
    search: Option<Vec<u8>>,
    /// The Ogg page walker.
    ogg: Option<Box<OggWalk>>,
    /// Whether sync was ever found (a break is only a break after it).
    ever_synced: bool,
    /// The last MP3 header parsed, for the frames that repeat it ([`StreamCheck::frame`]).
    last: Mp3Seen,
}

/// An MP3 header's second and third bytes (padding bit cleared; 0: none yet) and what they
/// give: the frame length without padding (bytes), the padding slot (1 byte, 4 for layer I),
/// the duration (µs) and the identity. Every frame of a CBR stream repeats them but for the
/// padding bit, so a frame is chained by one comparison instead of a parse (and its divisions).
#[derive(Debug, Default, Clone, Copy)]
struct Mp3Seen {
    key: u16,
    len: u16,
    slot: u8,
    us: u32,
    identity: u32,
}

/// Length of an ID3v2 tag whose header starts `b` (10 bytes needed): header, body and footer.
pub fn id3_len(b: &[u8]) -> Option<usize> {
    if b.len() < 10 || &b[..3] != b"ID3" || b[3] == 0xFF || b[4] == 0xFF {
        return None;
    }
    if b[6..10].iter().any(|&x| x & 0x80 != 0) {
        return None;
    }
    let size = b[6..10]
        .iter()
        .fold(0usize, |n, &x| (n << 7) | (x & 0x7F) as usize);
    let footer = if b[5] & 0x10 != 0 { 10 } else { 0 };
    Some(10 + size + footer)
}

/// A frame header of the stream's kind at the start of `b`: its length, duration (µs) and
/// identity; `None` when `b` holds no valid header.
fn frame_at(kind: Kind, b: &[u8]) -> Option<(usize, u32, u32)> {
    match kind {
        Kind::Mp3 => {
            let h = mp3::parse_header(b)?;
            let identity = (h.layer as u32) << 24
                | (match h.version {
                    mp3::MpegVersion::V1 => 1,
                    mp3::MpegVersion::V2 => 2,
                    mp3::MpegVersion::V25 => 3,
                }) << 20
                | h.sample_rate;
            Some((h.frame_len, h.duration_us() as u32, identity))
        }
        Kind::Adts => {
            let h = adts::parse_header(b)?;
            let identity = (h.profile as u32) << 28 | (h.channels as u32) << 24 | h.sample_rate;
            Some((h.frame_len, h.duration_us() as u32, identity))
        }
        _ => None,
    }
}

/// Bytes a frame header of `kind` needs.
fn header_len(kind: Kind) -> usize {
    match kind {
        Kind::Adts => 7,
        _ => 4,
    }
}

impl StreamCheck {
    /// A check for a stream of `format` (from the response's Content-Type or the URL), with
    /// ICY metadata every `metaint` audio bytes (0: none).
    pub fn new(format: Format, metaint: u32) -> StreamCheck {
        let kind = match format {
            Format::Mp3 => Kind::Mp3,
            Format::Aac => Kind::Adts,
            Format::Ogg => Kind::Ogg,
            _ => Kind::Other,
        };
        StreamCheck {
            kind,
            metaint,
            meta: Meta::Audio(metaint),
            skip: 0,
            pending_us: 0,
            pending_unit: false,
            hdr: [0; 10],
            hdr_len: 0,
            identity: 0,
            search: (kind != Kind::Other).then(Vec::new),
            ogg: (kind == Kind::Ogg).then(|| Box::new(OggWalk::default())),
            ever_synced: false,
            last: Mp3Seen::default(),
        }
    }

    /// Whether the stream's format is one this check verifies (MP3, ADTS, Ogg).
    pub fn verifies(&self) -> bool {
        self.kind != Kind::Other
    }

    /// Whether the check is in sync now.
    pub fn synced(&self) -> bool {
        self.search.is_none() && self.kind != Kind::Other
    }

    /// Whether the bytes so far end where a unit ends: in sync, no frame, page, tag or header
    /// partly received (an HLS segment's body must end so).
    pub fn at_boundary(&self) -> bool {
        self.synced() && self.skip == 0 && self.hdr_len == 0
    }

    /// Takes the next bytes of the body (after the response head). `stamps` receives the send
    /// times of latency-stamped Opus packets found in Ogg pages (see [`crate::verify::stamp`]).
    pub fn feed(&mut self, data: &[u8], stamps: &mut Vec<u64>) -> Fed {
        let mut out = Fed::default();
        if self.metaint == 0 {
            self.audio(data, &mut out, stamps);
            return out;
        }
        let mut rest = data;
        while !rest.is_empty() {
            match self.meta {
                Meta::Audio(0) => {
                    let len = u16::from(rest[0]) * 16;
                    rest = &rest[1..];
                    if len == 0 {
                        out.blocks += 1;
                        self.meta = Meta::Audio(self.metaint);
                    } else {
                        self.meta = Meta::Block {
                            left: len,
                            first: false,
                        };
                    }
                }
                Meta::Audio(n) => {
                    let take = (n as usize).min(rest.len());
                    self.audio(&rest[..take], &mut out, stamps);
                    self.meta = Meta::Audio(n - take as u32);
                    rest = &rest[take..];
                }
                Meta::Block { left, first } => {
                    // A block is text (`StreamTitle='…';`) padded with NULs: it starts with a
                    // letter and ends with `;` or a NUL (Icecast 2.4.4 `format_mp3.c`).
                    if !first && !rest[0].is_ascii_alphabetic() {
                        return self.icy_break(out);
                    }
                    let take = (left as usize).min(rest.len());
                    if take == left as usize && !matches!(rest[take - 1], 0 | b';') {
                        return self.icy_break(out);
                    }
                    rest = &rest[take..];
                    if take == left as usize {
                        out.blocks += 1;
                        self.meta = Meta::Audio(self.metaint);
                    } else {
                        self.meta = Meta::Block {
                            left: left - take as u16,
                            first: true,
                        };
                    }
                }
            }
        }
        out
    }

    /// A broken ICY framing: nothing after it can be trusted, so the check stops verifying
    /// (the listener is corrupt, and gets no more media time).
    fn icy_break(&mut self, mut out: Fed) -> Fed {
        out.broke = true;
        self.kind = Kind::Other;
        self.metaint = 0;
        self.search = None;
        self.ogg = None;
        out
    }

    /// Walks audio bytes.
    fn audio(&mut self, mut data: &[u8], out: &mut Fed, stamps: &mut Vec<u64>) {
        if self.kind == Kind::Other {
            return;
        }
        while !data.is_empty() {
            if self.skip > 0 {
                let n = (self.skip as usize).min(data.len());
                if let Some(o) = self.ogg.as_deref_mut() {
                    o.body(&data[..n]);
                }
                self.skip -= n as u32;
                data = &data[n..];
                if self.skip == 0 {
                    self.unit_done(out, stamps);
                }
                continue;
            }
            if self.search.is_some() {
                self.search_feed(data, out, stamps);
                return;
            }
            if self.kind == Kind::Ogg {
                data = self.ogg_header(data, out, stamps);
                continue;
            }
            // A frame header, whole in `data` (the common case) or split over reads.
            let need = header_len(self.kind);
            if self.hdr_len == 0 && data.len() >= need.max(3) {
                if data[0] == b'I' {
                    if data.len() < 10 {
                        self.hold_header(data);
                        return;
                    }
                    if let Some(len) = id3_len(data) {
                        self.pass_id3(len);
                        continue;
                    }
                }
                match self.frame(data) {
                    Some((len, us, id)) if id == self.identity => {
                        self.pending_us = us;
                        self.pending_unit = true;
                        self.skip = len as u32;
                    }
                    _ => return self.broken(data, out, stamps),
                }
                continue;
            }
            // Split header: gather it.
            let want = if self.hdr_len > 0 && self.hdr[0] == b'I' {
                10
            } else {
                need
            };
            let take = (want - self.hdr_len as usize).min(data.len());
            self.hdr[self.hdr_len as usize..self.hdr_len as usize + take]
                .copy_from_slice(&data[..take]);
            self.hdr_len += take as u8;
            data = &data[take..];
            if (self.hdr_len as usize) < want {
                if self.hdr[0] == b'I' && self.hdr_len >= 3 && &self.hdr[..3] != b"ID3" {
                    // Not a tag after all: judge it as a frame header.
                } else {
                    return;
                }
            }
            let hdr = self.hdr;
            let hl = self.hdr_len as usize;
            self.hdr_len = 0;
            if let Some(len) = id3_len(&hdr[..hl]) {
                self.skip = (len - hl) as u32;
                self.pending_unit = false;
                self.pending_us = 0;
                continue;
            }
            match frame_at(self.kind, &hdr[..hl]) {
                Some((len, us, id)) if id == self.identity && len >= hl => {
                    self.pending_us = us;
                    self.pending_unit = true;
                    self.skip = (len - hl) as u32;
                    if self.skip == 0 {
                        self.unit_done(out, stamps);
                    }
                }
                _ => {
                    let mut bytes = hdr[..hl].to_vec();
                    bytes.extend_from_slice(data);
                    return self.broken(&bytes, out, stamps);
                }
            }
        }
    }

    /// [`frame_at`] for the header at the start of `b` (4 bytes or more), an MP3 header that
    /// repeats the last one but for its padding bit taken from [`StreamCheck::last`].
    fn frame(&mut self, b: &[u8]) -> Option<(usize, u32, u32)> {
        if self.kind != Kind::Mp3 {
            return frame_at(self.kind, b);
        }
        let key = u16::from_be_bytes([b[1], b[2] & !0x02]);
        let l = self.last;
        if b[0] == 0xFF && key == l.key {
            let pad = if b[2] & 0x02 != 0 { l.slot as usize } else { 0 };
            return Some((l.len as usize + pad, l.us, l.identity));
        }
        let (len, us, identity) = frame_at(self.kind, b)?;
        let padded = b[2] & 0x02 != 0;
        let slot = if (b[1] >> 1) & 3 == 3 { 4 } else { 1 };
        let base = len - if padded { slot } else { 0 };
        if let Ok(base) = u16::try_from(base) {
            self.last = Mp3Seen {
                key,
                len: base,
                slot: slot as u8,
                us,
                identity,
            };
        }
        Some((len, us, identity))
    }

    /// Keeps the start of a header that may be an ID3 tag's.
    fn hold_header(&mut self, data: &[u8]) {
        self.hdr[..data.len()].copy_from_slice(data);
        self.hdr_len = data.len() as u8;
    }

    /// Passes over an ID3 tag of `len` bytes starting now.
    fn pass_id3(&mut self, len: usize) {
        self.skip = len as u32;
        self.pending_unit = false;
        self.pending_us = 0;
    }

    /// A unit ended: credit it.
    fn unit_done(&mut self, out: &mut Fed, stamps: &mut Vec<u64>) {
        if let Some(o) = self.ogg.as_deref_mut() {
            let page = o.end_page(stamps);
            if page.broke {
                out.broke = true;
                self.start_search(&[]);
            }
            out.media_us += page.media_us;
            out.units += u32::from(page.complete);
            return;
        }
        if self.pending_unit {
            out.units += 1;
            out.media_us += u64::from(self.pending_us);
        }
        self.pending_unit = false;
        self.pending_us = 0;
    }

    /// The chain broke at `data`: count it and search again from there.
    fn broken(&mut self, data: &[u8], out: &mut Fed, stamps: &mut Vec<u64>) {
        if self.ever_synced {
            out.broke = true;
        }
        self.start_search(&[]);
        self.search_feed(data, out, stamps);
    }

    fn start_search(&mut self, with: &[u8]) {
        let mut v = Vec::with_capacity(4096);
        v.extend_from_slice(with);
        self.search = Some(v);
        self.skip = 0;
        self.hdr_len = 0;
        self.pending_unit = false;
        self.pending_us = 0;
        if let Some(o) = self.ogg.as_deref_mut() {
            o.reset_page();
        }
    }

    /// Ogg: gathers a page header from `data`; returns the rest.
    fn ogg_header<'a>(&mut self, data: &'a [u8], out: &mut Fed, stamps: &mut Vec<u64>) -> &'a [u8] {
        let o = self.ogg.as_deref_mut().expect("an Ogg walker");
        match o.header(data) {
            Ok((used, Some(body_len))) => {
                self.skip = body_len as u32;
                if body_len == 0 {
                    self.unit_done(out, stamps);
                }
                &data[used..]
            }
            Ok((used, None)) => &data[used..],
            Err(_) => {
                // Not a page where one must begin.
                let held = o.take_header_bytes();
                let mut bytes = held;
                bytes.extend_from_slice(data);
                out.broke |= self.ever_synced;
                self.start_search(&[]);
                self.search_feed(&bytes, out, stamps);
                &[]
            }
        }
    }

    /// Searching: keeps `data` and looks for sync in what is kept.
    fn search_feed(&mut self, data: &[u8], out: &mut Fed, stamps: &mut Vec<u64>) {
        let Some(buf) = self.search.as_mut() else {
            return;
        };
        buf.extend_from_slice(data);
        let max = if self.kind == Kind::Ogg {
            SEARCH_MAX_OGG
        } else {
            SEARCH_MAX
        };
        loop {
            let buf = self.search.as_mut().expect("searching");
            match find_sync(self.kind, buf) {
                Sync::At(i, identity) => {
                    out.garbage += i as u32;
                    self.identity = identity;
                    let rest = buf.split_off(i);
                    self.search = None;
                    self.ever_synced = true;
                    if let Some(o) = self.ogg.as_deref_mut() {
                        o.reset_page();
                    }
                    self.audio(&rest, out, stamps);
                    return;
                }
                Sync::Tag(i, len) => {
                    // An ID3 tag: pass over it, then search on after it.
                    out.garbage += i as u32;
                    let avail = buf.len() - i;
                    if avail >= len {
                        buf.drain(..i + len);
                        continue;
                    }
                    buf.clear();
                    self.skip = (len - avail) as u32;
                    self.pending_unit = false;
                    return;
                }
                Sync::NotYet(keep_from) => {
                    out.garbage += keep_from as u32;
                    buf.drain(..keep_from);
                    if buf.len() > max {
                        let drop = buf.len() - max / 2;
                        out.garbage += drop as u32;
                        buf.drain(..drop);
                    }
                    return;
                }
            }
        }
    }
}

/// What a search found in the kept bytes.
enum Sync {
    /// Sync at this offset, with the stream's identity (frames), or a page (Ogg).
    At(usize, u32),
    /// An ID3 tag of this length at this offset.
    Tag(usize, usize),
    /// Nothing yet; the bytes before this offset can be dropped as garbage.
    NotYet(usize),
}

fn find_sync(kind: Kind, buf: &[u8]) -> Sync {
    if kind == Kind::Ogg {
        return match OggWalk::find_page(buf) {
            Ok(i) => Sync::At(i, 0),
            Err(keep) => Sync::NotYet(keep),
        };
    }
    let need = header_len(kind);
    let mut i = 0;
    while i + 3 <= buf.len() {
        if buf[i] == b'I' && buf[i + 1] == b'D' && buf[i + 2] == b'3' {
            if i + 10 > buf.len() {
                return Sync::NotYet(i);
            }
            if let Some(len) = id3_len(&buf[i..]) {
                return Sync::Tag(i, len);
            }
        }
        if buf[i] == 0xFF {
            if i + need > buf.len() {
                return Sync::NotYet(i);
            }
            if let Some((len, _, id)) = frame_at(kind, &buf[i..]) {
                // Confirmed by the next header at exactly its length.
                let next = i + len;
                if next + need > buf.len() {
                    return Sync::NotYet(i);
                }
                if frame_at(kind, &buf[next..]).is_some_and(|(_, _, id2)| id2 == id) {
                    return Sync::At(i, id);
                }
            }
        }
        i += 1;
    }
    Sync::NotYet(buf.len().saturating_sub(2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use throng_proto::ogg::build_page;

    /// `n` MPEG-1 layer III frames, 64 kbit/s, 44.1 kHz, mono (208 bytes each, 26,122 µs).
    fn mp3(n: usize) -> Vec<u8> {
        let mut frame = vec![0x55u8; 208];
        frame[..4].copy_from_slice(&[0xFF, 0xFB, 0x50, 0xC4]);
        frame.repeat(n)
    }

    fn feed_in(check: &mut StreamCheck, data: &[u8], piece: usize) -> Fed {
        let mut total = Fed::default();
        let mut stamps = Vec::new();
        for c in data.chunks(piece.max(1)) {
            let f = check.feed(c, &mut stamps);
            total.media_us += f.media_us;
            total.units += f.units;
            total.garbage += f.garbage;
            total.blocks += f.blocks;
            total.broke |= f.broke;
        }
        total
    }

    #[test]
    fn mp3_frames_chain_in_any_pieces() {
        let data = mp3(100);
        for piece in [1, 2, 3, 5, 7, 100, 208, 209, 4096, data.len()] {
            let mut c = StreamCheck::new(Format::Mp3, 0);
            let f = feed_in(&mut c, &data, piece);
            // The last frame is complete too; the search confirms with the second header.
            assert_eq!(f.units, 100, "pieces of {piece}");
            assert_eq!(f.media_us, 100 * 26_122, "pieces of {piece}");
            assert_eq!(f.garbage, 0);
            assert!(!f.broke);
            assert!(c.synced());
        }
    }

    /// An MPEG-1 layer III 44.1 kHz frame of `kbps` (64 or 128), padded or not, whole.
    fn mp3_frame(kbps: u32, padded: bool) -> Vec<u8> {
        let (idx, len) = if kbps == 64 { (0x50, 208) } else { (0x90, 417) };
        let mut f = vec![0x55u8; len + usize::from(padded)];
        f[..4].copy_from_slice(&[0xFF, 0xFB, idx | if padded { 0x02 } else { 0 }, 0xC4]);
        f
    }

    #[test]
    fn frames_that_change_padding_and_bitrate_chain_by_their_own_lengths() {
        // The repeated-header shortcut must take each frame's padding bit and miss on a new
        // bitrate: any wrong length would land the next header off its frame.
        let mut data = Vec::new();
        for k in 0..60 {
            data.extend(mp3_frame(if k % 7 < 4 { 64 } else { 128 }, k % 3 == 1));
        }
        for piece in [1, 7, 209, 4096] {
            let mut c = StreamCheck::new(Format::Mp3, 0);
            let f = feed_in(&mut c, &data, piece);
            assert_eq!(
                (f.units, f.garbage, f.broke),
                (60, 0, false),
                "pieces of {piece}"
            );
            assert_eq!(f.media_us, 60 * 26_122);
        }
        // A frame one byte short of what its padding bit says breaks the chain.
        let mut bad = mp3_frame(64, false).repeat(10);
        let mut short = mp3_frame(64, true);
        short.pop();
        bad.extend(short);
        bad.extend(mp3_frame(64, false).repeat(10));
        let mut c = StreamCheck::new(Format::Mp3, 0);
        assert!(feed_in(&mut c, &bad, 4096).broke);
    }

    #[test]
    fn a_mid_frame_start_is_garbage_not_a_break() {
        let data = mp3(50);
        let mut c = StreamCheck::new(Format::Mp3, 0);
        let f = feed_in(&mut c, &data[100..], 64);
        assert_eq!(f.garbage, 108);
        assert_eq!(f.units, 49);
        assert!(!f.broke);
    }

    #[test]
    fn garbage_after_valid_frames_breaks_the_chain() {
        let mut data = mp3(40);
        let mut seed = 7u64;
        for _ in 0..8000 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            data.push((seed >> 56) as u8);
        }
        for piece in [1, 333, 8192] {
            let mut c = StreamCheck::new(Format::Mp3, 0);
            let f = feed_in(&mut c, &data, piece);
            assert!(f.broke, "pieces of {piece}");
            assert_eq!(f.units, 40, "no media from garbage");
            assert!(f.garbage > 7000);
        }
        // Sync comes back after the garbage: more frames count again.
        let mut c = StreamCheck::new(Format::Mp3, 0);
        let mut more = data.clone();
        more.extend(mp3(20));
        let f = feed_in(&mut c, &more, 1000);
        assert!(f.broke);
        assert!(f.units >= 58, "{}", f.units);
    }

    #[test]
    fn id3_tags_are_passed_over() {
        let mut data = b"ID3\x04\x00\x00\x00\x00\x00\x05hello".to_vec();
        data.extend(mp3(10));
        data.extend(b"ID3\x04\x00\x00\x00\x00\x00\x02ab");
        data.extend(mp3(10));
        for piece in [1, 4, 9, 11, 50, data.len()] {
            let mut c = StreamCheck::new(Format::Mp3, 0);
            let f = feed_in(&mut c, &data, piece);
            assert_eq!(
                (f.units, f.garbage, f.broke),
                (20, 0, false),
                "pieces of {piece}"
            );
        }
    }

    #[test]
    fn icy_metadata_blocks_are_checked_by_metaint() {
        let audio = mp3(200);
        let metaint = 1000;
        let block = throng_proto::icy::metadata_block("Artist - Title", None);
        let mut data = Vec::new();
        for (k, chunk) in audio.chunks(metaint).enumerate() {
            data.extend_from_slice(chunk);
            if chunk.len() == metaint {
                if k % 2 == 0 {
                    data.extend_from_slice(&block);
                } else {
                    data.push(0);
                }
            }
        }
        for piece in [1, 17, 999, 1000, 1001, 5000] {
            let mut c = StreamCheck::new(Format::Mp3, metaint as u32);
            let f = feed_in(&mut c, &data, piece);
            assert_eq!(f.units, 200, "pieces of {piece}");
            assert_eq!(f.blocks as usize, audio.len() / metaint);
            assert!(!f.broke);
        }
        // The right number of bytes of the wrong framing: a block that is not one.
        let mut bad = audio[..metaint].to_vec();
        bad.push(3);
        bad.extend_from_slice(&[0xAA; 48]);
        bad.extend_from_slice(&audio[metaint..]);
        let mut c = StreamCheck::new(Format::Mp3, metaint as u32);
        assert!(feed_in(&mut c, &bad, 300).broke);
    }

    #[test]
    fn adts_frames_chain() {
        let mut frame = [0u8; 200];
        frame[..7].copy_from_slice(&[0xFF, 0xF1, 0x50, 0x80, 0x19, 0x1F, 0xFC]);
        let data = frame.repeat(30);
        let mut c = StreamCheck::new(Format::Aac, 0);
        let f = feed_in(&mut c, &data, 77);
        assert_eq!(f.units, 30);
        assert_eq!(f.media_us, 30 * 23_219);
    }

    /// An Opus stream: OpusHead, OpusTags, then `n` pages of one 20 ms packet each.
    fn ogg_opus(n: u64) -> Vec<u8> {
        let mut head = b"OpusHead".to_vec();
        head.extend_from_slice(&[1, 1, 0, 0, 0x80, 0xBB, 0, 0, 0, 0, 0]);
        let mut out = build_page(0x02, 0, 9, 0, &head).unwrap();
        out.extend(build_page(0, 0, 9, 1, b"OpusTags\0\0\0\0\0\0\0\0").unwrap());
        for k in 0..n {
            out.extend(build_page(0, (k + 1) * 960, 9, k as u32 + 2, &[0xF8; 60]).unwrap());
        }
        out
    }

    #[test]
    fn ogg_pages_chain_by_crc_sequence_and_granule() {
        let data = ogg_opus(100);
        for piece in [1, 13, 64, 1000, data.len()] {
            let mut c = StreamCheck::new(Format::Ogg, 0);
            let f = feed_in(&mut c, &data, piece);
            assert!(!f.broke, "pieces of {piece}");
            assert_eq!(f.units, 102, "pieces of {piece}");
            // The first data page sets the granule baseline.
            assert_eq!(f.media_us, 99 * 20_000, "pieces of {piece}");
        }
        // A flipped byte fails the CRC: a break.
        let mut bad = data.clone();
        let at = bad.len() - 30;
        bad[at] ^= 0x40;
        let mut c = StreamCheck::new(Format::Ogg, 0);
        assert!(feed_in(&mut c, &bad, 500).broke);
        // A page missing: out of sequence.
        let pages = ogg_opus(10);
        let one = build_page(0, 960, 9, 2, &[0xF8; 60]).unwrap().len();
        let mut gap = pages[..pages.len() - 5 * one].to_vec();
        gap.extend_from_slice(&pages[pages.len() - 4 * one..]);
        let mut c = StreamCheck::new(Format::Ogg, 0);
        assert!(feed_in(&mut c, &gap, 100).broke);
    }

    #[test]
    fn unknown_formats_are_not_verified() {
        let mut c = StreamCheck::new(Format::Other, 0);
        assert!(!c.verifies());
        let f = feed_in(&mut c, &[1, 2, 3], 1);
        assert_eq!(f, Fed::default());
    }
}
