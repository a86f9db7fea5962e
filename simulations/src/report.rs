//! The results as markdown tables (one per workload, and the caches
//! comparison) and as CSV files.

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::Path;

use crate::algorithms::{Algorithm, Caches, Simulated};
use crate::metrics::Metrics;
use crate::suite::{Row, CACHES_ALGORITHMS, CACHES_WORKLOADS};
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
/// a heading that says what the workload is. Only the rows with the
/// library's default caches ([`Job::is_main`](crate::suite::Job::is_main))
/// are listed.
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
        for row in rows
            .iter()
            .filter(|r| r.job.workload == index && r.job.is_main())
        {
            let _ = writeln!(
                out,
                "| {} | {} |",
                row.job.algorithm.label(),
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

/// Appends one CSV line: the fields of `groups`, in order.
fn csv_line(out: &mut String, groups: &[&[String]]) {
    let fields: Vec<&str> = groups
        .iter()
        .flat_map(|g| g.iter())
        .map(String::as_str)
        .collect();
    let _ = writeln!(out, "{}", fields.join(","));
}

/// The columns both CSV files start with: `workload,algorithm,sub_windows`.
fn csv_job(workload: &Workload, row: &Row) -> [String; 3] {
    [
        workload.id.clone(),
        row.job.algorithm.id(),
        csv_opt(row.job.algorithm.sub_windows()),
    ]
}

/// The run and its errors, in both CSV files:
/// `nodes,offered,admitted,wrongly_allowed_pct,wrongly_denied_pct,over_limit_pct,mean_diff_pct,max_diff_pct`.
fn csv_accuracy(workload: &Workload, m: &Metrics) -> [String; 8] {
    [
        workload.skews.len().to_string(),
        m.offered.to_string(),
        m.admitted.to_string(),
        m.wrongly_allowed_pct.to_string(),
        m.wrongly_denied_pct.to_string(),
        m.over_limit_pct.to_string(),
        m.mean_diff_pct.to_string(),
        m.max_diff_pct.to_string(),
    ]
}

/// The store's work, in both CSV files:
/// `store_ops_per_decision,keys_per_decision,keys_per_client`.
fn csv_costs(m: &Metrics) -> [String; 3] {
    [
        m.ops_per_decision.to_string(),
        m.keys_per_decision.to_string(),
        csv_opt(m.keys_per_client),
    ]
}

/// `results.csv`: one row per algorithm × workload with every metric, and
/// `traces.csv`: the traced client's decisions on each workload that traces
/// one, both with the library's default caches; `caches.csv`: the caches
/// comparison ([`caches_rows`]) with every metric.
pub fn write_csv(dir: &Path, workloads: &[Workload], rows: &[Row]) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    let mut results = String::from(
        "workload,algorithm,sub_windows,clients,nodes,offered,admitted,wrongly_allowed_pct,\
         wrongly_denied_pct,over_limit_pct,mean_diff_pct,max_diff_pct,mean_rel_pct,peak,\
         admitted_before_first_denial,finch,store_ops_per_decision,keys_per_decision,\
         keys_per_client,max_keys_per_client\n",
    );
    let mut traces = String::from("workload,algorithm,client,t_s,estimate,exact,allowed\n");
    for row in rows.iter().filter(|r| r.job.is_main()) {
        let workload = &workloads[row.job.workload];
        let m = &row.outcome.metrics;
        let single = workload.single_client();
        let finch = workload
            .steady_factor
            .and_then(|a| finch(workload.quota.limit() as f64, a));
        let before = if single {
            csv_opt(m.admitted_before_denial)
        } else {
            String::new()
        };
        csv_line(
            &mut results,
            &[
                &csv_job(workload, row),
                &[workload.clients.to_string()],
                &csv_accuracy(workload, m),
                &[
                    csv_opt(m.mean_rel_pct),
                    m.peak.to_string(),
                    before,
                    csv_opt(finch),
                ],
                &csv_costs(m),
                &[csv_opt(m.max_keys_per_client)],
            ],
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
    fs::write(dir.join("caches.csv"), caches_csv(workloads, rows))?;
    Ok(())
}

/// The rows of the caches comparison, in table order: workload by workload
/// ([`CACHES_WORKLOADS`]), algorithm by algorithm ([`CACHES_ALGORITHMS`]),
/// each with its [`Caches::variants`]. Combinations missing from `rows`
/// are skipped.
pub fn caches_rows<'a>(workloads: &[Workload], rows: &'a [Row]) -> Vec<&'a Row> {
    let mut picked = Vec::new();
    for id in CACHES_WORKLOADS {
        let Some(index) = workloads.iter().position(|w| w.id == id) else {
            continue;
        };
        for algorithm in CACHES_ALGORITHMS {
            for caches in Caches::variants(algorithm) {
                let caches = caches.for_algorithm(algorithm);
                if let Some(row) = rows.iter().find(|r| {
                    r.job.workload == index
                        && r.job.algorithm == algorithm
                        && r.job.caches == caches
                }) {
                    picked.push(row);
                }
            }
        }
    }
    picked
}

const CACHES_COLUMNS: [&str; 9] = [
    "workload",
    "algorithm",
    "caches",
    "wrongly allowed %",
    "wrongly denied %",
    "over limit %",
    "peak/limit",
    "store ops/decision",
    "keys/decision",
];

/// The caches comparison as one markdown table: each algorithm of
/// [`CACHES_ALGORITHMS`] on each workload of [`CACHES_WORKLOADS`], with no
/// cache, with the library's defaults (the sliding window's sealed-bucket
/// cache) and with a [`DenyCache`](memcache_ratelimit::DenyCache) as well.
/// Empty if no such workload was run.
pub fn caches_markdown(workloads: &[Workload], rows: &[Row]) -> String {
    let picked = caches_rows(workloads, rows);
    if picked.is_empty() {
        return String::new();
    }
    let mut out = String::from("### In-process caches (`caches.csv`)\n\n");
    let _ = writeln!(out, "| {} |", CACHES_COLUMNS.join(" | "));
    let _ = writeln!(
        out,
        "|---|---|---|{}",
        "---:|".repeat(CACHES_COLUMNS.len() - 3)
    );
    for row in picked {
        let m = &row.outcome.metrics;
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            workloads[row.job.workload].id,
            row.job.algorithm.label(),
            caches_label(row.job.algorithm, row.job.caches),
            m.wrongly_allowed_pct,
            m.wrongly_denied_pct,
            m.over_limit_pct,
            m.peak,
            m.ops_per_decision,
            m.keys_per_decision,
        );
    }
    out.push('\n');
    out
}

/// The caches column: what the limiter ran with, and which of those rows is
/// the library's default.
fn caches_label(algorithm: Algorithm, caches: Caches) -> String {
    if caches == Caches::DEFAULT.for_algorithm(algorithm) {
        format!("{caches} (default)")
    } else {
        caches.to_string()
    }
}

fn caches_csv(workloads: &[Workload], rows: &[Row]) -> String {
    let mut csv = String::from(
        "workload,algorithm,sub_windows,caches,sealed_cache,deny_cache,nodes,offered,admitted,\
         wrongly_allowed_pct,wrongly_denied_pct,over_limit_pct,mean_diff_pct,max_diff_pct,peak,\
         store_ops_per_decision,keys_per_decision,keys_per_client\n",
    );
    for row in caches_rows(workloads, rows) {
        let workload = &workloads[row.job.workload];
        let m = &row.outcome.metrics;
        let caches = row.job.caches;
        csv_line(
            &mut csv,
            &[
                &csv_job(workload, row),
                &[
                    caches.id().to_owned(),
                    caches.sealed.to_string(),
                    caches.deny.to_string(),
                ],
                &csv_accuracy(workload, m),
                &[m.peak.to_string()],
                &csv_costs(m),
            ],
        );
    }
    csv
}
