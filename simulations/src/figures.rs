//! The figures: which results go into which chart. The drawing itself is
//! [`plot`]'s.

use std::error::Error;
use std::path::{Path, PathBuf};

use crate::algorithms::{Algorithm, Simulated, SUB_WINDOWS};
use crate::metrics::Metrics;
use crate::plot::{self, Series, Style};
use crate::report::finch;
use crate::suite::Row;
use crate::trace::series;
use crate::workload::Workload;

/// The workload whose traced client the estimate figures show.
pub const TRACED_WORKLOAD: &str = "poisson-1.1x";
/// The algorithms drawn against the exact count, as in the article: the
/// fixed window, the sliding window of one and of four ("five 15 s
/// windows") sub-windows, and the token bucket.
pub const TRACED_ALGORITHMS: [Algorithm; 4] = [
    Algorithm::FixedWindow,
    Algorithm::SlidingWindow { sub_windows: 1 },
    Algorithm::SlidingWindow { sub_windows: 4 },
    Algorithm::TokenBucket { capacity: None },
];
/// The workloads whose accuracy is drawn against `n`.
pub const ACCURACY_WORKLOADS: [&str; 5] = [
    "poisson-0.9x",
    "poisson-1.1x",
    "poisson-1.5x",
    "on-off",
    "population",
];
/// Points kept per line, so the SVG files stay small.
const MAX_POINTS: usize = 600;

fn row<'a>(
    workloads: &[Workload],
    rows: &'a [Row],
    id: &str,
    algorithm: Algorithm,
) -> Option<&'a Row> {
    rows.iter()
        .find(|r| workloads[r.job.workload].id == id && r.job.algorithm == algorithm)
}

/// Draws every figure into `dir` and returns the files written. Only the
/// rows with the library's default caches are drawn; figures whose
/// workloads are missing from `rows` are skipped.
pub fn write_all(
    dir: &Path,
    workloads: &[Workload],
    rows: &[Row],
) -> Result<Vec<PathBuf>, Box<dyn Error>> {
    let main: Vec<Row> = rows.iter().filter(|r| r.job.is_main()).cloned().collect();
    let rows = main.as_slice();
    let mut written = Vec::new();
    written.extend(estimates(dir, workloads, rows)?);
    written.extend(accuracy_vs_n(dir, workloads, rows)?);
    written.extend(first_denial(dir, workloads, rows)?);
    Ok(written)
}

/// One figure per traced algorithm: its estimate and the exact count of
/// what it admitted, over the traced client's first minutes.
fn estimates(
    dir: &Path,
    workloads: &[Workload],
    rows: &[Row],
) -> Result<Vec<PathBuf>, Box<dyn Error>> {
    let mut written = Vec::new();
    for algorithm in TRACED_ALGORITHMS {
        let Some(row) = row(workloads, rows, TRACED_WORKLOAD, algorithm) else {
            continue;
        };
        let workload = &workloads[row.job.workload];
        let trace = &row.outcome.trace;
        let path = dir.join(format!("estimate-{}.svg", algorithm.id()));
        let title = format!(
            "{}: estimate vs exact count, one client, Poisson at 1.1× of {} per {} s",
            algorithm.label(),
            workload.quota.limit(),
            workload.quota.period().as_secs()
        );
        plot::estimate_vs_exact(
            &path,
            &title,
            workload.quota.limit() as f64,
            &series(trace, |p| p.exact, MAX_POINTS),
            &[(algorithm.label(), series(trace, |p| p.estimate, MAX_POINTS))],
        )?;
        written.push(path);
    }
    Ok(written)
}

