//! The memcached store, on the `memcache` crate's async meta-protocol client.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use memcache::exp::{
    Arithmetic, AsyncMetaClient, Delete, Error as McError, Get, GetStatus, Meta, MutationStatus,
    Op, OpResult, Set,
};
use tokio::sync::Semaphore;

use super::classic::ClassicStore;
use super::detach::detached;
use super::pipeline::{Pipeline, PipelineStats};
use super::protocol::{detect, Protocol};
use super::router::ClientRouter;
use super::{
    check_key, check_value, parse_counter, wire_ttl, Counters, PutCondition, PutOutcome, Store,
    Versioned, DEFAULT_DRAIN_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
};
use crate::error::{StoreError, StoreErrorKind};
use crate::key::routing_prefix;

/// Pipelined batches in flight per server, by default.
const DEFAULT_PIPELINE_DEPTH: usize = 4;

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
    client: AsyncMetaClient,
    servers: Vec<String>,
    /// How long a caller waits for its exchange.
    io_timeout: Duration,
    /// How long a call outside the pipeline waits for a connection slot.
    connect_timeout: Duration,
    max_connections: usize,
    /// Per server, the connection slots of calls that bypass the pipeline;
    /// the pipeline's own batches are bounded by its depth.
    slots: Arc<[Arc<Semaphore>]>,
    /// `None` when pipelining is off.
    pipeline: Option<Pipeline>,
    /// Every call goes here instead when the store speaks the classic
    /// protocol.
    classic: Option<Arc<ClassicStore>>,
}

/// Configures a [`MemcachedStore`].
#[derive(Debug, Clone)]
pub struct MemcachedStoreBuilder {
    servers: Vec<String>,
    connect_timeout: Duration,
    io_timeout: Duration,
    max_idle: usize,
    max_connections: usize,
    drain_timeout: Duration,
    pipelining: bool,
    pipeline_depth: usize,
    protocol: Protocol,
}

impl Default for MemcachedStoreBuilder {
    fn default() -> Self {
        Self {
            servers: Vec::new(),
            connect_timeout: Duration::from_millis(250),
            io_timeout: Duration::from_millis(500),
            max_idle: 64,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            pipelining: true,
            pipeline_depth: DEFAULT_PIPELINE_DEPTH,
            protocol: Protocol::Meta,
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

    /// The most connections open to one server at once, busy or idle
    /// (default [`DEFAULT_MAX_CONNECTIONS`], at least 1). A call that
    /// finds them all busy waits for one, up to the connect timeout.
    ///
    /// [`DEFAULT_MAX_CONNECTIONS`]: crate::store::DEFAULT_MAX_CONNECTIONS
    #[must_use]
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections;
        self
    }

    /// How long past the I/O timeout an exchange whose caller stopped
    /// waiting (its I/O timeout or a limiter's deadline passed) goes on in
    /// the background, to read its replies and keep its connection
    /// (default [`DEFAULT_DRAIN_TIMEOUT`]). Meanwhile it holds its
    /// connection slot, so a server that hangs costs no new connections;
    /// past this bound the connection is closed.
    ///
    /// [`DEFAULT_DRAIN_TIMEOUT`]: crate::store::DEFAULT_DRAIN_TIMEOUT
    #[must_use]
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }

    /// Whether calls in flight at the same moment toward one server share
    /// pipelined batches (default on). Off, every call is its own exchange
    /// on its own pooled connection.
    #[must_use]
    pub fn pipelining(mut self, enabled: bool) -> Self {
        self.pipelining = enabled;
        self
    }

    /// With pipelining, how many batches may be in flight per server at
    /// once (default 4, at most [`max_connections`](Self::max_connections)).
    /// Up to this many concurrent calls each go out at once on their own
    /// connection; beyond it, calls wait for a batch to finish and go out
    /// together in the next one.
    #[must_use]
    pub fn pipeline_depth(mut self, batches: usize) -> Self {
        self.pipeline_depth = batches;
        self
    }

