//! From text to typed values, every value checked, every error naming its
//! field.

use std::collections::BTreeMap;
use std::time::Duration;

use super::file::Written;
use super::{Config, MemcachedOptions};
use crate::algorithm::{Algorithm, Estimator};
use crate::error::ConfigError;
use crate::http::HeaderPolicy;
use crate::limiter::DeniedRequests;
use crate::limiter::FailurePolicy;
use crate::limiter::LimiterSpec;
use crate::quota::Quota;
use crate::store::{is_host_port, MemoryStore, Protocol};

/// The quota when none is given.
const DEFAULT_QUOTA: &str = "100/minute";

/// Checks every field of `written` and builds the limiter of the quota and
/// of every plan once, so what the algorithm cannot hold fails now.
pub(super) fn check(written: Written) -> Result<Config, ConfigError> {
    let file = &written.file;
    let quota = quota(
        &written,
        "quota",
        file.quota.as_deref().unwrap_or(DEFAULT_QUOTA),
    )?;
    let algorithm = algorithm(&written)?;
    let mut spec = LimiterSpec::new(algorithm, quota);
    if let Some(namespace) = &file.namespace {
        spec = spec.namespace(namespace.clone());
    }
    if let Some(text) = &file.deadline {
        spec = spec.deadline(duration(&written, "deadline", text)?);
    }
    if let Some(text) = &file.max_clock_skew {
        spec = spec.max_clock_skew(duration(&written, "max_clock_skew", text)?);
    }
    if let Some(text) = &file.estimator {
        let estimator = text
            .parse::<Estimator>()
            .map_err(|reason| written.error("estimator", reason))?;
        spec = spec.estimator(estimator);
    }
    spec = spec.on_failure(failure_policy(&written)?);
    spec = spec.denied_requests(match file.denied_requests.as_deref() {
        None | Some("refunded") => DeniedRequests::Refunded,
        Some("counted") => DeniedRequests::Counted,
        Some(other) => {
            return Err(written.error(
                "denied_requests",
                format!("{other:?} is neither \"refunded\" nor \"counted\""),
            ))
        }
    });

    let mut plans = BTreeMap::new();
    for (name, text) in file.plans.iter().flatten() {
        let field = format!("plans.{name}");
        HeaderPolicy::new(name, Quota::per_second(std::num::NonZeroU64::MIN))
            .map_err(|error| ConfigError::new(field.clone(), error.reason().to_owned()))?;
        let parsed = text
            .parse::<Quota>()
            .map_err(|error| ConfigError::new(field.clone(), error.reason().to_owned()))?;
        plans.insert(name.clone(), (field, parsed));
    }

    // Build each limiter once, on a throwaway store: the builders' checks.
    let scratch = std::sync::Arc::new(MemoryStore::new());
    spec.build(scratch.clone())
        .map_err(|error| written.error(field_of(&error), error.reason().to_owned()))?;
    for (field, plan) in plans.values() {
        spec.clone()
            .with_quota(*plan)
            .build(scratch.clone())
            .map_err(|error| {
                ConfigError::new(
                    format!("{field} ({})", error.field()),
                    error.reason().to_owned(),
                )
            })?;
    }

    let memcached = match &file.memcached {
        None => MemcachedOptions::default(),
        Some(table) => MemcachedOptions {
            connect_timeout: table
                .connect_timeout
                .as_deref()
                .map(|text| duration(&written, "memcached.connect_timeout", text))
                .transpose()?,
            io_timeout: table
                .io_timeout
                .as_deref()
                .map(|text| duration(&written, "memcached.io_timeout", text))
                .transpose()?,
            drain_timeout: table
                .drain_timeout
                .as_deref()
                .map(|text| duration(&written, "memcached.drain_timeout", text))
                .transpose()?,
            protocol: match table.protocol.as_deref() {
                None | Some("meta") => Protocol::Meta,
                Some("classic") => Protocol::Classic,
                Some("detect") => Protocol::Detect,
                Some(other) => {
                    return Err(written.error(
                        "memcached.protocol",
                        format!("{other:?} is not one of meta, classic, detect"),
                    ))
                }
            },
            max_connections: match table.max_connections {
                Some(0) => {
                    return Err(
                        written.error("memcached.max_connections", "must be at least 1".to_owned())
                    )
                }
                other => other,
            },
        },
    };
    let servers = file.servers.clone().unwrap_or_default();
    if let Some(bad) = servers.iter().find(|server| !is_host_port(server)) {
        return Err(written.error("servers", format!("{bad:?} is not host:port")));
    }
    Ok(Config {
        servers,
        memcached,
        plans: plans.into_iter().map(|(name, (_, q))| (name, q)).collect(),
        spec,
    })
}

