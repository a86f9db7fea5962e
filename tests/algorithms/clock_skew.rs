//! Clock skew: three limiter nodes share one store, their clocks 1 s
//! behind, right, and 1 s ahead of the true time, so two of them are 2 s
//! apart. Each node sends a request for one client every 100 ms (30 a
//! second in all, far above every limit) for two minutes. The most any
//! period of true time admits is measured against the same run with the
//! clocks in step, with `max_clock_skew` set to the 2 s the clocks really
//! differ: the compare-and-swap algorithms may gain at most 2 s worth of
//! quota, the windows at most one more limit (what a lagging node counts
//! into a window the others have left). The same runs with
//! `max_clock_skew` left at 1 s, too small for these clocks, are reported
//! beside them, and the sliding window's sealed-bucket cache admits more
//! there.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::T0;
use memcache_ratelimit::store::Store;
use memcache_ratelimit::{
    Clock, FixedWindow, Gcra, HybridQuota, LimiterBuilder, ManualClock, MemoryStore, Quota,
    RateLimiter, SlidingLog, SlidingWindow, TokenBucket,
};

const STEP_MS: i64 = 100;
const RUN_SECONDS: i64 = 120;
/// The nodes' clocks against the true time.
const SKEWED: [i64; 3] = [-1_000, 0, 1_000];
const IN_STEP: [i64; 3] = [0, 0, 0];

/// An algorithm under test: its limit and period, and how to build it on a
/// node.
struct Case {
    name: &'static str,
    quota: Quota,
    /// Counts in time buckets (fixed and sliding windows), rather than
    /// keeping one state that time moves forward.
    window: bool,
    build: fn(Quota, Arc<MemoryStore>, ManualClock, Duration) -> RateLimiter,
}

/// `builder` on a node reading `clock`, allowing clocks `skew` apart.
fn node<A>(builder: LimiterBuilder<A>, clock: ManualClock, skew: Duration) -> RateLimiter {
    builder.clock(clock).max_clock_skew(skew).build().unwrap()
}

fn cases() -> Vec<Case> {
    let case = |name, window, build| Case {
        name,
        quota: "30/6s".parse().unwrap(),
        window,
        build,
    };
    vec![
        case("FixedWindow", true, |quota, store, clock, skew| {
            node(FixedWindow::builder(quota, store), clock, skew)
        }),
        case("SlidingWindow n=6", true, |quota, store, clock, skew| {
            node(
                SlidingWindow::builder(quota, store).sub_windows(6),
                clock,
                skew,
            )
        }),
        case("TokenBucket", false, |quota, store, clock, skew| {
            node(TokenBucket::builder(quota, store), clock, skew)
        }),
        case("Gcra", false, |quota, store, clock, skew| {
            node(Gcra::builder(quota, store), clock, skew)
        }),
        case("SlidingLog", false, |quota, store, clock, skew| {
            node(SlidingLog::builder(quota, store), clock, skew)
        }),
        case("HybridQuota", false, |quota, store, clock, skew| {
            node(HybridQuota::builder(quota, store), clock, skew)
        }),
    ]
}

/// The most requests admitted in any period of true time, and in all.
async fn run(case: &Case, offsets_ms: [i64; 3], max_skew: Duration) -> (usize, usize) {
    let truth = ManualClock::from_unix_secs(T0);
    let store = Arc::new(MemoryStore::with_clock(truth.clone()));
    let clocks: Vec<ManualClock> = offsets_ms
        .iter()
        .map(|_| ManualClock::from_unix_secs(T0))
        .collect();
    let nodes: Vec<RateLimiter> = clocks
        .iter()
        .map(|clock| (case.build)(case.quota, store.clone(), clock.clone(), max_skew))
        .collect();
    let mut admitted = Vec::new();
    for step in 0..RUN_SECONDS * 1_000 / STEP_MS {
        let now_ms = step * STEP_MS;
        truth.set(at_ms(now_ms));
        for ((node, clock), offset) in nodes.iter().zip(&clocks).zip(offsets_ms) {
            clock.set(at_ms(now_ms + offset));
            if node.check(b"skewed").await.unwrap().is_allowed() {
                admitted.push(now_ms);
            }
        }
    }
    let period_ms = case.quota.period().as_millis() as i64;
    let mut peak = 0;
    let mut first = 0;
    for (last, &at) in admitted.iter().enumerate() {
        while admitted[first] <= at - period_ms {
            first += 1;
        }
        peak = peak.max(last - first + 1);
    }
    (peak, admitted.len())
}

