//! SVG plots of one or several runs (plotters' SVG backend, inline in the HTML report).
//!
//! The graphs of the classic Icecast and RSAS load-test reports: listeners over time, server CPU
//! (user and system) against listeners, delivered versus expected bandwidth against listeners,
//! starved listeners against listeners, and the TTFB distribution. Several runs share one graph,
//! one colour per run.

use crate::report::summary::{Row, RunReport};
use crate::stats::{bucket_lower_us, HIST_BUCKETS};
use plotters::prelude::*;

/// Plot size (pixels).
pub const SIZE: (u32, u32) = (760, 380);

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

/// The colour of run `i`.
pub fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

/// Colour of series kind `kind` (0 = main) of run `i`: one colour per kind for a single run,
/// one colour per run (kinds told apart by markers) in a comparison.
fn kind_color(runs: &[&RunReport], i: usize, kind: usize) -> RGBColor {
    if runs.len() == 1 {
        color(kind)
    } else {
        color(i)
    }
}

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// Line colour.
    pub color: RGBColor,
    /// Draw markers on the points (to tell a secondary series from the main one).
    pub markers: bool,
    /// Thin line (secondary series).
    pub thin: bool,
    /// `(x, y)` points in drawing order.
    pub points: Vec<(f64, f64)>,
}

/// Draws a line chart as an SVG document. `x_log10` means x values are `log10(x)` and ticks are
/// labelled with `10^v`.
pub fn line_chart(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    x_log10: bool,
) -> String {
    let mut svg = String::new();
    let _ = draw(&mut svg, title, x_desc, y_desc, series, x_log10);
    svg
}

fn draw(
    svg: &mut String,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    x_log10: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let pts = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0f64);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1) = (0.0, 1.0);
    }
    if !x_log10 {
        x0 = x0.min(0.0);
    }
    if x1 - x0 < 1e-9 {
        x1 = x0 + 1.0;
    }
    let y1 = if y1 <= 0.0 { 1.0 } else { y1 * 1.08 };
    let root = SVGBackend::with_string(svg, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, 0f64..y1)?;
    let fmt_x = |v: &f64| {
        if x_log10 {
            let ms = 10f64.powf(*v);
            if ms >= 10.0 {
                format!("{ms:.0}")
            } else {
                format!("{ms:.2}")
            }
        } else {
            format_num(*v)
        }
    };
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&fmt_x)
        .y_label_formatter(&|v| format_num(*v))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    for s in series {
        let style = ShapeStyle {
            color: s.color.to_rgba(),
            filled: false,
            stroke_width: if s.thin { 1 } else { 3 },
        };
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), style))?
            .label(s.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
        if s.markers {
            chart.draw_series(
                s.points
                    .iter()
                    .map(|&(x, y)| Circle::new((x, y), 2, s.color.filled())),
            )?;
        }
    }
    if !series.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(200, 200, 200))
            .draw()?;
    }
    root.present()?;
    Ok(())
}

fn format_num(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

fn rows(r: &RunReport) -> impl Iterator<Item = &Row> {
    r.timeline.iter()
}

fn label(runs: &[&RunReport], i: usize, what: &str) -> String {
    if runs.len() == 1 {
        what.to_owned()
    } else {
        format!("{} {what}", runs[i].name)
    }
}

/// Listeners streaming, starved and failed over time.
pub fn listeners_over_time(runs: &[&RunReport]) -> String {
    let mut s = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        s.push(Series {
            name: label(runs, i, "streaming"),
            color: color(i),
            markers: false,
            thin: false,
            points: rows(r)
                .map(|x| (x.second as f64, x.counts.streaming as f64))
                .collect(),
        });
        s.push(Series {
            name: label(runs, i, "starved"),
            color: kind_color(runs, i, 1),
            markers: true,
            thin: true,
            points: rows(r)
                .map(|x| (x.second as f64, x.counts.starved as f64))
                .collect(),
        });
        if rows(r).any(|x| x.counts.failed > 0) {
            s.push(Series {
                name: label(runs, i, "failed"),
                color: kind_color(runs, i, 3),
                markers: true,
                thin: true,
                points: rows(r)
                    .map(|x| (x.second as f64, x.counts.failed as f64))
                    .collect(),
            });
        }
    }
    line_chart("Listeners over time", "time (s)", "listeners", &s, false)
}

/// Server CPU, user and system, against connected listeners (None without server samples).
pub fn cpu_vs_listeners(runs: &[&RunReport]) -> Option<String> {
    let mut s = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let pts: Vec<(f64, f64, f64)> = rows(r)
            .filter_map(|x| {
                x.server
                    .as_ref()
                    .map(|v| (x.counts.connected() as f64, v.cpu_user_pct, v.cpu_sys_pct))
            })
            .collect();
        if pts.is_empty() {
            continue;
        }
        s.push(Series {
            name: label(runs, i, "user (thick)"),
            color: color(i),
            markers: false,
            thin: false,
            points: pts.iter().map(|p| (p.0, p.1)).collect(),
        });
        s.push(Series {
            name: label(runs, i, "system (thin, dots)"),
            color: kind_color(runs, i, 4),
            markers: true,
            thin: true,
            points: pts.iter().map(|p| (p.0, p.2)).collect(),
        });
    }
    (!s.is_empty()).then(|| {
        line_chart(
            "Server CPU against listeners",
            "connected listeners",
            "CPU (% of one core)",
            &s,
            false,
        )
    })
}

