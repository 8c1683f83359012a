//! The audience reports page's charts (`reports_page.rs`), drawn on the server as SVG documents
//! with plotters' SVG backend, to be inlined in the page: a line over time ([`timeline`],
//! listeners per hour), columns per day ([`columns`], listening hours) and horizontal bars per
//! name ([`bars`], top tracks, countries, paths, players).
//!
//! Every chart has a fixed drawing size but a `viewBox`, so the page scales it to its width
//! (`width: 100%` in CSS); it carries `role="img"` and an `aria-label` (its title), and the page
//! puts the same numbers in a table next to it. Text (titles, artists) is escaped by the SVG
//! backend. The functions are pure: the same data draws the same document.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Width of every chart, pixels of its `viewBox`.
pub const WIDTH: u32 = 640;

/// Height of a [`timeline`] or [`columns`] chart, pixels of its `viewBox`.
pub const HEIGHT: u32 = 280;

/// Height of one bar of [`bars`], pixels.
const BAR_ROW: u32 = 34;

/// Longest name beside a bar, in characters (longer ones end with `…`).
const MAX_LABEL: usize = 28;

/// Colour of every bar and line (the admin UI's accent, `admin.css --accent`).
const ACCENT: RGBColor = RGBColor(79, 70, 229);

/// Size of every text, pixels of the `viewBox` (the page shows a chart at about half to
/// full size).
const FONT: u32 = 18;

/// Grid lines.
const GRID: RGBColor = RGBColor(225, 227, 236);

/// Errors drawing a chart.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    /// Plotters could not lay out or draw the chart (its message).
    #[error("chart {0:?}: {1}")]
    Draw(String, String),
}

/// One bar or column: its name and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// The name under a column or beside a bar.
    pub label: String,
    /// Its value, in the chart's unit (not negative).
    pub value: f64,
}

/// The drawing area of a chart's SVG document.
type Area<'s> = DrawingArea<SVGBackend<'s>, plotters::coord::Shift>;

/// A chart's plotting area, both axes numbers.
type Chart<'a, 's> = ChartContext<
    'a,
    SVGBackend<'s>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// The grid and labels of a [`Chart`].
type Mesh<'a, 'b, 's> = plotters::chart::MeshStyle<
    'a,
    'b,
    plotters::coord::types::RangedCoordf64,
    plotters::coord::types::RangedCoordf64,
    SVGBackend<'s>,
>;

/// Draws into a string with `draw`, then marks the document as an image named `title`.
fn svg(
    title: &str,
    size: (u32, u32),
    draw: impl FnOnce(&Area<'_>) -> Result<(), Box<dyn std::error::Error>>,
) -> Result<String, ChartError> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        let drawn = root
            .fill(&WHITE)
            .map_err(|e| e.to_string())
            .and_then(|()| draw(&root).map_err(|e| e.to_string()))
            .and_then(|()| root.present().map_err(|e| e.to_string()));
        drawn.map_err(|e| ChartError::Draw(title.to_owned(), e))?;
    }
    Ok(out.replacen(
        "<svg ",
        &format!(
            "<svg role=\"img\" aria-label=\"{}\" class=\"chart\" ",
            crate::admin::html::escape(title)
        ),
        1,
    ))
}

/// A chart's plotting area on `root`: `x` and `y` ranges, with `areas` pixels for the x and y
/// axis labels, and the margins every chart has.
fn frame<'a, 's>(
    root: &'a Area<'s>,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
    areas: (u32, u32),
) -> Result<Chart<'a, 's>, Box<dyn std::error::Error>> {
    Ok(ChartBuilder::on(root)
        .margin(10)
        .margin_right(24)
        .x_label_area_size(areas.0)
        .y_label_area_size(areas.1)
        .build_cartesian_2d(x, y)?)
}

/// The grid and labels every chart has (its own axis choices are set on what this returns).
fn mesh<'m, 'a, 'b, 's>(m: &'m mut Mesh<'a, 'b, 's>) -> &'m mut Mesh<'a, 'b, 's> {
    m.label_style(("sans-serif", FONT))
        .light_line_style(WHITE)
        .bold_line_style(GRID)
}

