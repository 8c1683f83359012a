//! Ogg pages (RFC 3533) and the codec header packets that a listener joining mid-stream needs.
//!
//! A page is a 27-byte header (`OggS`, version 0, flags, 64-bit granule position, serial, page
//! sequence, CRC-32, segment count), a segment table, then the body. The CRC uses polynomial
//! 0x04C11DB7 with no reflection over the page with its CRC field zeroed. Codec identification
//! and header-packet counts follow the Vorbis I, Opus (RFC 7845), FLAC-in-Ogg, Speex and Theora
//! mappings, as Icecast 2.4.4 `format_ogg.c` needs them to keep `header_pages`.

/// Bytes in a page header before the segment table.
pub const PAGE_HEADER_LEN: usize = 27;

/// Flag bit: the page starts with a continued packet.
pub const FLAG_CONTINUED: u8 = 0x01;
/// Flag bit: first page of a logical stream (BOS).
pub const FLAG_BOS: u8 = 0x02;
/// Flag bit: last page of a logical stream (EOS).
pub const FLAG_EOS: u8 = 0x04;

const fn crc_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut r = (i as u32) << 24;
        let mut j = 0;
        while j < 8 {
            r = if r & 0x8000_0000 != 0 {
                (r << 1) ^ 0x04C1_1DB7
            } else {
                r << 1
            };
            j += 1;
        }
        t[i] = r;
        i += 1;
    }
    t
}
static CRC_TABLE: [u32; 256] = crc_table();

/// Ogg CRC-32 of `data` (initial value 0, no final XOR).
pub fn crc32(data: &[u8]) -> u32 {
    crc_update(0, data)
}

/// Continues an Ogg CRC-32 over more bytes.
fn crc_update(crc: u32, data: &[u8]) -> u32 {
    data.iter().fold(crc, |crc, &b| {
        (crc << 8) ^ CRC_TABLE[((crc >> 24) as u8 ^ b) as usize]
    })
}

/// A parsed page, borrowing the buffer it was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page<'a> {
    /// The whole page (header, segment table, body).
    pub bytes: &'a [u8],
    /// Header type flags ([`FLAG_CONTINUED`], [`FLAG_BOS`], [`FLAG_EOS`]).
    pub flags: u8,
    /// Granule position; `u64::MAX` (-1) when no packet ends on this page.
    pub granule: u64,
    /// Bitstream serial number.
    pub serial: u32,
    /// Page sequence number.
    pub sequence: u32,
    /// Segment table (lacing values).
    pub segments: &'a [u8],
    /// Page body.
    pub body: &'a [u8],
}

impl Page<'_> {
    /// Whether this is the first page of a logical stream.
    pub fn is_bos(&self) -> bool {
        self.flags & FLAG_BOS != 0
    }

    /// Number of packets that end on this page (lacing values below 255).
    pub fn packets_completed(&self) -> usize {
        self.segments.iter().filter(|&&l| l < 255).count()
    }

    /// The bytes of the first packet on this page (possibly only its start, if it continues on
    /// the next page), or `None` when the page starts with a continued packet.
    pub fn first_packet(&self) -> Option<&[u8]> {
        if self.flags & FLAG_CONTINUED != 0 {
            return None;
        }
        let mut len = 0usize;
        for &l in self.segments {
            len += l as usize;
            if l < 255 {
                break;
            }
        }
        self.body.get(..len)
    }
}

/// Result of looking for a page at the start of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum PageParse<'a> {
    /// A valid page (capture pattern, version 0 and CRC all match).
    Page(Page<'a>),
    /// The buffer holds the start of what may be a page; more bytes are needed.
    Incomplete,
    /// The buffer does not start with a valid page (bad capture, version or CRC).
    Invalid,
}

/// Parses the page at the start of `buf`, verifying its CRC.
pub fn parse_page(buf: &[u8]) -> PageParse<'_> {
    parse(buf, true)
}

/// Parses the page at the start of `buf` without computing its CRC: for bytes that are known
/// to be whole pages that passed [`parse_page`] already (a mount queue holds only pages the
/// ingest framer accepted, CRC checked), read again by every WebRTC viewer, where the CRC was
/// a visible share of the per-viewer CPU. Capture pattern, version and lengths are still
/// checked.
pub fn parse_trusted_page(buf: &[u8]) -> PageParse<'_> {
    parse(buf, false)
}

