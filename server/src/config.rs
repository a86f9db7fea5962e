//! What a server is started with.

use std::time::Duration;

use memcache_ratelimit::limiter::FailurePolicy;
use memcache_ratelimit::store::Protocol;

use crate::resp::Limits;

/// The address the server listens on unless told otherwise: loopback, on
/// Smyte's port.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9049";

/// What one command may hold unless told otherwise: a rate-limit command
/// has at most 10 arguments and short keys, so these leave room and keep
/// what one connection can make the server buffer to about 4 MiB.
pub const DEFAULT_LIMITS: Limits = Limits {
    max_args: 64,
    max_bulk: 64 * 1024,
    max_inline: 64 * 1024,
};

/// Where the buckets live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreChoice {
    /// The embedded store, in this process: nothing else shares it.
    Embedded,
    /// A memcached fleet, shared by every server instance that names it.
    Memcached {
        /// `host:port` of each server.
        servers: Vec<String>,
        /// The protocol spoken to them.
        protocol: Protocol,
        /// Pipelined batches in flight per server at once (meta protocol):
        /// memcached serves each connection on one of its worker threads,
        /// so more than its `-t` add nothing
        /// ([`MemcachedStoreBuilder::pipeline_depth`]).
        ///
        /// [`MemcachedStoreBuilder::pipeline_depth`]: memcache_ratelimit::store::MemcachedStoreBuilder::pipeline_depth
        pipeline_depth: usize,
        /// The most operations one batch carries
        /// ([`MemcachedStoreBuilder::pipeline_batch`]).
        ///
        /// [`MemcachedStoreBuilder::pipeline_batch`]: memcache_ratelimit::store::MemcachedStoreBuilder::pipeline_batch
        pipeline_batch: usize,
    },
}

/// How many keys' bucket states the server remembers by default, for all
/// its limiters together (see [`ServerConfig::known_states`]): about
/// 180 bytes a key, so at most about 47 MB.
pub const DEFAULT_KNOWN_STATES: usize = 262_144;

/// A server's settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// `host:port` to listen on.
    pub listen: String,
    pub store: StoreChoice,
    /// The password clients must give (`AUTH`, or `HELLO ... AUTH`), if any.
    pub requirepass: Option<String>,
    /// Limits on what one command may hold.
    pub limits: Limits,
    /// The most connections open at once; one more is told so and closed.
    pub max_connections: usize,
    /// What a decision does when the store fails.
    pub on_failure: FailurePolicy,
    /// Where to serve Prometheus metrics (`host:port`), if anywhere.
    pub metrics: Option<String>,
    /// How long a stopping server waits for its connections to finish the
    /// commands they have read.
    pub shutdown_grace: Duration,
    /// The most keys whose bucket state (and its version in the store) the
    /// server's compare-and-swap limiters remember together, so that an
    /// allowed decision on a key the server wrote last is one write,
    /// without a read first
    /// ([`CasPolicy::known_states_shared`](memcache_ratelimit::algorithm::CasPolicy::known_states_shared));
    /// 0 remembers none.
    pub known_states: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: DEFAULT_LISTEN.to_owned(),
            store: StoreChoice::Embedded,
            requirepass: None,
            limits: DEFAULT_LIMITS,
            max_connections: 10_000,
            on_failure: FailurePolicy::default(),
            metrics: None,
            shutdown_grace: Duration::from_secs(10),
            known_states: DEFAULT_KNOWN_STATES,
        }
    }
}
