//! The results as markdown tables (one per workload, and the caches
//! comparison) and as CSV files.

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::Path;

use crate::algorithms::{Algorithm, Caches, DeniedRequests, Simulated};
use crate::metrics::Metrics;
use crate::strict::{Profile, StrictMetrics};
use crate::suite::{Row, CACHES_ALGORITHMS, CACHES_WORKLOADS};
use crate::workload::Workload;

/// Finch's estimate of how many requests a linear limiter of capacity `q`
/// lets through from a client at `a` times the rate before denying one:
/// `q·a/(a − 1)`, for `a > 1`.
pub fn finch(q: f64, a: f64) -> Option<f64> {
    (a > 1.0).then(|| q * a / (a - 1.0))
}

const COLUMNS: [&str; 19] = [
    "algorithm",
    "offered",
    "admitted %",
    "wrongly allowed %",
    "wrongly denied %",
    "over limit %",
    "mean diff/limit %",
    "max diff/limit %",
    "mean diff/exact %",
    "strict wrongly allowed %",
    "strict wrongly denied %",
    "strict mean diff/exact %",
    "strict sources missed",
    "strict sources wrongly limited",
    "peak/limit",
    "admitted before 1st denial",
    "store ops/decision",
    "keys/decision",
    "keys/client",
];

fn opt(value: Option<f64>, decimals: usize) -> String {
    value.map_or("—".to_owned(), |v| format!("{v:.decimals$}"))
}

/// The strict-mode cells: Cloudflare's measure, or dashes if the row has
/// no strict-mode run. Shares of requests get three decimals, since
/// Cloudflare's own figure is 0.003%.
fn strict_cells(strict: Option<&StrictMetrics>) -> Vec<String> {
    let Some(s) = strict else {
        return vec!["—".to_owned(); 5];
    };
    let missed = match s.sources_missed_max_peak {
        Some(peak) => format!("{} (≤ {peak:.2}×)", s.sources_missed),
        None => s.sources_missed.to_string(),
    };
    vec![
        format!("{:.3}", s.wrongly_allowed_pct),
        format!("{:.3}", s.wrongly_denied_pct),
        opt(s.mean_rel_pct, 2),
        missed,
        s.sources_wrongly_limited.to_string(),
    ]
}

fn cells(m: &Metrics, strict: Option<&StrictMetrics>, single_client: bool) -> Vec<String> {
    let before = if !single_client {
        "—".to_owned()
    } else {
        m.admitted_before_denial
            .map_or("never denied".to_owned(), |n| n.to_string())
    };
    let mut cells = vec![
        m.offered.to_string(),
        format!("{:.1}", 100.0 * m.admitted as f64 / m.offered.max(1) as f64),
        format!("{:.2}", m.wrongly_allowed_pct),
        format!("{:.2}", m.wrongly_denied_pct),
        format!("{:.2}", m.over_limit_pct),
        format!("{:.2}", m.mean_diff_pct),
        format!("{:.1}", m.max_diff_pct),
        opt(m.mean_rel_pct, 2),
    ];
    cells.extend(strict_cells(strict));
    cells.extend([
        format!("{:.2}", m.peak),
        before,
        format!("{:.2}", m.ops_per_decision),
        format!("{:.1}", m.keys_per_decision),
        opt(m.keys_per_client, 2),
    ]);
    cells
}

/// The strict-mode run of the main row `row`: the same algorithm on the
/// same workload, denied requests counted ([`Job::is_strict`](crate::suite::Job::is_strict)).
pub fn strict_of<'a>(rows: &'a [Row], row: &Row) -> Option<&'a StrictMetrics> {
    rows.iter()
        .find(|r| {
            r.job.is_strict()
                && r.job.workload == row.job.workload
                && r.job.algorithm == row.job.algorithm
        })
        .and_then(|r| r.outcome.strict.as_ref())
}

/// What every column of the per-workload tables means, printed once above
/// them.
pub const NOTES: &str = "\
Each algorithm runs every workload twice, with the library's default caches: \
with denied requests refunded (the library's default) and in strict mode \
(denied requests counted, `DeniedRequests::Counted`); the decisions counted \
above include both runs. `L` is the limit, `P` the period, `t` the request's \
time, the estimate is `Decision::used()` right after the decision.

The project's measure, in the default mode, against an independent exact \
sliding-window limiter fed the same requests (its admitted history can drift \
from the algorithm's, so one early disagreement can be counted again later):

- **admitted %**: requests the algorithm allowed, % of requests offered;
- **wrongly allowed %** / **wrongly denied %**: requests the algorithm allowed \
and the exact limiter denied / denied and the exact limiter allowed, % of requests;
- **over limit %**: requests allowed although the algorithm's own admissions \
in `(t − P, t]`, this one included, exceed `L`, % of requests;
- **mean diff/limit %** / **max diff/limit %**: mean / max over decisions of \
`|estimate − exact| / L`, exact = the algorithm's own admissions in `(t − P, t]`;
- **mean diff/exact %**: mean of `|estimate − exact| / exact` over the decisions \
with exact ≥ 1.

Cloudflare's measure (Julien Desgats, \"How we built rate limiting capable of \
scaling to millions of domains\", Cloudflare blog, 2017, \
<https://blog.cloudflare.com/counting-things-a-lot-of-different-things/>), \
in strict mode, against `a` = the exact count of all the client's requests in \
`(t − P, t]`, this one included, admitted or not; the right answer is to \
allow if and only if `a ≤ L`, and both sides see the same requests:

