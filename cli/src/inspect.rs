//! What `inspect` reads and prints: a client's keys as the library's
//! `RateLimiter::inspect` returns them, with what they mean.
//!
//! The window algorithms' buckets are aligned on unix time, bucket `i`
//! covering `[i·len, (i+1)·len)` (as the `FixedWindow` and `SlidingWindow`
//! documentation says), so each key's span follows from the time of the
//! reading. Their weights are the sliding window's estimate, as its
//! documentation gives it: every sub-window in full but the oldest,
//! weighted by the share of it still inside the period.
//!
//! The compare-and-swap algorithms' states are decoded from the formats
//! their rustdocs give: the token bucket's `<tokens> <updated>` (unix
//! nanoseconds), GCRA's theoretical arrival time in units of `1/limit`
//! nanoseconds, the sliding log's version byte, little-endian `i64` oldest
//! time and LEB128 gaps, and the hybrid quota's `<b|s> <bucket> <time>`,
//! read by its documented rules. A value that does not decode is shown as
//! stored and, as the library does, taken for a new client's.

use std::time::Duration;

use chrono::{DateTime, Utc};
use memcache_ratelimit::algorithm::Inspection;
use memcache_ratelimit::store::Store;
use memcache_ratelimit::{Algorithm, Error};
use serde::Serialize;

use crate::describe;
use crate::limiter::Configured;

/// Slack for comparisons of token counts, as the library's.
const EPSILON: f64 = 1e-9;

/// The most attempts at reading a window's buckets within one bucket.
const ATTEMPTS: usize = 3;

/// Everything `inspect --json` prints, one object; the field names are
/// stable (see the command's help).
#[derive(Debug, Serialize)]
pub struct Report {
    client: String,
    algorithm: &'static str,
    /// `SlidingWindow n=4`, `TokenBucket capacity=10`...
    parameters: String,
    quota: String,
    limit: u64,
    period_ms: u64,
    store: &'static str,
    servers: Vec<String>,
    protocol: String,
    /// RFC 3339, UTC.
    read_at: String,
    read_at_unix_ms: i64,
    keys: Vec<Key>,
    /// The windows' buckets, the current one first; `null` for the
    /// compare-and-swap algorithms.
    buckets: Option<Vec<Bucket>>,
    /// The compare-and-swap algorithms' decoded state; `null` for the
    /// windows.
    state: Option<State>,
    /// The windows' estimate of the count in the period; `null` for the
    /// compare-and-swap algorithms.
    estimate: Option<f64>,
    /// What is left for a request now.
    remaining: Option<u64>,
    /// How long until the whole limit is available again.
    reset_after_ms: Option<u64>,
}

/// One key, as read.
#[derive(Debug, Serialize)]
struct Key {
    key: String,
    server: String,
    /// `null` when absent.
    value: Option<String>,
    /// `text`, or `hex` for a binary value (the sliding log's).
    value_encoding: &'static str,
}

/// One bucket of a window algorithm.
#[derive(Debug, Serialize)]
struct Bucket {
    /// 0 for the current bucket, 1 for the one before...
    age: u32,
    key: String,
    start: String,
    start_unix_ms: i64,
    end_unix_ms: i64,
    count: u64,
    /// Whether the key was there (an absent key counts 0).
    stored: bool,
    /// How much of the count is in the estimate.
    weight: f64,
}

