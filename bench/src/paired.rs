//! One request in flight, each decision paired with a bare `mg`: what a
//! decision adds to the round trip it cannot avoid, measured so that the
//! machine's drift cancels out.
//!
//! Timed one after the other, a case and its baseline see different
//! moments of a shared, noisy machine: in the matrix's one-in-flight table
//! a bare increment, which should match the bare `mg`, came out at 0.88
//! and 1.20 of it in the two modes of one run. Here every decision is
//! timed right beside a bare `mg` of an absent key, in alternating order
//! (`mg` first on even pairs, the decision first on odd ones), so the two
//! histograms of a run see the same machine. A control case, a bare
//! increment paired the same way, shows how close to 1.0 the method
//! itself reads.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use hdrhistogram::Histogram;
use memcache::exp::AsyncMetaClient;
use memcache_ratelimit::{Error, RateLimiter};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::algorithm::{Case, Setup};
use crate::client::{raw_client, store, warm_up_decision};
use crate::cpu::{Meter, PerDecision};
use crate::matrix::client_keys;
use crate::server::{self, Memcached};
use crate::socket::{Pipeline, Reads};
use crate::{
    cas_note, cas_policy, first_error_note, latency_histogram, median, record_latency,
    select_cases, Counts, Mode, Modes, Runs, MANY_CLIENTS, RAW_TTL,
};

/// The connections' I/O timeout, as the matrix's.
const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// Tasks that warm "many" mode up, one decision per client each pass.
const WARM_UP_TASKS: usize = 64;
/// Passes of one decision per client before "many" mode is measured.
const WARM_UP_PASSES: usize = 2;

/// In "many" mode, how long pairs run untimed after the warm-up, before
/// the timed runs. The warm-up writes every client's state within a few
/// seconds, so those states' lifetimes all end together; the
/// compare-and-swap algorithms' first returns then find them just gone
/// (a third of their decisions, against a tenth later). Longer than a
/// state's lifetime (the limiters' 1.1 s of slack, rounded up to whole
/// seconds) and the 2 s the limiter allows memcached past it, so the
/// timed runs see the steady state of one request at a time.
const SETTLE: Duration = Duration::from_secs(6);
/// The ratio every algorithm's median p50 is held to (BENCHMARKS.md's
/// goal for one request in flight).
pub const GOAL: f64 = 1.1;

/// The options.
#[derive(Parser, Debug)]
#[command(
    name = "latency-at-one",
    about = "One request in flight: each decision timed beside a bare mg, in alternating order, on one memcached"
)]
pub struct Args {
    #[command(flatten)]
    timing: Runs,
    /// Only the cases whose name contains this (case-insensitive); a whole
    /// case name (`SlidingWindow n=1`) selects that case alone. The
    /// control, `bare increment`, is a case too.
    #[arg(long)]
    only: Option<String>,
    /// Smoke test: 1 run of 1 s.
    #[arg(long)]
    quick: bool,
    /// Client modes to run: one hot client id, many random ids, or both.
    #[arg(long, value_enum, default_value_t = Modes::Both)]
    mode: Modes,
    /// The memcached binary (default: found on PATH).
    #[arg(long)]
    memcached: Option<std::path::PathBuf>,
    /// Seed of the client-id choice in "many" mode.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// The keys each raw visit reads beside its increment, absent or
    /// present as the visit says (1 to 100).
    #[arg(long, default_value_t = VISIT_READS, value_parser = clap::value_parser!(u16).range(1..=100))]
    visit_reads: u16,
}

/// What is paired with the `mg`.
#[derive(Clone, Copy)]
enum Kind {
    /// A bare increment of the client's counter: the method's control.
    Increment,
    /// A bare compare-and-swap write of a state the size of a token
    /// bucket's on the version the last one returned: what memcached's
    /// side of a compare-and-swap decision costs, the second control.
    CasWrite,
    /// An increment and this many reads of absent keys, in one batch
    /// written straight to a connection of its own ([`Pipeline::visit`]),
    /// with no client library: the floor, on this machine, of a decision
    /// that must read that many keys besides its increment.
    RawVisit(usize),
    /// [`RawVisit`](Self::RawVisit) whose increment is of the client's
    /// key of the current second (`<key>:<unix second>`), which memcached
    /// creates unless the client came in the same second: the floor of a
    /// window of 1 s sub-windows, whose returning client finds its
    /// current sub-window new.
    RawFreshVisit(usize),
    /// [`RawFreshVisit`](Self::RawFreshVisit) whose reads are of keys
    /// that hold counters, written for every client before the runs: a
    /// returning client's sealed sub-windows hold counts, and memcached
    /// answers each with its value rather than a miss.
    RawFreshVisitPresent(usize),
    Limiter(Case),
}

