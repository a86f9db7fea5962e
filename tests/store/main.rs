//! The `Store` contract and the stores behind it: one conformance suite on
//! every store, the classic and meta protocols, twemproxy, a fleet of
//! servers, pipelining, the embedded store's memory, long expirations,
//! and the keys a client id becomes.

#[path = "../common/mod.rs"]
mod common;

mod classic_protocol;
mod key_injectivity;
mod key_safety;
mod long_quotas;
mod memcached_fleet;
mod memcached_pipelining;
mod memcached_process;
mod memory_reclaim;
mod protocol_choice;
mod store_conformance;
mod store_errors;
