//! What the algorithms decide, on every store and a `ManualClock`: the
//! windows, the compare-and-swap algorithms and their local combining,
//! large limits, per-client quotas, reaction time, clock skew, and the
//! sealed-bucket and deny caches.

#[path = "../common/mod.rs"]
mod common;

mod cas_behaviour;
mod cas_combining;
mod clock_skew;
#[cfg(feature = "memcached")]
mod deny_cache;
mod dynamic_quotas;
#[cfg(feature = "memcached")]
mod known_denials;
mod large_limits;
mod moment_window;
mod policies;
mod reaction_time;
mod sealed_cache;
mod window_behaviour;
