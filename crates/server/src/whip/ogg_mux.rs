//! Opus packets received over RTP, muxed into an Ogg/Opus stream (RFC 7845) as a source
//! client would send it: `OpusHead` and `OpusTags` pages first ([`OggOpusMux::headers`]), then
//! audio pages of about [`PAGE_SAMPLES`] each (a tenth of a second, so a listener waits little
//! for a page), framed by `throng_proto::ogg_comments::PageWriter`.
//!
//! Granule positions count the samples of the packets written (RFC 7845 §4), not RTP time, so
//! they always agree with the packets whatever the network did. RTP timestamps only decide
//! where packets are missing ([`gap`]): a packet that arrives late or twice is dropped; a gap
//! of up to [`MAX_FILL`] samples (lost packets, a sender's discontinuous transmission) is
//! filled with [`SILENCE`] packets so the stream's clock keeps pace with the publisher's; a
//! longer jump (a clock reset, a publisher that paused) and the first packet of a new WebRTC
//! session ([`OggOpusMux::restart`], a reconnect) continue the stream from where it was. Pure.

use throng_proto::ogg_comments::PageWriter;
use throng_proto::opus_rtp::opus_packet_samples;

/// Samples (48 kHz) gathered before a page is written: 100 ms.
pub const PAGE_SAMPLES: u64 = 4_800;

/// The longest gap filled with silence, in samples (1 s); longer ones are skipped over.
pub const MAX_FILL: u64 = 48_000;

/// One 20 ms Opus packet that decodes to silence (CELT-only fullband, mono: TOC `0xF8`, then
/// a frame whose range-coded bits say "silence", as Opus encoders emit during silence).
pub const SILENCE: [u8; 3] = [0xF8, 0xFF, 0xFE];

/// Samples in a [`SILENCE`] packet.
pub const SILENCE_SAMPLES: u64 = 960;

/// What to do with a packet whose RTP timestamp is `ts` when `expected` was due next (both
/// extended to 64 bits; `None` when nothing is expected: the first packet of a session).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gap {
    /// In time: write it.
    None,
    /// Write this many [`SILENCE`] packets first.
    Fill(u64),
    /// Late or a duplicate: drop it.
    Late,
    /// A jump too long to fill (or a new session): write it, the stream goes on.
    Skip,
}

/// The gap decision for a packet at `ts` when `expected` was due.
pub fn gap(expected: Option<u64>, ts: u64) -> Gap {
    let Some(expected) = expected else {
        return Gap::Skip;
    };
    match ts.cmp(&expected) {
        std::cmp::Ordering::Equal => Gap::None,
        std::cmp::Ordering::Less => Gap::Late,
        std::cmp::Ordering::Greater => {
            let missing = ts - expected;
            if missing > MAX_FILL {
                Gap::Skip
            } else if missing < SILENCE_SAMPLES {
                // Less than a frame (a sender's own timestamp jitter): nothing to fill.
                Gap::None
            } else {
                Gap::Fill(missing / SILENCE_SAMPLES)
            }
        }
    }
}

/// The `OpusHead` packet (RFC 7845 §5.1): version 1, `channels`, no pre-skip (the stream
/// starts mid-way through the publisher's encoding), 48 kHz input, no gain, mapping family 0.
pub fn opus_head(channels: u8) -> Vec<u8> {
    let mut p = b"OpusHead".to_vec();
    p.push(1);
    p.push(channels);
    p.extend_from_slice(&0u16.to_le_bytes());
    p.extend_from_slice(&48_000u32.to_le_bytes());
    p.extend_from_slice(&0i16.to_le_bytes());
    p.push(0);
    p
}

/// The `OpusTags` packet (RFC 7845 §5.2): vendor `vendor`, no comments.
pub fn opus_tags(vendor: &str) -> Vec<u8> {
    let mut p = b"OpusTags".to_vec();
    p.extend_from_slice(&(vendor.len() as u32).to_le_bytes());
    p.extend_from_slice(vendor.as_bytes());
    p.extend_from_slice(&0u32.to_le_bytes());
    p
}

