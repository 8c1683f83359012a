//! Per-listener accounting: bytes per one-second window, longest gap, and the starvation rule.
//!
//! A [`Meter`] is about 150 bytes, touched once per read and once per second. A listener is
//! starved at a tick when its rate over the last `window` seconds is below `min_rate_pct` % of
//! the expected rate, or when it has not read for longer than `max_gap_ms`.
//!
//! The rate is measured between reads, not between ticks: each tick keeps a snapshot of
//! (bytes received up to the last read, time of that read), and the rate over the window is the
//! bytes between the snapshot `window` ticks ago and the latest one, divided by the time between
//! those two reads. A server that writes once per second would otherwise put 4, 5 or 6 writes
//! in a 5 s tick window depending on phase jitter, and 4 writes is exactly the 80 % threshold.
//! The first snapshot is taken at the first tick after the response head, so the connect burst
//! is not counted and a rate verdict needs `window + 1` ticks of streaming.
//!
//! The same burst is kept out of the delivered-bandwidth plot: the bytes of a listener's first
//! second are its connect burst, and so are those of the following seconds while they stay
//! above [`BURST_FACTOR`] times the expected rate (a burst over a slow link), for at most
//! [`MAX_BURST_TICKS`] seconds.

/// Most seconds a rate window can span.
pub const MAX_WINDOW: usize = 15;
const RING: usize = MAX_WINDOW + 1;

/// A second whose bytes exceed this many times the expected bytes still belongs to the
/// connect burst (when the previous second did).
pub const BURST_FACTOR: u32 = 2;
/// Most seconds of a listener's connect burst.
pub const MAX_BURST_TICKS: u16 = 10;

/// Starvation thresholds, shared by all listeners of a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// Sliding window (whole seconds, 1 to [`MAX_WINDOW`]).
    pub window: u32,
    /// Minimum share of the expected bytes over the window (percent).
    pub min_rate_pct: f64,
    /// Longest acceptable gap between reads (ms).
    pub max_gap_ms: u32,
}

/// Per-connection byte and gap accounting. Times are ms since the worker's epoch.
#[derive(Debug, Clone, Default)]
pub struct Meter {
    /// Bytes received up to the last read at each of the last ticks (bytes, wrapping).
    snap_bytes: [u32; RING],
    /// Time of the last read at each of the last ticks (ms).
    snap_ms: [u32; RING],
    pos: u8,
    ticks: u16,
    /// Bytes received since the response head (bytes, wrapping).
    total: u32,
    /// Bytes received since the last tick (bytes).
    cur: u32,
    /// Time of the last read, or of the response head before the first body byte (ms).
    pub last_read_ms: u32,
    /// Longest gap between reads on this connection so far (ms).
    pub longest_gap_ms: u32,
    /// Expected bytes per second (bytes/s); 0 when unknown (only gaps are judged).
    pub expected_bps: u32,
    /// The connect burst is over (see the module comment).
    burst_over: bool,
}

/// What [`Meter::tick`] concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Starved at this tick.
    pub starved: bool,
    /// Bytes received in the second that just ended (bytes).
    pub bytes: u32,
    /// The gap still running at this tick (ms since the last read).
    pub ongoing_gap_ms: u32,
    /// This second's bytes are (part of) the connect burst, not the steady stream.
    pub burst: bool,
}

impl Meter {
    /// A meter for a connection whose response head arrived at `now_ms`, expecting
    /// `expected_bps` bytes per second (0 = unknown).
    pub fn new(now_ms: u32, expected_bps: u32) -> Meter {
        Meter {
            last_read_ms: now_ms,
            expected_bps,
            ..Meter::default()
        }
    }

    /// Records a read of `n` bytes at `now_ms`.
    #[inline]
    pub fn on_read(&mut self, now_ms: u32, n: usize) {
        let gap = now_ms.saturating_sub(self.last_read_ms);
        if gap > self.longest_gap_ms {
            self.longest_gap_ms = gap;
        }
        self.last_read_ms = now_ms;
        self.cur = self.cur.saturating_add(n as u32);
        self.total = self.total.wrapping_add(n as u32);
    }

