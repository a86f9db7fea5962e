//! [`MemcachedStoreBuilder`]: the settings of a [`MemcachedStore`], checked
//! when it is built.

use std::sync::Arc;
use std::time::Duration;

use super::pool::Pools;
use memcache::exp::AsyncMetaClient;

use super::classic::ClassicStore;
use super::meta::pipeline::Pipeline;
use super::meta::MetaStore;
use super::protocol::{detect, Protocol};
use super::router::ClientRouter;
use super::{Backend, MemcachedStore};
use crate::error::{StoreError, StoreErrorKind};
use crate::store::{
    DEFAULT_DRAIN_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_PIPELINE_BATCH, DEFAULT_PIPELINE_DEPTH,
};
use crate::timer::TimerQueue;

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
    pipeline_batch: usize,
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
            pipeline_batch: DEFAULT_PIPELINE_BATCH,
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

    /// How long an exchange whose caller stopped waiting (its I/O timeout
    /// or a limiter's deadline passed) goes on in the background from then,
    /// to read its replies and keep its connection (default
    /// [`DEFAULT_DRAIN_TIMEOUT`]). Meanwhile it holds its connection slot,
    /// so a server that hangs costs no new connections; past this bound the
    /// connection is closed.
    ///
    /// A pipelined batch that carries several callers' calls gets the I/O
    /// timeout and this together, from when it is sent.
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
    ///
    /// memcached serves each connection on one of its worker threads
    /// (`-t`, 4 by default), so more batches in flight than it has threads
    /// add no throughput, only more, smaller batches: match it to `-t`.
    /// On a memcached `-t 1` sharing a CPU with this process, a depth of 1
    /// decided 12% (pipeline of 16) to 30% (no pipelining) more
    /// `RL.REDUCE`/s through the RESP server than the default, with about
    /// a third of the context switches (see BENCHMARKS.md).
    #[must_use]
    pub fn pipeline_depth(mut self, batches: usize) -> Self {
        self.pipeline_depth = batches;
        self
    }

    /// With pipelining, the most operations one batch carries (default
    /// 128); a call with more operations still goes out, alone. Bigger batches cost memcached and this
    /// process fewer system calls and context switches per operation, and
    /// make the calls queued for them wait longer.
    ///
    /// ```
    /// use memcache_ratelimit::store::MemcachedStore;
    ///
    /// // One memcached -t 1 on the same machine: one batch at a time, big.
    /// let builder = MemcachedStore::builder()
    ///     .server("127.0.0.1:11211")
    ///     .pipeline_depth(1)
    ///     .pipeline_batch(1_024);
    /// # let _ = builder;
    /// ```
    #[must_use]
    pub fn pipeline_batch(mut self, operations: usize) -> Self {
        self.pipeline_batch = operations;
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
        self.check()?;
        let protocol = match self.protocol {
            Protocol::Detect => {
                detect(&self.servers[0], self.connect_timeout + self.io_timeout).await?
            }
            chosen => chosen,
        };
        let backend = match protocol {
            Protocol::Classic => Backend::Classic(Arc::new(
                ClassicStore::builder()
                    .servers(self.servers.iter().cloned())
                    .connect_timeout(self.connect_timeout)
                    .io_timeout(self.io_timeout)
                    .drain_timeout(self.drain_timeout)
                    .max_connections(self.max_connections)
                    .max_idle(self.max_idle)
                    .build()?,
            )),
            _ => Backend::Meta(self.meta().await?),
        };
        Ok(MemcachedStore {
            servers: self.servers,
            backend,
        })
    }

    fn check(&self) -> Result<(), StoreError> {
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
        for (name, value) in [
            ("pipeline_depth", self.pipeline_depth),
            ("pipeline_batch", self.pipeline_batch),
        ] {
            if value == 0 {
                return Err(config(format!("{name} must be at least 1")));
            }
        }
        let mut seen = std::collections::HashSet::new();
        for server in &self.servers {
            if !seen.insert(server) {
                return Err(config(format!("server {server} is listed twice")));
            }
        }
        Ok(())
    }

    /// The meta-protocol backend: the connection pools, the pipeline over
    /// them, and the `memcache` client for the health check.
    async fn meta(&self) -> Result<MetaStore, StoreError> {
        let exchange_bound = self.io_timeout.saturating_add(self.drain_timeout);
        let client = AsyncMetaClient::builder()
            .router(ClientRouter)
            .connect_timeout(Some(self.connect_timeout))
            .io_timeout(Some(exchange_bound))
            .max_idle(1)
            .max_connections(Some(self.max_connections))
            .connect_multiple_async(self.servers.iter().map(String::as_str))
            .await
            .map_err(|error| {
                StoreError::new(
                    StoreErrorKind::Config,
                    format!("cannot resolve {:?}: {error}", self.servers),
                )
                .caused_by(error)
            })?;
        let pools = Arc::new(Pools::new(
            &self.servers,
            self.max_connections,
            self.max_idle,
            self.connect_timeout,
        ));
        let pipeline = self.pipelining.then(|| {
            let depth = self.pipeline_depth.min(self.max_connections);
            Pipeline::new(
                Arc::clone(&pools),
                exchange_bound,
                self.drain_timeout,
                depth,
                self.pipeline_batch,
            )
        });
        Ok(MetaStore {
            client,
            pools,
            pipeline,
            io_deadlines: TimerQueue::new(self.io_timeout),
            drain_timeout: self.drain_timeout,
        })
    }
}
