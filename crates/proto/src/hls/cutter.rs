//! Where a packed-audio segment ends: at the first frame boundary at or after the target
//! duration, counted in samples from the frames' own headers (MP3: 384, 576 or 1152 samples
//! per frame; ADTS: 1024 per raw data block), so segment lengths and timestamps never drift
//! from the audio. RFC 8216 section 4.3.3.1: each segment's EXTINF, rounded to the nearest
//! integer, must not exceed EXT-X-TARGETDURATION, so the playlist announces
//! [`target_duration_secs`] of the longest segment.

use crate::format::Format;
use crate::{adts, mp3};

/// Samples per channel and sample rate (Hz) of the MP3 or ADTS frame at the start of `frame`;
/// `None` for other formats or when `frame` does not start with a valid header.
pub fn frame_samples(format: Format, frame: &[u8]) -> Option<(u32, u32)> {
    match format {
        Format::Mp3 => mp3::parse_header(frame).map(|h| (h.samples, h.sample_rate)),
        Format::Aac => adts::parse_header(frame).map(|h| (h.samples, h.sample_rate)),
        _ => None,
    }
}

/// The segment file extension of a packed-audio format (`mp3`, `aac`); `None` for formats HLS
/// packed audio cannot carry (RFC 8216 section 3.4 lists AAC/ADTS, MP3, AC-3 and E-AC-3).
pub fn segment_extension(format: Format) -> Option<&'static str> {
    match format {
        Format::Mp3 => Some("mp3"),
        Format::Aac => Some("aac"),
        _ => None,
    }
}

/// The Content-Type of a segment with extension `ext` (RFC 8216 section 3.4: `audio/aac` for
/// ADTS, `audio/mpeg` for MP3; `audio/mp4` for fMP4 segments and initialization sections, RFC
/// 4337).
pub fn segment_content_type(ext: &str) -> &'static str {
    match ext {
        "aac" => "audio/aac",
        "m4s" | "mp4" => "audio/mp4",
        _ => "audio/mpeg",
    }
}

/// The length of a closed segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SegmentLength {
    /// Frames in the segment.
    pub frames: u32,
    /// Samples per channel in the segment (at the rate of its frames).
    pub samples: u64,
    /// Play time in nanoseconds (sum of each frame's samples / sample rate).
    pub duration_ns: u64,
}

impl SegmentLength {
    /// Play time in seconds.
    pub fn secs(&self) -> f64 {
        self.duration_ns as f64 / 1e9
    }
}

/// Decides segment cuts frame by frame.
#[derive(Debug, Clone)]
pub struct Cutter {
    target_ns: u64,
    current: SegmentLength,
}

impl Cutter {
    /// A cutter for segments of `target_ms` milliseconds (at least 1 ms).
    pub fn new(target_ms: u64) -> Cutter {
        Cutter {
            target_ns: target_ms.max(1) * 1_000_000,
            current: SegmentLength::default(),
        }
    }

    /// Adds a frame of `samples` samples at `sample_rate` Hz to the open segment; returns true
    /// when the segment has reached the target and should be closed after this frame.
    pub fn push(&mut self, samples: u32, sample_rate: u32) -> bool {
        self.current.frames += 1;
        self.current.samples += u64::from(samples);
        if sample_rate > 0 {
            self.current.duration_ns += u64::from(samples) * 1_000_000_000 / u64::from(sample_rate);
        }
        self.current.duration_ns >= self.target_ns
    }

    /// Changes the target to `target_ms` milliseconds (at least 1 ms) for the open segment and
    /// the next ones, keeping what the open segment holds (a configuration reload while a
    /// segment is open).
    pub fn set_target(&mut self, target_ms: u64) {
        self.target_ns = target_ms.max(1) * 1_000_000;
    }

    /// The open segment so far.
    pub fn current(&self) -> SegmentLength {
        self.current
    }

    /// Closes the open segment: returns its length and starts a new one.
    pub fn take(&mut self) -> SegmentLength {
        std::mem::take(&mut self.current)
    }
}

/// `EXT-X-TARGETDURATION` in whole seconds for a configured target of `target_ms` and segments
/// of the given lengths: the larger of the target rounded up and each segment rounded to the
/// nearest integer (RFC 8216 section 4.3.3.1), at least 1.
pub fn target_duration_secs(target_ms: u64, segments_ns: impl IntoIterator<Item = u64>) -> u64 {
    let longest = segments_ns
        .into_iter()
        .map(|ns| (ns + 500_000_000) / 1_000_000_000)
        .max()
        .unwrap_or(0);
    target_ms.div_ceil(1000).max(longest).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_target_keeps_the_open_segment() {
        let mut c = Cutter::new(4000);
        for _ in 0..10 {
            assert!(!c.push(1152, 44_100));
        }
        c.set_target(200);
        assert_eq!(c.current().frames, 10);
        // 10 frames are 261 ms: over the new target at the next frame.
        assert!(c.push(1152, 44_100));
        assert_eq!(c.take().frames, 11);
    }

    #[test]
    fn mp3_cuts_at_first_boundary_after_target() {
        // 1152 samples at 44.1 kHz = 26.122 ms; 4 s needs 154 frames (153 give 3.9967 s)
        let mut c = Cutter::new(4000);
        let mut n = 0;
        while !c.push(1152, 44_100) {
            n += 1;
        }
        assert_eq!(n + 1, 154);
        let s = c.take();
        assert_eq!(s.frames, 154);
        assert_eq!(s.samples, 154 * 1152);
        assert!((s.secs() - 4.0228).abs() < 0.0001, "{}", s.secs());
        assert_eq!(c.current(), SegmentLength::default());
    }

    #[test]
    fn aac_frames_are_1024_samples() {
        // 48 kHz: 21.333 ms per frame; 2 s = 94 frames (93.75 rounded up)
        let mut c = Cutter::new(2000);
        let frames = (1..).find(|_| c.push(1024, 48_000)).unwrap();
        assert_eq!(frames, 94);
        assert_eq!(format!("{:.3}", c.take().secs()), "2.005");
    }

    #[test]
    fn target_duration_covers_rounded_segments() {
        assert_eq!(
            target_duration_secs(4000, [4_022_800_000, 3_990_000_000]),
            4
        );
        assert_eq!(target_duration_secs(4000, [4_600_000_000]), 5);
        assert_eq!(target_duration_secs(2500, []), 3);
        assert_eq!(target_duration_secs(0, []), 1);
    }

    #[test]
    fn frame_samples_from_headers() {
        // MPEG-1 layer III, 128 kbit/s, 44.1 kHz
        let mp3 = [0xFF, 0xFB, 0x90, 0x64];
        assert_eq!(frame_samples(Format::Mp3, &mp3), Some((1152, 44_100)));
        // ADTS AAC-LC, 44.1 kHz (index 4), stereo, frame length 0x100, one raw block
        let adts = [0xFF, 0xF1, 0x50, 0x80, 0x20, 0x1F, 0xFC];
        assert_eq!(frame_samples(Format::Aac, &adts), Some((1024, 44_100)));
        assert_eq!(frame_samples(Format::Ogg, b"OggS"), None);
        assert_eq!(segment_extension(Format::Aac), Some("aac"));
        assert_eq!(segment_extension(Format::Ogg), None);
        assert_eq!(segment_content_type("aac"), "audio/aac");
    }
}