/// The reads of the second raw visit by default: about the sub-windows
/// that a SlidingWindow of n = 60 (1 s each) finds sealed since its
/// client's last decision, when 100,000 clients share one request at a
/// time (a client comes back every 12 s or so).
const VISIT_READS: u16 = 12;

impl Kind {
    fn name(self) -> String {
        match self {
            Kind::Increment => "bare increment".into(),
            Kind::CasWrite => "bare compare-and-swap write".into(),
            Kind::RawVisit(0) => "raw increment, own socket".into(),
            Kind::RawVisit(reads) => format!("raw increment + {reads} absent reads, own socket"),
            Kind::RawFreshVisit(reads) => {
                format!("raw increment of this second's key + {reads} absent reads, own socket")
            }
            Kind::RawFreshVisitPresent(reads) => {
                format!("raw increment of this second's key + {reads} present reads, own socket")
            }
            Kind::Limiter(case) => case.name(),
        }
    }
}

fn kinds(visit_reads: usize) -> Vec<Kind> {
    [
        Kind::Increment,
        Kind::CasWrite,
        Kind::RawVisit(0),
        Kind::RawVisit(visit_reads),
        Kind::RawFreshVisit(visit_reads),
        Kind::RawFreshVisitPresent(visit_reads),
    ]
    .into_iter()
    .chain(Case::ALL.into_iter().map(Kind::Limiter))
    .collect()
}

/// The thing paired with the `mg`.
enum Paired {
    Increment,
    /// The version each key's last write returned.
    CasWrite(RefCell<HashMap<Vec<u8>, u64>>),
    RawVisit {
        pipeline: tokio::sync::Mutex<Pipeline>,
        reads: Reads,
        /// Whether the increment is of the key of the current second.
        fresh: bool,
    },
    Limiter(Arc<RateLimiter>),
}

/// The state [`Paired::CasWrite`] writes: a token bucket's, tokens and
/// unix nanoseconds.
const CAS_WRITE_STATE: &[u8] = b"999999999.25 1795000000123456789";

/// A run's two histograms, nanoseconds.
struct Pairs {
    case: Histogram<u64>,
    get: Histogram<u64>,
    counts: Counts,
    first_error: Option<String>,
}

/// A run's quantiles, µs, and their ratios.
struct RunResult {
    pairs: u64,
    /// CPU time per pair (a decision and its `mg`), on each side.
    cost: PerDecision,
    case: [f64; 3],
    get: [f64; 3],
    counts: Counts,
    first_error: Option<String>,
}

impl RunResult {
    fn ratio(&self, quantile: usize) -> f64 {
        self.case[quantile] / self.get[quantile]
    }

    /// The keys memcached read per decision, besides the pair's own `mg`.
    fn keys_read(&self) -> f64 {
        (self.cost.server_gets - 1.0).max(0.0)
    }
}

const QUANTILES: [f64; 3] = [0.5, 0.99, 0.999];

/// Pairs until `end`, each for one of `keys` chosen at random: on even
/// pairs the `mg` first, on odd ones the decision first.
async fn pairs(
    raw: &AsyncMetaClient,
    paired: &Paired,
    keys: &[Vec<u8>],
    seed: u64,
    end: Instant,
) -> Pairs {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Pairs {
        case: latency_histogram(),
        get: latency_histogram(),
        counts: Counts::default(),
        first_error: None,
    };
    // The `mg`'s key, written anew for each pair into one buffer: the
    // client's id under a prefix no case writes, so it is always absent.
    let mut absent = Vec::new();
    let mut turn = 0u64;
    while Instant::now() < end {
        let key = &keys[rng.random_range(0..keys.len())];
        absent.clear();
        absent.extend_from_slice(b"mg:");
        absent.extend_from_slice(key);
        if turn.is_multiple_of(2) {
            get(raw, &absent, &mut out).await;
            decide(raw, paired, key, &mut out).await;
        } else {
            decide(raw, paired, key, &mut out).await;
            get(raw, &absent, &mut out).await;
        }
        turn += 1;
    }
    out
}

