//! Ogg pages to the samples of an fMP4 track (`fmp4.rs`), sans-IO: Opus packets and FLAC
//! frames with their play time, and the track each logical stream's headers describe.
//!
//! Packets are reassembled across lacing values and pages (RFC 3533 section 6: a lacing value
//! of 255 continues the packet, a page flagged "continued" carries the rest of the previous
//! page's last packet); a continuation whose start was not seen, and a packet in progress when a
//! page is missing, are dropped. A BOS page starts a logical stream: its first packet names the
//! codec ([`crate::ogg::Codec::identify`]) and gives the track (`OpusHead`, RFC 7845 section 5.1;
//! the Ogg FLAC mapping header); the other header packets (`OpusTags`, FLAC metadata blocks)
//! are skipped. Durations: an Opus packet's from its TOC byte
//! ([`crate::opus_rtp::opus_packet_samples`], RFC 6716 section 3.1), a FLAC frame's from its
//! header ([`crate::hls::fmp4::flac_frame_samples`]). A stream of any other codec (Vorbis,
//! Speex) yields [`OggEvent::Unsupported`] once and none of its packets.

use crate::hls::fmp4::{flac_frame_samples, Track};
use crate::ogg::{Codec, Page, FLAG_BOS, FLAG_CONTINUED};
use crate::opus_rtp::{is_opus_header, opus_packet_samples, MAX_PACKET_BYTES};

/// What [`OggAudio::push_page`] produces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OggEvent {
    /// A logical stream begins whose samples belong to this track (its header was read).
    Track(Track),
    /// A logical stream begins that fMP4 does not carry here (the codec's name: `Vorbis`, ...).
    Unsupported(&'static str),
    /// One sample of the current track and its play time in ticks of the track's timescale.
    Sample {
        /// The Opus packet or FLAC frame.
        data: Vec<u8>,
        /// Play time in timescale ticks (48 kHz samples for Opus, samples for FLAC).
        duration: u32,
    },
}

/// The codec of the current logical stream, as far as samples go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StreamKind {
    Opus,
    Flac,
    /// Not carried: its packets are dropped.
    Other,
}

/// Reads the Opus or FLAC samples out of a sequence of Ogg pages.
#[derive(Debug, Clone, Default)]
pub struct OggAudio {
    kind: Option<StreamKind>,
    serial: u32,
    next_sequence: u32,
    partial: Vec<u8>,
    in_packet: bool,
    /// Packets dropped (malformed, cut by a missing page, or without a known duration).
    pub dropped: u64,
}

impl OggAudio {
    /// A reader waiting for a BOS page.
    pub fn new() -> OggAudio {
        OggAudio::default()
    }

    /// Pushes one page; what it completes is appended to `out` in order.
    pub fn push_page(&mut self, page: &Page<'_>, out: &mut Vec<OggEvent>) {
        if page.flags & FLAG_BOS != 0 {
            self.drop_partial();
            self.serial = page.serial;
            self.next_sequence = page.sequence;
            let first = page.first_packet().unwrap_or(&[]);
            let (kind, event) = match Codec::identify(first) {
                Codec::Opus { .. } => match Track::from_opus_head(first) {
                    Ok(t) => (StreamKind::Opus, OggEvent::Track(t)),
                    Err(_) => (StreamKind::Other, OggEvent::Unsupported("Opus")),
                },
                Codec::Flac { .. } => match Track::from_ogg_flac_head(first) {
                    Ok(t) => (StreamKind::Flac, OggEvent::Track(t)),
                    Err(_) => (StreamKind::Other, OggEvent::Unsupported("FLAC")),
                },
                other => (StreamKind::Other, OggEvent::Unsupported(other.name())),
            };
            self.kind = Some(kind);
            out.push(event);
            // The BOS page holds the identification header alone (RFC 7845 section 3, the Ogg
            // FLAC mapping): nothing else to read on it.
            self.next_sequence = page.sequence.wrapping_add(1);
            return;
        }
        let Some(kind) = self.kind.filter(|_| page.serial == self.serial) else {
            // No BOS seen yet for this stream (joined mid-stream): wait for one.
            return;
        };
        if page.sequence != self.next_sequence {
            self.drop_partial();
        }
        self.next_sequence = page.sequence.wrapping_add(1);
        if kind == StreamKind::Other {
            return;
        }
        if page.flags & FLAG_CONTINUED == 0 {
            self.drop_partial();
        }
        let mut skipping = page.flags & FLAG_CONTINUED != 0 && !self.in_packet;
        let mut pos = 0usize;
        for &lacing in page.segments {
            let seg = &page.body[pos..pos + usize::from(lacing)];
            pos += usize::from(lacing);
            if skipping {
                skipping = lacing == 255;
                if !skipping {
                    self.dropped += 1;
                }
                continue;
            }
            if self.partial.len() + seg.len() > MAX_PACKET_BYTES * 16 {
                self.partial.clear();
                self.in_packet = false;
                skipping = lacing == 255;
                self.dropped += 1;
                continue;
            }
            self.in_packet = true;
            self.partial.extend_from_slice(seg);
            if lacing < 255 {
                let packet = std::mem::take(&mut self.partial);
                self.in_packet = false;
                self.packet(kind, packet, out);
            }
        }
    }