fn parse(buf: &[u8], verify_crc: bool) -> PageParse<'_> {
    let capture = b"OggS";
    let n = buf.len().min(4);
    if buf[..n] != capture[..n] {
        return PageParse::Invalid;
    }
    if buf.len() < PAGE_HEADER_LEN {
        return PageParse::Incomplete;
    }
    if buf[4] != 0 {
        return PageParse::Invalid;
    }
    let nseg = buf[26] as usize;
    if buf.len() < PAGE_HEADER_LEN + nseg {
        return PageParse::Incomplete;
    }
    let segments = &buf[PAGE_HEADER_LEN..PAGE_HEADER_LEN + nseg];
    let body_len: usize = segments.iter().map(|&l| l as usize).sum();
    let total = PAGE_HEADER_LEN + nseg + body_len;
    if buf.len() < total {
        return PageParse::Incomplete;
    }
    let bytes = &buf[..total];
    // The CRC covers the page with its own CRC field taken as zero.
    if verify_crc {
        let stored = u32::from_le_bytes([buf[22], buf[23], buf[24], buf[25]]);
        let crc = crc_update(crc_update(crc32(&bytes[..22]), &[0; 4]), &bytes[26..]);
        if crc != stored {
            return PageParse::Invalid;
        }
    }
    PageParse::Page(Page {
        bytes,
        flags: buf[5],
        granule: u64::from_le_bytes(buf[6..14].try_into().expect("8 bytes")),
        serial: u32::from_le_bytes(buf[14..18].try_into().expect("4 bytes")),
        sequence: u32::from_le_bytes(buf[18..22].try_into().expect("4 bytes")),
        segments,
        body: &bytes[PAGE_HEADER_LEN + nseg..],
    })
}

/// Most lacing values on one page (the segment count is one byte).
pub const MAX_SEGMENTS: usize = 255;

/// Builds a page holding one whole packet of at most 65,024 bytes (255 lacing values, the
/// last below 255), with a correct CRC; `None` for a larger packet.
pub fn build_page(
    flags: u8,
    granule: u64,
    serial: u32,
    sequence: u32,
    packet: &[u8],
) -> Option<Vec<u8>> {
    if packet.len() > 254 * 255 + 254 {
        return None;
    }
    let mut lacing = vec![255u8; packet.len() / 255];
    lacing.push((packet.len() % 255) as u8);
    Some(build_raw_page(
        flags, granule, serial, sequence, &lacing, packet,
    ))
}

/// Builds one page from its lacing values and body, with a correct CRC.
///
/// `lacing` must hold at most [`MAX_SEGMENTS`] values summing to `body.len()` (checked in debug
/// builds only; otherwise the page is malformed).
pub fn build_raw_page(
    flags: u8,
    granule: u64,
    serial: u32,
    sequence: u32,
    lacing: &[u8],
    body: &[u8],
) -> Vec<u8> {
    debug_assert!(lacing.len() <= MAX_SEGMENTS);
    debug_assert_eq!(
        lacing.iter().map(|&l| l as usize).sum::<usize>(),
        body.len()
    );
    let mut page = Vec::with_capacity(PAGE_HEADER_LEN + lacing.len() + body.len());
    page.extend_from_slice(b"OggS\0");
    page.push(flags);
    page.extend_from_slice(&granule.to_le_bytes());
    page.extend_from_slice(&serial.to_le_bytes());
    page.extend_from_slice(&sequence.to_le_bytes());
    page.extend_from_slice(&[0; 4]);
    page.push(lacing.len() as u8);
    page.extend_from_slice(lacing);
    page.extend_from_slice(body);
    let crc = crc32(&page);
    page[22..26].copy_from_slice(&crc.to_le_bytes());
    page
}

/// A codec carried in an Ogg logical stream, identified from its first (BOS) packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// Vorbis I: 3 header packets; granule in samples at `rate` Hz.
    Vorbis {
        /// Sample rate in Hz.
        rate: u32,
        /// Channels.
        channels: u8,
    },
    /// Opus (RFC 7845): 2 header packets; granule at 48 kHz.
    Opus {
        /// Channels.
        channels: u8,
    },
    /// FLAC in Ogg: 1 + N header packets (N from the mapping header).
    Flac {
        /// Sample rate in Hz.
        rate: u32,
        /// Header packets after the first, 0 when unknown.
        extra_headers: u16,
    },
    /// Speex: 2 + extra header packets; granule at `rate` Hz.
    Speex {
        /// Sample rate in Hz.
        rate: u32,
        /// Extra header packets.
        extra_headers: u32,
    },
    /// Theora video: 3 header packets.
    Theora,
    /// Anything else: only the BOS page is treated as a header.
    Unknown,
}

impl Codec {
    /// Identifies the codec from the first packet of a logical stream.
    pub fn identify(packet: &[u8]) -> Codec {
        let u32le = |o: usize| {
            packet
                .get(o..o + 4)
                .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
        };
        if packet.starts_with(b"\x01vorbis") {
            Codec::Vorbis {
                rate: u32le(12).unwrap_or(0),
                channels: packet.get(11).copied().unwrap_or(0),
            }
        } else if packet.starts_with(b"OpusHead") {
            Codec::Opus {
                channels: packet.get(9).copied().unwrap_or(0),
            }
        } else if packet.starts_with(b"\x7fFLAC") {
            let extra = packet
                .get(7..9)
                .map(|b| u16::from_be_bytes([b[0], b[1]]))
                .unwrap_or(0);
            // STREAMINFO follows "fLaC" + 4-byte block header at offset 13: rate is 20 bits at 27.
            let rate = packet
                .get(27..30)
                .map(|b| ((b[0] as u32) << 12) | ((b[1] as u32) << 4) | (b[2] as u32 >> 4))
                .unwrap_or(0);
            Codec::Flac {
                rate,
                extra_headers: extra,
            }
        } else if packet.starts_with(b"Speex   ") {
            Codec::Speex {
                rate: u32le(36).unwrap_or(0),
                // `extra_headers` is at byte 68 of the Speex header (speex_header.h).
                extra_headers: u32le(68).unwrap_or(0),
            }
        } else if packet.starts_with(b"\x80theora") {
            Codec::Theora
        } else {
            Codec::Unknown
        }
    }

