//! Replays a workload through one algorithm on the embedded store and
//! judges every decision.

use std::error::Error;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use memcache_ratelimit::store::{CountingStore, MemoryStore};
use memcache_ratelimit::Limiter;
use memcache_ratelimit::ManualClock;

use crate::algorithms::{Algorithm, Caches, DeniedRequests, Simulated};
use crate::metrics::{Metrics, Observation, Tally};
use crate::oracle::{ExactCounts, ExactLimiter, ExactWindows};
use crate::strict::{StrictMetrics, StrictObservation, StrictTally};
use crate::trace::TracePoint;
use crate::workload::{Workload, START_UNIX_SECS};

/// Any failure of a run: a limiter that would not build, or a decision that
/// returned an error (neither should happen on the embedded store).
pub type RunError = Box<dyn Error + Send + Sync>;

/// How often, in parts of a period, the store's live keys are sampled.
const KEY_SAMPLES_PER_PERIOD: u64 = 10;
/// How many requests pass between progress reports.
const PROGRESS_EVERY: u64 = 4096;

/// What one run produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The metrics over the whole run.
    pub metrics: Metrics,
    /// In strict mode ([`DeniedRequests::Counted`]), Cloudflare's measure:
    /// every decision against the exact count of all requests
    /// ([`crate::strict`]). `None` in the default mode, where denied
    /// requests are refunded and that count is not what the algorithm
    /// approximates.
    pub strict: Option<StrictMetrics>,
    /// The traced client's decisions, if the workload traces one.
    pub trace: Vec<TracePoint>,
}

/// Replays `workload` through `algorithm` with the library's default
/// caches ([`Caches::DEFAULT`]): see [`run_with`].
pub fn run(
    workload: &Workload,
    algorithm: Algorithm,
    progress: &dyn Fn(u64),
) -> Result<Outcome, RunError> {
    run_with(workload, algorithm, Caches::DEFAULT, progress)
}

/// Replays `workload` through `algorithm` with `caches`, denied requests
/// refunded (the library's default): see [`run_mode`].
pub fn run_with(
    workload: &Workload,
    algorithm: Algorithm,
    caches: Caches,
    progress: &dyn Fn(u64),
) -> Result<Outcome, RunError> {
    run_mode(
        workload,
        algorithm,
        caches,
        DeniedRequests::Refunded,
        progress,
    )
}