/// Server CPU (user + system) over time (None without server samples).
pub fn cpu_over_time(runs: &[&RunReport]) -> Option<String> {
    let s: Vec<Series> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| Series {
            name: label(runs, i, "user + system"),
            color: color(i),
            markers: false,
            thin: false,
            points: rows(r)
                .filter_map(|x| {
                    x.server
                        .as_ref()
                        .map(|v| (x.second as f64, v.cpu_user_pct + v.cpu_sys_pct))
                })
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    (!s.is_empty()).then(|| {
        line_chart(
            "Server CPU over time",
            "time (s)",
            "CPU (% of one core)",
            &s,
            false,
        )
    })
}

/// The rows that carry some steady stream (a second that was nothing but connect bursts would
/// plot as a false drop to zero).
fn steady_rows(r: &RunReport) -> impl Iterator<Item = &Row> {
    rows(r).filter(|x| x.counts.burst_bytes == 0 || x.counts.steady_bytes() > 0)
}

/// Delivered and expected bandwidth of the steady stream against connected listeners: each
/// listener's connect burst (its first second, and the next ones while still well above the
/// bitrate) is left out of both, so a small run does not show the burst as delivered rate.
pub fn bandwidth_vs_listeners(runs: &[&RunReport]) -> String {
    let mut s = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        s.push(Series {
            name: label(runs, i, "delivered"),
            color: color(i),
            markers: false,
            thin: false,
            points: steady_rows(r)
                .map(|x| {
                    (
                        x.counts.connected() as f64,
                        x.counts.steady_bytes() as f64 * 8.0 / 1e6,
                    )
                })
                .collect(),
        });
        s.push(Series {
            name: label(runs, i, "expected"),
            color: kind_color(runs, i, 2),
            markers: true,
            thin: true,
            points: steady_rows(r)
                .map(|x| {
                    (
                        x.counts.connected() as f64,
                        x.counts.steady_expected_bytes() as f64 * 8.0 / 1e6,
                    )
                })
                .collect(),
        });
    }
    line_chart(
        "Delivered vs expected bandwidth (connect bursts left out)",
        "connected listeners",
        "Mbit/s",
        &s,
        false,
    )
}

/// Starved listeners against connected listeners.
pub fn starved_vs_listeners(runs: &[&RunReport]) -> String {
    let s: Vec<Series> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| Series {
            name: label(runs, i, "starved"),
            color: kind_color(runs, i, 1),
            markers: true,
            thin: false,
            points: rows(r)
                .map(|x| (x.counts.connected() as f64, x.counts.starved as f64))
                .collect(),
        })
        .collect();
    line_chart(
        "Starved listeners against listeners",
        "connected listeners",
        "starved listeners",
        &s,
        false,
    )
}

/// Every plot of a report, as `(file stem, SVG)` pairs, in report order.
pub fn all(runs: &[&RunReport]) -> Vec<(&'static str, String)> {
    let mut v = vec![("listeners", listeners_over_time(runs))];
    if let Some(c) = cpu_vs_listeners(runs) {
        v.push(("server-cpu", c));
    }
    if let Some(c) = cpu_over_time(runs) {
        v.push(("server-cpu-time", c));
    }
    v.push(("bandwidth", bandwidth_vs_listeners(runs)));
    v.push(("starved", starved_vs_listeners(runs)));
    v.push(("ttfb", ttfb_distribution(runs)));
    v
}

/// TTFB distribution (share of connections per log-spaced bucket).
pub fn ttfb_distribution(runs: &[&RunReport]) -> String {
    let s: Vec<Series> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let dense = r.ttfb.dense();
            let n = r.ttfb.count().max(1) as f64;
            let lo = dense
                .iter()
                .position(|&c| c > 0)
                .unwrap_or(0)
                .saturating_sub(1);
            let hi = (dense.iter().rposition(|&c| c > 0).unwrap_or(0) + 2).min(HIST_BUCKETS);
            let points = (lo..hi)
                .map(|b| {
                    let mid_ms = bucket_lower_us(b as u16) * 10f64.powf(0.05) / 1000.0;
                    (mid_ms.log10(), dense[b] as f64 / n * 100.0)
                })
                .collect();
            Series {
                name: label(runs, i, "TTFB"),
                color: color(i),
                markers: true,
                thin: false,
                points,
            }
        })
        .collect();
    line_chart(
        "Time to first audio byte",
        "TTFB (ms, log scale)",
        "% of connections",
        &s,
        true,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_svg_with_title() {
        let s = line_chart(
            "T",
            "x",
            "y",
            &[Series {
                name: "a".into(),
                color: color(0),
                markers: true,
                thin: false,
                points: vec![(0.0, 1.0), (1.0, 3.0)],
            }],
            false,
        );
        assert!(s.starts_with("<svg") && s.contains("</svg>"), "{s}");
        assert!(s.contains(">\nT\n</text>"));
        assert!(s.contains("<polyline") || s.contains("<path"));
    }
}
