//! In-process throughput: decisions per second on one core for each
//! algorithm of memcache-ratelimit on its embedded `MemoryStore`, beside
//! `governor`'s keyed rate limiter in the same run. See `bench/README.md`.

use clap::Parser;
use governor::Quota as GovernorQuota;
use memcache_ratelimit::{Limiter, MemoryStore, RateLimiter};
use memcache_ratelimit_bench::algorithm::{Case, Setup};
use memcache_ratelimit_bench::server::{cpu_count, own_cpus, place_self};
use memcache_ratelimit_bench::{
    first_error_note, median, select_cases, Counts, Mode, Modes, Runs, LOG_QUOTA, MANY_CLIENTS,
    OPEN_PER_MINUTE,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Pre-drawn client choices in "many" mode, cycled through (a power of
/// two, so the next index is a mask, not a division).
const PICKS: usize = 1 << 20;
/// Decisions between two reads of the run's stopwatch.
const BATCH: u64 = 256;
#[derive(Parser, Debug)]
#[command(
    name = "in-process",
    about = "Decisions/s on one core of memcache-ratelimit's algorithms on MemoryStore, beside governor's keyed limiter"
)]
struct Args {
    #[command(flatten)]
    timing: Runs,
    /// Only the cases whose name contains this (case-insensitive), e.g.
    /// `gcra` or `sliding`; a whole case name (`SlidingWindow n=1`)
    /// selects that case alone. governor always runs, as the reference.
    #[arg(long)]
    only: Option<String>,
    /// Smoke test: 1 run of 1 s per case.
    #[arg(long)]
    quick: bool,
    /// Seed of the client choice in "many" mode.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Client modes to run: one hot client id, many random ids, or both.
    #[arg(long, value_enum, default_value_t = Modes::Both)]
    mode: Modes,
    /// Do not pin the benchmark to one CPU.
    #[arg(long)]
    no_pin: bool,
    /// Call the limiters through `&dyn Limiter`, the object-safe trait (a
    /// virtual call and a boxed future per decision), instead of the
    /// `RateLimiter` itself (a `match` over its engine): what holding the
    /// engine as a trait object would cost.
    #[arg(long)]
    through_trait: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Governor,
    Limiter(Case),
}

/// governor, then every algorithm.
fn kinds() -> Vec<Kind> {
    std::iter::once(Kind::Governor)
        .chain(Case::ALL.into_iter().map(Kind::Limiter))
        .collect()
}

impl Kind {
    fn name(self) -> String {
        match self {
            Kind::Governor => "governor (keyed, DashMap)".into(),
            Kind::Limiter(algorithm) => algorithm.name(),
        }
    }
}

type Governor = governor::DefaultKeyedRateLimiter<&'static [u8]>;

/// What a run calls: a fresh limiter (on a fresh store) per run.
enum Target {
    Governor(Governor),
    Limiter(Arc<RateLimiter>),
}

/// A new limiter with the defaults a user gets (system clock, deadline,
/// compare-and-swap policy, sealed-bucket cache), on a new `MemoryStore`.
fn target(kind: Kind) -> Target {
    match kind {
        Kind::Governor => {
            let rate = NonZeroU32::new(OPEN_PER_MINUTE).expect("nonzero");
            Target::Governor(governor::RateLimiter::keyed(GovernorQuota::per_minute(
                rate,
            )))
        }
        Kind::Limiter(algorithm) => {
            Target::Limiter(algorithm.build(Arc::new(MemoryStore::new()), Setup::default()))
        }
    }
}

/// Each case's runs, in the order they ran.
type Rows = Vec<(Kind, Vec<RunResult>)>;

struct RunResult {
    per_second: f64,
    /// Decisions per second of the thread's own time on the CPU (from
    /// `/proc/thread-self/schedstat`), which leaves out the time it was
    /// preempted: steadier than `per_second` on a shared machine.
    per_cpu_second: Option<f64>,
    counts: Counts,
    first_error: Option<String>,
}

/// The client ids and the pre-drawn order they are asked for in.
///
/// The ids sit one after another in one buffer (575 KiB for 100,000 of
/// them), and the pre-drawn order holds each choice as the slice itself,
/// read in sequence: fetching the id of a decision costs about what
/// reading it from a request just received costs a service, rather than
/// two cache misses on a vector of separately allocated ids, which
/// governor, the anchor, paid for in its figure.
struct Clients {
    hot: &'static [u8],
    ids: Vec<&'static [u8]>,
    picks: Vec<&'static [u8]>,
}

impl Clients {
    fn new(seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut text = Vec::new();
        let mut spans = Vec::with_capacity(MANY_CLIENTS);
        for id in 0..MANY_CLIENTS {
            let start = text.len();
            text.extend_from_slice(format!("c{id}").as_bytes());
            spans.push(start..text.len());
        }
        // Held for the whole process, by every run and every limiter.
        let text: &'static [u8] = text.leak();
        let ids: Vec<&'static [u8]> = spans.into_iter().map(|span| &text[span]).collect();
        let picks = (0..PICKS)
            .map(|_| ids[rng.random_range(0..MANY_CLIENTS)])
            .collect();
        Self {
            hot: b"hot",
            ids,
            picks,
        }
    }

