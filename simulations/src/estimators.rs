//! The sliding window's estimators side by side: the uniform rule against
//! the moment-corrected ones, at several sub-window counts, on every
//! workload, under both measures (the project's own, denied requests
//! refunded, and Cloudflare's, in strict mode against the exact count of
//! every request).

use std::error::Error;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use memcache_ratelimit::algorithm::Estimator;
use memcache_ratelimit::{LimiterSpec, ManualClock, Quota};

use crate::algorithms::{Algorithm, Caches, DeniedRequests, Simulated};
use crate::plot;
use crate::populations;
use crate::runner::{self, Outcome, RunError};
use crate::suite;
use crate::trace::series;
use crate::workload::{Trace, Workload};

/// The sub-window counts compared.
pub const SUB_WINDOWS: [u32; 4] = [1, 4, 12, 60];
/// The estimators compared.
pub const ESTIMATORS: [Estimator; 2] = [Estimator::Uniform, Estimator::Moment];

/// The sliding window of `sub_windows` weighing its oldest sub-window by
/// `estimator`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimated {
    /// `n`.
    pub sub_windows: u32,
    /// How the oldest sub-window is weighed.
    pub estimator: Estimator,
}

impl Simulated for Estimated {
    fn id(self) -> String {
        format!("sliding-{}-{}", self.sub_windows, self.estimator)
    }

    fn label(self) -> String {
        format!("sliding n={} {}", self.sub_windows, self.estimator)
    }

    fn spec(
        self,
        quota: Quota,
        clock: ManualClock,
        sealed: bool,
        denied: DeniedRequests,
    ) -> LimiterSpec {
        Algorithm::SlidingWindow {
            sub_windows: self.sub_windows,
        }
        .spec(quota, clock, sealed, denied)
        .estimator(self.estimator)
    }
}

/// One run of the comparison.
#[derive(Debug, Clone)]
pub struct Row {
    /// Index into the workloads.
    pub workload: usize,
    /// The limiter.
    pub limiter: Estimated,
    /// Denied requests refunded (the project's measure) or counted
    /// (Cloudflare's).
    pub denied: DeniedRequests,
    /// What it produced.
    pub outcome: Outcome,
}

/// One run of the comparison: a workload (an index), a limiter, a mode.
pub type Job = (usize, Estimated, DeniedRequests);

/// The workloads compared: every workload of the main run, the bursty one
/// traced ([`traced`]), and the three populations of one make-up
/// ([`populations`]), smaller in a quick run.
pub fn workloads(base: Vec<Workload>, seed: u64, quick: bool) -> Vec<Workload> {
    let (sources, minutes) = if quick {
        (6_000, 5)
    } else {
        (populations::SOURCES, populations::MINUTES)
    };
    let mut workloads = traced(base);
    workloads.extend(populations::all(seed, sources, minutes));
    workloads
}

/// Every estimator at every sub-window count on every workload, in both
/// modes, but the uniform rule on the first `run_already` workloads: the
/// main suite's sliding windows are those runs ([`from_suite`]).
pub fn jobs(workloads: &[Workload], run_already: usize) -> Vec<Job> {
    let mut jobs = Vec::new();
    for denied in [DeniedRequests::Refunded, DeniedRequests::Counted] {
        for workload in 0..workloads.len() {
            for &sub_windows in &SUB_WINDOWS {
                for &estimator in &ESTIMATORS {
                    if estimator == Estimator::Uniform && workload < run_already {
                        continue;
                    }
                    let limiter = Estimated {
                        sub_windows,
                        estimator,
                    };
                    jobs.push((workload, limiter, denied));
                }
            }
        }
    }
    jobs
}

