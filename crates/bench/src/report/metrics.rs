//! The rows of the summary table, shared by the Markdown table and the HTML report: each
//! metric's label (with unit), how to read it from a [`Summary`], its decimals and which way is
//! better; a row no run has a value for is left out (an ICY run shows no HLS or WebRTC row).
//! In a comparison every run after the first gets its ratio to the first, saying whether it is
//! better or worse (`×0.31 better`).

use crate::report::summary::{RunReport, Summary};

/// Which way a metric is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    /// Less is better (time, CPU, memory, failures).
    Lower,
    /// More is better (listeners streaming, media rate).
    Higher,
    /// Neither (a count asked for, a measured bitrate).
    Neither,
}

/// One row of the summary table.
pub struct Metric {
    /// Row label (with unit).
    pub label: &'static str,
    /// Value of a run, if it has one.
    pub get: fn(&Summary) -> Option<f64>,
    /// Decimal places.
    pub decimals: usize,
    /// Which way is better.
    pub better: Better,
}

fn some_if(v: f64, cond: bool) -> Option<f64> {
    cond.then_some(v)
}

/// The rows of the summary table, in order.
pub fn metrics() -> Vec<Metric> {
    use Better::*;
    fn f(v: u64) -> Option<f64> {
        Some(v as f64)
    }
    vec![
        Metric {
            label: "listeners asked (peak)",
            get: |s| f(u64::from(s.listeners)),
            decimals: 0,
            better: Neither,
        },
        Metric {
            label: "peak streaming",
            get: |s| f(u64::from(s.peak_streaming)),
            decimals: 0,
            better: Higher,
        },
        Metric {
            label: "streaming at the end",
            get: |s| f(u64::from(s.final_streaming)),
            decimals: 0,
            better: Higher,
        },
        Metric {
            label: "starved listeners",
            get: |s| f(u64::from(s.starved)),
            decimals: 0,
            better: Lower,
        },
        Metric {
            label: "  starved: rate",
            get: |s| some_if(f64::from(s.starved_rate), s.starved_rate > 0),
            decimals: 0,
            better: Lower,
        },
        Metric {
            label: "  starved: gap",
            get: |s| some_if(f64::from(s.starved_gap), s.starved_gap > 0),
            decimals: 0,
            better: Lower,
        },
        Metric {
            label: "  starved: loss",
            get: |s| some_if(f64::from(s.starved_loss), s.starved_loss > 0),
            decimals: 0,
            better: Lower,
        },
        Metric {
            label: "corrupt listeners",
            get: |s| f(u64::from(s.corrupt)),
            decimals: 0,
            better: Lower,
        },
        Metric {
            label: "failed connections",
            get: |s| f(s.failures_total),
            decimals: 0,
            better: Lower,
        },
        Metric {
            label: "media rate (1 = real time)",
            get: |s| s.media_rate,
            decimals: 3,
            better: Higher,
        },
        Metric {
            label: "bitrate as delivered (kbit/s)",
            get: |s| s.bitrate_kbps_measured,
            decimals: 1,
            better: Neither,
        },
        Metric {
            label: "delivered (Mbit/s)",
            get: |s| some_if(s.delivered_mbps, s.delivered_mbps > 0.0),
            decimals: 2,
            better: Neither,
        },
        Metric {
            label: "HLS requests per second",
            get: |s| s.requests_per_s,
            decimals: 0,
            better: Neither,
        },
        Metric {
            label: "origin HLS requests per second",
            get: |s| s.origin_requests_per_s,
            decimals: 2,
            better: Lower,
        },
        Metric {
            label: "origin HLS bytes per second",
            get: |s| s.origin_bytes_per_s,
            decimals: 0,
            better: Lower,
        },
        Metric {
            label: "TTFB p50 (ms)",
            get: |s| s.ttfb_p50_ms,
            decimals: 2,
            better: Lower,
        },
        Metric {
            label: "TTFB p99 (ms)",
            get: |s| s.ttfb_p99_ms,
            decimals: 2,
            better: Lower,
        },
        Metric {
            label: "TTFB max (ms)",
            get: |s| s.ttfb_max_ms,
            decimals: 1,
            better: Lower,
        },
        Metric {
            label: "TLS handshake p50 (ms)",
            get: |s| s.tls_handshake_p50_ms,
            decimals: 2,
            better: Lower,
        },
        Metric {
            label: "TLS handshake p99 (ms)",
            get: |s| s.tls_handshake_p99_ms,
            decimals: 2,
            better: Lower,
        },
        Metric {
            label: "gap between arrivals p99 (ms)",
            get: |s| s.gap_p99_ms,
            decimals: 0,
            better: Lower,
        },
        Metric {
            label: "longest gap per session p99 (ms)",
            get: |s| s.longest_gap_p99_ms,
            decimals: 0,
            better: Lower,
        },
        Metric {
            label: "mouth-to-ear p50 (ms)",
            get: |s| s.m2e_p50_ms,
            decimals: 1,
            better: Lower,
        },
        Metric {
            label: "mouth-to-ear p99 (ms)",
            get: |s| s.m2e_p99_ms,
            decimals: 1,
            better: Lower,
        },
        Metric {
            label: "event delivery p50 (ms)",
            get: |s| s.event_latency_p50_ms,
            decimals: 1,
            better: Lower,
        },
        Metric {
            label: "event delivery p99 (ms)",
            get: |s| s.event_latency_p99_ms,
            decimals: 1,
            better: Lower,
        },
        Metric {
            label: "title receipts missed",
            get: |s| some_if(s.missed as f64, s.receipts + s.missed > 0),
            decimals: 0,
            better: Lower,
        },
        Metric {
            label: "RTP packets lost",
            get: |s| some_if(s.lost_units as f64, s.lost_units > 0),
            decimals: 0,
            better: Lower,
        },
        Metric {
            label: "server CPU user (% core)",
            get: |s| s.server_cpu_user_pct,
            decimals: 1,
            better: Lower,
        },
        Metric {
            label: "server CPU system (% core)",
            get: |s| s.server_cpu_sys_pct,
            decimals: 1,
            better: Lower,
        },
        Metric {
            label: "server CPU per 1k listeners (% core)",
            get: |s| s.server_cpu_pct_per_1000,
            decimals: 2,
            better: Lower,
        },
        Metric {
            label: "server CPU per listener-second (µs)",
            get: |s| s.server_cpu_us_per_listener_second,
            decimals: 2,
            better: Lower,
        },
        Metric {
            label: "server RSS max (MB)",
            get: |s| s.server_rss_max.map(|v| v as f64 / 1e6),
            decimals: 1,
            better: Lower,
        },
        Metric {
            label: "server RSS per listener (KiB)",
            get: |s| s.server_rss_per_listener.map(|v| v / 1024.0),
            decimals: 2,
            better: Lower,
        },
        Metric {
            label: "server threads max",
            get: |s| s.server_threads_max.map(|v| v as f64),
            decimals: 0,
            better: Neither,
        },
        Metric {
            label: "server fds max",
            get: |s| s.server_fds_max.map(|v| v as f64),
            decimals: 0,
            better: Neither,
        },
        Metric {
            label: "stalled listeners (on purpose)",
            get: |s| some_if(f64::from(s.stalled), s.stalled > 0 || s.stalled_dropped > 0),
            decimals: 0,
            better: Neither,
        },
        Metric {
            label: "  dropped by the server",
            get: |s| {
                some_if(
                    f64::from(s.stalled_dropped),
                    s.stalled > 0 || s.stalled_dropped > 0,
                )
            },
            decimals: 0,
            better: Neither,
        },
        Metric {
            label: "  dropped after, median (s)",
            get: |s| s.stalled_drop_p50_ms.map(|v| v / 1000.0),
            decimals: 1,
            better: Lower,
        },
        Metric {
            label: "  held unread, most (KiB)",
            get: |s| some_if(s.stalled_held_bytes_max as f64 / 1024.0, s.stalled > 0),
            decimals: 0,
            better: Neither,
        },
        Metric {
            label: "media units checked",
            get: |s| f(s.frames_checked),
            decimals: 0,
            better: Neither,
        },
        Metric {
            label: "ICY metadata blocks checked",
            get: |s| some_if(s.icy_blocks as f64, s.icy_blocks > 0),
            decimals: 0,
            better: Neither,
        },
        Metric {
            label: "garbage bytes before frame sync",
            get: |s| some_if(s.garbage_bytes as f64, s.garbage_bytes > 0),
            decimals: 0,
            better: Lower,
        },
        Metric {
            label: "bench CPU per 1k listeners (% core)",
            get: |s| s.bench_cpu_pct_per_1000,
            decimals: 2,
            better: Lower,
        },
        Metric {
            label: "bench CPU per listener-second (µs)",
            get: |s| s.bench_cpu_us_per_listener_second,
            decimals: 2,
            better: Lower,
        },
    ]
}

