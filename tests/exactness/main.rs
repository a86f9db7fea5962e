//! Exactness under contention on real memcached processes and through
//! twemproxy: many clients, tasks and OS processes racing on one limit
//! admit exactly what the algorithm allows.

#[path = "../common/mod.rs"]
mod common;

mod cas_hot_key;
mod memcached_cas_exactness;
mod memcached_concurrency;
mod multi_process_exactness;
