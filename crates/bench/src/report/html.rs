//! The self-contained HTML report: when, where and how it was run (date, host, bench version,
//! command line, each server's `Server` header), summary table (with ratios in a comparison),
//! failures, errors, the profile, and the SVG plots inline (no external files or scripts).

use crate::mode::Mode;
use crate::report::metrics::{metric_cells, metrics, mode_rows};
use crate::report::plots;
use crate::report::summary::RunReport;

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Renders the report of one run or a comparison of several.
pub fn render(title: &str, runs: &[&RunReport]) -> String {
    let mut h = String::new();
    h.push_str(&format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n<style>\
body{{font-family:system-ui,sans-serif;margin:2em auto;max-width:1600px;color:#222}}\
table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:4px 10px}}\
td.n{{text-align:right;font-variant-numeric:tabular-nums}}.pass{{color:#080;font-weight:bold}}\
.fail{{color:#b00;font-weight:bold}}.plots{{display:flex;flex-wrap:wrap;gap:12px}}\
.plots figure{{margin:0}}table.meta th{{text-align:left}}pre{{background:#f6f6f6;padding:8px;overflow:auto}}\
</style></head><body>\n<h1>{}</h1>\n",
        esc(title),
        esc(title)
    ));
    // The run's circumstances: what one needs to compare two reports weeks apart.
    if let Some(first) = runs.first() {
        let m = &first.meta;
        h.push_str(&format!(
            "<table class=\"meta\"><tr><th>date (UTC)</th><td>{}</td></tr>\
<tr><th>host</th><td>{}</td></tr><tr><th>bench</th><td>throng-bench {}</td></tr>\
<tr><th>command line</th><td><code>{}</code></td></tr>\n",
            esc(&m.started),
            esc(&m.host),
            esc(&m.bench_version),
            esc(&m.command_line)
        ));
        for r in runs {
            h.push_str(&format!(
                "<tr><th>server {}</th><td>{}</td></tr>\n",
                esc(&r.name),
                esc(r.meta.server.as_deref().unwrap_or("(no Server header)"))
            ));
        }
        h.push_str("</table>\n");
    }
    h.push_str(
        "<p>A listener is <b>starved</b> when it gets less than the minimum share of the \
stream bitrate over the sliding window, or waits longer than the maximum gap between reads. \
CPU is in percent of one core.</p>\n",
    );
    if runs.iter().any(|r| r.mode == Mode::Events) {
        h.push_str(
            "<p>In an events run the listeners are event-stream subscribers: streaming means \
subscribed with the snapshot received, and TTFB is the time from connect to snapshot.</p>\n",
        );
    }
    if runs.iter().any(|r| r.mode == Mode::Whep) {
        h.push_str(
            "<p>In a WHEP run the listeners are WebRTC viewers: streaming means receiving \
media, starved means degraded (a 5 s window with over 1 % loss or a gap over 200 ms, packets \
out of order, or silent at the end), and TTFB is the setup time, POST to first packet.</p>\n",
        );
    }
    // Summary table.
    h.push_str("<h2>Summary</h2>\n<table><tr><th>metric</th>");
    for r in runs {
        h.push_str(&format!("<th>{}</th>", esc(&r.name)));
    }
    h.push_str("</tr>\n");
    for m in metrics() {
        h.push_str(&format!("<tr><td>{}</td>", esc(m.label)));
        for (cell, x) in metric_cells(runs, &m) {
            let x = x
                .map(|x| format!(" <small>({x})</small>"))
                .unwrap_or_default();
            h.push_str(&format!("<td class=\"n\">{cell}{x}</td>"));
        }
        h.push_str("</tr>\n");
    }
    for (label, cells) in mode_rows(runs) {
        h.push_str(&format!("<tr><td>{}</td>", esc(label)));
        for c in cells {
            h.push_str(&format!("<td class=\"n\">{}</td>", esc(&c)));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("<tr><td>verdict</td>");
    for r in runs {
        h.push_str(if r.summary.pass {
            "<td class=\"pass\">PASS</td>"
        } else {
            "<td class=\"fail\">FAIL</td>"
        });
    }
    h.push_str("</tr></table>\n");
    // Why a run failed, above the plots.
    for r in runs {
        let why = crate::report::verdict::reasons(r);
        if !why.is_empty() {
            h.push_str(&format!(
                "<p class=\"fail\">{} FAILED:</p>\n<ul class=\"fail-reasons\">",
                esc(&r.name)
            ));
            for w in why {
                h.push_str(&format!("<li>{}</li>", esc(&w)));
            }
            h.push_str("</ul>\n");
        }
    }
    // Plots.
    h.push_str("<h2>Plots</h2>\n<div class=\"plots\">\n");
    for (_, f) in plots::all(runs) {
        h.push_str("<figure>");
        h.push_str(&f);
        h.push_str("</figure>\n");
    }
    h.push_str("</div>\n");
    // Failures and errors.
    for r in runs {
        if !r.summary.failures.is_empty() || !r.errors.is_empty() {
            h.push_str(&format!(
                "<h3>{}: failures and errors</h3>\n<ul>",
                esc(&r.name)
            ));
            for (k, v) in &r.summary.failures {
                h.push_str(&format!("<li>{}: {v}</li>", esc(k)));
            }
            for e in &r.errors {
                h.push_str(&format!("<li>{}</li>", esc(e)));
            }
            h.push_str("</ul>\n");
        }
    }
    // Configuration.
    h.push_str("<h2>Configuration</h2>\n");
    for r in runs {
        h.push_str(&format!(
            "<h3>{}</h3><p>mode: {}; URLs: {}; worker processes: {}</p><pre>{}</pre>\n",
            esc(&r.name),
            r.mode,
            esc(&r.urls.join(", ")),
            r.workers,
            esc(&r
                .profile
                .as_ref()
                .and_then(|p| toml::to_string(p).ok())
                .unwrap_or_default())
        ));
    }
    h.push_str("</body></html>\n");
    h
}
