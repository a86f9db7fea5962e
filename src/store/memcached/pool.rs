//! A memcached store's connections, in either protocol: per server, a
//! bounded number of slots and a stack of idle connections.
//!
//! A call takes a slot first (waiting up to the connect timeout while all
//! are taken), then an idle connection or a new one. The slot is held
//! until the connection is back on the idle stack or closed, so the
//! connections open to a server never exceed its slots, whatever the
//! server does: a server that hangs holds its slots' exchanges until it
//! answers (see [`detached`](super::detach)), and later calls wait
//! for a slot instead of dialing.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::connection::Connection;
use super::slots::{free_slot, wait_for_slot};
use crate::error::StoreError;

/// One server's connections.
#[derive(Debug)]
struct ServerPool {
    idle: Mutex<Vec<Connection>>,
    slots: Arc<Semaphore>,
}

/// The connections of every server of a store.
#[derive(Debug)]
pub(super) struct Pools {
    /// The servers' addresses, as configured, in placement order.
    addresses: Vec<String>,
    servers: Vec<ServerPool>,
    max_connections: usize,
    max_idle: usize,
    connect_timeout: Duration,
    /// Writes sent on any connection, each followed by reading its replies.
    pub(super) round_trips: Arc<AtomicU64>,
}

/// A taken connection slot; freed when dropped.
pub(super) type Slot = OwnedSemaphorePermit;

/// A connection taken from a server's pool, with its slot.
#[derive(Debug)]
pub(super) struct Checkout {
    server: usize,
    connection: Connection,
    slot: Slot,
}

impl Pools {
    pub(super) fn new(
        servers: &[String],
        max_connections: usize,
        max_idle: usize,
        connect_timeout: Duration,
    ) -> Self {
        Self {
            addresses: servers.to_vec(),
            servers: servers
                .iter()
                .map(|_| ServerPool {
                    idle: Mutex::default(),
                    slots: Arc::new(Semaphore::new(max_connections)),
                })
                .collect(),
            max_connections,
            max_idle,
            connect_timeout,
            round_trips: Arc::default(),
        }
    }

    /// The servers' addresses, in placement order.
    pub(super) fn addresses(&self) -> &[String] {
        &self.addresses
    }

    /// `server`'s address.
    pub(super) fn address(&self, server: usize) -> &str {
        &self.addresses[server]
    }

    /// A slot and a connection to `server`: an idle one, or a new one.
    /// Nothing has been sent when this fails; the error names the server.
    pub(super) async fn checkout(&self, server: usize) -> Result<Checkout, StoreError> {
        if let Some(checkout) = self.checkout_now(server) {
            return Ok(checkout);
        }
        // Waiting for a slot and dialing are rare: boxed, so that every
        // exchange's future carries a pointer for them, not their state.
        Box::pin(self.checkout_slowly(server)).await
    }

    /// A free slot and an idle connection to `server`, if both are at
    /// hand now.
    fn checkout_now(&self, server: usize) -> Option<Checkout> {
        let slot = free_slot(&self.servers[server].slots)?;
        let connection = self.idle(server)?;
        Some(Checkout {
            server,
            connection,
            slot,
        })
    }

    /// [`checkout`](Self::checkout), waiting for a slot or dialing.
    async fn checkout_slowly(&self, server: usize) -> Result<Checkout, StoreError> {
        let address = self.address(server);
        let slots = &self.servers[server].slots;
        let slot = match free_slot(slots) {
            Some(slot) => slot,
            None => {
                wait_for_slot(slots, self.connect_timeout, self.max_connections, address).await?
            }
        };
        let connection = match self.idle(server) {
            Some(connection) => connection,
            None => Connection::open(address, self.connect_timeout, Arc::clone(&self.round_trips))
                .await
                .map_err(|error| error.at(address))?,
        };
        Ok(Checkout {
            server,
            connection,
            slot,
        })
    }

    fn idle(&self, server: usize) -> Option<Connection> {
        let mut idle = self.servers[server]
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        while let Some(connection) = idle.pop() {
            if connection.is_reusable() {
                return Some(connection);
            }
        }
        None
    }

    /// Whether a slot of `server` is free now, so that no caller waits
    /// for one: a holder may then keep its slot for its next exchange
    /// without making anyone wait longer.
    pub(super) fn has_free_slot(&self, server: usize) -> bool {
        self.servers[server].slots.available_permits() > 0
    }

    /// Puts a connection whose exchange ended cleanly back on the idle
    /// stack (or closes it, past `max_idle`), and frees its slot.
    pub(super) fn give_back(&self, server: usize, connection: Connection, slot: Slot) {
        let mut idle = self.servers[server]
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if idle.len() < self.max_idle {
            idle.push(connection);
        }
        drop(idle);
        drop(slot);
    }
}

impl Checkout {
    /// A connection to `server` and its slot, together again.
    pub(super) fn from_parts(server: usize, connection: Connection, slot: Slot) -> Self {
        Self {
            server,
            connection,
            slot,
        }
    }

    /// Whether its connection can be used again ([`Connection::is_reusable`]).
    pub(super) fn is_reusable(&self) -> bool {
        self.connection.is_reusable()
    }

    /// The server it is a connection to.
    pub(super) fn server(&self) -> usize {
        self.server
    }

    /// The connection and its slot, apart.
    pub(super) fn into_parts(self) -> (Connection, Slot) {
        (self.connection, self.slot)
    }
}
