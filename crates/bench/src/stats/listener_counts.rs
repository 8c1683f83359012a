//! The listener counters of one second, shared by a worker's per-second tick (`WorkerTick`, one
//! worker's listeners) and a row of the run's timeline (`Row`, the sum over all workers).
//!
//! Both embed one [`ListenerCounts`] with `#[serde(flatten)]`, so its fields appear in their
//! JSON (worker lines and `report.json`) exactly where they always were: right after `phase`.
//! The listener states (`started` ... `failed`) and `failures_total` describe the end of the
//! second; `connects`, `bytes` and `expected_bytes` cover the one second itself.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Listener states at the end of one second and traffic during it, for one worker or summed
/// over all workers.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ListenerCounts {
    /// Listeners started so far (listeners; counts a listener once even if it reconnected).
    pub started: u32,
    /// Listeners connecting or waiting for the response head (listeners).
    pub connecting: u32,
    /// Listeners receiving the stream, stalled ones excluded (listeners).
    pub streaming: u32,
    /// Stalled listeners (connected, never reading) (listeners).
    pub stalled: u32,
    /// Listeners starved at the end of this second (listeners).
    pub starved: u32,
    /// Listeners starved at least once so far (listeners).
    pub starved_total: u32,
    /// Listeners currently down after a failure (listeners).
    pub failed: u32,
    /// Connection attempts started this second (connections).
    pub connects: u32,
    /// Body bytes received this second, all listeners (bytes).
    pub bytes: u64,
    /// Bytes the streaming listeners should have received this second at their bitrate (bytes).
    pub expected_bytes: u64,
    /// Of `bytes`, those that were listeners' connect bursts (see [`crate::icy::listener`]) (bytes).
    #[serde(default)]
    pub burst_bytes: u64,
    /// Of `expected_bytes`, the share of listeners whose second was a connect burst (bytes).
    #[serde(default)]
    pub burst_expected_bytes: u64,
    /// Failures by reason, cumulative (connections).
    pub failures_total: BTreeMap<String, u64>,
}

impl ListenerCounts {
    /// Bytes of the steady stream this second: `bytes` without the connect bursts (bytes).
    pub fn steady_bytes(&self) -> u64 {
        self.bytes.saturating_sub(self.burst_bytes)
    }

    /// Expected bytes of the listeners past their connect burst this second (bytes).
    pub fn steady_expected_bytes(&self) -> u64 {
        self.expected_bytes
            .saturating_sub(self.burst_expected_bytes)
    }

    /// Listeners holding a connection: streaming + stalled (listeners).
    pub fn connected(&self) -> u32 {
        self.streaming + self.stalled
    }

    /// Adds another count's listener states (`started` ... `failed`; not the traffic of the
    /// second, not the failures).
    pub fn add_states(&mut self, o: &ListenerCounts) {
        self.started += o.started;
        self.connecting += o.connecting;
        self.streaming += o.streaming;
        self.stalled += o.stalled;
        self.starved += o.starved;
        self.starved_total += o.starved_total;
        self.failed += o.failed;
    }

    /// Adds another count's traffic of the second (`connects`, `bytes`, `expected_bytes` and
    /// their burst shares).
    pub fn add_traffic(&mut self, o: &ListenerCounts) {
        self.connects += o.connects;
        self.bytes += o.bytes;
        self.expected_bytes += o.expected_bytes;
        self.burst_bytes += o.burst_bytes;
        self.burst_expected_bytes += o.burst_expected_bytes;
    }

    /// Adds another count's failures, reason by reason.
    pub fn add_failures(&mut self, o: &ListenerCounts) {
        for (k, v) in &o.failures_total {
            *self.failures_total.entry(k.clone()).or_insert(0) += v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_by_group() {
        let a = ListenerCounts {
            started: 5,
            connecting: 1,
            streaming: 3,
            stalled: 1,
            starved: 1,
            starved_total: 2,
            failed: 0,
            connects: 7,
            bytes: 100,
            expected_bytes: 90,
            burst_bytes: 60,
            burst_expected_bytes: 30,
            failures_total: BTreeMap::from([("refused".to_owned(), 2)]),
        };
        let mut s = ListenerCounts::default();
        s.add_states(&a);
        assert_eq!((s.started, s.connected(), s.starved_total), (5, 4, 2));
        assert_eq!((s.connects, s.bytes), (0, 0));
        assert!(s.failures_total.is_empty());
        s.add_traffic(&a);
        s.add_failures(&a);
        s.add_failures(&a);
        assert_eq!((s.connects, s.bytes, s.expected_bytes), (7, 100, 90));
        assert_eq!((s.steady_bytes(), s.steady_expected_bytes()), (40, 60));
        assert_eq!(s.failures_total["refused"], 4);
    }
}