/// Formats a value, or `–` when unknown.
pub fn fmt_value(v: Option<f64>, decimals: usize) -> String {
    match v {
        Some(x) => format!("{x:.decimals$}"),
        None => "–".into(),
    }
}

/// Ratio of `b` (a later run) to `a` (the first) as text, saying which is better
/// (`×0.31 better`, `×2.10 worse`, `×1.00 same`), when both are known and `a` is not 0.
pub fn ratio(a: Option<f64>, b: Option<f64>, better: Better) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) if a != 0.0 => {
            let x = b / a;
            let word = if (x - 1.0).abs() < 0.005 {
                "same"
            } else {
                match (better, x > 1.0) {
                    (Better::Lower, true) | (Better::Higher, false) => "worse",
                    (Better::Lower, false) | (Better::Higher, true) => "better",
                    (Better::Neither, _) => "",
                }
            };
            Some(format!("×{x:.2} {word}").trim_end().to_owned())
        }
        _ => None,
    }
}

/// The rows that apply to `runs`: those at least one run has a value for.
pub fn rows_for(runs: &[&RunReport]) -> Vec<Metric> {
    metrics()
        .into_iter()
        .filter(|m| runs.iter().any(|r| (m.get)(&r.summary).is_some()))
        .collect()
}

/// Each run's value of row `m`, formatted, with (for every run after the first) its ratio to
/// the first run's value.
pub fn metric_cells(runs: &[&RunReport], m: &Metric) -> Vec<(String, Option<String>)> {
    let first = runs.first().and_then(|r| (m.get)(&r.summary));
    runs.iter()
        .enumerate()
        .map(|(i, r)| {
            let v = (m.get)(&r.summary);
            let x = if i > 0 {
                ratio(first, v, m.better)
            } else {
                None
            };
            (fmt_value(v, m.decimals), x)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_say_which_way_is_better() {
        assert_eq!(
            ratio(Some(10.0), Some(3.1), Better::Lower).unwrap(),
            "×0.31 better"
        );
        assert_eq!(
            ratio(Some(10.0), Some(21.0), Better::Lower).unwrap(),
            "×2.10 worse"
        );
        assert_eq!(
            ratio(Some(100.0), Some(50.0), Better::Higher).unwrap(),
            "×0.50 worse"
        );
        assert_eq!(
            ratio(Some(1.0), Some(1.001), Better::Higher).unwrap(),
            "×1.00 same"
        );
        assert_eq!(
            ratio(Some(64.0), Some(128.0), Better::Neither).unwrap(),
            "×2.00"
        );
        assert_eq!(ratio(Some(0.0), Some(1.0), Better::Lower), None);
    }

    #[test]
    fn rows_without_a_value_are_left_out() {
        let r = RunReport::default();
        let labels: Vec<&str> = rows_for(&[&r]).iter().map(|m| m.label).collect();
        assert!(labels.contains(&"starved listeners"));
        assert!(!labels.contains(&"HLS requests per second"));
        assert!(!labels.contains(&"mouth-to-ear p99 (ms)"));
    }
}
