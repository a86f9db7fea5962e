//! Compare-and-swap contention on one hot key: `Gcra` and `TokenBucket`
//! at several in-flight levels, from one process and from several, against
//! one local memcached (`-t 1`) pinned to its own CPU. Reports decisions/s
//! and the ratio to the raw baseline, conflicts per decision, the combined
//! share and `Contention` errors; then checks, with a finite quota, that
//! no setup admits more than the algorithm's bound. See `bench/README.md`.
//!
//! Every measurement runs in worker processes: this binary re-executed
//! with the hidden `--worker` flag, each with its own `MemcachedStore` and
//! its own limiter, all on the same key. The coordinator starts them, waits
//! until each is connected, tells them all to go, and sums what they report.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use memcache::exp::AsyncMetaClient;
use memcache_ratelimit::algorithm::CasStats;
use memcache_ratelimit::limiter::CasAlgorithm;
use memcache_ratelimit::{Error, Gcra, LimiterBuilder, Quota, RateLimiter, TokenBucket};
use memcache_ratelimit_bench::algorithm::measured;
use memcache_ratelimit_bench::client::{raw_client, store};
use memcache_ratelimit_bench::server::{self, Memcached};
use memcache_ratelimit_bench::{
    at_least_one, cas_policy, first_error_note, median, seconds, Runs, OPEN_QUOTA, RAW_TTL,
};

/// The limiters' deadline (and the store's I/O timeout): long enough that
/// nothing times out.
const DEADLINE: Duration = Duration::from_secs(5);
/// The over-admission quota: a finite one, exceeded many times over.
const TIGHT_QUOTA: &str = "100/second";

#[derive(Parser, Debug)]
#[command(
    name = "cas-contention",
    about = "Compare-and-swap contention on one hot key: RateLimiter and TokenBucket from 1 and several processes, and an over-admission check"
)]
struct Args {
    #[command(flatten)]
    timing: Runs,
    /// Total requests kept outstanding, comma separated; split across the
    /// processes.
    #[arg(long, value_delimiter = ',', default_value = "1,8,64", value_parser = at_least_one)]
    in_flight: Vec<usize>,
    /// Worker process counts, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4", value_parser = processes)]
    processes: Vec<usize>,
    /// Seconds of each over-admission check.
    #[arg(long, default_value_t = 3.0, value_parser = seconds)]
    admission_seconds: f64,
    /// The memcached binary (default: found on PATH).
    #[arg(long)]
    memcached: Option<std::path::PathBuf>,
    /// Smoke test: 1 run of 1 s at 1 and 64 in flight, admission checks of 1 s.
    #[arg(long)]
    quick: bool,

    /// Internal: run as one worker process.
    #[arg(long, hide = true)]
    worker: bool,
    /// Internal: the worker's memcached address.
    #[arg(long, hide = true)]
    address: Option<String>,
    /// Internal: the worker's target (raw, gcra, bucket).
    #[arg(long, hide = true)]
    target: Option<String>,
    /// Internal: the worker's quota.
    #[arg(long, hide = true)]
    quota: Option<String>,
    /// Internal: the worker's client key.
    #[arg(long, hide = true)]
    key: Option<String>,
    /// Internal: the worker's requests in flight.
    #[arg(long, hide = true, default_value_t = 1)]
    tasks: usize,
}

/// What one request is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Raw,
    Gcra,
    TokenBucket,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Raw => "raw baseline",
            Kind::Gcra => "Gcra",
            Kind::TokenBucket => "TokenBucket",
        }
    }

    fn arg(self) -> &'static str {
        match self {
            Kind::Raw => "raw",
            Kind::Gcra => "gcra",
            Kind::TokenBucket => "bucket",
        }
    }

    fn parse(arg: &str) -> Self {
        match arg {
            "raw" => Kind::Raw,
            "gcra" => Kind::Gcra,
            "bucket" => Kind::TokenBucket,
            other => panic!("unknown worker target {other:?}"),
        }
    }
}

