//! What an operator sees: tracing spans and events, exported counts, a
//! client's state read back, and the figures the README documents.

#[path = "../common/mod.rs"]
mod common;

#[cfg(feature = "memcached")]
mod documented_figures;
mod inspection;
#[cfg(feature = "memcached")]
mod observability;
