//! What the pipeline sent: the counters behind
//! [`MemcachedStore::pipeline_stats`](crate::MemcachedStore::pipeline_stats).

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of what the pipeline sent, from [`MemcachedStore::pipeline_stats`].
///
/// `jobs / batches` is the average number of store calls that shared one
/// round trip. Calls whose keys span servers, and every call of a store
/// built with [`pipelining(false)`](crate::store::MemcachedStoreBuilder::pipelining),
/// bypass the pipeline and are not counted.
///
/// [`MemcachedStore::pipeline_stats`]: crate::MemcachedStore::pipeline_stats
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PipelineStats {
    /// Batches sent (exchanges, one round trip each).
    pub batches: u64,
    /// Store calls sent in those batches.
    pub jobs: u64,
    /// memcached operations sent in those batches.
    pub ops: u64,
    /// Queued calls that were never sent because their caller had stopped
    /// waiting (a deadline passed) before their batch went out.
    pub abandoned: u64,
    /// The most calls one batch carried.
    pub largest_batch: u64,
    /// Tasks started to send queued calls. A lane keeps at most its
    /// pipeline depth of them: between bursts they wait for the next
    /// queued call rather than end, so this stops growing once traffic
    /// has reached that depth.
    pub drivers: u64,
}

impl PipelineStats {
    /// Store calls per batch on average; 0 before the first batch.
    pub fn jobs_per_batch(&self) -> f64 {
        if self.batches == 0 {
            0.0
        } else {
            self.jobs as f64 / self.batches as f64
        }
    }
}

/// The live counters, shared by the lanes.
#[derive(Default)]
pub(super) struct Stats {
    batches: AtomicU64,
    jobs: AtomicU64,
    ops: AtomicU64,
    abandoned: AtomicU64,
    largest_batch: AtomicU64,
    drivers: AtomicU64,
}

impl Stats {
    /// What was counted so far.
    pub(super) fn snapshot(&self) -> PipelineStats {
        PipelineStats {
            batches: self.batches.load(Ordering::Relaxed),
            jobs: self.jobs.load(Ordering::Relaxed),
            ops: self.ops.load(Ordering::Relaxed),
            abandoned: self.abandoned.load(Ordering::Relaxed),
            largest_batch: self.largest_batch.load(Ordering::Relaxed),
            drivers: self.drivers.load(Ordering::Relaxed),
        }
    }

    /// `count` queued jobs were dropped unsent: their callers had gone.
    pub(super) fn abandoned(&self, count: u64) {
        self.abandoned.fetch_add(count, Ordering::Relaxed);
    }

    /// A task was started to send queued jobs.
    pub(super) fn driver(&self) {
        self.drivers.fetch_add(1, Ordering::Relaxed);
    }

    /// One batch of `jobs` jobs and `ops` operations went out.
    pub(super) fn batch(&self, jobs: usize, ops: usize) {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.jobs.fetch_add(jobs as u64, Ordering::Relaxed);
        self.ops.fetch_add(ops as u64, Ordering::Relaxed);
        self.largest_batch.fetch_max(jobs as u64, Ordering::Relaxed);
    }
}
