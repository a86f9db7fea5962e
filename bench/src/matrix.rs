//! The benchmark matrix: throughput, latency and memory of
//! memcache-ratelimit's algorithms against one local memcached (`-t 1`),
//! with the server and this client pinned to different CPUs where
//! possible. See `bench/README.md`. Run by the `memcache-ratelimit-bench`
//! binary and the operator CLI's `bench`.

use memcache_ratelimit::Algorithm;

use crate::algorithm::{Case, Setup};
use crate::client::{raw_client, store};
use crate::cpu::{Meter, PerDecision};
use crate::server::{self, Memcached};
use crate::socket;
use crate::{
    at_least_one, cas_note, cas_policy, first_error_note, latency_histogram, median,
    record_latency, select_cases, Counts, Mode, Modes, Runs, LOG_QUOTA, MANY_CLIENTS, OPEN_QUOTA,
    RAW_TTL,
};
use clap::Parser;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use memcache::exp::{Arithmetic, AsyncMetaClient, Op};
use memcache_ratelimit::{Error, MemcachedStore, RateLimiter};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The in-flight level of the ratios over the raw baseline.
const RATIO_BASELINE_LEVEL: usize = 64;
/// The in-flight level of the ratios over the raw ceiling.
const RATIO_CEILING_LEVEL: usize = 256;

/// Whether a ratio reads `kind` at `in_flight`.
fn read_by_ratios(kind: Kind, in_flight: usize) -> bool {
    match kind {
        Kind::RawBaseline => in_flight == RATIO_BASELINE_LEVEL,
        Kind::RawCeiling | Kind::RawSocket => in_flight == RATIO_CEILING_LEVEL,
        Kind::RawGet => false,
        Kind::Limiter(Case(Algorithm::SlidingWindow { .. }, _)) => true,
        Kind::Limiter(_) => false,
    }
}

/// Most warm-up passes over the clients of "many" mode.
const WARM_UP_PASSES: usize = 10;
/// Increments per write in the raw ceiling.
const CEILING_BATCH: usize = 100;
/// The limiters' deadline: the library's default, as users get it. It also
/// sets when a sliding-window bucket is sealed (clock skew + deadline after
/// it closes). A decision that misses it is an error in its own column.
const DEADLINE: Duration = memcache_ratelimit::limiter::DEFAULT_DEADLINE;
/// The connections' I/O timeout: long enough that no request is abandoned
/// by the client library before the limiter's deadline.
const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// The benchmark's options.
#[derive(Parser, Debug)]
#[command(
    name = "memcache-ratelimit-bench",
    about = "Decisions/s and latency of memcache-ratelimit's algorithms, and memcached memory per client"
)]
pub struct Args {
    #[command(flatten)]
    timing: Runs,
    /// Requests kept outstanding, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64,256", value_parser = at_least_one)]
    in_flight: Vec<usize>,
    /// Only the cases whose name contains this (case-insensitive), e.g.
    /// `raw` or `sliding`; a whole case name (`SlidingWindow n=1`)
    /// selects that case alone.
    #[arg(long)]
    only: Option<String>,
    /// Smoke test: 1 run of 1 s at 1 and 64 in flight.
    #[arg(long)]
    quick: bool,
    /// Only what the ratios read: the raw baseline at 64 in flight, the
    /// raw ceiling at 256, and every SlidingWindow at 64 and 256 (other
    /// cases are still in the memory table).
    #[arg(long, conflicts_with_all = ["quick", "in_flight"])]
    ratios_only: bool,
    /// The memcached binary (default: found on PATH).
    #[arg(long)]
    memcached: Option<std::path::PathBuf>,
    /// Seed of the client-id choice in "many" mode.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Skip the memory measurement.
    #[arg(long)]
    no_memory: bool,
    /// Only the memory measurement.
    #[arg(long, conflicts_with = "no_memory")]
    memory_only: bool,
    /// Use this already-running memcached (`HOST:PORT`) instead of starting
    /// one; the benchmark then neither pins itself nor measures memory.
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "memory_only")]
    server: Option<String>,
    /// Client modes to run: one hot client id, many random ids, or both.
    #[arg(long, value_enum, default_value_t = Modes::Both)]
    mode: Modes,
}

