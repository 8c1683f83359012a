//! MPEG audio frame headers (MPEG-1, MPEG-2 and MPEG-2.5, layers I–III), per ISO/IEC 11172-3 and
//! 13818-3. A header is 4 bytes: an 11-bit sync (`0xFFE`), version, layer, bitrate index,
//! sample-rate index, padding, channel mode. Free-format (bitrate index 0) is rejected, as it
//! cannot be framed without searching for the next sync.

/// MPEG audio version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MpegVersion {
    /// MPEG-1 (32, 44.1, 48 kHz).
    V1,
    /// MPEG-2 LSF (16, 22.05, 24 kHz).
    V2,
    /// MPEG-2.5 (8, 11.025, 12 kHz).
    V25,
}

/// A decoded MPEG audio frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mp3Header {
    /// MPEG version.
    pub version: MpegVersion,
    /// Layer, 1 to 3.
    pub layer: u8,
    /// Bitrate in kbit/s.
    pub bitrate_kbps: u32,
    /// Sample rate in Hz.
    pub sample_rate: u32,
    /// Channels, 1 or 2.
    pub channels: u8,
    /// Whole frame length in bytes, header included.
    pub frame_len: usize,
    /// PCM samples per channel in the frame (384, 576 or 1152).
    pub samples: u32,
}

impl Mp3Header {
    /// Frame duration in microseconds.
    pub fn duration_us(&self) -> u64 {
        self.samples as u64 * 1_000_000 / self.sample_rate as u64
    }

    /// Whether `other` can follow this frame in the same stream (same version, layer, rate).
    pub fn same_stream(&self, other: &Mp3Header) -> bool {
        self.version == other.version
            && self.layer == other.layer
            && self.sample_rate == other.sample_rate
    }
}

const BITRATES_V1: [[u32; 15]; 3] = [
    [
        0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448,
    ],
    [
        0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384,
    ],
    [
        0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320,
    ],
];
const BITRATES_V2: [[u32; 15]; 2] = [
    [
        0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256,
    ],
    [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
];

/// Parses the 4-byte header at the start of `b`; `None` if `b` is shorter or not a valid header.
pub fn parse_header(b: &[u8]) -> Option<Mp3Header> {
    if b.len() < 4 || b[0] != 0xFF || b[1] & 0xE0 != 0xE0 {
        return None;
    }
    let version = match (b[1] >> 3) & 3 {
        0 => MpegVersion::V25,
        2 => MpegVersion::V2,
        3 => MpegVersion::V1,
        _ => return None,
    };
    let layer = match (b[1] >> 1) & 3 {
        1 => 3,
        2 => 2,
        3 => 1,
        _ => return None,
    };
    let br_idx = (b[2] >> 4) as usize;
    let sr_idx = ((b[2] >> 2) & 3) as usize;
    if br_idx == 0 || br_idx == 15 || sr_idx == 3 {
        return None;
    }
    let padding = ((b[2] >> 1) & 1) as usize;
    let channels = if b[3] >> 6 == 3 { 1 } else { 2 };
    let bitrate_kbps = match version {
        MpegVersion::V1 => BITRATES_V1[layer as usize - 1][br_idx],
        _ => BITRATES_V2[if layer == 1 { 0 } else { 1 }][br_idx],
    };
    let base_rate = [44100, 48000, 32000][sr_idx];
    let sample_rate = match version {
        MpegVersion::V1 => base_rate,
        MpegVersion::V2 => base_rate / 2,
        MpegVersion::V25 => base_rate / 4,
    };
    let samples = match (layer, version) {
        (1, _) => 384,
        (2, _) | (3, MpegVersion::V1) => 1152,
        _ => 576,
    };
    let br = bitrate_kbps as usize * 1000;
    let sr = sample_rate as usize;
    let frame_len = if layer == 1 {
        (12 * br / sr + padding) * 4
    } else {
        samples as usize / 8 * br / sr + padding
    };
    Some(Mp3Header {
        version,
        layer,
        bitrate_kbps,
        sample_rate,
        channels,
        frame_len,
        samples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mpeg1_layer3_64k() {
        // 0xFFFB: MPEG-1 layer III, no CRC; 0x50: 64 kbit/s, 44.1 kHz, no padding; 0xC4: mono.
        let h = parse_header(&[0xFF, 0xFB, 0x50, 0xC4]).unwrap();
        assert_eq!(h.version, MpegVersion::V1);
        assert_eq!((h.layer, h.bitrate_kbps, h.sample_rate), (3, 64, 44100));
        assert_eq!(h.channels, 1);
        assert_eq!(h.frame_len, 208); // 144 * 64000 / 44100 = 208.97
        assert_eq!(h.samples, 1152);
        assert_eq!(h.duration_us(), 26122);
        let padded = parse_header(&[0xFF, 0xFB, 0x52, 0x44]).unwrap();
        assert_eq!(padded.frame_len, 209);
        assert_eq!(padded.channels, 2);
    }

    #[test]
    fn mpeg2_layer3_and_layer1() {
        // MPEG-2 layer III 32 kbit/s 22.05 kHz: 72 * 32000 / 22050 = 104.
        let h = parse_header(&[0xFF, 0xF3, 0x40, 0xC0]).unwrap();
        assert_eq!(
            (h.version, h.bitrate_kbps, h.sample_rate),
            (MpegVersion::V2, 32, 22050)
        );
        assert_eq!((h.frame_len, h.samples), (104, 576));
        // MPEG-1 layer I 384 kbit/s 48 kHz: (12 * 384000 / 48000) * 4 = 384.
        let h = parse_header(&[0xFF, 0xFF, 0xC4, 0x00]).unwrap();
        assert_eq!((h.layer, h.frame_len, h.samples), (1, 384, 384));
    }

    #[test]
    fn rejects_invalid_headers() {
        assert_eq!(parse_header(&[0xFF, 0xFB, 0x50]), None); // short
        assert_eq!(parse_header(&[0xFF, 0xFB, 0xF0, 0x00]), None); // bitrate 15
        assert_eq!(parse_header(&[0xFF, 0xFB, 0x0C, 0x00]), None); // free format, rate 3
        assert_eq!(parse_header(&[0xFF, 0xF9, 0x50, 0x00]), None); // layer bits 00 (ADTS)
        assert_eq!(parse_header(&[0xFF, 0xEB, 0x50, 0x00]), None); // version 01 reserved
        assert_eq!(parse_header(b"ID3\x04"), None);
    }
}
