//! The memcached store, on the `memcache` crate's async meta-protocol client.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use memcache::exp::{
    Arithmetic, AsyncMetaClient, Delete, Error as McError, Get, GetStatus, Meta, MutationStatus,
    Op, OpResult, Set, Ttl,
};

use super::router::ClientRouter;
use super::{
    check_key, check_value, parse_counter, ttl_secs, Counters, PutCondition, PutOutcome, Store,
    Versioned,
};
use crate::error::{StoreError, StoreErrorKind};

/// Relative TTLs above this are read by memcached as unix timestamps.
const MAX_RELATIVE_TTL: u64 = 30 * 24 * 3600;

/// A memcached server or fleet, spoken to with the meta protocol.
///
/// Keys are placed by [`ClientRouter`], so all the keys of one client sit
/// on one server and every [`Store`] call is one pipelined round trip to
/// that server. Connections are pooled per server and dialed lazily: a
/// server that is down shows up as an error on the calls placed on it, and
/// the clients placed elsewhere are not affected.
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
    client: AsyncMetaClient,
    servers: Vec<String>,
}

/// Configures a [`MemcachedStore`].
#[derive(Debug, Clone)]
pub struct MemcachedStoreBuilder {
    servers: Vec<String>,
    connect_timeout: Duration,
    io_timeout: Duration,
    max_idle: usize,
    max_connections: Option<usize>,
}

impl Default for MemcachedStoreBuilder {
    fn default() -> Self {
        Self {
            servers: Vec::new(),
            connect_timeout: Duration::from_millis(250),
            io_timeout: Duration::from_millis(500),
            max_idle: 64,
            max_connections: None,
        }
    }
}

impl MemcachedStoreBuilder {
    /// Adds a server, as `host:port`.
    #[must_use]
    pub fn server(mut self, address: impl Into<String>) -> Self {
        self.servers.push(address.into());
        self
    }

    /// Adds several servers, as `host:port`.
    #[must_use]
    pub fn servers<S: Into<String>>(mut self, addresses: impl IntoIterator<Item = S>) -> Self {
        self.servers.extend(addresses.into_iter().map(Into::into));
        self
    }

    /// How long dialing a server may take (default 250 ms).
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one exchange may take (default 500 ms). Limiters also bound
    /// each decision by their own, usually shorter, deadline.
    #[must_use]
    pub fn io_timeout(mut self, timeout: Duration) -> Self {
        self.io_timeout = timeout;
        self
    }

    /// How many idle connections to keep per server (default 64).
    #[must_use]
    pub fn max_idle(mut self, connections: usize) -> Self {
        self.max_idle = connections;
        self
    }

    /// A cap on open connections per server (default none).
    #[must_use]
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = Some(connections);
        self
    }

    /// Validates the configuration and resolves the addresses. Nothing is
    /// dialed yet; see [`MemcachedStore::ping`].
    pub async fn build(self) -> Result<MemcachedStore, StoreError> {
        let config = |reason: String| StoreError::new(StoreErrorKind::Config, reason);
        if self.servers.is_empty() {
            return Err(config("at least one memcached server is required".into()));
        }
        for (name, value) in [
            ("connect_timeout", self.connect_timeout),
            ("io_timeout", self.io_timeout),
        ] {
            if value.is_zero() {
                return Err(config(format!("{name} must be longer than zero")));
            }
        }
        if self.max_connections == Some(0) {
            return Err(config("max_connections must be at least 1".into()));
        }
        let mut seen = std::collections::HashSet::new();
        for server in &self.servers {
            if !seen.insert(server) {
                return Err(config(format!("server {server} is listed twice")));
            }
        }
        let client = AsyncMetaClient::builder()
            .router(ClientRouter)
            .connect_timeout(Some(self.connect_timeout))
            .io_timeout(Some(self.io_timeout))
            .max_idle(self.max_idle)
            .max_connections(self.max_connections)
            .connect_multiple_async(self.servers.iter().map(String::as_str))
            .await
            .map_err(|error| {
                StoreError::new(
                    StoreErrorKind::Config,
                    format!("cannot resolve {:?}: {error}", self.servers),
                )
            })?;
        Ok(MemcachedStore {
            client,
            servers: self.servers,
        })
    }
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
        self.client.noop().await.map_err(to_store_error)
    }
}

impl fmt::Debug for MemcachedStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemcachedStore")
            .field("servers", &self.servers)
            .finish()
    }
}

fn to_store_error(error: McError) -> StoreError {
    let error_kind = kind(&error);
    let store_error = StoreError::new(error_kind, error.to_string());
    if error.is_ambiguous() {
        store_error.ambiguous()
    } else {
        store_error
    }
}

fn kind(error: &McError) -> StoreErrorKind {
    match error {
        McError::Ambiguous { source, .. } => kind(source),
        McError::Io(_) => StoreErrorKind::Io,
        McError::Timeout { .. } => StoreErrorKind::Timeout,
        McError::Server(_) => StoreErrorKind::Server,
        McError::Rejected(_) => StoreErrorKind::Rejected,
        McError::Usage(_) => StoreErrorKind::InvalidKey,
        _ => StoreErrorKind::Protocol,
    }
}

