//! What every connection of a server shares.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use memcache_ratelimit::MemcachedStore;

use crate::config::ServerConfig;
use crate::limiters::Limiters;
use crate::stats::Stats;

/// The server's settings, limiters and counters.
pub struct Shared {
    pub config: ServerConfig,
    pub limiters: Limiters,
    pub stats: Stats,
    pub started: Instant,
    /// The port it listens on.
    pub port: u16,
    /// What the store is, for `INFO`.
    pub store: String,
    /// The memcached store, for its pipeline's counters; `None` for the
    /// embedded one.
    pub memcached: Option<Arc<MemcachedStore>>,
    next_id: AtomicI64,
}

impl Shared {
    pub fn new(
        config: ServerConfig,
        limiters: Limiters,
        port: u16,
        store: String,
        memcached: Option<Arc<MemcachedStore>>,
    ) -> Self {
        Self {
            memcached,
            config,
            limiters,
            stats: Stats::default(),
            started: Instant::now(),
            port,
            store,
            next_id: AtomicI64::new(1),
        }
    }

    /// A new connection's number.
    pub fn next_id(&self) -> i64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }
}
