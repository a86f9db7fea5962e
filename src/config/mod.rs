//! Limiters configured from a TOML file and the environment (cargo
//! feature `config`).
//!
//! The text is parsed once, at start-up, into typed values ([`Config`]),
//! and everything is checked then: a wrong type, an unknown field, a
//! quota, duration or policy that does not parse, a parameter the
//! algorithm does not take, or a plan the algorithm cannot hold. Every
//! error names the field (its path in the file, such as `plans.pro`, and
//! the environment variable when one set it).
//!
//! ```toml
//! servers = ["10.0.0.1:11211", "10.0.0.2:11211"]  # absent or empty: the embedded store
//! namespace = "api"
//! quota = "100/minute"
//! algorithm = "sliding_window"   # fixed_window, token_bucket, gcra, sliding_log, hybrid_quota, discrete_refill, sessionize
//! sub_windows = 12               # sliding_window; `capacity` for token_bucket, `burst` for gcra,
//!                                # `refill_amount` and `restart_when_empty` for discrete_refill,
//!                                # `refill_amount` for sessionize
//! estimator = "moment"           # sliding_window: uniform (default) or moment
//! failure_policy = "fallback"    # open (default), closed, return_error, fallback
//! fallback_share = 0.25          # with fallback: this instance's share of the quota
//! deadline = "50ms"
//! max_clock_skew = "2s"
//! denied_requests = "refunded"   # or counted
//!
//! [memcached]
//! connect_timeout = "1s"
//! io_timeout = "1s"
//! max_connections = 64
//! drain_timeout = "5s"           # how long a timed-out exchange may finish, keeping its connection
//! protocol = "meta"             # classic for twemproxy, mcrouter, memcached < 1.6; or detect
//!
//! [plans]                        # quotas by plan, for a DynamicLimiter
//! free = "100/hour"
//! pro = "10000/hour"
//! ```
//!
//! Environment variables `MEMCACHE_RATELIMIT_SERVERS` (comma-separated),
//! `_NAMESPACE`, `_QUOTA`, `_ALGORITHM`, `_SUB_WINDOWS`, `_ESTIMATOR`, `_CAPACITY`,
//! `_BURST`, `_REFILL_AMOUNT`, `_RESTART_WHEN_EMPTY` (`true` or `false`),
//! `_FAILURE_POLICY`, `_FALLBACK_SHARE`, `_DEADLINE`,
//! `_MAX_CLOCK_SKEW`, `_DENIED_REQUESTS` and `_PROTOCOL` override the file;
//! `MEMCACHE_RATELIMIT_CONFIG` names the file for [`Config::load`].

mod file;
mod typed;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub use file::ENV_PREFIX;

use crate::error::{ConfigError, StoreError};
use crate::limiter::LimiterSpec;
use crate::limiter::RateLimiter;
use crate::limiter::{DynamicLimiter, QuotaResolver};
use crate::quota::Quota;
use crate::store::{MemcachedStore, MemoryStore, Protocol, Store};

/// A whole configuration, parsed and checked; see the
/// [module documentation](self) for the format.
///
/// ```
/// use memcache_ratelimit::config::Config;
/// use memcache_ratelimit::RateLimiter;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let config = Config::from_toml(r#"
///     quota = "2/minute"
///     algorithm = "gcra"
///     burst = 2
///     [plans]
///     pro = "100/minute"
/// "#)?;
/// assert!(config.servers().is_empty());
/// let store = config.store().await?; // the embedded store: no servers
/// let limiter = config.limiter(store)?;
/// assert!(limiter.check(b"alice").await?.is_allowed());
///
/// let error = Config::from_toml("quota = \"100/fortnight\"").unwrap_err();
/// assert_eq!(error.field(), "quota");
/// let error = Config::from_toml("[plans]\npro = \"0/minute\"").unwrap_err();
/// assert_eq!(error.field(), "plans.pro");
/// let error = Config::from_toml_with_env("", [("MEMCACHE_RATELIMIT_DEADLINE".into(), "soon".into())]).unwrap_err();
/// assert_eq!(error.field(), "deadline (from MEMCACHE_RATELIMIT_DEADLINE)");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct Config {
    servers: Vec<String>,
    memcached: MemcachedOptions,
    plans: BTreeMap<String, Quota>,
    spec: LimiterSpec,
}

