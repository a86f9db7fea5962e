//! Exactness across OS processes: 4 processes (this test binary, started
//! again as workers), each running 32 tasks against one client on one
//! memcached, all deciding at the same instant of their clocks. The fixed
//! window, the token bucket, GCRA and the sliding log admit exactly the
//! limit; the sliding window, whose estimate is exact while the window
//! holds no older bucket, admits exactly the limit too.

use crate::common;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::memcached::Memcached;
use memcache_ratelimit::algorithm::CasPolicy;
use memcache_ratelimit::limiter::CasAlgorithm;
use memcache_ratelimit::Limiter;
use memcache_ratelimit::{
    FailurePolicy, FixedWindow, Gcra, LimiterBuilder, ManualClock, MemcachedStore, Quota,
    SlidingLog, SlidingWindow, TokenBucket,
};

/// Set in a worker: `<algorithm> <memcached address> <start, unix ms>
/// <run>`; each run is a client of its own.
const WORKER: &str = "MEMCACHE_RATELIMIT_EXACTNESS_WORKER";
const TEST: &str = "processes_share_one_limit_exactly";
/// This module's path in the test binary, which names the test for the
/// workers' filter (`module_path!` without the crate's name).
fn test_path() -> String {
    let module = module_path!()
        .split_once("::")
        .map_or(module_path!(), |(_, module)| module);
    format!("{module}::{TEST}")
}
const PROCESSES: usize = 4;
const TASKS: usize = 32;
/// Requests per task: 4 × 32 × 4 = 512 requests for a limit of 100.
const EACH: usize = 4;
const LIMIT: u64 = 100;
const ALGORITHMS: [&str; 5] = ["fixed", "sliding", "token", "gcra", "log"];

#[test]
fn processes_share_one_limit_exactly() {
    if let Ok(spec) = std::env::var(WORKER) {
        return worker(&spec);
    }
    let server = Memcached::start();
    for algorithm in ALGORITHMS {
        // The processes must really compete for the test to mean anything:
        // each still deciding when the last one began. On a loaded machine
        // one may finish before another starts; that run is still checked
        // for exactness, and the race is run again, up to 5 times.
        let competed = (1..=5).any(|attempt| race(&server, algorithm, attempt));
        assert!(
            competed,
            "{algorithm}: the processes never overlapped in 5 runs"
        );
    }
}

/// One race of the workers for `algorithm`, checked for exactness; whether
/// the processes overlapped.
fn race(server: &Memcached, algorithm: &str, attempt: u32) -> bool {
    {
        // All workers begin at one wall-clock moment, once all are up.
        let start = SystemTime::now().duration_since(UNIX_EPOCH).unwrap() + Duration::from_secs(2);
        let workers: Vec<_> = (0..PROCESSES)
            .map(|_| {
                Command::new(std::env::current_exe().unwrap())
                    .args([&test_path(), "--exact", "--nocapture", "--test-threads=1"])
                    .env(
                        WORKER,
                        format!(
                            "{algorithm} {} {} {attempt}",
                            server.address(),
                            start.as_millis()
                        ),
                    )
                    .stdout(Stdio::piped())
                    .stderr(Stdio::inherit())
                    .spawn()
                    .expect("start a worker process")
            })
            .collect();
        let mut per_process = Vec::new();
        let mut spans = Vec::new();
        let mut contention = 0;
        for worker in workers {
            let output = worker.wait_with_output().unwrap();
            let stdout = String::from_utf8_lossy(&output.stdout);
            assert!(
                output.status.success(),
                "{algorithm} worker failed: {stdout}"
            );
            let line = stdout
                .lines()
                .find_map(|line| line.split_once("worker: ").map(|(_, rest)| rest))
                .unwrap_or_else(|| panic!("{algorithm}: no worker line in {stdout}"));
            let numbers: Vec<u64> = line
                .split_whitespace()
                .filter_map(|word| word.parse().ok())
                .collect();
            per_process.push(numbers[0]);
            spans.push((numbers[2], numbers[3]));
            contention += numbers[1];
        }
        let admitted: u64 = per_process.iter().sum();
        let last_start = spans.iter().map(|s| s.0).max().unwrap();
        let first_end = spans.iter().map(|s| s.1).min().unwrap();
        let overlapped = last_start < first_end;
        eprintln!(
            "{algorithm} (run {attempt}): {PROCESSES} processes × {TASKS} tasks × {EACH} requests, limit {LIMIT}: \
             admitted {admitted} ({per_process:?} per process), {contention} gave up on contention, \
             overlapped: {overlapped}"
        );
        assert_eq!(contention, 0, "{algorithm}");
        assert_eq!(admitted, LIMIT, "{algorithm}");
        overlapped
    }
}

