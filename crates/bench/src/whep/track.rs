//! One WebRTC viewer's packets judged as they arrive (sans-IO, simulated time in its tests):
//! RTP sequence and timestamp continuity, media time from each packet's own duration, gaps,
//! loss over a sliding window, and the media rate.
//!
//! A [`PacketTrack`] is a few hundred bytes, touched once per packet ([`PacketTrack::packet`])
//! and once per second ([`PacketTrack::tick`]); nothing in it allocates. Times are µs since the
//! engine's epoch (a packet's time is its datagram's kernel arrival time when known).
//!
//! - **Media time** is each packet's play time from its Opus TOC byte (RFC 6716 §3.1; one Opus
//!   packet per RTP payload, RFC 7587), [`TS_STEP`] (20 ms) when the TOC says nothing, so 20,
//!   40 and 60 ms packets are all judged by their own durations.
//! - **Loss** is counted from the extended sequence numbers as RFC 3550 §A.3 does: expected =
//!   highest sequence number − first + 1, lost = expected − received (late and duplicate
//!   packets count as received). It is judged once a second over the last `window` seconds:
//!   `starved: loss` when more than `max-loss` of the packets expected in the window are
//!   missing (from the viewer's first packet, once the window is full). A jump of more than
//!   [`MAX_DROPOUT`] packets forward or [`MAX_MISORDER`] back (RFC 3550 §A.1) is a restarted
//!   sequence: `corrupt`, and the count starts again from it rather than calling thousands of
//!   packets lost.
//! - **Order**: a sequence number or a timestamp that goes back or repeats (a packet out of
//!   order or twice) is `corrupt`. A timestamp that does not advance by the previous packet's
//!   duration (per sequence step) is counted ([`PacketTrack::ts_jumps`]) but not judged: a
//!   sender may leave silences out (discontinuous transmission).
//! - **Gaps**: a gap between two packets over `max-gap` is `starved: gap` at once, and so is a
//!   silence still running at a tick ([`TickSeen::gap`]) or at the end
//!   ([`PacketTrack::silent_at`]).
//! - **Rate**: the media received over the window below `min-rate` of the wall time is
//!   `starved: rate`, judged as ICY listeners are ([`Meter`]: between arrivals, the first
//!   second of media being the viewer's start, kept out of the steady figures).

use crate::icy::listener::{Meter, MAX_WINDOW};
use crate::profile::slice::Judge;

/// 48 kHz samples assumed for a packet whose TOC byte does not say its duration (20 ms).
pub const TS_STEP: u32 = 960;

/// RTP clock rate of Opus (RFC 7587 §4.1: always 48 kHz).
pub const OPUS_RATE: u64 = 48_000;

/// Largest forward sequence jump taken as loss (packets; RFC 3550 §A.1's `MAX_DROPOUT`):
/// beyond it the sequence restarted.
pub const MAX_DROPOUT: u64 = 3000;

/// Largest backward sequence step taken as reordering (packets; RFC 3550 §A.1's
/// `MAX_MISORDER`): beyond it the sequence restarted.
pub const MAX_MISORDER: u64 = 100;

const RING: usize = MAX_WINDOW + 1;

/// What one packet showed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PacketSeen {
    /// Its play time (µs).
    pub media_us: u64,
    /// Time since the previous packet's arrival (µs); `None` for the first.
    pub gap_us: Option<u64>,
    /// That gap is over `max-gap`: `starved: gap`.
    pub over_gap: bool,
    /// Its sequence number or timestamp went back or repeated, or the sequence restarted:
    /// `corrupt`.
    pub corrupt: bool,
    /// Its timestamp did not advance by the previous packet's duration per sequence step
    /// (counted, not judged).
    pub ts_jump: bool,
}

/// What a tick concluded.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TickSeen {
    /// `starved: rate` now.
    pub rate: bool,
    /// `starved: gap` now: no packet for over `max-gap`.
    pub gap: bool,
    /// `starved: loss` now: over `max-loss` of the window's packets missing.
    pub loss: bool,
    /// The share of packets missing over the window (0 to 1; 0 before the window is full).
    pub loss_share: f64,
    /// Packets found missing since the last tick (packets; RFC 3550 §A.3's cumulative loss,
    /// never taken back).
    pub lost_new: u64,
    /// This second's media is the viewer's start (its first second), not the steady stream.
    pub burst: bool,
}

