//! SVG charts of simulation results, drawn with plotters' SVG backend.
//!
//! Text is written as SVG `<text>` elements, so no system fonts are needed to
//! produce the files (the viewer picks a sans-serif font when showing them).
//! Every chart gets a title, axis labels and a legend. Axis ranges come from
//! the data with a little headroom; the y axis starts at zero whenever all
//! values are non-negative. Points with a non-finite coordinate are skipped.

use std::error::Error;
use std::ops::Range;
use std::path::Path;

use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::element::{DashedPathElement, DynElement};
use plotters::prelude::*;

type PlotResult = Result<(), Box<dyn Error>>;

/// Every chart here: drawn on an SVG (which must outlive the chart, `'b:
/// 'a`), with a linear y axis, on the x coordinate `X`.
type Chart<'a, 'b, X> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<X, RangedCoordf64>>;

/// One line on a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// `(x, y)` points, drawn in the given order.
    pub points: Vec<(f64, f64)>,
    /// How the line is drawn.
    pub style: Style,
}

/// How a [`Series`] is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// A solid line in the next palette colour.
    Solid,
    /// A dashed line in the next palette colour.
    Dashed,
    /// The exact reference: a thicker light-grey line, like the "perfect"
    /// sliding window in the reference article. Does not use up a colour.
    Grey,
}