/// What the muxer counted (for the publisher's end-of-stream log line).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MuxStats {
    /// Packets written.
    pub packets: u64,
    /// Silence packets written into gaps.
    pub filled: u64,
    /// Late or duplicate packets dropped.
    pub late: u64,
    /// Gaps too long to fill, and restarts.
    pub skipped: u64,
    /// Packets that are not Opus (no valid TOC), dropped.
    pub invalid: u64,
}

/// The Ogg/Opus stream of one publisher (across its WebRTC sessions).
#[derive(Debug)]
pub struct OggOpusMux {
    pages: PageWriter,
    /// Samples written (the granule position of the last packet's end).
    granule: u64,
    /// The RTP timestamp due next (the last packet's plus its samples).
    expected: Option<u64>,
    /// Packets waiting for their page, and their samples.
    pending: Vec<Vec<u8>>,
    pending_samples: u64,
    stats: MuxStats,
}

impl OggOpusMux {
    /// A muxer for logical stream `serial`.
    pub fn new(serial: u32) -> OggOpusMux {
        OggOpusMux {
            pages: PageWriter::new(serial, 0),
            granule: 0,
            expected: None,
            pending: Vec::new(),
            pending_samples: 0,
            stats: MuxStats::default(),
        }
    }

    /// The two header pages (`OpusHead` with the BOS flag, then `OpusTags`), once, first.
    pub fn headers(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        for page in self.pages.write(&[&opus_head(2)], true, 0) {
            out.extend_from_slice(&page);
        }
        for page in self.pages.write(&[&opus_tags("throng WHIP")], false, 0) {
            out.extend_from_slice(&page);
        }
        out
    }

    /// A new WebRTC session (a reconnect) goes on with this stream: its first packet is not
    /// compared with the last session's timestamps.
    pub fn restart(&mut self) {
        if self.expected.take().is_some() {
            self.stats.skipped += 1;
        }
    }

    /// Takes the packet `packet` of RTP timestamp `ts` (48 kHz, extended); returns the pages
    /// completed (bytes, possibly none).
    pub fn push(&mut self, ts: u64, packet: &[u8]) -> Vec<u8> {
        let Some(samples) = opus_packet_samples(packet) else {
            self.stats.invalid += 1;
            return Vec::new();
        };
        let samples = u64::from(samples);
        match gap(self.expected, ts) {
            Gap::Late => {
                self.stats.late += 1;
                return Vec::new();
            }
            Gap::Fill(n) => {
                self.stats.filled += n;
                for _ in 0..n {
                    self.pending.push(SILENCE.to_vec());
                    self.pending_samples += SILENCE_SAMPLES;
                }
            }
            Gap::Skip if self.expected.is_some() => self.stats.skipped += 1,
            Gap::Skip | Gap::None => {}
        }
        self.expected = Some(ts + samples);
        self.stats.packets += 1;
        self.pending.push(packet.to_vec());
        self.pending_samples += samples;
        if self.pending_samples >= PAGE_SAMPLES {
            self.flush()
        } else {
            Vec::new()
        }
    }

    /// Writes the packets waiting, if any, as pages.
    pub fn flush(&mut self) -> Vec<u8> {
        if self.pending.is_empty() {
            return Vec::new();
        }
        self.granule += self.pending_samples;
        let packets: Vec<&[u8]> = self.pending.iter().map(Vec::as_slice).collect();
        let out = self.pages.write(&packets, false, self.granule).concat();
        self.pending.clear();
        self.pending_samples = 0;
        out
    }

    /// What was counted so far.
    pub fn stats(&self) -> MuxStats {
        self.stats
    }