    /// Closes the current one-second window at `now_ms` and judges the listener.
    pub fn tick(&mut self, now_ms: u32, th: &Thresholds) -> Verdict {
        let bytes = std::mem::take(&mut self.cur);
        let p = self.pos as usize;
        self.snap_bytes[p] = self.total;
        self.snap_ms[p] = self.last_read_ms;
        self.pos = ((p + 1) % RING) as u8;
        self.ticks = self.ticks.saturating_add(1);
        let window = th.window.clamp(1, MAX_WINDOW as u32) as usize;
        let mut starved = false;
        if self.expected_bps > 0 && self.ticks as usize > window {
            let old = (p + RING - window) % RING;
            let got = self.total.wrapping_sub(self.snap_bytes[old]) as f64;
            let span_ms = self.last_read_ms.saturating_sub(self.snap_ms[old]);
            // No read since the snapshot: nothing received over the window.
            let rate = if span_ms == 0 {
                0.0
            } else {
                got * 1000.0 / span_ms as f64
            };
            starved = rate < th.min_rate_pct / 100.0 * self.expected_bps as f64;
        }
        let ongoing = now_ms.saturating_sub(self.last_read_ms);
        if ongoing > th.max_gap_ms {
            starved = true;
        }
        let burst = !self.burst_over
            && (self.ticks == 1
                || (self.ticks <= MAX_BURST_TICKS
                    && self.expected_bps > 0
                    && bytes > BURST_FACTOR.saturating_mul(self.expected_bps)));
        self.burst_over = !burst;
        Verdict {
            starved,
            bytes,
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

    const TH: Thresholds = Thresholds {
        window: 5,
        min_rate_pct: 80.0,
        max_gap_ms: 4000,
    };

    #[test]
    fn connect_burst_is_told_apart() {
        let mut m = Meter::new(0, 8000);
        // 64 KiB at once, then over a slow link 32 KB/s until caught up, then the live rate.
        let reads = [65_536, 32_000, 32_000, 8000, 8000, 40_000];
        let bursts: Vec<bool> = (1..=6u32)
            .map(|s| {
                m.on_read(s * 1000 - 500, reads[s as usize - 1]);
                m.tick(s * 1000, &TH).burst
            })
            .collect();
        // A late spike is not a burst any more.
        assert_eq!(bursts, [true, true, true, false, false, false]);
    }

    #[test]
    fn steady_stream_is_not_starved() {
        let mut m = Meter::new(0, 8000);
        for s in 1..=20u32 {
            m.on_read(s * 1000 - 500, 8000);
            assert!(!m.tick(s * 1000, &TH).starved, "second {s}");
        }
        assert_eq!(m.longest_gap_ms, 1000);
    }

    #[test]
    fn slow_stream_is_starved_after_a_window() {
        let mut m = Meter::new(0, 8000);
        let mut verdicts = vec![];
        for s in 1..=10u32 {
            m.on_read(s * 1000 - 500, 6000); // 75 %
            verdicts.push(m.tick(s * 1000, &TH).starved);
        }
        assert!(!verdicts[4], "not judged before window + 1 ticks");
        assert!(verdicts[5..].iter().all(|&v| v));
    }

    #[test]
    fn write_phase_jitter_is_not_starvation() {
        // One 8,000-byte write per second whose phase wobbles around the tick: some 5 s tick
        // windows hold only 4 writes (exactly 80 %), yet the rate is 100 %.
        let mut m = Meter::new(0, 8000);
        let mut t = 0u32;
        let mut next_tick = 1000u32;
        for k in 0..40u32 {
            let at = 500 + k * 1000 + if k % 2 == 0 { 490 } else { 0 };
            while next_tick <= at {
                assert!(!m.tick(next_tick, &TH).starved, "tick {next_tick}");
                next_tick += 1000;
            }
            m.on_read(at, 7950);
            t = at;
        }
        assert!(t > 30_000);
    }

    #[test]
    fn silence_is_a_gap() {
        let mut m = Meter::new(0, 0);
        m.on_read(500, 100);
        assert!(!m.tick(1000, &TH).starved);
        assert!(!m.tick(4000, &TH).starved);
        let v = m.tick(5000, &TH);
        assert!(v.starved);
        assert_eq!(v.ongoing_gap_ms, 4500);
        assert_eq!(m.final_longest_gap(6000), 5500);
    }
}
