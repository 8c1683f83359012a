//! The Ogg half of [`crate::verify::stream`]: pages walked as they arrive (RFC 3533 §6), with
//! no copy of their bodies. A page header (27 bytes and the segment table) is gathered, the
//! body is only run through the CRC (RFC 3533's polynomial 0x04C11DB7, no reflection, initial
//! 0, with the CRC field taken as zeros, computed by the `crc` crate) and its first bytes kept
//! (to identify the codec of a BOS page, and to read a latency stamp). At a page's end its CRC
//! must match and, per logical stream (serial number), a data page must follow the previous
//! one in sequence with a granule position that does not go back; the growth of the granule
//! position is the page's media time, at the stream's rate (Opus: 48 kHz, RFC 7845 §4; Vorbis,
//! FLAC, Speex: from their identification headers, as `throng_proto::ogg::Codec` reads them).
//! The first data page of a stream sets the baseline (a listener joins mid-stream), header
//! pages (BOS, and granule 0 before any data) set nothing.

use throng_proto::ogg::Codec;

/// Ogg's CRC-32 (RFC 3533 §6; the "check" value is that of `123456789`).
const OGG_CRC: crc::Algorithm<u32> = crc::Algorithm {
    width: 32,
    poly: 0x04C1_1DB7,
    init: 0,
    refin: false,
    refout: false,
    xorout: 0,
    check: 0x89A1_897F,
    residue: 0,
};

/// The CRC engine (slice-by-16 tables, built at compile time).
static CRC: crc::Crc<u32, crc::Table<16>> = crc::Crc::<u32, crc::Table<16>>::new(&OGG_CRC);

/// Bytes kept of a page body's start (a BOS page's identification header, a stamp).
const PREFIX: usize = 80;

/// One logical stream's state.
#[derive(Debug, Clone)]
struct Logical {
    serial: u32,
    /// Samples per second of the granule position (0: unknown, no media time).
    rate: u32,
    /// The last data page's sequence number and granule position.
    last: Option<(u32, u64)>,
}

/// Bytes where a page must begin that are no Ogg page header (RFC 3533 §6: the capture pattern
/// `OggS` and version 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotAPage;

/// The end of a page, judged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageEnd {
    /// The page was whole and right.
    pub complete: bool,
    /// It broke the chain (wrong CRC, out of sequence, granule going back).
    pub broke: bool,
    /// Its media time (µs).
    pub media_us: u64,
}

/// The page walker of one stream.
#[derive(Debug)]
pub struct OggWalk {
    head: Vec<u8>,
    crc: u32,
    prefix: [u8; PREFIX],
    prefix_len: u8,
    /// Length of the page's first packet, when it ends on this page and is not a continuation.
    first_packet: Option<u16>,
    streams: Vec<Logical>,
}

impl Default for OggWalk {
    fn default() -> OggWalk {
        OggWalk {
            head: Vec::new(),
            crc: 0,
            prefix: [0; PREFIX],
            prefix_len: 0,
            first_packet: None,
            streams: Vec::new(),
        }
    }
}

fn crc_update(crc: u32, bytes: &[u8]) -> u32 {
    let mut d = CRC.digest_with_initial(crc);
    d.update(bytes);
    d.finalize()
}

impl OggWalk {
    /// Forgets the page in progress (after a break or at a new sync).
    pub fn reset_page(&mut self) {
        self.head.clear();
        self.prefix_len = 0;
        self.first_packet = None;
        self.crc = 0;
    }