/// A compare-and-swap algorithm's state, as stored and as of the reading.
#[derive(Debug, Serialize)]
struct State {
    /// `absent` (a new client), `decoded`, or `unreadable` (not this
    /// algorithm's state: the limiter takes it for a new client's).
    stored: &'static str,
    #[serde(flatten)]
    detail: Detail,
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Detail {
    TokenBucket {
        capacity: u64,
        refill_per_second: f64,
        stored_tokens: Option<f64>,
        stored_at_unix_ms: Option<i64>,
        tokens: f64,
        next_refill_ms: Option<u64>,
        full_in_ms: u64,
    },
    Gcra {
        burst: u64,
        emission_interval_ms: f64,
        stored_tat_unix_ms: Option<i64>,
        tokens: f64,
        next_refill_ms: Option<u64>,
        full_in_ms: u64,
    },
    SlidingLog {
        stored_entries: Option<u64>,
        oldest_unix_ms: Option<i64>,
        newest_unix_ms: Option<i64>,
        in_window: u64,
        next_refill_ms: Option<u64>,
        full_in_ms: u64,
    },
    HybridQuota {
        stored_mode: Option<&'static str>,
        stored_bucket: Option<f64>,
        stored_at_unix_ms: Option<i64>,
        mode: &'static str,
        window_end_unix_ms: Option<i64>,
        tokens: f64,
        next_refill_ms: Option<u64>,
        full_in_ms: u64,
    },
}

/// What the store held, read as of `now` (unix nanoseconds).
struct Reading {
    seen: Inspection,
    now: i64,
    /// The sliding log's state as stored, its bytes exactly.
    raw: Option<Vec<u8>>,
}

/// Reads `client`'s keys. A window's reading is retried when a bucket
/// boundary passed during it, so that every span shown is the one read.
async fn read(
    configured: &Configured,
    client: &[u8],
) -> Result<Reading, Box<dyn std::error::Error>> {
    let limiter = &configured.limiter;
    let failed = |error: Error| describe::error(configured, error);
    let algorithm = configured.spec.algorithm();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let seen = limiter.inspect(client).await.map_err(failed)?;
        let at = limiter.clock().now();
        let now = at
            .timestamp_nanos_opt()
            .ok_or("the clock reads a time beyond what unix nanoseconds hold (after 2262)")?;
        if algorithm.uses_cas() {
            let raw = match (algorithm, seen.keys.first()) {
                (Algorithm::SlidingLog, Some(key)) if key.value.is_some() => configured
                    .watched
                    .get(key.key.as_bytes())
                    .await
                    .map_err(|error| failed(Error::Store(error)))?
                    .map(|stored| stored.value),
                _ => None,
            };
            return Ok(Reading { seen, now, raw });
        }
        let current = limiter.keys_at(client, at).map_err(failed)?;
        let same = match (current.first(), seen.keys.first()) {
            (Some(expected), Some(read)) => expected.as_slice() == read.key.as_bytes(),
            _ => false,
        };
        if same || attempt >= ATTEMPTS {
            return Ok(Reading {
                seen,
                now,
                raw: None,
            });
        }
    }
}

/// Reads and prints `client`'s state: for people, or as one JSON object.
pub async fn inspect(
    configured: &Configured,
    client: &[u8],
    json: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let reading = read(configured, client).await?;
    let report = report(configured, client, reading);
    match json {
        true => println!("{}", serde_json::to_string(&report)?),
        false => print!("{}", human(&report)),
    }
    Ok(())
}

fn report(configured: &Configured, client: &[u8], reading: Reading) -> Report {
    let Reading { seen, now, raw } = reading;
    let spec = &configured.spec;
    let algorithm = spec.algorithm();
    let quota = spec.quota();
    let server = |key: &str| match &configured.memcached {
        Some(store) => store.server_for(key.as_bytes()).to_owned(),
        None => "embedded".to_owned(),
    };
    let (store, servers, protocol) = match &configured.memcached {
        Some(memcached) => (
            "memcached",
            memcached.servers().to_vec(),
            format!("{:?}", memcached.protocol()).to_lowercase(),
        ),
        None => ("embedded", Vec::new(), String::new()),
    };
    let binary = raw.is_some();
    let keys: Vec<Key> = seen
        .keys
        .iter()
        .map(|key| Key {
            key: key.key.clone(),
            server: server(&key.key),
            value: match &raw {
                Some(bytes) => Some(hex(bytes)),
                None => key.value.clone(),
            },
            value_encoding: if binary { "hex" } else { "text" },
        })
        .collect();

    let period = nanos(quota.period());
    let mut report = Report {
        client: String::from_utf8_lossy(client).into_owned(),
        algorithm: algorithm.name(),
        parameters: algorithm.to_string(),
        quota: quota.to_string(),
        limit: quota.limit(),
        period_ms: millis(quota.period()),
        store,
        servers,
        protocol,
        read_at: time(now).to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        read_at_unix_ms: now.div_euclid(1_000_000),
        keys,
        buckets: None,
        state: None,
        estimate: seen.estimate,
        remaining: seen.remaining,
        reset_after_ms: seen.reset_after.map(millis),
    };
    let value = seen.keys.first().and_then(|key| key.value.as_deref());
    let limit = quota.limit();
    let decoded = match algorithm {
        Algorithm::SlidingWindow { sub_windows } => {
            report.buckets = Some(buckets(&seen, now, period, sub_windows));
            return report;
        }
        Algorithm::FixedWindow => {
            report.buckets = Some(buckets(&seen, now, period, 0));
            return report;
        }
        Algorithm::TokenBucket { capacity } => {
            token_bucket(value, now, period, limit, capacity.unwrap_or(limit))
        }
        Algorithm::Gcra { burst } => gcra(value, now, period, limit, burst.unwrap_or(limit)),
        Algorithm::SlidingLog => sliding_log(raw.as_deref(), now, period, limit),
        Algorithm::HybridQuota => hybrid_quota(value, now, period, limit),
    };
    let (state, remaining, reset) = decoded;
    report.state = Some(state);
    report.remaining = Some(remaining);
    report.reset_after_ms = Some(reset);
    report
}

