//! Mouth-to-ear latency stamps (sans-IO): the Ogg/Opus stream the bench pushes as a source
//! with `--latency-source`, and reading its stamps back from RTP payloads or an ICY byte stream.
//!
//! Each 20 ms audio packet is [`TOC`] (a valid Opus TOC byte, RFC 6716 §3.1: config 31 = CELT
//! fullband 20 ms, mono, code 0 = one frame), then the 8-byte [`MAGIC`], then the send time in
//! µs since the Unix epoch (u64, little-endian), padded to [`PACKET_LEN`] bytes (64 kbit/s). Throng repacketizes Ogg pages to RTP without
//! transcoding (RFC 7587: one Opus packet per RTP payload), so a WHEP viewer finds the stamp at
//! the start of each payload, and an ICY listener of the same mount finds it by the magic in the
//! Ogg pages. The stream is one logical Ogg stream (RFC 3533): a BOS page with `OpusHead`, a page
//! with `OpusTags` (RFC 7845 §5), then one page per audio packet whose granule position is the
//! 48 kHz sample count at the end of the packet (RFC 7845 §4, pre-skip 0). Latencies go into
//! the engines' exact histograms ([`crate::stats::Hist`], the `m2e` of a snapshot).

use throng_proto::ogg::build_page;

pub use crate::verify::stamp::{read_stamp, stamp_packet, MAGIC, PACKET_LEN, STAMP_LEN, TOC};

/// 48 kHz samples per stamped packet (20 ms).
pub const PACKET_SAMPLES: u64 = 960;

/// Play time of one stamped packet (µs).
pub const PACKET_US: u64 = 20_000;

/// Serial number of the probe's logical Ogg stream.
pub const SERIAL: u32 = 0x7468_726e;

/// Finds the stamps in a byte stream read in pieces (an ICY listener's Ogg stream): `carry`
/// keeps the tail of the previous piece so a stamp split between two reads is found once.
/// Appends each stamp to `out`.
pub fn scan_stamps(carry: &mut Vec<u8>, data: &[u8], out: &mut Vec<u64>) {
    let keep = MAGIC.len() + 8 - 1;
    carry.extend_from_slice(data);
    let mut i = 0;
    while i + MAGIC.len() + 8 <= carry.len() {
        if carry[i..i + MAGIC.len()] == MAGIC {
            let at = i + MAGIC.len();
            out.push(u64::from_le_bytes(
                carry[at..at + 8].try_into().expect("8 bytes"),
            ));
            i = at + 8;
        } else {
            i += 1;
        }
    }
    // Keep what could still start a stamp.
    let from = i.max(carry.len().saturating_sub(keep));
    carry.drain(..from);
}

/// The `OpusHead` identification header (RFC 7845 §5.1): version 1, mono, pre-skip 0, input
/// rate 48 kHz, gain 0, mapping family 0.
pub fn opus_head() -> Vec<u8> {
    let mut h = b"OpusHead".to_vec();
    h.push(1);
    h.push(1);
    h.extend_from_slice(&0u16.to_le_bytes());
    h.extend_from_slice(&48_000u32.to_le_bytes());
    h.extend_from_slice(&0i16.to_le_bytes());
    h.push(0);
    h
}

/// The `OpusTags` comment header (RFC 7845 §5.2) with vendor `throng-bench` and a title.
pub fn opus_tags() -> Vec<u8> {
    let mut t = b"OpusTags".to_vec();
    let vendor = b"throng-bench";
    t.extend_from_slice(&(vendor.len() as u32).to_le_bytes());
    t.extend_from_slice(vendor);
    let title = b"TITLE=throng bench latency probe";
    t.extend_from_slice(&1u32.to_le_bytes());
    t.extend_from_slice(&(title.len() as u32).to_le_bytes());
    t.extend_from_slice(title);
    t
}

/// The two header pages of the probe stream (BOS `OpusHead`, then `OpusTags`), pages 0 and 1.
pub fn header_pages() -> Vec<u8> {
    let mut out = build_page(0x02, 0, SERIAL, 0, &opus_head()).expect("small packet");
    out.extend(build_page(0, 0, SERIAL, 1, &opus_tags()).expect("small packet"));
    out
}

/// Audio page number `k` (0-based) carrying send time `unix_us`: page sequence `k + 2`,
/// granule position `(k + 1) × 960`.
pub fn audio_page(k: u64, unix_us: u64) -> Vec<u8> {
    build_page(
        0,
        (k + 1) * PACKET_SAMPLES,
        SERIAL,
        (k + 2) as u32,
        &stamp_packet(unix_us),
    )
    .expect("small packet")
}

#[cfg(test)]
mod tests {
    use super::*;
    use throng_proto::ogg::{parse_page, Codec, PageParse};
    use throng_proto::opus_rtp::{opus_packet_samples, OpusDepacketizer};

    #[test]
    fn a_stamp_round_trips_and_other_packets_have_none() {
        let p = stamp_packet(1_700_000_000_123_456);
        assert_eq!(read_stamp(&p), Some(1_700_000_000_123_456));
        assert_eq!(opus_packet_samples(&p), Some(960));
        assert_eq!(read_stamp(&[TOC, 1, 2, 3]), None);
        let mut other = p;
        other[0] = 0xFC;
        assert_eq!(read_stamp(&other), None);
    }

    #[test]
    fn the_pages_parse_and_depacketize_to_the_stamps() {
        let mut stream = header_pages();
        for k in 0..5 {
            stream.extend(audio_page(k, 1000 + k));
        }
        let mut rest = &stream[..];
        let mut pages = Vec::new();
        while let PageParse::Page(p) = parse_page(rest) {
            rest = &rest[p.bytes.len()..];
            pages.push(p);
        }
        assert!(rest.is_empty());
        assert_eq!(pages.len(), 7);
        assert!(pages[0].is_bos());
        assert!(matches!(
            Codec::identify(pages[0].first_packet().unwrap()),
            Codec::Opus { .. }
        ));
        assert_eq!(pages[6].granule, 5 * 960);
        let mut d = OpusDepacketizer::new(0);
        let mut out = Vec::new();
        for p in &pages {
            d.push_page(p, &mut out);
        }
        let stamps: Vec<_> = out.iter().filter_map(|p| read_stamp(&p.data)).collect();
        assert_eq!(stamps, vec![1000, 1001, 1002, 1003, 1004]);
        assert_eq!(out[1].rtp_ts.wrapping_sub(out[0].rtp_ts), 960);
    }

    #[test]
    fn stamps_split_across_reads_are_found_once() {
        let mut stream = header_pages();
        for k in 0..20 {
            stream.extend(audio_page(k, 5_000 + k));
        }
        for piece in [1, 3, 7, 16, 17, 100, stream.len()] {
            let (mut carry, mut out) = (Vec::new(), Vec::new());
            for chunk in stream.chunks(piece) {
                scan_stamps(&mut carry, chunk, &mut out);
            }
            assert_eq!(
                out,
                (5_000..5_020).collect::<Vec<u64>>(),
                "pieces of {piece}"
            );
            assert!(carry.len() < STAMP_LEN);
        }
    }
}
