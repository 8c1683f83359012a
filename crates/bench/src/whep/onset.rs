//! Tone-burst onsets from Opus packet sizes (sans-IO), for the MP3 latency probe
//! (`--latency-bursts`, [`crate::whep::bursts`]): the server transcodes an MP3 mount to Opus for
//! its WebRTC viewers, so no stamp survives, but the burst file alternates tone and silence and
//! a VBR Opus encoder (libopus, RFC 6716) spends few bytes on silence and many on a tone. A
//! viewer therefore hears a burst begin as a large packet after a run of small ones, without
//! decoding anything.
//!
//! Nothing here assumes a frame duration or a byte count: the detector keeps a running floor of
//! the quiet packets' sizes (following them down fast and up slowly) and calls a packet loud
//! when it is [`LOUD_RATIO`] times that floor or more. An onset is the first loud packet after
//! at least [`MIN_QUIET`] quiet ones, confirmed by the packet after it being loud too (a burst
//! lasts several packets whatever their duration; a lone large packet in the silence is not
//! one). Packets of 20 to 80 ms scale both levels alike, so the same rule holds.

/// A packet at least this many times the quiet floor is loud.
pub const LOUD_RATIO: u64 = 4;

/// Quiet packets that must come before a loud one for it to start a burst. Two, not more:
/// libopus keeps spending many bytes for about 600 ms after each of the probe's 200 ms tones,
/// so with 80 ms packets only two or three quiet ones precede the next burst (measured with
/// ffmpeg's libopus: the test `a_real_80_ms_stream_has_an_onset_per_burst`).
pub const MIN_QUIET: u32 = 2;

/// Fixed-point scale of the floor (1/16 byte), so small packets still move it.
const SCALE: u64 = 16;

/// The onset detector of one viewer's packets. `T` is the packet's arrival time (any copyable
/// clock reading); [`OnsetDetector::packet`] hands back the arrival of each burst's first
/// packet once the packet after it confirms the burst.
#[derive(Debug, Clone, Default)]
pub struct OnsetDetector<T> {
    /// Running floor of the quiet packets' sizes (1/16 bytes); `None` before the first packet.
    floor: Option<u64>,
    /// Quiet packets in a row so far.
    quiet: u32,
    /// A loud packet after a quiet run, waiting for the next packet to confirm it: its arrival.
    pending: Option<T>,
}

impl<T: Copy> OnsetDetector<T> {
    /// A detector that has seen nothing yet.
    pub fn new() -> OnsetDetector<T> {
        OnsetDetector {
            floor: None,
            quiet: 0,
            pending: None,
        }
    }

    /// The quiet floor so far (bytes), `None` before the first packet.
    pub fn floor_bytes(&self) -> Option<f64> {
        self.floor.map(|f| f as f64 / SCALE as f64)
    }