- **strict wrongly allowed %** / **strict wrongly denied %**: requests allowed \
with `a > L` / denied with `a ≤ L`, % of requests;
- **strict mean diff/exact %**: mean over every decision of `|estimate − a| / a` \
(`a ≥ 1`, since it counts the request itself);
- **strict sources missed**: sources whose `a` went over `L` but which were \
never denied (the article's false negatives), with the highest peak `a / L` \
among them;
- **strict sources wrongly limited**: sources denied at least once although \
their `a` never went over `L` (the article's false positives).

The other columns, in the default mode:

- **peak/limit**: the most one client had admitted in any period-long interval, / `L`;
- **admitted before 1st denial**: for single-client workloads, requests allowed \
before the first denial;
- **store ops/decision**, **keys/decision**: store round trips and keys named, \
per decision; **keys/client**: live keys per client active in the last period.

Under each heading, the workload's sources, from `a` alone (no algorithm): \
how many sent; how many went **over the limit at their peak** (some \
`(t − P, t]` held more than `L` of their requests) and **on average** (more \
than `L` per period over the whole run), and the share of requests they sent; \
how many had a peak **within ±15% of the limit** (`0.85 L ≤ max a ≤ 1.15 L`, \
the band the article's missed sources fell in), and the requests sent by those \
whose **peak stayed under 85%** of it; and the requests **decided near the \
limit** (`0.85 L ≤ a ≤ 1.15 L`), where an error of a few percent in the count \
turns a decision.

";

/// The line under a workload's heading that describes its sources
/// ([`Profile`]).
pub fn profile_line(profile: &Profile) -> String {
    let p = profile;
    format!(
        "Sources: {} sent {} requests. Over the limit at their peak: {} ({:.2}% of sources), \
         sending {:.2}% of the requests; over it on average: {}, sending {:.2}%. \
         Peak within ±15% of the limit: {} ({:.2}% of sources); peak under 85% of it: \
         sending {:.2}% of the requests. Requests decided within ±15% of the limit: {:.2}%. \
         The heaviest source sent {:.2}% of the requests.",
        p.sources,
        p.requests,
        p.over_at_peak,
        p.of_sources(p.over_at_peak),
        p.of_requests(p.over_at_peak_requests),
        p.over_on_average,
        p.of_requests(p.over_on_average_requests),
        p.near_limit,
        p.of_sources(p.near_limit),
        p.of_requests(p.below_band_requests),
        p.of_requests(p.near_limit_requests),
        p.of_requests(p.heaviest_requests),
    )
}

/// One markdown table per workload, in the order of `workloads`, each under
/// a heading that says what the workload is. Only the rows with the
/// library's default caches ([`Job::is_main`](crate::suite::Job::is_main))
/// are listed.
pub fn markdown(workloads: &[Workload], rows: &[Row]) -> String {
    let mut out = String::from(NOTES);
    for (index, workload) in workloads.iter().enumerate() {
        let _ = writeln!(out, "### {} (`{}`)\n", workload.title, workload.id);
        let _ = writeln!(out, "{}\n", profile_line(&Profile::of(workload)));
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
                cells(
                    &row.outcome.metrics,
                    strict_of(rows, row),
                    workload.single_client()
                )
                .join(" | ")
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

/// Cloudflare's measure, in `results.csv`: `strict_admitted,
/// strict_wrongly_allowed_pct,strict_wrongly_denied_pct,strict_mean_rel_pct,
/// strict_sources_missed,strict_sources_missed_max_peak,
/// strict_sources_wrongly_limited,strict_wrong_below_band`, empty without a
/// strict-mode run.
fn csv_strict(strict: Option<&StrictMetrics>) -> [String; 8] {
    let Some(s) = strict else {
        return Default::default();
    };
    [
        s.admitted.to_string(),
        s.wrongly_allowed_pct.to_string(),
        s.wrongly_denied_pct.to_string(),
        csv_opt(s.mean_rel_pct),
        s.sources_missed.to_string(),
        csv_opt(s.sources_missed_max_peak),
        s.sources_wrongly_limited.to_string(),
        s.wrong_below_band.to_string(),
    ]
}

/// The workload's sources, in `results.csv`: `sources,
/// sources_over_limit_at_peak,over_limit_at_peak_requests_pct,
/// sources_over_limit_on_average,over_limit_on_average_requests_pct,
/// sources_near_limit,sources_near_limit_pct,below_band_requests_pct,
/// requests_near_limit_pct`.
fn csv_profile(p: &Profile) -> [String; 9] {
    [
        p.sources.to_string(),
        p.over_at_peak.to_string(),
        p.of_requests(p.over_at_peak_requests).to_string(),
        p.over_on_average.to_string(),
        p.of_requests(p.over_on_average_requests).to_string(),
        p.near_limit.to_string(),
        p.of_sources(p.near_limit).to_string(),
        p.of_requests(p.below_band_requests).to_string(),
        p.of_requests(p.near_limit_requests).to_string(),
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
         keys_per_client,max_keys_per_client,strict_admitted,strict_wrongly_allowed_pct,\
         strict_wrongly_denied_pct,strict_mean_rel_pct,strict_sources_missed,\
         strict_sources_missed_max_peak,strict_sources_wrongly_limited,\
         strict_wrong_below_band,sources,sources_over_limit_at_peak,\
         over_limit_at_peak_requests_pct,sources_over_limit_on_average,\
         over_limit_on_average_requests_pct,sources_near_limit,sources_near_limit_pct,\
         below_band_requests_pct,requests_near_limit_pct\n",
    );
    let profiles: Vec<Profile> = workloads.iter().map(Profile::of).collect();
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
                &csv_strict(strict_of(rows, row)),
                &csv_profile(&profiles[row.job.workload]),
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
                        && r.job.denied == DeniedRequests::Refunded
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