    /// Samples written so far (48 kHz).
    pub fn granule(&self) -> u64 {
        self.granule
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use throng_proto::ogg::{parse_page, PageParse};

    /// A 20 ms CELT packet (TOC config 31, code 0) with `fill` payload bytes.
    fn packet(fill: usize) -> Vec<u8> {
        let mut p = vec![0xF8];
        p.extend(std::iter::repeat_n(0x55, fill));
        p
    }

    /// The pages in `bytes`: (granule, packets completed, flags).
    fn pages(mut bytes: &[u8]) -> Vec<(u64, usize, u8)> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let PageParse::Page(p) = parse_page(bytes) else {
                panic!("a valid page")
            };
            out.push((p.granule, p.packets_completed(), p.flags));
            bytes = &bytes[p.bytes.len()..];
        }
        out
    }

    #[test]
    fn gaps_are_judged_on_rtp_time() {
        assert_eq!(gap(None, 5), Gap::Skip);
        assert_eq!(gap(Some(960), 960), Gap::None);
        assert_eq!(gap(Some(960), 0), Gap::Late);
        assert_eq!(gap(Some(960), 960 + 100), Gap::None, "sub-frame jitter");
        assert_eq!(gap(Some(960), 960 * 4), Gap::Fill(3));
        assert_eq!(gap(Some(0), MAX_FILL), Gap::Fill(50));
        assert_eq!(gap(Some(0), MAX_FILL + 1), Gap::Skip);
    }

    #[test]
    fn headers_then_pages_of_a_tenth_of_a_second() {
        let mut m = OggOpusMux::new(7);
        let h = m.headers();
        let hp = pages(&h);
        assert_eq!(hp.len(), 2);
        assert_eq!((hp[0].0, hp[0].2), (0, 2), "OpusHead: BOS, granule 0");
        assert_eq!((hp[1].0, hp[1].2), (0, 0));
        assert!(h[28..].starts_with(b"OpusHead"));
        let mut out = Vec::new();
        for i in 0..10u64 {
            let bytes = m.push(1_000 + i * 960, &packet(40));
            assert_eq!(bytes.is_empty(), i % 5 != 4, "a page every 5 packets");
            out.extend(bytes);
        }
        assert_eq!(pages(&out), vec![(4_800, 5, 0), (9_600, 5, 0)]);
        assert_eq!(m.granule(), 9_600);
    }

    #[test]
    fn losses_are_filled_late_packets_dropped_and_restarts_continue() {
        let mut m = OggOpusMux::new(1);
        m.headers();
        let mut out = m.push(0, &packet(10));
        // Two packets lost: two silence packets, then this one; the page is due.
        out.extend(m.push(960 * 3, &packet(10)));
        // A duplicate of the last one.
        assert!(m.push(960 * 3, &packet(10)).is_empty());
        out.extend(m.push(960 * 4, &packet(10)));
        assert_eq!(pages(&out), vec![(4_800, 5, 0)]);
        // A reconnect: a new session's random timestamps just go on.
        m.restart();
        m.push(123_456_789, &packet(10));
        // A pause of 5 s: skipped, not filled.
        m.push(123_456_789 + 960 + 5 * 48_000, &packet(10));
        out = m.flush();
        assert_eq!(pages(&out), vec![(4_800 + 1_920, 2, 0)]);
        assert!(m.flush().is_empty(), "nothing left");
        let s = m.stats();
        assert_eq!(
            (s.packets, s.filled, s.late, s.skipped, s.invalid),
            (5, 2, 1, 2, 0)
        );
        assert!(m.push(0, &[]).is_empty());
        assert_eq!(m.stats().invalid, 1);
    }

    #[test]
    fn silence_is_one_twenty_millisecond_frame() {
        assert_eq!(
            opus_packet_samples(&SILENCE).map(u64::from),
            Some(SILENCE_SAMPLES)
        );
        let head = opus_head(2);
        assert_eq!(head.len(), 19);
        assert_eq!(head[9], 2);
        assert_eq!(&opus_tags("v")[8..], &[1, 0, 0, 0, b'v', 0, 0, 0, 0]);
    }
}
