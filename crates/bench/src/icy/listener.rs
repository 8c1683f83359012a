//! Per-listener judging: media time per one-second tick, the longest gap, and the starvation
//! rules (sans-IO, on simulated time in its tests).
//!
//! A [`Meter`] is about 150 bytes, touched once per read and once per second. At a tick a
//! listener is `starved: rate` when the media time it received over the last `window` seconds
//! is below `min_rate` of the wall time, and `starved: gap` when it has not received anything
//! for longer than `max_gap` (a player's buffer).
//!
//! The rate is measured between arrivals of media, not between ticks: each tick keeps a
//! snapshot of (media received up to the last arrival, time of that arrival), and the rate over
//! the window is the media between the snapshot `window` ticks ago and the latest one, divided
//! by the time between those two arrivals. A server that writes once per second would
//! otherwise put 4, 5 or 6 writes in a 5 s tick window depending on phase jitter, and 4 writes
//! is exactly the 80 % threshold. The first snapshot is taken at the first tick after the
//! response head, so the connect burst is not counted and a rate verdict needs `window + 1`
//! ticks of streaming.
//!
//! The same burst is kept out of the steady media rate of the reports: the media of a
//! listener's first second is its connect burst, and so is that of the following seconds while
//! it stays above [`BURST_FACTOR`] times real time (a burst over a slow link), for at most
//! [`MAX_BURST_TICKS`] seconds.

use crate::profile::slice::Judge;

/// Most seconds a rate window can span.
pub const MAX_WINDOW: usize = 15;
const RING: usize = MAX_WINDOW + 1;

/// A second whose media exceeds this many seconds still belongs to the connect burst (when
/// the previous second did).
pub const BURST_FACTOR: u32 = 2;
/// Most seconds of a listener's connect burst.
pub const MAX_BURST_TICKS: u16 = 10;

/// Per-connection media and gap accounting. Times are ms since the engine's epoch; media is
/// counted in µs (wrapping, differences only).
#[derive(Debug, Clone, Default)]
pub struct Meter {
    /// Media received up to the last arrival at each of the last ticks (µs, wrapping).
    snap_media: [u32; RING],
    /// Time of the last media arrival at each of the last ticks (ms).
    snap_ms: [u32; RING],
    pos: u8,
    ticks: u16,
    /// Media received since the response head (µs, wrapping).
    total_us: u32,
    /// Media received since the last tick (µs).
    cur_us: u32,
    /// Time of the last arrival of any bytes, or of the response head before the first (ms).
    pub last_read_ms: u32,
    /// Time of the last media arrival (ms).
    last_media_ms: u32,
    /// Longest gap between arrivals on this connection so far (ms).
    pub longest_gap_ms: u32,
    /// Whether the rate rule applies (the media time is known).
    pub rate_judged: bool,
    /// The connect burst is over (see the module comment).
    burst_over: bool,
}

/// What [`Meter::tick`] concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// `starved: rate` at this tick.
    pub rate: bool,
    /// `starved: gap` at this tick.
    pub gap: bool,
    /// Media received in the second that just ended (µs).
    pub media_us: u32,
    /// The gap still running at this tick (ms since the last arrival).
    pub ongoing_gap_ms: u32,
    /// This second's media is (part of) the connect burst, not the steady stream.
    pub burst: bool,
}

impl Meter {
    /// A meter for a connection whose response head arrived at `now_ms`; `rate_judged` when
    /// its media time can be known.
    pub fn new(now_ms: u32, rate_judged: bool) -> Meter {
        Meter {
            last_read_ms: now_ms,
            last_media_ms: now_ms,
            rate_judged,
            ..Meter::default()
        }
    }

    /// Records an arrival of bytes at `now_ms`; returns the gap since the previous one (ms).
    #[inline]
    pub fn on_read(&mut self, now_ms: u32) -> u32 {
        let gap = now_ms.saturating_sub(self.last_read_ms);
        if gap > self.longest_gap_ms {
            self.longest_gap_ms = gap;
        }
        self.last_read_ms = now_ms;
        gap
    }

    /// Records `us` µs of media completed at `now_ms`.
    #[inline]
    pub fn on_media(&mut self, now_ms: u32, us: u64) {
        let us = us.min(u64::from(u32::MAX)) as u32;
        self.cur_us = self.cur_us.saturating_add(us);
        self.total_us = self.total_us.wrapping_add(us);
        self.last_media_ms = now_ms;
    }

