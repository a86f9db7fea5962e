//! The limiter an operator command works on: the configuration file, the
//! environment, then the flags.
//!
//! The file and the environment are read by the library
//! ([`Config::from_toml_with_env`]), whose errors name the file's field or
//! the variable. The flags are applied afterwards, each parsed and checked
//! here, so an error about a flag names the flag.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use memcache_ratelimit::algorithm::Estimator;
use memcache_ratelimit::config::Config;
use memcache_ratelimit::store::Store;
use memcache_ratelimit::{
    Algorithm, ConfigError, LimiterSpec, MemcachedStore, MemoryStore, Quota, RateLimiter,
};

use crate::watch::Watched;

/// Which limiter: as a service configures it, then overridden by flags.
#[derive(Debug, Args)]
pub struct Target {
    /// The configuration file (TOML), as the service reads it.
    #[arg(long, env = "MEMCACHE_RATELIMIT_CONFIG")]
    config: Option<PathBuf>,
    /// memcached servers, comma separated (host:port,...); required, here,
    /// in the configuration file or in MEMCACHE_RATELIMIT_SERVERS.
    #[arg(long)]
    servers: Option<String>,
    /// The quota, such as 100/minute.
    #[arg(long, conflicts_with = "plan")]
    quota: Option<String>,
    /// The algorithm: sliding_window, fixed_window, token_bucket, gcra,
    /// sliding_log or hybrid_quota. Another algorithm than the
    /// configuration's takes its default parameters.
    #[arg(long)]
    algorithm: Option<String>,
    /// The sliding window's sub-windows.
    #[arg(long)]
    sub_windows: Option<u32>,
    /// How the sliding window weighs its oldest sub-window: uniform, or
    /// moment (from the offsets its counter also sums).
    #[arg(long)]
    estimator: Option<String>,
    /// The key namespace.
    #[arg(long)]
    namespace: Option<String>,
    /// Use the quota of this plan of the configuration.
    #[arg(long)]
    plan: Option<String>,
}

/// The variable naming the servers, which `--servers` overrides.
const SERVERS_VARIABLE: &str = "MEMCACHE_RATELIMIT_SERVERS";

/// What to tell an operator who named no server.
pub const NO_SERVERS: &str = "no memcached servers named, so nothing shared would be checked: \
give --servers host:port[,host:port...], `servers = [...]` in the --config file, \
or MEMCACHE_RATELIMIT_SERVERS (`check --embedded` decides against an in-process store \
that nothing else shares)";

/// The configured limiter, with the store it runs on.
pub struct Configured {
    /// What the limiter was built from: the configuration's, with the
    /// flags applied.
    pub spec: LimiterSpec,
    pub limiter: RateLimiter,
    /// The memcached store; `None` for the embedded one.
    pub memcached: Option<Arc<MemcachedStore>>,
    /// Every store call the limiter makes, watched for failures.
    pub watched: Arc<Watched>,
}

/// `error`, said to be about `flag` given as `value`.
fn flag_error(flag: &str, value: &str, error: impl std::fmt::Display) -> String {
    format!("{flag}: {value}: {error}")
}

/// The algorithm names, for an error.
fn algorithm_names() -> String {
    let names: Vec<&str> = Algorithm::ALL.iter().map(Algorithm::name).collect();
    names.join(", ")
}

/// `host:port`, with a port number: a server address as the library takes
/// it.
fn is_host_port(server: &str) -> bool {
    server
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())
}

impl Target {
    /// The servers `--servers` names, checked; `None` without the flag.
    fn flag_servers(&self) -> Result<Option<Vec<String>>, String> {
        let Some(text) = &self.servers else {
            return Ok(None);
        };
        let servers: Vec<String> = text
            .split(',')
            .map(str::trim)
            .filter(|server| !server.is_empty())
            .map(str::to_owned)
            .collect();
        if servers.is_empty() {
            return Err(flag_error(
                "--servers",
                &format!("{text:?}"),
                "names no server; give host:port[,host:port...]",
            ));
        }
        if let Some(bad) = servers.iter().find(|server| !is_host_port(server)) {
            let which = match servers.len() {
                1 => String::new(),
                _ => format!("{bad:?} "),
            };
            return Err(flag_error(
                "--servers",
                &format!("{text:?}"),
                format!("{which}is not host:port (such as 127.0.0.1:11211)"),
            ));
        }
        Ok(Some(servers))
    }

    /// The configuration's algorithm with `--algorithm` and
    /// `--sub-windows` applied. The same algorithm keeps the
    /// configuration's parameters (a token bucket's capacity, GCRA's
    /// burst, the sub-windows); another one takes its defaults.
    fn algorithm(&self, configured: Algorithm) -> Result<Algorithm, String> {
        let algorithm = match &self.algorithm {
            None => configured,
            Some(name) => {
                let chosen = Algorithm::from_name(name.trim()).ok_or_else(|| {
                    flag_error(
                        "--algorithm",
                        &format!("{name:?}"),
                        format!("is not one of {}", algorithm_names()),
                    )
                })?;
                if chosen.name() == configured.name() {
                    configured
                } else {
                    chosen
                }
            }
        };
        match (self.sub_windows, algorithm) {
            (None, algorithm) => Ok(algorithm),
            (Some(n), Algorithm::SlidingWindow { .. }) => {
                Ok(Algorithm::SlidingWindow { sub_windows: n })
            }
            (Some(n), other) => {
                let whence = match self.algorithm {
                    Some(_) => "given by --algorithm",
                    None => "of the configuration",
                };
                Err(flag_error(
                    "--sub-windows",
                    &n.to_string(),
                    format!(
                        "the {} algorithm ({whence}) has no sub-windows; only sliding_window takes them",
                        other.name()
                    ),
                ))
            }
        }
    }

