//! `soak-plot`: draws the samples of `scripts/soak.sh` as one SVG of two panels against time in
//! minutes, the server's resident memory (VmRSS, MiB) above and its open file descriptors
//! with the connected listeners below, so a flat line (or a leak) shows at a glance. Input:
//! the CSV the script writes (`seconds,rss_kib,fds,threads,cpu_seconds,listeners` and, when
//! present, `rss_anon_kib`: heap and other anonymous memory, drawn too; one row every 10 s);
//! output: the SVG path given second. Usage: `soak-plot SOAK.csv OUT.svg`.

use anyhow::{bail, Context};
use plotters::prelude::*;

/// One sample row of the CSV.
struct Sample {
    minutes: f64,
    rss_mib: f64,
    /// Anonymous part of the RSS (heap, stacks), when the CSV has it.
    anon_mib: Option<f64>,
    fds: f64,
    listeners: f64,
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [csv, out] = args.as_slice() else {
        bail!("usage: soak-plot SOAK.csv OUT.svg");
    };
    let text = std::fs::read_to_string(csv).with_context(|| format!("reading {csv}"))?;
    let mut samples = Vec::new();
    for (n, line) in text.lines().enumerate().skip(1) {
        let f: Vec<f64> = line
            .split(',')
            .map(|v| v.trim().parse::<f64>())
            .collect::<Result<_, _>>()
            .with_context(|| format!("{csv}:{}: not a row of numbers", n + 1))?;
        if f.len() < 6 {
            bail!("{csv}:{}: expected 6 columns", n + 1);
        }
        samples.push(Sample {
            minutes: f[0] / 60.0,
            rss_mib: f[1] / 1024.0,
            anon_mib: f.get(6).map(|a| a / 1024.0),
            fds: f[2],
            listeners: f[5],
        });
    }
    if samples.is_empty() {
        bail!("{csv}: no samples");
    }
    let mut svg = String::new();
    draw(&mut svg, &samples).map_err(|e| anyhow::anyhow!("drawing: {e}"))?;
    std::fs::write(out, svg).with_context(|| format!("writing {out}"))?;
    Ok(())
}

fn draw(svg: &mut String, s: &[Sample]) -> Result<(), Box<dyn std::error::Error>> {
    let t1 = s.last().map_or(1.0, |x| x.minutes).max(1.0);
    let root = SVGBackend::with_string(svg, (900, 620)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(300);
    let rss_max = s.iter().map(|x| x.rss_mib).fold(0.0, f64::max) * 1.25 + 1.0;
    let mut chart = ChartBuilder::on(&top)
        .caption("Soak: server resident memory (VmRSS)", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..t1, 0f64..rss_max)?;
    chart
        .configure_mesh()
        .x_desc("minutes")
        .y_desc("MiB")
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    let blue = RGBColor(31, 119, 180);
    chart
        .draw_series(LineSeries::new(
            s.iter().map(|x| (x.minutes, x.rss_mib)),
            blue.stroke_width(2),
        ))?
        .label("VmRSS (MiB)")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], blue.stroke_width(2)));
    if s.iter().all(|x| x.anon_mib.is_some()) {
        let orange = RGBColor(255, 127, 14);
        chart
            .draw_series(LineSeries::new(
                s.iter().map(|x| (x.minutes, x.anon_mib.unwrap_or(0.0))),
                orange.stroke_width(2),
            ))?
            .label("of which anonymous: heap, stacks (MiB)")
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], orange.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .draw()?;

    let y_max = s.iter().map(|x| x.fds.max(x.listeners)).fold(0.0, f64::max) * 1.25 + 1.0;
    let mut chart = ChartBuilder::on(&bottom)
        .caption(
            "Open file descriptors and connected listeners",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..t1, 0f64..y_max)?;
    chart
        .configure_mesh()
        .x_desc("minutes")
        .y_desc("count")
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    let red = RGBColor(214, 39, 40);
    let green = RGBColor(44, 160, 44);
    chart
        .draw_series(LineSeries::new(
            s.iter().map(|x| (x.minutes, x.fds)),
            red.stroke_width(2),
        ))?
        .label("open fds")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], red.stroke_width(2)));
    chart
        .draw_series(LineSeries::new(
            s.iter().map(|x| (x.minutes, x.listeners)),
            green.stroke_width(1),
        ))?
        .label("listeners (status-json)")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], green.stroke_width(1)));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .draw()?;
    root.present()?;
    Ok(())
}
