//! The memcached store: a fleet spoken to with the meta protocol
//! ([`meta`]), or with the classic protocol ([`classic`]) for what does not
//! pass the meta protocol through, such as twemproxy.
//!
//! - [`builder`]: the settings, checked when the store is built;
//! - [`connection`] and [`pool`]: one connection read in place, and the
//!   bounded connections per server, for both protocols;
//! - [`meta`] (with its pipeline) and [`detach`]: the meta protocol, how
//!   its calls share round trips, and how an exchange outlives a caller
//!   that stopped waiting;
//! - [`router`]: which server holds a key;
//! - [`protocol`]: the choice between the two protocols;
//! - [`errors`]: the `memcache` client's errors (its health check) as
//!   store errors.

mod builder;
pub(crate) mod classic;
mod connection;
mod detach;
mod errors;
mod meta;
mod pool;
mod protocol;
mod router;
mod slots;
mod wire;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::boxed;

pub use self::builder::MemcachedStoreBuilder;
pub use self::classic::{ClassicStore, ClassicStoreBuilder};
pub use self::meta::pipeline::PipelineStats;
use self::meta::MetaStore;
pub use self::protocol::Protocol;
pub use self::router::ClientRouter;
#[cfg(feature = "config")]
pub(crate) use self::wire::is_host_port;
use super::{by_hand, Counters, PutCondition, PutOutcome, Store, Versioned};
use crate::error::StoreError;

/// The most connections a memcached store keeps open to one server at
/// once, by default, in either protocol
/// ([`MemcachedStoreBuilder::max_connections`],
/// [`ClassicStoreBuilder::max_connections`]).
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;

/// Pipelined batches in flight per memcached server at once, by default
/// ([`MemcachedStoreBuilder::pipeline_depth`]).
pub const DEFAULT_PIPELINE_DEPTH: usize = 4;

/// The most operations one pipelined batch carries, by default
/// ([`MemcachedStoreBuilder::pipeline_batch`]).
pub const DEFAULT_PIPELINE_BATCH: usize = self::meta::pipeline::DEFAULT_BATCH_OPS;

/// How long past its I/O timeout an exchange whose caller stopped waiting
/// goes on in the background by default, to read its replies and keep its
/// connection ([`MemcachedStoreBuilder::drain_timeout`],
/// [`ClassicStoreBuilder::drain_timeout`]).
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// A memcached server or fleet, spoken to with the meta protocol.
///
/// Keys are placed by [`ClientRouter`], so all the keys of one client sit
/// on one server and every [`Store`] call is one pipelined round trip to
/// that server. Connections are pooled per server and dialed lazily: a
/// server that is down shows up as an error on the calls placed on it, and
/// the clients placed elsewhere are not affected.
///
/// **Auto-pipelining** (on by default, see
/// [`MemcachedStoreBuilder::pipelining`]): calls in flight at the same
/// moment toward one server share one batch, one round trip on one
/// connection, so throughput under concurrency is not bounded by one
/// connection per call. A call that finds the server idle goes out at once
/// from its own task, so a lone call is as fast as without pipelining.
/// Each call keeps its own results and errors, and a written operation is
/// never retried. [`MemcachedStore::pipeline_stats`] counts the batches.
/// Pipelining spawns tasks on the caller's tokio runtime while calls queue.
///
/// **Connections** per server are bounded
/// ([`MemcachedStoreBuilder::max_connections`]), and an exchange whose
/// caller stops waiting (its I/O timeout or a limiter's deadline passed)
/// goes on in the background until its replies are read
/// ([`MemcachedStoreBuilder::drain_timeout`]), so a server that hangs for a
/// while costs no new connections: the ones that waited are used again
/// once it answers.
///
/// ```no_run
/// use memcache_ratelimit::store::MemcachedStore;
/// use std::time::Duration;
///
/// # async fn example() -> Result<(), memcache_ratelimit::StoreError> {
/// let store = MemcachedStore::builder()
///     .servers(["10.0.0.1:11211", "10.0.0.2:11211"])
///     .io_timeout(Duration::from_millis(250))
///     .build()
///     .await?;
/// assert_eq!(store.servers().len(), 2);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct MemcachedStore {
    servers: Vec<String>,
    backend: Backend,
}

/// The protocol a [`MemcachedStore`] speaks, and what it needs for it.
#[derive(Clone)]
enum Backend {
    Meta(MetaStore),
    Classic(Arc<ClassicStore>),
}

impl MemcachedStore {
    /// Starts configuring a store.
    pub fn builder() -> MemcachedStoreBuilder {
        MemcachedStoreBuilder::default()
    }

    /// A store on `servers` with the default settings.
    pub async fn connect<S: Into<String>>(
        servers: impl IntoIterator<Item = S>,
    ) -> Result<Self, StoreError> {
        Self::builder().servers(servers).build().await
    }

    /// The servers, as configured.
    pub fn servers(&self) -> &[String] {
        &self.servers
    }

    /// The server that holds `key`.
    pub fn server_for(&self, key: &[u8]) -> &str {
        &self.servers[ClientRouter::place(key, &self.servers)]
    }

