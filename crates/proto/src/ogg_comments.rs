//! Ogg comment headers and page (re)writing for metadata updates.
//!
//! A Vorbis comment header (Vorbis I specification §5) is `\x03vorbis`, a 32-bit little-endian
//! vendor length and vendor string, a 32-bit comment count, each comment as a 32-bit length and
//! `KEY=value` bytes, then a framing byte whose low bit is 1. An OpusTags packet (RFC 7845 §5.2)
//! is the same after an `OpusTags` magic, without the framing byte; bytes after the comments are
//! extra data that must be kept when its first byte's low bit is 1 (it is always kept here).
//! Keys are ASCII and compared case-insensitively. This module parses and rebuilds those
//! packets ([`CommentHeader`]), packs packets into pages ([`PageWriter`], the way libogg's
//! `ogg_stream_flush` does) and re-stamps a page's serial, sequence, granule and flags
//! ([`restamp_page`]), which is all a new chained logical stream needs.

use thiserror::Error;

use crate::ogg::{crc32, FLAG_BOS, FLAG_CONTINUED};

/// Magic of a Vorbis comment header packet.
pub const VORBIS_COMMENT_MAGIC: &[u8] = b"\x03vorbis";
/// Magic of an Opus comment header packet.
pub const OPUS_TAGS_MAGIC: &[u8] = b"OpusTags";

pub use crate::ogg::MAX_SEGMENTS;

/// Which codec's comment header layout a packet has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommentKind {
    /// `\x03vorbis` ... framing bit.
    Vorbis,
    /// `OpusTags` ... optional extra data.
    Opus,
}

/// Why a packet is not a usable comment header.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CommentError {
    /// The packet starts with neither `\x03vorbis` nor `OpusTags`.
    #[error("not a Vorbis comment or OpusTags packet")]
    NotComment,
    /// A length or count field points past the end of the packet.
    #[error("comment header truncated")]
    Truncated,
    /// Vorbis only: the framing bit after the last comment is missing (Vorbis I §5.2.1).
    #[error("Vorbis comment header without its framing bit")]
    NoFramingBit,
    /// The rebuilt packet would need a length field above `u32::MAX` bytes.
    #[error("comment too long")]
    TooLong,
}

/// A parsed comment header: vendor string and comments as raw bytes (normally UTF-8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommentHeader {
    /// Layout of the packet.
    pub kind: CommentKind,
    /// Vendor string bytes.
    pub vendor: Vec<u8>,
    /// Comments, each `KEY=value`, in stream order.
    pub comments: Vec<Vec<u8>>,
    /// Opus only: bytes after the comments (extra data or padding), kept as they were.
    pub extra: Vec<u8>,
}

/// Reads a little-endian `u32` length at `*pos`, advancing it.
fn read_len(p: &[u8], pos: &mut usize) -> Result<usize, CommentError> {
    let b = p.get(*pos..*pos + 4).ok_or(CommentError::Truncated)?;
    *pos += 4;
    Ok(u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
}

/// Reads `len` bytes at `*pos`, advancing it.
fn read_bytes<'a>(p: &'a [u8], pos: &mut usize, len: usize) -> Result<&'a [u8], CommentError> {
    let end = pos.checked_add(len).ok_or(CommentError::Truncated)?;
    let b = p.get(*pos..end).ok_or(CommentError::Truncated)?;
    *pos = end;
    Ok(b)
}

/// Whether `comment` (`KEY=value`) has key `key`, ASCII case-insensitively.
fn has_key(comment: &[u8], key: &str) -> bool {
    comment.len() > key.len()
        && comment[key.len()] == b'='
        && comment[..key.len()].eq_ignore_ascii_case(key.as_bytes())
}