/// What one case does per request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    RawBaseline,
    RawCeiling,
    /// Batches of as many increments as requests in flight, written
    /// straight to one connection ([`crate::socket`]): no client library,
    /// the physical ceiling.
    RawSocket,
    /// A bare `mg` of a key that is not there: the cheapest round trip,
    /// the latency a decision is compared with at one in flight.
    RawGet,
    Limiter(Case),
}

/// The baselines, then every algorithm but the hybrid quota.
fn kinds() -> Vec<Kind> {
    [
        Kind::RawBaseline,
        Kind::RawCeiling,
        Kind::RawSocket,
        Kind::RawGet,
    ]
    .into_iter()
    .chain(
        Case::ALL
            .into_iter()
            .filter(|a| a.0 != Algorithm::HybridQuota)
            .map(Kind::Limiter),
    )
    .collect()
}

impl Kind {
    fn name(self) -> String {
        match self {
            Kind::RawBaseline => "raw baseline".into(),
            Kind::RawCeiling => "raw ceiling (100/batch)".into(),
            Kind::RawSocket => "raw socket (1 connection)".into(),
            Kind::RawGet => "raw get (mg)".into(),
            Kind::Limiter(algorithm) => algorithm.name(),
        }
    }
}

/// The thing a worker calls.
enum Target {
    Raw(AsyncMetaClient),
    Ceiling(AsyncMetaClient),
    Get(AsyncMetaClient),
    /// The address of the memcached a single worker writes batches to.
    Socket(String),
    /// The limiter, and its store, whose pipeline counts its round trips.
    Limiter(Arc<RateLimiter>, Arc<MemcachedStore>),
}

struct WorkerResult {
    counts: Counts,
    first_error: Option<String>,
}

impl WorkerResult {
    /// Counts `errors` failed requests, keeping the first error's text.
    fn failed(&mut self, errors: u64, error: impl std::fmt::Display) {
        self.counts.errors += errors;
        self.first_error.get_or_insert_with(|| error.to_string());
    }

    /// Counts one bare request: allowed if it was answered.
    fn answered<T, E: std::fmt::Display>(&mut self, outcome: Result<T, E>) {
        match outcome {
            Ok(_) => self.counts.allowed += 1,
            Err(error) => self.failed(1, error),
        }
    }
}

/// The latencies of a run: one histogram all its workers record into. A
/// histogram per worker would be 1,024 copies of 220 KB at 1,024 in
/// flight, whose cache misses the client then pays on every decision.
type Latencies = Arc<Mutex<Histogram<u64>>>;

/// One run's outcome.
struct RunResult {
    per_second: f64,
    p50: f64,
    p99: f64,
    p999: f64,
    counts: Counts,
    first_error: Option<String>,
    /// CPU time on both sides, per decision.
    cost: PerDecision,
    /// memcached operations per round trip (a batch written at once), for
    /// the limiters; the raw cases set their own.
    ops_per_trip: Option<f64>,
    /// The compare-and-swap counters' note, see [`cas_note`].
    cas: String,
}

struct CaseResult {
    kind: Kind,
    in_flight: usize,
    runs: Vec<RunResult>,
}

impl CaseResult {
    fn median(&self, field: impl Fn(&RunResult) -> f64) -> f64 {
        median(self.runs.iter().map(field).collect())
    }
}

/// The ids of "many" mode's clients, `<prefix>c0` to `<prefix>c99999`.
pub(crate) fn client_keys(prefix: &str) -> Arc<Vec<Vec<u8>>> {
    Arc::new(
        (0..MANY_CLIENTS)
            .map(|id| format!("{prefix}c{id}").into_bytes())
            .collect(),
    )
}

