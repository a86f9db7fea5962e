//! Every algorithm on every workload, in the library's default mode and in
//! strict mode, run in parallel over a few threads.

use crate::algorithms::{Algorithm, Caches, DeniedRequests, Simulated};
use crate::runner::{self, Outcome, RunError};
use crate::workload::Workload;

/// The workloads of the caches comparison: where in-process caches could
/// change decisions (several nodes, with and without clock skew) or save
/// the most store work (clients over the limit, bursts).
pub const CACHES_WORKLOADS: [&str; 5] = [
    "cluster-skew-0",
    "cluster-skew-100ms",
    "cluster-skew-1s",
    "poisson-1.5x",
    "on-off",
];

/// The algorithms of the caches comparison: the sliding window, which has
/// both caches, and the token bucket, which has only the deny cache.
pub const CACHES_ALGORITHMS: [Algorithm; 4] = [
    Algorithm::SlidingWindow { sub_windows: 1 },
    Algorithm::SlidingWindow { sub_windows: 4 },
    Algorithm::SlidingWindow { sub_windows: 12 },
    Algorithm::TokenBucket { capacity: None },
];

/// One algorithm on one workload, with some in-process caches, denied
/// requests refunded or counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Job {
    /// Index into the workloads.
    pub workload: usize,
    /// The algorithm.
    pub algorithm: Algorithm,
    /// The caches, as far as the algorithm has them
    /// ([`Caches::for_algorithm`]).
    pub caches: Caches,
    /// What a denied request costs: refunded (the library's default) or
    /// counted (strict mode, for Cloudflare's measure).
    pub denied: DeniedRequests,
}

impl Job {
    /// `algorithm` on workload `workload` with `caches`, as far as the
    /// algorithm has them, denied requests refunded.
    pub fn new(workload: usize, algorithm: Algorithm, caches: Caches) -> Self {
        Self {
            workload,
            algorithm,
            caches: caches.for_algorithm(algorithm),
            denied: DeniedRequests::Refunded,
        }
    }

    /// `algorithm` on workload `workload` in strict mode, with the
    /// library's default caches: the run Cloudflare's measure is taken on.
    pub fn strict(workload: usize, algorithm: Algorithm) -> Self {
        Self {
            denied: DeniedRequests::Counted,
            ..Self::new(workload, algorithm, Caches::DEFAULT)
        }
    }

    pub fn default_caches(&self) -> bool {
        self.caches == Caches::DEFAULT.for_algorithm(self.algorithm)
    }

    /// Whether this job runs with the library's defaults (caches, denied
    /// requests refunded), as the main tables do.
    pub fn is_main(&self) -> bool {
        self.default_caches() && self.denied == DeniedRequests::Refunded
    }

    /// Whether this job is the strict-mode run of the main tables
    /// ([`Job::strict`]).
    pub fn is_strict(&self) -> bool {
        self.default_caches() && self.denied == DeniedRequests::Counted
    }
}

/// The result of one job.
#[derive(Debug, Clone)]
pub struct Row {
    /// The job.
    pub job: Job,
    /// What it produced.
    pub outcome: Outcome,
}

/// Every algorithm on every workload, workload by workload, with the
/// library's default caches: first with denied requests refunded (the
/// library's default), then in strict mode ([`Job::strict`]).
pub fn jobs(workloads: &[Workload], algorithms: &[Algorithm]) -> Vec<Job> {
    let mode = |strict: bool| {
        (0..workloads.len()).flat_map(move |workload| {
            algorithms.iter().map(move |&algorithm| {
                if strict {
                    Job::strict(workload, algorithm)
                } else {
                    Job::new(workload, algorithm, Caches::DEFAULT)
                }
            })
        })
    };
    mode(false).chain(mode(true)).collect()
}

/// The caches comparison: each of [`CACHES_ALGORITHMS`] on each of
/// [`CACHES_WORKLOADS`] present in `workloads`, with each of its
/// [`Caches::variants`].
pub fn caches_jobs(workloads: &[Workload]) -> Vec<Job> {
    CACHES_WORKLOADS
        .iter()
        .filter_map(|&id| workloads.iter().position(|w| w.id == id))
        .flat_map(|workload| {
            CACHES_ALGORITHMS.iter().flat_map(move |&algorithm| {
                Caches::variants(algorithm)
                    .into_iter()
                    .map(move |caches| Job::new(workload, algorithm, caches))
            })
        })
        .collect()
}

/// `first`, then the jobs of `more` that are not already in it.
pub fn merge(first: Vec<Job>, more: &[Job]) -> Vec<Job> {
    let mut all = first;
    for job in more {
        if !all.contains(job) {
            all.push(*job);
        }
    }
    all
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
    let results = runner::run_all(jobs, &order, threads, |job| {
        runner::run_mode(
            &workloads[job.workload],
            job.algorithm,
            job.caches,
            job.denied,
            progress,
        )
    });
    let mut rows = Vec::with_capacity(jobs.len());
    for (job, result) in jobs.iter().zip(results) {
        match result {
            Some(Ok(outcome)) => rows.push(Row { job: *job, outcome }),
            Some(Err(error)) => {
                return Err(format!(
                    "{} (caches: {}, denied requests {:?}) on {}: {error}",
                    job.algorithm.label(),
                    job.caches,
                    job.denied,
                    workloads[job.workload].id
                )
                .into())
            }
            None => return Err("a job was not run after another failed".into()),
        }
    }
    Ok(rows)
}
