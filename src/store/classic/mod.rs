//! [`ClassicStore`]: memcached over the classic text protocol.

mod connection;
mod pool;
mod reply;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use self::connection::{protocol, Connection};
use self::pool::{Checkout, Pools};
use super::detach::detached;
use super::router::ClientRouter;
use super::{
    check_key, check_value, is_host_port, parse_counter, wire_ttl, Counters, PutCondition,
    PutOutcome, Store, Versioned, DEFAULT_DRAIN_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
};
use crate::error::{StoreError, StoreErrorKind};

/// The default bound on one call's exchange with a server.
const DEFAULT_IO_TIMEOUT: Duration = Duration::from_secs(1);
/// The default bound on opening a connection.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Idle connections kept per server by default.
const DEFAULT_MAX_IDLE: usize = 64;
/// `incr` / `add` rounds before a missing counter is reported: each lost
/// `add` means another process created the counter, so the next `incr`
/// finds it unless it was deleted again at once.
const CREATE_ROUNDS: usize = 3;

/// Builds a [`ClassicStore`].
#[derive(Debug, Clone)]
#[must_use]
pub struct ClassicStoreBuilder {
    servers: Vec<String>,
    io_timeout: Duration,
    connect_timeout: Duration,
    drain_timeout: Duration,
    max_connections: usize,
    max_idle: usize,
}

impl ClassicStoreBuilder {
    /// Adds a server (`host:port`): a memcached, or a proxy in front of
    /// several.
    pub fn server(mut self, address: impl Into<String>) -> Self {
        self.servers.push(address.into());
        self
    }

    /// Adds servers; keys are placed on them by [`ClientRouter`], all the
    /// keys of one client on one server.
    pub fn servers<S: Into<String>>(mut self, addresses: impl IntoIterator<Item = S>) -> Self {
        self.servers.extend(addresses.into_iter().map(Into::into));
        self
    }

    /// The bound on one call's exchange with its server (default 1 s).
    pub fn io_timeout(mut self, timeout: Duration) -> Self {
        self.io_timeout = timeout;
        self
    }

    /// The bound on opening a connection (default 1 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Idle connections kept per server (default 64).
    pub fn max_idle(mut self, connections: usize) -> Self {
        self.max_idle = connections;
        self
    }

    /// The most connections open to one server at once, busy or idle
    /// (default [`DEFAULT_MAX_CONNECTIONS`], at least 1). A call that
    /// finds them all busy waits for one, up to the connect timeout.
    ///
    /// [`DEFAULT_MAX_CONNECTIONS`]: crate::store::DEFAULT_MAX_CONNECTIONS
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
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }

    /// The store. Connections are opened on first use; at least one server
    /// is needed, each `host:port`.
    pub fn build(self) -> Result<ClassicStore, StoreError> {
        if self.servers.is_empty() {
            return Err(StoreError::new(
                StoreErrorKind::Config,
                "a classic store needs at least one server",
            ));
        }
        if let Some(bad) = self.servers.iter().find(|server| !is_host_port(server)) {
            return Err(StoreError::new(
                StoreErrorKind::Config,
                format!("{bad:?} is not host:port"),
            ));
        }
        if self.max_connections == 0 {
            return Err(StoreError::new(
                StoreErrorKind::Config,
                "max_connections must be at least 1",
            ));
        }
        for (name, value) in [
            ("connect_timeout", self.connect_timeout),
            ("io_timeout", self.io_timeout),
        ] {
            if value.is_zero() {
                return Err(StoreError::new(
                    StoreErrorKind::Config,
                    format!("{name} must be longer than zero"),
                ));
            }
        }
        Ok(ClassicStore {
            pools: Arc::new(Pools::new(
                &self.servers,
                self.max_connections,
                self.max_idle,
                self.connect_timeout,
            )),
            servers: self.servers,
            io_timeout: self.io_timeout,
            exchange_bound: self.io_timeout.saturating_add(self.drain_timeout),
        })
    }
}

