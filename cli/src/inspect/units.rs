//! Times and durations: nanoseconds to milliseconds and to dates, as
//! `inspect` reports them.

use std::time::Duration;

use chrono::{DateTime, Utc};

pub fn nanos(duration: Duration) -> i128 {
    i128::try_from(duration.as_nanos())
        .unwrap_or(i128::MAX)
        .max(1)
}

pub fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

/// Nanoseconds to milliseconds, rounded up, so a wait is never shown
/// shorter, but for less than a microsecond over, which is the float
/// arithmetic's error, not time.
pub fn ms_up(nanos: u128) -> u64 {
    u64::try_from(nanos.saturating_add(999_000) / 1_000_000).unwrap_or(u64::MAX)
}

pub fn clamp(value: i128) -> i64 {
    i64::try_from(value).unwrap_or(if value < 0 { i64::MIN } else { i64::MAX })
}

pub fn time(nanos: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_nanos(nanos)
}

pub fn time_ms(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or(DateTime::<Utc>::MAX_UTC)
}
