//! Exact, mergeable duration histograms: HDR histograms (Gil Tene's design, the `hdrhistogram`
//! crate) of microseconds, 1 µs to one hour at three significant digits.
//!
//! A recorded value is kept within 0.1 % of itself (the histogram's "equivalent value" range),
//! and two histograms merge by adding their counts, so the percentiles of a merge of many
//! workers, processes or hosts are those of one big run, within that 0.1 %: the property the
//! field's tools lack (Locust pre-buckets response times, so its merged p99 can read above the
//! maximum; locustio/locust#1563). Values above one hour are recorded as one hour.
//!
//! A [`Hist`] allocates its counts (about 190 KiB) only when its first value is recorded, so an
//! empty one costs a pointer. It travels (worker lines, agent links, `report.json`) as the
//! base64 of the HdrHistogram V2 encoding, which is compact for sparse data and portable: any
//! HdrHistogram implementation reads it.

use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Smallest value recorded (µs).
pub const LOWEST_US: u64 = 1;
/// Largest value recorded (µs): one hour; larger values are recorded as this.
pub const HIGHEST_US: u64 = 3_600_000_000;
/// Significant decimal digits kept: a value is known within 0.1 %.
pub const SIGFIG: u8 = 3;

/// A histogram of durations in µs (see the module comment); empty until the first record.
#[derive(Clone, Default)]
pub struct Hist(Option<Box<Histogram<u64>>>);

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(LOWEST_US, HIGHEST_US, SIGFIG)
        .expect("constant histogram bounds are valid")
}

impl Hist {
    /// An empty histogram.
    pub fn new() -> Hist {
        Hist(None)
    }

    fn h(&mut self) -> &mut Histogram<u64> {
        self.0.get_or_insert_with(|| Box::new(new_histogram()))
    }

    /// Records one duration of `us` microseconds (0 counts as 1 µs, above an hour as an hour).
    #[inline]
    pub fn record_us(&mut self, us: u64) {
        self.h().saturating_record(us.clamp(LOWEST_US, HIGHEST_US));
    }

    /// Records `n` durations of `us` microseconds each.
    pub fn record_n_us(&mut self, us: u64, n: u64) {
        if n > 0 {
            let _ = self.h().record_n(us.clamp(LOWEST_US, HIGHEST_US), n);
        }
    }

    /// Adds every count of `other` (an exact merge).
    pub fn merge(&mut self, other: &Hist) {
        if let Some(o) = &other.0 {
            if o.is_empty() {
                return;
            }
            // Same bounds on both sides: adding cannot fail.
            let _ = self.h().add(o.as_ref());
        }
    }

    /// Forgets every value (keeps the allocation).
    pub fn clear(&mut self) {
        if let Some(h) = &mut self.0 {
            h.reset();
        }
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.0.as_ref().map_or(0, |h| h.len())
    }

    /// Whether no value was recorded.
    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// The `q` quantile (0 to 1) in ms: the highest value equivalent to the recorded value at
    /// that rank (within 0.1 % of it), never above [`Hist::max_ms`]; `None` when empty.
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        let h = self.0.as_ref().filter(|h| !h.is_empty())?;
        let v = h.value_at_quantile(q.clamp(0.0, 1.0)).min(h.max());
        Some(v as f64 / 1000.0)
    }

    /// The largest value (ms, within 0.1 %), `None` when empty.
    pub fn max_ms(&self) -> Option<f64> {
        let h = self.0.as_ref().filter(|h| !h.is_empty())?;
        Some(h.max() as f64 / 1000.0)
    }

    /// The smallest value (ms, within 0.1 %), `None` when empty.
    pub fn min_ms(&self) -> Option<f64> {
        let h = self.0.as_ref().filter(|h| !h.is_empty())?;
        Some(h.min() as f64 / 1000.0)
    }

    /// The mean (ms), `None` when empty.
    pub fn mean_ms(&self) -> Option<f64> {
        let h = self.0.as_ref().filter(|h| !h.is_empty())?;
        Some(h.mean() / 1000.0)
    }

    /// Values at or below `ms` milliseconds (for Prometheus buckets, `le`).
    pub fn count_at_or_below_ms(&self, ms: f64) -> u64 {
        match self.0.as_ref() {
            Some(h) if !h.is_empty() => {
                let us = (ms * 1000.0).max(0.0) as u64;
                h.iter_recorded()
                    .take_while(|v| v.value_iterated_to() <= us)
                    .map(|v| v.count_at_value())
                    .sum()
            }
            _ => 0,
        }
    }

    /// The sum of every value (ms; each value as its histogram equivalent, so within 0.1 %).
    pub fn sum_ms(&self) -> f64 {
        self.mean_ms().map_or(0.0, |m| m * self.count() as f64)
    }

    /// The HdrHistogram V2 encoding, base64 (empty for an empty histogram).
    pub fn to_base64(&self) -> String {
        use base64::Engine as _;
        match self.0.as_ref() {
            Some(h) if !h.is_empty() => {
                let mut buf = Vec::new();
                match V2Serializer::new().serialize(h.as_ref(), &mut buf) {
                    Ok(_) => base64::engine::general_purpose::STANDARD.encode(buf),
                    Err(_) => String::new(),
                }
            }
            _ => String::new(),
        }
    }

    /// Reads [`Hist::to_base64`]'s text back.
    ///
    /// Errors: text that is not base64 of an HdrHistogram V2 encoding.
    pub fn from_base64(text: &str) -> Result<Hist, String> {
        use base64::Engine as _;
        if text.is_empty() {
            return Ok(Hist(None));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| format!("histogram: {e}"))?;
        let read: Histogram<u64> = Deserializer::new()
            .deserialize(&mut &bytes[..])
            .map_err(|e| format!("histogram: {e:?}"))?;
        // Re-home the counts in the standard bounds so every merge is exact.
        let mut h = new_histogram();
        h.add(&read).map_err(|e| format!("histogram: {e:?}"))?;
        Ok(Hist(Some(Box::new(h))))
    }
}

