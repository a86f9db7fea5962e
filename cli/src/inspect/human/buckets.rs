//! The windows' buckets for people: a table, then the estimate, what
//! remains and when the window is empty.

use super::line;
use super::show::show_wait;
use crate::inspect::buckets::Bucket;
use crate::inspect::report::Report;
use crate::inspect::units::time_ms;

/// Appends the windows' buckets, as a table, then the estimate.
pub fn buckets(out: &mut String, report: &Report, buckets: &[Bucket]) {
    out.push('\n');
    let whole_seconds = buckets
        .iter()
        .all(|b| b.start_unix_ms % 1000 == 0 && b.end_unix_ms % 1000 == 0);
    let read_day = report.read_at_unix_ms.div_euclid(86_400_000);
    let same_day = buckets
        .iter()
        .all(|b| b.start_unix_ms.div_euclid(86_400_000) == read_day);
    let format = match (same_day, whole_seconds) {
        (true, true) => "%H:%M:%S",
        (true, false) => "%H:%M:%S%.3f",
        (false, true) => "%Y-%m-%d %H:%M:%S",
        (false, false) => "%Y-%m-%d %H:%M:%S%.3f",
    };
    let span = |b: &Bucket| {
        let at = |ms: i64| time_ms(ms).format(format).to_string();
        format!("{} - {}", at(b.start_unix_ms), at(b.end_unix_ms))
    };
    let oldest = buckets.len().saturating_sub(1);
    let label = |b: &Bucket| match b.age {
        0 => "current".to_owned(),
        age if age as usize == oldest && oldest > 0 => format!("-{age} oldest"),
        age => format!("-{age}"),
    };
    let spans: Vec<String> = buckets.iter().map(span).collect();
    let span_width = spans.iter().map(String::len).max().unwrap_or(0).max(10);
    let key_width = buckets
        .iter()
        .map(|b| b.key.len())
        .max()
        .unwrap_or(0)
        .max(3);
    line(
        out,
        "bucket",
        format!(
            "{:<span_width$}  {:>8}  {:>6}  {:<key_width$}  server",
            "span (UTC)", "count", "weight", "key"
        ),
    );
    for (b, span) in buckets.iter().zip(&spans) {
        let count = match b.stored {
            true => b.count.to_string(),
            false => "-".to_owned(),
        };
        let server = report
            .keys
            .iter()
            .find(|key| key.key == b.key)
            .map_or("", |key| key.server.as_str());
        line(
            out,
            &label(b),
            format!(
                "{span:<span_width$}  {count:>8}  {:>6.2}  {:<key_width$}  {server}",
                b.weight, b.key
            ),
        );
    }
    if buckets.iter().any(|b| !b.stored) {
        out.push_str("(- : no key: never written, expired or evicted; counts 0)\n");
    }
    out.push('\n');
    if let Some(estimate) = report.estimate {
        line(
            out,
            "estimate",
            format!(
                "{estimate:.2} of {}: each count times its weight",
                report.limit
            ),
        );
    }
    if let Some(remaining) = report.remaining {
        line(out, "remaining", remaining);
    }
    match report.reset_after_ms {
        Some(0) => line(out, "reset", "now: nothing counted"),
        Some(reset) => line(
            out,
            "reset",
            format!(
                "in {}: every request counted has left the window",
                show_wait(reset)
            ),
        ),
        None => {}
    }
}