    /// A whole packet of the current stream: a sample, a header to skip, or a drop.
    fn packet(&mut self, kind: StreamKind, packet: Vec<u8>, out: &mut Vec<OggEvent>) {
        let duration = match kind {
            StreamKind::Opus if is_opus_header(&packet) => return,
            StreamKind::Opus => opus_packet_samples(&packet),
            // FLAC metadata blocks (comments, padding, pictures) never start with a frame sync.
            StreamKind::Flac if !packet.starts_with(&[0xFF]) => return,
            StreamKind::Flac => flac_frame_samples(&packet),
            StreamKind::Other => return,
        };
        match duration {
            Some(duration) => out.push(OggEvent::Sample {
                data: packet,
                duration,
            }),
            None => self.dropped += 1,
        }
    }

    fn drop_partial(&mut self) {
        if self.in_packet {
            self.dropped += 1;
        }
        self.partial.clear();
        self.in_packet = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hls::fmp4::TrackCodec;
    use crate::ogg::{build_raw_page, parse_page, PageParse, FLAG_BOS};

    /// A page holding `packets` whole (lacing values computed).
    fn build_page(flags: u8, granule: u64, serial: u32, seq: u32, packets: &[&[u8]]) -> Vec<u8> {
        let mut lacing = Vec::new();
        let mut body = Vec::new();
        for p in packets {
            lacing.extend(std::iter::repeat_n(255u8, p.len() / 255));
            lacing.push((p.len() % 255) as u8);
            body.extend_from_slice(p);
        }
        build_raw_page(flags, granule, serial, seq, &lacing, &body)
    }

    fn pages(bytes: &[Vec<u8>]) -> Vec<OggEvent> {
        let mut r = OggAudio::new();
        let mut out = Vec::new();
        for b in bytes {
            let PageParse::Page(p) = parse_page(b) else {
                panic!("a page")
            };
            r.push_page(&p, &mut out);
        }
        out
    }

    fn opus_head() -> Vec<u8> {
        let mut p = b"OpusHead\x01\x02".to_vec();
        p.extend_from_slice(&[0x38, 0x01, 0x80, 0xBB, 0, 0, 0, 0, 0]);
        p
    }

    #[test]
    fn opus_packets_across_pages_with_their_durations() {
        // TOC 0xFC: CELT FB 20 ms, code 0 (960 samples); 0xF8 | 1: two 20 ms frames (1920).
        let big = {
            let mut p = vec![0xFC];
            p.extend(std::iter::repeat_n(9u8, 600));
            p
        };
        let ev = pages(&[
            build_page(FLAG_BOS, 0, 7, 0, &[&opus_head()]),
            build_page(0, 0, 7, 1, &[b"OpusTags\0\0\0\0\0\0\0\0"]),
            build_page(0, 960, 7, 2, &[&[0xFC, 1, 2]]),
            build_page(0, 3840, 7, 3, &[&[0xF9, 3], &big]),
        ]);
        assert!(matches!(&ev[0], OggEvent::Track(t) if matches!(t.codec, TrackCodec::Opus(_))));
        let samples: Vec<(usize, u32)> = ev[1..]
            .iter()
            .map(|e| match e {
                OggEvent::Sample { data, duration } => (data.len(), *duration),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(samples, [(3, 960), (2, 1920), (601, 960)]);
    }

    #[test]
    fn a_packet_continued_on_the_next_page_is_joined() {
        let head = opus_head();
        let packet: Vec<u8> = std::iter::once(0xFC)
            .chain((0..400).map(|i| i as u8))
            .collect();
        // Split by hand: 255 bytes on one page (lacing 255: continues), the rest on the next.
        let first = build_raw_page(0, u64::MAX, 7, 1, &[255], &packet[..255]);
        let rest_len = packet.len() - 255;
        let second = build_raw_page(FLAG_CONTINUED, 960, 7, 2, &[rest_len as u8], &packet[255..]);
        let ev = pages(&[build_page(FLAG_BOS, 0, 7, 0, &[&head]), first, second]);
        assert_eq!(
            ev[1],
            OggEvent::Sample {
                data: packet,
                duration: 960
            }
        );
        // Joining mid-way: the continuation without its start is dropped, not taken as a packet.
        let mut r = OggAudio::new();
        let mut out = Vec::new();
        let bos = build_page(FLAG_BOS, 0, 7, 0, &[&head]);
        let cont = build_raw_page(FLAG_CONTINUED, 960, 7, 1, &[10, 3], &[0xFC; 13]);
        for b in [&bos, &cont] {
            let PageParse::Page(p) = parse_page(b) else {
                panic!()
            };
            r.push_page(&p, &mut out);
        }
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(r.dropped, 1);
    }

    #[test]
    fn vorbis_is_not_carried_and_pages_before_a_bos_are_ignored() {
        let mut vorbis = b"\x01vorbis".to_vec();
        vorbis.extend_from_slice(&[0; 23]);
        let ev = pages(&[
            build_page(0, 960, 3, 5, &[&[0xFC, 1]]),
            build_page(FLAG_BOS, 0, 3, 0, &[&vorbis]),
            build_page(0, 960, 3, 1, &[&[0xFC, 1]]),
        ]);
        assert_eq!(ev, [OggEvent::Unsupported("Vorbis")]);
    }

    #[test]
    fn flac_frames_after_metadata_blocks() {
        let mut head = b"\x7FFLAC\x01\x00\x00\x01fLaC\x00\x00\x00\x22".to_vec();
        let mut info = [0u8; 34];
        let packed: u64 = (48_000u64 << 44) | (1 << 41) | (15 << 36);
        info[10..18].copy_from_slice(&packed.to_be_bytes());
        head.extend_from_slice(&info);
        // A VORBIS_COMMENT block (type 4, last), then two frames of 4096 samples (code 12).
        let comment = [0x84, 0, 0, 4, 0, 0, 0, 0];
        let frame = [0xFF, 0xF8, 0xCA, 0x18, 0x00, 0xAA, 0xBB];
        let ev = pages(&[
            build_page(FLAG_BOS, 0, 9, 0, &[&head]),
            build_page(0, 0, 9, 1, &[&comment]),
            build_page(0, 8192, 9, 2, &[&frame, &frame]),
        ]);
        let OggEvent::Track(t) = &ev[0] else {
            panic!("{ev:?}")
        };
        assert_eq!((t.timescale, t.channels), (48_000, 2));
        assert_eq!(ev.len(), 3);
        assert!(ev[1..]
            .iter()
            .all(|e| matches!(e, OggEvent::Sample { duration: 4096, .. })));
    }
}
