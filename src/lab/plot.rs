//! One figure per experiment (its primary metric), SVG and PNG: every sample
//! as a dot, the median as a bar and the min–max range as a line, variants
//! side by side at each point.

use crate::report::{ExpResult, Report};
use anyhow::{anyhow, bail, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

const FONTS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

/// Text needs a TrueType font (ab_glyph draws it, no fontconfig): the first
/// of $NIMBLE_LAB_FONT and the usual DejaVu paths (Debian: fonts-dejavu-core).
fn load_font() -> Result<()> {
    let env = std::env::var("NIMBLE_LAB_FONT").ok();
    let path = env
        .iter()
        .map(String::as_str)
        .chain(FONTS.iter().copied())
        .find(|p| Path::new(p).is_file())
        .ok_or_else(|| {
            anyhow!(
                "no TrueType font for the plots (install fonts-dejavu-core or set NIMBLE_LAB_FONT)"
            )
        })?;
    let bytes: &'static [u8] = Box::leak(std::fs::read(path)?.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
        .map_err(|_| anyhow!("{path}: not a usable font"))
}

/// Writes `<dir>/<stem>-<workload>.{svg,png}` for every experiment; returns
/// the files written.
pub fn write_all(report: &Report, dir: &Path, stem: &str) -> Result<Vec<PathBuf>> {
    load_font()?;
    std::fs::create_dir_all(dir)?;
    let mut files = vec![];
    for x in report.experiments.iter().filter(|x| x.primary) {
        let svg = dir.join(format!("{stem}-{}.svg", x.workload));
        let png = dir.join(format!("{stem}-{}.png", x.workload));
        draw(
            SVGBackend::new(&svg, (1000, 560)).into_drawing_area(),
            report,
            x,
        )?;
        draw(
            BitMapBackend::new(&png, (1000, 560)).into_drawing_area(),
            report,
            x,
        )?;
        files.extend([svg, png]);
    }
    Ok(files)
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    report: &Report,
    x: &ExpResult,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("plot {}: {e:?}", x.workload);
    root.fill(&WHITE).map_err(err)?;
    let all: Vec<f64> = x
        .results
        .iter()
        .flat_map(|c| c.samples.iter().copied())
        .collect();
    if all.is_empty() {
        bail!("plot {}: no samples", x.workload);
    }
    let (lo, hi) = all
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
    let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.02).max(1e-9);
    let labels: Vec<&str> = report.variants.iter().map(|v| v.label.as_str()).collect();
    let nv = labels.len() as f64;
    let np = x.points.len();
    let env = report.env.as_ref().map_or(String::new(), |e| {
        format!(
            "  ·  {} · {} · {}",
            &e.date[..10.min(e.date.len())],
            e.kernel,
            report.machine
        )
    });
    let dir = if x.higher_is_better {
        "higher"
    } else {
        "lower"
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "{}: {} ({}), {dir} is better{env}",
                x.workload, x.metric, x.unit
            ),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5f64..(np as f64 - 0.5), (lo - pad).max(0.0)..(hi + pad))
        .map_err(err)?;
    let points = x.points.clone();
    let param = x.param.clone();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .max_light_lines(1)
        .x_labels(np.max(2) * 2 + 1)
        .x_label_formatter(&|v| {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < points.len() {
                points[i as usize].to_string()
            } else {
                String::new()
            }
        })
        .x_desc(format!(
            "{param} (variants left to right; dot = one run, bar = median, line = min-max)"
        ))
        .y_desc(format!("{} ({})", x.metric, x.unit))
        .draw()
        .map_err(err)?;
    let width = 0.8 / nv;
    for (vi, label) in labels.iter().enumerate() {
        let color = Palette99::pick(vi).to_rgba();
        let off = |pi: usize| pi as f64 - 0.4 + width * (vi as f64 + 0.5);
        let cells: Vec<(usize, &crate::report::Cell)> = x
            .points
            .iter()
            .enumerate()
            .filter_map(|(pi, p)| {
                x.results
                    .iter()
                    .find(|c| c.point == *p && c.variant == *label)
                    .map(|c| (pi, c))
            })
            .collect();
        let dots = cells.iter().flat_map(|(pi, c)| {
            let n = c.samples.len().max(1) as f64;
            c.samples.iter().enumerate().map(move |(k, &v)| {
                // Spread a cell's dots a little so equal values stay visible.
                let jitter = (k as f64 / n - 0.5) * width * 0.5;
                Circle::new((off(*pi) + jitter, v), 3, color.mix(0.55).filled())
            })
        });
        chart
            .draw_series(dots)
            .map_err(err)?
            .label(label.to_string())
            .legend(move |(a, b)| Rectangle::new([(a, b - 5), (a + 14, b + 5)], color.filled()));
        for (pi, c) in &cells {
            let Some(s) = c.summary else { continue };
            let xc = off(*pi);
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(xc, s.min), (xc, s.max)],
                    color.stroke_width(1),
                )))
                .map_err(err)?;
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(xc - width * 0.4, s.median), (xc + width * 0.4, s.median)],
                    color.stroke_width(3),
                )))
                .map_err(err)?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .label_font(("sans-serif", 15))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::{fake_events, fake_plan};
    use crate::stats::Stat;

    #[test]
    fn writes_svg_and_png() {
        load_font().expect("a TrueType font (vm/nimble-vm setup installs fonts-dejavu-core)");
        let rep = Report::build(&fake_plan(), "vm:n2l4", Stat::Median, &fake_events());
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("plots");
        let files = write_all(&rep, &dir, "t").unwrap();
        assert_eq!(files.len(), 2);
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert!(svg.contains("<svg") && svg.contains("hackbench") && svg.contains("tip"));
        let png = std::fs::read(&files[1]).unwrap();
        assert_eq!(&png[1..4], b"PNG");
    }
}
