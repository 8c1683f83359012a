//! When a listener run stops before its hold ends: every connection so far failed and none
//! ever streamed, [`AFTER`] into the run (a wrong URL, a server that is not there). Waiting
//! out a long hold would only delay the FAIL; the run stops at once with the reason, which
//! the verdict prints (`report::verdict`), and exits 1 as any FAIL.

use std::time::Duration;

use crate::stats::{first_kinds, Snapshot};

/// How long into the run the rule waits before judging (workers report once a second, and the
/// first listeners need a connect timeout's worth of chance only when nothing answers at all;
/// a refusal or an HTTP error is known at once).
pub const AFTER: Duration = Duration::from_secs(2);

/// The reason to stop a run `elapsed` into it, given the run's merged states and totals now
/// (`live`) and whether any listener ever held a connection; `None` to go on. Stops only when
/// listeners started, every started listener is down after a failure, and none ever streamed.
pub fn all_failing(elapsed: Duration, live: &Snapshot, ever_connected: bool) -> Option<String> {
    let failures = live.failures_total();
    let stop = elapsed >= AFTER
        && !ever_connected
        && live.started > 0
        && live.down >= live.started
        && live.connected() == 0
        && failures > 0;
    stop.then(|| {
        format!(
            "every connection failed ({}) and none streamed in the first {:.0} s: the run stopped early",
            first_kinds(&live.failures),
            elapsed.as_secs_f64()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(started: u32, down: u32, streaming: u32, fails: u64) -> Snapshot {
        let mut c = Snapshot {
            started,
            down,
            streaming,
            ..Snapshot::default()
        };
        if fails > 0 {
            c.failures.insert("http-404".into(), fails);
        }
        c
    }

    #[test]
    fn stops_only_when_everything_failed_and_nothing_streamed() {
        let t = Duration::from_secs(3);
        let why = all_failing(t, &counts(50, 50, 0, 50), false).unwrap();
        assert!(why.contains("http-404 ×50"), "{why}");
        assert!(why.contains("first 3 s"), "{why}");
        // Too early, or a listener still trying, or one streamed once, or nothing started.
        assert_eq!(
            all_failing(Duration::from_secs(1), &counts(50, 50, 0, 50), false),
            None
        );
        assert_eq!(all_failing(t, &counts(50, 49, 0, 49), false), None);
        assert_eq!(all_failing(t, &counts(50, 50, 0, 50), true), None);
        assert_eq!(all_failing(t, &counts(50, 40, 10, 40), false), None);
        assert_eq!(all_failing(t, &counts(0, 0, 0, 0), false), None);
    }
}
