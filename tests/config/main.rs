//! Configuration from TOML and the environment (the `config` feature).

#[path = "../common/mod.rs"]
mod common;

#[cfg(feature = "memcached")]
mod config;