async fn get(raw: &AsyncMetaClient, key: &[u8], out: &mut Pairs) {
    let start = Instant::now();
    let outcome = raw.get(key).send().await;
    record_latency(&mut out.get, start.elapsed(), 1);
    if let Err(error) = outcome {
        out.counts.errors += 1;
        out.first_error.get_or_insert_with(|| error.to_string());
    }
}

async fn decide(raw: &AsyncMetaClient, paired: &Paired, key: &[u8], out: &mut Pairs) {
    let start = Instant::now();
    let outcome = match paired {
        Paired::Increment => raw
            .increment(key)
            .delta(1)
            .initial(1, RAW_TTL)
            .send()
            .await
            .map(|_| true)
            .map_err(|error| error.to_string()),
        Paired::CasWrite(versions) => cas_write(raw, versions, key).await,
        Paired::RawVisit {
            pipeline,
            reads,
            fresh,
        } => pipeline
            .lock()
            .await
            .visit(&visited(key, *fresh), key, *reads, RAW_TTL)
            .await
            .map(|_| true)
            .map_err(|error| error.to_string()),
        Paired::Limiter(limiter) => match limiter.check(key).await {
            Ok(decision) => Ok(decision.is_allowed()),
            Err(Error::Contention { .. }) => {
                out.counts.contention += 1;
                return;
            }
            Err(error) => Err(error.to_string()),
        },
    };
    let elapsed = start.elapsed();
    match outcome {
        Ok(allowed) => {
            record_latency(&mut out.case, elapsed, 1);
            if allowed {
                out.counts.allowed += 1;
            } else {
                out.counts.denied += 1;
            }
        }
        Err(error) => {
            out.counts.errors += 1;
            out.first_error.get_or_insert(error);
        }
    }
}

/// The key a raw visit increments: the client's, or, `fresh`, the
/// client's key of the current second.
fn visited(key: &[u8], fresh: bool) -> std::borrow::Cow<'_, [u8]> {
    if !fresh {
        return key.into();
    }
    let second = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_secs();
    let mut fresh = key.to_vec();
    fresh.push(b':');
    fresh.extend_from_slice(second.to_string().as_bytes());
    fresh.into()
}

/// Writes [`CAS_WRITE_STATE`] at `key` on the version its last write
/// returned, as new if there is none, and keeps the new version; a write
/// that finds the key changed or gone writes again unconditionally.
async fn cas_write(
    raw: &AsyncMetaClient,
    versions: &RefCell<HashMap<Vec<u8>, u64>>,
    key: &[u8],
) -> Result<bool, String> {
    let known = versions.borrow().get(key).copied();
    let write = raw.set(key, CAS_WRITE_STATE).ttl_raw(RAW_TTL).return_cas();
    let write = match known {
        Some(version) => write.compare_cas(version),
        None => write.add(),
    };
    let mut written = write.send().await.map_err(|error| error.to_string())?;
    if !written.applied() {
        written = raw
            .set(key, CAS_WRITE_STATE)
            .ttl_raw(RAW_TTL)
            .return_cas()
            .send()
            .await
            .map_err(|error| error.to_string())?;
    }
    match written.cas {
        Some(version) => {
            versions.borrow_mut().insert(key.to_vec(), version);
            Ok(true)
        }
        None => Err("a write returned no version".into()),
    }
}