/// A memcached store over the classic text protocol (`incr`, `add`, `get`,
/// `gets`, `cas`, `delete`), for what does not pass the meta protocol
/// through: twemproxy (nutcracker), mcrouter, memcached before 1.6.
///
/// Each call is one write of every command it needs, then the replies
/// read in order, on a pooled connection of the key's server: the
/// increment of a window decision and the reads of its older buckets go
/// together. A missing counter costs more: `incr` answers `NOT_FOUND`, the
/// store sends `add` with the delta and the lifetime, and if another
/// process created the counter in between (`NOT_STORED`), `incr` again, so
/// no count is lost.
///
/// Connections per server are bounded
/// ([`max_connections`](ClassicStoreBuilder::max_connections)), and an
/// exchange whose caller stops waiting goes on in the background until its
/// replies are read ([`drain_timeout`](ClassicStoreBuilder::drain_timeout)),
/// so a server that hangs for a while costs no new connections: the ones
/// that waited are used again once it answers.
///
/// ```no_run
/// use memcache_ratelimit::store::ClassicStore;
/// use memcache_ratelimit::{RateLimiter, SlidingWindow};
/// use std::sync::Arc;
///
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// // A twemproxy listening on 22121 in front of the memcached fleet.
/// let store = ClassicStore::builder().server("127.0.0.1:22121").build()?;
/// let limiter = SlidingWindow::builder("100/minute".parse()?, Arc::new(store))
///     .sub_windows(4)
///     .build()?;
/// limiter.check(b"alice").await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct ClassicStore {
    servers: Vec<String>,
    pools: Arc<Pools>,
    /// How long a caller waits for its exchange.
    io_timeout: Duration,
    /// How long an exchange may go on, its caller gone or not, before its
    /// connection is closed.
    exchange_bound: Duration,
}

impl ClassicStore {
    /// Starts building a store.
    pub fn builder() -> ClassicStoreBuilder {
        ClassicStoreBuilder {
            servers: Vec::new(),
            io_timeout: DEFAULT_IO_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_idle: DEFAULT_MAX_IDLE,
        }
    }

    /// The servers, as configured.
    pub fn servers(&self) -> &[String] {
        &self.servers
    }

    /// Round trips made so far: writes sent, each followed by reading its
    /// replies. A window decision is 1, plus 1 or 2 when it creates its
    /// counter (`add`, and `incr` again if another process created it
    /// first).
    pub fn round_trips(&self) -> u64 {
        self.pools.round_trips.load(Ordering::Relaxed)
    }

    /// The server that holds `key`.
    pub fn server_for(&self, key: &[u8]) -> &str {
        &self.servers[self.home(key)]
    }

    /// Checks that every server answers (`version`).
    pub async fn ping(&self) -> Result<(), StoreError> {
        for server in 0..self.servers.len() {
            self.with_connection(server, false, move |mut connection| async move {
                connection.send(b"version\r\n").await?;
                let line = connection.line().await?;
                if !line.starts_with(b"VERSION ") {
                    return Err(protocol(format!(
                        "unexpected reply to version: {:?}",
                        String::from_utf8_lossy(&line)
                    )));
                }
                Ok((connection, ()))
            })
            .await?;
        }
        Ok(())
    }

    fn home(&self, key: &[u8]) -> usize {
        match self.servers.len() {
            1 => 0,
            _ => ClientRouter::place(key, &self.servers),
        }
    }

    /// `keys` by the server that holds them, with their positions.
    fn by_server<'k>(&self, keys: &'k [Vec<u8>]) -> BTreeMap<usize, Vec<(usize, &'k [u8])>> {
        let mut groups: BTreeMap<usize, Vec<(usize, &[u8])>> = BTreeMap::new();
        for (at, key) in keys.iter().enumerate() {
            groups.entry(self.home(key)).or_default().push((at, key));
        }
        groups
    }

    /// Runs `work` on a connection to `server`; the caller waits up to the
    /// I/O timeout. Once the connection is taken the exchange is
    /// [`detached`]: if the caller stops waiting, it goes on in the
    /// background within `exchange_bound`, and its connection goes back to
    /// the pool if the work succeeds. An error once `writes` were sent is
    /// ambiguous.
    async fn with_connection<T, F, Fut>(
        &self,
        server: usize,
        writes: bool,
        work: F,
    ) -> Result<T, StoreError>
    where
        F: FnOnce(Connection) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(Connection, T), StoreError>> + Send + 'static,
        T: Send + 'static,
    {
        let checkout = self.pools.checkout(server).await?;
        let exchange = detached(exchange(
            Arc::clone(&self.pools),
            server,
            checkout,
            self.exchange_bound,
            work,
        ));
        let outcome = match tokio::time::timeout(self.io_timeout, exchange).await {
            Ok(outcome) => outcome,
            Err(_) => Err(StoreError::new(
                StoreErrorKind::Timeout,
                format!(
                    "{} did not answer within {:?}",
                    self.servers[server], self.io_timeout
                ),
            )),
        };
        match outcome {
            Ok(value) => Ok(value),
            // What the server refused is a definite answer, not a lost one.
            Err(error) if writes && error.kind() != StoreErrorKind::Rejected => {
                Err(error.ambiguous())
            }
            Err(error) => Err(error),
        }
    }

    /// Reads `keys`, all on `server`, as counters.
    async fn read_counters(
        &self,
        server: usize,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<u64>>, StoreError> {
        let mut request = Vec::new();
        get_command(&mut request, b"get", keys);
        let items = self
            .with_connection(server, false, move |mut connection| async move {
                {
                    connection.send(&request).await?;
                }
                let items = reply::items(&mut connection).await?;
                Ok((connection, items))
            })
            .await?;
        keys.iter()
            .map(|key| {
                items
                    .get(*key)
                    .map(|item| parse_counter(key, &item.value))
                    .transpose()
            })
            .collect()
    }
}