/// One viewer's judging state (see the module comment).
#[derive(Debug, Clone, Default)]
pub struct PacketTrack {
    meter: Meter,
    /// A packet arrived.
    started: bool,
    /// Arrival of the latest packet (µs since the epoch).
    last_at_us: u64,
    /// Highest extended sequence number so far.
    max_seq: u64,
    /// Highest timestamp so far (48 kHz, extended).
    last_ts: u64,
    /// Play time of the packet with the highest sequence number (48 kHz samples).
    last_samples: u32,
    /// Packets expected (RFC 3550 §A.3: sequence numbers spanned, restarts added).
    expected: u64,
    /// Packets received (duplicates and late ones included).
    received: u64,
    /// Cumulative loss already reported by a tick (packets).
    lost_reported: u64,
    /// `expected` and `received` at each of the last ticks (wrapping).
    ring_expected: [u32; RING],
    ring_received: [u32; RING],
    pos: u8,
    ticks: u16,
    /// Longest gap between two packets (µs).
    longest_gap_us: u64,
    /// Packets out of order or repeated (packets).
    out_of_order: u32,
    /// Packets whose timestamp did not follow from the previous one's duration (packets).
    ts_jumps: u32,
}

/// A packet's play time from its Opus payload (48 kHz samples): its TOC byte's, else
/// [`TS_STEP`].
pub fn packet_samples(payload: &[u8]) -> u32 {
    throng_proto::opus_rtp::opus_packet_samples(payload).unwrap_or(TS_STEP)
}

impl PacketTrack {
    /// Takes a packet with extended sequence number `seq` and extended 48 kHz timestamp `ts`
    /// (str0m's `RtpPacket::seq_no` and `time`), `samples` long (48 kHz; [`packet_samples`]),
    /// that arrived at `at_us`.
    #[inline]
    pub fn packet(
        &mut self,
        seq: u64,
        ts: u64,
        samples: u32,
        at_us: u64,
        judge: &Judge,
    ) -> PacketSeen {
        let media_us = u64::from(samples) * 1_000_000 / OPUS_RATE;
        let at_ms = ms(at_us);
        let mut seen = PacketSeen {
            media_us,
            ..PacketSeen::default()
        };
        self.received += 1;
        if !self.started {
            self.started = true;
            self.meter = Meter::new(at_ms, true);
            self.expected = 1;
            self.max_seq = seq;
            self.last_ts = ts;
            self.last_samples = samples;
        } else {
            let gap = at_us.saturating_sub(self.last_at_us);
            seen.gap_us = Some(gap);
            seen.over_gap = gap > u64::from(judge.max_gap_ms) * 1000;
            self.longest_gap_us = self.longest_gap_us.max(gap);
            if seq > self.max_seq && seq - self.max_seq <= MAX_DROPOUT {
                let step = seq - self.max_seq;
                self.expected += step;
                if ts <= self.last_ts {
                    seen.corrupt = true;
                    self.out_of_order += 1;
                } else if ts - self.last_ts != u64::from(self.last_samples) * step {
                    seen.ts_jump = true;
                    self.ts_jumps += 1;
                }
                self.max_seq = seq;
                self.last_samples = samples;
                self.last_ts = self.last_ts.max(ts);
            } else if seq <= self.max_seq && self.max_seq - seq <= MAX_MISORDER {
                // Late or twice: received, not expected again (RFC 3550 §A.3).
                seen.corrupt = true;
                self.out_of_order += 1;
            } else {
                // A restarted sequence: counted from here.
                seen.corrupt = true;
                self.expected += 1;
                self.max_seq = seq;
                self.last_ts = ts;
                self.last_samples = samples;
            }
        }
        self.last_at_us = at_us;
        self.meter.on_read(at_ms);
        self.meter.on_media(at_ms, media_us);
        seen
    }

