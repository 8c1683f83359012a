//! The transcoder's pure parts (no I/O, no codec): decoded samples gathered into Opus frames
//! of 48 kHz stereo, 20 to 80 ms long ([`crate::config::TRANSCODE_FRAME_MS`], [`Framer`]), the Ogg/Opus pages those frames are carried in
//! ([`OggOpus`]: `OpusHead` and `OpusTags` as RFC 7845 §5 lays them out, one page per audio
//! packet so a viewer gets each packet as soon as it is encoded), the encoder's packet buffer
//! size ([`MAX_OPUS_PACKET`]) and the rate limit of the decoder's error log ([`LogLimit`]).

use std::time::{Duration, Instant};

use bytes::Bytes;
use throng_proto::ogg_comments::{CommentHeader, CommentKind, PageWriter};

/// Sample rate of every Opus stream the transcoder writes, in Hz (RFC 7587 §4.1: WebRTC's Opus
/// RTP clock is 48 kHz whatever the input).
pub const OPUS_RATE: u32 = 48_000;

/// Channels of the Opus stream: stereo (a mono source is duplicated on both).
pub const CHANNELS: usize = 2;

/// Samples per channel of 20 ms at 48 kHz, WebRTC's usual Opus packet time.
pub const FRAME_SAMPLES: usize = 960;

/// The default Opus packet duration of a transcoded feed (ms), see
/// [`crate::config::TRANSCODE_FRAME_MS`].
pub const DEFAULT_FRAME_MS: u32 = 60;

/// The encoder's output buffer, in bytes: libopus's recommended 4,000 (`opus.h`,
/// `opus_encode`), room for three 1,275-byte frames and their code 3 framing (RFC 6716
/// §3.2.1, §3.2.5).
pub const MAX_OPUS_PACKET: usize = 4000;

/// The most bytes one Opus packet of the transcoder may take, whatever its duration: passed to
/// libopus as the packet's size limit (`max_data_bytes`, which caps the instantaneous
/// bitrate), so that with the RTP header (12 bytes and its extensions) and the SRTP tag (16)
/// a datagram stays under the 1,200 bytes WebRTC stacks assume a path carries unfragmented.
/// At 96 kbit/s a 60 ms packet is about 720 bytes and an 80 ms one about 960: the cap binds
/// only on peaks (above 110 kbit/s at 80 ms).
pub const MAX_RTP_OPUS_PAYLOAD: usize = 1100;

/// Samples per channel at 48 kHz of an Opus frame of `frame_ms` ms, `None` when the duration
/// is not one of [`crate::config::TRANSCODE_FRAME_MS`].
pub fn frame_samples(frame_ms: u32) -> Option<usize> {
    crate::config::TRANSCODE_FRAME_MS
        .contains(&frame_ms)
        .then_some(frame_ms as usize * OPUS_RATE as usize / 1000)
}

/// Appends `samples`, interleaved with `channels` channels, to `out` as interleaved stereo:
/// mono is duplicated, channels past the second are dropped; zero channels append nothing.
pub fn to_stereo(samples: &[f32], channels: usize, out: &mut Vec<f32>) {
    match channels {
        0 => {}
        1 => {
            for &s in samples {
                out.extend_from_slice(&[s, s]);
            }
        }
        2 => out.extend_from_slice(samples),
        n => {
            for frame in samples.chunks_exact(n) {
                out.extend_from_slice(&frame[..2]);
            }
        }
    }
}

/// Gathers decoded audio, any channel count, into frames of interleaved 48 kHz stereo.
#[derive(Debug)]
pub struct Framer {
    pending: Vec<f32>,
    /// Samples per channel of one frame.
    frame: usize,
}

impl Default for Framer {
    /// A framer of 20 ms frames ([`FRAME_SAMPLES`]).
    fn default() -> Framer {
        Framer::new(FRAME_SAMPLES)
    }
}

impl Framer {
    /// A framer of `frame` samples per channel per frame (at least 1).
    pub fn new(frame: usize) -> Framer {
        Framer {
            pending: Vec::new(),
            frame: frame.max(1),
        }
    }

    /// Samples per channel of one frame.
    pub fn frame_samples(&self) -> usize {
        self.frame
    }

    /// Appends `samples`, interleaved with `channels` channels (at 48 kHz), as stereo
    /// ([`to_stereo`]).
    pub fn push(&mut self, samples: &[f32], channels: usize) {
        to_stereo(samples, channels, &mut self.pending);
    }

    /// Appends planar stereo (or mono when `right` is `None`) 48 kHz samples.
    pub fn push_planar(&mut self, left: &[f32], right: Option<&[f32]>) {
        let right = right.unwrap_or(left);
        for (l, r) in left.iter().zip(right) {
            self.pending.extend_from_slice(&[*l, *r]);
        }
    }

