//! Prometheus metrics on `--metrics ADDR`: what the server decided, how
//! long each decision took, and the library's own counters, over HTTP in
//! Prometheus's text format (`metrics-exporter-prometheus`).
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `ratelimit_server_decisions_total` | counter | `command`, `outcome` = `allowed`, `denied`, `read` or `error` |
//! | `ratelimit_server_decision_seconds` | histogram | `command` |
//! | `ratelimit_server_connections` | gauge | |
//! | `ratelimit_server_connections_rejected_total` | counter | |
//! | `ratelimit_server_protocol_errors_total` | counter | |
//! | `ratelimit_decisions_total`, `ratelimit_store_failures_total`, ... | counter | `limiter` = `serve` (the library's [`LimiterStats::record`](memcache_ratelimit::limiter::LimiterStats::record), every few seconds) |

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

use crate::shared::Shared;
use crate::stats::Outcome;

const DECISION_SECONDS: &str = "ratelimit_server_decision_seconds";

/// From 50 µs to 1 s: an embedded decision, a memcached round trip, a
/// deadline.
const BUCKETS: [f64; 12] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.1, 0.25, 1.0,
];

/// How often the library's counters are copied to the metrics.
const EVERY: Duration = Duration::from_secs(5);

/// Serves the metrics on `address`, from now on, for this process.
pub fn install(address: &str) -> Result<(), String> {
    let address: SocketAddr = address
        .parse()
        .map_err(|error| format!("--metrics {address}: {error}"))?;
    PrometheusBuilder::new()
        .with_http_listener(address)
        .set_buckets_for_metric(Matcher::Full(DECISION_SECONDS.to_owned()), &BUCKETS)
        .and_then(PrometheusBuilder::install)
        .map_err(|error| format!("--metrics {address}: {error}"))
}

/// Counts one decision of `command`, which took `took`.
pub fn decision(command: &'static str, outcome: Outcome, took: Duration) {
    let outcome = match outcome {
        Outcome::Allowed => "allowed",
        Outcome::Denied => "denied",
        Outcome::Read => "read",
        Outcome::Error => "error",
    };
    metrics::counter!("ratelimit_server_decisions_total", "command" => command, "outcome" => outcome)
        .increment(1);
    metrics::histogram!(DECISION_SECONDS, "command" => command).record(took.as_secs_f64());
}

/// Copies the server's and the library's counters to the metrics every
/// few seconds, until the process ends.
pub fn spawn_updates(shared: Arc<Shared>) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(EVERY);
        loop {
            every.tick().await;
            shared.limiters.stats().record("serve");
            let stats = &shared.stats;
            metrics::gauge!("ratelimit_server_connections").set(stats.connected() as f64);
            metrics::counter!("ratelimit_server_connections_rejected_total")
                .absolute(stats.connections_rejected.get());
            metrics::counter!("ratelimit_server_protocol_errors_total")
                .absolute(stats.protocol_errors.get());
        }
    });
}
