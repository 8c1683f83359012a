//! The metrics of the summary table, shared by the Markdown table and the HTML report: each
//! metric's label (with unit), how to read it from a run's [`Summary`], its decimals, and the
//! formatted cells of several runs with their ratios to the first run; then the rows only an
//! events or a WHEP run has ([`mode_rows`]).

use crate::events::subscriber::EventsSummary;
use crate::report::summary::{RunReport, Summary};
use crate::whep::WhepSummary;

/// One metric of the summary table: label, value extractor and decimal places.
pub struct Metric {
    /// Row label (with unit).
    pub label: &'static str,
    /// Value of a run, if known.
    pub get: fn(&Summary) -> Option<f64>,
    /// Decimal places.
    pub decimals: usize,
}

/// The metrics of the summary table, in order.
pub fn metrics() -> Vec<Metric> {
    fn f(v: u64) -> Option<f64> {
        Some(v as f64)
    }
    vec![
        Metric {
            label: "listeners asked",
            get: |s| f(s.listeners as u64),
            decimals: 0,
        },
        Metric {
            label: "peak streaming",
            get: |s| f(s.peak_streaming as u64),
            decimals: 0,
        },
        Metric {
            label: "streaming at end of hold",
            get: |s| f(s.final_streaming as u64),
            decimals: 0,
        },
        Metric {
            label: "starved listeners",
            get: |s| f(s.starved as u64),
            decimals: 0,
        },
        Metric {
            label: "failed connections",
            get: |s| f(s.failures_total),
            decimals: 0,
        },
        Metric {
            label: "delivered / expected bytes",
            get: |s| s.delivered_ratio,
            decimals: 3,
        },
        Metric {
            label: "delivered (Mbit/s)",
            get: |s| Some(s.delivered_mbps),
            decimals: 2,
        },
        Metric {
            label: "HLS requests per second",
            get: |s| s.requests_per_s,
            decimals: 0,
        },
        Metric {
            label: "origin HLS requests per second",
            get: |s| s.origin_requests_per_s,
            decimals: 2,
        },
        Metric {
            label: "origin HLS bytes per second",
            get: |s| s.origin_bytes_per_s,
            decimals: 0,
        },
        Metric {
            label: "TTFB p50 (ms)",
            get: |s| s.ttfb_p50_ms,
            decimals: 2,
        },
        Metric {
            label: "TTFB p99 (ms)",
            get: |s| s.ttfb_p99_ms,
            decimals: 2,
        },
        Metric {
            label: "TTFB max (ms)",
            get: |s| s.ttfb_max_ms,
            decimals: 1,
        },
        Metric {
            label: "TLS handshakes peak (/s)",
            get: |s| (s.tls_handshakes > 0).then_some(s.tls_handshakes_peak_per_s as f64),
            decimals: 0,
        },
        Metric {
            label: "TLS handshake p50 (ms)",
            get: |s| s.tls_handshake_p50_ms,
            decimals: 2,
        },
        Metric {
            label: "TLS handshake p99 (ms)",
            get: |s| s.tls_handshake_p99_ms,
            decimals: 2,
        },
        Metric {
            label: "longest gap p99 (ms)",
            get: |s| s.longest_gap_p99_ms,
            decimals: 0,
        },
        Metric {
            label: "server CPU user (% core)",
            get: |s| s.server_cpu_user_pct,
            decimals: 1,
        },
        Metric {
            label: "server CPU system (% core)",
            get: |s| s.server_cpu_sys_pct,
            decimals: 1,
        },
        Metric {
            label: "server CPU per 1k listeners (% core)",
            get: |s| s.server_cpu_pct_per_1000,
            decimals: 2,
        },
        Metric {
            label: "server RSS max (MB)",
            get: |s| s.server_rss_max.map(|v| v as f64 / 1e6),
            decimals: 1,
        },
        Metric {
            label: "server RSS per listener (KiB)",
            get: |s| s.server_rss_per_listener.map(|v| v / 1024.0),
            decimals: 2,
        },
        Metric {
            label: "server threads max",
            get: |s| s.server_threads_max.map(|v| v as f64),
            decimals: 0,
        },
        Metric {
            label: "server fds max",
            get: |s| s.server_fds_max.map(|v| v as f64),
            decimals: 0,
        },
        Metric {
            label: "frames checked (sampled listeners)",
            get: |s| f(s.frames_checked),
            decimals: 0,
        },
        Metric {
            label: "garbage bytes before frame sync",
            get: |s| f(s.garbage_bytes),
            decimals: 0,
        },
        Metric {
            label: "bench CPU per 1k listeners (% core)",
            get: |s| s.bench_cpu_pct_per_1000,
            decimals: 2,
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

/// Ratio of run `i` to run 0 as text (`×1.23`), when both are known and nonzero.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) if a != 0.0 => Some(format!("×{:.2}", b / a)),
        _ => None,
    }
}

/// Each run's value of metric `m`, formatted, with (for every run after the first) its ratio to
/// the first run's value.
pub fn metric_cells(runs: &[&RunReport], m: &Metric) -> Vec<(String, Option<String>)> {
    let first = runs.first().and_then(|r| (m.get)(&r.summary));
    runs.iter()
        .enumerate()
        .map(|(i, r)| {
            let v = (m.get)(&r.summary);
            let x = if i > 0 { ratio(first, v) } else { None };
            (fmt_value(v, m.decimals), x)
        })
        .collect()
}

/// A value in ms with one decimal, or `-`.
fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

/// The rows the runs' modes add to the summary table (events delivery, WHEP viewers), each a
/// label and one cell per run (`-` for a run of another mode); none when no run has them.
pub fn mode_rows(runs: &[&RunReport]) -> Vec<(&'static str, Vec<String>)> {
    let mut out = Vec::new();
    if runs.iter().any(|r| r.events.is_some()) {
        type Cell = fn(&EventsSummary) -> String;
        let rows: [(&str, Cell); 7] = [
            ("event subscribers ready", |e| {
                format!("{} / {}", e.ready, e.subscribers)
            }),
            ("title changes", |e| e.changes.to_string()),
            ("receipts missed", |e| e.missed.to_string()),
            ("delivery p50 (ms)", |e| ms(e.latency_p50_ms)),
            ("delivery p99 (ms)", |e| ms(e.latency_p99_ms)),
            ("delivery max (ms)", |e| ms(e.latency_max_ms)),
            ("server RSS growth per subscriber (B)", |e| {
                e.server_rss_per_subscriber
                    .map_or("-".into(), |v| format!("{v:.0}"))
            }),
        ];
        for (label, cell) in rows {
            let cells = runs
                .iter()
                .map(|r| r.events.as_ref().map_or("-".into(), cell));
            out.push((label, cells.collect()));
        }
    }
    if runs.iter().any(|r| r.whep.is_some()) {
        type Cell = fn(&WhepSummary) -> String;
        let rows: [(&str, Cell); 10] = [
            ("WHEP viewers receiving", |w| {
                format!("{} / {}", w.receiving, w.viewers)
            }),
            ("WHEP viewers degraded", |w| {
                let by: Vec<String> = w
                    .degraded_by
                    .iter()
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect();
                if by.is_empty() {
                    w.degraded.to_string()
                } else {
                    format!("{} ({})", w.degraded, by.join(", "))
                }
            }),
            ("WHEP setup p50 (ms)", |w| format!("{:.0}", w.setup_p50_ms)),
            ("WHEP setup p99 (ms)", |w| format!("{:.0}", w.setup_p99_ms)),
            ("packets per viewer-second (50 expected)", |w| {
                format!("{:.1}", w.packets_per_viewer_second)
            }),
            ("mouth-to-ear latency p50 (ms)", |w| ms(w.latency_p50_ms)),
            ("mouth-to-ear latency p99 (ms)", |w| ms(w.latency_p99_ms)),
            ("bench CPU per viewer-second (µs)", |w| {
                format!("{:.1}", w.client_cpu_us_per_viewer_second)
            }),
            ("server CPU per viewer-second (µs)", |w| {
                w.server_cpu_us_per_viewer_second
                    .map_or("-".into(), |v| format!("{v:.1}"))
            }),
            ("server RSS growth per viewer (B)", |w| {
                w.server_rss_per_viewer
                    .map_or("-".into(), |v| format!("{v:.0}"))
            }),
        ];
        for (label, cell) in rows {
            let cells = runs
                .iter()
                .map(|r| r.whep.as_ref().map_or("-".into(), cell));
            out.push((label, cells.collect()));
        }
    }
    out
}