/// One in-flight slot: requests one after the other until `end`; for
/// the raw socket, the only worker, batches of `batch` increments.
async fn worker(
    target: Arc<Target>,
    keys: Arc<Vec<Vec<u8>>>,
    hot: Option<Vec<u8>>,
    seed: u64,
    end: Instant,
    latencies: Latencies,
    batch: usize,
) -> WorkerResult {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut result = WorkerResult {
        counts: Counts::default(),
        first_error: None,
    };
    let mut socket = match target.as_ref() {
        Target::Socket(address) => match socket::Pipeline::connect(address).await {
            Ok(pipeline) => Some(pipeline),
            Err(error) => {
                result.failed(1, error);
                return result;
            }
        },
        _ => None,
    };
    let mut values = Vec::with_capacity(batch);
    // The id by reference: no copy per request.
    let pick = |rng: &mut StdRng| -> &[u8] {
        match &hot {
            Some(key) => key,
            None => &keys[rng.random_range(0..keys.len())],
        }
    };
    let record = |elapsed: Duration, count: u64| {
        let mut latencies = latencies.lock().expect("no worker panics holding it");
        record_latency(&mut latencies, elapsed, count);
    };
    while Instant::now() < end {
        match target.as_ref() {
            Target::Raw(client) => {
                let key = pick(&mut rng);
                let start = Instant::now();
                let outcome = client
                    .increment(key)
                    .delta(1)
                    .initial(1, RAW_TTL)
                    .send()
                    .await;
                record(start.elapsed(), 1);
                result.answered(outcome);
            }
            Target::Get(client) => {
                let key = pick(&mut rng);
                let start = Instant::now();
                let outcome = client.get(key).send().await;
                record(start.elapsed(), 1);
                result.answered(outcome);
            }
            Target::Ceiling(client) => {
                let batch: Vec<Op> = (0..CEILING_BATCH)
                    .map(|_| Arithmetic::new(pick(&mut rng)).initial(1, RAW_TTL).into())
                    .collect();
                let start = Instant::now();
                let outcome = client.run_batch(batch).await;
                let elapsed = start.elapsed();
                match outcome {
                    Ok(results) => {
                        // Each increment waited as long as its batch.
                        record(elapsed, results.len() as u64);
                        for one in results {
                            result.answered(one);
                        }
                    }
                    Err(error) => result.failed(CEILING_BATCH as u64, error),
                }
            }
            Target::Socket(_) => {
                let Some(pipeline) = socket.as_mut() else {
                    break;
                };
                let start = Instant::now();
                let keys = (0..batch).map(|_| pick(&mut rng));
                let outcome = pipeline.increments(keys, RAW_TTL, &mut values).await;
                let elapsed = start.elapsed();
                match outcome {
                    Ok(()) => {
                        // Each increment waited as long as its batch.
                        record(elapsed, values.len() as u64);
                        result.counts.allowed += values.len() as u64;
                    }
                    Err(error) => {
                        result.failed(batch as u64, error);
                        break;
                    }
                }
            }
            Target::Limiter(limiter, _) => {
                let key = pick(&mut rng);
                let start = Instant::now();
                let outcome = limiter.check(key).await;
                let elapsed = start.elapsed();
                match outcome {
                    Ok(decision) => {
                        record(elapsed, 1);
                        if decision.is_allowed() {
                            result.counts.allowed += 1;
                        } else {
                            result.counts.denied += 1;
                        }
                    }
                    Err(Error::Contention { .. }) => result.counts.contention += 1,
                    Err(error) => result.failed(1, error),
                }
            }
        }
    }
    result
}