/// The rows of the main suite that are this comparison's uniform runs:
/// the sliding window at each of [`SUB_WINDOWS`] with the default caches,
/// in both modes, which is what [`Estimated`] builds for the uniform rule.
pub fn from_suite(rows: &[suite::Row]) -> Vec<Row> {
    rows.iter()
        .filter(|row| row.job.default_caches())
        .filter_map(|row| match row.job.algorithm {
            Algorithm::SlidingWindow { sub_windows } if SUB_WINDOWS.contains(&sub_windows) => {
                Some(Row {
                    workload: row.job.workload,
                    limiter: Estimated {
                        sub_windows,
                        estimator: Estimator::Uniform,
                    },
                    denied: row.job.denied,
                    outcome: row.outcome.clone(),
                })
            }
            _ => None,
        })
        .collect()
}

/// Runs `jobs` over `threads` threads.
pub fn run(
    workloads: &[Workload],
    jobs: &[Job],
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<Row>, RunError> {
    // The longest first, so that no thread is left with a long one at the
    // end: requests times the keys each decision names.
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| {
        let (workload, limiter, _) = jobs[i];
        std::cmp::Reverse(
            workloads[workload].requests.len() as u64 * u64::from(limiter.sub_windows + 3),
        )
    });
    let results = runner::run_all(jobs, &order, threads, |&(workload, limiter, denied)| {
        runner::run_mode(
            &workloads[workload],
            limiter,
            Caches::DEFAULT,
            denied,
            progress,
        )
    });
    jobs.iter()
        .zip(results)
        .map(|(&(workload, limiter, denied), outcome)| {
            let outcome = outcome.ok_or("a job was not run")??;
            Ok(Row {
                workload,
                limiter,
                denied,
                outcome,
            })
        })
        .collect()
}

/// The row of workload `w` under the sliding window of `n` sub-windows
/// weighing by `estimator`, in mode `denied`.
fn find(
    rows: &[Row],
    w: usize,
    n: u32,
    estimator: Estimator,
    denied: DeniedRequests,
) -> Option<&Row> {
    let limiter = Estimated {
        sub_windows: n,
        estimator,
    };
    rows.iter()
        .find(|row| row.workload == w && row.denied == denied && row.limiter == limiter)
}

/// The comparison as markdown: per workload and sub-window count, each
/// estimator's wrong decisions (wrongly allowed + wrongly denied, % of
/// requests) and mean relative difference from the exact count (%), under
/// the project's measure and Cloudflare's.
pub fn markdown(workloads: &[Workload], rows: &[Row]) -> String {
    let mut out = String::from(
        "## The sliding window's estimators\n\n\
         The sliding window at 1, 4, 12 and 60 sub-windows, under the uniform rule and the \
         moment estimator. Under the project's measure each cell is: wrong decisions against \
         the exact limiter (wrongly allowed + wrongly denied, % of requests) / wrong decisions \
         by the limiter's own admissions (over limit + denied with `x + w ≤ L`, %) / mean \
         relative difference from the exact count (%) / over limit (%). Under Cloudflare's: \
         wrong decisions (%) / mean relative difference (%) / wrongly allowed (%).\n\n",
    );
    for (denied, title) in [
        (
            DeniedRequests::Refunded,
            "the project's measure (denied requests refunded, against the exact sliding window of the admitted requests)",
        ),
        (
            DeniedRequests::Counted,
            "Cloudflare's measure (strict mode, against the exact count of every request)",
        ),
    ] {
        let _ = writeln!(out, "### {title}\n");
        let mut header = String::from("| workload | n |");
        let mut rule = String::from("|---|---:|");
        for estimator in ESTIMATORS {
            let _ = write!(header, " {estimator} |");
            rule.push_str("---|");
        }
        let _ = writeln!(out, "{header}\n{rule}");
        for (w, workload) in workloads.iter().enumerate() {
            for n in SUB_WINDOWS {
                let mut line = format!("| {} | {n} |", workload.id);
                for estimator in ESTIMATORS {
                    let row = find(rows, w, n, estimator, denied);
                    let cell = row.map_or("–".to_owned(), cell);
                    let _ = write!(line, " {cell} |");
                }
                let _ = writeln!(out, "{line}");
            }
        }
        out.push('\n');
    }
    out
}

