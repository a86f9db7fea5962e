//! The sliding window's accuracy and cost against its number of
//! sub-windows (`sub-windows-table.md`), averaged over every workload of
//! the run: the reason for the library's default of four.

use std::fmt::Write as _;

use super::main_row;
use crate::algorithms::{Algorithm, SUB_WINDOWS};
use crate::suite::Row;
use crate::workload::Workload;

/// The table in Markdown, or `None` when this run lacks a sliding window.
pub fn markdown(workloads: &[Workload], rows: &[Row]) -> Option<String> {
    let mut out = String::from(
        "| sub-windows `n` | mean \\|estimate − exact\\| / exact % | mean \\|estimate − exact\\| / limit % \
         | over limit % | keys per decision | live keys per client |\n\
         |---:|---:|---:|---:|---:|---:|\n"
    );
    for &n in SUB_WINDOWS.iter() {
        let metrics: Vec<_> = workloads
            .iter()
            .filter_map(|w| {
                main_row(
                    workloads,
                    rows,
                    &w.id,
                    Algorithm::SlidingWindow { sub_windows: n },
                )
            })
            .map(|row| &row.outcome.metrics)
            .collect();
        if metrics.is_empty() {
            return None;
        }
        let mean = |values: Vec<f64>| values.iter().sum::<f64>() / values.len().max(1) as f64;
        let _ = writeln!(
            out,
            "| {n} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            mean(metrics.iter().filter_map(|m| m.mean_rel_pct).collect()),
            mean(metrics.iter().map(|m| m.mean_diff_pct).collect()),
            mean(metrics.iter().map(|m| m.over_limit_pct).collect()),
            mean(metrics.iter().map(|m| m.keys_per_decision).collect()),
            mean(metrics.iter().filter_map(|m| m.keys_per_client).collect()),
        );
    }
    let _ = writeln!(
        out,
        "\nEach figure is the mean, over the run's {} workloads, of that workload's \
         figure in the default mode (denied requests refunded), with the sealed-bucket \
         cache on.",
        workloads.len()
    );
    Some(out)
}