    /// Closes the current one-second window at `now_ms` and judges the listener.
    pub fn tick(&mut self, now_ms: u32, judge: &Judge) -> Verdict {
        let media_us = std::mem::take(&mut self.cur_us);
        let p = self.pos as usize;
        self.snap_media[p] = self.total_us;
        self.snap_ms[p] = self.last_media_ms;
        self.pos = ((p + 1) % RING) as u8;
        self.ticks = self.ticks.saturating_add(1);
        let window = (judge.window_s as usize).clamp(1, MAX_WINDOW);
        let mut rate = false;
        if self.rate_judged && self.ticks as usize > window {
            let old = (p + RING - window) % RING;
            let got_us = self.total_us.wrapping_sub(self.snap_media[old]) as f64;
            let span_ms = self.last_media_ms.saturating_sub(self.snap_ms[old]);
            // No media since the snapshot: nothing received over the window.
            let real_time = if span_ms == 0 {
                0.0
            } else {
                got_us / 1000.0 / span_ms as f64
            };
            // Media that stopped arriving: the span ends at its last arrival, so count the
            // silence since then as well once it is longer than the window's own span.
            let since = now_ms.saturating_sub(self.last_media_ms) as f64;
            let stretched = if since > span_ms as f64 {
                got_us / 1000.0 / (span_ms as f64 + since).max(1.0)
            } else {
                real_time
            };
            rate = stretched < judge.min_rate;
        }
        let ongoing = now_ms.saturating_sub(self.last_read_ms);
        let gap = ongoing > judge.max_gap_ms;
        let burst = !self.burst_over
            && (self.ticks == 1
                || (self.ticks <= MAX_BURST_TICKS
                    && media_us > BURST_FACTOR.saturating_mul(1_000_000)));
        self.burst_over = !burst;
        Verdict {
            rate,
            gap,
            media_us,
            ongoing_gap_ms: ongoing,
            burst,
        }
    }

    /// The longest gap including the one running at `now_ms` (ms), for the end of a connection.
    pub fn final_longest_gap(&self, now_ms: u32) -> u32 {
        self.longest_gap_ms
            .max(now_ms.saturating_sub(self.last_read_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const J: Judge = Judge {
        min_rate: 0.8,
        window_s: 5,
        max_gap_ms: 4000,
        max_loss: 0.01,
        connect_timeout_ms: 10_000,
    };

    /// A read at `at_ms` carrying `media_ms` of media.
    fn arrive(m: &mut Meter, at_ms: u32, media_ms: u64) {
        m.on_read(at_ms);
        m.on_media(at_ms, media_ms * 1000);
    }

    #[test]
    fn connect_burst_is_told_apart() {
        let mut m = Meter::new(0, true);
        // 8 s at once, then over a slow link 4 s a second until caught up, then real time.
        let media = [8000, 4000, 4000, 1000, 1000, 5000];
        let bursts: Vec<bool> = (1..=6u32)
            .map(|s| {
                arrive(&mut m, s * 1000 - 500, media[s as usize - 1]);
                m.tick(s * 1000, &J).burst
            })
            .collect();
        // A late spike is not a burst any more.
        assert_eq!(bursts, [true, true, true, false, false, false]);
    }

    #[test]
    fn real_time_media_is_not_starved() {
        let mut m = Meter::new(0, true);
        for s in 1..=20u32 {
            arrive(&mut m, s * 1000 - 500, 1000);
            let v = m.tick(s * 1000, &J);
            assert!(!v.rate && !v.gap, "second {s}");
        }
        assert_eq!(m.longest_gap_ms, 1000);
    }

    #[test]
    fn media_at_three_quarters_of_real_time_is_starved_after_a_window() {
        let mut m = Meter::new(0, true);
        let mut verdicts = vec![];
        for s in 1..=10u32 {
            arrive(&mut m, s * 1000 - 500, 750);
            verdicts.push(m.tick(s * 1000, &J).rate);
        }
        assert!(!verdicts[4], "not judged before window + 1 ticks");
        assert!(verdicts[5..].iter().all(|&v| v));
    }

    #[test]
    fn bytes_without_media_starve_by_rate_not_by_gap() {
        // Garbage keeps arriving (no gap), but no media comes with it.
        let mut m = Meter::new(0, true);
        let mut last = None;
        for s in 1..=12u32 {
            if s <= 3 {
                arrive(&mut m, s * 1000 - 500, 1000);
            } else {
                m.on_read(s * 1000 - 500);
            }
            last = Some(m.tick(s * 1000, &J));
        }
        let v = last.unwrap();
        assert!(v.rate && !v.gap, "{v:?}");
    }

    #[test]
    fn write_phase_jitter_is_not_starvation() {
        // One second of media per write whose phase wobbles around the tick: some 5 s tick
        // windows hold only 4 writes (exactly 80 %), yet the rate is 100 %.
        let mut m = Meter::new(0, true);
        let mut next_tick = 1000u32;
        for k in 0..40u32 {
            let at = 500 + k * 1000 + if k % 2 == 0 { 490 } else { 0 };
            while next_tick <= at {
                assert!(!m.tick(next_tick, &J).rate, "tick {next_tick}");
                next_tick += 1000;
            }
            arrive(&mut m, at, 994);
        }
    }

    #[test]
    fn silence_is_a_gap() {
        let mut m = Meter::new(0, false);
        arrive(&mut m, 500, 100);
        assert!(!m.tick(1000, &J).gap);
        assert!(!m.tick(4000, &J).gap);
        let v = m.tick(5000, &J);
        assert!(
            v.gap && !v.rate,
            "the rate is not judged without media time"
        );
        assert_eq!(v.ongoing_gap_ms, 4500);
        assert_eq!(m.final_longest_gap(6000), 5500);
    }
}