/// One worker process: 32 tasks, each making its requests as fast as
/// answers come; prints what it admitted.
fn worker(spec: &str) {
    let parts: Vec<&str> = spec.split(' ').collect();
    let (algorithm, address) = (parts[0], parts[1].to_owned());
    let start = Duration::from_millis(parts[2].parse().unwrap());
    let client = format!("one-client-{}", parts[3]).into_bytes();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (admitted, contention, began, ended) = runtime.block_on(async move {
        let store = Arc::new(
            MemcachedStore::builder()
                .server(address)
                .io_timeout(Duration::from_secs(5))
                .build()
                .await
                .unwrap(),
        );
        let limiter = limiter(algorithm, store);
        tokio::time::sleep(start.saturating_sub(since_epoch())).await;
        let began = since_epoch();
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let limiter = limiter.clone();
                let client = client.clone();
                tokio::spawn(async move {
                    let (mut admitted, mut contention) = (0u64, 0u64);
                    for _ in 0..EACH {
                        match limiter.check(&client).await {
                            Ok(decision) => admitted += u64::from(decision.is_allowed()),
                            Err(memcache_ratelimit::Error::Contention { .. }) => contention += 1,
                            Err(error) => panic!("{error}"),
                        }
                    }
                    (admitted, contention)
                })
            })
            .collect();
        let (mut admitted, mut contention) = (0, 0);
        for task in tasks {
            let (a, c) = task.await.unwrap();
            admitted += a;
            contention += c;
        }
        (admitted, contention, began, since_epoch())
    });
    println!(
        "worker: {admitted} admitted, {contention} contention, from {} to {} µs",
        began.as_micros(),
        ended.as_micros()
    );
}

/// Wall-clock time since the unix epoch.
fn since_epoch() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap()
}

/// `builder` as every process sets it up: at the same instant of its own
/// clock, 7 s into a minute (the same window and sub-window for every
/// process), in `algorithm`'s namespace, with store failures returned
/// rather than absorbed.
fn in_step<A>(builder: LimiterBuilder<A>, algorithm: &str) -> LimiterBuilder<A> {
    builder
        .clock(ManualClock::from_unix_secs(common::T0 + 7))
        .namespace(algorithm)
        .on_failure(FailurePolicy::ReturnError)
}

/// [`in_step`], with enough compare-and-swap attempts that 128 writers at
/// once all get through.
fn cas_in_step<A: CasAlgorithm>(builder: LimiterBuilder<A>, algorithm: &str) -> Arc<dyn Limiter> {
    let cas = CasPolicy::new(1_000, Duration::from_micros(100), Duration::from_millis(5)).unwrap();
    let limiter = in_step(builder, algorithm).cas_policy(cas).build().unwrap();
    Arc::new(limiter)
}

/// `algorithm` at [`LIMIT`] per minute, [`in_step`] (and for a
/// compare-and-swap algorithm [`cas_in_step`]).
fn limiter(algorithm: &str, store: Arc<MemcachedStore>) -> Arc<dyn Limiter> {
    let quota = Quota::per_minute(LIMIT.try_into().unwrap());
    match algorithm {
        "fixed" => Arc::new(
            in_step(FixedWindow::builder(quota, store), algorithm)
                .build()
                .unwrap(),
        ),
        "sliding" => Arc::new(
            in_step(
                SlidingWindow::builder(quota, store).sub_windows(4),
                algorithm,
            )
            .build()
            .unwrap(),
        ),
        "token" => cas_in_step(TokenBucket::builder(quota, store), algorithm),
        "gcra" => cas_in_step(Gcra::builder(quota, store), algorithm),
        "log" => cas_in_step(SlidingLog::builder(quota, store), algorithm),
        other => panic!("unknown algorithm {other}"),
    }
}