const LIMITERS: [Kind; 2] = [Kind::Gcra, Kind::TokenBucket];

// ---------------------------------------------------------------------------
// The worker process.

/// The thing a worker calls.
enum Target {
    Raw(AsyncMetaClient),
    Gcra(Arc<RateLimiter>),
    TokenBucket(Arc<RateLimiter>),
}

impl Target {
    fn stats(&self) -> CasStats {
        match self {
            Target::Raw(_) => CasStats::default(),
            Target::Gcra(limiter) => limiter.cas_stats(),
            Target::TokenBucket(limiter) => limiter.cas_stats(),
        }
    }

    fn limiter(&self) -> Option<Arc<RateLimiter>> {
        match self {
            Target::Raw(_) => None,
            Target::Gcra(limiter) => Some(limiter.clone()),
            Target::TokenBucket(limiter) => Some(limiter.clone()),
        }
    }
}

async fn build_target(kind: Kind, address: &str, quota: Quota) -> Target {
    if kind == Kind::Raw {
        return Target::Raw(raw_client(address, DEADLINE).await);
    }
    let store = store(address, DEADLINE).await;
    match kind {
        Kind::Gcra => Target::Gcra(build(Gcra::builder(quota, store), "cc-gcra")),
        Kind::TokenBucket => {
            Target::TokenBucket(build(TokenBucket::builder(quota, store), "cc-bucket"))
        }
        Kind::Raw => unreachable!(),
    }
}

/// `builder`'s limiter in `namespace`, measured, with the deadline
/// [`DEADLINE`] and the benchmarks' compare-and-swap policy.
fn build<A: CasAlgorithm>(builder: LimiterBuilder<A>, namespace: &str) -> Arc<RateLimiter> {
    Arc::new(
        measured(builder)
            .namespace(namespace)
            .deadline(DEADLINE)
            .cas_policy(cas_policy())
            .build()
            .expect("valid limiter"),
    )
}

/// What one worker (or all of them, summed) saw.
#[derive(Default, Clone, Debug)]
struct Report {
    allowed: u64,
    denied: u64,
    contention: u64,
    errors: u64,
    /// The limiter's `CasStats` over the measurement.
    cas: CasStats,
    /// Wall-clock unix nanoseconds just before the first request was sent
    /// and just after the last answer came back.
    start_ns: u128,
    end_ns: u128,
    /// The worker's allowed CPUs.
    cpus: String,
    first_error: Option<String>,
}

impl Report {
    fn decisions(&self) -> u64 {
        self.allowed + self.denied
    }

    fn elapsed(&self) -> f64 {
        self.end_ns.saturating_sub(self.start_ns) as f64 / 1e9
    }

    fn line(&self) -> String {
        let c = &self.cas;
        format!(
            "result allowed={} denied={} contention={} errors={} decisions={} attempts={} conflicts={} retries={} exhausted={} combined={} start_ns={} end_ns={} cpus={}",
            self.allowed, self.denied, self.contention, self.errors,
            c.decisions, c.attempts, c.conflicts, c.retries, c.exhausted, c.combined,
            self.start_ns, self.end_ns, self.cpus
        )
    }

    fn parse(line: &str) -> Self {
        let mut report = Report::default();
        for field in line.split_whitespace().skip(1) {
            let (name, value) = field.split_once('=').expect("name=value");
            let n = || value.parse::<u64>().expect("a number");
            match name {
                "allowed" => report.allowed = n(),
                "denied" => report.denied = n(),
                "contention" => report.contention = n(),
                "errors" => report.errors = n(),
                "decisions" => report.cas.decisions = n(),
                "attempts" => report.cas.attempts = n(),
                "conflicts" => report.cas.conflicts = n(),
                "retries" => report.cas.retries = n(),
                "exhausted" => report.cas.exhausted = n(),
                "combined" => report.cas.combined = n(),
                "start_ns" => report.start_ns = value.parse().expect("a number"),
                "end_ns" => report.end_ns = value.parse().expect("a number"),
                "cpus" => report.cpus = value.to_owned(),
                other => panic!("unknown field {other:?} in a worker's report"),
            }
        }
        report
    }