    /// The quota: `--quota`, or `--plan`'s, or the configuration's.
    fn quota(&self, config: &Config) -> Result<Quota, String> {
        if let Some(text) = &self.quota {
            return text
                .parse::<Quota>()
                .map_err(|error| flag_error("--quota", &format!("{text:?}"), error));
        }
        match &self.plan {
            None => Ok(config.quota()),
            Some(name) => config.plan(name).ok_or_else(|| {
                let plans: Vec<&str> = config.plans().keys().map(String::as_str).collect();
                let known = match plans.is_empty() {
                    true => "the configuration has no [plans]".to_owned(),
                    false => format!("the configuration's plans are {}", plans.join(", ")),
                };
                flag_error(
                    "--plan",
                    &format!("{name:?}"),
                    format!("no such plan; {known}"),
                )
            }),
        }
    }

    /// A limiter setting the library rejected, blamed on the first flag
    /// given among those that set it: the setting's own flag first, then
    /// the ones it depends on. With none of them given, the error is the
    /// configuration's own.
    fn blame(&self, error: ConfigError) -> String {
        let quota = self
            .quota
            .as_ref()
            .map(|text| ("--quota", format!("{text:?}")))
            .or_else(|| {
                self.plan
                    .as_ref()
                    .map(|name| ("--plan", format!("{name:?}")))
            });
        let algorithm = self
            .algorithm
            .as_ref()
            .map(|name| ("--algorithm", format!("{name:?}")));
        let sub_windows = self.sub_windows.map(|n| ("--sub-windows", n.to_string()));
        let namespace = self
            .namespace
            .as_ref()
            .map(|text| ("--namespace", format!("{text:?}")));
        let field = error.field();
        let candidates = match field {
            "namespace" => vec![namespace],
            "sub_windows" => vec![sub_windows, quota, algorithm],
            _ => vec![quota, algorithm],
        };
        // The settings each flag sets, in the library's words.
        let sets = |flag: &str| match flag {
            "--quota" | "--plan" => ["quota", "limit", "period"].contains(&field),
            "--sub-windows" => field == "sub_windows",
            "--namespace" => field == "namespace",
            _ => false,
        };
        match candidates.into_iter().flatten().next() {
            Some((flag, value)) if sets(flag) => flag_error(flag, &value, error),
            Some((flag, value)) => {
                flag_error(flag, &value, format!("{error} ({field} as configured)"))
            }
            None => error.to_string(),
        }
    }

    /// Reads the configuration and builds the limiter. Without servers it
    /// is an error, unless `embedded` allows the in-process store (which
    /// nothing else shares).
    pub async fn build(&self, embedded: bool) -> Result<Configured, Box<dyn std::error::Error>> {
        let text = match &self.config {
            Some(path) => std::fs::read_to_string(path)
                .map_err(|error| format!("cannot read {}: {error}", path.display()))?,
            None => String::new(),
        };
        let config = Config::from_toml_with_env(&text, std::env::vars())?;

        // The flags, each checked before anything connects.
        let servers = self.flag_servers()?;
        let algorithm = self.algorithm(config.spec().algorithm())?;
        let quota = self.quota(&config)?;
        let mut spec = config
            .spec()
            .clone()
            .with_algorithm(algorithm)
            .with_quota(quota);
        if let Some(namespace) = &self.namespace {
            spec = spec.namespace(namespace.clone());
        }
        if let Some(text) = &self.estimator {
            if algorithm.sub_windows().is_none() {
                return Err(flag_error(
                    "--estimator",
                    &format!("{text:?}"),
                    format!(
                        "the {} algorithm has no sub-windows to weigh; only sliding_window takes it",
                        algorithm.name()
                    ),
                )
                .into());
            }
            let estimator = text
                .parse::<Estimator>()
                .map_err(|reason| flag_error("--estimator", &format!("{text:?}"), reason))?;
            spec = spec.estimator(estimator);
        }
        // The limiter's own checks (sub-windows that divide the period, a
        // valid namespace...), on a throwaway store, before connecting.
        spec.build(Arc::new(MemoryStore::new()))
            .map_err(|error| self.blame(error))?;

        // `--servers` overrides MEMCACHE_RATELIMIT_SERVERS as any flag
        // overrides its variable: the configuration is read again with
        // them as that variable, and the library builds the store from it
        // with the client settings (`[memcached]`).
        let memcached = match servers {
            Some(servers) => {
                let flag = (SERVERS_VARIABLE.to_owned(), servers.join(","));
                let vars = std::env::vars().chain(std::iter::once(flag));
                Config::from_toml_with_env(&text, vars)?
                    .memcached_store()
                    .await?
            }
            None => config.memcached_store().await?,
        };
        let store: Arc<dyn Store> = match (&memcached, embedded) {
            (Some(store), _) => store.clone(),
            (None, true) => Arc::new(MemoryStore::new()),
            (None, false) => return Err(NO_SERVERS.into()),
        };
        let watched = Arc::new(Watched::new(store));
        let limiter = spec
            .build(watched.clone())
            .map_err(|error| self.blame(error))?;
        Ok(Configured {
            spec,
            limiter,
            memcached,
            watched,
        })
    }
}