const FONT: &str = "sans-serif";
const WIDTH: u32 = 1000;
const HEIGHT: u32 = 600;
const PANEL_HEIGHT: u32 = 300;
const TITLE_HEIGHT: u32 = 40;
const ORANGE: RGBColor = RGBColor(255, 127, 14);
const GREY: RGBColor = RGBColor(180, 180, 180);
const LIMIT: RGBColor = RGBColor(214, 39, 40);
/// Fraction of the data span added above the data so the legend has room
/// (single charts and `estimate_vs_exact` panels respectively).
const LEGEND_HEADROOM: f64 = 0.25;
const LEGEND_HEADROOM_PANEL: f64 = 0.45;
/// Colours for non-grey series (matplotlib's "tab10" without its grey).
const PALETTE: [RGBColor; 9] = [
    RGBColor(31, 119, 180),
    ORANGE,
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Estimate vs exact count over time, like the reference article's figures
/// (a grey "perfect" sliding window and a dashed orange estimate).
///
/// Draws one panel per `(algorithm name, estimate points)` entry, stacked
/// vertically (300 px each, 1000 px wide). Each panel shows `exact` in grey,
/// that algorithm's estimate in dashed orange and a horizontal line at
/// `limit`. All panels share the same x range (seconds) and y range
/// (requests in the last period). With no estimates, one panel shows `exact`.
pub fn estimate_vs_exact(
    path: &Path,
    title: &str,
    limit: f64,
    exact: &[(f64, f64)],
    estimates: &[(String, Vec<(f64, f64)>)],
) -> Result<(), Box<dyn Error>> {
    create_parent(path)?;
    let panels = estimates.len().max(1);
    let height = TITLE_HEIGHT + PANEL_HEIGHT * panels as u32;
    let root = SVGBackend::new(path, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let body = root.titled(title, (FONT, 26))?;

    let all = || finite(exact).chain(estimates.iter().flat_map(|(_, p)| finite(p)));
    let x = axis_range(all().map(|p| p.0), 0.0, false);
    let y = axis_range(
        all().map(|p| p.1).chain([limit]),
        LEGEND_HEADROOM_PANEL,
        true,
    );

    for (i, area) in body.split_evenly((panels, 1)).iter().enumerate() {
        let (name, estimate) = match estimates.get(i) {
            Some((name, points)) => (name.as_str(), Some(points)),
            None => ("exact", None),
        };
        let mut chart = ChartBuilder::on(area)
            .caption(name, (FONT, 20))
            .margin(8)
            .margin_right(20)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(x.clone(), y.clone())?;
        draw_mesh(&mut chart, "time (s)", "requests in last period")?;

        let exact_name = "exact (sliding window)";
        draw_series(&mut chart, exact_name, exact, Style::Grey, GREY, false)?;
        if limit.is_finite() {
            chart
                .draw_series(LineSeries::new([(x.start, limit), (x.end, limit)], LIMIT))?
                .label(format!("limit = {}", fmt_num(limit)))
                .legend(move |(px, py)| PathElement::new([(px, py), (px + 24, py)], LIMIT));
        }
        let estimate = estimate.map_or(&[][..], Vec::as_slice);
        if !estimates.is_empty() {
            let label = format!("{name} estimate");
            draw_series(&mut chart, &label, estimate, Style::Dashed, ORANGE, false)?;
        }
        draw_legend(&mut chart, finite(exact).chain(finite(estimate)))?;
    }
    root.present()?;
    Ok(())
}

/// A line chart of metrics against the number of sub-windows `n`, with every
/// point marked.
///
/// The x axis is logarithmic, with ticks at the distinct x values of the data
/// (e.g. 1, 2, 4, 6, 12, 60) when there are at most 12 of them; if any x is
/// not positive it falls back to a linear axis. 1000×600 px.
pub fn metric_vs_n(
    path: &Path,
    title: &str,
    y_label: &str,
    series: &[Series],
) -> Result<(), Box<dyn Error>> {
    const X_LABEL: &str = "number of sub-windows n";
    let mut ticks: Vec<f64> = finite_points(series).map(|p| p.0).collect();
    if ticks.iter().any(|&x| x <= 0.0) {
        let x = linear_x(series);
        return chart(path, title, X_LABEL, y_label, series, x, true);
    }
    if ticks.is_empty() {
        ticks = vec![1.0, 10.0];
    }
    ticks.sort_by(f64::total_cmp);
    ticks.dedup();
    let (lo, hi) = (ticks[0], ticks[ticks.len() - 1]);
    let (lo, hi) = if lo < hi {
        (lo, hi)
    } else {
        (lo / 2.0, hi * 2.0)
    };
    // Headroom on a log axis is a constant factor on each side; at most 12
    // tick labels keep the axis readable.
    let pad = (hi / lo).powf(0.05);
    let step = ticks.len().div_ceil(12);
    let ticks: Vec<f64> = ticks.into_iter().step_by(step).collect();
    let x = (lo / pad..hi * pad).log_scale().with_key_points(ticks);
    chart(path, title, X_LABEL, y_label, series, x, true)
}

/// A generic multi-series line chart, 1000×600 px, linear axes.
pub fn lines(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> Result<(), Box<dyn Error>> {
    chart(
        path,
        title,
        x_label,
        y_label,
        series,
        linear_x(series),
        false,
    )
}

/// One single-panel chart with the given x coordinate; y is linear.
fn chart<X>(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    x: X,
    markers: bool,
) -> PlotResult
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    create_parent(path)?;
    let root = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let y = axis_range(finite_points(series).map(|p| p.1), LEGEND_HEADROOM, true);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, (FONT, 26))
        .margin(10)
        .margin_right(25)
        .x_label_area_size(50)
        .y_label_area_size(65)
        .build_cartesian_2d(x, y)?;
    draw_mesh(&mut chart, x_label, y_label)?;
    let mut colours = PALETTE.iter().cycle();
    for s in series {
        let colour = match s.style {
            Style::Grey => GREY,
            Style::Solid | Style::Dashed => *colours.next().expect("cycle is endless"),
        };
        draw_series(&mut chart, &s.name, &s.points, s.style, colour, markers)?;
    }
    draw_legend(&mut chart, finite_points(series))?;
    root.present()?;
    Ok(())
}

/// Draws grid, tick labels and axis descriptions.
fn draw_mesh<X>(chart: &mut Chart<'_, '_, X>, x_label: &str, y_label: &str) -> PlotResult
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_label_formatter(&|v| fmt_num(*v))
        .y_label_formatter(&|v| fmt_num(*v))
        .label_style((FONT, 15))
        .axis_desc_style((FONT, 16))
        .light_line_style(RGBColor(0, 0, 0).mix(0.04))
        .bold_line_style(RGBColor(0, 0, 0).mix(0.12))
        .draw()?;
    Ok(())
}

/// Draws the finite `points` as one line (points marked if `markers`) and
/// registers its legend entry `name`.
fn draw_series<'a, 'b: 'a, X: Ranged<ValueType = f64>>(
    chart: &mut Chart<'a, 'b, X>,
    name: &str,
    points: &[(f64, f64)],
    style: Style,
    colour: RGBColor,
    markers: bool,
) -> PlotResult {
    let points: Vec<(f64, f64)> = finite(points).collect();
    let width = if style == Style::Grey { 4 } else { 2 };
    let line = colour.stroke_width(width);
    let annotation = match style {
        Style::Dashed => chart.draw_series(DashedLineSeries::new(points.clone(), 7, 5, line))?,
        Style::Solid | Style::Grey => chart.draw_series(LineSeries::new(points.clone(), line))?,
    };
    annotation
        .label(name)
        .legend(move |(x, y)| -> DynElement<'static, SVGBackend<'b>, _> {
            let ends = [(x, y), (x + 24, y)];
            match style {
                Style::Dashed => DashedPathElement::new(ends, 7, 5, line).into_dyn(),
                Style::Solid | Style::Grey => PathElement::new(ends, line).into_dyn(),
            }
        });
    // A lone point makes no line, so mark it even without `markers`.
    if markers || points.len() == 1 {
        chart.draw_series(
            points
                .iter()
                .map(|&p| Circle::new(p, 4, colour.filled()).into_dyn()),
        )?;
    }
    Ok(())
}