    /// Number of header packets at the start of this codec's logical stream.
    pub fn header_packets(&self) -> usize {
        match *self {
            Codec::Vorbis { .. } | Codec::Theora => 3,
            Codec::Opus { .. } => 2,
            Codec::Flac { extra_headers, .. } => 1 + extra_headers as usize,
            Codec::Speex { extra_headers, .. } => 2 + extra_headers.min(16) as usize,
            Codec::Unknown => 1,
        }
    }

    /// Granule positions per second for audio codecs (`None` for video or unknown).
    pub fn granule_rate(&self) -> Option<u32> {
        match *self {
            Codec::Vorbis { rate, .. } | Codec::Flac { rate, .. } | Codec::Speex { rate, .. } => {
                (rate > 0).then_some(rate)
            }
            Codec::Opus { .. } => Some(48_000),
            Codec::Theora | Codec::Unknown => None,
        }
    }

    /// A short name, as Icecast's `subtype` stat (`Vorbis`, `Opus`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Codec::Vorbis { .. } => "Vorbis",
            Codec::Opus { .. } => "Opus",
            Codec::Flac { .. } => "FLAC",
            Codec::Speex { .. } => "Speex",
            Codec::Theora => "Theora",
            Codec::Unknown => "Unknown",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trusted_parse_reads_the_same_page_but_skips_the_crc() {
        let page = build_page(0, 960, 7, 3, b"opus packet").unwrap();
        assert_eq!(parse_trusted_page(&page), parse_page(&page));
        let mut bad = page.clone();
        bad[22] ^= 0xff;
        assert_eq!(parse_page(&bad), PageParse::Invalid);
        match parse_trusted_page(&bad) {
            PageParse::Page(p) => {
                assert_eq!((p.granule, p.serial, p.sequence), (960, 7, 3));
                assert_eq!(p.body, b"opus packet");
            }
            other => panic!("{other:?}"),
        }
        // Structure is still checked.
        assert_eq!(
            parse_trusted_page(&page[..page.len() - 1]),
            PageParse::Incomplete
        );
        let mut v1 = page.clone();
        v1[4] = 1;
        assert_eq!(parse_trusted_page(&v1), PageParse::Invalid);
    }

    #[test]
    fn crc_matches_known_vector() {
        // CRC-32/MPEG-2 without final XOR and init 0 ("CRC-32/OGG"): check value for "123456789".
        assert_eq!(crc32(b"123456789"), 0x89A1_897F);
    }

    #[test]
    fn build_then_parse_round_trip() {
        let packet = vec![7u8; 600];
        let page = build_page(FLAG_BOS, 0, 42, 0, &packet).unwrap();
        assert!(build_page(0, 0, 1, 0, &vec![0; 70_000]).is_none());
        match parse_page(&page) {
            PageParse::Page(p) => {
                assert!(p.is_bos());
                assert_eq!((p.serial, p.sequence, p.granule), (42, 0, 0));
                assert_eq!(p.segments, &[255, 255, 90]);
                assert_eq!(p.body.len(), 600);
                assert_eq!(p.packets_completed(), 1);
                assert_eq!(p.first_packet().unwrap().len(), 600);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(parse_page(&page[..30]), PageParse::Incomplete);
        assert_eq!(parse_page(b"Og"), PageParse::Incomplete);
        let mut bad = page.clone();
        bad[100] ^= 1;
        assert_eq!(parse_page(&bad), PageParse::Invalid);
        assert_eq!(parse_page(b"OggX"), PageParse::Invalid);
    }

    #[test]
    fn codecs_identified() {
        let mut opus = b"OpusHead\x01\x02".to_vec();
        opus.resize(19, 0);
        let c = Codec::identify(&opus);
        assert_eq!(c, Codec::Opus { channels: 2 });
        assert_eq!((c.header_packets(), c.granule_rate()), (2, Some(48_000)));
        let mut vorbis = b"\x01vorbis\0\0\0\0\x02".to_vec();
        vorbis.extend_from_slice(&44100u32.to_le_bytes());
        let c = Codec::identify(&vorbis);
        assert_eq!(
            c,
            Codec::Vorbis {
                rate: 44100,
                channels: 2
            }
        );
        assert_eq!(c.header_packets(), 3);
        assert_eq!(Codec::identify(b"whatever").header_packets(), 1);
    }
}
