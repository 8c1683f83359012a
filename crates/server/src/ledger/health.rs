//! How the ledger's writer is doing, shared with the server (issue 42): the session messages
//! (starts and ends) sent and not yet committed, the commits that failed, when the last one
//! succeeded, and whether writing works now. `/metrics` shows them
//! (`throng_ledger_pending_sessions`, `throng_ledger_write_failures_total`,
//! `throng_ledger_seconds_since_commit`) and `/healthz/ready` carries them in its `ledger`
//! object. Counters only: no lock, readable from any thread.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;

/// The writer's health (see the module comment). Cheap to share: every field is atomic, and
/// the gauge and counter are `Arc`s, registered as they are in `/metrics`.
#[derive(Debug, Default)]
pub struct LedgerHealth {
    /// Session starts and ends sent to the writer and not committed yet (messages).
    pub pending: Gauge,
    /// Commits that failed (the batch was kept and is tried again).
    pub failures: Counter,
    /// When the last commit succeeded (Unix ms; 0 before the first).
    last_commit_ms: AtomicI64,
    /// False from a failed commit until one succeeds.
    failing: AtomicBool,
}

impl LedgerHealth {
    /// Records a successful commit at `now_ms` (Unix ms) of `sessions` session messages.
    pub fn committed(&self, now_ms: i64, sessions: usize) {
        self.last_commit_ms.store(now_ms, Ordering::Relaxed);
        self.failing.store(false, Ordering::Relaxed);
        self.pending
            .dec_by(i64::try_from(sessions).unwrap_or(i64::MAX));
    }

    /// Records a failed commit.
    pub fn failed(&self) {
        self.failures.inc();
        self.failing.store(true, Ordering::Relaxed);
    }

    /// Seconds from the last successful commit to `now_ms` (Unix ms); `None` before the first.
    pub fn seconds_since_commit(&self, now_ms: i64) -> Option<f64> {
        let last = self.last_commit_ms.load(Ordering::Relaxed);
        (last > 0).then(|| (now_ms - last).max(0) as f64 / 1000.0)
    }

    /// Whether the last commit failed (writing has stopped until the database answers).
    pub fn is_failing(&self) -> bool {
        self.failing.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_holds_until_a_commit_and_pending_follows_the_messages() {
        let h = LedgerHealth::default();
        assert_eq!(h.seconds_since_commit(10_000), None);
        h.pending.inc_by(5);
        h.failed();
        assert!(h.is_failing());
        assert_eq!(h.failures.get(), 1);
        h.committed(10_000, 3);
        assert!(!h.is_failing());
        assert_eq!(h.pending.get(), 2);
        assert_eq!(h.seconds_since_commit(12_500), Some(2.5));
    }
}