/// Draws the legend box in whichever upper corner the data leaves freer.
fn draw_legend<'a, 'b: 'a, X: Ranged<ValueType = f64>>(
    chart: &mut Chart<'a, 'b, X>,
    points: impl Iterator<Item = (f64, f64)>,
) -> PlotResult {
    // Compare the highest point (smallest pixel y) in the left and right
    // thirds of the plot and put the legend over the lower side.
    let (xs, ys) = chart.plotting_area().get_pixel_range();
    let third = (xs.end - xs.start) / 3;
    let (mut left_top, mut right_top) = (ys.end, ys.end);
    for p in points {
        let (px, py) = chart.backend_coord(&p);
        if px <= xs.start + third {
            left_top = left_top.min(py);
        } else if px >= xs.end - third {
            right_top = right_top.min(py);
        }
    }
    let corner = if left_top > right_top {
        SeriesLabelPosition::UpperLeft
    } else {
        SeriesLabelPosition::UpperRight
    };
    chart
        .configure_series_labels()
        .position(corner)
        .margin(8)
        .label_font((FONT, 15))
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(0, 0, 0).mix(0.3))
        .draw()?;
    Ok(())
}

/// Linear x coordinate over all series' x values, with no headroom.
fn linear_x(series: &[Series]) -> RangedCoordf64 {
    axis_range(finite_points(series).map(|p| p.0), 0.0, false).into()
}

/// The points of `points` whose coordinates are both finite.
fn finite(points: &[(f64, f64)]) -> impl Iterator<Item = (f64, f64)> + '_ {
    points
        .iter()
        .copied()
        .filter(|(x, y)| x.is_finite() && y.is_finite())
}

/// The finite points of all series.
fn finite_points(series: &[Series]) -> impl Iterator<Item = (f64, f64)> + '_ {
    series.iter().flat_map(|s| finite(&s.points))
}

/// Min and max of the finite values, if any.
fn bounds(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values
        .filter(|v| v.is_finite())
        .fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
        })
}

/// Axis range covering `values`, extended above by `top` times the span (and
/// 5 % below unless the axis starts at zero). With `from_zero`, the axis
/// starts at 0 when no value is negative. Never empty: no values give 0..1,
/// a single value gets a unit-wide (or ±10 %) range around it.
fn axis_range(values: impl Iterator<Item = f64>, top: f64, from_zero: bool) -> Range<f64> {
    let Some((mut lo, mut hi)) = bounds(values) else {
        return 0.0..1.0;
    };
    let zero_based = from_zero && lo >= 0.0;
    if zero_based {
        lo = 0.0;
    }
    if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
        let half = (hi.abs() * 0.1).max(0.5);
        return if zero_based {
            0.0..hi + 2.0 * half
        } else {
            lo - half..hi + half
        };
    }
    let span = hi - lo;
    if !zero_based && top > 0.0 {
        lo -= 0.05 * span;
    }
    hi += top * span;
    lo..hi
}

/// Formats tick values without float noise: `12`, `2.5`, `0.125`, `1.5e6`.
fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a != 0.0 && !(1e-3..1e6).contains(&a) {
        return format!("{v:.1e}");
    }
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