fn cell(row: &Row) -> String {
    let rel = |rel: Option<f64>| rel.map_or("–".to_owned(), |rel| format!("{rel:.1}"));
    match &row.outcome.strict {
        Some(strict) => format!(
            "{:.2} / {} / {:.3}",
            strict.wrongly_allowed_pct + strict.wrongly_denied_pct,
            rel(strict.mean_rel_pct),
            strict.wrongly_allowed_pct,
        ),
        None => {
            let m = &row.outcome.metrics;
            format!(
                "{:.2} / {:.2} / {} / {:.3}",
                m.wrongly_allowed_pct + m.wrongly_denied_pct,
                m.over_limit_pct + m.under_limit_denied_pct,
                rel(m.mean_rel_pct),
                m.over_limit_pct,
            )
        }
    }
}

/// A measure: its title, the mode it runs in, and how it reads a row:
/// (wrong decisions, mean relative difference, wrongly allowed), in % of
/// requests.
type Measure = (&'static str, DeniedRequests, fn(&Row) -> (f64, f64, f64));

/// The three measures a run is judged by.
const MEASURES: [Measure; 3] = [
    (
        "Cloudflare's: strict mode, against the exact count of every request",
        DeniedRequests::Counted,
        |row| {
            let s = row.outcome.strict.as_ref().expect("a strict-mode row");
            (
                s.wrongly_allowed_pct + s.wrongly_denied_pct,
                s.mean_rel_pct.unwrap_or(0.0),
                s.wrongly_allowed_pct,
            )
        },
    ),
    (
        "the project's, by the limiter's own admissions: denied requests refunded",
        DeniedRequests::Refunded,
        |row| projects(row, true),
    ),
    (
        "the project's, against an exact limiter's decisions: denied requests refunded",
        DeniedRequests::Refunded,
        |row| projects(row, false),
    ),
];

/// The project's measure of a row, judged by the limiter's `own`
/// admissions or against the exact limiter's decisions: (wrong decisions,
/// mean relative difference, wrongly allowed), in %.
fn projects(row: &Row, own: bool) -> (f64, f64, f64) {
    let m = &row.outcome.metrics;
    let (wrong, allowed) = if own {
        (
            m.over_limit_pct + m.under_limit_denied_pct,
            m.over_limit_pct,
        )
    } else {
        (
            m.wrongly_allowed_pct + m.wrongly_denied_pct,
            m.wrongly_allowed_pct,
        )
    };
    (wrong, m.mean_rel_pct.unwrap_or(0.0), allowed)
}

/// The comparison in brief: per sub-window count and measure, each
/// estimator's mean over the workloads, and on how many workloads the
/// moment estimator makes no more wrong decisions; then the three
/// populations under Cloudflare's measure. `None` if a row is missing.
pub fn summary(workloads: &[Workload], rows: &[Row]) -> Option<String> {
    let find = |w, n, estimator, denied| find(rows, w, n, estimator, denied);
    let mut out = format!(
        "Each cell: wrong decisions / mean relative difference from the exact count / \
         wrongly allowed, in % of requests, averaged over the {} workloads (every workload \
         of the simulations and the three populations below).\n\n\
         | n | measure | uniform | moment | workloads where moment errs no more |\n\
         |---:|---|---|---|---:|\n",
        workloads.len()
    );
    let triple =
        |(wrong, rel, allowed): (f64, f64, f64)| format!("{wrong:.2} / {rel:.2} / {allowed:.3}");
    for n in SUB_WINDOWS {
        for (title, denied, read) in MEASURES {
            let mut sums = [(0.0, 0.0, 0.0); 2];
            let mut no_worse = 0;
            for w in 0..workloads.len() {
                let uniform = read(find(w, n, Estimator::Uniform, denied)?);
                let moment = read(find(w, n, Estimator::Moment, denied)?);
                for (sum, value) in sums.iter_mut().zip([uniform, moment]) {
                    sum.0 += value.0;
                    sum.1 += value.1;
                    sum.2 += value.2;
                }
                no_worse += usize::from(moment.0 <= uniform.0);
            }
            let mean = |(a, b, c): (f64, f64, f64)| {
                let k = workloads.len() as f64;
                (a / k, b / k, c / k)
            };
            let _ = writeln!(
                out,
                "| {n} | {title} | {} | {} | {no_worse} of {} |",
                triple(mean(sums[0])),
                triple(mean(sums[1])),
                workloads.len()
            );
        }
    }
    let _ = write!(
        out,
        "\nThe populations, Cloudflare's measure; each cell: wrong decisions / mean \
         relative difference / wrongly allowed (%):\n\n\
         | population | uniform n=1 | moment n=1 | uniform n=4 | moment n=4 | uniform n=12 | moment n=12 |\n\
         |---|---|---|---|---|---|---|\n"
    );
    let (_, denied, read) = MEASURES[0];
    for (w, workload) in workloads.iter().enumerate() {
        if !workload.id.starts_with("population-") {
            continue;
        }
        let mut line = format!("| {} |", workload.id);
        for n in [1, 4, 12] {
            for estimator in ESTIMATORS {
                let (wrong, rel, allowed) = read(find(w, n, estimator, denied)?);
                let _ = write!(line, " {wrong:.2} / {rel:.1} / {allowed:.3} |");
            }
        }
        let _ = writeln!(out, "{line}");
    }
    Some(out)
}

/// The bursty workload whose traced client the estimators' figures show.
pub const TRACED_WORKLOAD: &str = "on-off";
/// The most points of a line of its figures.
const TRACE_POINTS: usize = 1_200;
/// How long its client is traced: ten minutes, fifteen bursts.
const TRACED_NANOS: u64 = 10 * 60 * 1_000_000_000;

/// `workloads`, with the first client of [`TRACED_WORKLOAD`] traced over
/// its first ten minutes.
pub fn traced(mut workloads: Vec<Workload>) -> Vec<Workload> {
    for workload in &mut workloads {
        if workload.id == TRACED_WORKLOAD && workload.trace.is_none() {
            workload.trace = Some(Trace {
                client: 0,
                until: TRACED_NANOS,
            });
        }
    }
    workloads
}

/// One figure per sub-window count of 1 and 4: the traced bursty client's
/// estimate under the uniform rule (top) and the moment estimator
/// (bottom), against the exact count of every request it sent, in strict
/// mode (Cloudflare's measure), where the two estimate the same count.
pub fn figures(
    dir: &Path,
    workloads: &[Workload],
    rows: &[Row],
) -> Result<Vec<PathBuf>, Box<dyn Error>> {
    let mut written = Vec::new();
    let Some(w) = workloads.iter().position(|w| w.id == TRACED_WORKLOAD) else {
        return Ok(written);
    };
    for n in [1, 4] {
        let traced: Vec<&Row> = ESTIMATORS
            .iter()
            .filter_map(|&estimator| find(rows, w, n, estimator, DeniedRequests::Counted))
            .filter(|row| !row.outcome.trace.is_empty())
            .collect();
        let Some(first) = traced.first() else {
            continue;
        };
        let workload = &workloads[first.workload];
        let estimates: Vec<(String, Vec<(f64, f64)>)> = traced
            .iter()
            .map(|row| {
                let line = series(&row.outcome.trace, |p| p.estimate, TRACE_POINTS);
                (row.limiter.label(), line)
            })
            .collect();
        let path = dir.join(format!("estimators-sliding-{n}-on-off.svg"));
        let title =
            format!("Sliding window n={n}: one on/off client (10 s at 5× the limit, 40 s off)");
        plot::estimate_vs_exact(
            &path,
            &title,
            workload.quota.limit() as f64,
            &series(&first.outcome.trace, |p| p.exact, TRACE_POINTS),
            &estimates,
        )?;
        written.push(path);
    }
    Ok(written)
}
