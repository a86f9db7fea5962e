//! What `inspect` found, one object: the client, the limiter, the store,
//! the keys as read and what they mean now. `inspect --json` prints it as
//! is, so its field names are stable (see the command's help).

use memcache_ratelimit::algorithm::Estimator;
use memcache_ratelimit::Algorithm;
use serde::Serialize;

use super::buckets::{buckets, Bucket};
use super::read::Reading;
use super::states::{self, State};
use super::units::{millis, nanos, time};
use crate::limiter::Configured;

/// Everything `inspect --json` prints, one object.
#[derive(Debug, Serialize)]
pub struct Report {
    pub client: String,
    pub algorithm: &'static str,
    /// `SlidingWindow n=4`, `TokenBucket capacity=10`...
    pub parameters: String,
    pub quota: String,
    pub limit: u64,
    pub period_ms: u64,
    pub store: &'static str,
    pub servers: Vec<String>,
    pub protocol: String,
    /// RFC 3339, UTC.
    pub read_at: String,
    pub read_at_unix_ms: i64,
    pub keys: Vec<Key>,
    /// The windows' buckets, the current one first; `null` for the
    /// compare-and-swap algorithms.
    pub buckets: Option<Vec<Bucket>>,
    /// The compare-and-swap algorithms' decoded state; `null` for the
    /// windows.
    pub state: Option<State>,
    /// The windows' estimate of the count in the period; `null` for the
    /// compare-and-swap algorithms.
    pub estimate: Option<f64>,
    /// What is left for a request now.
    pub remaining: Option<u64>,
    /// How long until the whole limit is available again.
    pub reset_after_ms: Option<u64>,
}

/// One key, as read.
#[derive(Debug, Serialize)]
pub struct Key {
    pub key: String,
    pub server: String,
    /// `null` when absent.
    pub value: Option<String>,
    /// `text`, or `hex` for a binary value (the sliding log's).
    pub value_encoding: &'static str,
}

impl Report {
    /// What `reading` of `client`'s keys means, for the limiter
    /// `configured`.
    pub fn new(configured: &Configured, client: &[u8], reading: Reading) -> Self {
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
                let packed = spec.estimator_choice() != Estimator::Uniform;
                report.buckets = Some(buckets(&seen, now, period, sub_windows, packed));
                return report;
            }
            Algorithm::FixedWindow => {
                report.buckets = Some(buckets(&seen, now, period, 0, false));
                return report;
            }
            Algorithm::TokenBucket { capacity } => {
                states::token_bucket(value, now, period, limit, capacity.unwrap_or(limit))
            }
            Algorithm::Gcra { burst } => {
                states::gcra(value, now, period, limit, burst.unwrap_or(limit))
            }
            Algorithm::SlidingLog => states::sliding_log(raw.as_deref(), now, period, limit),
            Algorithm::HybridQuota => states::hybrid_quota(value, now, period, limit),
            Algorithm::DiscreteRefill { refill, .. } => {
                states::discrete_refill(value, now, period, limit, refill.unwrap_or(limit))
            }
            Algorithm::Sessionize { refill } => {
                states::sessionize(value, now, period, limit, refill.unwrap_or(limit))
            }
        };
        let (state, remaining, reset) = decoded;
        report.state = Some(state);
        report.remaining = Some(remaining);
        report.reset_after_ms = Some(reset);
        report
    }

    /// The quota's period, as the quota spells it.
    pub fn quota_period(&self) -> &str {
        self.quota
            .split_once('/')
            .map_or(self.quota.as_str(), |(_, period)| period)
    }
}

/// `bytes` in lower-case hexadecimal.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
