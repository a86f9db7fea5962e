//! The README's table of the algorithms (`algorithm-table.md`): what each
//! is for, its store work, and its accuracy and cost as this run measured
//! them on the `sources` workload.

use std::fmt::Write as _;

use super::main_row;
use crate::algorithms::Algorithm;
use crate::report::strict_of;
use crate::suite::Row;
use crate::workload::Workload;

/// The workload the table's figures come from.
pub const WORKLOAD: &str = "sources";

/// The rows: an algorithm, what it is for, and its store work per decision.
const ROWS: [(Algorithm, &str, &str); 8] = [
    (
        Algorithm::SlidingWindow { sub_windows: 4 },
        "the default (`SlidingWindow`, 4 sub-windows): about `limit` per period",
        "1 increment + 4 reads, one round trip",
    ),
    (
        Algorithm::SlidingWindow { sub_windows: 1 },
        "`SlidingWindow` with 1 sub-window: Cloudflare's rule",
        "1 increment + 1 read, one round trip",
    ),
    (
        Algorithm::SlidingWindow { sub_windows: 12 },
        "`SlidingWindow` with 12 sub-windows: closer, more keys",
        "1 increment + 12 reads, one round trip",
    ),
    (
        Algorithm::FixedWindow,
        "`FixedWindow`: gross overuse, as cheaply as possible",
        "1 increment",
    ),
    (
        Algorithm::TokenBucket { capacity: None },
        "`TokenBucket`: a rate with a burst",
        "1 compare-and-swap write, after 1 read unless the state is known",
    ),
    (
        Algorithm::Gcra { burst: None },
        "`Gcra`: the same as one number per client; can queue",
        "1 compare-and-swap write, after 1 read unless the state is known",
    ),
    (
        Algorithm::SlidingLog,
        "`SlidingLog`: small limits, exact over every window",
        "1 compare-and-swap write of up to `limit` timestamps, after 1 read unless the state is known",
    ),
    (
        Algorithm::HybridQuota,
        "`HybridQuota`: bursty when quiet, an even rate after",
        "1 compare-and-swap write, after 1 read unless the state is known",
    ),
];

/// The table in Markdown, or `None` when this run has no `sources`
/// workload.
pub fn markdown(workloads: &[Workload], rows: &[Row]) -> Option<String> {
    let mut out = String::from(
        "| algorithm | store work per decision | wrongly allowed % | wrongly denied % \
         | mean \\|estimate − exact\\| / exact % | store round trips per decision \
         | keys per decision | live keys per client |\n|---|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for (algorithm, what, work) in ROWS {
        let row = main_row(workloads, rows, WORKLOAD, algorithm)?;
        let strict = strict_of(rows, row)?;
        let m = &row.outcome.metrics;
        let _ = writeln!(
            out,
            "| {what} | {work} | {:.3} | {:.3} | {} | {:.2} | {:.1} | {} |",
            strict.wrongly_allowed_pct,
            strict.wrongly_denied_pct,
            strict
                .mean_rel_pct
                .map_or("—".to_owned(), |v| format!("{v:.2}")),
            m.ops_per_decision,
            m.keys_per_decision,
            m.keys_per_client
                .map_or("—".to_owned(), |v| format!("{v:.2}")),
        );
    }
    Some(out)
}