/// `v` as a short axis label: `1.5M`, `12k`, `340`, `2.5`, `0.25`, `0.004`.
pub fn short_number(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else if a >= 0.1 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// `v` as a label of a value axis reaching `top`: as [`short_number`], with enough decimals
/// to tell its ticks (about a fifth of `top` apart) from each other.
pub fn axis_number(v: f64, top: f64) -> String {
    let step = top / 5.0;
    if step >= 1.0 || v == 0.0 {
        return short_number(v);
    }
    let decimals = (-step.log10()).ceil().clamp(1.0, 6.0) as usize;
    format!("{v:.decimals$}")
}

/// `s` cut to [`MAX_LABEL`] characters, with `…` when cut.
pub fn short_label(s: &str) -> String {
    if s.chars().count() <= MAX_LABEL {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(MAX_LABEL - 1).collect();
        t.push('…');
        t
    }
}

/// The top of a value axis showing values up to `max`: a little above it, at least 1.
fn axis_top(max: f64, headroom: f64) -> f64 {
    if max > 0.0 {
        max * headroom
    } else {
        1.0
    }
}

/// A line chart of counts `points` (`x` Unix seconds, `y` a whole number of `unit`, so only
/// whole numbers are written on its axis) titled `title`; `x_label` turns an `x` into its axis
/// label.
///
/// Errors: [`ChartError`] when plotters cannot draw it.
pub fn timeline(
    title: &str,
    unit: &str,
    points: &[(i64, f64)],
    x_label: &dyn Fn(i64) -> String,
) -> Result<String, ChartError> {
    let x0 = points.first().map_or(0, |p| p.0);
    let x1 = points.last().map_or(1, |p| p.0).max(x0 + 1);
    let top = axis_top(points.iter().map(|p| p.1).fold(0.0, f64::max), 1.15);
    svg(title, (WIDTH, HEIGHT), |root| {
        let mut chart = frame(root, x0 as f64..x1 as f64, 0f64..top, (36, 60))?;
        mesh(&mut chart.configure_mesh())
            .x_labels(6)
            .y_labels(6)
            .y_desc(unit)
            .x_label_formatter(&|v| x_label(*v as i64))
            .y_label_formatter(&|v| {
                if v.fract() == 0.0 {
                    short_number(*v)
                } else {
                    String::new()
                }
            })
            .draw()?;
        chart.draw_series(LineSeries::new(
            points.iter().map(|&(x, y)| (x as f64, y)),
            ACCENT.stroke_width(2),
        ))?;
        Ok(())
    })
}

/// A column chart of `cols` (left to right) titled `title`, values in `unit`; at most about ten
/// column names are written under the axis.
///
/// Errors: [`ChartError`] when plotters cannot draw it.
pub fn columns(title: &str, unit: &str, cols: &[Bar]) -> Result<String, ChartError> {
    let n = cols.len().max(1);
    let top = axis_top(cols.iter().map(|c| c.value).fold(0.0, f64::max), 1.15);
    let every = n.div_ceil(10);
    svg(title, (WIDTH, HEIGHT), |root| {
        let mut chart = frame(root, 0f64..n as f64, 0f64..top, (36, 70))?;
        mesh(&mut chart.configure_mesh())
            .disable_x_mesh()
            .x_labels(0)
            .y_labels(6)
            .y_desc(unit)
            .y_label_formatter(&|v| axis_number(*v, top))
            .draw()?;
        let gap = (WIDTH / n as u32 / 6).clamp(1, 12);
        chart.draw_series(cols.iter().enumerate().map(|(i, c)| {
            let mut r = Rectangle::new(
                [(i as f64, 0.0), (i as f64 + 1.0, c.value)],
                ACCENT.filled(),
            );
            r.set_margin(0, 0, gap, gap);
            r
        }))?;
        let style = TextStyle::from(("sans-serif", FONT).into_font())
            .pos(Pos::new(HPos::Center, VPos::Top))
            .color(&BLACK);
        for (i, c) in cols.iter().enumerate().step_by(every) {
            let (x, y) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
            root.draw(&Text::new(c.label.clone(), (x, y + 8), style.clone()))?;
        }
        Ok(())
    })
}

/// A horizontal bar chart of `items` (top to bottom) titled `title`, values in `unit`, each bar
/// named on its left (cut to [`MAX_LABEL`] characters) and its value written at its end.
///
/// Errors: [`ChartError`] when plotters cannot draw it.
pub fn bars(title: &str, unit: &str, items: &[Bar]) -> Result<String, ChartError> {
    let n = items.len().max(1);
    let height = 74 + BAR_ROW * n as u32;
    let top = axis_top(items.iter().map(|b| b.value).fold(0.0, f64::max), 1.25);
    svg(title, (WIDTH, height), |root| {
        let mut chart = frame(root, 0f64..top, 0f64..n as f64, (54, 270))?;
        mesh(&mut chart.configure_mesh())
            .disable_y_mesh()
            .y_labels(0)
            .x_labels(5)
            .x_desc(unit)
            .x_label_formatter(&|v| axis_number(*v, top))
            .draw()?;
        // Row i from the top.
        let row = |i: usize| (n - 1 - i) as f64;
        chart.draw_series(items.iter().enumerate().map(|(i, b)| {
            let mut r = Rectangle::new([(0.0, row(i)), (b.value, row(i) + 1.0)], ACCENT.filled());
            r.set_margin(4, 4, 0, 0);
            r
        }))?;
        let font = ("sans-serif", FONT).into_font();
        let name = TextStyle::from(font.clone())
            .pos(Pos::new(HPos::Right, VPos::Center))
            .color(&BLACK);
        let value = TextStyle::from(font)
            .pos(Pos::new(HPos::Left, VPos::Center))
            .color(&BLACK);
        for (i, b) in items.iter().enumerate() {
            let (x, y) = chart.backend_coord(&(0.0, row(i) + 0.5));
            root.draw(&Text::new(short_label(&b.label), (x - 8, y), name.clone()))?;
            let (xe, _) = chart.backend_coord(&(b.value, 0.0));
            root.draw(&Text::new(
                short_number(b.value),
                (xe + 6, y),
                value.clone(),
            ))?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(label: &str, value: f64) -> Bar {
        Bar {
            label: label.into(),
            value,
        }
    }

    /// The `<rect>` elements of `svg` filled with the accent colour.
    fn accent_rects(svg: &str) -> usize {
        svg.split("<rect")
            .skip(1)
            .filter(|r| r[..r.find('>').unwrap_or(r.len())].contains("#4F46E5"))
            .count()
    }

    #[test]
    fn bars_scale_with_a_view_box_and_name_each_bar() {
        let svg = bars(
            "Top tracks",
            "performances",
            &[bar("A - One", 12.0), bar("B - Two", 3.0)],
        )
        .unwrap();
        assert!(svg.starts_with("<svg role=\"img\" aria-label=\"Top tracks\" class=\"chart\" "));
        assert!(svg.contains("viewBox=\"0 0 640 142\""), "{svg}");
        assert!(
            svg.contains(">\nA - One\n</text>") || svg.contains(">A - One<"),
            "{svg}"
        );
        assert!(svg.contains("B - Two"));
        assert_eq!(accent_rects(&svg), 2, "{svg}");
        // The longer bar is wider.
        let widths: Vec<f64> = svg
            .split("<rect")
            .skip(1)
            .filter(|r| r.contains("#4F46E5"))
            .map(|r| {
                let at = r.find("width=\"").unwrap() + 7;
                r[at..r[at..].find('"').unwrap() + at].parse().unwrap()
            })
            .collect();
        assert_eq!(widths.len(), 2, "{svg}");
        assert!(widths[0] > widths[1] * 3.0, "{widths:?}");
    }

    #[test]
    fn text_from_sources_is_escaped() {
        let svg = bars("Players", "hours", &[bar("<script>alert(1)</script>", 1.0)]).unwrap();
        assert!(!svg.contains("<script>"), "{svg}");
        assert!(svg.contains("&lt;script&gt;"), "{svg}");
        let svg = bars("A \"quoted\" <title>", "h", &[bar("x", 1.0)]).unwrap();
        assert!(svg.contains("aria-label=\"A &quot;quoted&quot; &lt;title&gt;\""));
    }

    #[test]
    fn columns_and_timelines_draw_their_data() {
        let cols: Vec<Bar> = (0..30)
            .map(|d| bar(&format!("11-{d:02}"), d as f64))
            .collect();
        let svg = columns("Listening hours per day", "hours", &cols).unwrap();
        // 29 non-zero columns (a zero-height one may be left out), ten names at most.
        assert!(accent_rects(&svg) >= 29, "{svg}");
        assert!(svg.contains("11-00") && svg.contains("11-03") && !svg.contains("11-01"));
        let points: Vec<(i64, f64)> = (0..48).map(|h| (h * 3600, (h % 5) as f64)).collect();
        let svg = timeline("Listeners", "listeners", &points, &|t| format!("t{t}")).unwrap();
        assert!(svg.contains("<polyline"), "{svg}");
        assert!(svg.contains("viewBox=\"0 0 640 280\""));
        assert!(svg.contains(">t0<") || svg.contains("t0\n"), "{svg}");
    }

    #[test]
    fn labels_and_numbers_are_short() {
        assert_eq!(short_label("short"), "short");
        let long = "x".repeat(50);
        assert_eq!(short_label(&long).chars().count(), MAX_LABEL);
        assert!(short_label(&long).ends_with('…'));
        assert_eq!(short_number(2_500_000.0), "2.5M");
        assert_eq!(short_number(12_345.0), "12k");
        assert_eq!(short_number(340.0), "340");
        assert_eq!(short_number(2.5), "2.5");
        assert_eq!(short_number(0.25), "0.25");
        assert_eq!(short_number(0.004), "0.004");
        assert_eq!(short_number(3.0), "3");
        assert_eq!(axis_number(0.0015, 0.0023), "0.0015");
        assert_eq!(axis_number(0.002, 0.0023), "0.0020");
        assert_eq!(axis_number(0.4, 1.15), "0.4");
        assert_eq!(axis_number(300.0, 1000.0), "300");
    }
}