impl CommentHeader {
    /// Parses a Vorbis comment header or OpusTags packet.
    ///
    /// Errors: [`CommentError::NotComment`], [`CommentError::Truncated`] (a length past the
    /// end; the comment count is also bounded by the bytes left, so a forged count cannot make
    /// this allocate), [`CommentError::NoFramingBit`] (Vorbis).
    pub fn parse(packet: &[u8]) -> Result<CommentHeader, CommentError> {
        let kind = if packet.starts_with(VORBIS_COMMENT_MAGIC) {
            CommentKind::Vorbis
        } else if packet.starts_with(OPUS_TAGS_MAGIC) {
            CommentKind::Opus
        } else {
            return Err(CommentError::NotComment);
        };
        let mut pos = match kind {
            CommentKind::Vorbis => VORBIS_COMMENT_MAGIC.len(),
            CommentKind::Opus => OPUS_TAGS_MAGIC.len(),
        };
        let vendor_len = read_len(packet, &mut pos)?;
        let vendor = read_bytes(packet, &mut pos, vendor_len)?.to_vec();
        let count = read_len(packet, &mut pos)?;
        if count > (packet.len() - pos) / 4 {
            return Err(CommentError::Truncated);
        }
        let mut comments = Vec::with_capacity(count);
        for _ in 0..count {
            let len = read_len(packet, &mut pos)?;
            comments.push(read_bytes(packet, &mut pos, len)?.to_vec());
        }
        let extra = match kind {
            CommentKind::Vorbis => {
                if packet.get(pos).is_none_or(|b| b & 1 == 0) {
                    return Err(CommentError::NoFramingBit);
                }
                Vec::new()
            }
            CommentKind::Opus => packet[pos..].to_vec(),
        };
        Ok(CommentHeader {
            kind,
            vendor,
            comments,
            extra,
        })
    }

    /// Builds the packet: magic, vendor, comments, then the framing byte (Vorbis) or the
    /// extra data (Opus).
    ///
    /// Errors: [`CommentError::TooLong`] when a length does not fit 32 bits.
    pub fn to_packet(&self) -> Result<Vec<u8>, CommentError> {
        let len32 = |n: usize| u32::try_from(n).map_err(|_| CommentError::TooLong);
        let size = 16
            + self.vendor.len()
            + self.comments.iter().map(|c| 4 + c.len()).sum::<usize>()
            + self.extra.len();
        let mut p = Vec::with_capacity(size);
        p.extend_from_slice(match self.kind {
            CommentKind::Vorbis => VORBIS_COMMENT_MAGIC,
            CommentKind::Opus => OPUS_TAGS_MAGIC,
        });
        p.extend_from_slice(&len32(self.vendor.len())?.to_le_bytes());
        p.extend_from_slice(&self.vendor);
        p.extend_from_slice(&len32(self.comments.len())?.to_le_bytes());
        for c in &self.comments {
            p.extend_from_slice(&len32(c.len())?.to_le_bytes());
            p.extend_from_slice(c);
        }
        match self.kind {
            CommentKind::Vorbis => p.push(1),
            CommentKind::Opus => p.extend_from_slice(&self.extra),
        }
        Ok(p)
    }

    /// The value of the first comment with key `key` (case-insensitive), as lossy UTF-8.
    pub fn get(&self, key: &str) -> Option<String> {
        self.comments
            .iter()
            .find(|c| has_key(c, key))
            .map(|c| String::from_utf8_lossy(&c[key.len() + 1..]).into_owned())
    }

    /// Removes every comment with key `key` (case-insensitive), then appends `KEY=value` (key
    /// upper-cased) when `value` is given. Other comments keep their order.
    pub fn set(&mut self, key: &str, value: Option<&str>) {
        self.comments.retain(|c| !has_key(c, key));
        if let Some(v) = value {
            let mut c = key.to_ascii_uppercase().into_bytes();
            c.push(b'=');
            c.extend_from_slice(v.as_bytes());
            self.comments.push(c);
        }
    }
}

/// Granule position of a page on which no packet ends (-1), as RFC 3533 §6 requires.
pub const NO_GRANULE: u64 = u64::MAX;

pub use crate::ogg::build_raw_page;

/// A copy of the valid page `page` with new flags, granule position, serial and sequence
/// number and a recomputed CRC; lacing values and body are unchanged. `page` must be at least a
/// page header long (a page returned by [`crate::ogg::parse_page`]); a shorter slice panics.
pub fn restamp_page(page: &[u8], flags: u8, granule: u64, serial: u32, sequence: u32) -> Vec<u8> {
    let mut p = page.to_vec();
    p[5] = flags;
    p[6..14].copy_from_slice(&granule.to_le_bytes());
    p[14..18].copy_from_slice(&serial.to_le_bytes());
    p[18..22].copy_from_slice(&sequence.to_le_bytes());
    p[22..26].copy_from_slice(&[0; 4]);
    let crc = crc32(&p);
    p[22..26].copy_from_slice(&crc.to_le_bytes());
    p
}

