//! The results as markdown tables (one per workload) and as CSV files.

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::Path;

use crate::metrics::Metrics;
use crate::suite::Row;
use crate::workload::Workload;

/// Finch's estimate of how many requests a linear limiter of capacity `q`
/// lets through from a client at `a` times the rate before denying one:
/// `q·a/(a − 1)`, for `a > 1`.
pub fn finch(q: f64, a: f64) -> Option<f64> {
    (a > 1.0).then(|| q * a / (a - 1.0))
}

const COLUMNS: [&str; 14] = [
    "algorithm",
    "offered",
    "admitted %",
    "wrongly allowed %",
    "wrongly denied %",
    "over limit %",
    "mean diff/limit %",
    "max diff/limit %",
    "mean diff/exact %",
    "peak/limit",
    "admitted before 1st denial",
    "store ops/decision",
    "keys/decision",
    "keys/client",
];

fn opt(value: Option<f64>, decimals: usize) -> String {
    value.map_or("—".to_owned(), |v| format!("{v:.decimals$}"))
}

fn cells(m: &Metrics, single_client: bool) -> Vec<String> {
    let before = if !single_client {
        "—".to_owned()
    } else {
        m.admitted_before_denial
            .map_or("never denied".to_owned(), |n| n.to_string())
    };
    vec![
        m.offered.to_string(),
        format!("{:.1}", 100.0 * m.admitted as f64 / m.offered.max(1) as f64),
        format!("{:.2}", m.wrongly_allowed_pct),
        format!("{:.2}", m.wrongly_denied_pct),
        format!("{:.2}", m.over_limit_pct),
        format!("{:.2}", m.mean_diff_pct),
        format!("{:.1}", m.max_diff_pct),
        opt(m.mean_rel_pct, 2),
        format!("{:.2}", m.peak),
        before,
        format!("{:.2}", m.ops_per_decision),
        format!("{:.1}", m.keys_per_decision),
        opt(m.keys_per_client, 2),
    ]
}

/// One markdown table per workload, in the order of `workloads`, each under
/// a heading that says what the workload is.
pub fn markdown(workloads: &[Workload], rows: &[Row]) -> String {
    let mut out = String::new();
    for (index, workload) in workloads.iter().enumerate() {
        let _ = writeln!(out, "### {} (`{}`)\n", workload.title, workload.id);
        if let Some(a) = workload.steady_factor {
            let q = workload.quota.limit() as f64;
            match finch(q, a) {
                Some(n) => {
                    let _ = writeln!(
                        out,
                        "Finch's q·a/(a−1) for q = {q}, a = {a}: {n:.1} admitted before the first denial.\n"
                    );
                }
                None => {
                    let _ = writeln!(
                        out,
                        "At a = {a} ≤ 1, Finch's linear limiter never denies.\n"
                    );
                }
            }
        }
        let _ = writeln!(out, "| {} |", COLUMNS.join(" | "));
        let _ = writeln!(out, "|---|{}", "---:|".repeat(COLUMNS.len() - 1));
        for row in rows.iter().filter(|r| r.job.workload == index) {
            let _ = writeln!(
                out,
                "| {} | {} |",
                row.job.algorithm,
                cells(&row.outcome.metrics, workload.single_client()).join(" | ")
            );
        }
        out.push('\n');
    }
    out
}

fn csv_opt<T: ToString>(value: Option<T>) -> String {
    value.map_or(String::new(), |v| v.to_string())
}

/// `results.csv`: one row per algorithm × workload with every metric, and
/// `traces.csv`: the traced client's decisions on each workload that traces
/// one.
pub fn write_csv(dir: &Path, workloads: &[Workload], rows: &[Row]) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    let mut results = String::from(
        "workload,algorithm,sub_windows,clients,nodes,offered,admitted,wrongly_allowed_pct,\
         wrongly_denied_pct,over_limit_pct,mean_diff_pct,max_diff_pct,mean_rel_pct,peak,\
         admitted_before_first_denial,finch,store_ops_per_decision,keys_per_decision,\
         keys_per_client,max_keys_per_client\n",
    );
    let mut traces = String::from("workload,algorithm,client,t_s,estimate,exact,allowed\n");
    for row in rows {
        let workload = &workloads[row.job.workload];
        let m = &row.outcome.metrics;
        let single = workload.single_client();
        let finch = workload
            .steady_factor
            .and_then(|a| finch(workload.quota.limit() as f64, a));
        let _ = writeln!(
            results,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            workload.id,
            row.job.algorithm.id(),
            csv_opt(row.job.algorithm.sub_windows()),
            workload.clients,
            workload.skews.len(),
            m.offered,
            m.admitted,
            m.wrongly_allowed_pct,
            m.wrongly_denied_pct,
            m.over_limit_pct,
            m.mean_diff_pct,
            m.max_diff_pct,
            csv_opt(m.mean_rel_pct),
            m.peak,
            if single {
                csv_opt(m.admitted_before_denial)
            } else {
                String::new()
            },
            csv_opt(finch),
            m.ops_per_decision,
            m.keys_per_decision,
            csv_opt(m.keys_per_client),
            csv_opt(m.max_keys_per_client),
        );
        if let Some(traced) = workload.trace {
            for p in &row.outcome.trace {
                let _ = writeln!(
                    traces,
                    "{},{},{},{},{},{},{}",
                    workload.id,
                    row.job.algorithm.id(),
                    traced.client,
                    p.seconds(),
                    p.estimate,
                    p.exact,
                    p.allowed
                );
            }
        }
    }
    fs::write(dir.join("results.csv"), results)?;
    fs::write(dir.join("traces.csv"), traces)?;
    Ok(())
}