    /// The header bytes gathered so far (for a search to look at again).
    pub fn take_header_bytes(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.head)
    }

    /// Gathers a page header from `data`: the bytes used, and the body length once the header
    /// is whole.
    ///
    /// Errors: [`NotAPage`]: what was gathered is no page header (capture pattern, version).
    pub fn header(&mut self, data: &[u8]) -> Result<(usize, Option<usize>), NotAPage> {
        let mut used = 0;
        if self.head.len() < 27 {
            let take = (27 - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..take]);
            used += take;
            let n = self.head.len().min(4);
            if self.head[..n] != b"OggS"[..n] || (self.head.len() > 4 && self.head[4] != 0) {
                return Err(NotAPage);
            }
            if self.head.len() < 27 {
                return Ok((used, None));
            }
        }
        let total = 27 + self.head[26] as usize;
        let take = (total - self.head.len()).min(data.len() - used);
        self.head.extend_from_slice(&data[used..used + take]);
        used += take;
        if self.head.len() < total {
            return Ok((used, None));
        }
        let lacing = &self.head[27..total];
        let body: usize = lacing.iter().map(|&l| l as usize).sum();
        self.first_packet = None;
        if self.head[5] & 1 == 0 {
            let mut len = 0usize;
            for &l in lacing {
                len += l as usize;
                if l < 255 {
                    self.first_packet = Some(len as u16);
                    break;
                }
            }
        }
        let mut zeroed = [0u8; 27];
        zeroed.copy_from_slice(&self.head[..27]);
        zeroed[22..26].fill(0);
        self.crc = crc_update(crc_update(0, &zeroed), lacing);
        self.prefix_len = 0;
        Ok((used, Some(body)))
    }

    /// Takes body bytes of the page in progress.
    pub fn body(&mut self, bytes: &[u8]) {
        if self.head.len() < 27 {
            return;
        }
        self.crc = crc_update(self.crc, bytes);
        let have = self.prefix_len as usize;
        if have < PREFIX {
            let take = (PREFIX - have).min(bytes.len());
            self.prefix[have..have + take].copy_from_slice(&bytes[..take]);
            self.prefix_len += take as u8;
        }
    }

    /// Ends the page in progress (its body is all in): judges it; `stamps` gets the send time
    /// of a latency-stamped packet that starts it.
    pub fn end_page(&mut self, stamps: &mut Vec<u64>) -> PageEnd {
        if self.head.len() < 27 {
            return PageEnd::default();
        }
        let h = std::mem::take(&mut self.head);
        let stored = u32::from_le_bytes(h[22..26].try_into().expect("4 bytes"));
        let mut out = PageEnd::default();
        if stored != self.crc {
            out.broke = true;
            self.reset_page();
            return out;
        }
        out.complete = true;
        let flags = h[5];
        let granule = u64::from_le_bytes(h[6..14].try_into().expect("8 bytes"));
        let serial = u32::from_le_bytes(h[14..18].try_into().expect("4 bytes"));
        let seq = u32::from_le_bytes(h[18..22].try_into().expect("4 bytes"));
        let prefix = &self.prefix[..self.prefix_len as usize];
        if flags & 2 != 0 {
            // BOS: a new logical stream; its identification header gives the rate.
            let rate = match Codec::identify(prefix) {
                Codec::Opus { .. } => 48_000,
                Codec::Vorbis { rate, .. } | Codec::Flac { rate, .. } => rate,
                Codec::Speex { rate, .. } => rate,
                _ => 0,
            };
            self.streams.retain(|s| s.serial != serial);
            if self.streams.len() >= 8 {
                self.streams.remove(0);
            }
            self.streams.push(Logical {
                serial,
                rate,
                last: None,
            });
        } else if let Some(s) = self.streams.iter_mut().find(|s| s.serial == serial) {
            let header_page = s.last.is_none() && granule == 0;
            if !header_page {
                match s.last {
                    Some((last_seq, last_g)) => {
                        if seq != last_seq.wrapping_add(1) {
                            out.broke = true;
                        }
                        if granule != u64::MAX {
                            if granule < last_g {
                                out.broke = true;
                            } else if s.rate > 0 {
                                out.media_us = (granule - last_g) * 1_000_000 / u64::from(s.rate);
                            }
                            s.last = Some((seq, granule));
                        } else {
                            s.last = Some((seq, last_g));
                        }
                    }
                    None if granule != u64::MAX => s.last = Some((seq, granule)),
                    None => {}
                }
            }
        }
        if flags & 4 != 0 {
            self.streams.retain(|s| s.serial != serial);
        }
        if let Some(len) = self.first_packet {
            let len = (len as usize).min(prefix.len());
            if let Some(t) = crate::verify::stamp::read_stamp(&prefix[..len]) {
                stamps.push(t);
            }
        }
        self.reset_page();
        out
    }

    /// Where a whole page with a right CRC starts in `buf`; else the offset before which no
    /// page can start (the bytes before it are garbage).
    pub fn find_page(buf: &[u8]) -> Result<usize, usize> {
        let mut i = 0;
        while i + 4 <= buf.len() {
            if &buf[i..i + 4] != b"OggS" {
                i += 1;
                continue;
            }
            if i + 27 > buf.len() {
                return Err(i);
            }
            let total = 27 + buf[i + 26] as usize;
            if i + total > buf.len() {
                return Err(i);
            }
            let body: usize = buf[i + 27..i + total].iter().map(|&l| l as usize).sum();
            if i + total + body > buf.len() {
                return Err(i);
            }
            let mut zeroed = [0u8; 27];
            zeroed.copy_from_slice(&buf[i..i + 27]);
            zeroed[22..26].fill(0);
            let crc = crc_update(
                crc_update(crc_update(0, &zeroed), &buf[i + 27..i + total]),
                &buf[i + total..i + total + body],
            );
            let stored = u32::from_le_bytes(buf[i + 22..i + 26].try_into().expect("4 bytes"));
            if buf[i + 4] == 0 && crc == stored {
                return Ok(i);
            }
            i += 1;
        }
        Err(buf.len().saturating_sub(3))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crc_is_ogg_s() {
        assert_eq!(crc_update(0, b"123456789"), 0x89A1_897F);
        // In pieces, the same.
        assert_eq!(crc_update(crc_update(0, b"1234"), b"56789"), 0x89A1_897F);
        assert_eq!(
            crc_update(0, b"OggS-some page bytes"),
            throng_proto::ogg::crc32(b"OggS-some page bytes")
        );
    }

    #[test]
    fn a_page_is_found_after_garbage() {
        let page = throng_proto::ogg::build_page(0, 960, 1, 5, &[1, 2, 3]).unwrap();
        let mut buf = vec![0x4F; 100];
        buf.extend_from_slice(&page);
        assert_eq!(OggWalk::find_page(&buf), Ok(100));
        assert_eq!(OggWalk::find_page(&buf[..120]), Err(100));
        assert_eq!(OggWalk::find_page(&[0u8; 50]), Err(47));
    }
}
