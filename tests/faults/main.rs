//! Faults on real memcached processes: killed, restarted, hung (SIGSTOP)
//! and unreachable servers, deadlines, failure policies, and stored
//! counters and states that are not what was written.

#[path = "../common/mod.rs"]
mod common;

mod counter_repair;
#[cfg(feature = "memcached")]
mod deadline;
#[cfg(feature = "memcached")]
mod failure_latency;
#[cfg(feature = "memcached")]
mod failure_policy;
#[cfg(feature = "memcached")]
mod hung_server;
mod state_repair;