/// One exchange on a taken connection, bounded by `bound`: the
/// connection goes back to the pool if `work` succeeds, and is closed
/// otherwise, since its stream may then be mid-reply.
async fn exchange<T, F, Fut>(
    pools: Arc<Pools>,
    server: usize,
    checkout: Checkout,
    bound: Duration,
    work: F,
) -> Result<T, StoreError>
where
    F: FnOnce(Connection) -> Fut,
    Fut: Future<Output = Result<(Connection, T), StoreError>>,
{
    let (connection, slot) = checkout.into_parts();
    match tokio::time::timeout(bound, work(connection)).await {
        Ok(Ok((connection, value))) => {
            pools.give_back(server, connection, slot);
            Ok(value)
        }
        Ok(Err(error)) => Err(error),
        Err(_) => Err(StoreError::new(
            StoreErrorKind::Timeout,
            format!("no answer within {bound:?}; the connection was closed"),
        )),
    }
}

fn get_command(request: &mut Vec<u8>, verb: &[u8], keys: &[&[u8]]) {
    let mut parts: Vec<&[u8]> = Vec::with_capacity(keys.len() + 1);
    parts.push(verb);
    parts.extend_from_slice(keys);
    reply::command(request, &parts);
}

#[async_trait]
impl Store for ClassicStore {
    async fn increment(
        &self,
        key: &[u8],
        delta: u64,
        ttl: Duration,
        also_read: &[Vec<u8>],
    ) -> Result<Counters, StoreError> {
        check_key(key)?;
        for other in also_read {
            check_key(other)?;
        }
        let server = self.home(key);
        let together = also_read.iter().all(|other| self.home(other) == server);
        let reads: Vec<&[u8]> = if together {
            also_read.iter().map(Vec::as_slice).collect()
        } else {
            Vec::new()
        };
        let reading = !reads.is_empty();
        let delta_text = delta.to_string();
        let mut request = Vec::new();
        reply::command(&mut request, &[b"incr", key, delta_text.as_bytes()]);
        if reading {
            get_command(&mut request, b"get", &reads);
        }
        let ttl = wire_ttl(ttl);
        let key = key.to_vec();
        let (value, items) = self
            .with_connection(server, true, move |mut connection| async move {
                {
                    connection.send(&request).await?;
                }
                let incremented = reply::arithmetic(&mut connection).await;
                // The reads' replies follow whatever the increment answered.
                let items = match reading {
                    true => reply::items(&mut connection).await?,
                    false => Default::default(),
                };
                let mut value = incremented?;
                let mut rounds = 0;
                while value.is_none() && rounds < CREATE_ROUNDS {
                    rounds += 1;
                    let mut add = Vec::new();
                    reply::storage(&mut add, b"add", &key, ttl, delta_text.as_bytes(), None);
                    connection.send(&add).await?;
                    if reply::stored(&mut connection).await? {
                        value = Some(delta);
                    } else {
                        // Another process created it first: add to theirs.
                        let mut again = Vec::new();
                        reply::command(&mut again, &[b"incr", &key, delta_text.as_bytes()]);
                        connection.send(&again).await?;
                        value = reply::arithmetic(&mut connection).await?;
                    }
                }
                let value = value.ok_or_else(|| {
                    protocol(format!(
                        "{} kept disappearing between incr and add",
                        String::from_utf8_lossy(&key)
                    ))
                })?;
                Ok((connection, (value, items)))
            })
            .await?;
        let read = if together {
            also_read
                .iter()
                .map(|other| {
                    items
                        .get(other)
                        .map(|item| parse_counter(other, &item.value))
                        .transpose()
                })
                .collect::<Result<_, _>>()?
        } else {
            self.get_counters(also_read).await?
        };
        Ok(Counters { value, read })
    }