    /// Sums `other` in: counts add up, the window spans both.
    fn add(&mut self, other: Report) {
        let first = self.start_ns == 0;
        self.allowed += other.allowed;
        self.denied += other.denied;
        self.contention += other.contention;
        self.errors += other.errors;
        let (a, b) = (&mut self.cas, other.cas);
        a.decisions += b.decisions;
        a.attempts += b.attempts;
        a.conflicts += b.conflicts;
        a.retries += b.retries;
        a.exhausted += b.exhausted;
        a.combined += b.combined;
        self.start_ns = if first {
            other.start_ns
        } else {
            self.start_ns.min(other.start_ns)
        };
        self.end_ns = self.end_ns.max(other.end_ns);
        if !self.cpus.split(',').any(|cpus| cpus == other.cpus) {
            if !self.cpus.is_empty() {
                self.cpus.push(',');
            }
            self.cpus.push_str(&other.cpus);
        }
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }
}

fn unix_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_nanos()
}

fn cas_delta(after: CasStats, before: CasStats) -> CasStats {
    CasStats {
        decisions: after.decisions - before.decisions,
        attempts: after.attempts - before.attempts,
        conflicts: after.conflicts - before.conflicts,
        retries: after.retries - before.retries,
        exhausted: after.exhausted - before.exhausted,
        replaced: after.replaced - before.replaced,
        combined: after.combined - before.combined,
        known: after.known - before.known,
        stale: after.stale - before.stale,
        vanished: after.vanished - before.vanished,
        either: after.either - before.either,
        checked: after.checked - before.checked,
    }
}

/// One closed-loop slot: the next request as soon as the previous one is
/// answered, until `end`.
async fn slot(target: Arc<Target>, key: Arc<Vec<u8>>, end: Instant) -> Report {
    let mut report = Report::default();
    let limiter = target.limiter();
    while Instant::now() < end {
        match (&*target, &limiter) {
            (Target::Raw(client), _) => {
                match client
                    .increment(key.as_slice())
                    .delta(1)
                    .initial(1, RAW_TTL)
                    .send()
                    .await
                {
                    Ok(_) => report.allowed += 1,
                    Err(error) => {
                        report.errors += 1;
                        report.first_error.get_or_insert_with(|| error.to_string());
                    }
                }
            }
            (_, Some(limiter)) => match limiter.check(&key).await {
                Ok(decision) if decision.is_allowed() => report.allowed += 1,
                Ok(_) => report.denied += 1,
                Err(Error::Contention { .. }) => report.contention += 1,
                Err(error) => {
                    report.errors += 1;
                    report.first_error.get_or_insert_with(|| error.to_string());
                }
            },
            (_, None) => unreachable!(),
        }
    }
    report
}