/// The sliding window's accuracy against its number of sub-windows, one
/// line per workload.
fn accuracy_vs_n(
    dir: &Path,
    workloads: &[Workload],
    rows: &[Row],
) -> Result<Vec<PathBuf>, Box<dyn Error>> {
    type Pick = fn(&Metrics) -> f64;
    let charts: [(&str, &str, &str, Pick); 4] = [
        (
            "sliding-n-mean-diff",
            "Sliding window: mean |estimate − exact| / limit against n",
            "mean |estimate − exact| / limit (%)",
            |m| m.mean_diff_pct,
        ),
        (
            "sliding-n-wrongly-allowed",
            "Sliding window: requests wrongly allowed against n",
            "wrongly allowed (% of requests)",
            |m| m.wrongly_allowed_pct,
        ),
        (
            "sliding-n-wrongly-denied",
            "Sliding window: requests wrongly denied against n",
            "wrongly denied (% of requests)",
            |m| m.wrongly_denied_pct,
        ),
        (
            "sliding-n-over-limit",
            "Sliding window: requests admitted over the limit against n",
            "admitted with > limit in the last period (% of requests)",
            |m| m.over_limit_pct,
        ),
    ];
    let mut written = Vec::new();
    for (file, title, y_label, pick) in charts {
        let series: Vec<Series> = ACCURACY_WORKLOADS
            .iter()
            .filter_map(|&id| {
                let points: Vec<(f64, f64)> = SUB_WINDOWS
                    .iter()
                    .filter_map(|&n| {
                        let row = row(
                            workloads,
                            rows,
                            id,
                            Algorithm::SlidingWindow { sub_windows: n },
                        )?;
                        Some((f64::from(n), pick(&row.outcome.metrics)))
                    })
                    .collect();
                (!points.is_empty()).then(|| Series {
                    name: id.to_owned(),
                    points,
                    style: Style::Solid,
                })
            })
            .collect();
        if series.is_empty() {
            continue;
        }
        let path = dir.join(format!("{file}.svg"));
        plot::metric_vs_n(&path, title, y_label, &series)?;
        written.push(path);
    }
    Ok(written)
}

/// Requests admitted to a steady client before its first denial, against
/// its rate, with Finch's `q·a/(a−1)` for the linear limiters.
fn first_denial(
    dir: &Path,
    workloads: &[Workload],
    rows: &[Row],
) -> Result<Vec<PathBuf>, Box<dyn Error>> {
    let steady: Vec<(usize, f64)> = workloads
        .iter()
        .enumerate()
        .filter_map(|(i, w)| w.steady_factor.filter(|&a| a > 1.0).map(|a| (i, a)))
        .collect();
    if steady.is_empty() {
        return Ok(Vec::new());
    }
    let drawn = [
        (Algorithm::TokenBucket { capacity: None }, Style::Solid),
        (Algorithm::Gcra { burst: None }, Style::Dashed),
        (Algorithm::HybridQuota, Style::Solid),
        (Algorithm::SlidingWindow { sub_windows: 1 }, Style::Solid),
        (Algorithm::FixedWindow, Style::Dashed),
    ];
    let q = workloads[steady[0].0].quota.limit() as f64;
    // The reference first, so the algorithms are drawn over it.
    let mut series = vec![Series {
        name: format!("Finch q·a/(a−1), q = {q}"),
        points: steady
            .iter()
            .filter_map(|&(_, a)| Some((a, finch(q, a)?)))
            .collect(),
        style: Style::Grey,
    }];
    series.extend(drawn.iter().map(|&(algorithm, style)| {
        Series {
            name: algorithm.label(),
            points: steady
                .iter()
                .filter_map(|&(i, a)| {
                    let r = rows
                        .iter()
                        .find(|r| r.job.workload == i && r.job.algorithm == algorithm)?;
                    Some((a, r.outcome.metrics.admitted_before_denial? as f64))
                })
                .collect(),
            style,
        }
    }));
    let path = dir.join("first-denial.svg");
    plot::lines(
        &path,
        "Steady client at a × the limit: requests admitted before the first denial",
        "offered rate a (× the limit)",
        "admitted before the first denial",
        &series,
    )?;
    Ok(vec![path])
}
