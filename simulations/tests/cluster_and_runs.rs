//! Several limiter nodes on one store, and the runs themselves:
//! deterministic, whatever the threads.

use std::time::Duration;

use simulations::algorithms::{self, Algorithm, Caches};
use simulations::runner;
use simulations::suite;
use simulations::workload::{self, Scale};

const SEED: u64 = 3;

/// Nodes whose clocks agree, sharing one store, decide exactly as one node:
/// the state is all in the store. Without in-process caches even the store
/// work is the same; with the library's default caches each node reads
/// each sealed bucket once for itself (the sliding window), and a
/// compare-and-swap node's known state is stale whenever another node
/// wrote last, so it reads again: only the store work per decision
/// differs.
#[test]
fn a_cluster_in_agreement_decides_as_one_node() {
    let cluster = workload::cluster(SEED, 3, Duration::ZERO, 3, 5);
    assert!(cluster.requests.iter().any(|r| r.node != 0));
    let mut single = cluster.clone();
    single.skews = vec![0];
    for request in &mut single.requests {
        request.node = 0;
    }
    for algorithm in algorithms::all() {
        let run = |workload, caches| {
            runner::run_with(workload, algorithm, caches, &|_| {})
                .unwrap()
                .metrics
        };
        assert_eq!(
            run(&cluster, Caches::NONE),
            run(&single, Caches::NONE),
            "{algorithm}"
        );
        let (mut many, one) = (
            run(&cluster, Caches::DEFAULT),
            run(&single, Caches::DEFAULT),
        );
        assert!(
            many.keys_per_decision >= one.keys_per_decision,
            "{algorithm}"
        );
        assert!(many.ops_per_decision >= one.ops_per_decision, "{algorithm}");
        many.keys_per_decision = one.keys_per_decision;
        many.ops_per_decision = one.ops_per_decision;
        assert_eq!(many, one, "{algorithm}");
    }
}

/// Clock skew between nodes is the one thing that breaks the sliding log's
/// exactness: each node judges the window by its own clock.
#[test]
fn skew_breaks_exactness() {
    let run = |skew| {
        let workload = workload::cluster(SEED, 3, skew, 3, 5);
        runner::run(&workload, Algorithm::SlidingLog, &|_| {})
            .unwrap()
            .metrics
    };
    assert_eq!(run(Duration::ZERO).wrongly_allowed_pct, 0.0);
    assert!(run(Duration::from_secs(1)).wrongly_allowed_pct > 0.0);
}

/// The same seed gives the same workloads and the same results, on one
/// thread or two; another seed gives other traffic.
#[test]
fn runs_are_deterministic() {
    let small = Scale {
        clients: 2,
        minutes: 4,
        steady_minutes: 2,
        population: 200,
        population_minutes: 2,
        sources: 500,
        sources_minutes: 2,
        cluster_clients: 2,
        cluster_minutes: 2,
    };
    let workloads = workload::all(SEED, small);
    let again = workload::all(SEED, small);
    for (a, b) in workloads.iter().zip(&again) {
        assert_eq!(a.requests, b.requests, "{}", a.id);
    }
    let other = workload::all(SEED + 1, small);
    assert_ne!(workloads[0].requests, other[0].requests);

    let algorithms = [
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow { sub_windows: 4 },
        Algorithm::TokenBucket { capacity: None },
        Algorithm::HybridQuota,
    ];
    let jobs = suite::jobs(&workloads, &algorithms);
    let one = suite::run(&workloads, &jobs, 1, &|_| {}).unwrap();
    let two = suite::run(&workloads, &jobs, 2, &|_| {}).unwrap();
    assert_eq!(one.len(), jobs.len());
    assert!(jobs.iter().any(|job| job.is_strict()));
    for (a, b) in one.iter().zip(&two) {
        assert_eq!(a.job, b.job);
        assert_eq!(a.outcome.metrics, b.outcome.metrics, "{:?}", a.job);
        assert_eq!(a.outcome.strict, b.outcome.strict, "{:?}", a.job);
        assert_eq!(a.outcome.strict.is_some(), a.job.is_strict());
    }
}