/// One run of `seconds` at `in_flight`: every request for `hot` if given,
/// else for a random one of `keys`.
async fn one_run(
    address: &str,
    target: &Arc<Target>,
    keys: &Arc<Vec<Vec<u8>>>,
    hot: Option<Vec<u8>>,
    in_flight: usize,
    seconds: f64,
    seed: u64,
) -> RunResult {
    let pipeline = || match target.as_ref() {
        Target::Limiter(_, store) => Some(store.pipeline_stats()),
        _ => None,
    };
    let cas = || match target.as_ref() {
        Target::Limiter(limiter, _) => limiter.cas_stats(),
        _ => Default::default(),
    };
    let trips_before = pipeline();
    let cas_before = cas();
    let latencies: Latencies = Arc::new(Mutex::new(latency_histogram()));
    let meter = Meter::start(address);
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(seconds);
    // The raw socket keeps every request in flight in one worker's batch.
    let (workers, batch) = match target.as_ref() {
        Target::Socket(_) => (1, in_flight),
        _ => (in_flight, 1),
    };
    let handles: Vec<_> = (0..workers)
        .map(|index| {
            tokio::spawn(worker(
                Arc::clone(target),
                Arc::clone(keys),
                hot.clone(),
                seed.wrapping_mul(1_000_003).wrapping_add(index as u64),
                end,
                Arc::clone(&latencies),
                batch,
            ))
        })
        .collect();
    let mut counts = Counts::default();
    let mut first_error = None;
    for handle in handles {
        let result = handle.await.expect("worker panicked");
        counts.add(result.counts);
        if first_error.is_none() {
            first_error = result.first_error;
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cost = meter.finish(address, counts.decisions());
    let ops_per_trip = trips_before.zip(pipeline()).and_then(|(before, after)| {
        let batches = after.batches - before.batches;
        (batches > 0).then(|| (after.ops - before.ops) as f64 / batches as f64)
    });
    let histogram = latencies.lock().expect("no worker panicked holding it");
    let micros = |quantile: f64| histogram.value_at_quantile(quantile) as f64 / 1_000.0;
    RunResult {
        cost,
        ops_per_trip,
        per_second: counts.decisions() as f64 / elapsed,
        p50: micros(0.5),
        p99: micros(0.99),
        p999: micros(0.999),
        cas: cas_note(&cas_before, &cas(), counts.decisions()),
        counts,
        first_error,
    }
}

/// Raw cases write their own keys; limiters add their namespace.
fn key_prefix(kind: Kind) -> &'static str {
    match kind {
        Kind::RawBaseline | Kind::RawCeiling | Kind::RawSocket | Kind::RawGet => "raw:",
        _ => "",
    }
}

async fn target(kind: Kind, address: &str) -> Target {
    let algorithm = match kind {
        Kind::RawBaseline => return Target::Raw(raw_client(address, IO_TIMEOUT).await),
        Kind::RawCeiling => return Target::Ceiling(raw_client(address, IO_TIMEOUT).await),
        Kind::RawGet => return Target::Get(raw_client(address, IO_TIMEOUT).await),
        Kind::RawSocket => return Target::Socket(address.to_owned()),
        Kind::Limiter(algorithm) => algorithm,
    };
    let setup = Setup {
        cas_policy: Some(cas_policy()),
        // Room for every client of "many" mode, as a service sizes the
        // cache for the clients it sees within a window.
        sealed_clients: Some(MANY_CLIENTS),
    };
    let store = store(address, IO_TIMEOUT).await;
    Target::Limiter(algorithm.build(store.clone(), setup), store)
}

/// Runs the benchmark as `args` say, printing its report on stdout and
/// its progress on stderr.
pub fn run(mut args: Args) {
    args.timing.resolve(args.quick);
    if args.quick {
        args.in_flight = vec![1, 64];
    }
    if args.ratios_only {
        args.in_flight = vec![RATIO_BASELINE_LEVEL, RATIO_CEILING_LEVEL];
    }
    let kinds =
        select_cases::<Args, _>(kinds(), |kind| kind.name(), args.only.as_deref(), |_| false);
    let placement = match &args.server {
        Some(_) => server::Placement {
            pin_server: None,
            how: "as started: with `--server` the benchmark does not pin itself".into(),
        },
        None => server::pin_self_or_reexec(),
    };

    let (server, binary) = match &args.server {
        Some(address) => (Memcached::given(address), None),
        None => {
            let binary = args.memcached.clone().unwrap_or_else(server::find_binary);
            (
                Memcached::start(&binary, placement.pin_server),
                Some(binary),
            )
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");

    let started = Instant::now();
    println!("# memcache-ratelimit benchmark\n");
    match &binary {
        Some(binary) => {
            println!("- memcached: `{}` ({})", binary.display(), server.version());
            println!("- memcached flags: `{}`", server.flags());
        }
        None => println!(
            "- memcached: given with `--server {}` ({}), flags unknown to the benchmark",
            server.address(),
            server.version()
        ),
    }
    println!(
        "- placement: memcached on CPUs {}; benchmark client on CPUs {} ({}); {} CPUs online",
        server.cpus(),
        server::own_cpus(),
        placement.how,
        server::cpu_count()
    );
    println!("- client: one tokio current_thread runtime (a single thread); each in-flight slot is a spawned task that sends its next request as soon as the previous one is answered");
    println!(
        "- {} run(s) of {} s per case and depth; in flight: {:?}, each depth on an empty memcached with a new target, warmed up in \"many\" mode; seed {}",
        args.timing.runs, args.timing.seconds, args.in_flight, args.seed
    );
    println!("- quota {OPEN_QUOTA} (SlidingLog: {LOG_QUOTA}, its maximum), deadline {DEADLINE:?} (the default), I/O timeout {IO_TIMEOUT:?}, CAS policy: 100 attempts, backoff 50 µs to 5 ms");
    println!(
        "- latency: µs per decision; a raw-ceiling increment waits as long as its batch of 100"
    );
    println!();

    let modes = args.mode.modes();
    let levels = |kind: Kind| {
        args.in_flight
            .iter()
            .filter(|&&n| !args.ratios_only || read_by_ratios(kind, n))
            .count()
    };
    let total_runs: usize = if args.memory_only {
        0
    } else {
        modes.len() * kinds.iter().map(|&kind| levels(kind)).sum::<usize>() * args.timing.runs
    };
    let bar = ProgressBar::new(total_runs as u64).with_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} runs, ETA {eta}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    let mut results: Vec<(Mode, Vec<CaseResult>)> = Vec::new();
    for &mode in modes.iter().filter(|_| !args.memory_only) {
        let mut mode_results = Vec::new();
        for &kind in &kinds {
            let keys = client_keys(key_prefix(kind));
            for &in_flight in &args.in_flight {
                if args.ratios_only && !read_by_ratios(kind, in_flight) {
                    continue;
                }
                // Every depth of a case starts on an empty memcached, with a new
                // target warmed up the same way; its runs then go on from where
                // the one before left, as a service's do. Depths measured one
                // after another on the same state were not alike: a sliding
                // log's decision costs more the more its client decided within
                // the last minute, and a case's last depth, measured some 20 s
                // after its first, found logs some three times longer.
                let target = Arc::new(runtime.block_on(target(kind, &server.address())));
                server.flush_all();
                if mode == Mode::Many && matches!(kind, Kind::Limiter(_)) {
                    let label = format!("{mode:?} {}", kind.name());
                    runtime.block_on(warm_up(&target, &keys, |pass, took, errors| {
                        bar.suspend(|| eprintln!(
                            "[{:>6.0} s] {label}: warm-up pass {pass}, one decision per client, {took:.1} s, {errors} errors",
                            started.elapsed().as_secs_f64(),
                        ))
                    }));
                }
                let mut runs = Vec::new();
                for run in 0..args.timing.runs {
                    let hot = match mode {
                        Mode::Hot => Some(format!("{}hot", key_prefix(kind)).into_bytes()),
                        Mode::Many => None,
                    };
                    let result = runtime.block_on(one_run(
                        &server.address(),
                        &target,
                        &keys,
                        hot,
                        in_flight,
                        args.timing.seconds,
                        args.seed.wrapping_add(run as u64),
                    ));
                    bar.suspend(|| eprintln!(
                        "[{:>6.0} s] {:?} {} in flight {} run {}: {:.0}/s p50 {:.1} p99 {:.1} p999 {:.1} µs, CPU µs/decision client {:.2} memcached {:.2}, allowed {} denied {} contention {} errors {}{}{}",
                        started.elapsed().as_secs_f64(),
                        mode,
                        kind.name(),
                        in_flight,
                        run + 1,
                        result.per_second,
                        result.p50,
                        result.p99,
                        result.p999,
                        result.cost.client_us,
                        result.cost.server_us,
                        result.counts.allowed,
                        result.counts.denied,
                        result.counts.contention,
                        result.counts.errors,
                        first_error_note(result.first_error.as_deref()),
                        result.cas,
                    ));
                    runs.push(result);
                    bar.inc(1);
                }
                mode_results.push(CaseResult {
                    kind,
                    in_flight,
                    runs,
                });
            }
        }
        bar.suspend(|| print_table(mode, &mode_results));
        results.push((mode, mode_results));
    }
    bar.finish_and_clear();
    if !args.memory_only {
        print_ratios(&results);
        print_latency_at_one(&results);
    }

    if let (false, Some(binary)) = (args.no_memory, &binary) {
        print_memory(&runtime, binary, &placement, &kinds);
    }
    println!("\nTotal time: {:.0} s.", started.elapsed().as_secs_f64());
}

/// The median of a case's operations per round trip: a limiter's from its
/// store's pipeline; the raw ceiling's is its batch; the raw baseline's is
/// the raw client's own, not counted.
fn ops_per_trip(case: &CaseResult) -> String {
    match case.kind {
        Kind::RawCeiling => format!("{CEILING_BATCH}"),
        Kind::RawSocket => format!("{}", case.in_flight),
        Kind::RawBaseline | Kind::RawGet => "–".to_owned(),
        Kind::Limiter(_) => {
            let trips: Vec<f64> = case.runs.iter().filter_map(|r| r.ops_per_trip).collect();
            if trips.is_empty() {
                "–".to_owned()
            } else {
                format!("{:.1}", median(trips))
            }
        }
    }
}

fn print_table(mode: Mode, results: &[CaseResult]) {
    println!("## {}\n", mode.title());
    println!("| case | in flight | decisions/s (median) | p50 µs | p99 µs | p999 µs | client CPU µs/decision | memcached CPU µs/decision | ops per round trip | decisions/s per run | allowed | denied | contention errors | other errors |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|");
    for case in results {
        let mut counts = Counts::default();
        for run in &case.runs {
            counts.add(run.counts);
        }
        let per_run: Vec<String> = case
            .runs
            .iter()
            .map(|run| format!("{:.0}", run.per_second))
            .collect();
        println!(
            "| {} | {} | {:.0} | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} | {} | {} | {} | {} | {} | {} |",
            case.kind.name(),
            case.in_flight,
            case.median(|r| r.per_second),
            case.median(|r| r.p50),
            case.median(|r| r.p99),
            case.median(|r| r.p999),
            case.median(|r| r.cost.client_us),
            case.median(|r| r.cost.server_us),
            ops_per_trip(case),
            per_run.join(", "),
            counts.allowed,
            counts.denied,
            counts.contention,
            counts.errors,
        );
    }
    let errors: Vec<String> = results
        .iter()
        .flat_map(|case| {
            case.runs.iter().filter_map(move |run| {
                run.first_error
                    .as_ref()
                    .map(|e| format!("{} at {}: {e}", case.kind.name(), case.in_flight))
            })
        })
        .collect();
    if !errors.is_empty() {
        println!("\nFirst errors: {}", errors.join("; "));
    }
    println!();
}

fn find(results: &[CaseResult], kind: Kind, in_flight: usize) -> Option<f64> {
    results
        .iter()
        .find(|case| case.kind == kind && case.in_flight == in_flight)
        .map(|case| case.median(|r| r.per_second))
}

fn print_ratios(results: &[(Mode, Vec<CaseResult>)]) {
    println!("## Ratios (median decisions/s, same run)\n");
    println!("| SlidingWindow | hot, 64 in flight / raw baseline | 100,000 clients, 64 in flight / raw baseline | hot, 256 in flight / raw ceiling | 100,000 clients, 256 in flight / raw ceiling | hot, 256 in flight / raw socket | 100,000 clients, 256 in flight / raw socket |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let ratio = |mode: Mode, kind: Kind, in_flight: usize, base: Kind| -> String {
        let Some((_, cases)) = results.iter().find(|(m, _)| *m == mode) else {
            return "n/a".into();
        };
        match (find(cases, kind, in_flight), find(cases, base, in_flight)) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.3}", a / b),
            _ => "n/a".into(),
        }
    };
    for n in [1, 4, 12, 60] {
        let kind = Kind::Limiter(Case(
            Algorithm::SlidingWindow { sub_windows: n },
            memcache_ratelimit::algorithm::Estimator::Uniform,
        ));
        println!(
            "| n={n} | {} | {} | {} | {} | {} | {} |",
            ratio(Mode::Hot, kind, RATIO_BASELINE_LEVEL, Kind::RawBaseline),
            ratio(Mode::Many, kind, RATIO_BASELINE_LEVEL, Kind::RawBaseline),
            ratio(Mode::Hot, kind, RATIO_CEILING_LEVEL, Kind::RawCeiling),
            ratio(Mode::Many, kind, RATIO_CEILING_LEVEL, Kind::RawCeiling),
            ratio(Mode::Hot, kind, RATIO_CEILING_LEVEL, Kind::RawSocket),
            ratio(Mode::Many, kind, RATIO_CEILING_LEVEL, Kind::RawSocket),
        );
    }
    println!();
}

