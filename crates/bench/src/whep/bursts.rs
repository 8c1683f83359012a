//! The tone-burst latency probe of MP3 mounts (`--latency-bursts FILE.mp3`), sans-IO: when the
//! source writes each burst, and which burst a viewer's onset belongs to.
//!
//! The burst file holds a tone burst at the start of every whole second of its media (the
//! file `scripts/bench-whep.sh` makes with ffmpeg: 200 ms of 1 kHz tone, silence to the next
//! second). The bench's source ([`crate::whep::probe::BurstSource`]) writes its MP3 frames in
//! real time from a start time `W0`, each frame no earlier than `W0` plus the play time of the
//! frames before it, looping the file. So the frame holding second `k` of the file's loop `l`
//! is due at `W0 + l × period + offset[k]` ([`burst_offsets`]), and that is a burst's write time
//! ([`BurstSchedule`]); the source runs in the parent process and hands the schedule to the
//! worker processes in their spec, and measures how late its writes were. A viewer's onset
//! ([`crate::whep::onset`]) is matched to the latest burst due at or before its arrival
//! ([`BurstSchedule::latest_at_or_before`]): right while the delay stays under the one second
//! between bursts. The delay is an upper bound: the frame holding a whole second is written
//! before the tone inside it begins, and the MP3 encoder's own delay (LAME: 1,105 samples,
//! about 25 ms at 44.1 kHz) is counted too.

use serde::{Deserialize, Serialize};

use crate::whep::onset::OnsetDetector;

/// Media time between two bursts of the burst file (µs).
pub const BURST_PERIOD_US: u64 = 1_000_000;

/// Where the bursts of a file start: for each whole second `k` of its media (from 0 while
/// under its length), the start of the frame that holds it (µs from the file's start), given
/// every frame's duration (µs) in order; and the file's length (µs).
pub fn burst_offsets(durations_us: &[u64]) -> (Vec<u64>, u64) {
    let mut offsets = Vec::new();
    let mut start = 0u64;
    for &d in durations_us {
        let end = start + d;
        // Every whole second inside [start, end).
        let mut k = start.div_ceil(BURST_PERIOD_US) * BURST_PERIOD_US;
        while k < end {
            offsets.push(start);
            k += BURST_PERIOD_US;
        }
        start = end;
    }
    (offsets, start)
}

/// When the burst source writes its bursts: the file's burst offsets repeated every `period_us`
/// from `start_unix_us`. Sent to every worker in its spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BurstSchedule {
    /// When the source wrote the file's first frame (µs since the Unix epoch).
    pub start_unix_us: u64,
    /// The file's length, the period of the loop (µs; more than 0).
    pub period_us: u64,
    /// Each burst's offset in the file (µs, ascending, each under `period_us`).
    pub offsets_us: Vec<u64>,
}

impl BurstSchedule {
    /// The write time (µs since the Unix epoch) of the latest burst due at or before `t_us`;
    /// `None` before the first.
    pub fn latest_at_or_before(&self, t_us: u64) -> Option<u64> {
        let elapsed = t_us.checked_sub(self.start_unix_us)?;
        let period = self.period_us.max(1);
        let (mut lap, within) = (elapsed / period, elapsed % period);
        let i = self.offsets_us.partition_point(|&o| o <= within);
        let offset = if i > 0 {
            self.offsets_us[i - 1]
        } else {
            // Before this lap's first burst: the last of the lap before.
            lap = lap.checked_sub(1)?;
            *self.offsets_us.last()?
        };
        Some(self.start_unix_us + lap * period + offset)
    }
}

/// One viewer's burst latency: its onset detector, the schedule, and the time it asked for the
/// stream (bursts written before then are buffered audio, not delivery, and are not counted).
#[derive(Debug, Clone)]
pub struct BurstMeter {
    detector: OnsetDetector<u64>,
    from_us: u64,
}

impl BurstMeter {
    /// A meter for a viewer that asked for the stream at `from_us` (µs since the Unix epoch).
    pub fn new(from_us: u64) -> BurstMeter {
        BurstMeter {
            detector: OnsetDetector::new(),
            from_us,
        }
    }