/// One decision per client, [`WARM_UP_TASKS`] at a time.
async fn warm_up(limiter: &Arc<RateLimiter>, keys: &Arc<Vec<Vec<u8>>>) {
    let tasks: Vec<_> = (0..WARM_UP_TASKS)
        .map(|task| {
            let limiter = limiter.clone();
            let keys = keys.clone();
            tokio::spawn(async move {
                for key in keys.iter().skip(task).step_by(WARM_UP_TASKS) {
                    warm_up_decision(limiter.as_ref(), key).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a warm-up task");
    }
}

/// Runs the benchmark as `args` say: its report on stdout, its progress
/// on stderr.
pub fn run(mut args: Args) {
    args.timing.resolve(args.quick);
    let kinds = select_cases::<Args, _>(
        kinds(usize::from(args.visit_reads)),
        |kind| kind.name(),
        args.only.as_deref(),
        |_| false,
    );
    let placement = server::pin_self_or_reexec();
    let binary = args.memcached.clone().unwrap_or_else(server::find_binary);
    let server = Memcached::start(&binary, placement.pin_server);
    let address = server.address();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let started = Instant::now();

    println!("# One request in flight, each decision paired with a bare `mg`\n");
    println!("- memcached: `{}` ({})", binary.display(), server.version());
    println!("- memcached flags: `{}`", server.flags());
    println!(
        "- placement: memcached on CPUs {}; benchmark client on CPUs {} ({}); {} CPUs online",
        server.cpus(),
        server::own_cpus(),
        placement.how,
        server::cpu_count()
    );
    println!("- client: one tokio current_thread runtime, one request at a time; every decision is timed beside a bare `mg` of an absent key (meta protocol, the `memcache` crate), the `mg` first on even pairs and the decision first on odd ones");
    println!(
        "- {} run(s) of {} s per case; seed {}; ratios per run, then their median",
        args.timing.runs, args.timing.seconds, args.seed
    );
    println!("- the limiters as in the matrix: quota 1000000000/minute (SlidingLog 10000/minute, its maximum; moment 100000000/minute), defaults but the CAS policy and the sealed cache sized for 100,000 clients");
    println!("- \"many\" mode: {WARM_UP_PASSES} warm-up passes of one decision per client, then {} s of untimed pairs, before the runs", SETTLE.as_secs());
    println!();

    let raw = runtime.block_on(raw_client(&address, IO_TIMEOUT));
    for &mode in args.mode.modes() {
        println!("## {}\n", mode.title());
        println!("| case | p50 µs | mg p50 µs | p50 / mg | p99 / mg | p99.9 / mg | p50 / mg per run | client CPU µs/pair | memcached CPU µs/pair | keys read / decision | pairs | allowed | denied | errors |");
        println!("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|");
        for &kind in &kinds {
            server.flush_all();
            let (paired, prefix) = match kind {
                Kind::Increment => (Paired::Increment, "raw:"),
                Kind::CasWrite => (Paired::CasWrite(RefCell::default()), "raw:"),
                Kind::RawVisit(count)
                | Kind::RawFreshVisit(count)
                | Kind::RawFreshVisitPresent(count) => {
                    let pipeline = runtime
                        .block_on(Pipeline::connect(&address))
                        .expect("a connection to memcached");
                    let pipeline = tokio::sync::Mutex::new(pipeline);
                    let fresh = !matches!(kind, Kind::RawVisit(_));
                    let reads = match kind {
                        Kind::RawFreshVisitPresent(_) => Reads::Present(count),
                        _ => Reads::Absent(count),
                    };
                    (
                        Paired::RawVisit {
                            pipeline,
                            reads,
                            fresh,
                        },
                        "raw:",
                    )
                }
                Kind::Limiter(case) => {
                    let setup = Setup {
                        cas_policy: Some(cas_policy()),
                        sealed_clients: Some(MANY_CLIENTS),
                    };
                    let store = runtime.block_on(store(&address, IO_TIMEOUT));
                    (Paired::Limiter(case.build(store, setup)), "")
                }
            };
            // The clients: one, or the matrix's 100,000.
            let keys = match mode {
                Mode::Hot => Arc::new(vec![format!("{prefix}hot").into_bytes()]),
                Mode::Many => client_keys(prefix),
            };
            if let Paired::RawVisit {
                pipeline,
                reads: Reads::Present(count),
                ..
            } = &paired
            {
                // Every client's present keys, before any visit reads them.
                let warm = Instant::now();
                runtime
                    .block_on(async {
                        let mut pipeline = pipeline.lock().await;
                        pipeline.create_present(&keys, *count, RAW_TTL).await
                    })
                    .expect("the present keys written");
                eprintln!(
                    "[{:>6.0} s] {mode:?} {}: {} present keys written, {:.1} s",
                    started.elapsed().as_secs_f64(),
                    kind.name(),
                    keys.len() * count,
                    warm.elapsed().as_secs_f64()
                );
            }
            if let (Mode::Many, Paired::Limiter(limiter)) = (mode, &paired) {
                for pass in 1..=WARM_UP_PASSES {
                    let warm = Instant::now();
                    runtime.block_on(warm_up(limiter, &keys));
                    eprintln!(
                        "[{:>6.0} s] {mode:?} {}: warm-up pass {pass}, {:.1} s",
                        started.elapsed().as_secs_f64(),
                        kind.name(),
                        warm.elapsed().as_secs_f64()
                    );
                }
            }
            if let (Mode::Many, Paired::CasWrite(versions)) = (mode, &paired) {
                // Every key written once, so that the runs write on known
                // versions, as the limiters' do after their warm-up.
                let warm = Instant::now();
                let errors = runtime.block_on(async {
                    let mut errors = 0;
                    for key in keys.iter() {
                        errors += usize::from(cas_write(&raw, versions, key).await.is_err());
                    }
                    errors
                });
                eprintln!(
                    "[{:>6.0} s] {mode:?} {}: warm-up pass, {:.1} s, {errors} errors",
                    started.elapsed().as_secs_f64(),
                    kind.name(),
                    warm.elapsed().as_secs_f64()
                );
            }
            if mode == Mode::Many {
                let settle = Instant::now();
                runtime.block_on(pairs(&raw, &paired, &keys, !args.seed, settle + SETTLE));
                eprintln!(
                    "[{:>6.0} s] {mode:?} {}: {:.0} s of untimed pairs to settle",
                    started.elapsed().as_secs_f64(),
                    kind.name(),
                    settle.elapsed().as_secs_f64()
                );
            }
            let mut runs = Vec::new();
            for run in 0..args.timing.runs {
                let end = Instant::now() + Duration::from_secs_f64(args.timing.seconds);
                let seed = args.seed.wrapping_add(run as u64);
                let cas = || match &paired {
                    Paired::Limiter(limiter) => limiter.cas_stats(),
                    Paired::Increment | Paired::CasWrite(_) | Paired::RawVisit { .. } => {
                        Default::default()
                    }
                };
                let cas_before = cas();
                let meter = Meter::start(&address);
                let out = runtime.block_on(pairs(&raw, &paired, &keys, seed, end));
                let cost = meter.finish(&address, out.case.len());
                let cas_after = cas();
                let quantiles =
                    |h: &Histogram<u64>| QUANTILES.map(|q| h.value_at_quantile(q) as f64 / 1_000.0);
                let result = RunResult {
                    pairs: out.case.len(),
                    cost,
                    case: quantiles(&out.case),
                    get: quantiles(&out.get),
                    counts: out.counts,
                    first_error: out.first_error,
                };
                let cas_note = cas_note(&cas_before, &cas_after, result.pairs as u64);
                eprintln!(
                    "[{:>6.0} s] {mode:?} {} run {}: p50 {:.1} µs (mg {:.1}), ratio {:.3}, p99 ratio {:.3}, p99.9 ratio {:.3}, CPU µs/pair client {:.2} memcached {:.2}, keys read/decision {:.2}, {} pairs, {} errors{}{cas_note}",
                    started.elapsed().as_secs_f64(),
                    kind.name(),
                    run + 1,
                    result.case[0],
                    result.get[0],
                    result.ratio(0),
                    result.ratio(1),
                    result.ratio(2),
                    result.cost.client_us,
                    result.cost.server_us,
                    result.keys_read(),
                    result.pairs,
                    result.counts.errors,
                    first_error_note(result.first_error.as_deref()),
                );
                runs.push(result);
            }
            print_row(&kind.name(), &runs);
        }
        println!();
    }
    println!(
        "Goal: every algorithm's p50 / mg at most {GOAL}. Total time: {:.0} s.",
        started.elapsed().as_secs_f64()
    );
}

/// A case's row: the medians over its runs.
fn print_row(name: &str, runs: &[RunResult]) {
    let of = |f: &dyn Fn(&RunResult) -> f64| median(runs.iter().map(f).collect());
    let mut counts = Counts::default();
    for run in runs {
        counts.add(run.counts);
    }
    let per_run: Vec<String> = runs.iter().map(|r| format!("{:.3}", r.ratio(0))).collect();
    println!(
        "| {name} | {:.1} | {:.1} | {:.3} | {:.3} | {:.3} | {} | {:.2} | {:.2} | {:.2} | {} | {} | {} | {} |",
        of(&|r| r.case[0]),
        of(&|r| r.get[0]),
        of(&|r| r.ratio(0)),
        of(&|r| r.ratio(1)),
        of(&|r| r.ratio(2)),
        per_run.join(", "),
        of(&|r| r.cost.client_us),
        of(&|r| r.cost.server_us),
        of(&|r| r.keys_read()),
        runs.iter().map(|r| r.pairs).sum::<u64>(),
        counts.allowed,
        counts.denied,
        counts.errors + counts.contention,
    );
}
