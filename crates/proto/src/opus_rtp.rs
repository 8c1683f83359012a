//! Ogg/Opus pages to Opus packets with 48 kHz RTP timestamps, for WebRTC (WHEP) playback.
//!
//! Sans-IO: feed the Ogg pages of a mount's queue, in order, to [`OpusDepacketizer::push_page`]
//! and take [`OpusPacket`]s ready for an RTP audio track (RFC 7587: one Opus packet per RTP
//! payload, timestamps at 48 kHz whatever the input rate). Packets are reassembled across lacing
//! values and pages (RFC 3533 §6: a lacing value of 255 continues the packet, a page flagged
//! "continued" carries the rest of the previous page's last packet); the `OpusHead` and
//! `OpusTags` header packets (RFC 7845 §5) are skipped, both after a BOS page and when met at
//! any other place (a source switch replays them). Timestamps come from the page granule
//! positions (RFC 7845 §4: 48 kHz sample counts at the end of the page's last packet), offset
//! so that they run on without a jump across new logical streams, source switches and fallbacks;
//! a forward jump of the granule inside one stream (pages the queue dropped) moves the
//! timestamp forward by the same amount, so the receiver conceals the hole instead of playing
//! late. Packet durations come from the TOC byte (RFC 6716 §3.1).

use std::sync::Arc;

use crate::ogg::{self, Page, PageParse, FLAG_BOS, FLAG_CONTINUED};

/// RTP clock rate of Opus, in Hz (RFC 7587 §4.1: always 48,000).
pub const OPUS_RTP_CLOCK_HZ: u32 = 48_000;

/// Largest forward jump of the granule position, in 48 kHz samples (10 s), taken as dropped
/// pages of the same stream; a larger or backward jump re-anchors the timestamps instead.
pub const MAX_GRANULE_GAP: u64 = 10 * OPUS_RTP_CLOCK_HZ as u64;

/// Largest packet reassembled, in bytes; a longer run of continued segments is dropped (RFC 6716
/// §3.4 bounds a packet at 120 ms of frames of at most 1,275 bytes each).
pub const MAX_PACKET_BYTES: usize = 6 * 1275 + 8;

/// One Opus packet with its RTP timing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpusPacket {
    /// The Opus packet, one RTP payload (RFC 7587 §4.2), shared by every receiver of it.
    pub data: Arc<[u8]>,
    /// RTP timestamp of the packet's first sample, at 48 kHz (wraps at 2^32).
    pub rtp_ts: u32,
    /// Play time of the packet in 48 kHz samples (120 to 5,760).
    pub samples: u32,
}

/// Play time of an Opus packet in 48 kHz samples, from its TOC byte and, for code 3, its frame
/// count byte (RFC 6716 §3.1 and §3.2.5); `None` for an empty or malformed packet or one over
/// 120 ms.
pub fn opus_packet_samples(packet: &[u8]) -> Option<u32> {
    let toc = *packet.first()?;
    let config = toc >> 3;
    let frame = match config {
        // SILK-only, NB/MB/WB: 10, 20, 40, 60 ms.
        0..=11 => [480, 960, 1920, 2880][(config % 4) as usize],
        // Hybrid, SWB/FB: 10, 20 ms.
        12..=15 => [480, 960][(config % 2) as usize],
        // CELT-only, NB/WB/SWB/FB: 2.5, 5, 10, 20 ms.
        _ => [120, 240, 480, 960][(config % 4) as usize],
    };
    let frames = match toc & 3 {
        0 => 1,
        1 | 2 => 2,
        _ => u32::from(*packet.get(1)? & 0x3F),
    };
    let total = frame * frames;
    (frames > 0 && total <= 5760).then_some(total)
}

/// Whether a packet is an Opus header packet (`OpusHead` or `OpusTags`, RFC 7845 §5).
pub fn is_opus_header(packet: &[u8]) -> bool {
    packet.starts_with(b"OpusHead") || packet.starts_with(b"OpusTags")
}

/// The audio packets one Ogg page completed, with what an RTP clock needs of the page: the
/// stage of [`OpusDepacketizer`] that can run once per mount ([`OggOpusReader`]), its packets
/// shared (`Arc`) by every viewer that stamps them ([`RtpClock`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PagePackets {
    /// Serial number of the page's logical stream.
    pub serial: u32,
    /// The page's granule position (48 kHz samples at the end of its last packet; `u64::MAX`
    /// when none ends on it).
    pub granule: u64,
    /// The packets completed on the page, in order, with their play time in 48 kHz samples.
    pub packets: Vec<(Arc<[u8]>, u32)>,
}