    async fn decrement(&self, key: &[u8], delta: u64) -> Result<Option<u64>, StoreError> {
        check_key(key)?;
        let delta = delta.to_string();
        let mut request = Vec::new();
        reply::command(&mut request, &[b"decr", key, delta.as_bytes()]);
        self.with_connection(self.home(key), true, move |mut connection| async move {
            {
                connection.send(&request).await?;
            }
            let value = reply::arithmetic(&mut connection).await?;
            Ok((connection, value))
        })
        .await
    }

    async fn get_counters(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<u64>>, StoreError> {
        for key in keys {
            check_key(key)?;
        }
        let mut counters = vec![None; keys.len()];
        for (server, group) in self.by_server(keys) {
            let group_keys: Vec<&[u8]> = group.iter().map(|(_, key)| *key).collect();
            let read = self.read_counters(server, &group_keys).await?;
            for ((at, _), value) in group.into_iter().zip(read) {
                counters[at] = value;
            }
        }
        Ok(counters)
    }

    async fn get(&self, key: &[u8]) -> Result<Option<Versioned>, StoreError> {
        check_key(key)?;
        let mut request = Vec::new();
        get_command(&mut request, b"gets", &[key]);
        let mut items = self
            .with_connection(self.home(key), false, move |mut connection| async move {
                {
                    connection.send(&request).await?;
                }
                let items = reply::items(&mut connection).await?;
                Ok((connection, items))
            })
            .await?;
        let Some(item) = items.remove(key) else {
            return Ok(None);
        };
        let version = item
            .version
            .ok_or_else(|| protocol("gets answered without a CAS unique".to_owned()))?;
        Ok(Some(Versioned {
            value: item.value,
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
        let mut request = Vec::new();
        let ttl = wire_ttl(ttl);
        match condition {
            PutCondition::Always => reply::storage(&mut request, b"set", key, ttl, value, None),
            PutCondition::Absent => reply::storage(&mut request, b"add", key, ttl, value, None),
            PutCondition::Version(version) => {
                reply::storage(&mut request, b"cas", key, ttl, value, Some(version))
            }
        }
        let stored = self
            .with_connection(self.home(key), true, move |mut connection| async move {
                {
                    connection.send(&request).await?;
                }
                let stored = reply::stored(&mut connection).await?;
                Ok((connection, stored))
            })
            .await?;
        Ok(match stored {
            true => PutOutcome::Stored,
            false => PutOutcome::Conflict,
        })
    }

    async fn delete(&self, keys: &[Vec<u8>]) -> Result<usize, StoreError> {
        for key in keys {
            check_key(key)?;
        }
        let mut deleted = 0;
        for (server, group) in self.by_server(keys) {
            let mut request = Vec::new();
            for (_, key) in &group {
                reply::command(&mut request, &[b"delete", key]);
            }
            let count = group.len();
            deleted += self
                .with_connection(server, true, move |mut connection| async move {
                    {
                        connection.send(&request).await?;
                    }
                    let mut existed = 0;
                    for _ in 0..count {
                        existed += usize::from(reply::deleted(&mut connection).await?);
                    }
                    Ok((connection, existed))
                })
                .await?;
        }
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_without_servers_or_with_a_bad_address_is_rejected_when_built() {
        let kind = |builder: ClassicStoreBuilder| builder.build().unwrap_err().kind();
        assert_eq!(kind(ClassicStore::builder()), StoreErrorKind::Config);
        for bad in ["localhost", ":11211", "host:port", "10.0.0.1:70000"] {
            assert_eq!(
                kind(ClassicStore::builder().server(bad)),
                StoreErrorKind::Config,
                "{bad}"
            );
        }
        let store = ClassicStore::builder()
            .servers(["10.0.0.1:11211", "10.0.0.2:11211"])
            .build()
            .unwrap();
        // All the keys of one client on one server.
        assert_eq!(
            store.server_for(b"rl:alice_202611220107"),
            store.server_for(b"rl:alice_202611220108-15s")
        );
    }
}