    /// The next whole frame ([`Self::frame_samples`] × [`CHANNELS`] interleaved samples),
    /// removed from the pending samples; `None` until one is complete.
    pub fn next_frame(&mut self) -> Option<Vec<f32>> {
        let n = self.frame * CHANNELS;
        if self.pending.len() < n {
            return None;
        }
        let rest = self.pending.split_off(n);
        Some(std::mem::replace(&mut self.pending, rest))
    }

    #[cfg(test)]
    /// Samples per channel pending (less than a frame after [`Self::next_frame`] returned
    /// `None`).
    pub fn pending(&self) -> usize {
        self.pending.len() / CHANNELS
    }
}

/// The vendor string of the `OpusTags` the transcoder writes.
pub const VENDOR: &str = "throng transcoder (libopus)";

/// One Ogg/Opus logical stream written page by page: the header pages first, then one page per
/// audio packet with its granule position (RFC 7845 §4: 48 kHz samples at the end of the
/// packet, counting the pre-skip).
#[derive(Debug)]
pub struct OggOpus {
    pages: PageWriter,
    granule: u64,
    pre_skip: u16,
    input_rate: u32,
}

impl OggOpus {
    /// A stream with serial `serial` whose encoder delays its output by `pre_skip` samples
    /// (libopus's lookahead) and whose source was sampled at `input_rate` Hz.
    pub fn new(serial: u32, pre_skip: u16, input_rate: u32) -> OggOpus {
        OggOpus {
            pages: PageWriter::new(serial, 0),
            granule: u64::from(pre_skip),
            pre_skip,
            input_rate,
        }
    }

    /// The `OpusHead` packet (RFC 7845 §5.1): version 1, stereo, the pre-skip, the input rate,
    /// no gain, channel mapping family 0.
    pub fn head_packet(&self) -> Vec<u8> {
        let mut p = b"OpusHead".to_vec();
        p.push(1);
        p.push(CHANNELS as u8);
        p.extend_from_slice(&self.pre_skip.to_le_bytes());
        p.extend_from_slice(&self.input_rate.to_le_bytes());
        p.extend_from_slice(&0i16.to_le_bytes());
        p.push(0);
        p
    }

    /// The header pages: `OpusHead` alone on the first (BOS) page, then `OpusTags` (RFC 7845
    /// §3 puts each on a page of its own), as one buffer.
    pub fn header_pages(&mut self) -> Bytes {
        let tags = CommentHeader {
            kind: CommentKind::Opus,
            vendor: VENDOR.as_bytes().to_vec(),
            comments: Vec::new(),
            extra: Vec::new(),
        }
        .to_packet()
        .expect("a short vendor string");
        let mut out = Vec::new();
        for page in self.pages.write(&[&self.head_packet()], true, 0) {
            out.extend_from_slice(&page);
        }
        for page in self.pages.write(&[&tags], false, 0) {
            out.extend_from_slice(&page);
        }
        Bytes::from(out)
    }

    /// The page carrying audio packet `packet` of `samples` 48 kHz samples.
    pub fn audio_page(&mut self, packet: &[u8], samples: u32) -> Bytes {
        self.granule += u64::from(samples);
        let mut out = Vec::with_capacity(packet.len() + 32);
        for page in self.pages.write(&[packet], false, self.granule) {
            out.extend_from_slice(&page);
        }
        Bytes::from(out)
    }
}

/// How often the transcoder logs the same kind of trouble (garbage in the stream, a decoder
/// error) at most.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// A rate limit for one log line: the first occurrence is logged, then at most one line per
/// [`LOG_INTERVAL`], saying how many were left unlogged in between.
#[derive(Debug, Default, Clone, Copy)]
pub struct LogLimit {
    last: Option<Instant>,
    suppressed: u64,
}

