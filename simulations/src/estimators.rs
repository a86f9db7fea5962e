//! The sliding window's estimators side by side: the uniform rule against
//! the moment-corrected ones, at several sub-window counts, on every
//! workload, under both measures (the project's own, denied requests
//! refunded, and Cloudflare's, in strict mode against the exact count of
//! every request).

use std::error::Error;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use memcache_ratelimit::algorithm::Estimator;
use memcache_ratelimit::{LimiterSpec, ManualClock, Quota};

use crate::algorithms::{Algorithm, Caches, DeniedRequests, Simulated, DEADLINE};
use crate::plot;
use crate::runner::{self, Outcome, RunError};
use crate::trace::downsample;
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
        .deadline(DEADLINE)
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

/// Every estimator at every sub-window count on every workload, in both
/// modes, over `threads` threads.
pub fn run(
    workloads: &[Workload],
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<Row>, RunError> {
    let mut jobs = Vec::new();
    for denied in [DeniedRequests::Refunded, DeniedRequests::Counted] {
        for workload in 0..workloads.len() {
            for &sub_windows in &SUB_WINDOWS {
                for &estimator in &ESTIMATORS {
                    let limiter = Estimated {
                        sub_windows,
                        estimator,
                    };
                    jobs.push((workload, limiter, denied));
                }
            }
        }
    }
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Outcome, RunError>>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(workload, limiter, denied)) = jobs.get(index) else {
                    break;
                };
                let outcome = runner::run_mode(
                    &workloads[workload],
                    limiter,
                    Caches::DEFAULT,
                    denied,
                    progress,
                );
                results.lock().expect("no panics while held")[index] = Some(outcome);
            });
        }
    });
    let results = results.into_inner().expect("no panics while held");
    jobs.into_iter()
        .zip(results)
        .map(|((workload, limiter, denied), outcome)| {
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

/// The comparison as markdown: per workload and sub-window count, each
/// estimator's wrong decisions (wrongly allowed + wrongly denied, % of
/// requests) and mean relative difference from the exact count (%), under
/// the project's measure and Cloudflare's.
pub fn markdown(workloads: &[Workload], rows: &[Row]) -> String {
    let mut out = String::from(
        "## The sliding window's estimators\n\n\
         Each cell: wrong decisions (wrongly allowed + wrongly denied, % of requests) / \
         mean relative difference from the exact count (%) / wrongly allowed (%).\n\n",
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
                    let row = rows.iter().find(|row| {
                        row.workload == w
                            && row.denied == denied
                            && row.limiter
                                == Estimated {
                                    sub_windows: n,
                                    estimator,
                                }
                    });
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
    let (wrong, rel, allowed) = match &row.outcome.strict {
        Some(strict) => (
            strict.wrongly_allowed_pct + strict.wrongly_denied_pct,
            strict.mean_rel_pct,
            strict.wrongly_allowed_pct,
        ),
        None => {
            let m = &row.outcome.metrics;
            (
                m.wrongly_allowed_pct + m.wrongly_denied_pct,
                m.mean_rel_pct,
                m.wrongly_allowed_pct,
            )
        }
    };
    format!(
        "{wrong:.2} / {} / {allowed:.3}",
        rel.map_or("–".to_owned(), |rel| format!("{rel:.1}"))
    )
}

/// The bursty workload whose traced client the estimators' figures show.
pub const TRACED_WORKLOAD: &str = "on-off";
/// How long its client is traced: ten minutes, fifteen bursts.
const TRACED_NANOS: u64 = 10 * 60 * 1_000_000_000;

/// `workloads`, with the first client of [`TRACED_WORKLOAD`] traced over
/// its first ten minutes.
pub fn traced(workloads: &[Workload]) -> Vec<Workload> {
    workloads
        .iter()
        .cloned()
        .map(|mut workload| {
            if workload.id == TRACED_WORKLOAD && workload.trace.is_none() {
                workload.trace = Some(Trace {
                    client: 0,
                    until: TRACED_NANOS,
                });
            }
            workload
        })
        .collect()
}

/// One figure per sub-window count of 1 and 4: the traced bursty client's
/// estimate and the exact count of what was admitted, under the uniform
/// rule (top) and the moment estimator (bottom), in the project's mode.
pub fn figures(
    dir: &Path,
    workloads: &[Workload],
    rows: &[Row],
) -> Result<Vec<PathBuf>, Box<dyn Error>> {
    let mut written = Vec::new();
    for n in [1, 4] {
        let traces: Vec<&Row> = [Estimator::Uniform, Estimator::Moment]
            .iter()
            .filter_map(|&estimator| {
                rows.iter().find(|row| {
                    workloads[row.workload].id == TRACED_WORKLOAD
                        && row.denied == DeniedRequests::Refunded
                        && row.limiter
                            == Estimated {
                                sub_windows: n,
                                estimator,
                            }
                })
            })
            .collect();
        for row in traces {
            let workload = &workloads[row.workload];
            let trace = &row.outcome.trace;
            if trace.is_empty() {
                continue;
            }
            let exact: Vec<(f64, f64)> = trace.iter().map(|p| (p.seconds(), p.exact)).collect();
            let estimate: Vec<(f64, f64)> =
                trace.iter().map(|p| (p.seconds(), p.estimate)).collect();
            let path = dir.join(format!("estimate-{}-on-off.svg", row.limiter.id()));
            let title = format!(
                "{}: estimate vs exact count, one on/off client (10 s at 5× the limit, 40 s off)",
                row.limiter.label(),
            );
            plot::estimate_vs_exact(
                &path,
                &title,
                workload.quota.limit() as f64,
                &downsample(&exact, 1_200),
                &[(row.limiter.label(), downsample(&estimate, 1_200))],
            )?;
            written.push(path);
        }
    }
    Ok(written)
}