/// The worker: connect, say `ready`, wait for `go` on stdin, run the closed
/// loop for `seconds`, print one `result` line (and an `error` line for the
/// first error, if any).
fn worker(args: &Args) {
    let kind = Kind::parse(args.target.as_deref().expect("--target"));
    let address = args.address.as_deref().expect("--address");
    let quota: Quota = args
        .quota
        .as_deref()
        .unwrap_or(OPEN_QUOTA)
        .parse()
        .expect("valid quota");
    let key = Arc::new(args.key.clone().expect("--key").into_bytes());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let target = Arc::new(runtime.block_on(build_target(kind, address, quota)));
    // As many requests as there will be in flight, each on its own key,
    // open the connections before the clock starts; their statistics are
    // subtracted.
    runtime.block_on(async {
        let warm: Vec<_> = (0..args.tasks)
            .map(|i| {
                let target = target.clone();
                tokio::spawn(async move {
                    let key = format!("warm-up-{i}").into_bytes();
                    match (&*target, target.limiter()) {
                        (Target::Raw(client), _) => {
                            let _ = client
                                .increment(key.as_slice())
                                .delta(1)
                                .initial(1, RAW_TTL)
                                .send()
                                .await;
                        }
                        (_, Some(limiter)) => {
                            let _ = limiter.check(&key).await;
                        }
                        (_, None) => unreachable!(),
                    }
                })
            })
            .collect();
        for task in warm {
            task.await.expect("warm-up panicked");
        }
    });
    let before = target.stats();
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "ready").expect("write to the coordinator");
    stdout.flush().expect("flush to the coordinator");
    let mut line = String::new();
    let read = std::io::stdin()
        .read_line(&mut line)
        .expect("read from the coordinator");
    if read == 0 || line.trim() != "go" {
        return; // the coordinator went away
    }
    let seconds = args.timing.seconds;
    let mut report = runtime.block_on(async {
        let start_ns = unix_nanos();
        let end = Instant::now() + Duration::from_secs_f64(seconds);
        let slots: Vec<_> = (0..args.tasks)
            .map(|_| tokio::spawn(slot(target.clone(), key.clone(), end)))
            .collect();
        let mut report = Report::default();
        for slot in slots {
            report.add(slot.await.expect("slot panicked"));
        }
        report.start_ns = start_ns;
        report.end_ns = unix_nanos();
        report
    });
    report.cas = cas_delta(target.stats(), before);
    report.cpus = server::own_cpus();
    writeln!(stdout, "{}", report.line()).expect("write to the coordinator");
    if let Some(error) = &report.first_error {
        writeln!(stdout, "error {}", error.replace('\n', " ")).expect("write");
    }
    stdout.flush().expect("flush to the coordinator");
}

// ---------------------------------------------------------------------------
// The coordinator.

/// The most worker processes one case starts.
const MOST_PROCESSES: usize = 64;

/// A `--processes` count: from 1 to [`MOST_PROCESSES`].
fn processes(text: &str) -> Result<usize, String> {
    match at_least_one(text)? {
        n if n <= MOST_PROCESSES => Ok(n),
        n => Err(format!("{n} processes: at most {MOST_PROCESSES}")),
    }
}

/// `total` requests in flight over `processes` processes: as even as
/// possible, and at least one each.
fn split(total: usize, processes: usize) -> Vec<usize> {
    (0..processes)
        .map(|i| (total / processes + usize::from(i < total % processes)).max(1))
        .collect()
}

struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Worker {
    fn line(&mut self) -> Option<String> {
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line.trim_end().to_owned()),
        }
    }
}