/// Reassembles the Opus audio packets of Ogg pages (lacing, continued pages, header and
/// foreign streams skipped): the half of [`OpusDepacketizer`] that does not depend on who
/// receives the packets, so it can run once per mount.
#[derive(Debug, Clone, Default)]
pub struct OggOpusReader {
    /// Serial number and next expected page sequence of the current stream.
    stream: Option<(u32, u32)>,
    /// Start of a packet continued on the next page.
    partial: Vec<u8>,
    /// Whether `partial` holds a packet start (it may legitimately be empty bytes so far).
    in_packet: bool,
    /// Whether the current stream is not Opus (its BOS packet was not `OpusHead`).
    foreign: bool,
    /// What was dropped and read so far (`reanchors` is the clock's).
    stats: DepacketizeStats,
}

impl OggOpusReader {
    /// Counters so far.
    pub fn stats(&self) -> DepacketizeStats {
        self.stats
    }

    /// Pushes one page; returns the audio packets completed on it (`None`: none).
    pub fn push_page(&mut self, page: &Page<'_>) -> Option<PagePackets> {
        let new_stream =
            page.flags & FLAG_BOS != 0 || self.stream.is_none_or(|(s, _)| s != page.serial);
        if new_stream {
            self.drop_partial();
            self.foreign = page.flags & FLAG_BOS != 0
                && !page.first_packet().unwrap_or(&[]).starts_with(b"OpusHead");
            self.stream = Some((page.serial, page.sequence));
        }
        let (serial, next_sequence) = self.stream?;
        if page.sequence != next_sequence {
            // Pages were lost between the two: a packet in progress cannot be completed.
            self.drop_partial();
        }
        self.stream = Some((serial, page.sequence.wrapping_add(1)));
        if self.foreign {
            self.stats.foreign_pages += 1;
            self.drop_partial();
            return None;
        }

        let continued = page.flags & FLAG_CONTINUED != 0;
        if !continued {
            self.drop_partial();
        }
        // A continuation whose start we never saw is skipped up to its end.
        let mut skipping = continued && !self.in_packet;
        let mut packets: Vec<(Arc<[u8]>, u32)> = Vec::new();
        let mut pos = 0usize;
        for &lacing in page.segments {
            let seg = &page.body[pos..pos + lacing as usize];
            pos += lacing as usize;
            if skipping {
                if lacing < 255 {
                    skipping = false;
                    self.stats.dropped += 1;
                }
                continue;
            }
            self.in_packet = true;
            if self.partial.len() + seg.len() > MAX_PACKET_BYTES {
                self.partial.clear();
                self.in_packet = false;
                skipping = lacing == 255;
                self.stats.dropped += 1;
                continue;
            }
            self.partial.extend_from_slice(seg);
            if lacing < 255 {
                self.in_packet = false;
                if is_opus_header(&self.partial) {
                    self.stats.headers += 1;
                } else if let Some(samples) = opus_packet_samples(&self.partial) {
                    packets.push((Arc::from(&self.partial[..]), samples));
                    self.stats.packets += 1;
                } else {
                    self.stats.dropped += 1;
                }
                self.partial.clear();
            }
        }
        (!packets.is_empty()).then_some(PagePackets {
            serial,
            granule: page.granule,
            packets,
        })
    }

    /// Forgets a packet in progress (counted as dropped).
    fn drop_partial(&mut self) {
        if self.in_packet {
            self.stats.dropped += 1;
        }
        self.partial.clear();
        self.in_packet = false;
    }
}

/// One receiver's RTP timestamps for the packets of [`OggOpusReader`]: from the page granule
/// positions, offset so they run on without a jump across new logical streams, source switches
/// and fallbacks; a forward jump of the granule inside one stream (pages the queue dropped)
/// moves the timestamp forward by as much, a larger or backward one re-anchors.
#[derive(Debug, Clone, Copy)]
pub struct RtpClock {
    /// Timestamp the next packet gets when the timing re-anchors.
    next_ts: u64,
    /// The current stream: serial, offset added to a granule to give the RTP timestamp, and
    /// the granule at the end of its last page with audio.
    stream: Option<(u32, u64, u64)>,
    /// Times the timestamps were re-anchored.
    reanchors: u64,
}

impl RtpClock {
    /// A clock whose first packet gets RTP timestamp `initial_ts` (RFC 3550 §5.1 asks for a
    /// random initial value).
    pub fn new(initial_ts: u32) -> RtpClock {
        RtpClock {
            next_ts: u64::from(initial_ts),
            stream: None,
            reanchors: 0,
        }
    }

