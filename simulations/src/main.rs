//! One client's seeded Poisson traffic, around the limit, through each
//! algorithm on the embedded store, judged against an exact sliding window.
//! See `README.md` beside this crate for what each column means.
//!
//! `cargo run --release -p simulations [-- SEED]`

mod oracle;
mod traffic;

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use memcache_ratelimit::{
    FixedWindow, ManualClock, MemoryStore, Quota, RateLimiter, SlidingWindow,
};

use oracle::{Oracle, Report};

const QUOTA: &str = "100/minute";
const LENGTH: Duration = Duration::from_secs(30 * 60);
/// Offered rates, as multiples of the limit.
const RATES: [f64; 3] = [0.9, 1.1, 1.5];
/// `None` is the fixed window, `Some(n)` the sliding window of `n` sub-windows.
const ALGORITHMS: [Option<u32>; 4] = [None, Some(1), Some(4), Some(12)];
/// 2027-01-15 08:00:00 UTC, a minute boundary.
const START: i64 = 1_800_000_000;
const DEFAULT_SEED: u64 = 1;
const CLIENT: &[u8] = b"client";

fn name(algorithm: Option<u32>) -> String {
    match algorithm {
        None => "fixed window".to_owned(),
        Some(n) => format!("sliding window, n = {n}"),
    }
}

/// Replays `arrivals` through a fresh limiter on a fresh store, moving the
/// clock to each request's time, and judges every decision.
async fn run(
    quota: Quota,
    algorithm: Option<u32>,
    arrivals: &[Duration],
) -> Result<Report, Box<dyn Error>> {
    let clock = ManualClock::from_unix_secs(START);
    let store = Arc::new(MemoryStore::with_clock(clock.clone()));
    let limiter: Box<dyn RateLimiter> = match algorithm {
        None => Box::new(
            FixedWindow::builder(quota, store)
                .clock(clock.clone())
                .build()?,
        ),
        Some(n) => Box::new(
            SlidingWindow::builder(quota, store)
                .sub_windows(n)
                .clock(clock.clone())
                .build()?,
        ),
    };
    let mut oracle = Oracle::new(quota.limit(), quota.period());
    let mut now = Duration::ZERO;
    for &at in arrivals {
        clock.advance(at - now);
        now = at;
        let decision = limiter.check(CLIENT).await?;
        oracle.record(at, decision.is_allowed());
    }
    Ok(oracle.report())
}

fn percent(part: u64, whole: u64) -> f64 {
    100.0 * part as f64 / whole.max(1) as f64
}

fn main() -> Result<(), Box<dyn Error>> {
    let seed = match std::env::args().nth(1) {
        Some(text) => text.parse()?,
        None => DEFAULT_SEED,
    };
    let quota: Quota = QUOTA.parse()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;

    println!(
        "One client, Poisson arrivals, limit {quota}, {} simulated minutes, seed {seed}.",
        LENGTH.as_secs() / 60
    );
    println!("Denied requests are refunded (the default). Percentages are of offered requests.\n");
    println!("| algorithm | rate | offered | admitted | wrongly allowed % | wrongly denied % | peak 60 s / limit |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (index, &rate) in RATES.iter().enumerate() {
        let per_second = rate * quota.limit() as f64 / quota.period().as_secs_f64();
        let arrivals = traffic::poisson(seed.wrapping_add(index as u64), per_second, LENGTH);
        for algorithm in ALGORITHMS {
            let report = runtime.block_on(run(quota, algorithm, &arrivals))?;
            println!(
                "| {} | {rate:.1}× | {} | {} | {:.2} | {:.2} | {:.2} |",
                name(algorithm),
                report.offered,
                report.admitted,
                percent(report.wrongly_allowed, report.offered),
                percent(report.wrongly_denied, report.offered),
                report.peak as f64 / quota.limit() as f64,
            );
        }
    }
    Ok(())
}