/// The buckets of a window of `sub_windows` sub-windows (0 for the fixed
/// window), their spans as of `now`.
fn buckets(seen: &Inspection, now: i64, period: i128, sub_windows: u32) -> Vec<Bucket> {
    let len = (period / i128::from(sub_windows.max(1))).max(1);
    let now = i128::from(now);
    let index = now.div_euclid(len);
    let elapsed = now.rem_euclid(len) as f64 / len as f64;
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
                (n, age) if age == n => 1.0 - elapsed,
                _ => 0.0,
            };
            let count = key.value.as_deref().and_then(|v| v.trim().parse().ok());
            Bucket {
                age,
                key: key.key.clone(),
                start: time(clamp(start)).to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
                start_unix_ms: clamp(start.div_euclid(1_000_000)),
                end_unix_ms: clamp((start + len).div_euclid(1_000_000)),
                count: count.unwrap_or(0),
                stored: key.value.is_some(),
                // Six decimals: the float arithmetic's noise is no weight.
                weight: (weight * 1e6).round() / 1e6,
            }
        })
        .collect()
}

type Decoded = (State, u64, u64);

fn state(stored: &'static str, detail: Detail) -> State {
    State { stored, detail }
}

/// Whether a value was read, decoded or not.
fn stored_as<T>(value: Option<&str>, decoded: &Option<T>) -> &'static str {
    match (value, decoded) {
        (None, _) => "absent",
        (Some(_), Some(_)) => "decoded",
        (Some(_), None) => "unreadable",
    }
}

/// Whole tokens of `tokens`, none below zero.
fn whole(tokens: f64) -> u64 {
    (tokens + EPSILON).floor().max(0.0) as u64
}

/// `<tokens> <updated>`, refilled at `limit` per `period` nanoseconds up to
/// `capacity`.
fn token_bucket(value: Option<&str>, now: i64, period: i128, limit: u64, capacity: u64) -> Decoded {
    let cap = capacity as f64;
    let decoded = value.and_then(|text| {
        let (tokens, updated) = text.trim().split_once(' ')?;
        let tokens: f64 = tokens.parse().ok()?;
        let updated: i64 = updated.parse().ok()?;
        (tokens.is_finite() && (-cap..=cap).contains(&tokens)).then_some((tokens, updated))
    });
    // Tokens per nanosecond.
    let rate = limit as f64 / period as f64;
    let wait = |tokens: f64| -> u128 {
        if tokens <= EPSILON {
            0
        } else {
            (tokens / rate).ceil().min(u64::MAX as f64) as u128
        }
    };
    let (tokens, lead) = match decoded {
        None => (cap, 0),
        Some((tokens, updated)) => {
            let earned = (i128::from(now) - i128::from(updated)).max(0) as f64 * rate;
            let lead = (i128::from(updated) - i128::from(now)).max(0) as u128;
            ((tokens + earned).min(cap), lead)
        }
    };
    let next_whole = (whole(tokens) as f64 + 1.0).min(cap);
    let next_refill = (tokens < cap - EPSILON).then(|| ms_up(lead + wait(next_whole - tokens)));
    let full_in = ms_up(lead + wait(cap - tokens));
    let detail = Detail::TokenBucket {
        capacity,
        refill_per_second: rate * 1e9,
        stored_tokens: decoded.map(|(tokens, _)| tokens),
        stored_at_unix_ms: decoded.map(|(_, updated)| updated.div_euclid(1_000_000)),
        tokens,
        next_refill_ms: next_refill,
        full_in_ms: full_in,
    };
    (
        state(stored_as(value, &decoded), detail),
        whole(tokens),
        full_in,
    )
}