/// At one request in flight, each case's latency over a bare `mg`'s in the
/// same mode and run: what a decision adds to the round trip it cannot
/// avoid.
fn print_latency_at_one(results: &[(Mode, Vec<CaseResult>)]) {
    let at_one = |cases: &[CaseResult], kind: Kind| {
        cases
            .iter()
            .find(|case| case.kind == kind && case.in_flight == 1)
            .map(|case| (case.median(|r| r.p50), case.median(|r| r.p99)))
    };
    for (mode, cases) in results {
        let Some((get_p50, get_p99)) = at_one(cases, Kind::RawGet) else {
            continue;
        };
        println!(
            "## Latency at one request in flight over a bare `mg` ({}): p50 {get_p50:.1} µs, p99 {get_p99:.1} µs\n",
            mode.title()
        );
        println!("| case | p50 µs | p50 / mg | p99 µs | p99 / mg |");
        println!("|---|---:|---:|---:|---:|");
        for case in cases.iter().filter(|case| case.in_flight == 1) {
            if case.kind == Kind::RawGet {
                continue;
            }
            let (p50, p99) = (case.median(|r| r.p50), case.median(|r| r.p99));
            println!(
                "| {} | {p50:.1} | {:.3} | {p99:.1} | {:.3} |",
                case.kind.name(),
                p50 / get_p50,
                p99 / get_p99
            );
        }
        println!();
    }
}