    /// Closes the second at `now_us` and judges the viewer (a viewer without a packet yet is
    /// not judged).
    pub fn tick(&mut self, now_us: u64, judge: &Judge) -> TickSeen {
        if !self.started {
            return TickSeen::default();
        }
        let v = self.meter.tick(ms(now_us), judge);
        let mut seen = TickSeen {
            rate: v.rate,
            gap: v.gap,
            burst: v.burst,
            ..TickSeen::default()
        };
        seen.lost_new = self.take_lost();
        let p = self.pos as usize;
        // Slot `p` holds the counts `RING` ticks ago (0 before the first: the viewer's start).
        let window = (judge.window_s as usize).clamp(1, MAX_WINDOW);
        self.ticks = self.ticks.saturating_add(1);
        let now_e = self.expected as u32;
        let now_r = self.received as u32;
        if self.ticks as usize >= window {
            let old = (p + RING - window) % RING;
            let e = now_e.wrapping_sub(self.ring_expected[old]);
            let r = now_r.wrapping_sub(self.ring_received[old]);
            if e > 0 {
                seen.loss_share = f64::from(e.saturating_sub(r)) / f64::from(e);
                seen.loss = seen.loss_share > judge.max_loss;
            }
        }
        self.ring_expected[p] = now_e;
        self.ring_received[p] = now_r;
        self.pos = ((p + 1) % RING) as u8;
        seen
    }

    /// Packets found missing since the last call (RFC 3550 §A.3's cumulative loss, expected
    /// less received; what a late packet makes up for is not taken back) (packets).
    pub fn take_lost(&mut self) -> u64 {
        let lost = self.expected.saturating_sub(self.received);
        let new = lost.saturating_sub(self.lost_reported);
        self.lost_reported = self.lost_reported.max(lost);
        new
    }

    /// Whether the viewer has had no packet for over `max-gap` at `now_us` (or none at all):
    /// silent, at the end of the run.
    pub fn silent_at(&self, now_us: u64, judge: &Judge) -> bool {
        !self.started || now_us.saturating_sub(self.last_at_us) > u64::from(judge.max_gap_ms) * 1000
    }

    /// The longest gap between packets including the one running at `now_us` (µs), for the
    /// end of a session.
    pub fn longest_gap_us(&self, now_us: u64) -> u64 {
        if !self.started {
            return 0;
        }
        self.longest_gap_us
            .max(now_us.saturating_sub(self.last_at_us))
    }

    /// Packets received (packets).
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Packets expected from the sequence numbers (packets).
    pub fn expected(&self) -> u64 {
        self.expected
    }

    /// Packets out of order or repeated (packets).
    pub fn out_of_order(&self) -> u32 {
        self.out_of_order
    }

    /// Packets whose timestamp did not advance by the previous packet's duration per sequence
    /// step (packets).
    pub fn ts_jumps(&self) -> u32 {
        self.ts_jumps
    }

    /// Arrival of the latest packet (µs since the epoch), `None` before the first.
    pub fn last_at_us(&self) -> Option<u64> {
        self.started.then_some(self.last_at_us)
    }
}

