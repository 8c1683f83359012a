//! Writing reports: `report.json` (timeline and summary) and `report.html`, plus a plain-text
//! (Markdown) summary table with ratios against the first run.

use crate::summary::{RunReport, Summary};
use serde::Serialize;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Where a report was written.
#[derive(Debug, Clone)]
pub struct ReportPaths {
    /// The JSON file.
    pub json: PathBuf,
    /// The HTML file.
    pub html: PathBuf,
}

/// Report writing errors.
#[derive(Debug, Error)]
pub enum ReportError {
    /// A file could not be written.
    #[error("writing {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// JSON encoding failed.
    #[error("encoding JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// The JSON of a comparison: every run in order.
#[derive(Debug, Serialize)]
pub struct CompareJson<'a> {
    /// Scenario file.
    pub scenario: String,
    /// The runs.
    pub runs: Vec<&'a RunReport>,
}

fn write(path: &Path, data: &[u8]) -> Result<(), ReportError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| ReportError::Io {
            path: dir.into(),
            source,
        })?;
    }
    std::fs::write(path, data).map_err(|source| ReportError::Io {
        path: path.into(),
        source,
    })
}

/// Writes every plot as `dir/<prefix><plot>.svg` (for embedding in other documents).
fn write_svgs(dir: &Path, prefix: &str, runs: &[&RunReport]) -> Result<(), ReportError> {
    for (stem, svg) in crate::plots::all(runs) {
        write(&dir.join(format!("{prefix}{stem}.svg")), svg.as_bytes())?;
    }
    Ok(())
}

/// Writes `dir/report.json`, `dir/report.html` and the plots as `dir/plot-*.svg` for one run.
pub fn write_run(dir: &Path, r: &RunReport) -> Result<ReportPaths, ReportError> {
    let json = dir.join("report.json");
    let html = dir.join("report.html");
    write_svgs(dir, "plot-", &[r])?;
    write(&json, &serde_json::to_vec_pretty(r)?)?;
    write(
        &html,
        crate::report_html::render(&format!("throng bench: {}", r.name), &[r]).as_bytes(),
    )?;
    Ok(ReportPaths { json, html })
}

/// Writes `dir/compare.json`, `dir/compare.html` and `dir/compare-*.svg` for several runs.
pub fn write_compare(
    dir: &Path,
    scenario: &str,
    runs: &[&RunReport],
) -> Result<ReportPaths, ReportError> {
    let json = dir.join("compare.json");
    let html = dir.join("compare.html");
    write_svgs(dir, "compare-", runs)?;
    let doc = CompareJson {
        scenario: scenario.to_owned(),
        runs: runs.to_vec(),
    };
    write(&json, &serde_json::to_vec_pretty(&doc)?)?;
    let title = format!(
        "throng bench compare: {}",
        runs.iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>()
            .join(" vs ")
    );
    write(&html, crate::report_html::render(&title, runs).as_bytes())?;
    Ok(ReportPaths { json, html })
}

/// One metric of the summary table: label, value extractor, format, lower-is-better.
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

/// A Markdown table of the runs' summaries; later runs get their ratio to the first.
pub fn summary_table(runs: &[&RunReport]) -> String {
    let mut out = String::from("| metric |");
    for r in runs {
        out.push_str(&format!(" {} |", r.name));
    }
    out.push_str("\n|---|");
    out.push_str(&"---:|".repeat(runs.len()));
    out.push('\n');
    for m in metrics() {
        out.push_str(&format!("| {} |", m.label));
        for (cell, x) in metric_cells(runs, &m) {
            let x = x.map(|x| format!(" ({x})")).unwrap_or_default();
            out.push_str(&format!(" {cell}{x} |"));
        }
        out.push('\n');
    }
    out.push_str("| verdict |");
    for r in runs {
        out.push_str(if r.summary.pass { " PASS |" } else { " FAIL |" });
    }
    out.push('\n');
    out
}
