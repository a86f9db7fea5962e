//! The `Store` contract and the stores behind it: one conformance suite on
//! every store, the classic and meta protocols, twemproxy, a fleet of
//! servers, pipelining, the embedded store's memory, long expirations,
//! and the keys a client id becomes.

#[path = "../common/mod.rs"]
mod common;

#[cfg(feature = "memcached")]
mod classic_protocol;
mod key_injectivity;
#[cfg(feature = "memcached")]
mod key_safety;
#[cfg(feature = "memcached")]
mod long_quotas;
#[cfg(feature = "memcached")]
mod memcached_fleet;
#[cfg(feature = "memcached")]
mod memcached_pipelining;
#[cfg(feature = "memcached")]
mod memcached_process;
mod memory_reclaim;
#[cfg(feature = "memcached")]
mod protocol_choice;
mod store_conformance;
#[cfg(feature = "memcached")]
mod store_errors;