/// Bytes per client: a fresh memcached per algorithm, one allowed decision
/// for each of 100,000 client ids, `stats` before and after.
fn print_memory(
    runtime: &tokio::runtime::Runtime,
    binary: &std::path::Path,
    placement: &server::Placement,
    kinds: &[Kind],
) {
    println!("## Memory in memcached, {MANY_CLIENTS} clients, one allowed decision each\n");
    println!("Each algorithm on a fresh memcached; `bytes` and `curr_items` from `stats` before and after. \
If items expire before the second `stats` (items per client below 1), \
bytes per item is the figure to read.\n");
    println!("| case | bytes before | bytes after | bytes per client | items before | items after | items per client | bytes per item |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for &kind in kinds {
        if matches!(kind, Kind::RawCeiling | Kind::RawSocket | Kind::RawGet) {
            continue; // the same items as the raw baseline
        }
        let server = Memcached::start(binary, placement.pin_server);
        let before = server.stats();
        let target = Arc::new(runtime.block_on(target(kind, &server.address())));
        let keys = client_keys(key_prefix(kind));
        let errors = runtime.block_on(fill(&target, &keys));
        let after = server.stats();
        let per = |a: u64, b: u64| (b as f64 - a as f64) / MANY_CLIENTS as f64;
        println!(
            "| {} | {} | {} | {:.1} | {} | {} | {:.2} | {:.1} |{}",
            kind.name(),
            before.bytes,
            after.bytes,
            per(before.bytes, after.bytes),
            before.items,
            after.items,
            per(before.items, after.items),
            (after.bytes as f64 - before.bytes as f64)
                / (after.items as f64 - before.items as f64).max(1.0),
            if errors > 0 {
                format!(" ({errors} decisions failed)")
            } else {
                String::new()
            }
        );
    }
    println!();
}

