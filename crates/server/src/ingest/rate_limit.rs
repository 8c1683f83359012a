//! Icecast-KH's per-mount `<limit-rate>` (`[[mount]] limit-rate`): a source sending faster
//! than the limit is read more slowly, so its encoder waits (TCP flow control), as Icecast-KH
//! `source.c` delays its reads; it is never disconnected for it. [`RateLimit`] is the pure
//! bookkeeping: bytes read since the source started against the time that should have taken.

use std::time::Duration;

/// Reads allowed so far against a rate in bits per second.
#[derive(Debug, Clone)]
pub struct RateLimit {
    /// The limit in bits per second (> 0).
    bits_per_sec: u64,
    /// Bytes read since the start.
    bytes: u64,
    /// Bytes the source may send before the limit counts (a burst at connect: one second's
    /// worth, as an encoder's pre-buffer).
    allowance: u64,
}

impl RateLimit {
    /// A limit of `bits_per_sec` (`None` for 0: no limit).
    pub fn new(bits_per_sec: u64) -> Option<RateLimit> {
        (bits_per_sec > 0).then_some(RateLimit {
            bits_per_sec,
            bytes: 0,
            allowance: bits_per_sec / 8,
        })
    }

    /// Records `n` bytes read.
    pub fn record(&mut self, n: usize) {
        self.bytes = self.bytes.saturating_add(n as u64);
    }

    /// How long to wait before reading again, `elapsed` after the start (zero while the
    /// source is within the limit).
    pub fn wait(&self, elapsed: Duration) -> Duration {
        let counted = self.bytes.saturating_sub(self.allowance);
        // The time `counted` bytes take at the limit.
        let due = Duration::from_secs_f64(counted as f64 * 8.0 / self.bits_per_sec as f64);
        due.saturating_sub(elapsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_within_the_limit_never_waits() {
        // 128 kbit/s against a 131,572 bit/s limit (AzuraCast: 128 * 1024 + 2500).
        let mut l = RateLimit::new(128 * 1024 + 2500).unwrap();
        for s in 1..=60u64 {
            l.record(16_000);
            assert_eq!(l.wait(Duration::from_secs(s)), Duration::ZERO, "second {s}");
        }
    }

    #[test]
    fn a_faster_source_is_slowed_to_the_limit() {
        // 8,000 bytes/s allowed; 40,000 bytes after one second: 1 s allowance, then 4 s due.
        let mut l = RateLimit::new(64_000).unwrap();
        l.record(40_000);
        assert_eq!(l.wait(Duration::from_secs(1)), Duration::from_secs(3));
        assert_eq!(l.wait(Duration::from_secs(5)), Duration::ZERO);
        assert!(RateLimit::new(0).is_none());
    }
}