    /// Checks that every server answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Meta(meta) => meta.ping().await,
            Backend::Classic(classic) => classic.ping().await,
        }
    }

    /// The protocol the store speaks: [`Protocol::Meta`] or
    /// [`Protocol::Classic`], as chosen or detected.
    pub fn protocol(&self) -> Protocol {
        match self.backend {
            Backend::Meta(_) => Protocol::Meta,
            Backend::Classic(_) => Protocol::Classic,
        }
    }

    /// Whether calls are auto-pipelined (only the meta protocol pipelines).
    pub fn is_pipelining(&self) -> bool {
        match &self.backend {
            Backend::Meta(meta) => meta.is_pipelining(),
            Backend::Classic(_) => false,
        }
    }

    /// What the pipeline has sent so far, summed over servers and shared by
    /// clones of this store; all zero when pipelining is off.
    pub fn pipeline_stats(&self) -> PipelineStats {
        match &self.backend {
            Backend::Meta(meta) => meta.pipeline_stats(),
            Backend::Classic(_) => PipelineStats::default(),
        }
    }

    /// `error`, naming the server of `key` unless the backend named one.
    /// Only a failed call pays for placing the key.
    fn named(&self, error: StoreError, key: &[u8]) -> StoreError {
        error.at(self.server_for(key))
    }

    /// `error`, naming the server of `keys` if they all live on one.
    fn named_all(&self, error: StoreError, keys: &[Vec<u8>]) -> StoreError {
        let mut servers = keys.iter().map(|key| self.server_for(key));
        match servers.next() {
            Some(first) if servers.all(|other| other == first) => error.at(first),
            _ => error,
        }
    }
}

impl fmt::Debug for MemcachedStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemcachedStore")
            .field("servers", &self.servers)
            .field("protocol", &self.protocol())
            .field("pipelining", &self.is_pipelining())
            .finish()
    }
}

/// Every call goes to the backend; its error names the server it came
/// from.
#[async_trait]
impl Store for MemcachedStore {
    // The calls every decision makes are written as `async_trait` writes
    // them, but with their futures built in their boxes (see
    // `crate::boxed`).
    by_hand! {
        fn increment<'life0, 'life1, 'life2, 'life3>(
            &'life0 self,
            key: &'life1 [u8],
            delta: u64,
            ttl: Duration,
            also_read: &'life2 [&'life3 [u8]],
        ) -> Counters {
            boxed::pinned(move || async move {
                match &self.backend {
                    Backend::Meta(meta) => meta.increment(key, delta, ttl, also_read).await,
                    Backend::Classic(classic) => {
                        classic.increment(key, delta, ttl, also_read).await
                    }
                }
                .map_err(|error| self.named(error, key))
            })
        }

        fn get<'life0, 'life1>(&'life0 self, key: &'life1 [u8]) -> Option<Versioned> {
            boxed::pinned(move || async move {
                match &self.backend {
                    Backend::Meta(meta) => meta.get(key).await,
                    Backend::Classic(classic) => classic.get(key).await,
                }
                .map_err(|error| self.named(error, key))
            })
        }

        fn version<'life0, 'life1>(&'life0 self, key: &'life1 [u8]) -> Option<u64> {
            boxed::pinned(move || async move {
                match &self.backend {
                    Backend::Meta(meta) => meta.version(key).await,
                    Backend::Classic(classic) => classic
                        .get(key)
                        .await
                        .map(|stored| stored.map(|stored| stored.version)),
                }
                .map_err(|error| self.named(error, key))
            })
        }

        fn put_versioned<'life0, 'life1, 'life2>(
            &'life0 self,
            key: &'life1 [u8],
            value: &'life2 [u8],
            ttl: Duration,
            condition: PutCondition,
        ) -> (PutOutcome, Option<u64>) {
            boxed::pinned(move || async move {
                match &self.backend {
                    Backend::Meta(meta) => meta.put_versioned(key, value, ttl, condition).await,
                    Backend::Classic(classic) => {
                        classic.put_versioned(key, value, ttl, condition).await
                    }
                }
                .map_err(|error| self.named(error, key))
            })
        }
    }

    async fn decrement(&self, key: &[u8], delta: u64) -> Result<Option<u64>, StoreError> {
        match &self.backend {
            Backend::Meta(meta) => meta.decrement(key, delta).await,
            Backend::Classic(classic) => classic.decrement(key, delta).await,
        }
        .map_err(|error| self.named(error, key))
    }

    async fn get_counters(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<u64>>, StoreError> {
        match &self.backend {
            Backend::Meta(meta) => meta.get_counters(keys).await,
            Backend::Classic(classic) => classic.get_counters(keys).await,
        }
        .map_err(|error| self.named_all(error, keys))
    }

    async fn delete(&self, keys: &[Vec<u8>]) -> Result<usize, StoreError> {
        match &self.backend {
            Backend::Meta(meta) => meta.delete(keys).await,
            Backend::Classic(classic) => classic.delete(keys).await,
        }
        .map_err(|error| self.named_all(error, keys))
    }
}