/// The configuration field a builder's error is about: the builders name
/// settings by their own names (`sub_windows`, `burst`, `limit`,
/// `period`...), which are the file's too, except the quota's parts.
fn field_of(error: &ConfigError) -> &'static str {
    match error.field() {
        "sub_windows" => "sub_windows",
        "capacity" => "capacity",
        "burst" => "burst",
        "refill_amount" => "refill_amount",
        "namespace" => "namespace",
        "deadline" => "deadline",
        "max_clock_skew" => "max_clock_skew",
        "failure_policy" => "fallback_share",
        _ => "quota",
    }
}

fn quota(written: &Written, field: &'static str, text: &str) -> Result<Quota, ConfigError> {
    text.parse()
        .map_err(|error: ConfigError| written.error(field, error.reason().to_owned()))
}

fn duration(written: &Written, field: &'static str, text: &str) -> Result<Duration, ConfigError> {
    humantime::parse_duration(text.trim()).map_err(|error| {
        written.error(
            field,
            format!("{text:?} is not a duration such as \"50ms\" or \"2s\": {error}"),
        )
    })
}

fn algorithm(written: &Written) -> Result<Algorithm, ConfigError> {
    let file = &written.file;
    let name = file.algorithm.as_deref().unwrap_or("sliding_window");
    let Some(algorithm) = Algorithm::from_name(name) else {
        let names: Vec<&str> = Algorithm::ALL.iter().map(Algorithm::name).collect();
        return Err(written.error(
            "algorithm",
            format!("{name:?} is not one of {}", names.join(", ")),
        ));
    };
    // A parameter of another algorithm is a mistake, not something to ignore.
    for (field, given, taken) in [
        (
            "sub_windows",
            file.sub_windows.is_some(),
            matches!(algorithm, Algorithm::SlidingWindow { .. }),
        ),
        (
            "estimator",
            file.estimator.is_some(),
            matches!(algorithm, Algorithm::SlidingWindow { .. }),
        ),
        (
            "capacity",
            file.capacity.is_some(),
            matches!(algorithm, Algorithm::TokenBucket { .. }),
        ),
        (
            "burst",
            file.burst.is_some(),
            matches!(algorithm, Algorithm::Gcra { .. }),
        ),
        (
            "refill_amount",
            file.refill_amount.is_some(),
            matches!(
                algorithm,
                Algorithm::DiscreteRefill { .. } | Algorithm::Sessionize { .. }
            ),
        ),
        (
            "restart_when_empty",
            file.restart_when_empty.is_some(),
            matches!(algorithm, Algorithm::DiscreteRefill { .. }),
        ),
    ] {
        if given && !taken {
            return Err(written.error(field, format!("the {name} algorithm does not take it")));
        }
    }
    Ok(match algorithm {
        Algorithm::SlidingWindow { sub_windows } => Algorithm::SlidingWindow {
            sub_windows: file.sub_windows.unwrap_or(sub_windows),
        },
        Algorithm::TokenBucket { .. } => Algorithm::TokenBucket {
            capacity: file.capacity,
        },
        Algorithm::Gcra { .. } => Algorithm::Gcra { burst: file.burst },
        Algorithm::DiscreteRefill {
            restart_when_empty, ..
        } => Algorithm::DiscreteRefill {
            refill: file.refill_amount,
            restart_when_empty: file.restart_when_empty.unwrap_or(restart_when_empty),
        },
        Algorithm::Sessionize { .. } => Algorithm::Sessionize {
            refill: file.refill_amount,
        },
        other => other,
    })
}

fn failure_policy(written: &Written) -> Result<FailurePolicy, ConfigError> {
    let file = &written.file;
    let policy = match file.failure_policy.as_deref() {
        None | Some("open") => FailurePolicy::Open,
        Some("closed") => FailurePolicy::Closed,
        Some("return_error") => FailurePolicy::ReturnError,
        Some("fallback") => match file.fallback_share {
            Some(share) => FailurePolicy::Fallback { share },
            None => {
                return Err(written.error(
                    "fallback_share",
                    "the fallback policy needs this instance's share of the quota, in (0, 1]"
                        .to_owned(),
                ))
            }
        },
        Some(other) => {
            return Err(written.error(
                "failure_policy",
                format!("{other:?} is not one of open, closed, return_error, fallback"),
            ))
        }
    };
    if file.fallback_share.is_some() && !matches!(policy, FailurePolicy::Fallback { .. }) {
        return Err(written.error(
            "fallback_share",
            "only the fallback policy takes a share".to_owned(),
        ));
    }
    Ok(policy)
}