/// Replays `workload` through `algorithm` with `caches`, denied requests
/// costing as `denied` says: one `MemoryStore` (wrapped in a
/// `CountingStore`) on a `ManualClock` at true time, and one limiter per
/// node, each built on its own `ManualClock` set to true time plus the
/// node's skew, so each node has its own in-process caches, as separate
/// processes would. In strict mode ([`DeniedRequests::Counted`]) each
/// decision is also compared with the exact count of all requests
/// ([`Outcome::strict`]). `progress` is called with the number of requests
/// done, now and then.
pub fn run_mode(
    workload: &Workload,
    algorithm: impl Simulated,
    caches: Caches,
    denied: DeniedRequests,
    progress: &dyn Fn(u64),
) -> Result<Outcome, RunError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    runtime.block_on(async {
        let quota = workload.quota;
        let start = DateTime::<Utc>::from_timestamp(START_UNIX_SECS, 0).expect("in range");
        let truth = ManualClock::new(start);
        let store = Arc::new(CountingStore::new(MemoryStore::with_clock(truth.clone())));
        let mut nodes: Vec<(ManualClock, TimeDelta, Box<dyn Limiter>)> = Vec::new();
        for &skew in &workload.skews {
            let skew = TimeDelta::nanoseconds(skew);
            let clock = ManualClock::new(start + skew);
            // A new limiter per node: its sealed-bucket cache and its deny
            // cache are its own.
            let limiter =
                algorithm.build_mode(quota, store.clone(), clock.clone(), caches, denied)?;
            nodes.push((clock, skew, limiter));
        }
        let clients = workload.clients as usize;
        let keys: Vec<Vec<u8>> = (0..clients)
            .map(|c| format!("client-{c}").into_bytes())
            .collect();
        let mut own = ExactWindows::new(clients, quota.period());
        let mut reference = ExactLimiter::new(quota.limit(), quota.period(), clients);
        let mut tally = Tally::new(quota.limit());
        let strict = denied == DeniedRequests::Counted;
        let mut all = strict.then(|| {
            (
                ExactCounts::new(clients, quota.period()),
                StrictTally::new(quota.limit(), clients),
            )
        });
        let period = workload.period();
        let mut sampler = KeySampler::new(clients, period, period / KEY_SAMPLES_PER_PERIOD);
        let mut trace = Vec::new();

        for (i, request) in workload.requests.iter().enumerate() {
            let now = start + Duration::from_nanos(request.at);
            truth.set(now);
            if let Some(active) = sampler.due(request.at) {
                let memory = store.inner();
                memory.purge_expired();
                tally.sample_keys(memory.len(), active);
            }
            sampler.seen(request.client as usize, request.at);

            let (clock, skew, limiter) = &nodes[usize::from(request.node)];
            clock.set(now + *skew);
            let client = request.client as usize;
            let decision = limiter.check_n(&keys[client], request.cost).await?;

            let window = own.client(client);
            let mut exact = window.count(request.at);
            if decision.is_allowed() {
                window.admit(request.at, request.cost);
                exact += request.cost;
            }
            let observation = Observation {
                allowed: decision.is_allowed(),
                exact_allowed: reference.check(client, request.at, request.cost),
                estimate: decision.used(),
                exact,
                cost: request.cost,
            };
            tally.record(observation);
            // What the estimate is traced against: the algorithm's own
            // admissions, or in strict mode every request sent.
            let mut traced_exact = exact;
            if let Some((counts, strict)) = &mut all {
                traced_exact = counts.offer(client, request.at, request.cost);
                strict.record(StrictObservation {
                    client,
                    allowed: observation.allowed,
                    estimate: observation.estimate,
                    exact: traced_exact,
                });
            }
            if let Some(traced) = workload.trace {
                if traced.client == request.client && request.at <= traced.until {
                    trace.push(TracePoint {
                        at: request.at,
                        estimate: observation.estimate,
                        exact: traced_exact as f64,
                        allowed: observation.allowed,
                    });
                }
            }
            if (i as u64 + 1).is_multiple_of(PROGRESS_EVERY) {
                progress(PROGRESS_EVERY);
            }
        }
        progress(workload.requests.len() as u64 % PROGRESS_EVERY);
        Ok::<_, RunError>(Outcome {
            metrics: tally.finish(store.calls()),
            strict: all.map(|(_, strict)| strict.finish()),
            trace,
        })
    })
}

/// Decides when to sample the store and counts the clients active then:
/// those that sent a request within the last period.
struct KeySampler {
    last_seen: Vec<Option<u64>>,
    period: u64,
    interval: u64,
    next: u64,
}

impl KeySampler {
    fn new(clients: usize, period: u64, interval: u64) -> Self {
        Self {
            last_seen: vec![None; clients],
            period,
            interval: interval.max(1),
            next: interval.max(1),
        }
    }

    /// At the first request at or after each sampling time: the number of
    /// active clients, before this request counts.
    fn due(&mut self, now: u64) -> Option<usize> {
        if now < self.next {
            return None;
        }
        self.next = (now / self.interval + 1) * self.interval;
        let active = self
            .last_seen
            .iter()
            .filter(|seen| seen.is_some_and(|at| at + self.period > now))
            .count();
        Some(active)
    }

    fn seen(&mut self, client: usize, now: u64) {
        self.last_seen[client] = Some(now);
    }
}

/// Runs `run` on every job of `jobs` over `threads` threads, taking them in
/// `order` (indices into `jobs`), and returns the outcomes in the order of
/// `jobs`. After a job fails no more are started: the jobs not run are
/// `None`.
pub fn run_all<J: Sync>(
    jobs: &[J],
    order: &[usize],
    threads: usize,
    run: impl Fn(&J) -> Result<Outcome, RunError> + Sync,
) -> Vec<Option<Result<Outcome, RunError>>> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Outcome, RunError>>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                while let Some(&index) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let outcome = run(&jobs[index]);
                    let failed = outcome.is_err();
                    results.lock().expect("no panics while held")[index] = Some(outcome);
                    if failed {
                        // Stop handing out work; the caller reports the error.
                        next.store(order.len(), Ordering::Relaxed);
                    }
                }
            });
        }
    });
    results.into_inner().expect("no panics while held")
}
