//! Soak: a fixed, bounded rate of decisions from many clients against one
//! memcached for a fixed time (10 minutes by default), checking that
//! nothing grows and nothing is miscounted.
//!
//! Every second, client `c` of `--clients` sends `c mod 5` requests to a
//! fixed window of 3 per second. In every window a client must get
//! exactly `min(sent, 3)` of the requests it made in that window allowed:
//! the program checks that for every client and every second, counting
//! each request in the second its decision was made in (read before and
//! after it; a decision that straddles a second boundary leaves that
//! client's two windows unchecked). So a second whose requests run late
//! on a busy machine is still checked.
//! Beside it, the same traffic goes to a sliding window (4 sub-windows of
//! 1 s, sealed-bucket cache on) and to GCRA, which keep per-client state
//! in process, and whose admitted counts are reported. Every 30 s it
//! prints the process's resident memory and memcached's `curr_items` and
//! `bytes`; at the end they must be flat: after the first minute, the
//! highest of the later samples at most 10% (resident memory) and 20%
//! (items) above the highest of the earlier ones. Exits 1 if a check
//! fails.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use memcache_ratelimit::{
    FixedWindow, Gcra, LimiterBuilder, MemcachedStore, RateLimiter, SlidingWindow,
};
use memcache_ratelimit_bench::algorithm::measured;
use memcache_ratelimit_bench::server::{self, Memcached};
use tokio::sync::Semaphore;

/// A request pattern repeats every `PATTERN` clients.
const PATTERN: u64 = 5;
/// The fixed window's limit per second.
const LIMIT: u64 = 3;
/// Requests in flight at most.
const IN_FLIGHT: usize = 64;
/// When each second's requests start, in milliseconds into the second.
const START_MS: u64 = 100;
/// When a second's requests are answered later than this into the
/// second, the second is reported as late (its requests spill into the
/// next window, where they are still checked).
const DONE_MS: u64 = 900;

#[derive(Parser, Debug)]
#[command(
    about = "Soak: a fixed rate from many clients for a fixed time; memory and memcached items stay flat, and the fixed window's counts are exact"
)]
struct Args {
    /// How long to run, in seconds.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    seconds: u64,
    /// Clients; each second, client c sends c mod 5 requests (2 per client
    /// on average).
    #[arg(long, default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    clients: u64,
    /// Seconds between two samples of memory and memcached's items.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    sample_every: u64,
    /// A memcached already running (address), instead of starting one.
    #[arg(long)]
    server: Option<String>,
}

/// Requests made and allowed per client and window (unix second), for
/// the fixed window; `None` once a decision straddled the window's edge.
type Ledger = std::sync::Mutex<HashMap<(u64, u64), Option<(u64, u64)>>>;

/// One sample of what must stay flat.
struct Sample {
    at: u64,
    rss_kib: u64,
    items: u64,
    bytes: u64,
}