/// Brings `target` to a steady state, as in a long-running service: a
/// sliding window's decision reads the buckets its client's last one left
/// unsealed or that were sealed since, so it costs more the longer ago that
/// was, and a compare-and-swap decision reads first unless the limiter
/// knows its client's state: a cold start is slow. Passes of one decision
/// per client, until a pass is no more than 10% faster than the one before
/// (at most [`WARM_UP_PASSES`]); `passed` hears of each (its number, its
/// seconds, its errors).
async fn warm_up(
    target: &Arc<Target>,
    keys: &Arc<Vec<Vec<u8>>>,
    mut passed: impl FnMut(usize, f64, u64),
) {
    let mut last = f64::INFINITY;
    for pass in 1..=WARM_UP_PASSES {
        let warm = Instant::now();
        let errors = fill(target, keys).await;
        let took = warm.elapsed().as_secs_f64();
        passed(pass, took, errors);
        if took > 0.9 * last {
            break;
        }
        last = took;
    }
}

/// One decision for every client id, 64 at a time.
async fn fill(target: &Arc<Target>, keys: &Arc<Vec<Vec<u8>>>) -> u64 {
    const TASKS: usize = 64;
    let handles: Vec<_> = (0..TASKS)
        .map(|task| {
            let target = Arc::clone(target);
            let keys = Arc::clone(keys);
            let mine: Vec<usize> = (task..keys.len()).step_by(TASKS).collect();
            tokio::spawn(async move {
                let mut errors = 0u64;
                for id in mine {
                    let key = &keys[id];
                    let ok = match target.as_ref() {
                        Target::Raw(client) | Target::Ceiling(client) | Target::Get(client) => {
                            client
                                .increment(key)
                                .delta(1)
                                .initial(1, RAW_TTL)
                                .send()
                                .await
                                .is_ok()
                        }
                        Target::Socket(_) => unreachable!("the memory table leaves it out"),
                        Target::Limiter(limiter, _) => limiter
                            .check(key)
                            .await
                            .map(|d| d.is_allowed())
                            .unwrap_or(false),
                    };
                    if !ok {
                        errors += 1;
                    }
                }
                errors
            })
        })
        .collect();
    let mut errors = 0;
    for handle in handles {
        errors += handle.await.expect("fill task panicked");
    }
    errors
}