/// µs since the epoch as the [`Meter`]'s ms (wrapping after 49 days).
fn ms(us: u64) -> u32 {
    (us / 1000) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The judge of WHEP groups: 80 % over 5 s, 200 ms gaps, 1 % loss.
    const J: Judge = Judge {
        min_rate: 0.8,
        window_s: 5,
        max_gap_ms: 200,
        max_loss: 0.01,
        connect_timeout_ms: 10_000,
    };

    /// Everything a run of packets and ticks concluded.
    #[derive(Debug, Default)]
    struct Outcome {
        rate: bool,
        gap: bool,
        loss: bool,
        corrupt: bool,
        lost: u64,
        media_us: u64,
        packets: u64,
        max_loss: f64,
    }

    /// Feeds `packets` (sequence, timestamp, samples, arrival µs) in order, ticking at every
    /// whole second before each packet and up to `end_us`.
    fn run(packets: &[(u64, u64, u32, u64)], end_us: u64) -> (PacketTrack, Outcome) {
        let mut t = PacketTrack::default();
        let mut o = Outcome::default();
        let mut next_tick = 1_000_000u64;
        let mut tick = |t: &mut PacketTrack, o: &mut Outcome, upto: u64| {
            while next_tick <= upto {
                let v = t.tick(next_tick, &J);
                o.rate |= v.rate;
                o.gap |= v.gap;
                o.loss |= v.loss;
                o.lost += v.lost_new;
                o.max_loss = o.max_loss.max(v.loss_share);
                next_tick += 1_000_000;
            }
        };
        for &(seq, ts, samples, at) in packets {
            tick(&mut t, &mut o, at);
            let s = t.packet(seq, ts, samples, at, &J);
            o.gap |= s.over_gap;
            o.corrupt |= s.corrupt;
            o.media_us += s.media_us;
            o.packets += 1;
        }
        tick(&mut t, &mut o, end_us);
        (t, o)
    }

    /// `secs` seconds of `ms`-ms packets from sequence 1000, timestamp 5000, the first
    /// arriving at 300 ms, each on time.
    fn steady(ms: u64, secs: u64) -> Vec<(u64, u64, u32, u64)> {
        let samples = (ms * 48) as u32;
        (0..secs * 1000 / ms)
            .map(|i| {
                (
                    1000 + i,
                    5000 + i * ms * 48,
                    samples,
                    300_000 + i * ms * 1000,
                )
            })
            .collect()
    }

    #[test]
    fn packets_of_20_40_and_60_ms_are_judged_by_their_own_durations() {
        for ms in [20u64, 40, 60] {
            let p = steady(ms, 12);
            let (t, o) = run(&p, 12_300_000);
            assert!(!o.rate && !o.gap && !o.loss && !o.corrupt, "{ms} ms: {o:?}");
            assert_eq!(o.media_us, 12_000_000, "{ms} ms");
            assert_eq!(
                (t.expected(), t.received()),
                (p.len() as u64, p.len() as u64)
            );
            assert_eq!(t.ts_jumps(), 0, "{ms} ms");
            // The same packets taken as 20 ms each (a wrong duration): a third of real time
            // for 60 ms ones, starved by rate.
            if ms == 60 {
                let wrong: Vec<_> = p.iter().map(|&(s, ts, _, at)| (s, ts, 960, at)).collect();
                let (_, o) = run(&wrong, 12_300_000);
                assert!(o.rate, "{o:?}");
                assert!(!o.loss && !o.corrupt, "{o:?}");
            }
        }
        // The TOC byte says the duration: 60 ms SILK (config 3) and CELT 20 ms (config 31).
        assert_eq!(packet_samples(&[3 << 3, 0]), 2880);
        assert_eq!(packet_samples(&[31 << 3, 0]), 960);
        assert_eq!(packet_samples(&[]), TS_STEP);
    }

    #[test]
    fn sequence_gaps_are_lost_packets_and_over_one_percent_is_loss() {
        for ms in [20u64, 60] {
            // One packet in 20 missing: 5 % loss.
            let p: Vec<_> = steady(ms, 12)
                .into_iter()
                .enumerate()
                .filter(|(i, _)| i % 20 != 7)
                .map(|(_, p)| p)
                .collect();
            let (mut t, o) = run(&p, 12_300_000);
            assert!(o.loss, "{ms} ms: {o:?}");
            assert!((o.max_loss - 0.05).abs() < 0.02, "{ms} ms: {o:?}");
            assert!(!o.corrupt && !o.gap, "{ms} ms: {o:?}");
            // What the ticks reported and what is left for the end: every missing one, once.
            let lost = o.lost + t.take_lost();
            assert_eq!(lost, t.expected() - t.received(), "{ms} ms");
            assert_eq!(lost, if ms == 20 { 30 } else { 10 }, "{ms} ms");
            assert_eq!(t.take_lost(), 0);
        }
        // One packet lost in 12 s of 20 ms packets: 1 in 250 per window, under 1 %.
        let p: Vec<_> = steady(20, 12).into_iter().filter(|x| x.0 != 1300).collect();
        let (_, o) = run(&p, 12_300_000);
        assert_eq!(o.lost, 1);
        assert!(!o.loss && !o.corrupt, "{o:?}");
    }

    #[test]
    fn a_reordered_or_repeated_packet_is_corrupt() {
        let mut p = steady(20, 3);
        p.swap(40, 41);
        // Arrival times stay in order (the swap is in the sequence and timestamps only).
        let (a40, a41) = (p[40].3, p[41].3);
        p[40].3 = a41;
        p[41].3 = a40;
        let (t, o) = run(&p, 3_300_000);
        assert!(o.corrupt, "{o:?}");
        assert_eq!(t.out_of_order(), 1);
        // Counted as received: no loss in the end (RFC 3550 §A.3).
        assert_eq!(t.expected(), t.received());
        // A repeated timestamp with the next sequence number is corrupt too.
        let mut q = steady(20, 2);
        q[10].1 = q[9].1;
        let (_, o) = run(&q, 2_300_000);
        assert!(o.corrupt, "{o:?}");
        // A restarted sequence (a jump of 40,000) is corrupt, and no packet counts as lost.
        let mut r = steady(20, 4);
        for x in &mut r[100..] {
            x.0 += 40_000;
        }
        let (t, o) = run(&r, 4_300_000);
        assert!(o.corrupt && !o.loss, "{o:?}");
        assert_eq!(o.lost, 0);
        assert_eq!(t.expected(), t.received());
    }

    #[test]
    fn a_gap_over_200_ms_is_a_gap() {
        // 20 ms packets, the 100th 250 ms late and the rest after it.
        let p: Vec<_> = steady(20, 6)
            .into_iter()
            .enumerate()
            .map(|(i, (s, ts, n, at))| (s, ts, n, at + if i >= 100 { 250_000 } else { 0 }))
            .collect();
        let (t, o) = run(&p, 6_600_000);
        assert!(o.gap && !o.loss && !o.corrupt, "{o:?}");
        assert_eq!(t.longest_gap_us(p.last().unwrap().3), 270_000);
        // A gap of 180 ms is within a WebRTC player's buffer.
        let p: Vec<_> = steady(20, 6)
            .into_iter()
            .enumerate()
            .map(|(i, (s, ts, n, at))| (s, ts, n, at + if i >= 100 { 160_000 } else { 0 }))
            .collect();
        let (_, o) = run(&p, 6_500_000);
        assert!(!o.gap, "{o:?}");
    }

    #[test]
    fn a_viewer_that_goes_silent_is_starved_by_gap_then_rate() {
        // 3 s of packets, then nothing until 10 s.
        let p = steady(20, 3);
        let (t, o) = run(&p, 10_000_000);
        assert!(o.gap && o.rate, "{o:?}");
        assert!(!o.loss, "silence is not loss: no later sequence number");
        assert!(t.silent_at(10_000_000, &J));
        assert!(!t.silent_at(p.last().unwrap().3 + 150_000, &J));
        assert!(PacketTrack::default().silent_at(0, &J), "no packet at all");
    }

    #[test]
    fn media_below_the_minimum_rate_is_starved_by_rate() {
        // 20 ms packets carrying 20 ms each, but only 3 of every 4 sent (no sequence gap: a
        // sender that falls behind): 75 % of real time, the gaps 40 ms.
        let p: Vec<_> = (0..600u64)
            .filter(|i| i % 4 != 3)
            .enumerate()
            .map(|(k, i)| {
                (
                    1000 + k as u64,
                    5000 + k as u64 * 960,
                    960,
                    300_000 + i * 20_000,
                )
            })
            .collect();
        let (t, o) = run(&p, 12_300_000);
        assert!(o.rate && !o.gap && !o.loss, "{o:?}");
        assert_eq!(t.ts_jumps(), 0);
        // At 90 % (one in ten held back) the rate holds.
        let p: Vec<_> = (0..600u64)
            .filter(|i| i % 10 != 9)
            .enumerate()
            .map(|(k, i)| {
                (
                    1000 + k as u64,
                    5000 + k as u64 * 960,
                    960,
                    300_000 + i * 20_000,
                )
            })
            .collect();
        let (_, o) = run(&p, 12_300_000);
        assert!(!o.rate, "{o:?}");
    }

    #[test]
    fn a_timestamp_jump_is_counted_not_judged() {
        let mut p = steady(20, 3);
        for x in &mut p[50..] {
            x.1 += 48_000;
        }
        let (t, o) = run(&p, 3_300_000);
        assert_eq!(t.ts_jumps(), 1);
        assert!(!o.corrupt && !o.loss && !o.gap, "{o:?}");
    }
}
