//! The Markdown that the project's documentation shows from this run, one
//! file per table, written to the `--out` directory so that no figure in
//! the documentation is typed by hand:
//!
//! - `results.md`: the whole report that the run prints (committed as
//!   `simulations/RESULTS.md`);
//! - `algorithm-table.md`: the README's table of the algorithms;
//! - `choose-table.md`: the table that helps choose an algorithm, in the
//!   simulations guide;
//! - `cloudflare-table.md`: this run beside Cloudflare's published figures;
//! - `sub-windows-table.md`: the sliding window's accuracy and cost against
//!   its number of sub-windows, the reason for the default.
//!
//! `scripts/generated-docs --write` copies each into the document that
//! shows it, between markers naming the file; `--check` (a CI step after
//! the full run) fails if any differs.

pub mod algorithm_table;
pub mod choose_table;
pub mod cloudflare_table;
pub mod sub_windows_table;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::algorithms::Algorithm;
use crate::suite::Row;
use crate::workload::Workload;

/// The main (default-mode, default caches) row of `algorithm` on the
/// workload whose id is `workload`, if this run has it.
pub fn main_row<'a>(
    workloads: &[Workload],
    rows: &'a [Row],
    workload: &str,
    algorithm: Algorithm,
) -> Option<&'a Row> {
    let index = workloads.iter().position(|w| w.id == workload)?;
    rows.iter()
        .find(|r| r.job.is_main() && r.job.workload == index && r.job.algorithm == algorithm)
}

/// Writes `report` as `results.md` and every table this run has the
/// workloads for into `out`; returns the paths written. A quick run lacks
/// some workloads, so some tables may be missing from it.
pub fn write_all(
    out: &Path,
    report: &str,
    workloads: &[Workload],
    rows: &[Row],
) -> io::Result<Vec<PathBuf>> {
    let tables = [
        ("results.md", Some(report.to_owned())),
        (
            "algorithm-table.md",
            algorithm_table::markdown(workloads, rows),
        ),
        ("choose-table.md", choose_table::markdown(workloads, rows)),
        (
            "cloudflare-table.md",
            cloudflare_table::markdown(workloads, rows),
        ),
        (
            "sub-windows-table.md",
            sub_windows_table::markdown(workloads, rows),
        ),
    ];
    let mut written = Vec::new();
    for (name, table) in tables {
        if let Some(table) = table {
            let path = out.join(name);
            fs::write(&path, table)?;
            written.push(path);
        }
    }
    Ok(written)
}
