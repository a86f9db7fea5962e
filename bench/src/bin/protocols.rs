//! The classic text protocol beside the meta protocol, on the same local
//! memcached (`-t 1`, pinned to its own CPU where possible): decisions/s
//! and round trips per decision of `MemcachedStore` speaking meta
//! (auto-pipelined) and `ClassicStore`, for the sliding window, the fixed
//! window and GCRA, at 1 and 64 requests in flight over 10,000 clients.
//! The two protocols alternate run by run, and each case reports the
//! median of its runs and the classic/meta ratio of those medians.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use memcache_ratelimit::store::{ClassicStore, MemcachedStore, Protocol, Store};
use memcache_ratelimit::{FixedWindow, Gcra, LimiterBuilder, RateLimiter, SlidingWindow};
use memcache_ratelimit_bench::algorithm::measured;
use memcache_ratelimit_bench::server::{self, Memcached};
use memcache_ratelimit_bench::{median, Runs, OPEN_QUOTA};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Clients drawn at random, each decision.
const CLIENTS: usize = 10_000;
/// The limiters' deadline and the stores' I/O timeout: nothing times out.
const DEADLINE: Duration = Duration::from_secs(5);

#[derive(Parser, Debug)]
#[command(
    name = "protocols",
    about = "Decisions/s and round trips per decision over the classic and the meta protocol, on one memcached"
)]
struct Args {
    #[command(flatten)]
    timing: Runs,
    /// Requests kept outstanding, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,64", value_parser = memcache_ratelimit_bench::at_least_one)]
    in_flight: Vec<usize>,
    /// Smoke test: 1 run of 1 s per case.
    #[arg(long)]
    quick: bool,
}

#[derive(Clone, Copy, Debug)]
enum Case {
    Sliding4,
    Fixed,
    Gcra,
}

impl Case {
    fn name(self) -> &'static str {
        match self {
            Case::Sliding4 => "SlidingWindow n=4",
            Case::Fixed => "FixedWindow",
            Case::Gcra => "Gcra",
        }
    }

    fn limiter(self, store: Arc<dyn Store>) -> Arc<RateLimiter> {
        let quota = OPEN_QUOTA.parse().expect("quota");
        match self {
            Case::Sliding4 => build(SlidingWindow::builder(quota, store).sub_windows(4)),
            Case::Fixed => build(FixedWindow::builder(quota, store)),
            Case::Gcra => build(Gcra::builder(quota, store)),
        }
    }
}

/// `builder`'s limiter, measured, with the deadline [`DEADLINE`].
fn build<A>(builder: LimiterBuilder<A>) -> Arc<RateLimiter> {
    Arc::new(
        measured(builder)
            .deadline(DEADLINE)
            .build()
            .expect("limiter"),
    )
}

/// One run's result.
struct Run {
    per_second: f64,
    round_trips_per_decision: f64,
    errors: u64,
}

/// `in_flight` tasks deciding for random clients for `seconds`.
async fn run(limiter: Arc<RateLimiter>, in_flight: usize, seconds: f64, seed: u64) -> (u64, u64) {
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let tasks: Vec<_> = (0..in_flight)
        .map(|slot| {
            let limiter = limiter.clone();
            tokio::task::spawn_local(async move {
                let mut rng = StdRng::seed_from_u64(seed.wrapping_add(slot as u64));
                let (mut decided, mut errors) = (0u64, 0u64);
                while Instant::now() < end {
                    let client = format!("proto-{}", rng.random_range(0..CLIENTS));
                    match limiter.check(client.as_bytes()).await {
                        Ok(_) => decided += 1,
                        Err(_) => errors += 1,
                    }
                }
                (decided, errors)
            })
        })
        .collect();
    let mut totals = (0, 0);
    for task in tasks {
        let (decided, errors) = task.await.expect("task");
        totals.0 += decided;
        totals.1 += errors;
    }
    totals
}

fn main() {
    let mut args = Args::parse();
    args.timing.resolve(args.quick);
    let placement = server::pin_self_or_reexec();
    let memcached = Memcached::start(&server::find_binary(), placement.pin_server);
    let address = memcached.address();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let local = tokio::task::LocalSet::new();

    println!("# Classic beside meta\n");
    println!(
        "- {} (`{}`), placement: {}",
        memcached.version(),
        memcached.flags(),
        placement.how
    );
    println!(
        "- {} clients drawn at random, quota {OPEN_QUOTA} (every request allowed), {} run(s) of {} s per case, protocols alternating\n",
        CLIENTS, args.timing.runs, args.timing.seconds
    );
    println!("| case | in flight | meta decisions/s | classic decisions/s | classic / meta | meta round trips / decision | classic round trips / decision |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for case in [Case::Sliding4, Case::Fixed, Case::Gcra] {
        for &in_flight in &args.in_flight {
            let mut meta = Vec::new();
            let mut classic = Vec::new();
            for attempt in 0..args.timing.runs {
                for protocol in [Protocol::Meta, Protocol::Classic] {
                    memcached.flush_all();
                    let seconds = args.timing.seconds;
                    let seed = attempt as u64;
                    let result = local.block_on(&runtime, async {
                        let (store, trips): (Arc<dyn Store>, Box<dyn Fn() -> u64>) = match protocol
                        {
                            Protocol::Classic => {
                                let store = Arc::new(
                                    ClassicStore::builder()
                                        .server(address.clone())
                                        .io_timeout(DEADLINE)
                                        .build()
                                        .expect("store"),
                                );
                                let counted = store.clone();
                                (store, Box::new(move || counted.round_trips()))
                            }
                            _ => {
                                let store = Arc::new(
                                    MemcachedStore::builder()
                                        .server(address.clone())
                                        .io_timeout(DEADLINE)
                                        .build()
                                        .await
                                        .expect("store"),
                                );
                                let counted = store.clone();
                                (store, Box::new(move || counted.pipeline_stats().batches))
                            }
                        };
                        let (decided, errors) =
                            run(case.limiter(store), in_flight, seconds, seed).await;
                        Run {
                            per_second: decided as f64 / seconds,
                            round_trips_per_decision: trips() as f64 / decided.max(1) as f64,
                            errors,
                        }
                    });
                    eprintln!(
                        "{} in flight {in_flight} {protocol:?} run {}: {:.0}/s, {:.3} round trips/decision, {} errors",
                        case.name(),
                        attempt + 1,
                        result.per_second,
                        result.round_trips_per_decision,
                        result.errors
                    );
                    match protocol {
                        Protocol::Classic => classic.push(result),
                        _ => meta.push(result),
                    }
                }
            }
            let rate = |runs: &[Run]| median(runs.iter().map(|r| r.per_second).collect());
            let trips =
                |runs: &[Run]| median(runs.iter().map(|r| r.round_trips_per_decision).collect());
            let (m, c) = (rate(&meta), rate(&classic));
            println!(
                "| {} | {in_flight} | {m:.0} | {c:.0} | {:.2} | {:.3} | {:.3} |",
                case.name(),
                c / m,
                trips(&meta),
                trips(&classic)
            );
        }
    }
}