/// A theoretical arrival time in units of `1/limit` nanoseconds; `burst`
/// requests at once, one more every `period/limit`.
fn gcra(value: Option<&str>, now: i64, period: i128, limit: u64, burst: u64) -> Decoded {
    let decoded: Option<i128> = value.and_then(|text| text.trim().parse().ok());
    let l = i128::from(limit);
    let now_units = i128::from(now).saturating_mul(l);
    let tolerance = i128::from(burst).saturating_mul(period);
    let tat = decoded.unwrap_or(now_units).max(now_units);
    // How far ahead of now the client is booked.
    let booked = tat.saturating_sub(now_units);
    let tokens = (tolerance - booked) as f64 / period as f64;
    let to_ms = |units: i128| ms_up(u128::try_from(units.saturating_add(l - 1) / l).unwrap_or(0));
    let next_refill = (booked > 0).then(|| {
        let next = (tolerance - booked).div_euclid(period) + 1;
        let target = (tolerance - next.saturating_mul(period)).max(0);
        to_ms(booked - target)
    });
    let full_in = to_ms(booked);
    let detail = Detail::Gcra {
        burst,
        emission_interval_ms: period as f64 / l as f64 / 1e6,
        stored_tat_unix_ms: decoded.map(|tat| clamp(tat.div_euclid(l).div_euclid(1_000_000))),
        tokens,
        next_refill_ms: next_refill,
        full_in_ms: full_in,
    };
    (
        state(stored_as(value, &decoded), detail),
        whole(tokens),
        full_in,
    )
}

