//! This run beside the figures Cloudflare published for its approximated
//! sliding window (`cloudflare-table.md`): Julien Desgats, "How we built
//! rate limiting capable of scaling to millions of domains", Cloudflare
//! blog, 2017,
//! <https://blog.cloudflare.com/counting-things-a-lot-of-different-things/>.
//! The article's column is quoted from it; the others come from this run.

use std::fmt::Write as _;

use super::main_row;
use crate::algorithms::Algorithm;
use crate::report::strict_of;
use crate::strict::{Profile, StrictMetrics};
use crate::suite::Row;
use crate::workload::Workload;

/// The columns after the article's: a workload and a number of
/// sub-windows.
const COLUMNS: [(&str, u32); 3] = [("sources", 1), ("sources", 4), ("population", 1)];

/// One column's figures.
struct Column<'a> {
    profile: Profile,
    row: &'a Row,
    strict: &'a StrictMetrics,
}

/// The table in Markdown, or `None` when this run lacks one of its
/// workloads.
pub fn markdown(workloads: &[Workload], rows: &[Row]) -> Option<String> {
    let mut columns = Vec::new();
    for (workload, n) in COLUMNS {
        let row = main_row(
            workloads,
            rows,
            workload,
            Algorithm::SlidingWindow { sub_windows: n },
        )?;
        columns.push(Column {
            profile: Profile::of(&workloads[row.job.workload]),
            row,
            strict: strict_of(rows, row)?,
        });
    }
    let mut out = String::from("| | definition | Cloudflare |");
    for (workload, n) in COLUMNS {
        let _ = write!(out, " `{workload}`, n = {n} |");
    }
    out.push_str("\n|---|---|---:|---:|---:|---:|\n");
    let mut line =
        |label: &str, definition: &str, theirs: &str, cell: &dyn Fn(&Column) -> String| {
            let _ = write!(out, "| {label} | {definition} | {theirs} |");
            for column in &columns {
                let _ = write!(out, " {} |", cell(column));
            }
            out.push('\n');
        };
    line("requests", "", "400 million", &|c| {
        c.profile.requests.to_string()
    });
    line(
        "sources",
        "sources that sent at least one request",
        "270,000",
        &|c| c.profile.sources.to_string(),
    );
    line(
        "***Cloudflare's measure***",
        "*strict mode, each decision against `a ≤ limit`*",
        "",
        &|_| String::new(),
    );
    line(
        "wrongly allowed + wrongly denied",
        "allowed with `a > limit` + denied with `a ≤ limit`, % of requests",
        "0.003% in all",
        &|c| {
            format!(
                "{:.3}% + {:.3}%",
                c.strict.wrongly_allowed_pct, c.strict.wrongly_denied_pct
            )
        },
    );
    line(
        "mean relative difference",
        "mean over decisions of \\|estimate − `a`\\| / `a` (the article does not say how its 6% was taken)",
        "6%",
        &|c| percent(c.strict.mean_rel_pct),
    );
    line(
        "sources missed",
        "sources whose `a` went over the limit, never denied (their highest peak / limit)",
        "3 (under 1.15)",
        &|c| match c.strict.sources_missed_max_peak {
            Some(peak) => format!("{} (≤ {peak:.2})", c.strict.sources_missed),
            None => c.strict.sources_missed.to_string(),
        },
    );
    line(
        "sources wrongly limited",
        "sources denied at least once whose `a` never went over the limit",
        "0",
        &|c| c.strict.sources_wrongly_limited.to_string(),
    );
    line(
        "wrong decisions on sources under 85% of the limit",
        "wrongly allowed or denied requests of sources whose `a` stayed under 0.85 limit",
        "not published",
        &|c| c.strict.wrong_below_band.to_string(),
    );
    line(
        "***The project's measure***",
        "*default mode (denied requests refunded), against an independent exact limiter fed the \
         same requests, whose admitted history parts from the algorithm's after their first \
         disagreement*",
        "",
        &|_| String::new(),
    );
    line(
        "wrongly allowed + wrongly denied",
        "allowed where the exact limiter denied + the reverse, % of requests",
        "—",
        &|c| {
            let m = &c.row.outcome.metrics;
            format!(
                "{:.2}% + {:.2}%",
                m.wrongly_allowed_pct, m.wrongly_denied_pct
            )
        },
    );
    line(
        "over limit",
        "allowed although `x`, this request included, exceeds the limit, % of requests",
        "—",
        &|c| format!("{:.2}%", c.row.outcome.metrics.over_limit_pct),
    );
    line(
        "mean relative difference",
        "mean of \\|estimate − `x`\\| / `x` over the decisions with `x ≥ 1`",
        "—",
        &|c| percent(c.row.outcome.metrics.mean_rel_pct),
    );
    line(
        "***The traffic***",
        "*from `a` alone, the same for every algorithm*",
        "",
        &|_| String::new(),
    );
    line(
        "sources over the limit",
        "sources whose `a` went over the limit (% of sources), and the share of the requests \
         they sent",
        "not published",
        &|c| {
            let p = &c.profile;
            format!(
                "{} ({:.2}%), {:.2}%",
                p.over_at_peak,
                p.of_sources(p.over_at_peak),
                p.of_requests(p.over_at_peak_requests)
            )
        },
    );
    line(
        "sources over the limit on average",
        "sources that sent more than the limit per period over the whole run, and the share of \
         the requests they sent",
        "not published",
        &|c| {
            let p = &c.profile;
            format!(
                "{}, {:.2}%",
                p.over_on_average,
                p.of_requests(p.over_on_average_requests)
            )
        },
    );
    line(
        "requests of sources under 85% of the limit",
        "requests of the sources whose `a` stayed under 0.85 limit, % of requests",
        "not published",
        &|c| {
            format!(
                "{:.2}%",
                c.profile.of_requests(c.profile.below_band_requests)
            )
        },
    );
    line(
        "decided near the limit",
        "requests with `0.85 limit ≤ a ≤ 1.15 limit`, % of requests",
        "not published",
        &|c| {
            format!(
                "{:.2}%",
                c.profile.of_requests(c.profile.near_limit_requests)
            )
        },
    );
    line(
        "heaviest source",
        "the requests of the source that sent the most, % of requests",
        "not published",
        &|c| format!("{:.2}%", c.profile.of_requests(c.profile.heaviest_requests)),
    );
    Some(out)
}

fn percent(value: Option<f64>) -> String {
    value.map_or("—".to_owned(), |v| format!("{v:.2}%"))
}