fn create_parent(path: &Path) -> std::io::Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => std::fs::create_dir_all(dir),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A fresh directory per test, nested so `create_parent` is exercised.
    fn out_dir(test: &str) -> PathBuf {
        let dir = std::env::temp_dir()
            .join("memcache-ratelimit-plot-tests")
            .join(test);
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn assert_svg(path: &Path, names: &[&str]) {
        let svg = std::fs::read_to_string(path).expect("chart written");
        assert!(svg.contains("<svg"), "{} is not an SVG", path.display());
        for name in names {
            assert!(svg.contains(name), "{} lacks {name:?}", path.display());
        }
    }

    /// A sliding-window count that ramps up, plateaus over the limit and drops.
    fn exact_count() -> Vec<(f64, f64)> {
        (0..=600)
            .map(|i| {
                let t = i as f64 * 0.1;
                let c = if t < 20.0 {
                    6.0 * t
                } else if t < 40.0 {
                    120.0 + 15.0 * (t * 0.8).sin()
                } else {
                    (120.0 - 5.0 * (t - 40.0)).max(10.0)
                };
                (t, c)
            })
            .collect()
    }

    #[test]
    fn estimate_vs_exact_writes_panels() {
        let exact = exact_count();
        let fixed: Vec<_> = exact
            .iter()
            .map(|&(t, c)| (t, c * (0.6 + 0.4 * (t % 10.0) / 10.0)))
            .collect();
        let sliding: Vec<_> = exact.iter().map(|&(t, c)| (t, c * 1.05 + 2.0)).collect();
        let estimates = vec![
            ("fixed window".to_string(), fixed),
            ("approximated sliding window".to_string(), sliding),
        ];
        let path = out_dir("estimate").join("nested/estimate.svg");
        estimate_vs_exact(&path, "Estimate vs exact", 100.0, &exact, &estimates).unwrap();
        assert_svg(
            &path,
            &["fixed window", "approximated sliding window", "exact"],
        );
    }

    #[test]
    fn metric_vs_n_marks_points() {
        let ns = [1.0, 2.0, 4.0, 6.0, 12.0, 60.0];
        let series = vec![
            Series {
                name: "mean relative error %".into(),
                points: ns.iter().map(|&n| (n, 30.0 / n)).collect(),
                style: Style::Solid,
            },
            Series {
                name: "wrongly allowed %".into(),
                points: ns.iter().map(|&n| (n, 12.0 / n.sqrt())).collect(),
                style: Style::Dashed,
            },
        ];
        let path = out_dir("metric").join("metric.svg");
        metric_vs_n(&path, "Error vs sub-windows", "percent", &series).unwrap();
        assert_svg(
            &path,
            &["mean relative error %", "wrongly allowed %", "<circle"],
        );
    }

    #[test]
    fn lines_draws_every_style() {
        let series = vec![
            Series {
                name: "exact".into(),
                points: exact_count(),
                style: Style::Grey,
            },
            Series {
                name: "solid one".into(),
                points: exact_count().iter().map(|&(t, c)| (t, c * 0.8)).collect(),
                style: Style::Solid,
            },
            Series {
                name: "dashed one".into(),
                points: exact_count().iter().map(|&(t, c)| (t, c * 1.2)).collect(),
                style: Style::Dashed,
            },
        ];
        let path = out_dir("lines").join("lines.svg");
        lines(&path, "Generic lines", "time (s)", "requests", &series).unwrap();
        assert_svg(&path, &["exact", "solid one", "dashed one"]);
    }

    #[test]
    fn degenerate_inputs_do_not_panic() {
        let dir = out_dir("degenerate");
        let empty = Series {
            name: "empty".into(),
            points: vec![],
            style: Style::Solid,
        };
        let single = Series {
            name: "single".into(),
            points: vec![(4.0, 7.0)],
            style: Style::Dashed,
        };
        let odd = Series {
            name: "odd".into(),
            points: vec![(0.0, f64::NAN), (f64::INFINITY, 1.0), (-1.0, -2.0)],
            style: Style::Grey,
        };
        let many = Series {
            name: "many".into(),
            points: (1..=40).map(|n| (n as f64, 100.0 / n as f64)).collect(),
            style: Style::Solid,
        };
        let sets = [
            vec![],
            vec![empty.clone()],
            vec![single.clone()],
            vec![empty, single, odd],
            vec![many],
        ];
        for (i, set) in sets.iter().enumerate() {
            lines(&dir.join(format!("l{i}.svg")), "t", "x", "y", set).unwrap();
            metric_vs_n(&dir.join(format!("m{i}.svg")), "t", "y", set).unwrap();
            let estimates: Vec<(String, Vec<(f64, f64)>)> = set
                .iter()
                .map(|s| (s.name.clone(), s.points.clone()))
                .collect();
            let exact = set.first().map(|s| s.points.clone()).unwrap_or_default();
            estimate_vs_exact(&dir.join(format!("e{i}.svg")), "t", 5.0, &exact, &estimates)
                .unwrap();
            estimate_vs_exact(&dir.join(format!("n{i}.svg")), "t", f64::NAN, &[], &[]).unwrap();
        }
        for i in 0..sets.len() {
            for prefix in ["l", "m", "e", "n"] {
                assert_svg(&dir.join(format!("{prefix}{i}.svg")), &[]);
            }
        }
    }
}
