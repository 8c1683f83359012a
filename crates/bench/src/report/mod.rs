//! The one report of every run, whatever its groups' modes: the summaries ([`summary`]), the
//! thresholds and the verdict ([`threshold`], [`verdict`]), and the files: `report.json`
//! (everything, the histograms whole), `report.html` (the verdict first, then the thresholds,
//! the groups, the summary table and the plots), the plots as SVG, a JUnit XML file for CI
//! systems ([`junit`]), and a plain-text (Markdown) summary table with ratios against the first
//! run that say which side is better.

pub mod figures;
pub mod html;
pub mod junit;
pub mod metrics;
pub mod modes;
pub mod plots;
pub mod progress;
pub mod summary;
pub mod threshold;
pub mod verdict;

use crate::report::metrics::{metric_cells, rows_for};
use crate::report::summary::RunReport;
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
    for (stem, svg) in crate::report::plots::all(runs) {
        write(&dir.join(format!("{prefix}{stem}.svg")), svg.as_bytes())?;
    }
    Ok(())
}

/// Reads back the `report.json` of one run (as [`write_run`] wrote it).
///
/// Errors: [`ReportError::Json`] when `json` is not such a report.
pub fn parse_run(json: &str) -> Result<RunReport, ReportError> {
    Ok(serde_json::from_str(json)?)
}

/// Writes `dir/report.json`, `dir/report.html` and the plots as `dir/plot-*.svg` for one run.
pub fn write_run(dir: &Path, r: &RunReport) -> Result<ReportPaths, ReportError> {
    let json = dir.join("report.json");
    let html = dir.join("report.html");
    write_svgs(dir, "plot-", &[r])?;
    write(&json, &serde_json::to_vec_pretty(r)?)?;
    write(
        &html,
        crate::report::html::render(&format!("throng bench: {}", r.name), &[r]).as_bytes(),
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
    write(&html, crate::report::html::render(&title, runs).as_bytes())?;
    Ok(ReportPaths { json, html })
}

/// A Markdown table of the runs' summaries, the verdict first; later runs get their ratio to
/// the first, saying which is better. Rows no run has a value for are left out.
pub fn summary_table(runs: &[&RunReport]) -> String {
    let mut out = String::from("| metric |");
    for r in runs {
        out.push_str(&format!(" {} |", r.name));
    }
    out.push_str("\n|---|");
    out.push_str(&"---:|".repeat(runs.len()));
    out.push_str("\n| verdict |");
    for r in runs {
        out.push_str(if r.summary.pass { " PASS |" } else { " FAIL |" });
    }
    out.push('\n');
    for m in rows_for(runs) {
        out.push_str(&format!("| {} |", m.label));
        for (cell, x) in metric_cells(runs, &m) {
            let x = x.map(|x| format!(" ({x})")).unwrap_or_default();
            out.push_str(&format!(" {cell}{x} |"));
        }
        out.push('\n');
    }
    out
}

/// The thresholds of a run, one per line, ✔ or ✘ with its value (the console's list).
pub fn threshold_lines(r: &RunReport) -> String {
    let mut out = String::new();
    for o in &r.thresholds {
        out.push_str(&o.line());
        if o.default {
            out.push_str("  (default)");
        }
        out.push('\n');
    }
    out
}

/// One line per group: its mode, listeners and verdict figures (the console's list of a run
/// of several groups; empty for one group).
pub fn group_lines(r: &RunReport) -> String {
    if r.groups.len() < 2 {
        return String::new();
    }
    let mut out = String::new();
    for g in &r.groups {
        let s = &g.summary;
        out.push_str(&format!(
            "group {} ({}): {} started, {} troubled ({} starved, {} corrupt, {} failed), media rate {}, p99 TTFB {}\n",
            g.name,
            g.mode,
            s.started,
            s.troubled,
            s.starved,
            s.corrupt,
            s.failed_listeners,
            s.media_rate.map_or("–".into(), |v| format!("{v:.3}")),
            s.ttfb_p99_ms.map_or("–".into(), verdict::ms_text)
        ));
    }
    out
}