    /// Takes a packet of `size` bytes that arrived at `arrival_us` (µs since the Unix epoch);
    /// when it confirms an onset, returns the onset's arrival and the write time of its burst
    /// (their difference is the latency the `m2e` histogram records).
    pub fn packet(
        &mut self,
        schedule: &BurstSchedule,
        size: usize,
        arrival_us: u64,
    ) -> Option<(u64, u64)> {
        let onset = self.detector.packet(size, arrival_us)?;
        let burst = schedule.latest_at_or_before(onset)?;
        (burst >= self.from_us).then_some((onset, burst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts_start_at_the_frames_holding_each_whole_second() {
        // MP3 frames of 26,122 µs (1,152 samples at 44.1 kHz), 2.5 s of them.
        let d = vec![26_122u64; 96];
        let (offsets, len) = burst_offsets(&d);
        assert_eq!(len, 96 * 26_122);
        // 0 s in frame 0; 1 s in frame 38 (992,636 to 1,018,758); 2 s in frame 76.
        assert_eq!(offsets, vec![0, 38 * 26_122, 76 * 26_122]);
        // A frame ending exactly at a second does not hold it; the next one does.
        assert_eq!(
            burst_offsets(&[500_000, 500_000, 500_000]).0,
            vec![0, 1_000_000]
        );
        assert_eq!(burst_offsets(&[]), (vec![], 0));
    }

    fn schedule() -> BurstSchedule {
        BurstSchedule {
            start_unix_us: 10_000_000,
            period_us: 2_500_000,
            offsets_us: vec![0, 990_000, 1_980_000],
        }
    }

    #[test]
    fn an_arrival_matches_the_latest_burst_written_before_it_across_loops() {
        let s = schedule();
        assert_eq!(s.latest_at_or_before(9_999_999), None);
        assert_eq!(s.latest_at_or_before(10_000_000), Some(10_000_000));
        assert_eq!(s.latest_at_or_before(10_150_000), Some(10_000_000));
        assert_eq!(s.latest_at_or_before(11_100_000), Some(10_990_000));
        assert_eq!(s.latest_at_or_before(12_400_000), Some(11_980_000));
        // The second loop starts at 12.5 s.
        assert_eq!(s.latest_at_or_before(12_500_000), Some(12_500_000));
        assert_eq!(s.latest_at_or_before(13_600_000), Some(13_490_000));
        // Loop 7's bursts.
        assert_eq!(
            s.latest_at_or_before(10_000_000 + 7 * 2_500_000 + 2_000_000),
            Some(10_000_000 + 7 * 2_500_000 + 1_980_000)
        );
        // A schedule whose first burst is not at 0: before it, the last of the lap before.
        let late = BurstSchedule {
            offsets_us: vec![100_000, 1_100_000],
            ..s
        };
        assert_eq!(late.latest_at_or_before(10_050_000), None);
        assert_eq!(late.latest_at_or_before(12_550_000), Some(11_100_000));
    }

    #[test]
    fn a_meter_turns_onsets_into_delays_and_skips_bursts_from_before_the_viewer() {
        let s = BurstSchedule {
            start_unix_us: 0,
            period_us: 10_000_000,
            offsets_us: (0..10).map(|k| k * 1_000_000).collect(),
        };
        // The viewer asked at 1.5 s; packets of 20 ms, each arriving 120 ms after its media
        // time; tone in the first 200 ms of each second.
        let mut m = BurstMeter::new(1_500_000);
        let mut got = Vec::new();
        for i in 0..250u64 {
            let media = 1_300_000 + i * 20_000;
            let size = if media % 1_000_000 < 200_000 { 240 } else { 3 };
            if let Some(pair) = m.packet(&s, size, media + 120_000) {
                got.push(pair);
            }
        }
        assert_eq!(
            got,
            vec![
                (2_120_000, 2_000_000),
                (3_120_000, 3_000_000),
                (4_120_000, 4_000_000),
                (5_120_000, 5_000_000),
                (6_120_000, 6_000_000)
            ]
        );
        // An onset of a burst written before the viewer asked is not counted.
        let mut early = BurstMeter::new(2_050_000);
        let mut n = 0;
        for i in 0..60u64 {
            let media = 1_500_000 + i * 20_000;
            let size = if media % 1_000_000 < 200_000 { 240 } else { 3 };
            n += usize::from(early.packet(&s, size, media + 120_000).is_some());
        }
        assert_eq!(n, 0, "the 2 s burst was written before the viewer asked");
    }
}