impl LogLimit {
    /// One occurrence at `now`: `Some(n)` when it is to be logged (`n` occurrences since the
    /// last line were not), `None` when it is only counted.
    pub fn hit(&mut self, now: Instant) -> Option<u64> {
        match self.last {
            Some(t) if now.saturating_duration_since(t) < LOG_INTERVAL => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use throng_proto::ogg::{parse_page, PageParse, FLAG_BOS};
    use throng_proto::opus_rtp::OpusDepacketizer;

    #[test]
    fn frames_are_20_ms_of_stereo_whatever_the_input_channels() {
        let mut f = Framer::default();
        f.push(&vec![0.5; 500], 1);
        assert_eq!(f.pending(), 500);
        assert!(f.next_frame().is_none());
        f.push(&vec![0.25; 2 * 500], 2);
        let frame = f.next_frame().expect("1000 samples pending");
        assert_eq!(frame.len(), FRAME_SAMPLES * CHANNELS);
        assert_eq!(&frame[..2], &[0.5, 0.5], "mono duplicated");
        assert_eq!(&frame[998..1002], &[0.5, 0.5, 0.25, 0.25]);
        assert_eq!(f.pending(), 40);
        // Six channels: the first two kept.
        let six: Vec<f32> = (0..6 * 920).map(|i| (i % 6) as f32).collect();
        f.push(&six, 6);
        let frame = f.next_frame().expect("960 pending");
        assert_eq!(&frame[80..84], &[0.0, 1.0, 0.0, 1.0]);
        assert_eq!(f.pending(), 0);
        f.push_planar(&[1.0, 2.0], None);
        f.push_planar(&[3.0], Some(&[4.0]));
        assert_eq!(f.pending(), 3);
        f.push(&[1.0; 7], 0);
        assert_eq!(f.pending(), 3);
    }

    #[test]
    fn frame_durations_from_20_to_80_ms_only() {
        assert_eq!(frame_samples(20), Some(960));
        assert_eq!(frame_samples(40), Some(1920));
        assert_eq!(frame_samples(60), Some(2880));
        assert_eq!(frame_samples(80), Some(3840));
        for ms in [0, 10, 30, 50, 100, 120, 240] {
            assert_eq!(frame_samples(ms), None, "{ms} ms");
        }
        assert!(frame_samples(DEFAULT_FRAME_MS).is_some());
        let mut f = Framer::new(2880);
        f.push(&vec![0.5; 2 * 2000], 2);
        assert!(f.next_frame().is_none());
        f.push(&vec![0.5; 2 * 1000], 2);
        assert_eq!(f.next_frame().expect("3000 pending").len(), 2880 * CHANNELS);
        assert_eq!(f.pending(), 120);
    }

    // RFC 6716 §3.2.1: 1,275 bytes per frame; §3.2.5: three of them in a code 3 packet. The
    // capped packet, its RTP header with extensions (12 + up to 32 bytes) and its SRTP tag (16)
    // fit 1,200 bytes.
    const _: () = assert!(MAX_OPUS_PACKET >= 3 * 1275 + 7);
    const _: () = assert!(MAX_RTP_OPUS_PAYLOAD + 12 + 16 + 32 <= 1200);
    const _: () = assert!(MAX_RTP_OPUS_PAYLOAD <= MAX_OPUS_PACKET);

    #[test]
    fn a_20_ms_frame_is_960_samples() {
        assert_eq!(FRAME_SAMPLES as u32 * 1000 / OPUS_RATE, 20);
    }

    #[test]
    fn pages_carry_the_headers_then_one_packet_each_with_its_granule() {
        let mut s = OggOpus::new(7, 312, 44_100);
        let head = s.head_packet();
        assert_eq!(&head[..8], b"OpusHead");
        assert_eq!(head.len(), 19);
        assert_eq!(u16::from_le_bytes([head[10], head[11]]), 312);
        assert_eq!(u32::from_le_bytes(head[12..16].try_into().unwrap()), 44_100);
        let headers = s.header_pages();
        let PageParse::Page(first) = parse_page(&headers) else {
            panic!("a page")
        };
        assert!(first.flags & FLAG_BOS != 0);
        assert_eq!(first.granule, 0);
        let PageParse::Page(second) = parse_page(&headers[first.bytes.len()..]) else {
            panic!("a second page")
        };
        assert!(second.body.starts_with(b"OpusTags"));
        assert_eq!(second.sequence, 1);
        // A 20 ms CELT packet (TOC config 31, code 0) per page.
        let packet = [0xf8u8, 1, 2, 3];
        let a = s.audio_page(&packet, 960);
        let b = s.audio_page(&packet, 960);
        let PageParse::Page(pa) = parse_page(&a) else {
            panic!("a page")
        };
        assert_eq!(pa.granule, 312 + 960);
        assert_eq!(pa.sequence, 2);
        assert_eq!(pa.body, &packet);
        // What a WHEP viewer makes of them: two packets 960 apart, headers skipped.
        let mut d = OpusDepacketizer::new(1000);
        let mut out = Vec::new();
        for bytes in [
            &headers[..first.bytes.len()],
            &headers[first.bytes.len()..],
            &a,
            &b,
        ] {
            assert!(d.push_page_bytes(bytes, &mut out));
        }
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].rtp_ts.wrapping_sub(out[0].rtp_ts), 960);
        assert_eq!(&out[0].data[..], &packet[..]);
    }

    #[test]
    fn the_error_log_is_rate_limited_and_counts_what_it_left_out() {
        let t0 = Instant::now();
        let mut l = LogLimit::default();
        assert_eq!(l.hit(t0), Some(0));
        assert_eq!(l.hit(t0 + Duration::from_secs(1)), None);
        assert_eq!(l.hit(t0 + Duration::from_secs(9)), None);
        assert_eq!(l.hit(t0 + LOG_INTERVAL), Some(2));
        assert_eq!(l.hit(t0 + LOG_INTERVAL), None);
    }
}
