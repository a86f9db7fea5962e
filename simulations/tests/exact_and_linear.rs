//! The sliding log is exact; the token bucket and GCRA are linear limiters
//! with a burst, slow to throttle a moderately abusive client (Finch); the
//! hybrid quota reacts within one period.

use simulations::algorithms::{self, Algorithm, Caches};
use simulations::metrics::Metrics;
use simulations::report::finch;
use simulations::runner;
use simulations::workload::{self, Workload};

const SEED: u64 = 11;

fn metrics(workload: &Workload, algorithm: Algorithm) -> Metrics {
    runner::run(workload, algorithm, &|_| {})
        .expect("the embedded store never fails")
        .metrics
}

fn mixed() -> Vec<Workload> {
    vec![
        workload::poisson(SEED, 1.5, 3, 15),
        workload::on_off(SEED, 3, 5.0, 10, 40, 15),
        workload::boundary_attack(10),
        workload::steady(2.0, 5),
        workload::population(SEED, 300, 1.0, 5.0, 5),
        workload::cluster(SEED, 3, std::time::Duration::ZERO, 3, 5),
    ]
}

/// The sliding log decides exactly as the exact sliding window, and its
/// count is the exact count, on every workload whose clocks agree.
#[test]
fn sliding_log_is_exact() {
    for workload in mixed() {
        let m = metrics(&workload, Algorithm::SlidingLog);
        assert_eq!(m.wrongly_allowed_pct, 0.0, "{}", workload.id);
        assert_eq!(m.wrongly_denied_pct, 0.0, "{}", workload.id);
        assert_eq!(m.over_limit_pct, 0.0, "{}", workload.id);
        assert_eq!(m.max_diff_pct, 0.0, "{}", workload.id);
        assert!(m.peak <= 1.0, "{}", workload.id);
    }
}

/// A linear limiter admits at most `capacity + rate·t` in any span `t`:
/// twice the limit in one period, with the capacity equal to the limit.
#[test]
fn linear_limiters_admit_at_most_capacity_plus_rate_times_period() {
    for workload in mixed() {
        for algorithm in [
            Algorithm::TokenBucket { capacity: None },
            Algorithm::Gcra { burst: None },
        ] {
            let m = metrics(&workload, algorithm);
            assert!(m.peak <= 2.0, "{algorithm} on {}: {}", workload.id, m.peak);
        }
    }
}

/// A bucket that starts full lets a client at `a` times the rate through
/// `⌊(q−1)·a/(a−1)⌋ + 1` requests before the first denial, just under
/// Finch's `q·a/(a−1)`.
#[test]
fn linear_limiters_react_as_finch_says() {
    let q = 100.0;
    for a in [1.1, 1.5, 2.0, 4.0] {
        let workload = workload::steady(a, 20);
        let expected = ((q - 1.0) * a / (a - 1.0) + 1e-9).floor() as u64 + 1;
        for algorithm in [
            Algorithm::TokenBucket { capacity: None },
            Algorithm::Gcra { burst: None },
        ] {
            let before = metrics(&workload, algorithm).admitted_before_denial;
            assert_eq!(before, Some(expected), "{algorithm} at {a}×");
            assert!(expected as f64 <= finch(q, a).unwrap());
        }
    }
}

/// GCRA behaves as a token bucket whose capacity is its burst.
#[test]
fn gcra_decides_as_the_token_bucket() {
    for workload in mixed() {
        let bucket = metrics(&workload, Algorithm::TokenBucket { capacity: None });
        let gcra = metrics(&workload, Algorithm::Gcra { burst: None });
        assert_eq!(bucket.admitted, gcra.admitted, "{}", workload.id);
        assert_eq!(
            bucket.wrongly_allowed_pct, gcra.wrongly_allowed_pct,
            "{}",
            workload.id
        );
        assert_eq!(bucket.peak, gcra.peak, "{}", workload.id);
        assert!(
            (bucket.mean_diff_pct - gcra.mean_diff_pct).abs() < 1e-6,
            "{}",
            workload.id
        );
    }
}

/// The hybrid quota lets a new client burst its whole quota and then holds
/// it to the rate from the end of its window: a steady abuser is denied
/// after exactly `q` requests, whatever its rate, and never gets more than
/// `q + 1` in a period. A bursty client's window is a fixed window of its
/// own, so like the fixed window it may see up to twice the quota in one
/// period.
#[test]
fn hybrid_quota_reacts_within_one_period() {
    for a in [1.1, 1.5, 2.0, 4.0] {
        let m = metrics(&workload::steady(a, 10), Algorithm::HybridQuota);
        assert_eq!(m.admitted_before_denial, Some(100), "{a}×");
        assert!(m.peak <= 1.01, "{a}×: {}", m.peak);
    }
    for workload in mixed() {
        let m = metrics(&workload, Algorithm::HybridQuota);
        assert!(m.peak <= 2.0, "{}: {}", workload.id, m.peak);
    }
}

/// A steady client under the limit is never denied, by any algorithm.
#[test]
fn no_algorithm_denies_a_steady_client_under_the_limit() {
    for factor in [0.5, 0.9] {
        let workload = workload::steady(factor, 5);
        for algorithm in algorithms::all() {
            let m = metrics(&workload, algorithm);
            assert_eq!(m.admitted, m.offered, "{algorithm} at {factor}×");
            assert_eq!(m.admitted_before_denial, None, "{algorithm} at {factor}×");
        }
    }
}

/// The compare-and-swap algorithms read and write one key per decision
/// (a denial only reads), and keep one key per client. With their known
/// states (the default), an allowed decision after one that left the state
/// known skips the read: one store call per decision, but the first.
#[test]
fn compare_and_swap_algorithms_keep_one_key() {
    let workload = workload::steady(2.0, 5);
    for algorithm in [
        Algorithm::TokenBucket { capacity: None },
        Algorithm::Gcra { burst: None },
        Algorithm::SlidingLog,
        Algorithm::HybridQuota,
    ] {
        let m = runner::run_with(&workload, algorithm, Caches::NONE, &|_| {})
            .unwrap()
            .metrics;
        let admitted = m.admitted as f64 / m.offered as f64;
        assert!(
            (m.ops_per_decision - (1.0 + admitted)).abs() < 1e-9,
            "{algorithm}: {m:?}"
        );
        let known = metrics(&workload, algorithm);
        assert_eq!(known.admitted, m.admitted, "{algorithm}");
        let first = 1.0 / m.offered as f64;
        assert!(
            (known.ops_per_decision - (1.0 + first)).abs() < 1e-9,
            "{algorithm}: {known:?}"
        );
        assert_eq!(m.max_keys_per_client, Some(1.0), "{algorithm}");
    }
}
