//! Why a run FAILs, in words: each criterion of the verdict that was not met, with how many
//! listeners (or subscribers, viewers) it concerns and, for failed connections, the first
//! failure kinds by count (`http-404 ×150`, [`crate::stats::first_kinds`]). The listener
//! criteria are worded where they are judged ([`crate::report::summary::listener_reasons`]). The console prints these lines under the summary
//! table, and the HTML report shows them next to the verdict, above the plots.

use std::collections::BTreeMap;

use crate::events::subscriber::EventsSummary;
use crate::report::summary::RunReport;
use crate::stats::first_kinds;
use crate::whep::WhepSummary;

/// Subscribers on the sampled server below which an events run does not judge memory: the
/// server's RSS moves by whole pages and allocator arenas, so at a few dozen subscribers the
/// growth per subscriber is noise (20 subscribers and one 64 KiB arena read as 3 KiB each).
pub const MIN_SUBSCRIBERS_FOR_MEMORY: u64 = 500;

/// Whether an events run judges the server's memory: with a sample ([`SampleTarget`]
/// (crate::observe::sampler::SampleTarget)) and at least [`MIN_SUBSCRIBERS_FOR_MEMORY`]
/// subscribers on the sampled server.
pub fn memory_judged(on_sampled: u64, per_subscriber: Option<f64>) -> bool {
    per_subscriber.is_some() && on_sampled >= MIN_SUBSCRIBERS_FOR_MEMORY
}

/// The criteria an events run fails: every subscriber ready, no receipt missed, the p99
/// delivery latency within `max_latency_ms`, and (when judged, see [`memory_judged`]) the RSS
/// growth per subscriber within `max_rss`.
pub fn events_reasons(
    e: &EventsSummary,
    failures: &BTreeMap<String, u64>,
    max_latency_ms: f64,
    max_rss: f64,
    memory: bool,
) -> Vec<String> {
    let mut r = Vec::new();
    if e.ready < e.subscribers {
        let kinds = first_kinds(failures);
        r.push(format!(
            "{} of {} subscribers got their snapshot{}",
            e.ready,
            e.subscribers,
            if kinds.is_empty() {
                String::new()
            } else {
                format!("; failures: {kinds}")
            }
        ));
    }
    if e.missed > 0 {
        r.push(format!(
            "{} of {} title receipts missed",
            e.missed,
            e.received + e.missed
        ));
    }
    match e.latency_p99_ms {
        None => r.push("no title change was delivered (no latency measured)".into()),
        Some(p) if p > max_latency_ms => r.push(format!(
            "p99 delivery latency {p:.0} ms over the {max_latency_ms:.0} ms allowed"
        )),
        Some(_) => {}
    }
    if let Some(m) = e
        .server_rss_per_subscriber
        .filter(|m| memory && *m > max_rss)
    {
        r.push(format!(
            "server memory grew {m:.0} bytes per subscriber, over the {max_rss:.0} allowed"
        ));
    }
    r
}

/// The criteria a WHEP run fails: every viewer receiving, none failed, none degraded.
pub fn whep_reasons(w: &WhepSummary) -> Vec<String> {
    let mut r = Vec::new();
    if w.failed > 0 {
        r.push(format!("{} of {} viewers failed", w.failed, w.viewers));
    }
    if w.degraded > 0 {
        r.push(format!(
            "{} of {} viewers degraded (loss over 1 %, a gap over 200 ms, reordering or silence)",
            w.degraded, w.viewers
        ));
    }
    if w.receiving < w.viewers {
        r.push(format!(
            "{} of {} viewers receiving at the end",
            w.receiving, w.viewers
        ));
    }
    r
}

/// Every reason `report` FAILs: its summary's criteria, then its run errors (the first
/// three). Empty for a PASS.
pub fn reasons(report: &RunReport) -> Vec<String> {
    if report.summary.pass {
        return Vec::new();
    }
    let mut r = report.summary.fail_reasons.clone();
    for e in report.errors.iter().take(3) {
        r.push(format!("error: {e}"));
    }
    if report.errors.len() > 3 {
        r.push(format!("and {} more errors", report.errors.len() - 3));
    }
    if r.is_empty() {
        r.push("the verdict is FAIL (see report.json)".into());
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_not_judged_on_a_small_sample() {
        assert!(!memory_judged(20, Some(5000.0)));
        assert!(!memory_judged(10_000, None));
        assert!(memory_judged(MIN_SUBSCRIBERS_FOR_MEMORY, Some(5000.0)));
        let e = EventsSummary {
            subscribers: 20,
            ready: 20,
            received: 100,
            latency_p99_ms: Some(5.0),
            server_rss_per_subscriber: Some(3276.8),
            ..EventsSummary::default()
        };
        let none = BTreeMap::new();
        assert!(events_reasons(&e, &none, 1000.0, 1024.0, false).is_empty());
        let r = events_reasons(&e, &none, 1000.0, 1024.0, true);
        assert_eq!(r.len(), 1);
        assert!(r[0].contains("3277 bytes per subscriber"), "{r:?}");
        let slow = EventsSummary {
            latency_p99_ms: Some(1500.0),
            ready: 18,
            ..e
        };
        let r = events_reasons(&slow, &none, 1000.0, 1024.0, false);
        assert_eq!(r[0], "18 of 20 subscribers got their snapshot");
        assert!(r[1].starts_with("p99 delivery latency 1500 ms"));
    }
}
