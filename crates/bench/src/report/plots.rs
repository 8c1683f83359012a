//! SVG plots of one or several runs (plotters' SVG backend, inline in the HTML report).
//!
//! The graphs of the classic Icecast and RSAS load-test reports: listeners over time, server CPU
//! (user and system) against listeners, the media rate (media time delivered per second of wall
//! time) and the bandwidth against listeners, starved listeners against listeners, and the TTFB
//! distribution. Several runs share one graph, one colour per run.

use crate::report::summary::{Row, RunReport};
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
                .map(|x| (x.second as f64, x.total.streaming as f64))
                .collect(),
        });
        s.push(Series {
            name: label(runs, i, "starved"),
            color: kind_color(runs, i, 1),
            markers: true,
            thin: true,
            points: rows(r)
                .map(|x| (x.second as f64, x.total.starved as f64))
                .collect(),
        });
        if rows(r).any(|x| x.total.down > 0) {
            s.push(Series {
                name: label(runs, i, "down"),
                color: kind_color(runs, i, 3),
                markers: true,
                thin: true,
                points: rows(r)
                    .map(|x| (x.second as f64, x.total.down as f64))
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
                    .map(|v| (x.total.connected() as f64, v.cpu_user_pct, v.cpu_sys_pct))
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

/// The rows whose listeners are past their connect bursts (a second with nobody past it has
/// no steady media rate).
fn steady_rows(r: &RunReport) -> impl Iterator<Item = &Row> {
    rows(r).filter(|x| x.total.media_rate.is_some())
}

/// The steady media rate (media time delivered over wall time, connect bursts left out)
/// against connected listeners: 1 is real time, what every listener should hear; the line at
/// the run's minimum rate is where listeners starve.
pub fn media_rate_vs_listeners(runs: &[&RunReport]) -> String {
    let mut s = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        s.push(Series {
            name: label(runs, i, "media rate"),
            color: color(i),
            markers: false,
            thin: false,
            points: steady_rows(r)
                .map(|x| {
                    (
                        x.total.connected() as f64,
                        x.total.media_rate.unwrap_or(0.0),
                    )
                })
                .collect(),
        });
    }
    let pts: Vec<(f64, f64)> = runs
        .iter()
        .flat_map(|r| steady_rows(r).map(|x| x.total.connected() as f64))
        .map(|x| (x, 1.0))
        .collect();
    if !pts.is_empty() {
        let lo = pts.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
        let hi = pts.iter().map(|p| p.0).fold(0.0, f64::max);
        s.push(Series {
            name: "real time".into(),
            color: RGBColor(120, 120, 120),
            markers: false,
            thin: true,
            points: vec![(lo, 1.0), (hi, 1.0)],
        });
    }
    line_chart(
        "Media time per second of wall time (connect bursts left out)",
        "connected listeners",
        "media rate (1 = real time)",
        &s,
        false,
    )
}

/// Delivered bandwidth (all bytes, bursts included) against connected listeners.
pub fn bandwidth_vs_listeners(runs: &[&RunReport]) -> String {
    let s: Vec<Series> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| Series {
            name: label(runs, i, "delivered"),
            color: color(i),
            markers: false,
            thin: false,
            points: rows(r)
                .map(|x| (x.total.connected() as f64, x.total.bytes as f64 * 8.0 / 1e6))
                .collect(),
        })
        .collect();
    line_chart(
        "Delivered bandwidth against listeners",
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
                .map(|x| (x.total.connected() as f64, x.total.starved as f64))
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
    v.push(("media-rate", media_rate_vs_listeners(runs)));
    v.push(("bandwidth", bandwidth_vs_listeners(runs)));
    v.push(("starved", starved_vs_listeners(runs)));
    v.push(("ttfb", ttfb_distribution(runs)));
    v
}

/// TTFB distribution: the share of connections at or below each time (a cumulative curve on
/// a log scale, read off the run's exact histogram).
pub fn ttfb_distribution(runs: &[&RunReport]) -> String {
    let s: Vec<Series> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let h = &r.hists.ttfb;
            let n = h.count().max(1) as f64;
            let (lo, hi) = (
                h.min_ms().unwrap_or(0.01).max(0.001),
                h.max_ms().unwrap_or(1.0).max(0.002),
            );
            let (a, b) = (lo.log10(), hi.log10().max(lo.log10() + 0.01));
            let points = (0..=60)
                .map(|k| {
                    let x = a + (b - a) * f64::from(k) / 60.0;
                    let at = h.count_at_or_below_ms(10f64.powf(x));
                    (x, at as f64 / n * 100.0)
                })
                .collect();
            Series {
                name: label(runs, i, "TTFB"),
                color: color(i),
                markers: false,
                thin: false,
                points,
            }
        })
        .collect();
    line_chart(
        "Time to first audio byte (cumulative)",
        "TTFB (ms, log scale)",
        "% of connections at or below",
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
