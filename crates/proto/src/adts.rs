//! ADTS (Audio Data Transport Stream) headers for AAC, per ISO/IEC 13818-7 and 14496-3.
//!
//! A header is 7 bytes (9 with CRC): a 12-bit sync `0xFFF`, layer `00`, profile, sampling
//! frequency index, channel configuration, a 13-bit frame length that includes the header, and
//! the number of raw data blocks minus one (each block holds 1024 samples per channel).

/// A decoded ADTS header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdtsHeader {
    /// Sample rate in Hz.
    pub sample_rate: u32,
    /// Channel configuration (0 means defined in-band).
    pub channels: u8,
    /// AAC audio object type minus one (profile field).
    pub profile: u8,
    /// Whole frame length in bytes, header included.
    pub frame_len: usize,
    /// PCM samples per channel in the frame (1024 per raw data block).
    pub samples: u32,
}

impl AdtsHeader {
    /// Frame duration in microseconds.
    pub fn duration_us(&self) -> u64 {
        self.samples as u64 * 1_000_000 / self.sample_rate as u64
    }

    /// Whether `other` can follow this frame in the same stream (same rate, channels, profile).
    pub fn same_stream(&self, other: &AdtsHeader) -> bool {
        self.sample_rate == other.sample_rate
            && self.channels == other.channels
            && self.profile == other.profile
    }
}

const SAMPLE_RATES: [u32; 13] = [
    96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350,
];

/// Parses the header at the start of `b`; `None` if shorter than 7 bytes or not a valid header.
pub fn parse_header(b: &[u8]) -> Option<AdtsHeader> {
    if b.len() < 7 || b[0] != 0xFF || b[1] & 0xF6 != 0xF0 {
        return None;
    }
    let protection_absent = b[1] & 1 == 1;
    let profile = b[2] >> 6;
    let sf_idx = ((b[2] >> 2) & 0x0F) as usize;
    let sample_rate = *SAMPLE_RATES.get(sf_idx)?;
    let channels = ((b[2] & 1) << 2) | (b[3] >> 6);
    let frame_len = (((b[3] & 3) as usize) << 11) | ((b[4] as usize) << 3) | (b[5] as usize >> 5);
    let header_len = if protection_absent { 7 } else { 9 };
    if frame_len <= header_len {
        return None;
    }
    let blocks = (b[6] & 3) as u32 + 1;
    Some(AdtsHeader {
        sample_rate,
        channels,
        profile,
        frame_len,
        samples: blocks * 1024,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(len: usize, sf_idx: u8, channels: u8) -> [u8; 7] {
        [
            0xFF,
            0xF1,
            (1 << 6) | (sf_idx << 2) | (channels >> 2),
            ((channels & 3) << 6) | ((len >> 11) as u8 & 3),
            (len >> 3) as u8,
            ((len as u8 & 7) << 5) | 0x1F,
            0xFC,
        ]
    }

    #[test]
    fn parses_lc_44k_stereo() {
        let h = parse_header(&header(371, 4, 2)).unwrap();
        assert_eq!((h.sample_rate, h.channels, h.profile), (44100, 2, 1));
        assert_eq!((h.frame_len, h.samples), (371, 1024));
        assert_eq!(h.duration_us(), 23219);
    }

    #[test]
    fn rejects_bad_headers() {
        assert_eq!(parse_header(&header(5, 4, 2)), None); // shorter than its header
        assert_eq!(parse_header(&header(300, 13, 2)), None); // reserved rate index
        assert_eq!(parse_header(&[0xFF, 0xFB, 0x50, 0xC4, 0, 0, 0]), None); // MP3 header
        assert_eq!(parse_header(&[0xFF, 0xF1, 0x50]), None);
    }
}
