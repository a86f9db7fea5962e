//! The estimators comparison: every estimator at every sub-window count
//! on every workload in both modes, one well-formed table, and the moment
//! estimator closer to the exact count than the uniform rule where the
//! traffic is bursty.

use memcache_ratelimit::algorithm::Estimator;
use simulations::algorithms::{Algorithm, DeniedRequests};
use simulations::estimators::{self, Estimated, ESTIMATORS, SUB_WINDOWS};
use simulations::suite;
use simulations::workload::{self, SourcesSpec};

#[test]
fn the_comparison_covers_every_case_and_the_moments_are_closer_on_bursts() {
    let workloads = estimators::traced(vec![
        workload::on_off(5, 6, 5.0, 10, 40, 6),
        workload::sources(5, &SourcesSpec::new(2_000, 4)),
    ]);
    let jobs = estimators::jobs(&workloads, 0);
    let rows = estimators::run(&workloads, &jobs, 2, &|_| {}).unwrap();
    assert_eq!(
        rows.len(),
        workloads.len() * SUB_WINDOWS.len() * ESTIMATORS.len() * 2
    );
    let table = estimators::markdown(&workloads, &rows);
    let lines: Vec<&str> = table.lines().filter(|l| l.starts_with("| ")).collect();
    // Per mode: a header and a line per workload and sub-window count.
    assert_eq!(lines.len(), 2 * (1 + workloads.len() * SUB_WINDOWS.len()));
    assert!(!table.contains('–'), "every cell measured:\n{table}");

    let mean_rel = |estimator: Estimator, n: u32| {
        let row = rows
            .iter()
            .find(|row| {
                workloads[row.workload].id == "on-off"
                    && row.denied == DeniedRequests::Refunded
                    && row.limiter
                        == Estimated {
                            sub_windows: n,
                            estimator,
                        }
            })
            .unwrap();
        row.outcome.metrics.mean_rel_pct.unwrap()
    };
    for n in [4, 12] {
        let (uniform, moment) = (
            mean_rel(Estimator::Uniform, n),
            mean_rel(Estimator::Moment, n),
        );
        assert!(moment < uniform, "n={n}: moment {moment} uniform {uniform}");
    }
    // The summary: a line per sub-window count and measure, each counting
    // the workloads on which the moment estimator errs no more.
    let summary = estimators::summary(&workloads, &rows).unwrap();
    let counts = summary.lines().filter(|l| l.ends_with(" of 2 |")).count();
    assert_eq!(counts, SUB_WINDOWS.len() * 3, "{summary}");
    // The traced bursty client gives a figure for n = 1 and one for n = 4,
    // each with a panel per estimator.
    let dir = std::env::temp_dir().join(format!("estimator-figures-{}", std::process::id()));
    let figures = estimators::figures(&dir, &workloads, &rows).unwrap();
    assert_eq!(figures.len(), 2, "{figures:?}");
    for figure in &figures {
        let svg = std::fs::read_to_string(figure).unwrap();
        assert!(
            svg.contains("uniform") && svg.contains("moment"),
            "{figure:?}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The main suite's sliding windows stand in for the comparison's uniform
/// runs on the main workloads: they decide exactly as the uniform rule's
/// own runs do, in both modes.
#[test]
fn the_main_suites_sliding_windows_are_the_uniform_runs() {
    let workloads = vec![workload::on_off(5, 6, 5.0, 10, 40, 6)];
    let algorithms = [Algorithm::SlidingWindow { sub_windows: 4 }];
    let jobs = suite::jobs(&workloads, &algorithms);
    let suite_rows = suite::run(&workloads, &jobs, 2, &|_| {}).unwrap();
    let reused = estimators::from_suite(&suite_rows);
    assert_eq!(reused.len(), 2);
    let again: Vec<estimators::Job> = reused
        .iter()
        .map(|row| (row.workload, row.limiter, row.denied))
        .collect();
    let fresh = estimators::run(&workloads, &again, 2, &|_| {}).unwrap();
    for (reused, fresh) in reused.iter().zip(&fresh) {
        assert_eq!(reused.limiter.estimator, Estimator::Uniform);
        assert_eq!(reused.outcome.metrics, fresh.outcome.metrics);
        assert_eq!(reused.outcome.strict, fresh.outcome.strict);
    }
}