    /// Takes the next packet of `size` bytes (an Opus payload) that arrived at `at`; returns
    /// the arrival of a burst's first packet when this packet confirms it (so one packet late).
    pub fn packet(&mut self, size: usize, at: T) -> Option<T> {
        let s = (size as u64).max(1) * SCALE;
        let floor = *self.floor.get_or_insert(s);
        let loud = s >= floor.saturating_mul(LOUD_RATIO);
        if !loud {
            // Down fast (halfway at once), up slowly (1/16 of the way): the floor sits at the
            // silence's packets even when the first packets were a tone.
            let f = if s < floor {
                (floor + s) / 2
            } else {
                floor + (s - floor) / 16
            };
            self.floor = Some(f.max(SCALE));
            self.quiet = self.quiet.saturating_add(1);
            self.pending = None;
            return None;
        }
        let onset = self.pending.take();
        if onset.is_none() && self.quiet >= MIN_QUIET {
            self.pending = Some(at);
        }
        self.quiet = 0;
        onset
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packet sizes of `secs` seconds of the burst pattern with `frame_ms` packets: 200 ms of
    /// tone (`tone` bytes per 20 ms) at the start of each second, silence (`quiet` bytes per
    /// packet, a little noise on it) between; with each packet's start time (ms).
    fn pattern(frame_ms: u64, secs: u64, tone: usize, quiet: usize) -> Vec<(usize, u64)> {
        let scale = (frame_ms / 20) as usize;
        (0..secs * 1000 / frame_ms)
            .map(|i| {
                let t = i * frame_ms;
                let size = if t % 1000 < 200 {
                    tone * scale + (i as usize % 7)
                } else {
                    quiet + (i as usize % 3)
                };
                (size, t)
            })
            .collect()
    }

    fn onsets(packets: &[(usize, u64)]) -> Vec<u64> {
        let mut d = OnsetDetector::new();
        packets
            .iter()
            .filter_map(|&(s, t)| d.packet(s, t))
            .collect()
    }

    #[test]
    fn each_burst_is_one_onset_at_its_first_packet_whatever_the_frame_duration() {
        for frame_ms in [20, 40, 60, 80] {
            let got = onsets(&pattern(frame_ms, 6, 240, 3));
            // The first packet starting in each second's tone (60 ms: 960 holds silence then,
            // 1,020 is the first of the tone). The first burst opens the stream: no quiet run
            // before it, so not an onset.
            let want: Vec<u64> = (1..6)
                .map(|k: u64| (k * 1000).div_ceil(frame_ms) * frame_ms)
                .collect();
            assert_eq!(got, want, "{frame_ms} ms frames");
        }
    }

    #[test]
    fn a_real_80_ms_stream_has_an_onset_per_burst() {
        // Packet sizes and starts (ms) of the probe's burst MP3 encoded by ffmpeg's libopus at
        // 96 kbit/s with 80 ms frames (`-frame_duration 80`): after each 200 ms tone the
        // encoder stays loud for about 600 ms, then two or three 10-byte packets come before
        // the next tone.
        let sizes = [
            1398, 1729, 1873, 1719, 1682, 1548, 1389, 1300, 959, 10, 10, 966, 1286, 1390, 1671,
            1704, 1561, 1475, 1316, 1187, 1140, 288, 10, 10, 1589, 1382, 1524, 1869, 1702, 1658,
            1521, 1364, 1285, 950, 10, 10, 977, 1284,
        ];
        let packets: Vec<(usize, u64)> = sizes
            .iter()
            .zip(0u64..)
            .map(|(&s, i)| (s, 73 + 80 * i))
            .collect();
        // The packets holding the tone's start at 2 s and 3 s: 1,993 and 2,953 ms. The one at
        // 1 s (953 ms) is not found: the stream opened loud, and two quiet packets bring the
        // floor only from 1,398 to 357 bytes, under which 966 is not loud yet (a viewer's
        // first second, as when it joins mid-burst).
        assert_eq!(onsets(&packets), vec![1993, 2953]);
    }

    #[test]
    fn a_quieter_tone_and_noisier_silence_still_separate() {
        // 80-byte tone packets (32 kbit/s), silence packets of 10 to 12 bytes.
        let got = onsets(&pattern(20, 4, 80, 10));
        assert_eq!(got, vec![1000, 2000, 3000]);
    }

    #[test]
    fn a_stream_joined_mid_burst_finds_the_floor_and_the_next_onsets() {
        let p = pattern(20, 5, 240, 3);
        // Joined 100 ms into the first burst: tone first, the floor starts high.
        let got = onsets(&p[5..]);
        assert_eq!(got, vec![1000, 2000, 3000, 4000]);
    }

    #[test]
    fn a_lone_large_packet_in_the_silence_is_not_a_burst() {
        let mut p = pattern(20, 3, 240, 3);
        p[30].0 = 200; // 600 ms: one blip
        p[40].0 = 200; // 800 ms: another, followed by silence
        assert_eq!(onsets(&p), vec![1000, 2000]);
    }

    #[test]
    fn a_burst_after_too_short_a_silence_is_not_an_onset() {
        // Tone, one quiet packet, tone again: the second loud run is no new burst.
        let sizes = [3, 3, 3, 3, 240, 240, 240, 3, 240, 240, 3, 3, 240, 240];
        let packets: Vec<(usize, u64)> = sizes.iter().zip(0u64..).map(|(&s, t)| (s, t)).collect();
        assert_eq!(onsets(&packets), vec![4, 12]);
    }

    #[test]
    fn the_floor_follows_the_silence_down_fast_and_up_slowly() {
        let mut d = OnsetDetector::new();
        d.packet(240, 0u64);
        for t in 1..10 {
            d.packet(3, t);
        }
        let low = d.floor_bytes().unwrap();
        assert!(low < 4.0, "{low}");
        // Slightly louder silence raises it only a little per packet.
        d.packet(8, 10);
        let up = d.floor_bytes().unwrap();
        assert!(up > low && up < low + 1.0, "{low} -> {up}");
        // Empty packets never make it zero (a ratio of zero would make everything loud).
        for t in 11..40 {
            d.packet(0, t);
        }
        assert!(d.floor_bytes().unwrap() >= 1.0);
    }
}