    /// RTP timestamp the next packet would get if the stream were re-anchored now.
    pub fn next_ts(&self) -> u32 {
        self.next_ts as u32
    }

    /// Times the timestamps were re-anchored so far.
    pub fn reanchors(&self) -> u64 {
        self.reanchors
    }

    /// Stamps the packets of `page`, appended to `out` in order.
    pub fn stamp(&mut self, page: &PagePackets, out: &mut Vec<OpusPacket>) {
        let total: u64 = page.packets.iter().map(|(_, s)| u64::from(*s)).sum();
        let start = page.granule.wrapping_sub(total);
        let offset = match self.stream {
            Some((serial, offset, last))
                if serial == page.serial
                    && start.wrapping_sub(last) <= MAX_GRANULE_GAP
                    && page.granule != u64::MAX =>
            {
                offset
            }
            _ => {
                self.reanchors += 1;
                self.next_ts.wrapping_sub(start)
            }
        };
        let mut ts = offset.wrapping_add(start);
        for (data, samples) in &page.packets {
            out.push(OpusPacket {
                data: data.clone(),
                rtp_ts: ts as u32,
                samples: *samples,
            });
            ts = ts.wrapping_add(u64::from(*samples));
        }
        self.next_ts = ts;
        self.stream = Some((page.serial, offset, page.granule));
    }
}

/// Counters of what the depacketizer dropped, for logs and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DepacketizeStats {
    /// Packets sent out.
    pub packets: u64,
    /// Packets or packet fragments dropped: a continuation without its start, a start whose
    /// continuation never came, an oversized or malformed packet.
    pub dropped: u64,
    /// Header packets skipped.
    pub headers: u64,
    /// Pages of a stream that is not Opus, whose packets were dropped.
    pub foreign_pages: u64,
    /// Times the timestamps were re-anchored on a new stream or an implausible granule.
    pub reanchors: u64,
}

/// Turns Ogg/Opus pages into Opus packets with continuous 48 kHz RTP timestamps: an
/// [`OggOpusReader`] and an [`RtpClock`] in one, for one receiver.
#[derive(Debug, Clone)]
pub struct OpusDepacketizer {
    reader: OggOpusReader,
    clock: RtpClock,
}