/// The memcached client's own settings, from `[memcached]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemcachedOptions {
    /// How long a connection may take to open.
    pub connect_timeout: Option<Duration>,
    /// How long one exchange may take.
    pub io_timeout: Option<Duration>,
    /// The most connections per server.
    pub max_connections: Option<usize>,
    /// How long past the I/O timeout an exchange whose caller stopped
    /// waiting may go on, to keep its connection.
    pub drain_timeout: Option<Duration>,
    /// The protocol: `meta` (default), `classic` (twemproxy, mcrouter,
    /// memcached before 1.6) or `detect`; see [`Protocol`].
    pub protocol: Protocol,
}

impl Config {
    /// Parses TOML text; the environment is not read.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        Self::from_toml_with_env(text, std::iter::empty())
    }

    /// Parses TOML text, then applies the `MEMCACHE_RATELIMIT_*` variables
    /// among `vars`.
    pub fn from_toml_with_env(
        text: &str,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        typed::check(file::Written::parse(text)?.override_with(vars)?)
    }

    /// Reads the file at `path`, then applies the process's environment.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|error| {
            ConfigError::new("file", format!("cannot read {}: {error}", path.display()))
        })?;
        Self::from_toml_with_env(&text, std::env::vars())
    }

    /// The process's configuration: the file named by
    /// `MEMCACHE_RATELIMIT_CONFIG` if it is set (else nothing but the
    /// defaults), with the environment applied.
    pub fn load() -> Result<Self, ConfigError> {
        match std::env::var_os(format!("{ENV_PREFIX}CONFIG")) {
            Some(path) => Self::from_file(path),
            None => Self::from_toml_with_env("", std::env::vars()),
        }
    }

    /// The memcached servers; empty for the embedded store.
    pub fn servers(&self) -> &[String] {
        &self.servers
    }

    /// The memcached client's settings.
    pub fn memcached(&self) -> MemcachedOptions {
        self.memcached
    }

    /// The quota (default `100/minute`).
    pub fn quota(&self) -> Quota {
        self.spec.quota()
    }

    /// The quota of every plan, by name.
    pub fn plans(&self) -> &BTreeMap<String, Quota> {
        &self.plans
    }

    /// The quota of plan `name`.
    pub fn plan(&self, name: &str) -> Option<Quota> {
        self.plans.get(name).copied()
    }

    /// The limiter of [`quota`](Self::quota): its algorithm and settings,
    /// which every plan's limiter shares
    /// ([`LimiterSpec::with_quota`]).
    pub fn spec(&self) -> &LimiterSpec {
        &self.spec
    }

    /// A store: memcached on the servers with the client settings, or a
    /// new embedded store when there are none.
    pub async fn store(&self) -> Result<Arc<dyn Store>, StoreError> {
        Ok(match self.memcached_store().await? {
            Some(store) => store,
            None => Arc::new(MemoryStore::new()),
        })
    }

    /// The memcached store on the servers with the client settings; `None`
    /// when there are no servers.
    pub async fn memcached_store(&self) -> Result<Option<Arc<MemcachedStore>>, StoreError> {
        if self.servers.is_empty() {
            return Ok(None);
        }
        let mut builder = MemcachedStore::builder().servers(self.servers.iter().cloned());
        let options = self.memcached;
        if let Some(timeout) = options.connect_timeout {
            builder = builder.connect_timeout(timeout);
        }
        if let Some(timeout) = options.io_timeout {
            builder = builder.io_timeout(timeout);
        }
        if let Some(connections) = options.max_connections {
            builder = builder.max_connections(connections);
        }
        if let Some(timeout) = options.drain_timeout {
            builder = builder.drain_timeout(timeout);
        }
        builder = builder.protocol(options.protocol);
        Ok(Some(Arc::new(builder.build().await?)))
    }

    /// The limiter for [`quota`](Self::quota) on `store`.
    pub fn limiter(&self, store: Arc<dyn Store>) -> Result<RateLimiter, ConfigError> {
        self.spec.build(store)
    }

    /// A limiter holding each client to the quota `resolver` picks (the
    /// plans', typically), with every plan's limiter built now.
    pub fn dynamic(
        &self,
        store: Arc<dyn Store>,
        resolver: impl QuotaResolver,
    ) -> Result<DynamicLimiter, ConfigError> {
        DynamicLimiter::new(self.spec.clone(), store, resolver)?
            .prepare(self.plans.values().copied())
    }
}
