//! [`ClassicStoreBuilder`]: the settings of a [`ClassicStore`], checked when
//! it is built.

use std::sync::Arc;
use std::time::Duration;

use super::ClassicStore;
use crate::error::{StoreError, StoreErrorKind};
use crate::store::memcached::pool::Pools;
use crate::store::memcached::wire::is_host_port;
use crate::store::{DEFAULT_DRAIN_TIMEOUT, DEFAULT_MAX_CONNECTIONS};
use crate::timer::TimerQueue;

/// The default bound on one call's exchange with a server.
const DEFAULT_IO_TIMEOUT: Duration = Duration::from_secs(1);
/// The default bound on opening a connection.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Idle connections kept per server by default.
const DEFAULT_MAX_IDLE: usize = 64;

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

    /// Adds servers; keys are placed on them by
    /// [`ClientRouter`](crate::store::ClientRouter), all the
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

    /// How long an exchange whose caller stopped waiting (its I/O timeout
    /// or a limiter's deadline passed) goes on in the background from then,
    /// to read its replies and keep its connection (default
    /// [`DEFAULT_DRAIN_TIMEOUT`]). Meanwhile it holds its connection slot,
    /// so a server that hangs costs no new connections; past this bound the
    /// connection is closed.
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
            io_deadlines: TimerQueue::new(self.io_timeout),
            drain_timeout: self.drain_timeout,
        })
    }
}

impl Default for ClassicStoreBuilder {
    fn default() -> Self {
        Self {
            servers: Vec::new(),
            io_timeout: DEFAULT_IO_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_idle: DEFAULT_MAX_IDLE,
        }
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