fn at_ms(ms: i64) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp_millis(T0 * 1_000 + ms).unwrap()
}

#[tokio::test]
async fn skew_within_max_clock_skew_stays_within_its_bound() {
    let right = Duration::from_secs(2);
    let too_small = Duration::from_secs(1);
    eprintln!("| algorithm | quota | clocks in step: peak / all | ±1 s, max_clock_skew 2 s | ±1 s, max_clock_skew 1 s | bound |");
    eprintln!("|---|---|---:|---:|---:|---:|");
    for case in cases() {
        let (peak0, all0) = run(&case, IN_STEP, right).await;
        let (peak, all) = run(&case, SKEWED, right).await;
        let (peak_small, all_small) = run(&case, SKEWED, too_small).await;
        let limit = case.quota.limit() as usize;
        let bound = if case.window {
            // A node whose clock lags still counts into a bucket the
            // others have left, for as long as it lags: at most one more
            // window's limit.
            peak0 + limit
        } else {
            // One state, which time only moves forward: the node ahead
            // moves it on early, worth the clocks' greatest difference
            // (2 s) at the rate.
            peak0 + (limit as f64 * 2.0 / case.quota.period().as_secs_f64()).ceil() as usize
        };
        eprintln!(
            "| {} | {} | {peak0} / {all0} | {peak} / {all} | {peak_small} / {all_small} | {bound} |",
            case.name, case.quota
        );
        assert!(peak <= bound, "{}: peak {peak} above {bound}", case.name);
        if case.name.starts_with("SlidingWindow") {
            // The sealed-bucket cache keeps a bucket once it is sealed by
            // the reading node's clock; set below the clocks' real
            // difference, it keeps counts a lagging node still adds to.
            assert!(
                peak < peak_small,
                "max_clock_skew made no difference: {peak} and {peak_small}"
            );
        }
    }
}

#[tokio::test]
async fn items_outlive_their_last_read_by_the_clock_skew() {
    for skew in [1, 5] {
        let clock = ManualClock::from_unix_secs(T0);
        let store = Arc::new(MemoryStore::with_clock(clock.clone()));
        let max_skew = Duration::from_secs(skew);
        let quota = "1/second".parse().unwrap();
        let gcra = node(Gcra::builder(quota, store.clone()), clock.clone(), max_skew);
        let fixed = node(
            FixedWindow::builder(quota, store.clone()),
            clock.clone(),
            max_skew,
        );
        assert!(gcra.check(b"c").await.unwrap().is_allowed());
        assert!(fixed.check(b"c").await.unwrap().is_allowed());
        let mut keys = fixed.keys_at(b"c", clock.now()).unwrap();
        keys.push(common::state_key(&gcra, b"c"));
        // Both are read for 1 s. A process whose clock is `skew` behind
        // still reads them that much later, and a decision may land a
        // deadline (100 ms) after: they live 1 + skew + 0.1 s, in whole
        // seconds, so 1 + skew + 1.
        let held = |keys: Vec<Vec<u8>>| {
            let store = store.clone();
            async move {
                let mut held = 0;
                for key in &keys {
                    held += usize::from(store.get(key).await.unwrap().is_some());
                }
                held
            }
        };
        clock.advance(Duration::from_secs(1 + skew));
        assert_eq!(held(keys.clone()).await, 2, "skew {skew}: gone too early");
        clock.advance(Duration::from_secs(1));
        assert_eq!(held(keys).await, 0, "skew {skew}: kept too long");
    }
}