/// The log's entries (unix nanoseconds), or `None` if `bytes` is not a log
/// of at most `limit` entries.
fn decode_log(bytes: &[u8], limit: u64) -> Option<Vec<i64>> {
    let (&version, rest) = bytes.split_first()?;
    if version != 1 {
        return None;
    }
    if rest.is_empty() {
        return Some(Vec::new());
    }
    let (first, mut rest) = rest.split_first_chunk::<8>()?;
    let mut entries = vec![i64::from_le_bytes(*first)];
    let mut previous = entries[0];
    while !rest.is_empty() {
        let mut gap: u64 = 0;
        let mut shift = 0;
        loop {
            let (&byte, tail) = rest.split_first()?;
            rest = tail;
            if shift > 63 || (shift == 63 && byte > 1) {
                return None;
            }
            gap |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        previous = previous.checked_add_unsigned(gap)?;
        entries.push(previous);
        if entries.len() as u64 > limit {
            return None;
        }
    }
    Some(entries)
}

/// A log of the admitted requests' times: those after `now − period`
/// count.
fn sliding_log(raw: Option<&[u8]>, now: i64, period: i128, limit: u64) -> Decoded {
    let decoded = raw.and_then(|bytes| decode_log(bytes, limit));
    let after = i128::from(now) - period;
    let inside: Vec<i64> = decoded
        .iter()
        .flatten()
        .copied()
        .filter(|&entry| i128::from(entry) > after)
        .collect();
    let leaves = |entry: i64| ms_up((i128::from(entry) + period - i128::from(now)).max(0) as u128);
    let in_window = inside.len() as u64;
    let full_in = inside.last().map_or(0, |&entry| leaves(entry));
    let detail = Detail::SlidingLog {
        stored_entries: decoded.as_ref().map(|entries| entries.len() as u64),
        oldest_unix_ms: decoded
            .as_ref()
            .and_then(|entries| entries.first())
            .map(|entry| entry.div_euclid(1_000_000)),
        newest_unix_ms: decoded
            .as_ref()
            .and_then(|entries| entries.last())
            .map(|entry| entry.div_euclid(1_000_000)),
        in_window,
        next_refill_ms: inside.first().map(|&entry| leaves(entry)),
        full_in_ms: full_in,
    };
    let stored = match (raw, &decoded) {
        (None, _) => "absent",
        (Some(_), Some(_)) => "decoded",
        (Some(_), None) => "unreadable",
    };
    (
        state(stored, detail),
        limit.saturating_sub(in_window),
        full_in,
    )
}

/// `<b|s> <bucket> <time>`: bursty, with the bucket's whole tokens until
/// the fixed window starting at `time` ends; or smooth, earning `limit`
/// per `period` since `time`, bursty again once the bucket holds the
/// whole quota.
fn hybrid_quota(value: Option<&str>, now: i64, period: i128, limit: u64) -> Decoded {
    let q = limit as f64;
    let decoded = value.and_then(|text| {
        let mut parts = text.split(' ');
        let smooth = match parts.next()? {
            "b" => false,
            "s" => true,
            _ => return None,
        };
        let bucket: f64 = parts.next()?.parse().ok()?;
        let time: i64 = parts.next()?.parse().ok()?;
        let sane = bucket.is_finite() && (-q..=q).contains(&bucket) && parts.next().is_none();
        sane.then_some((smooth, bucket, time))
    });
    let rate = q / period as f64;
    let wait = |tokens: f64| -> u128 {
        if tokens <= EPSILON {
            0
        } else {
            (tokens / rate).ceil().min(u64::MAX as f64) as u128
        }
    };
    let now128 = i128::from(now);
    let (mode, window_end, tokens, next_refill, full_in) = match decoded {
        None => ("new", None, q, None, 0),
        Some((false, bucket, time)) => {
            let end = i128::from(time) + period;
            if end <= now128 {
                ("bursty, window over", None, q, None, 0)
            } else {
                let left = ms_up((end - now128) as u128);
                let next = (bucket < q - EPSILON).then_some(left);
                (
                    "bursty",
                    Some(clamp(end.div_euclid(1_000_000))),
                    bucket,
                    next,
                    left,
                )
            }
        }
        Some((true, bucket, time)) => {
            let earned = (now128 - i128::from(time)).max(0) as f64 * rate;
            let tokens = bucket + earned;
            if tokens >= q - EPSILON {
                ("smooth, refilled", None, q, None, 0)
            } else {
                let next_whole = (whole(tokens) as f64 + 1.0).min(q);
                let next = ms_up(wait(next_whole - tokens));
                ("smooth", None, tokens, Some(next), ms_up(wait(q - tokens)))
            }
        }
    };
    let detail = Detail::HybridQuota {
        stored_mode: decoded.map(|(smooth, _, _)| if smooth { "smooth" } else { "bursty" }),
        stored_bucket: decoded.map(|(_, bucket, _)| bucket),
        stored_at_unix_ms: decoded.map(|(_, _, time)| time.div_euclid(1_000_000)),
        mode,
        window_end_unix_ms: window_end,
        tokens,
        next_refill_ms: next_refill,
        full_in_ms: full_in,
    };
    (
        state(stored_as(value, &decoded), detail),
        whole(tokens),
        full_in,
    )
}

/// `report` for people.
fn human(report: &Report) -> String {
    let mut out = String::new();
    let mut line = |label: &str, text: String| {
        out.push_str(&format!("{label:<10} {text}\n"));
    };
    line("client", report.client.clone());
    line("limiter", format!("{} {}", report.quota, report.parameters));
    let store = match report.store {
        "memcached" => format!(
            "memcached servers={} protocol={}",
            report.servers.join(","),
            report.protocol
        ),
        other => other.to_owned(),
    };
    line("store", store);
    line(
        "read at",
        format!("{} UTC", show_time(report.read_at_unix_ms)),
    );
    match (&report.buckets, &report.state) {
        (Some(buckets), _) => out.push_str(&human_buckets(report, buckets)),
        (None, Some(state)) => out.push_str(&human_state(report, state)),
        (None, None) => {}
    }
    out
}

/// The windows' buckets, as a table, then the estimate.
fn human_buckets(report: &Report, buckets: &[Bucket]) -> String {
    let mut out = String::from("\n");
    let whole_seconds = buckets
        .iter()
        .all(|b| b.start_unix_ms % 1000 == 0 && b.end_unix_ms % 1000 == 0);
    let read_day = report.read_at_unix_ms.div_euclid(86_400_000);
    let same_day = buckets
        .iter()
        .all(|b| b.start_unix_ms.div_euclid(86_400_000) == read_day);
    let span = |b: &Bucket| {
        let at = |ms: i64| match (same_day, whole_seconds) {
            (true, true) => time_ms(ms).format("%H:%M:%S").to_string(),
            (true, false) => time_ms(ms).format("%H:%M:%S%.3f").to_string(),
            (false, true) => time_ms(ms).format("%Y-%m-%d %H:%M:%S").to_string(),
            (false, false) => time_ms(ms).format("%Y-%m-%d %H:%M:%S%.3f").to_string(),
        };
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
    out.push_str(&format!(
        "{:<10} {:<span_width$}  {:>8}  {:>6}  {:<key_width$}  server\n",
        "bucket", "span (UTC)", "count", "weight", "key"
    ));
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
        out.push_str(&format!(
            "{:<10} {span:<span_width$}  {count:>8}  {:>6.2}  {:<key_width$}  {server}\n",
            label(b),
            b.weight,
            b.key
        ));
    }
    if buckets.iter().any(|b| !b.stored) {
        out.push_str("(- : no key: never written, expired or evicted; counts 0)\n");
    }
    out.push('\n');
    if let Some(estimate) = report.estimate {
        out.push_str(&format!(
            "{:<10} {estimate:.2} of {}: each count times its weight\n",
            "estimate", report.limit
        ));
    }
    if let Some(remaining) = report.remaining {
        out.push_str(&format!("{:<10} {remaining}\n", "remaining"));
    }
    match report.reset_after_ms {
        Some(0) => out.push_str(&format!("{:<10} now: nothing counted\n", "reset")),
        Some(reset) => out.push_str(&format!(
            "{:<10} in {}: every request counted has left the window\n",
            "reset",
            show_wait(reset)
        )),
        None => {}
    }
    out
}

/// A compare-and-swap algorithm's key, its value as stored, and what it
/// means now.
fn human_state(report: &Report, state: &State) -> String {
    let mut out = String::from("\n");
    let mut line = |label: &str, text: String| {
        out.push_str(&format!("{label:<10} {text}\n"));
    };
    if let Some(key) = report.keys.first() {
        line("key", key.key.clone());
        line("server", key.server.clone());
        let format = match &state.detail {
            Detail::TokenBucket { .. } => "<tokens> <updated, unix ns>",
            Detail::Gcra { .. } => "the theoretical arrival time, in 1/limit ns since the epoch",
            Detail::SlidingLog { .. } => {
                "a version byte, the oldest time (i64 LE, unix ns), then LEB128 gaps"
            }
            Detail::HybridQuota { .. } => "<b(ursty)|s(mooth)> <bucket> <time, unix ns>",
        };
        let value = match (&key.value, key.value_encoding) {
            (None, _) => "(absent: a new client)".to_owned(),
            (Some(value), "hex") => format!("{} bytes, hex {value}", value.len() / 2),
            (Some(value), _) => format!("{value:?}"),
        };
        line("stored", value);
        match state.stored {
            "unreadable" => line(
                "",
                format!(
                    "not a {} state ({format}): the limiter takes it for a new client's",
                    report.algorithm
                ),
            ),
            "decoded" => line("", format!("format: {format}")),
            _ => {}
        }
    }
    let when = |ms: i64| format!("{} UTC", show_time(ms));
    match &state.detail {
        Detail::TokenBucket {
            capacity,
            refill_per_second,
            stored_tokens,
            stored_at_unix_ms,
            tokens,
            ..
        } => {
            if let (Some(stored), Some(at)) = (stored_tokens, stored_at_unix_ms) {
                line(
                    "",
                    format!("= {} at {}", show_count(*stored, "token"), when(*at)),
                );
            }
            line(
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
                line("", format!("= TAT {}", when(*at)));
            }
            line(
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
                        format!(" at {}", when(*oldest))
                    }
                    (Some(oldest), Some(newest)) => {
                        format!(", {} to {}", when(*oldest), when(*newest))
                    }
                    _ => String::new(),
                };
                line(
                    "",
                    format!("= {}{span}", show_count(*entries as f64, "entry")),
                );
            }
            line(
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
                line(
                    "",
                    format!(
                        "= {stored}, {} tokens, {time} {}",
                        show_tokens(*bucket),
                        when(*at)
                    ),
                );
            }
            let mode = match (*mode, window_end_unix_ms) {
                ("bursty", Some(end)) => format!("bursty until {}", when(*end)),
                ("bursty, window over", _) => "bursty, its window is over: a full quota".to_owned(),
                ("smooth", _) => "smooth: tokens accrue at the quota's rate".to_owned(),
                ("smooth, refilled", _) => {
                    "smooth, refilled: bursty again, a full quota".to_owned()
                }
                (_, _) => "a new client: a full quota".to_owned(),
            };
            line("mode", mode);
            line(
                "tokens",
                format!("{} of {} now", show_tokens(*tokens), report.limit),
            );
        }
    }
    let (next, full) = match &state.detail {
        Detail::TokenBucket {
            next_refill_ms,
            full_in_ms,
            ..
        }
        | Detail::Gcra {
            next_refill_ms,
            full_in_ms,
            ..
        }
        | Detail::SlidingLog {
            next_refill_ms,
            full_in_ms,
            ..
        }
        | Detail::HybridQuota {
            next_refill_ms,
            full_in_ms,
            ..
        } => (*next_refill_ms, *full_in_ms),
    };
    if let Some(remaining) = report.remaining {
        line("remaining", remaining.to_string());
    }
    let refill = match (next, &state.detail) {
        (None, _) => "- (full)".to_owned(),
        (Some(ms), detail) => {
            let why = match detail {
                Detail::SlidingLog { .. } => " (the oldest entry leaves the window)",
                _ => "",
            };
            format!(
                "one more in {}{why}, all {} in {}",
                show_wait(ms),
                limit_of(&state.detail, report.limit),
                show_wait(full)
            )
        }
    };
    line("refill", refill);
    out
}

