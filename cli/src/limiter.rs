//! The limiter an operator command works on: the configuration file, the
//! environment, then the flags.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use memcache_ratelimit::config::{Config, ENV_PREFIX};
use memcache_ratelimit::store::Store;
use memcache_ratelimit::{MemcachedStore, MemoryStore, RateLimiter};

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
    #[arg(long)]
    quota: Option<String>,
    /// The algorithm: sliding_window, fixed_window, token_bucket, gcra,
    /// sliding_log or hybrid_quota.
    #[arg(long)]
    algorithm: Option<String>,
    /// The sliding window's sub-windows.
    #[arg(long)]
    sub_windows: Option<u32>,
    /// The key namespace.
    #[arg(long)]
    namespace: Option<String>,
    /// Use the quota of this plan of the configuration.
    #[arg(long)]
    plan: Option<String>,
}

/// What to tell an operator who named no server.
pub const NO_SERVERS: &str = "no memcached servers named, so nothing shared would be checked: \
give --servers host:port[,host:port...], `servers = [...]` in the --config file, \
or MEMCACHE_RATELIMIT_SERVERS (`check --embedded` decides against an in-process store \
that nothing else shares)";

/// The configured limiter, with the store it runs on.
pub struct Configured {
    pub config: Config,
    pub limiter: RateLimiter,
    /// The memcached store; `None` for the embedded one.
    pub memcached: Option<Arc<MemcachedStore>>,
    /// Every store call the limiter makes, watched for failures.
    pub watched: Arc<Watched>,
}

impl Target {
    /// Reads the configuration and builds the limiter. Without servers it
    /// is an error, unless `embedded` allows the in-process store (which
    /// nothing else shares).
    pub async fn build(&self, embedded: bool) -> Result<Configured, Box<dyn std::error::Error>> {
        let text = match &self.config {
            Some(path) => std::fs::read_to_string(path)
                .map_err(|error| format!("cannot read {}: {error}", path.display()))?,
            None => String::new(),
        };
        let flags = [
            ("SERVERS", self.servers.clone()),
            ("QUOTA", self.quota.clone()),
            ("ALGORITHM", self.algorithm.clone()),
            ("SUB_WINDOWS", self.sub_windows.map(|n| n.to_string())),
            ("NAMESPACE", self.namespace.clone()),
        ]
        .into_iter()
        .filter_map(|(name, value)| Some((format!("{ENV_PREFIX}{name}"), value?)));
        let config = Config::from_toml_with_env(&text, std::env::vars().chain(flags))?;
        let memcached = config.memcached_store().await?;
        let store: Arc<dyn Store> = match (&memcached, embedded) {
            (Some(store), _) => store.clone(),
            (None, true) => Arc::new(MemoryStore::new()),
            (None, false) => return Err(NO_SERVERS.into()),
        };
        let watched = Arc::new(Watched::new(store));
        let quota = match &self.plan {
            None => config.quota(),
            Some(name) => config
                .plan(name)
                .ok_or_else(|| format!("no plan {name:?} in the configuration"))?,
        };
        let limiter = config
            .spec()
            .clone()
            .with_quota(quota)
            .build(watched.clone())?;
        Ok(Configured {
            config,
            limiter,
            memcached,
            watched,
        })
    }
}
