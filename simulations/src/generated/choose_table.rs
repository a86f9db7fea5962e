//! The table that helps choose an algorithm (`choose-table.md`): each
//! algorithm's contract, its accuracy on random traffic around the limit
//! (`poisson-1.1x`), its store cost there, and how far bursts (`on-off`)
//! and the boundary attack (`boundary`) push it over the limit.

use std::fmt::Write as _;

use super::main_row;
use crate::algorithms::Algorithm;
use crate::suite::Row;
use crate::workload::Workload;

/// The rows: an algorithm and the contract it enforces.
const ROWS: [(Algorithm, &str); 9] = [
    (
        Algorithm::SlidingWindow { sub_windows: 1 },
        "`SlidingWindow` n = 1 | about `limit` per period, estimated",
    ),
    (
        Algorithm::SlidingWindow { sub_windows: 4 },
        "`SlidingWindow` n = 4 (the default) | the same, finer",
    ),
    (
        Algorithm::SlidingWindow { sub_windows: 12 },
        "`SlidingWindow` n = 12 | the same, finer",
    ),
    (
        Algorithm::SlidingWindow { sub_windows: 60 },
        "`SlidingWindow` n = 60 | the same, finer",
    ),
    (
        Algorithm::FixedWindow,
        "`FixedWindow` | `limit` per calendar window",
    ),
    (
        Algorithm::TokenBucket { capacity: None },
        "`TokenBucket` | `capacity + rate·t` in any span `t`",
    ),
    (
        Algorithm::Gcra { burst: None },
        "`Gcra` | `burst + rate·t` in any span `t`",
    ),
    (
        Algorithm::SlidingLog,
        "`SlidingLog` | exactly `limit` in every period",
    ),
    (
        Algorithm::HybridQuota,
        "`HybridQuota` | bursty, then the even rate",
    ),
];

/// The table in Markdown, or `None` when this run lacks one of its
/// workloads or algorithms.
pub fn markdown(workloads: &[Workload], rows: &[Row]) -> Option<String> {
    let mut out = String::from(
        "| algorithm | contract | `poisson-1.1x`: over limit %, peak / limit, \
         mean \\|est − exact\\| / limit % | store ops / decision, live keys / client \
         | `on-off` bursts: over limit %, peak / limit | `boundary` attack: peak / limit \
         | steady client at 1.1×: admitted before the first denial |\n\
         |---|---|---|---|---|---:|---:|\n",
    );
    for (algorithm, what) in ROWS {
        let metrics = |workload| {
            main_row(workloads, rows, workload, algorithm).map(|row| &row.outcome.metrics)
        };
        let poisson = metrics("poisson-1.1x")?;
        let bursts = metrics("on-off")?;
        let boundary = metrics("boundary")?;
        let steady = metrics("steady-1.1x")?;
        let _ = writeln!(
            out,
            "| {what} | {:.2}, {:.2}, {:.2} | {:.2}, {} | {:.2}, {:.2} | {:.2} | {} |",
            poisson.over_limit_pct,
            poisson.peak,
            poisson.mean_diff_pct,
            poisson.ops_per_decision,
            poisson
                .keys_per_client
                .map_or("—".to_owned(), |v| format!("{v:.2}")),
            bursts.over_limit_pct,
            bursts.peak,
            boundary.peak,
            steady
                .admitted_before_denial
                .map_or("never denied".to_owned(), |n| n.to_string()),
        );
    }
    Some(out)
}