fn main() {
    let args = Args::parse();
    let server = match &args.server {
        Some(address) => Memcached::given(address),
        None => Memcached::start(&server::find_binary(), None),
    };
    println!("# memcache-ratelimit soak");
    println!();
    println!(
        "- memcached {} at {}; {} clients, {} requests/s, {} s; fixed window {LIMIT}/second \
         checked per client and second; sliding window (4 sub-windows) and GCRA beside it",
        server.version(),
        server.address(),
        args.clients,
        requests_per_second(args.clients),
        args.seconds
    );
    println!();
    println!("| elapsed s | decisions | fixed window: windows checked | wrong | late seconds | resident KiB | memcached items | memcached bytes |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let outcome = runtime.block_on(soak(&args, &server));
    println!();
    println!(
        "Decisions: {}. Fixed window: {} client-windows checked, {} wrong, {} unchecked (a \
         decision straddled the window's edge). Late seconds: {}. Admitted per second, on \
         average: fixed {:.0} (expected {:.0} when no second is late), sliding {:.0}, GCRA {:.0}.",
        outcome.decisions,
        outcome.checked,
        outcome.wrong,
        outcome.unchecked,
        outcome.late,
        outcome.admitted[0] as f64 / args.seconds as f64,
        expected_per_second(args.clients) as f64,
        outcome.admitted[1] as f64 / args.seconds as f64,
        outcome.admitted[2] as f64 / args.seconds as f64,
    );
    let mut failures = Vec::new();
    if outcome.wrong > 0 {
        failures.push(format!("{} wrong fixed-window counts", outcome.wrong));
    }
    if outcome.checked == 0 {
        failures.push("no window could be checked".to_owned());
    }
    if outcome.errors > 0 {
        failures.push(format!("{} errors", outcome.errors));
    }
    failures.extend(flatness(&outcome.samples));
    if failures.is_empty() {
        println!("All checks passed.");
    } else {
        println!("FAILED: {}.", failures.join("; "));
        // `exit` runs no destructors: stop the memcached started here first.
        drop(server);
        std::process::exit(1);
    }
}

fn requests_per_second(clients: u64) -> u64 {
    (0..clients).map(|c| c % PATTERN).sum()
}

fn expected_per_second(clients: u64) -> u64 {
    (0..clients).map(|c| (c % PATTERN).min(LIMIT)).sum()
}

#[derive(Default)]
struct Outcome {
    decisions: u64,
    checked: u64,
    /// Client-windows left unchecked: a decision straddled their edge.
    unchecked: u64,
    wrong: u64,
    late: u64,
    errors: u64,
    /// Fixed, sliding, GCRA.
    admitted: [u64; 3],
    samples: Vec<Sample>,
}

async fn soak(args: &Args, server: &Memcached) -> Outcome {
    let store = Arc::new(
        MemcachedStore::builder()
            .server(server.address())
            .io_timeout(Duration::from_secs(5))
            .build()
            .await
            .expect("memcached store"),
    );
    let per_second = "3/second".parse().expect("quota");
    let limiters: [Arc<RateLimiter>; 3] = [
        build(FixedWindow::builder(per_second, store.clone()), "soak-fw"),
        build(
            SlidingWindow::builder("12/4s".parse().expect("quota"), store.clone()).sub_windows(4),
            "soak-sw",
        ),
        build(Gcra::builder(per_second, store.clone()), "soak-gcra"),
    ];
    let admitted: Arc<[AtomicU64; 3]> = Arc::new(Default::default());
    let errors = Arc::new(AtomicU64::new(0));
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut outcome = Outcome::default();
    let ledger: Arc<Ledger> = Arc::default();
    let began = Instant::now();
    let first_second = unix_seconds() + 1;
    for second in first_second..first_second + args.seconds {
        // Start the second's requests START_MS into it.
        let start = Duration::from_secs(second) + Duration::from_millis(START_MS);
        tokio::time::sleep(start.saturating_sub(since_epoch())).await;
        let mut tasks = Vec::new();
        for client in 0..args.clients {
            for _ in 0..client % PATTERN {
                let permit = slots.clone().acquire_owned().await.expect("semaphore");
                let limiters = limiters.clone();
                let (admitted, errors, ledger) = (admitted.clone(), errors.clone(), ledger.clone());
                tasks.push(tokio::spawn(async move {
                    let id = format!("client-{client}");
                    for (which, limiter) in limiters.iter().enumerate() {
                        let before = unix_seconds();
                        let outcome = limiter.check(id.as_bytes()).await;
                        let after = unix_seconds();
                        let allowed = match outcome {
                            Ok(decision) => decision.is_allowed(),
                            Err(_) => {
                                errors.fetch_add(1, Ordering::Relaxed);
                                false
                            }
                        };
                        if allowed {
                            admitted[which].fetch_add(1, Ordering::Relaxed);
                        }
                        if which == 0 {
                            record(&ledger, client, before, after, allowed);
                        }
                    }
                    drop(permit);
                }));
            }
        }
        for task in tasks {
            task.await.expect("request task");
        }
        outcome.decisions += 3 * requests_per_second(args.clients);
        if since_epoch() > Duration::from_secs(second) + Duration::from_millis(DONE_MS) {
            outcome.late += 1;
        }
        // Windows no request can reach any more.
        settle(&ledger, unix_seconds().saturating_sub(1), &mut outcome);
        let elapsed = began.elapsed().as_secs();
        let last = second + 1 == first_second + args.seconds;
        if (second - first_second + 1).is_multiple_of(args.sample_every) || last {
            let stats = server.stats();
            let sample = Sample {
                at: elapsed,
                rss_kib: resident_kib(),
                items: stats.items,
                bytes: stats.bytes,
            };
            println!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                sample.at,
                outcome.decisions,
                outcome.checked,
                outcome.wrong,
                outcome.late,
                sample.rss_kib,
                sample.items,
                sample.bytes
            );
            outcome.samples.push(sample);
        }
    }
    settle(&ledger, u64::MAX, &mut outcome);
    outcome.errors = errors.load(Ordering::Relaxed);
    outcome.admitted = [0, 1, 2].map(|i| admitted[i].load(Ordering::Relaxed));
    outcome
}

