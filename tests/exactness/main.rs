//! Exactness under contention on real memcached processes and through
//! twemproxy: many clients, tasks and OS processes racing on one limit
//! admit exactly what the algorithm allows.

#[path = "../common/mod.rs"]
mod common;

#[cfg(feature = "memcached")]
mod cas_hot_key;
#[cfg(feature = "memcached")]
mod memcached_cas_exactness;
#[cfg(feature = "memcached")]
mod memcached_concurrency;
#[cfg(feature = "memcached")]
mod multi_process_exactness;
