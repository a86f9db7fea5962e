//! The HTTP middleware (the `axum` feature, which implies `tower`): the
//! tower layer in process, on a bare hyper server, and the axum example
//! end to end against a real memcached.

#[path = "../common/mod.rs"]
mod common;

mod client_addresses;
#[cfg(feature = "memcached")]
mod http_end_to_end;
mod http_hyper;
#[cfg(feature = "memcached")]
mod http_middleware;
mod layer_configuration;
#[cfg(feature = "memcached")]
mod policies_layer;
mod ratelimit_fields;
mod server;
mod service_clones;
