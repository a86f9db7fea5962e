//! Times, durations and counts as people read them.

use crate::inspect::units::time_ms;

/// `2026-11-25 06:28:05.123 UTC`.
pub fn show_time(ms: i64) -> String {
    format!("{} UTC", time_ms(ms).format("%Y-%m-%d %H:%M:%S%.3f"))
}

pub fn show_tokens(tokens: f64) -> String {
    if (tokens - tokens.round()).abs() < 1e-6 {
        format!("{}", tokens.round())
    } else {
        format!("{tokens:.2}")
    }
}

/// `1 token`, `2.50 tokens`, `3 entries`.
pub fn show_count(count: f64, what: &str) -> String {
    let name = match ((count - 1.0).abs() < 1e-6, what.strip_suffix('y')) {
        (true, _) => what.to_owned(),
        (false, Some(stem)) => format!("{stem}ies"),
        (false, None) => format!("{what}s"),
    };
    format!("{} {name}", show_tokens(count))
}

pub fn show_rate(per_second: f64) -> String {
    if per_second >= 1.0 {
        format!("{} a second", show_tokens(per_second))
    } else {
        format!("one every {}", show_wait_f(1000.0 / per_second))
    }
}

pub fn show_wait(ms: u64) -> String {
    show_wait_f(ms as f64)
}

/// `250 ms`, `12.5 s`, `4m 05s`, `2h 03m`, `3d 04h`.
pub fn show_wait_f(ms: f64) -> String {
    if !ms.is_finite() {
        return "ever".to_owned();
    }
    let secs = ms / 1000.0;
    if ms < 1000.0 {
        format!("{} ms", (ms * 1000.0).round() / 1000.0)
    } else if secs < 60.0 {
        format!("{secs:.1} s")
    } else if secs < 3600.0 {
        let secs = secs.round() as u64;
        format!("{}m {:02}s", secs / 60, secs % 60)
    } else if secs < 86_400.0 {
        let mins = (secs / 60.0).round() as u64;
        format!("{}h {:02}m", mins / 60, mins % 60)
    } else {
        let hours = (secs / 3600.0).round() as u64;
        format!("{}d {:02}h", hours / 24, hours % 24)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_read_as_people_say_them() {
        assert_eq!(show_wait(250), "250 ms");
        assert_eq!(show_wait(65_300), "1m 05s");
        assert_eq!(show_wait(12_500), "12.5 s");
        assert_eq!(show_wait(7_380_000), "2h 03m");
    }
}