    /// The client of decision `i`.
    fn pick(&self, mode: Mode, i: u64) -> &'static [u8] {
        match mode {
            Mode::Hot => self.hot,
            Mode::Many => self.picks[(i as usize) & (PICKS - 1)],
        }
    }
}

/// One decision per client in "many" mode (one in hot mode), untimed, so
/// that a run measures decisions on clients the limiter already holds.
async fn warm_up(target: &Target, clients: &Clients, mode: Mode) {
    let ids: &[&'static [u8]] = match mode {
        Mode::Hot => std::slice::from_ref(&clients.hot),
        Mode::Many => &clients.ids,
    };
    for &id in ids {
        match target {
            Target::Governor(limiter) => {
                let _ = limiter.check_key(&id);
            }
            Target::Limiter(limiter) => {
                let _ = limiter.check(id).await;
            }
        }
    }
}

async fn one_run(
    target: &Target,
    clients: &Clients,
    mode: Mode,
    seconds: f64,
    through_trait: bool,
) -> RunResult {
    warm_up(target, clients, mode).await;
    let mut counts = Counts::default();
    let mut first_error = None;
    let mut i = 0u64;
    let cpu_start = cpu_nanos();
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(seconds);
    loop {
        match target {
            Target::Governor(limiter) => {
                for _ in 0..BATCH {
                    // The id by reference, as `check_key` takes it: no
                    // copy unless the client is new to it.
                    let id = clients.pick(mode, i);
                    i += 1;
                    match limiter.check_key(&id) {
                        Ok(()) => counts.allowed += 1,
                        Err(_) => counts.denied += 1,
                    }
                }
            }
            Target::Limiter(limiter) => {
                let object: &dyn Limiter = limiter.as_ref();
                for _ in 0..BATCH {
                    let id = clients.pick(mode, i);
                    i += 1;
                    // The limiter itself, not the `Arc` around it.
                    let outcome = if through_trait {
                        object.check(id).await
                    } else {
                        limiter.as_ref().check(id).await
                    };
                    match outcome {
                        Ok(decision) if decision.is_allowed() => counts.allowed += 1,
                        Ok(_) => counts.denied += 1,
                        Err(error) => {
                            counts.errors += 1;
                            if first_error.is_none() {
                                first_error = Some(error.to_string());
                            }
                        }
                    }
                }
            }
        }
        if Instant::now() >= end {
            break;
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = cpu_start
        .zip(cpu_nanos())
        .map(|(start, end)| end.saturating_sub(start) as f64 / 1e9)
        .filter(|&cpu| cpu > 0.0);
    RunResult {
        per_second: counts.decisions() as f64 / elapsed,
        per_cpu_second: cpu.map(|cpu| counts.decisions() as f64 / cpu),
        counts,
        first_error,
    }
}

/// This thread's time on the CPU so far, in nanoseconds, if the kernel
/// keeps it.
fn cpu_nanos() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn main() {
    let mut args = Args::parse();
    args.timing.resolve(args.quick);
    // governor always runs, as the reference.
    let kinds = select_cases::<Args, _>(
        kinds(),
        |kind| kind.name(),
        args.only.as_deref(),
        |&kind| kind == Kind::Governor,
    );
    let placement = place_self(args.no_pin);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let clients = Clients::new(args.seed);

    let started = Instant::now();
    println!("# memcache-ratelimit in-process benchmark\n");
    println!(
        "- placement: CPUs {} ({placement}); {} CPUs online",
        own_cpus(),
        cpu_count()
    );
    println!(
        "- one thread: a tokio current_thread runtime, one decision at a time ({}; governor: `check_key(&id)`)",
        if args.through_trait {
            "`limiter.check(id).await` through `&dyn Limiter`"
        } else {
            "`limiter.check(id).await` on the `RateLimiter`"
        }
    );
    println!("- store: a new `MemoryStore::new()` per run (system clock), limiters with their defaults but the quota and the namespace (store failures returned as errors; an in-process store has none)");
    println!(
        "- {} run(s) of {} s per case, after one untimed decision per client; seed {}",
        args.timing.runs, args.timing.seconds, args.seed
    );
    println!("- quota {OPEN_PER_MINUTE}/minute for all (governor: `Quota::per_minute`), SlidingLog {LOG_QUOTA} (its maximum)");
    println!();

    let mut tables = Vec::new();
    for &mode in args.mode.modes() {
        let mut rows: Rows = Vec::new();
        for &kind in &kinds {
            let mut runs = Vec::new();
            for run in 0..args.timing.runs {
                let target = target(kind);
                let result = runtime.block_on(one_run(
                    &target,
                    &clients,
                    mode,
                    args.timing.seconds,
                    args.through_trait,
                ));
                eprintln!(
                    "[{:>5.0} s] {:?} {} run {}: {:.0}/s ({:.1} ns/decision, {} CPU ns/decision), allowed {} denied {} errors {}{}",
                    started.elapsed().as_secs_f64(),
                    mode,
                    kind.name(),
                    run + 1,
                    result.per_second,
                    1e9 / result.per_second,
                    result
                        .per_cpu_second
                        .map_or("n/a".into(), |cpu| format!("{:.1}", 1e9 / cpu)),
                    result.counts.allowed,
                    result.counts.denied,
                    result.counts.errors,
                    first_error_note(result.first_error.as_deref())
                );
                drop(target);
                runs.push(result);
            }
            rows.push((kind, runs));
        }
        print_table(mode, &rows);
        tables.push((mode, rows));
    }
    print_ratios(&tables);
    println!("Total time: {:.0} s.", started.elapsed().as_secs_f64());
}

fn per_second(runs: &[RunResult]) -> f64 {
    median(runs.iter().map(|r| r.per_second).collect())
}

fn per_cpu_second(runs: &[RunResult]) -> Option<f64> {
    let rates: Option<Vec<f64>> = runs.iter().map(|r| r.per_cpu_second).collect();
    rates.map(median)
}

fn print_table(mode: Mode, rows: &Rows) {
    let governor = rows
        .iter()
        .find(|(kind, _)| *kind == Kind::Governor)
        .map(|(_, runs)| runs);
    let governor_rate = governor.map(|runs| per_second(runs));
    let governor_cpu = governor.and_then(|runs| per_cpu_second(runs));
    println!("## {}\n", mode.title());
    println!("| case | decisions/s (median) | ns/decision | × governor | CPU ns/decision | × governor (CPU time) | decisions/s per run | allowed | denied | errors |");
    println!("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|");
    for (kind, runs) in rows {
        let mut counts = Counts::default();
        for run in runs {
            counts.add(run.counts);
        }
        let rate = per_second(runs);
        let cpu = per_cpu_second(runs);
        let per_run: Vec<String> = runs
            .iter()
            .map(|r| format!("{:.0}", r.per_second))
            .collect();
        println!(
            "| {} | {:.0} | {:.1} | {} | {} | {} | {} | {} | {} | {} |",
            kind.name(),
            rate,
            1e9 / rate,
            ratio(Some(rate), governor_rate),
            cpu.map_or("n/a".into(), |cpu| format!("{:.1}", 1e9 / cpu)),
            ratio(cpu, governor_cpu),
            per_run.join(", "),
            counts.allowed,
            counts.denied,
            counts.errors,
        );
    }
    let errors: Vec<String> = rows
        .iter()
        .flat_map(|(kind, runs)| {
            runs.iter().filter_map(move |run| {
                run.first_error
                    .as_ref()
                    .map(|e| format!("{}: {e}", kind.name()))
            })
        })
        .collect();
    if !errors.is_empty() {
        println!("\nFirst errors: {}", errors.join("; "));
    }
    println!();
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
        _ => "n/a".into(),
    }
}

/// The target of the issue: `Gcra` and `SlidingWindow n=1` at least half
/// of governor's decisions/s, hot and many.
fn print_ratios(tables: &[(Mode, Rows)]) {
    let runs = |mode: Mode, kind: Kind| -> Option<&Vec<RunResult>> {
        tables
            .iter()
            .find(|(m, _)| *m == mode)
            .and_then(|(_, rows)| rows.iter().find(|(k, _)| *k == kind))
            .map(|(_, runs)| runs)
    };
    let rate = |mode: Mode, kind: Kind| runs(mode, kind).map(|runs| per_second(runs));
    let cpu = |mode: Mode, kind: Kind| runs(mode, kind).and_then(|runs| per_cpu_second(runs));
    println!(
        "## Ratio to governor (medians, same run; target ≥ 0.5 for Gcra and SlidingWindow n=1)\n"
    );
    println!(
        "| case | hot / governor hot | many / governor many | hot, CPU time | many, CPU time |"
    );
    println!("|---|---:|---:|---:|---:|");
    for kind in kinds().into_iter().filter(|&k| k != Kind::Governor) {
        let (hot, many) = (rate(Mode::Hot, kind), rate(Mode::Many, kind));
        if hot.is_none() && many.is_none() {
            continue;
        }
        println!(
            "| {} | {} | {} | {} | {} |",
            kind.name(),
            ratio(hot, rate(Mode::Hot, Kind::Governor)),
            ratio(many, rate(Mode::Many, Kind::Governor)),
            ratio(cpu(Mode::Hot, kind), cpu(Mode::Hot, Kind::Governor)),
            ratio(cpu(Mode::Many, kind), cpu(Mode::Many, Kind::Governor)),
        );
    }
    println!();
}