impl std::fmt::Debug for Hist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Hist(n={}, p50={:?}, max={:?})",
            self.count(),
            self.quantile_ms(0.5),
            self.max_ms()
        )
    }
}

impl PartialEq for Hist {
    fn eq(&self, other: &Hist) -> bool {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) => a.as_ref() == b.as_ref(),
            _ => self.is_empty() && other.is_empty(),
        }
    }
}

impl Serialize for Hist {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_base64())
    }
}

impl<'de> Deserialize<'de> for Hist {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Hist, D::Error> {
        let text = String::deserialize(d)?;
        Hist::from_base64(&text).map_err(serde::de::Error::custom)
    }
}

/// The figures a report gives of one histogram (ms), as `report.json` writes them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HistSummary {
    /// Values recorded.
    pub count: u64,
    /// Smallest (ms).
    pub min_ms: Option<f64>,
    /// Mean (ms).
    pub mean_ms: Option<f64>,
    /// Median (ms).
    pub p50_ms: Option<f64>,
    /// 90th percentile (ms).
    pub p90_ms: Option<f64>,
    /// 95th percentile (ms).
    pub p95_ms: Option<f64>,
    /// 99th percentile (ms).
    pub p99_ms: Option<f64>,
    /// 99.9th percentile (ms).
    pub p999_ms: Option<f64>,
    /// Largest (ms).
    pub max_ms: Option<f64>,
}

impl HistSummary {
    /// The figures of `h`.
    pub fn of(h: &Hist) -> HistSummary {
        HistSummary {
            count: h.count(),
            min_ms: h.min_ms(),
            mean_ms: h.mean_ms(),
            p50_ms: h.quantile_ms(0.5),
            p90_ms: h.quantile_ms(0.9),
            p95_ms: h.quantile_ms(0.95),
            p99_ms: h.quantile_ms(0.99),
            p999_ms: h.quantile_ms(0.999),
            max_ms: h.max_ms(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact `q` quantile of sorted values (nearest rank), in ms.
    fn exact(sorted: &[u64], q: f64) -> f64 {
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1] as f64 / 1000.0
    }

    #[test]
    fn merged_percentiles_are_within_a_tenth_of_a_percent_of_the_exact_ones() {
        // Eight "workers" with different distributions, merged; compared with the exact
        // percentiles of all values together.
        let mut all = Vec::new();
        let mut merged = Hist::new();
        let mut seed = 12345u64;
        for w in 0..8u64 {
            let mut h = Hist::new();
            for _ in 0..5000 {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let v = 200 + (seed >> 33) % (10_000 * (w + 1)) + w * 777;
                h.record_us(v);
                all.push(v);
            }
            // Through the wire format, as a worker's tick travels.
            let h = Hist::from_base64(&h.to_base64()).unwrap();
            merged.merge(&h);
        }
        all.sort_unstable();
        assert_eq!(merged.count(), all.len() as u64);
        for q in [0.5, 0.9, 0.99, 0.999, 1.0] {
            let got = merged.quantile_ms(q).unwrap();
            let want = exact(&all, q);
            assert!(
                (got - want).abs() <= want * 0.001 + 0.001,
                "q {q}: {got} against exact {want}"
            );
        }
        // A percentile never reads above the maximum.
        assert!(merged.quantile_ms(0.99).unwrap() <= merged.max_ms().unwrap());
    }

    #[test]
    fn empty_histograms_cost_nothing_and_read_as_none() {
        let h = Hist::new();
        assert!(h.0.is_none());
        assert_eq!(h.quantile_ms(0.5), None);
        assert_eq!(h.to_base64(), "");
        assert_eq!(Hist::from_base64("").unwrap(), h);
        assert!(Hist::from_base64("!!").is_err());
        let mut m = Hist::new();
        m.merge(&h);
        assert!(m.0.is_none());
    }

    #[test]
    fn bounds_and_buckets() {
        let mut h = Hist::new();
        h.record_us(0);
        h.record_us(10_000_000_000);
        h.record_n_us(1500, 3);
        assert_eq!(h.count(), 5);
        assert_eq!(h.min_ms(), Some(0.001));
        assert!((h.max_ms().unwrap() - 3_600_000.0).abs() < 3_600.0);
        assert_eq!(h.count_at_or_below_ms(2.0), 4);
        let json = serde_json::to_string(&h).unwrap();
        let back: Hist = serde_json::from_str(&json).unwrap();
        assert_eq!(back, h);
        h.clear();
        assert!(h.is_empty());
    }
}
