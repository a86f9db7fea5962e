//! The compare-and-swap algorithms' states, as stored and as of the
//! reading: one decoder for each algorithm's format, and what they share.
//! A value that does not decode is `unreadable`, and read as a new
//! client's, as the library reads it.

mod discrete_refill;
mod gcra;
mod hybrid_quota;
mod sliding_log;
mod token_bucket;

use serde::Serialize;

pub use discrete_refill::{discrete_refill, sessionize};
pub use gcra::gcra;
pub use hybrid_quota::hybrid_quota;
pub use sliding_log::sliding_log;
pub use token_bucket::token_bucket;

/// Slack for comparisons of token counts, as the library's.
const EPSILON: f64 = 1e-9;

/// A compare-and-swap algorithm's state, as stored and as of the reading.
#[derive(Debug, Serialize)]
pub struct State {
    /// `absent` (a new client), `decoded`, or `unreadable` (not this
    /// algorithm's state: the limiter takes it for a new client's).
    pub stored: &'static str,
    #[serde(flatten)]
    pub detail: Detail,
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Detail {
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
    DiscreteRefill {
        refill: u64,
        refill_every_ms: f64,
        stored_tokens: Option<u64>,
        stored_mark_unix_ms: Option<i64>,
        /// The refill mark as of the reading: moved by the whole periods
        /// since the stored one.
        mark_unix_ms: i64,
        tokens: u64,
        next_refill_ms: Option<u64>,
        full_in_ms: u64,
        /// Sessionize's state (`ds1`), not the discrete refill's (`dr1`).
        #[serde(skip)]
        sessionize: bool,
        /// Sessionize's stored session start.
        #[serde(skip_serializing_if = "Option::is_none")]
        session_start_unix_ms: Option<i64>,
    },
}

impl Detail {
    /// Milliseconds until one more request fits (`None` when full), and
    /// until the whole limit is available again.
    pub fn refill(&self) -> (Option<u64>, u64) {
        match self {
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
            }
            | Detail::DiscreteRefill {
                next_refill_ms,
                full_in_ms,
                ..
            } => (*next_refill_ms, *full_in_ms),
        }
    }

    /// The most the state holds: the capacity, the burst or the quota's
    /// `limit`.
    pub fn most(&self, limit: u64) -> u64 {
        match self {
            Detail::TokenBucket { capacity, .. } => *capacity,
            Detail::Gcra { burst, .. } => *burst,
            _ => limit,
        }
    }
}

/// A state, what is left for a request now, and the milliseconds until
/// the whole limit is available again.
pub type Decoded = (State, u64, u64);

/// `detail` of a value `stored` as [`stored_as`] says, with `remaining`
/// left now.
fn decoded(stored: &'static str, detail: Detail, remaining: u64) -> Decoded {
    let (_, full_in) = detail.refill();
    (State { stored, detail }, remaining, full_in)
}

/// Whether a value was read, decoded or not.
fn stored_as<V, T>(value: Option<V>, decoded: &Option<T>) -> &'static str {
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

/// Nanoseconds to earn `tokens` at `rate` tokens per nanosecond.
fn wait(tokens: f64, rate: f64) -> u128 {
    if tokens <= EPSILON {
        0
    } else {
        (tokens / rate).ceil().min(u64::MAX as f64) as u128
    }
}

/// Nanoseconds until `tokens`, earned at `rate` tokens per nanosecond,
/// reach the next whole token (at most `most`).
fn next_whole_wait(tokens: f64, most: f64, rate: f64) -> u128 {
    let next_whole = (whole(tokens) as f64 + 1.0).min(most);
    wait(next_whole - tokens, rate)
}

/// What the decoders' tests share: the moment they read at, its units,
/// and a decoded state in brief.
#[cfg(test)]
mod fixtures {
    use super::Decoded;

    pub const SECOND: i64 = 1_000_000_000;
    pub const MINUTE: i128 = 60 * SECOND as i128;
    pub const NOW: i64 = 1_800_000_000 * SECOND;

    /// Whether the value decoded, what remains, the milliseconds until
    /// the whole limit is back and until the next refill.
    pub fn summary(decoded: &Decoded) -> (&'static str, u64, u64, Option<u64>) {
        let (state, remaining, full_in) = decoded;
        let (next_refill, _) = state.detail.refill();
        (state.stored, *remaining, *full_in, next_refill)
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{MINUTE, NOW};
    use super::*;

    #[test]
    fn no_stored_value_makes_it_panic() {
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
                let _ = token_bucket(Some(value), NOW, MINUTE, limit, limit);
                let _ = gcra(Some(value), NOW, MINUTE, limit, limit);
                let _ = hybrid_quota(Some(value), NOW, MINUTE, limit);
                let _ = discrete_refill(Some(value), NOW, MINUTE, limit, limit);
                let _ = discrete_refill(Some(&format!("dr1 {value}")), NOW, MINUTE, limit, 1);
                let _ = sessionize(Some(&format!("ds1 {value} 0")), NOW, MINUTE, limit, 1);
            }
        }
        let mut far = vec![1];
        far.extend_from_slice(&i64::MAX.to_le_bytes());
        for bytes in [&[][..], &[1], &far, &[1, 0xff, 0xff], &[1; 40]] {
            let _ = sliding_log(Some(bytes), NOW, MINUTE, 10);
        }
    }
}
