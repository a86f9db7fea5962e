//! A RESP (Redis protocol) server over `memcache-ratelimit`, so that
//! services in any language share the same buckets: Smyte's `RL.*`
//! commands on the library's discrete-refill bucket, redis-cell's
//! `CL.THROTTLE` on its GCRA, and `RL.WINDOW` on its sliding window. The
//! buckets live in the library's stores: the embedded one by default, or a
//! memcached fleet that many server instances share, so that they can be
//! scaled and restarted freely.
//!
//! - [`resp`]: the requests (parsed here, with limits) and the replies;
//! - `commands`: each command's arguments and what it runs;
//! - `connection`: one client, its pipelined commands batched;
//! - [`Server`]: the listener, the connection limit and a clean stop;
//! - `metrics`: Prometheus metrics, with `metrics`.

pub mod commands;
pub mod config;
mod connection;
mod info;
mod limiters;
mod metrics;
pub mod resp;
mod server;
mod session;
mod shared;
mod stats;

pub use config::{ServerConfig, StoreChoice, DEFAULT_KNOWN_STATES, DEFAULT_LIMITS, DEFAULT_LISTEN};
pub use server::{Server, StartError};
