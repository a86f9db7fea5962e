//! Quick start on the embedded store, no server needed:
//! `cargo run --release --example quickstart`. Time comes from a
//! `ManualClock`, so the run is instant and deterministic; every number
//! printed is computed by the library as it runs.

use std::sync::Arc;
use std::time::Duration;

use memcache_ratelimit::store::Store;
use memcache_ratelimit::Limiter;
use memcache_ratelimit::{Clock, FixedWindow, ManualClock, MemoryStore, Quota, SlidingWindow};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// 2027-01-15 08:00:00 UTC, a minute boundary.
const START: i64 = 1_800_000_000;
const CLIENT: &[u8] = b"client-42";

/// A limiter on a fresh embedded store that shares `clock`: a fixed window
/// when `sub_windows` is `None`, else a sliding window split that many ways.
fn limiter(
    quota: Quota,
    sub_windows: Option<u32>,
    strict: bool,
    clock: &ManualClock,
) -> Result<Box<dyn Limiter>> {
    let store = Arc::new(MemoryStore::with_clock(clock.clone()));
    Ok(match sub_windows {
        None => Box::new(
            FixedWindow::builder(quota, store)
                .clock(clock.clone())
                .strict(strict)
                .build()?,
        ),
        Some(n) => Box::new(
            SlidingWindow::builder(quota, store)
                .sub_windows(n)
                .clock(clock.clone())
                .strict(strict)
                .build()?,
        ),
    })
}

/// Sends `count` requests `gap` apart, starting now; returns how many were allowed.
async fn send(
    limiter: &dyn Limiter,
    clock: &ManualClock,
    count: u64,
    gap: Duration,
) -> Result<u64> {
    let mut allowed = 0;
    for _ in 0..count {
        allowed += u64::from(limiter.check(CLIENT).await?.is_allowed());
        clock.advance(gap);
    }
    Ok(allowed)
}

#[tokio::main]
async fn main() -> Result<()> {
    let quota: Quota = "100/minute".parse()?;
    let limit = quota.limit();
    let algorithms = [
        ("FixedWindow", None),
        ("SlidingWindow n=1", Some(1)),
        ("SlidingWindow n=4", Some(4)),
    ];

    // (a) The full limit in the last second before a minute boundary, and
    // again in the first second after it.
    println!("1. Boundary attack, limit {quota}: {limit} requests in the second before a");
    println!("   minute boundary and {limit} in the second after it\n");
    println!(
        "   {:<18} {:>7} {:>7} {:>12}",
        "algorithm", "before", "after", "total"
    );
    let gap = Duration::from_secs(1) / u32::try_from(limit)?;
    for (name, sub_windows) in algorithms {
        let clock = ManualClock::from_unix_secs(START);
        let limiter = limiter(quota, sub_windows, false, &clock)?;
        clock.advance(Duration::from_secs(59));
        let before = send(&*limiter, &clock, limit, gap).await?;
        let after = send(&*limiter, &clock, limit, gap).await?;
        println!(
            "   {name:<18} {before:>7} {after:>7} {:>12}",
            before + after
        );
    }

    // (b) The weighting: 42 requests in one minute, 18 in the next, 15 s in.
    println!("\n2. Sliding window n=1 weighting the previous minute, limit {quota}\n");
    let clock = ManualClock::from_unix_secs(START);
    let store = Arc::new(MemoryStore::with_clock(clock.clone()));
    let window = SlidingWindow::builder(quota, store.clone())
        .sub_windows(1)
        .clock(clock.clone())
        .build()?;
    for _ in 0..42 {
        window.check(CLIENT).await?;
    }
    clock.advance(Duration::from_secs(75));
    let mut remaining = 0;
    for _ in 0..18 {
        remaining = window.check(CLIENT).await?.remaining();
    }
    let keys = window.keys_at(CLIENT, clock.now())?;
    let counts = store.get_counters(&keys).await?;
    let (now, before) = (counts[0].unwrap_or(0), counts[1].unwrap_or(0));
    let into = clock.now().timestamp() % 60;
    let estimate = now as f64 + before as f64 * (60 - into) as f64 / 60.0;
    for (key, count) in keys.iter().zip(&counts) {
        let key = String::from_utf8_lossy(key);
        println!("   counter {key:<26} {:>4}", count.unwrap_or(0));
    }
    println!(
        "   {into} s into the minute: estimate {now} + {before} x {}/60 = {estimate}",
        60 - into
    );
    println!("   remaining after the last request: {remaining}");
    let over = window.check_n(CLIENT, 51).await?;
    let fits = window.check_n(CLIENT, 50).await?;
    println!("   a request of cost 51: allowed = {}", over.is_allowed());
    println!("   a request of cost 50: allowed = {}", fits.is_allowed());

    // (c) A client that retries every 200 ms while denied (300/minute).
    println!("\n3. A client retrying every 200 ms, limit {quota}, sliding window n=1\n");
    let default_clock = ManualClock::from_unix_secs(START);
    let strict_clock = ManualClock::from_unix_secs(START);
    let default = limiter(quota, Some(1), false, &default_clock)?;
    let strict = limiter(quota, Some(1), true, &strict_clock)?;
    println!(
        "   {:<8} {:>20} {:>20}",
        "minute", "default (refunded)", "strict (counted)"
    );
    for minute in 1..=4 {
        let gap = Duration::from_millis(200);
        let refunded = send(&*default, &default_clock, 300, gap).await?;
        let counted = send(&*strict, &strict_clock, 300, gap).await?;
        println!(
            "   {minute:<8} {:>20} {:>20}",
            format!("{refunded}/300"),
            format!("{counted}/300")
        );
    }
    let next = strict.check(CLIENT).await?;
    let wait = next.retry_after().unwrap_or_default();
    println!(
        "\n   strict, one more request: allowed = {}; retry after {wait:?}",
        next.is_allowed()
    );
    Ok(())
}
