//! The configuration as written: TOML fields and environment variables,
//! still text, with where each value came from.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::error::ConfigError;

/// The file's fields, all optional; unknown fields are errors.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct File {
    pub(super) servers: Option<Vec<String>>,
    pub(super) namespace: Option<String>,
    pub(super) quota: Option<String>,
    pub(super) algorithm: Option<String>,
    pub(super) sub_windows: Option<u32>,
    pub(super) estimator: Option<String>,
    pub(super) capacity: Option<u64>,
    pub(super) burst: Option<u64>,
    pub(super) refill_amount: Option<u64>,
    pub(super) restart_when_empty: Option<bool>,
    pub(super) failure_policy: Option<String>,
    pub(super) fallback_share: Option<f64>,
    pub(super) deadline: Option<String>,
    pub(super) max_clock_skew: Option<String>,
    pub(super) denied_requests: Option<String>,
    pub(super) memcached: Option<Memcached>,
    pub(super) plans: Option<BTreeMap<String, String>>,
}

/// The `[memcached]` table: the client's own settings.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Memcached {
    pub(super) connect_timeout: Option<String>,
    pub(super) io_timeout: Option<String>,
    pub(super) max_connections: Option<usize>,
    pub(super) drain_timeout: Option<String>,
    pub(super) protocol: Option<String>,
}

/// The prefix of every environment variable the configuration reads.
pub const ENV_PREFIX: &str = "MEMCACHE_RATELIMIT_";

/// A parsed file, with the fields the environment set instead.
#[derive(Debug, Default)]
pub(super) struct Written {
    pub(super) file: File,
    /// Field name to the variable that set it.
    pub(super) from_env: BTreeMap<&'static str, String>,
}

impl Written {
    /// Parses TOML text; a syntax error, a wrong type or an unknown field
    /// is an error naming the field's path.
    pub(super) fn parse(text: &str) -> Result<Self, ConfigError> {
        let file = serde_path_to_error::deserialize(toml::Deserializer::new(text)).map_err(
            |error: serde_path_to_error::Error<toml::de::Error>| {
                let path = error.path().to_string();
                let inner = error.into_inner();
                let field = if path == "." { "toml".to_owned() } else { path };
                ConfigError::new(field, inner.message().to_owned() + &location(text, &inner))
            },
        )?;
        Ok(Self {
            file,
            from_env: BTreeMap::new(),
        })
    }

    /// Sets fields from `MEMCACHE_RATELIMIT_*` variables among `vars`;
    /// others are ignored, and an unknown `MEMCACHE_RATELIMIT_*` variable is
    /// an error, so a misspelt one is not silently without effect.
    pub(super) fn override_with(
        mut self,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        for (name, value) in vars {
            let Some(field) = name.strip_prefix(ENV_PREFIX) else {
                continue;
            };
            let file = &mut self.file;
            let number = |value: &str| {
                value.trim().parse::<u64>().map_err(|_| {
                    ConfigError::new(name.clone(), format!("{value:?} is not a whole number"))
                })
            };
            let field: &'static str = match field {
                "SERVERS" => {
                    file.servers = Some(
                        value
                            .split(',')
                            .map(str::trim)
                            .filter(|s| !s.is_empty())
                            .map(str::to_owned)
                            .collect(),
                    );
                    "servers"
                }
                "NAMESPACE" => set(&mut file.namespace, value, "namespace"),
                "QUOTA" => set(&mut file.quota, value, "quota"),
                "ALGORITHM" => set(&mut file.algorithm, value, "algorithm"),
                "ESTIMATOR" => set(&mut file.estimator, value, "estimator"),
                "FAILURE_POLICY" => set(&mut file.failure_policy, value, "failure_policy"),
                "DEADLINE" => set(&mut file.deadline, value, "deadline"),
                "MAX_CLOCK_SKEW" => set(&mut file.max_clock_skew, value, "max_clock_skew"),
                "DENIED_REQUESTS" => set(&mut file.denied_requests, value, "denied_requests"),
                "PROTOCOL" => {
                    let table = file.memcached.get_or_insert_with(Default::default);
                    set(&mut table.protocol, value, "memcached.protocol")
                }
                "SUB_WINDOWS" => {
                    let n = u32::try_from(number(&value)?).map_err(|_| {
                        ConfigError::new(name.clone(), format!("{value} is too large"))
                    })?;
                    file.sub_windows = Some(n);
                    "sub_windows"
                }
                "CAPACITY" => {
                    file.capacity = Some(number(&value)?);
                    "capacity"
                }
                "BURST" => {
                    file.burst = Some(number(&value)?);
                    "burst"
                }
                "REFILL_AMOUNT" => {
                    file.refill_amount = Some(number(&value)?);
                    "refill_amount"
                }
                "RESTART_WHEN_EMPTY" => {
                    let flag = value.trim().parse::<bool>().map_err(|_| {
                        ConfigError::new(
                            name.clone(),
                            format!("{value:?} is neither true nor false"),
                        )
                    })?;
                    file.restart_when_empty = Some(flag);
                    "restart_when_empty"
                }
                "FALLBACK_SHARE" => {
                    let share = value.trim().parse::<f64>().map_err(|_| {
                        ConfigError::new(name.clone(), format!("{value:?} is not a number"))
                    })?;
                    file.fallback_share = Some(share);
                    "fallback_share"
                }
                // The file's own path, read by whoever loads the file.
                "CONFIG" => continue,
                _ => {
                    return Err(ConfigError::new(
                        name.clone(),
                        "is not a setting this library reads (misspelt?)",
                    ))
                }
            };
            self.from_env.insert(field, name);
        }
        Ok(self)
    }

    /// An error about `field`, naming the variable that set it if one did.
    pub(super) fn error(&self, field: &'static str, message: String) -> ConfigError {
        match self.from_env.get(field) {
            Some(var) => ConfigError::new(format!("{field} (from {var})"), message),
            None => ConfigError::new(field, message),
        }
    }
}

fn set(slot: &mut Option<String>, value: String, field: &'static str) -> &'static str {
    *slot = Some(value);
    field
}

/// ` at line L, column C` for a TOML error with a position in `text`.
fn location(text: &str, error: &toml::de::Error) -> String {
    let Some(span) = error.span() else {
        return String::new();
    };
    let before = &text[..span.start.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |at| at + 1) + 1;
    format!(" (line {line}, column {column})")
}
