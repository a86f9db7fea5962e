//! A compare-and-swap algorithm's state for people: its key, the value as
//! stored and its format, then what it means now.

use super::line;
use super::show::{show_count, show_rate, show_time, show_tokens, show_wait, show_wait_f};
use crate::inspect::report::{Key, Report};
use crate::inspect::states::{Detail, State};

/// Appends the state: the key and its value, what it means now, what
/// remains and when it refills.
pub fn state(out: &mut String, report: &Report, state: &State) {
    out.push('\n');
    if let Some(key) = report.keys.first() {
        stored(out, report, key, state);
    }
    now(out, report, &state.detail);
    if let Some(remaining) = report.remaining {
        line(out, "remaining", remaining);
    }
    let (next, full) = state.detail.refill();
    let refill = match next {
        None => "- (full)".to_owned(),
        Some(ms) => {
            let why = match state.detail {
                Detail::SlidingLog { .. } => " (the oldest entry leaves the window)",
                _ => "",
            };
            format!(
                "one more in {}{why}, all {} in {}",
                show_wait(ms),
                state.detail.most(report.limit),
                show_wait(full)
            )
        }
    };
    line(out, "refill", refill);
}

/// The key, its server, its value as stored and the value's format.
fn stored(out: &mut String, report: &Report, key: &Key, state: &State) {
    line(out, "key", &key.key);
    line(out, "server", &key.server);
    let format = match &state.detail {
        Detail::TokenBucket { .. } => "<tokens> <updated, unix ns>",
        Detail::Gcra { .. } => "the theoretical arrival time, in 1/limit ns since the epoch",
        Detail::SlidingLog { .. } => {
            "version 3, the oldest and newest times (i64 LE, unix ns), a check, then LEB128 gaps"
        }
        Detail::HybridQuota { .. } => "<b(ursty)|s(mooth)> <bucket> <time, unix ns>",
        Detail::DiscreteRefill {
            sessionize: false, ..
        } => "dr1 <tokens> <refill mark, unix ns>",
        Detail::DiscreteRefill {
            sessionize: true, ..
        } => "ds1 <tokens> <refill mark, unix ns> <session start, unix ns>",
    };
    let value = match (&key.value, key.value_encoding) {
        (None, _) => "(absent: a new client)".to_owned(),
        (Some(value), "hex") => format!("{} bytes, hex {value}", value.len() / 2),
        (Some(value), _) => format!("{value:?}"),
    };
    line(out, "stored", value);
    match state.stored {
        "unreadable" => line(
            out,
            "",
            format!(
                "not a {} state ({format}): the limiter takes it for a new client's",
                report.algorithm
            ),
        ),
        "decoded" => line(out, "", format!("format: {format}")),
        _ => {}
    }
}

/// The stored value decoded, and what the state holds now.
fn now(out: &mut String, report: &Report, detail: &Detail) {
    match detail {
        Detail::TokenBucket {
            capacity,
            refill_per_second,
            stored_tokens,
            stored_at_unix_ms,
            tokens,
            ..
        } => {
            if let (Some(stored), Some(at)) = (stored_tokens, stored_at_unix_ms) {
                let stored = show_count(*stored, "token");
                line(out, "", format!("= {stored} at {}", show_time(*at)));
            }
            line(
                out,
                "tokens",
                format!(
                    "{} of {capacity} now, refilling {}",
                    show_tokens(*tokens),
                    show_rate(*refill_per_second)
                ),
            );
        }
        Detail::Gcra {
            burst,
            emission_interval_ms,
            stored_tat_unix_ms,
            tokens,
            ..
        } => {
            if let Some(at) = stored_tat_unix_ms {
                line(out, "", format!("= TAT {}", show_time(*at)));
            }
            line(
                out,
                "tokens",
                format!(
                    "{} of a burst of {burst} now, one more every {}",
                    show_tokens(*tokens),
                    show_wait_f(*emission_interval_ms)
                ),
            );
        }
        Detail::SlidingLog {
            stored_entries,
            oldest_unix_ms,
            newest_unix_ms,
            in_window,
            ..
        } => {
            if let Some(entries) = stored_entries {
                let span = match (oldest_unix_ms, newest_unix_ms) {
                    (Some(oldest), Some(newest)) if oldest == newest => {
                        format!(" at {}", show_time(*oldest))
                    }
                    (Some(oldest), Some(newest)) => {
                        format!(", {} to {}", show_time(*oldest), show_time(*newest))
                    }
                    _ => String::new(),
                };
                let entries = show_count(*entries as f64, "entry");
                line(out, "", format!("= {entries}{span}"));
            }
            line(
                out,
                "in window",
                format!(
                    "{in_window} of {} in the last {}",
                    report.limit,
                    report.quota_period()
                ),
            );
        }
        Detail::HybridQuota {
            stored_mode,
            stored_bucket,
            stored_at_unix_ms,
            mode,
            window_end_unix_ms,
            tokens,
            ..
        } => {
            if let (Some(stored), Some(bucket), Some(at)) =
                (stored_mode, stored_bucket, stored_at_unix_ms)
            {
                let time = match *stored {
                    "bursty" => "its window started",
                    _ => "last request",
                };
                let bucket = show_tokens(*bucket);
                let at = show_time(*at);
                line(out, "", format!("= {stored}, {bucket} tokens, {time} {at}"));
            }
            let mode = match (*mode, window_end_unix_ms) {
                ("bursty", Some(end)) => format!("bursty until {}", show_time(*end)),
                ("bursty, window over", _) => "bursty, its window is over: a full quota".to_owned(),
                ("smooth", _) => "smooth: tokens accrue at the quota's rate".to_owned(),
                ("smooth, refilled", _) => {
                    "smooth, refilled: bursty again, a full quota".to_owned()
                }
                (_, _) => "a new client: a full quota".to_owned(),
            };
            line(out, "mode", mode);
            line(
                out,
                "tokens",
                format!("{} of {} now", show_tokens(*tokens), report.limit),
            );
        }
        Detail::DiscreteRefill {
            refill,
            refill_every_ms,
            stored_tokens,
            stored_mark_unix_ms,
            mark_unix_ms,
            tokens,
            session_start_unix_ms,
            ..
        } => {
            if let (Some(stored), Some(mark)) = (stored_tokens, stored_mark_unix_ms) {
                let stored = show_count(*stored as f64, "token");
                line(
                    out,
                    "",
                    format!("= {stored}, refill mark {}", show_time(*mark)),
                );
            }
            if let Some(start) = session_start_unix_ms {
                line(out, "session", format!("started {}", show_time(*start)));
            }
            line(
                out,
                "tokens",
                format!(
                    "{tokens} of {} now, {refill} more every {} after the mark ({})",
                    report.limit,
                    show_wait_f(*refill_every_ms),
                    show_time(*mark_unix_ms)
                ),
            );
        }
    }
}