/// One measurement: `processes` workers of `kind`, in flight split as
/// [`split`] says, all on `key`, for `seconds`; their reports summed.
fn measure(
    address: &str,
    kind: Kind,
    quota: &str,
    key: &str,
    in_flight: &[usize],
    seconds: f64,
) -> Report {
    let exe = std::env::current_exe().expect("the benchmark's own path");
    let mut workers: Vec<Worker> = in_flight
        .iter()
        .map(|&tasks| {
            let mut child = Command::new(&exe)
                .args(["--worker", "--address", address, "--target", kind.arg()])
                .args(["--quota", quota, "--key", key])
                .args(["--tasks", &tasks.to_string()])
                .args(["--seconds", &seconds.to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("start a worker process");
            let stdin = child.stdin.take().expect("piped stdin");
            let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
            Worker {
                child,
                stdin,
                stdout,
            }
        })
        .collect();
    for worker in &mut workers {
        let ready = worker.line();
        assert_eq!(
            ready.as_deref(),
            Some("ready"),
            "a worker did not start (pid {})",
            worker.child.id()
        );
    }
    // All connected: go, as close together as the pipes allow.
    for worker in &mut workers {
        worker
            .stdin
            .write_all(b"go\n")
            .and_then(|()| worker.stdin.flush())
            .expect("start a worker");
    }
    let mut total = Report::default();
    for mut worker in workers {
        let mut report = None;
        while let Some(line) = worker.line() {
            if line.starts_with("result ") {
                report = Some(Report::parse(&line));
            } else if let Some(error) = line.strip_prefix("error ") {
                if let Some(report) = report.as_mut() {
                    report.first_error = Some(error.to_owned());
                }
            }
        }
        let status = worker.child.wait().expect("wait for a worker");
        assert!(status.success(), "a worker failed: {status}");
        total.add(report.expect("a worker's report"));
    }
    total
}

/// One throughput case: its runs.
struct Case {
    kind: Kind,
    processes: usize,
    in_flight: usize,
    split: Vec<usize>,
    runs: Vec<Report>,
}

impl Case {
    fn per_second(&self) -> f64 {
        median(
            self.runs
                .iter()
                .map(|run| run.decisions() as f64 / run.elapsed())
                .collect(),
        )
    }

    fn total(&self) -> Report {
        let mut total = Report::default();
        for run in &self.runs {
            total.add(run.clone());
        }
        total
    }
}

fn per(numerator: u64, denominator: u64) -> String {
    if denominator == 0 {
        "n/a".into()
    } else {
        format!("{:.3}", numerator as f64 / denominator as f64)
    }
}

fn describe_split(split: &[usize]) -> String {
    let total: usize = split.iter().sum();
    if split.len() == 1 {
        format!("{total}")
    } else if split.iter().all(|&n| n == split[0]) {
        format!("{total} ({} × {})", split.len(), split[0])
    } else {
        let parts: Vec<String> = split.iter().map(usize::to_string).collect();
        format!("{total} ({})", parts.join(" + "))
    }
}

/// The over-admission bound of a limiter of `capacity` refilled at `rate`
/// per second, for decisions made within `elapsed` seconds.
fn bound(capacity: f64, rate: f64, elapsed: f64) -> f64 {
    capacity + rate * elapsed
}

fn main() {
    let mut args = Args::parse();
    if args.worker {
        worker(&args);
        return;
    }
    args.timing.resolve(args.quick);
    if args.quick {
        args.in_flight = vec![1, 64];
        args.admission_seconds = 1.0;
    }
    let placement = server::pin_self_or_reexec();
    let binary = args.memcached.clone().unwrap_or_else(server::find_binary);
    let server = Memcached::start(&binary, placement.pin_server);
    let address = server.address();
    let started = Instant::now();
    // One measurement (see `measure`) on a key of its own, `{tag}-{n}`,
    // after `flush_all`.
    let mut next_key = 0u64;
    let mut measure_fresh = |kind: Kind, quota: &str, tag: &str, split: &[usize], seconds: f64| {
        server.flush_all();
        next_key += 1;
        let key = format!("{tag}-{next_key}");
        measure(&address, kind, quota, &key, split, seconds)
    };

    // Throughput: per level, run by run, the raw baseline from one process
    // and each limiter from each process count, interleaved so that a
    // ratio compares figures measured close together.
    let mut cases: Vec<Case> = Vec::new();
    let mut shapes: Vec<(Kind, usize)> = vec![(Kind::Raw, 1)];
    for &processes in &args.processes {
        shapes.extend(LIMITERS.map(|kind| (kind, processes)));
    }
    let mut worker_cpus = Report::default();
    for &in_flight in &args.in_flight {
        for run in 0..args.timing.runs {
            for &(kind, processes) in &shapes {
                let split = split(in_flight, processes);
                let report = measure_fresh(kind, OPEN_QUOTA, "hot", &split, args.timing.seconds);
                eprintln!(
                    "[{:>5.0} s] {} × {} process(es), {} in flight, run {}: {:.0}/s, conflicts {}, combined {}, contention {}, errors {}{}",
                    started.elapsed().as_secs_f64(),
                    kind.name(),
                    processes,
                    describe_split(&split),
                    run + 1,
                    report.decisions() as f64 / report.elapsed(),
                    report.cas.conflicts,
                    report.cas.combined,
                    report.contention,
                    report.errors,
                    first_error_note(report.first_error.as_deref())
                );
                worker_cpus.add(Report {
                    cpus: report.cpus.clone(),
                    ..Report::default()
                });
                match cases.iter_mut().find(|case| {
                    case.kind == kind && case.processes == processes && case.in_flight == in_flight
                }) {
                    Some(case) => case.runs.push(report),
                    None => cases.push(Case {
                        kind,
                        processes,
                        in_flight,
                        split,
                        runs: vec![report],
                    }),
                }
            }
        }
    }

    // Over-admission: a finite quota, each setup once, a fresh key each.
    let tight: Quota = TIGHT_QUOTA.parse().expect("valid quota");
    let capacity = tight.limit() as f64; // the default capacity and burst
    let rate = tight.limit() as f64 / tight.period().as_secs_f64();
    let mut admissions = Vec::new();
    for &in_flight in &args.in_flight {
        for &processes in &args.processes {
            for kind in LIMITERS {
                let split = split(in_flight, processes);
                let report =
                    measure_fresh(kind, TIGHT_QUOTA, "quota", &split, args.admission_seconds);
                let limit = bound(capacity, rate, report.elapsed());
                eprintln!(
                    "[{:>5.0} s] admission {} × {} process(es), {} in flight: admitted {} of bound {:.1}, denied {}, contention {}, errors {}",
                    started.elapsed().as_secs_f64(),
                    kind.name(),
                    processes,
                    describe_split(&split),
                    report.allowed,
                    limit,
                    report.denied,
                    report.contention,
                    report.errors,
                );
                admissions.push((kind, processes, split, report));
            }
        }
    }

    // The tables.
    println!("# memcache-ratelimit: compare-and-swap contention on one hot key\n");
    println!("- memcached: `{}` ({})", binary.display(), server.version());
    println!("- memcached flags: `{}`", server.flags());
    println!(
        "- placement: memcached on CPUs {}; coordinator on CPUs {} ({}); worker processes on CPUs {} (they inherit the coordinator's CPUs, so several workers share them); {} CPUs online",
        server.cpus(),
        server::own_cpus(),
        placement.how,
        worker_cpus.cpus,
        server::cpu_count()
    );
    println!("- every measurement runs in worker processes (this binary re-executed), each with its own store, limiter and one tokio current_thread runtime; each in-flight slot is a task that sends its next request as soon as the previous one is answered; all workers use one key, new for each measurement, after `flush_all`");
    println!("- in flight is the total over the processes, split evenly: 64 from 4 processes is 4 × 16; a level below the process count gives each process 1 (1 from 4 processes is 4 × 1, shown as 4)");
    println!(
        "- throughput: {} run(s) of {} s per case, quota {OPEN_QUOTA} (every decision allowed, so every group writes); CAS policy 100 attempts, backoff 50 µs to 5 ms; deadline {DEADLINE:?}",
        args.timing.runs, args.timing.seconds
    );
    println!("- decisions/s: decisions answered by all processes ÷ (last answer − first request, wall clock), median of the runs; the ratio is over the raw baseline from one process at the same total in flight");
    println!("- conflicts per decision, combined share (requests decided in a group of two or more ÷ requests) and `Contention` errors: over all runs of the case");
    println!();

    println!("## Throughput, one hot key\n");
    println!("| case | processes | in flight | decisions/s (median) | runs | / raw baseline | conflicts per decision | retries | combined share | `Contention` errors | other errors |");
    println!("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|");
    for &in_flight in &args.in_flight {
        let raw = cases
            .iter()
            .find(|c| c.kind == Kind::Raw && c.in_flight == in_flight)
            .map(Case::per_second);
        for case in cases.iter().filter(|c| c.in_flight == in_flight) {
            let total = case.total();
            let runs: Vec<String> = case
                .runs
                .iter()
                .map(|r| format!("{:.0}", r.decisions() as f64 / r.elapsed()))
                .collect();
            let per_second = case.per_second();
            let ratio = match raw {
                Some(raw) if raw > 0.0 => format!("{:.3}", per_second / raw),
                _ => "n/a".into(),
            };
            let cas_only = |text: String| {
                if case.kind == Kind::Raw {
                    "–".to_owned()
                } else {
                    text
                }
            };
            println!(
                "| {} | {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} |",
                case.kind.name(),
                case.processes,
                describe_split(&case.split),
                per_second,
                runs.join(", "),
                ratio,
                cas_only(per(total.cas.conflicts, total.decisions())),
                cas_only(total.cas.retries.to_string()),
                cas_only(per(total.cas.combined, total.cas.decisions)),
                cas_only(total.contention.to_string()),
                total.errors,
            );
        }
    }
    println!();

    println!(
        "## Over-admission, quota {TIGHT_QUOTA} (capacity and burst {capacity:.0}), {} s per check\n",
        args.admission_seconds
    );
    println!("The bound is what the algorithm may admit from a full bucket: capacity + rate × elapsed, elapsed from the first request sent to the last answer received by any process (wall clock, the clock the limiters read).\n");
    println!("| case | processes | in flight | elapsed (s) | admitted / bound | admitted ÷ bound | denied | conflicts per decision | `Contention` errors | other errors | excess |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    let mut excesses = 0;
    for (kind, processes, split, report) in &admissions {
        let elapsed = report.elapsed();
        let limit = bound(capacity, rate, elapsed);
        let excess = report.allowed as f64 - limit.floor();
        let flag = if excess > 0.0 {
            excesses += 1;
            format!("**OVER-ADMITTED by {excess:.0}**")
        } else {
            "none".into()
        };
        println!(
            "| {} | {} | {} | {:.3} | {} / {:.1} | {:.3} | {} | {} | {} | {} | {} |",
            kind.name(),
            processes,
            describe_split(split),
            elapsed,
            report.allowed,
            limit,
            report.allowed as f64 / limit,
            report.denied,
            per(report.cas.conflicts, report.decisions()),
            report.contention,
            report.errors,
            flag,
        );
    }
    println!();

    // The acceptance targets, at 64 in flight from one process.
    if args.in_flight.contains(&64) && args.processes.contains(&1) {
        println!("## Targets at 64 in flight from one process\n");
        println!("| case | / raw baseline (target ≥ 0.5) | conflicts (target 0) | over-admission (target none) |");
        println!("|---|---:|---:|---|");
        let raw = cases
            .iter()
            .find(|c| c.kind == Kind::Raw && c.in_flight == 64)
            .map(Case::per_second)
            .unwrap_or(f64::NAN);
        for kind in LIMITERS {
            let Some(case) = cases
                .iter()
                .find(|c| c.kind == kind && c.processes == 1 && c.in_flight == 64)
            else {
                continue;
            };
            let ratio = case.per_second() / raw;
            let conflicts = case.total().cas.conflicts;
            let over = admissions
                .iter()
                .find(|(k, p, s, _)| *k == kind && *p == 1 && s.iter().sum::<usize>() == 64)
                .map(|(_, _, _, r)| {
                    let limit = bound(capacity, rate, r.elapsed());
                    if r.allowed as f64 > limit.floor() {
                        "**over**"
                    } else {
                        "none"
                    }
                })
                .unwrap_or("n/a");
            println!(
                "| {} | {:.3} {} | {} {} | {} |",
                kind.name(),
                ratio,
                if ratio >= 0.5 {
                    "(met)"
                } else {
                    "(**missed**)"
                },
                conflicts,
                if conflicts == 0 {
                    "(met)"
                } else {
                    "(**missed**)"
                },
                over,
            );
        }
        println!();
    }
    eprintln!("done in {:.0} s", started.elapsed().as_secs_f64());
    drop(server);
    if excesses > 0 {
        eprintln!("{excesses} setup(s) admitted more than the bound");
        std::process::exit(1);
    }
}