/// The `N` flag's TTL: relative seconds up to 30 days, a unix time beyond.
fn wire_ttl(ttl: Duration) -> u32 {
    let secs = ttl_secs(ttl);
    let secs = if secs > MAX_RELATIVE_TTL {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        now.saturating_add(secs)
    } else {
        secs
    };
    u32::try_from(secs).unwrap_or(u32::MAX)
}

fn counter_from(key: &[u8], result: OpResult) -> Result<Option<u64>, StoreError> {
    match result {
        OpResult::Get(get) if get.status == GetStatus::Hit => {
            parse_counter(key, get.value.as_deref().unwrap_or_default()).map(Some)
        }
        OpResult::Get(_) => Ok(None),
        _ => Err(StoreError::new(
            StoreErrorKind::Protocol,
            "a read answered as a write",
        )),
    }
}

#[async_trait]
impl Store for MemcachedStore {
    async fn increment(
        &self,
        key: &[u8],
        delta: u64,
        ttl: Duration,
        also_read: &[Vec<u8>],
    ) -> Result<Counters, StoreError> {
        check_key(key)?;
        for read in also_read {
            check_key(read)?;
        }
        let increment = Arithmetic::new(key)
            .delta(delta)
            .initial(delta, wire_ttl(ttl));
        let operations = std::iter::once(Op::from(increment))
            .chain(also_read.iter().map(|k| Op::from(Get::new(k))));
        let mut results = self
            .client
            .run_batch(operations)
            .await
            .map_err(to_store_error)?
            .into_iter();
        let value = match results.next() {
            Some(Ok(OpResult::Arithmetic(result))) => result.value.ok_or_else(|| {
                StoreError::new(
                    StoreErrorKind::Protocol,
                    format!(
                        "increment of {} returned no value",
                        String::from_utf8_lossy(key)
                    ),
                )
                .ambiguous()
            })?,
            Some(Ok(_)) | None => {
                return Err(StoreError::new(
                    StoreErrorKind::Protocol,
                    "increment answered out of kind",
                ))
            }
            Some(Err(error)) => return Err(to_store_error(error)),
        };
        let read = also_read
            .iter()
            .zip(results)
            .map(|(k, result)| counter_from(k, result.map_err(to_store_error)?))
            .collect::<Result<_, _>>()?;
        Ok(Counters { value, read })
    }

    async fn decrement(&self, key: &[u8], delta: u64) -> Result<Option<u64>, StoreError> {
        check_key(key)?;
        let result = self
            .client
            .decrement(key)
            .delta(delta)
            .send()
            .await
            .map_err(to_store_error)?;
        Ok(match result.status {
            MutationStatus::NotFound => None,
            _ => result.value,
        })
    }

    async fn get_counters(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<u64>>, StoreError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        for key in keys {
            check_key(key)?;
        }
        let results = self
            .client
            .run_batch(keys.iter().map(|k| Op::from(Get::new(k))))
            .await
            .map_err(to_store_error)?;
        keys.iter()
            .zip(results)
            .map(|(k, result)| counter_from(k, result.map_err(to_store_error)?))
            .collect()
    }

    async fn get(&self, key: &[u8]) -> Result<Option<Versioned>, StoreError> {
        check_key(key)?;
        let result = self
            .client
            .run(Get::new(key).meta(Meta::NONE.cas()))
            .await
            .map_err(to_store_error)?;
        if result.status != GetStatus::Hit {
            return Ok(None);
        }
        let version = result.item.cas.ok_or_else(|| {
            StoreError::new(StoreErrorKind::Protocol, "read returned no CAS token")
        })?;
        Ok(Some(Versioned {
            value: result.value.unwrap_or_default(),
            version,
        }))
    }

    async fn put(
        &self,
        key: &[u8],
        value: &[u8],
        ttl: Duration,
        condition: PutCondition,
    ) -> Result<PutOutcome, StoreError> {
        check_key(key)?;
        check_value(value)?;
        let secs = u32::try_from(ttl_secs(ttl)).unwrap_or(u32::MAX);
        let set = Set::new(key, value).ttl(Ttl::secs(secs));
        let set = match condition {
            PutCondition::Always => set,
            PutCondition::Absent => set.add(),
            PutCondition::Version(version) => set.compare_cas(version),
        };
        let result = self.client.run(set).await.map_err(to_store_error)?;
        Ok(match result.status {
            MutationStatus::Applied => PutOutcome::Stored,
            _ => PutOutcome::Conflict,
        })
    }

    async fn delete(&self, keys: &[Vec<u8>]) -> Result<usize, StoreError> {
        if keys.is_empty() {
            return Ok(0);
        }
        for key in keys {
            check_key(key)?;
        }
        let results = self
            .client
            .run_many(keys.iter().map(Delete::new))
            .await
            .map_err(to_store_error)?;
        let mut deleted = 0;
        for result in results {
            if result.map_err(to_store_error)?.applied() {
                deleted += 1;
            }
        }
        Ok(deleted)
    }
}
