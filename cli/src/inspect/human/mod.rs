//! The report for people: the client, the limiter, the store and the time
//! of the reading, then the windows' buckets or a compare-and-swap state.

mod buckets;
mod show;
mod state;

use std::fmt::Display;

use super::report::Report;
use show::show_time;

/// `report` for people.
pub fn human(report: &Report) -> String {
    let mut out = String::new();
    line(&mut out, "client", &report.client);
    line(
        &mut out,
        "limiter",
        format!("{} {}", report.quota, report.parameters),
    );
    let store = match report.store {
        "memcached" => format!(
            "memcached servers={} protocol={}",
            report.servers.join(","),
            report.protocol
        ),
        other => other.to_owned(),
    };
    line(&mut out, "store", store);
    line(&mut out, "read at", show_time(report.read_at_unix_ms));
    match (&report.buckets, &report.state) {
        (Some(buckets), _) => buckets::buckets(&mut out, report, buckets),
        (None, Some(state)) => state::state(&mut out, report, state),
        (None, None) => {}
    }
    out
}

/// Appends a line of `text` after `label`, the labels in a column.
fn line(out: &mut String, label: &str, text: impl Display) {
    out.push_str(&format!("{label:<10} {text}\n"));
}