/// `builder`'s limiter in `namespace`, with store failures returned as
/// errors ([`measured`]), which the soak counts.
fn build<A>(builder: LimiterBuilder<A>, namespace: &str) -> Arc<RateLimiter> {
    Arc::new(
        measured(builder)
            .namespace(namespace)
            .build()
            .expect("limiter"),
    )
}

/// Counts one fixed-window decision made between unix seconds `before`
/// and `after`.
fn record(ledger: &Ledger, client: u64, before: u64, after: u64, allowed: bool) {
    let mut ledger = ledger.lock().expect("ledger");
    if before == after {
        if let Some((sent, admitted)) = ledger.entry((client, before)).or_insert(Some((0, 0))) {
            *sent += 1;
            *admitted += u64::from(allowed);
        }
    } else {
        for window in [before, after] {
            ledger.insert((client, window), None);
        }
    }
}

/// Checks and forgets every window before `until`: `min(sent, LIMIT)`
/// allowed.
fn settle(ledger: &Ledger, until: u64, outcome: &mut Outcome) {
    ledger
        .lock()
        .expect("ledger")
        .retain(|&(_, window), counts| {
            if window >= until {
                return true;
            }
            match counts {
                Some((sent, admitted)) => {
                    outcome.checked += 1;
                    if *admitted != (*sent).min(LIMIT) {
                        outcome.wrong += 1;
                    }
                }
                None => outcome.unchecked += 1,
            }
            false
        });
}

/// The failures of the flatness checks: after the first minute, the
/// highest later sample against the highest earlier one.
fn flatness(samples: &[Sample]) -> Vec<String> {
    let settled: Vec<&Sample> = samples.iter().filter(|s| s.at >= 60).collect();
    if settled.len() < 2 {
        return vec![format!(
            "too few samples after the first minute to judge flatness ({})",
            settled.len()
        )];
    }
    let (earlier, later) = settled.split_at(settled.len() / 2);
    let high =
        |part: &[&Sample], f: fn(&Sample) -> u64| part.iter().map(|s| f(s)).max().unwrap_or(0);
    let mut failures = Vec::new();
    for (name, f, slack) in [
        (
            "resident memory",
            (|s: &Sample| s.rss_kib) as fn(&Sample) -> u64,
            1.10,
        ),
        ("memcached items", |s: &Sample| s.items, 1.20),
    ] {
        let (before, after) = (high(earlier, f), high(later, f));
        println!(
            "{name}: highest {before} in the first half after a minute, {after} in the second"
        );
        if after as f64 > before as f64 * slack {
            failures.push(format!("{name} grew from {before} to {after}"));
        }
    }
    failures
}

fn since_epoch() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
}

fn unix_seconds() -> u64 {
    since_epoch().as_secs()
}

/// This process's resident memory, from `/proc/self/status`.
fn resident_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status.lines().find_map(|line| {
                line.strip_prefix("VmRSS:")
                    .and_then(|rest| rest.split_whitespace().next())
                    .and_then(|kib| kib.parse().ok())
            })
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_is_right_with_min_of_sent_and_limit_allowed() {
        let ledger = Ledger::default();
        // Client 1 in second 10: 5 sent, 3 allowed (right). Client 2: 2
        // sent, 2 allowed (right). Client 3: 4 sent, 4 allowed (wrong).
        for (client, sent, allowed) in [(1, 5, 3), (2, 2, 2), (3, 4, 4)] {
            for i in 0..sent {
                record(&ledger, client, 10, 10, i < allowed);
            }
        }
        // Client 4 straddles 10 and 11: unchecked; second 11 is kept.
        record(&ledger, 4, 10, 11, true);
        record(&ledger, 5, 11, 11, true);
        let mut seen = Outcome::default();
        settle(&ledger, 11, &mut seen);
        assert_eq!((seen.checked, seen.wrong, seen.unchecked), (3, 1, 1));
        settle(&ledger, u64::MAX, &mut seen);
        assert_eq!((seen.checked, seen.wrong, seen.unchecked), (4, 1, 2));
    }
}