/// Writes packets of one logical stream into pages, numbering them from a given sequence.
#[derive(Debug, Clone)]
pub struct PageWriter {
    /// Serial number of the logical stream.
    pub serial: u32,
    /// Sequence number of the next page written.
    pub sequence: u32,
}

impl PageWriter {
    /// A writer for stream `serial` whose next page is number `sequence`.
    pub fn new(serial: u32, sequence: u32) -> PageWriter {
        PageWriter { serial, sequence }
    }

    /// Packs `packets` into as few pages as the 255-segment limit allows, flushing at the end
    /// (the last page ends with the last packet), as libogg's `ogg_stream_flush` does. The first
    /// page gets [`FLAG_BOS`] when `bos`; a page starting inside a packet gets
    /// [`FLAG_CONTINUED`]. Pages on which a packet ends carry `granule`, others [`NO_GRANULE`].
    /// Header packets use granule 0 (Vorbis I §A.2, RFC 7845 §3).
    pub fn write(&mut self, packets: &[&[u8]], bos: bool, granule: u64) -> Vec<Vec<u8>> {
        let mut pages = Vec::new();
        let mut lacing: Vec<u8> = Vec::with_capacity(MAX_SEGMENTS);
        let mut body: Vec<u8> = Vec::new();
        let mut flags = if bos { FLAG_BOS } else { 0 };
        let mut ends_here = false;
        for (i, packet) in packets.iter().enumerate() {
            // A packet of n bytes takes n / 255 full segments and one final short segment.
            let segs = packet.len() / 255 + 1;
            let mut off = 0;
            for s in 0..segs {
                let len = if s + 1 == segs {
                    packet.len() - off
                } else {
                    255
                };
                lacing.push(len as u8);
                body.extend_from_slice(&packet[off..off + len]);
                off += len;
                let packet_done = s + 1 == segs;
                ends_here |= packet_done;
                let last = packet_done && i + 1 == packets.len();
                if lacing.len() == MAX_SEGMENTS || last {
                    let g = if ends_here { granule } else { NO_GRANULE };
                    pages.push(build_raw_page(
                        flags,
                        g,
                        self.serial,
                        self.sequence,
                        &lacing,
                        &body,
                    ));
                    self.sequence = self.sequence.wrapping_add(1);
                    lacing.clear();
                    body.clear();
                    ends_here = false;
                    flags = if packet_done { 0 } else { FLAG_CONTINUED };
                }
            }
        }
        pages
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ogg::{parse_page, PageParse, FLAG_EOS};

    /// The OpusTags packet of `assets/test-tone.opus` (10 s of Ogg/Opus made by
    /// `scripts/make-demo-audio.sh` with ffmpeg's libopus): the second page's body.
    fn opus_tags_of_test_tone() -> Vec<u8> {
        let file = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../assets/test-tone.opus"
        ))
        .unwrap();
        let PageParse::Page(first) = parse_page(&file) else {
            panic!("first page")
        };
        let PageParse::Page(second) = parse_page(&file[first.bytes.len()..]) else {
            panic!("second page")
        };
        second.body.to_vec()
    }

    #[test]
    fn opus_tags_round_trip_and_retag() {
        let packet = opus_tags_of_test_tone();
        let mut h = CommentHeader::parse(&packet).unwrap();
        assert_eq!(h.kind, CommentKind::Opus);
        assert_eq!(h.vendor, b"Lavf59.27.100");
        assert_eq!(
            h.get("encoder").as_deref(),
            Some("Lavc59.37.100 libopus"),
            "ffmpeg names its encoder"
        );
        assert_eq!(h.to_packet().unwrap(), packet, "byte-exact rebuild");
        h.set("title", Some("Für Elise"));
        h.set("ARTIST", Some("Beethoven"));
        let rebuilt = CommentHeader::parse(&h.to_packet().unwrap()).unwrap();
        assert_eq!(rebuilt.get("TITLE").as_deref(), Some("Für Elise"));
        assert_eq!(rebuilt.get("Artist").as_deref(), Some("Beethoven"));
        assert_eq!(
            rebuilt.get("encoder").as_deref(),
            Some("Lavc59.37.100 libopus"),
            "other comments kept"
        );
        let mut again = rebuilt.clone();
        again.set("TITLE", Some("Next"));
        again.set("artist", None);
        assert_eq!(again.comments.len(), 2, "replaced, not appended: {again:?}");
        assert_eq!(again.get("artist"), None);
    }

    #[test]
    fn vorbis_comment_needs_framing_bit_and_bounds() {
        let h = CommentHeader {
            kind: CommentKind::Vorbis,
            vendor: b"v".to_vec(),
            comments: vec![b"TITLE=a".to_vec()],
            extra: vec![],
        };
        let p = h.to_packet().unwrap();
        assert_eq!(*p.last().unwrap(), 1);
        assert_eq!(CommentHeader::parse(&p).unwrap(), h);
        assert_eq!(
            CommentHeader::parse(&p[..p.len() - 1]),
            Err(CommentError::NoFramingBit)
        );
        assert_eq!(
            CommentHeader::parse(&p[..p.len() - 3]),
            Err(CommentError::Truncated)
        );
        // A forged count of 2^32-1 comments is refused before allocating.
        let mut forged = b"\x03vorbis\x01\0\0\0v".to_vec();
        forged.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(CommentHeader::parse(&forged), Err(CommentError::Truncated));
        assert_eq!(
            CommentHeader::parse(b"\x01vorbis"),
            Err(CommentError::NotComment)
        );
        // "TITLEX=" is another key.
        let mut h2 = h.clone();
        h2.comments.push(b"TITLEX=b".to_vec());
        h2.set("title", None);
        assert_eq!(h2.comments, vec![b"TITLEX=b".to_vec()]);
    }

    #[test]
    fn page_writer_splits_and_flags_like_libogg() {
        let big = vec![9u8; 255 * 300]; // 301 segments: spans two pages
        let small = vec![1u8; 10];
        let mut w = PageWriter::new(77, 5);
        let pages = w.write(&[&small, &big], true, 0);
        assert_eq!(pages.len(), 2);
        assert_eq!(w.sequence, 7);
        let PageParse::Page(a) = parse_page(&pages[0]) else {
            panic!()
        };
        let PageParse::Page(b) = parse_page(&pages[1]) else {
            panic!()
        };
        assert_eq!(
            (a.flags, a.granule, a.serial, a.sequence),
            (FLAG_BOS, 0, 77, 5)
        );
        assert_eq!(a.segments.len(), 255);
        assert_eq!(
            (b.flags, b.granule, b.sequence),
            (FLAG_CONTINUED, 0, 6),
            "continued page ends the big packet"
        );
        assert_eq!(a.body.len() + b.body.len(), 10 + 255 * 300);
        // A page on which no packet ends has granule -1.
        let pages = PageWriter::new(1, 0).write(&[&vec![0u8; 255 * 255 + 3]], false, 0);
        let PageParse::Page(c) = parse_page(&pages[0]) else {
            panic!()
        };
        assert_eq!(c.granule, NO_GRANULE);
        // An exact multiple of 255 needs a final 0 lacing value.
        let pages = PageWriter::new(1, 0).write(&[&vec![0u8; 510]], false, 0);
        let PageParse::Page(d) = parse_page(&pages[0]) else {
            panic!()
        };
        assert_eq!(d.segments, &[255, 255, 0]);
    }

    #[test]
    fn restamp_keeps_body_and_fixes_crc() {
        let page = crate::ogg::build_page(0, 960, 1, 2, b"abc").unwrap();
        let r = restamp_page(&page, FLAG_EOS, 42, 9, 3);
        let PageParse::Page(p) = parse_page(&r) else {
            panic!("CRC must be valid")
        };
        assert_eq!(
            (p.flags, p.granule, p.serial, p.sequence),
            (FLAG_EOS, 42, 9, 3)
        );
        assert_eq!(p.body, b"abc");
    }
}
