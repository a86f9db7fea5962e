//! Every algorithm on every workload, run in parallel over a few threads.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::algorithms::Algorithm;
use crate::runner::{self, Outcome, RunError};
use crate::workload::Workload;

/// One algorithm on one workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Job {
    /// Index into the workloads.
    pub workload: usize,
    /// The algorithm.
    pub algorithm: Algorithm,
}

/// The result of one job.
#[derive(Debug, Clone)]
pub struct Row {
    /// The job.
    pub job: Job,
    /// What it produced.
    pub outcome: Outcome,
}

/// Every algorithm on every workload, workload by workload.
pub fn jobs(workloads: &[Workload], algorithms: &[Algorithm]) -> Vec<Job> {
    (0..workloads.len())
        .flat_map(|workload| {
            algorithms.iter().map(move |&algorithm| Job {
                workload,
                algorithm,
            })
        })
        .collect()
}

/// A rough relative cost of a job, to start the longest first: requests
/// times the keys each decision names.
fn weight(workloads: &[Workload], job: Job) -> u64 {
    let keys = job.algorithm.sub_windows().map_or(1, |n| u64::from(n) + 1);
    workloads[job.workload].requests.len() as u64 * (keys + 2)
}

/// Runs `jobs` over `threads` threads, longest first, and returns their
/// rows in the order of `jobs`. Every job is deterministic on its own, so
/// the results do not depend on the threads. `progress` gets the number of
/// requests done, now and then, from any thread.
pub fn run(
    workloads: &[Workload],
    jobs: &[Job],
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<Row>, RunError> {
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(weight(workloads, jobs[i])));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Outcome, RunError>>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                while let Some(&index) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let job = jobs[index];
                    let outcome = runner::run(&workloads[job.workload], job.algorithm, progress);
                    let failed = outcome.is_err();
                    results.lock().expect("no panics while held")[index] = Some(outcome);
                    if failed {
                        // Stop handing out work; the error is reported below.
                        next.store(order.len(), Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let results = results.into_inner().expect("no panics while held");
    let mut rows = Vec::with_capacity(jobs.len());
    for (job, result) in jobs.iter().zip(results) {
        match result {
            Some(Ok(outcome)) => rows.push(Row { job: *job, outcome }),
            Some(Err(error)) => {
                return Err(format!(
                    "{} on {}: {error}",
                    job.algorithm, workloads[job.workload].id
                )
                .into())
            }
            None => return Err("a job was not run after another failed".into()),
        }
    }
    Ok(rows)
}
