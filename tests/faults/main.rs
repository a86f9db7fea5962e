//! Faults on real memcached processes: killed, restarted, hung (SIGSTOP)
//! and unreachable servers, deadlines, failure policies, and stored
//! counters and states that are not what was written.

#[path = "../common/mod.rs"]
mod common;

mod counter_repair;
mod deadline;
mod failure_latency;
mod failure_policy;
mod hung_server;
mod state_repair;
