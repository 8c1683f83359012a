//! The self-contained HTML report, answer first: the verdict in one sentence is its first line,
//! then why it failed (if it did), the thresholds ✔/✘ with their values, each group's figures,
//! when, where and how it was run (date, host, bench version, command line, each server's
//! `Server` header), the summary table (rows that apply only; ratios that say better or worse
//! in a comparison), the agents of a run over several machines, the plots inline as SVG, errors,
//! and the configuration (no external files or scripts).

use crate::report::metrics::{metric_cells, rows_for};
use crate::report::plots;
use crate::report::summary::RunReport;
use crate::report::verdict::ms_text;

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or("–".into(), f)
}

/// Renders the report of one run or a comparison of several.
pub fn render(title: &str, runs: &[&RunReport]) -> String {
    let mut h = String::new();
    h.push_str(&format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n<style>\
body{{font-family:system-ui,sans-serif;margin:2em auto;max-width:1600px;color:#222}}\
table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:4px 10px}}\
td.n{{text-align:right;font-variant-numeric:tabular-nums}}.pass{{color:#080;font-weight:bold}}\
.fail{{color:#b00;font-weight:bold}}p.verdict{{font-size:1.4em;margin:0 0 .5em}}\
.plots{{display:flex;flex-wrap:wrap;gap:12px}}\
.plots figure{{margin:0}}table.meta th{{text-align:left}}pre{{background:#f6f6f6;padding:8px;overflow:auto}}\
</style></head><body>\n",
        esc(title)
    ));
    // The answer, first.
    for r in runs {
        let class = if r.summary.pass { "pass" } else { "fail" };
        let who = if runs.len() > 1 {
            format!("{}: ", esc(&r.name))
        } else {
            String::new()
        };
        h.push_str(&format!(
            "<p class=\"verdict {class}\">{who}{}</p>\n",
            esc(&r.verdict)
        ));
    }
    h.push_str(&format!("<h1>{}</h1>\n", esc(title)));
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
    // Thresholds.
    for r in runs {
        if r.thresholds.is_empty() {
            continue;
        }
        h.push_str(&format!(
            "<h2>Thresholds{}</h2>\n<table class=\"thresholds\"><tr><th></th><th>threshold</th><th>value</th><th></th></tr>\n",
            if runs.len() > 1 {
                format!(": {}", esc(&r.name))
            } else {
                String::new()
            }
        ));
        for o in &r.thresholds {
            h.push_str(&format!(
                "<tr><td class=\"{}\">{}</td><td><code>{}</code></td><td class=\"n\">{}</td><td>{}</td></tr>\n",
                if o.pass { "pass" } else { "fail" },
                if o.pass { "✔" } else { "✘" },
                esc(&o.name),
                esc(&o.value_text),
                if o.default { "default" } else { "" }
            ));
        }
        h.push_str("</table>\n");
    }
    // Groups.
    for r in runs {
        if r.groups.len() < 2 {
            continue;
        }
        h.push_str(
            "<h2>Groups</h2>\n<table class=\"groups\"><tr><th>group</th><th>mode</th><th>peak</th>\
<th>started</th><th>streaming at end</th><th>starved</th><th>corrupt</th><th>failed</th>\
<th>media rate</th><th>p99 TTFB</th><th>p99 mouth-to-ear</th><th>p99 event delivery</th></tr>\n",
        );
        for g in &r.groups {
            let s = &g.summary;
            h.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
                esc(&g.name),
                g.mode,
                s.listeners,
                s.started,
                s.final_streaming,
                s.starved,
                s.corrupt,
                s.failed_listeners,
                opt(s.media_rate, |v| format!("{v:.3}")),
                opt(s.ttfb_p99_ms, ms_text),
                opt(s.m2e_p99_ms, ms_text),
                opt(s.event_latency_p99_ms, ms_text),
            ));
        }
        h.push_str("</table>\n");
    }
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
        "<p>Every listener's audio is verified as it arrives: frames chained by their lengths, \
Ogg pages by CRC and sequence, HLS segments by sequence and timestamp, RTP packets by sequence \
and timestamp. A listener is <b>starved</b> when the media time it gets over the window falls \
below the minimum share of real time (<i>rate</i>), when it waits longer than the player's \
buffer (<i>gap</i>), or when WebRTC packets go missing (<i>loss</i>); <b>corrupt</b> when its \
frames do not chain. CPU is in percent of one core.</p>\n",
    );
    // Summary table.
    h.push_str("<h2>Summary</h2>\n<table class=\"summary\"><tr><th>metric</th>");
    for r in runs {
        h.push_str(&format!("<th>{}</th>", esc(&r.name)));
    }
    h.push_str("</tr>\n<tr><td>verdict</td>");
    for r in runs {
        h.push_str(if r.summary.pass {
            "<td class=\"pass\">PASS</td>"
        } else {
            "<td class=\"fail\">FAIL</td>"
        });
    }
    h.push_str("</tr>\n");
    for m in rows_for(runs) {
        h.push_str(&format!("<tr><td>{}</td>", esc(m.label)));
        for (cell, x) in metric_cells(runs, &m) {
            let x = x
                .map(|x| format!(" <small>({})</small>", esc(&x)))
                .unwrap_or_default();
            h.push_str(&format!("<td class=\"n\">{cell}{x}</td>"));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
    for r in runs {
        if let Some(w) = &r.whep {
            h.push_str(&format!(
                "<h3>{}: WebRTC viewers</h3><pre>{}</pre>\n",
                esc(&r.name),
                esc(&crate::whep::summary_text(w))
            ));
        }
        if !r.notes.is_empty() {
            h.push_str(&format!("<h3>{}: notes</h3>\n<ul>", esc(&r.name)));
            for n in &r.notes {
                h.push_str(&format!("<li>{}</li>", esc(n)));
            }
            h.push_str("</ul>\n");
        }
        if !r.agents.is_empty() {
            h.push_str(&format!(
                "<h3>{}: agents</h3>\n<pre>{}</pre>\n",
                esc(&r.name),
                esc(&serde_json::to_string_pretty(&r.agents).unwrap_or_default())
            ));
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
            "<h3>{}</h3><p>groups: {}; worker processes: {}</p>\n",
            esc(&r.name),
            esc(&r
                .groups
                .iter()
                .map(|g| format!("{} ({}, {})", g.name, g.mode, g.urls.join(" ")))
                .collect::<Vec<_>>()
                .join("; ")),
            r.workers,
        ));
        if let Some(p) = r.profile.as_ref().and_then(|p| toml::to_string(p).ok()) {
            h.push_str(&format!("<pre>{}</pre>\n", esc(&p)));
        }
        if let Some(s) = &r.scenario {
            h.push_str(&format!("<p>scenario: <code>{}</code></p>\n", esc(s)));
        }
    }
    h.push_str("</body></html>\n");
    h
}