/// The most a compare-and-swap state holds: the capacity, the burst or
/// the limit.
fn limit_of(detail: &Detail, limit: u64) -> u64 {
    match detail {
        Detail::TokenBucket { capacity, .. } => *capacity,
        Detail::Gcra { burst, .. } => *burst,
        _ => limit,
    }
}

impl Report {
    /// The quota's period, as the quota spells it.
    fn quota_period(&self) -> &str {
        self.quota
            .split_once('/')
            .map_or(self.quota.as_str(), |(_, period)| period)
    }
}

fn nanos(duration: Duration) -> i128 {
    i128::try_from(duration.as_nanos())
        .unwrap_or(i128::MAX)
        .max(1)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

/// Nanoseconds to milliseconds, rounded up, so a wait is never shown
/// shorter, but for less than a microsecond over, which is the float
/// arithmetic's error, not time.
fn ms_up(nanos: u128) -> u64 {
    u64::try_from(nanos.saturating_add(999_000) / 1_000_000).unwrap_or(u64::MAX)
}

fn clamp(value: i128) -> i64 {
    i64::try_from(value).unwrap_or(if value < 0 { i64::MIN } else { i64::MAX })
}

fn time(nanos: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_nanos(nanos)
}

fn time_ms(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// `2026-11-25 06:28:05.123`.
fn show_time(ms: i64) -> String {
    time_ms(ms).format("%Y-%m-%d %H:%M:%S%.3f").to_string()
}

fn show_tokens(tokens: f64) -> String {
    if (tokens - tokens.round()).abs() < 1e-6 {
        format!("{}", tokens.round())
    } else {
        format!("{tokens:.2}")
    }
}

/// `1 token`, `2.50 tokens`, `3 entries`.
fn show_count(count: f64, what: &str) -> String {
    let name = match ((count - 1.0).abs() < 1e-6, what.strip_suffix('y')) {
        (true, _) => what.to_owned(),
        (false, Some(stem)) => format!("{stem}ies"),
        (false, None) => format!("{what}s"),
    };
    format!("{} {name}", show_tokens(count))
}

fn show_rate(per_second: f64) -> String {
    if per_second >= 1.0 {
        format!("{} a second", show_tokens(per_second))
    } else {
        format!("one every {}", show_wait_f(1000.0 / per_second))
    }
}

fn show_wait(ms: u64) -> String {
    show_wait_f(ms as f64)
}

/// `250 ms`, `12.5 s`, `4m 05s`, `2h 03m`, `3d 04h`.
fn show_wait_f(ms: f64) -> String {
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

/// `bytes` in lower-case hexadecimal.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: i64 = 1_000_000_000;
    const MINUTE: i128 = 60 * SECOND as i128;

    #[test]
    fn a_token_bucket_refills_from_its_stored_time() {
        let now = 1_800_000_000 * SECOND;
        // 1 token 10 s ago, 3 per minute: 1.5 now.
        let stored = format!("1 {}", now - 10 * SECOND);
        let (state, remaining, full) = token_bucket(Some(&stored), now, MINUTE, 3, 3);
        assert_eq!(state.stored, "decoded");
        assert_eq!(remaining, 1);
        assert_eq!(full, 30_000);
        let Detail::TokenBucket {
            tokens,
            next_refill_ms,
            ..
        } = state.detail
        else {
            panic!("{state:?}")
        };
        assert!((tokens - 1.5).abs() < 1e-9);
        assert_eq!(next_refill_ms, Some(10_000));
        let (state, remaining, full) = token_bucket(Some("many"), now, MINUTE, 3, 3);
        assert_eq!((state.stored, remaining, full), ("unreadable", 3, 0));
    }

    #[test]
    fn a_gcra_tat_is_in_units_of_one_over_the_limit() {
        let now = 1_800_000_000 * SECOND;
        // 3 per minute, burst 3: a TAT 40 s ahead leaves one token.
        let tat = (i128::from(now) + 40 * i128::from(SECOND)) * 3;
        let (state, remaining, full) = gcra(Some(&tat.to_string()), now, MINUTE, 3, 3);
        assert_eq!((state.stored, remaining, full), ("decoded", 1, 40_000));
        let Detail::Gcra { next_refill_ms, .. } = state.detail else {
            panic!("{state:?}")
        };
        assert_eq!(next_refill_ms, Some(20_000));
    }

    #[test]
    fn a_sliding_log_counts_the_entries_in_the_period() {
        let now = 1_800_000_000 * SECOND;
        let first = now - 70 * SECOND;
        let mut bytes = vec![1];
        bytes.extend_from_slice(&first.to_le_bytes());
        // 70 s ago (out of the period), 50 s ago, and 1 ns later.
        let gap: u64 = 20 * SECOND as u64;
        let mut rest = gap;
        loop {
            let byte = (rest & 0x7f) as u8;
            rest >>= 7;
            if rest == 0 {
                bytes.push(byte);
                break;
            }
            bytes.push(byte | 0x80);
        }
        bytes.push(1);
        let (state, remaining, full) = sliding_log(Some(&bytes), now, MINUTE, 3);
        assert_eq!((state.stored, remaining), ("decoded", 1));
        assert_eq!(full, 10_000);
        let Detail::SlidingLog {
            stored_entries,
            in_window,
            next_refill_ms,
            ..
        } = state.detail
        else {
            panic!("{state:?}")
        };
        assert_eq!((stored_entries, in_window), (Some(3), 2));
        assert_eq!(next_refill_ms, Some(10_000));
        assert_eq!(decode_log(&[2], 3), None);
        assert_eq!(decode_log(&[1, 0, 0], 3), None);
    }

    #[test]
    fn a_hybrid_quota_reads_by_its_mode() {
        let now = 1_800_000_000 * SECOND;
        let bursty = format!("b 1 {}", now - 15 * SECOND);
        let (state, remaining, full) = hybrid_quota(Some(&bursty), now, MINUTE, 3);
        assert_eq!((state.stored, remaining, full), ("decoded", 1, 45_000));
        let over = format!("b 1 {}", now - 61 * SECOND);
        let (_, remaining, full) = hybrid_quota(Some(&over), now, MINUTE, 3);
        assert_eq!((remaining, full), (3, 0));
        // Smooth, at −0.5 10 s ago: 3 per minute earns 0.5, so 0 now.
        let smooth = format!("s -0.5 {}", now - 10 * SECOND);
        let (state, remaining, full) = hybrid_quota(Some(&smooth), now, MINUTE, 3);
        assert_eq!((remaining, full), (0, 60_000));
        let Detail::HybridQuota { next_refill_ms, .. } = state.detail else {
            panic!("{state:?}")
        };
        assert_eq!(next_refill_ms, Some(20_000));
    }

    #[test]
    fn no_stored_value_makes_it_panic() {
        let now = 1_800_000_000 * SECOND;
        for value in [
            "170141183460469231731687303715884105727",
            "-170141183460469231731687303715884105728",
            "3 9223372036854775807",
            "-3 -9223372036854775808",
            "b 3 -9223372036854775808",
            "s -3 9223372036854775807",
            "b 3 9223372036854775807",
            "",
            " ",
        ] {
            for limit in [1, 3, u64::MAX >> 8] {
                let _ = token_bucket(Some(value), now, MINUTE, limit, limit);
                let _ = gcra(Some(value), now, MINUTE, limit, limit);
                let _ = hybrid_quota(Some(value), now, MINUTE, limit);
            }
        }
        let mut far = vec![1];
        far.extend_from_slice(&i64::MAX.to_le_bytes());
        for bytes in [&[][..], &[1], &far, &[1, 0xff, 0xff], &[1; 40]] {
            let _ = sliding_log(Some(bytes), now, MINUTE, 10);
        }
    }

    #[test]
    fn waits_read_as_people_say_them() {
        assert_eq!(show_wait(250), "250 ms");
        assert_eq!(show_wait(65_300), "1m 05s");
        assert_eq!(show_wait(12_500), "12.5 s");
        assert_eq!(show_wait(7_380_000), "2h 03m");
    }
}
