//! SVG plots for `caustic bench` (plotters, SVG backend: no font files are
//! needed, text is left to the SVG viewer).

use anyhow::{Result, anyhow};
use plotters::prelude::*;
use std::path::Path;

/// A log-scale axis range around `values` (clamped to at least 1e-3, half
/// a step of margin each side); `1..10` when there are none.
fn log_range(values: impl Iterator<Item = f64>) -> std::ops::Range<f64> {
    let (lo, hi) = values
        .map(|v| v.max(1e-3))
        .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        1.0..10.0
    } else {
        (lo / 1.5)..(hi * 1.5)
    }
}

/// One point of a build-versus-trace plot.
pub struct TradeoffPoint {
    /// The series (acceleration structure) it belongs to.
    pub series: String,
    /// Short label drawn next to the point (the scene).
    pub label: String,
    pub build_ms: f64,
    pub trace_ms: f64,
}

const PALETTE: [RGBColor; 12] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(0, 0, 0),
    RGBColor(255, 187, 120),
];

/// Build time against trace time, log-log, one colour per structure: the
/// trade-off Zeidan's (2011) thesis tables show in numbers. Lower left is better on
/// both counts.
pub fn build_vs_trace(path: &Path, title: &str, points: &[TradeoffPoint]) -> Result<()> {
    let err = |e: &dyn std::fmt::Display| anyhow!("cannot draw {}: {e}", path.display());
    let positive = |v: f64| v.max(1e-3);
    let range = |f: fn(&TradeoffPoint) -> f64| log_range(points.iter().map(f));
    let root = SVGBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(
            range(|p| p.build_ms).log_scale(),
            range(|p| p.trace_ms).log_scale(),
        )
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("build ms (best)")
        .y_desc("trace ms: primary + AO + diffuse passes (best)")
        .draw()
        .map_err(|e| err(&e))?;
    let mut series: Vec<&str> = Vec::new();
    for p in points {
        if !series.contains(&p.series.as_str()) {
            series.push(&p.series);
        }
    }
    for (i, name) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let mine: Vec<&TradeoffPoint> = points.iter().filter(|p| p.series == *name).collect();
        chart
            .draw_series(mine.iter().map(|p| {
                Circle::new(
                    (positive(p.build_ms), positive(p.trace_ms)),
                    5,
                    color.filled(),
                )
            }))
            .map_err(|e| err(&e))?
            .label(*name)
            .legend(move |(x, y)| Circle::new((x, y), 5, color.filled()));
        chart
            .draw_series(mine.iter().map(|p| {
                Text::new(
                    p.label.clone(),
                    (positive(p.build_ms), positive(p.trace_ms)),
                    ("sans-serif", 11),
                )
            }))
            .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// A named polyline of (x, y) points.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// Lines with markers, log-log, one colour per series.
pub fn lines(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
) -> Result<()> {
    let err = |e: &dyn std::fmt::Display| anyhow!("cannot draw {}: {e}", path.display());
    let positive = |v: f64| v.max(1e-3);
    let all = || series.iter().flat_map(|s| s.points.iter());
    let span = |f: fn(&(f64, f64)) -> f64| log_range(all().map(f));
    let root = SVGBackend::new(path, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(span(|p| p.0).log_scale(), span(|p| p.1).log_scale())
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()
        .map_err(|e| err(&e))?;
    for (i, s) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let points: Vec<(f64, f64)> = s
            .points
            .iter()
            .map(|&(x, y)| (positive(x), positive(y)))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(s.name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
            });
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))
            .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