    /// The protocol to speak (default [`Protocol::Meta`]); see
    /// [`Protocol`] for which to use when. [`Protocol::Detect`] asks the
    /// first server when the store is built.
    #[must_use]
    pub fn protocol(mut self, protocol: Protocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// Validates the configuration and resolves the addresses. Nothing is
    /// dialed yet (but for [`Protocol::Detect`], which asks the first
    /// server); see [`MemcachedStore::ping`].
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
        if self.max_connections == 0 {
            return Err(config("max_connections must be at least 1".into()));
        }
        if self.pipeline_depth == 0 {
            return Err(config("pipeline_depth must be at least 1".into()));
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
            // The client bounds the whole exchange, detached or not; the
            // store bounds how long its caller waits.
            .io_timeout(Some(self.io_timeout.saturating_add(self.drain_timeout)))
            .max_idle(self.max_idle)
            .max_connections(Some(self.max_connections))
            .connect_multiple_async(self.servers.iter().map(String::as_str))
            .await
            .map_err(|error| {
                StoreError::new(
                    StoreErrorKind::Config,
                    format!("cannot resolve {:?}: {error}", self.servers),
                )
            })?;
        let pipeline = self.pipelining.then(|| {
            let depth = self.pipeline_depth.min(self.max_connections);
            Pipeline::new(client.clone(), self.servers.clone(), depth)
        });
        let protocol = match self.protocol {
            Protocol::Detect => {
                detect(&self.servers[0], self.connect_timeout + self.io_timeout).await?
            }
            chosen => chosen,
        };
        let classic = match protocol {
            Protocol::Classic => Some(Arc::new(
                ClassicStore::builder()
                    .servers(self.servers.iter().cloned())
                    .connect_timeout(self.connect_timeout)
                    .io_timeout(self.io_timeout)
                    .drain_timeout(self.drain_timeout)
                    .max_connections(self.max_connections)
                    .max_idle(self.max_idle)
                    .build()?,
            )),
            _ => None,
        };
        let slots = self
            .servers
            .iter()
            .map(|_| Arc::new(Semaphore::new(self.max_connections)))
            .collect();
        Ok(MemcachedStore {
            client,
            io_timeout: self.io_timeout,
            connect_timeout: self.connect_timeout,
            max_connections: self.max_connections,
            slots,
            servers: self.servers,
            pipeline: pipeline.filter(|_| classic.is_none()),
            classic,
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
        if let Some(classic) = &self.classic {
            return classic.ping().await;
        }
        match tokio::time::timeout(self.io_timeout, self.client.noop()).await {
            Ok(answered) => answered.map_err(to_store_error),
            Err(_) => Err(self.timed_out(None, false)),
        }
    }

    /// A caller's wait for its exchange with `server` (or with several)
    /// ran out.
    fn timed_out(&self, server: Option<usize>, writes: bool) -> StoreError {
        let who = match server {
            Some(server) => format!("memcached {}", self.servers[server]),
            None => "memcached".to_owned(),
        };
        let error = StoreError::new(
            StoreErrorKind::Timeout,
            format!("{who} did not answer within {:?}", self.io_timeout),
        );
        if writes {
            error.ambiguous()
        } else {
            error
        }
    }

    /// The protocol the store speaks: [`Protocol::Meta`] or
    /// [`Protocol::Classic`], as chosen or detected.
    pub fn protocol(&self) -> Protocol {
        match self.classic {
            Some(_) => Protocol::Classic,
            None => Protocol::Meta,
        }
    }

    /// Whether calls are auto-pipelined.
    pub fn is_pipelining(&self) -> bool {
        self.pipeline.is_some()
    }

    /// What the pipeline has sent so far, summed over servers and shared by
    /// clones of this store; all zero when pipelining is off.
    pub fn pipeline_stats(&self) -> PipelineStats {
        self.pipeline
            .as_ref()
            .map(Pipeline::stats)
            .unwrap_or_default()
    }

    /// The server index of a call on `first` and `rest`, if they all live
    /// on one server (keys sharing a routing prefix always do).
    fn lane(&self, first: &[u8], rest: &[Vec<u8>]) -> Option<usize> {
        if self.servers.len() == 1 {
            return Some(0);
        }
        let prefix = routing_prefix(first);
        let home = ClientRouter::place(first, &self.servers);
        rest.iter()
            .all(|key| {
                routing_prefix(key) == prefix || ClientRouter::place(key, &self.servers) == home
            })
            .then_some(home)
    }

    /// Runs `ops` (on the keys `first` and `rest`) in one round trip: in
    /// the pipeline when they share a server, directly otherwise. One
    /// result per operation, in order.
    async fn exchange(
        &self,
        first: &[u8],
        rest: &[Vec<u8>],
        ops: Vec<Op>,
    ) -> Result<Vec<Result<OpResult, McError>>, StoreError> {
        let expected = ops.len();
        let writes = ops.iter().any(|op| !matches!(op, Op::Get(_)));
        let lane = self
            .pipeline
            .as_ref()
            .and_then(|pipeline| Some((pipeline, self.lane(first, rest)?)));
        let exchange = async {
            match lane {
                Some((pipeline, lane)) => pipeline.run(lane, ops).await,
                None => self.direct(first, rest, ops).await,
            }
        };
        let results = tokio::time::timeout(self.io_timeout, exchange)
            .await
            .map_err(|_| self.timed_out(self.lane(first, rest), writes))??;
        if results.len() != expected {
            let error = StoreError::new(
                StoreErrorKind::Protocol,
                format!("{} results for {expected} operations", results.len()),
            );
            return Err(if writes { error.ambiguous() } else { error });
        }
        Ok(results)
    }
}

impl MemcachedStore {
    /// Runs `ops` outside the pipeline. On one server it takes a connection
    /// slot first, then runs [`detached`], so a caller that stops waiting
    /// leaves the exchange to finish and keep its connection; across
    /// servers it runs in the caller's future.
    async fn direct(
        &self,
        first: &[u8],
        rest: &[Vec<u8>],
        ops: Vec<Op>,
    ) -> Result<Vec<Result<OpResult, McError>>, StoreError> {
        let Some(server) = self.lane(first, rest) else {
            return self.client.run_batch(ops).await.map_err(to_store_error);
        };
        let slot = tokio::time::timeout(
            self.connect_timeout,
            Arc::clone(&self.slots[server]).acquire_owned(),
        )
        .await
        .map_err(|_| {
            StoreError::new(
                StoreErrorKind::Timeout,
                format!(
                    "all {} connections to {} stayed busy for {:?} (max_connections)",
                    self.max_connections, self.servers[server], self.connect_timeout
                ),
            )
        })?
        .map_err(|_| StoreError::new(StoreErrorKind::Io, "the connection pool was closed"))?;
        let client = self.client.clone();
        detached(async move {
            let results = client.run_batch(ops).await.map_err(to_store_error);
            drop(slot);
            results
        })
        .await
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

pub(super) fn to_store_error(error: McError) -> StoreError {
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

/// The one result of a single-operation exchange.
fn only(results: Vec<Result<OpResult, McError>>) -> Result<OpResult, StoreError> {
    results
        .into_iter()
        .next()
        .ok_or_else(|| StoreError::new(StoreErrorKind::Protocol, "no result"))?
        .map_err(to_store_error)
}

fn out_of_kind(what: &str) -> StoreError {
    StoreError::new(
        StoreErrorKind::Protocol,
        format!("{what} answered out of kind"),
    )
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
        if let Some(classic) = &self.classic {
            return classic.increment(key, delta, ttl, also_read).await;
        }
        check_key(key)?;
        for read in also_read {
            check_key(read)?;
        }
        let increment = Arithmetic::new(key)
            .delta(delta)
            .initial(delta, wire_ttl(ttl));
        let operations = std::iter::once(Op::from(increment))
            .chain(also_read.iter().map(|k| Op::from(Get::new(k))))
            .collect();
        let mut results = self.exchange(key, also_read, operations).await?.into_iter();
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
            Some(Ok(_)) | None => return Err(out_of_kind("increment")),
            Some(Err(error)) => return Err(to_store_error(error)),
        };
        // The increment has landed: a read failing now must not pass for
        // a call that did nothing, or a caller might repeat it.
        let read = also_read
            .iter()
            .zip(results)
            .map(|(k, result)| {
                result
                    .map_err(to_store_error)
                    .and_then(|result| counter_from(k, result))
                    .map_err(StoreError::ambiguous)
            })
            .collect::<Result<_, _>>()?;
        Ok(Counters { value, read })
    }

    async fn decrement(&self, key: &[u8], delta: u64) -> Result<Option<u64>, StoreError> {
        if let Some(classic) = &self.classic {
            return classic.decrement(key, delta).await;
        }
        check_key(key)?;
        let decrement = Arithmetic::new(key).decrement().delta(delta);
        let results = self.exchange(key, &[], vec![decrement.into()]).await?;
        let OpResult::Arithmetic(result) = only(results)? else {
            return Err(out_of_kind("decrement").ambiguous());
        };
        Ok(match result.status {
            MutationStatus::NotFound => None,
            _ => result.value,
        })
    }

    async fn get_counters(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<u64>>, StoreError> {
        if let Some(classic) = &self.classic {
            return classic.get_counters(keys).await;
        }
        let Some((first, rest)) = keys.split_first() else {
            return Ok(Vec::new());
        };
        for key in keys {
            check_key(key)?;
        }
        let operations = keys.iter().map(|k| Op::from(Get::new(k))).collect();
        let results = self.exchange(first, rest, operations).await?;
        keys.iter()
            .zip(results)
            .map(|(k, result)| counter_from(k, result.map_err(to_store_error)?))
            .collect()
    }

    async fn get(&self, key: &[u8]) -> Result<Option<Versioned>, StoreError> {
        if let Some(classic) = &self.classic {
            return classic.get(key).await;
        }
        check_key(key)?;
        let read = Get::new(key).meta(Meta::NONE.cas());
        let results = self.exchange(key, &[], vec![read.into()]).await?;
        let OpResult::Get(result) = only(results)? else {
            return Err(out_of_kind("read"));
        };
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
        if let Some(classic) = &self.classic {
            return classic.put(key, value, ttl, condition).await;
        }
        check_key(key)?;
        check_value(value)?;
        let set = Set::new(key, value).ttl_raw(wire_ttl(ttl));
        let set = match condition {
            PutCondition::Always => set,
            PutCondition::Absent => set.add(),
            PutCondition::Version(version) => set.compare_cas(version),
        };
        let results = self.exchange(key, &[], vec![set.into()]).await?;
        let OpResult::Mutation(result) = only(results)? else {
            return Err(out_of_kind("write").ambiguous());
        };
        Ok(match result.status {
            MutationStatus::Applied => PutOutcome::Stored,
            _ => PutOutcome::Conflict,
        })
    }

    async fn delete(&self, keys: &[Vec<u8>]) -> Result<usize, StoreError> {
        if let Some(classic) = &self.classic {
            return classic.delete(keys).await;
        }
        let Some((first, rest)) = keys.split_first() else {
            return Ok(0);
        };
        for key in keys {
            check_key(key)?;
        }
        let operations = keys.iter().map(|k| Op::from(Delete::new(k))).collect();
        let results = self.exchange(first, rest, operations).await?;
        let mut deleted = 0;
        for result in results {
            match result.map_err(to_store_error)? {
                OpResult::Mutation(result) if result.applied() => deleted += 1,
                OpResult::Mutation(_) => {}
                _ => return Err(out_of_kind("delete").ambiguous()),
            }
        }
        Ok(deleted)
    }
}