impl OpusDepacketizer {
    /// A depacketizer whose first packet gets RTP timestamp `initial_ts` (RFC 3550 §5.1 asks
    /// for a random initial value).
    pub fn new(initial_ts: u32) -> OpusDepacketizer {
        OpusDepacketizer {
            reader: OggOpusReader::default(),
            clock: RtpClock::new(initial_ts),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> DepacketizeStats {
        DepacketizeStats {
            reanchors: self.clock.reanchors(),
            ..self.reader.stats()
        }
    }

    /// RTP timestamp the next packet would get if the stream were re-anchored now.
    pub fn next_ts(&self) -> u32 {
        self.clock.next_ts()
    }

    /// Parses `bytes` as one Ogg page (CRC checked) and pushes it; returns `false`, dropping
    /// any packet in progress, when it is not a valid page.
    pub fn push_page_bytes(&mut self, bytes: &[u8], out: &mut Vec<OpusPacket>) -> bool {
        match ogg::parse_page(bytes) {
            PageParse::Page(page) => {
                self.push_page(&page, out);
                true
            }
            _ => {
                self.reader.drop_partial();
                false
            }
        }
    }

    /// Pushes one page; the packets completed on it are appended to `out` in order.
    pub fn push_page(&mut self, page: &Page<'_>, out: &mut Vec<OpusPacket>) {
        if let Some(p) = self.reader.push_page(page) {
            self.clock.stamp(&p, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ogg::{build_page, build_raw_page, FLAG_EOS};

    /// A 20 ms CELT FB mono packet (config 31, code 0) of `len` bytes filled with `fill`.
    fn pkt(len: usize, fill: u8) -> Vec<u8> {
        let mut p = vec![fill; len];
        p[0] = 31 << 3;
        p
    }

    fn head() -> Vec<u8> {
        let mut h = b"OpusHead".to_vec();
        h.extend_from_slice(&[1, 2, 0x38, 1, 0x80, 0xBB, 0, 0, 0, 0, 0]);
        h
    }

    fn tags() -> Vec<u8> {
        let mut t = b"OpusTags".to_vec();
        t.extend_from_slice(&[4, 0, 0, 0, b't', b'e', b's', b't', 0, 0, 0, 0]);
        t
    }

    /// Lacing values for several whole packets.
    fn lacing(packets: &[&[u8]]) -> (Vec<u8>, Vec<u8>) {
        let mut lace = Vec::new();
        let mut body = Vec::new();
        for p in packets {
            lace.extend(std::iter::repeat_n(255u8, p.len() / 255));
            lace.push((p.len() % 255) as u8);
            body.extend_from_slice(p);
        }
        (lace, body)
    }

    fn data_page(serial: u32, seq: u32, granule: u64, packets: &[&[u8]]) -> Vec<u8> {
        let (lace, body) = lacing(packets);
        build_raw_page(0, granule, serial, seq, &lace, &body)
    }

    /// Header pages of a stream: OpusHead (BOS) and OpusTags.
    fn headers(serial: u32) -> Vec<Vec<u8>> {
        vec![
            build_page(FLAG_BOS, 0, serial, 0, &head()).unwrap(),
            build_page(0, 0, serial, 1, &tags()).unwrap(),
        ]
    }

    fn push_all(d: &mut OpusDepacketizer, pages: &[Vec<u8>]) -> Vec<OpusPacket> {
        let mut out = Vec::new();
        for p in pages {
            assert!(d.push_page_bytes(p, &mut out));
        }
        out
    }

    #[test]
    fn toc_durations() {
        assert_eq!(opus_packet_samples(&[31 << 3]), Some(960));
        assert_eq!(opus_packet_samples(&[16 << 3]), Some(120));
        assert_eq!(opus_packet_samples(&[(3 << 3) | 1]), Some(5760));
        assert_eq!(opus_packet_samples(&[13 << 3]), Some(960));
        assert_eq!(opus_packet_samples(&[(31 << 3) | 3, 3]), Some(2880));
        // Code 3 with no frame count byte, zero frames, or over 120 ms.
        assert_eq!(opus_packet_samples(&[(31 << 3) | 3]), None);
        assert_eq!(opus_packet_samples(&[(31 << 3) | 3, 0]), None);
        assert_eq!(opus_packet_samples(&[(31 << 3) | 3, 7]), None);
        assert_eq!(opus_packet_samples(&[]), None);
    }

    #[test]
    fn headers_skipped_and_packets_timed_from_granule() {
        let mut d = OpusDepacketizer::new(1000);
        let mut pages = headers(7);
        let (a, b, c) = (pkt(100, 1), pkt(120, 2), pkt(90, 3));
        // Granule includes a pre-skip of 312 samples, as encoders write it.
        pages.push(data_page(7, 2, 312 + 1920, &[&a, &b]));
        pages.push(data_page(7, 3, 312 + 2880, &[&c]));
        let out = push_all(&mut d, &pages);
        assert_eq!(out.len(), 3);
        assert_eq!(&out[0].data[..], &a[..]);
        assert_eq!(&out[1].data[..], &b[..]);
        assert_eq!(&out[2].data[..], &c[..]);
        assert_eq!(
            out.iter().map(|p| p.rtp_ts).collect::<Vec<_>>(),
            [1000, 1960, 2920]
        );
        assert_eq!(d.stats().headers, 2);
        assert_eq!(d.stats().dropped, 0);
    }

    #[test]
    fn packet_spanning_lacing_and_pages_is_reassembled() {
        let mut d = OpusDepacketizer::new(0);
        let big = pkt(700, 9); // 255 + 255 + 190: three lacing values
        let small = pkt(50, 4);
        let mut pages = headers(1);
        // Page 2 ends mid-packet (last lacing value 255), page 3 continues it.
        let (lace, body) = lacing(&[&small, &big]);
        let split_seg = 1 + 2; // small, then two 255 segments of big
        let split_body: usize = lace[..split_seg].iter().map(|&l| l as usize).sum();
        pages.push(build_raw_page(
            0,
            960,
            1,
            2,
            &lace[..split_seg],
            &body[..split_body],
        ));
        pages.push(build_raw_page(
            FLAG_CONTINUED,
            1920,
            1,
            3,
            &lace[split_seg..],
            &body[split_body..],
        ));
        let out = push_all(&mut d, &pages);
        assert_eq!(out.len(), 2);
        assert_eq!(&out[0].data[..], &small[..]);
        assert_eq!(&out[1].data[..], &big[..]);
        assert_eq!(out[1].rtp_ts, 960);
    }

    #[test]
    fn continuation_without_start_is_dropped() {
        let mut d = OpusDepacketizer::new(0);
        let tail = vec![5u8; 40];
        let whole = pkt(60, 6);
        let mut lace = vec![40u8];
        let (l2, b2) = lacing(&[&whole]);
        lace.extend(l2);
        let mut body = tail.clone();
        body.extend(b2);
        // A listener joining mid-stream: the first data page continues an unseen packet.
        let page = build_raw_page(FLAG_CONTINUED, 5000, 3, 9, &lace, &body);
        let mut out = Vec::new();
        assert!(d.push_page_bytes(&page, &mut out));
        assert_eq!(out.len(), 1);
        assert_eq!(&out[0].data[..], &whole[..]);
        assert_eq!(out[0].rtp_ts, 0);
        assert_eq!(d.stats().dropped, 1);
    }

    #[test]
    fn timestamps_continue_across_a_new_stream() {
        let mut d = OpusDepacketizer::new(u32::MAX - 500);
        let mut pages = headers(1);
        pages.push(data_page(1, 2, 960, &[&pkt(10, 1)]));
        // The first source ends (EOS page).
        let (lace, body) = lacing(&[&pkt(10, 2)]);
        pages.push(build_raw_page(FLAG_EOS, 1920, 1, 3, &lace, &body));
        // A fallback source: another serial, its own granule origin far away.
        pages.extend(headers(2));
        pages.push(data_page(2, 2, 123_456_789, &[&pkt(10, 3), &pkt(10, 4)]));
        let out = push_all(&mut d, &pages);
        let ts: Vec<u32> = out.iter().map(|p| p.rtp_ts).collect();
        let start = u32::MAX - 500;
        assert_eq!(
            ts,
            [
                start,
                start.wrapping_add(960),
                start.wrapping_add(1920),
                start.wrapping_add(2880)
            ]
        );
        assert_eq!(d.stats().headers, 4);
    }

    #[test]
    fn serial_change_without_bos_reanchors_and_skips_replayed_headers() {
        let mut d = OpusDepacketizer::new(0);
        let mut pages = headers(1);
        pages.push(data_page(1, 2, 960, &[&pkt(10, 1)]));
        // A new stream whose BOS page the queue did not carry, but OpusTags arrives.
        pages.push(build_page(0, 0, 2, 1, &tags()).unwrap());
        pages.push(data_page(2, 2, 99_999, &[&pkt(10, 2)]));
        let out = push_all(&mut d, &pages);
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].rtp_ts, 960);
    }

    #[test]
    fn dropped_pages_move_the_timestamp_forward() {
        let mut d = OpusDepacketizer::new(0);
        let mut pages = headers(1);
        pages.push(data_page(1, 2, 960, &[&pkt(10, 1)]));
        // Pages 3 and 4 (two packets) never reached this viewer.
        pages.push(data_page(1, 5, 960 * 4, &[&pkt(10, 2)]));
        let out = push_all(&mut d, &pages);
        assert_eq!(out[1].rtp_ts, 960 * 3);
    }

    #[test]
    fn backward_granule_reanchors() {
        let mut d = OpusDepacketizer::new(0);
        let mut pages = headers(1);
        pages.push(data_page(1, 2, 48_000, &[&pkt(10, 1)]));
        pages.push(data_page(1, 3, 960, &[&pkt(10, 2)]));
        let out = push_all(&mut d, &pages);
        assert_eq!(out[1].rtp_ts, 960);
        assert_eq!(d.stats().reanchors, 2);
    }

    #[test]
    fn non_opus_stream_is_ignored() {
        let mut d = OpusDepacketizer::new(0);
        let mut vorbis = vec![1u8];
        vorbis.extend_from_slice(b"vorbis");
        vorbis.extend_from_slice(&[0; 23]);
        let pages = vec![
            build_page(FLAG_BOS, 0, 4, 0, &vorbis).unwrap(),
            data_page(4, 1, 1024, &[&pkt(10, 1)]),
        ];
        let out = push_all(&mut d, &pages);
        assert!(out.is_empty());
        assert_eq!(d.stats().foreign_pages, 2);
    }

    #[test]
    fn invalid_page_drops_packet_in_progress() {
        let mut d = OpusDepacketizer::new(0);
        let mut out = Vec::new();
        let start = build_raw_page(0, u64::MAX, 1, 2, &[255], &[31 << 3; 255]);
        push_all(&mut d, &headers(1));
        assert!(d.push_page_bytes(&start, &mut out));
        assert!(!d.push_page_bytes(b"OggSgarbage", &mut out));
        assert!(out.is_empty());
        assert_eq!(d.stats().dropped, 1);
    }
}
