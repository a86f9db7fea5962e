//! The window algorithms' buckets: each key's span, aligned on unix time,
//! its count and its weight in the sliding window's estimate.

use memcache_ratelimit::algorithm::Inspection;
use serde::Serialize;

use super::units::{clamp, time};

/// One bucket of a window algorithm.
#[derive(Debug, Serialize)]
pub struct Bucket {
    /// 0 for the current bucket, 1 for the one before...
    pub age: u32,
    pub key: String,
    pub start: String,
    pub start_unix_ms: i64,
    pub end_unix_ms: i64,
    pub count: u64,
    /// Whether the key was there (an absent key counts 0).
    pub stored: bool,
    /// How much of the count is in the estimate.
    pub weight: f64,
}

/// The buckets of a window of `sub_windows` sub-windows (0 for the fixed
/// window), their spans as of `now`. With `packed` counters (a moment
/// estimator: `<count> (offset sum <sum>)`), the oldest bucket's weight is
/// what the library's estimate gives it.
pub fn buckets(
    seen: &Inspection,
    now: i64,
    period: i128,
    sub_windows: u32,
    packed: bool,
) -> Vec<Bucket> {
    let len = (period / i128::from(sub_windows.max(1))).max(1);
    let now = i128::from(now);
    let index = now.div_euclid(len);
    let elapsed = now.rem_euclid(len) as f64 / len as f64;
    let count_of =
        |value: Option<&str>| value.and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok());
    let counts: Vec<u64> = seen
        .keys
        .iter()
        .map(|key| count_of(key.value.as_deref()).unwrap_or(0))
        .collect();
    // The estimate less the newer buckets, over the oldest's count.
    let oldest_weight = match (packed, counts.get(sub_windows as usize), seen.estimate) {
        (true, Some(&oldest), Some(estimate)) if sub_windows > 0 && oldest > 0 => {
            let newer: u64 = counts.iter().take(sub_windows as usize).sum();
            ((estimate - newer as f64) / oldest as f64).clamp(0.0, 1.0)
        }
        _ => 1.0 - elapsed,
    };
    seen.keys
        .iter()
        .enumerate()
        .map(|(age, key)| {
            let age = u32::try_from(age).unwrap_or(u32::MAX);
            let start = (index - i128::from(age)) * len;
            let weight = match (sub_windows, age) {
                (0, 0) => 1.0,
                (0, _) => 0.0,
                (n, age) if age < n => 1.0,
                (n, age) if age == n => oldest_weight,
                _ => 0.0,
            };
            Bucket {
                age,
                key: key.key.clone(),
                start: time(clamp(start)).to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
                start_unix_ms: clamp(start.div_euclid(1_000_000)),
                end_unix_ms: clamp((start + len).div_euclid(1_000_000)),
                count: counts[age as usize],
                stored: key.value.is_some(),
                // Six decimals: the float arithmetic's noise is no weight.
                weight: (weight * 1e6).round() / 1e6,
            }
        })
        .collect()
}
