//! The rate-limiting algorithms. Each is written once, over the
//! [`Store`](crate::store::Store) contract, with time from a
//! [`Clock`](crate::Clock).
//!
//! | algorithm | store work per decision | keys per client | accuracy |
//! |---|---|---|---|
//! | [`FixedWindow`] | 1 increment | 1 live | exact within a window; up to 2× the limit across a boundary |
//! | [`SlidingWindow`], `n` sub-windows | 1 increment + `n` reads, one round trip | `n + 1` read, up to `n + 2` held | exact under a steady rate; with `c` in the oldest sub-window and `f` of the current one elapsed, the estimate is within `−c·f` and `+c·(1−f)` of the exact count |
//! | [`TokenBucket`] | 1 read + 1 compare-and-swap write; a denial only reads, unless strict | 1 | exact: at most `capacity + rate·t` in any span `t`; slow to throttle a moderately abusive client (about `q·a/(a−1)` requests at `a`× the rate) |
//! | [`Gcra`] | as the token bucket, state is one number | 1 | as the token bucket of capacity `burst`; can queue requests up to a maximum delay |
//! | [`SlidingLog`] | 1 read + 1 compare-and-swap write of up to `limit` timestamps (≤ [`MAX_LOG_LIMIT`]); a denial only reads, unless strict | 1 | exact over every window of one period |
//! | [`HybridQuota`] | 1 read + 1 compare-and-swap write; a denial in bursty mode only reads, unless strict | 1 | bursty clients: at most the limit in a fixed window of their own; smooth clients: the rate on average, reacting within one period |
//! | [`DiscreteRefill`] | 1 read + 1 compare-and-swap write; a denial only reads, unless strict | 1 | exact, in whole steps: the limit at once, then `refill` more at each whole period after the client's refill mark (Smyte's rate limiter) |
//! | [`Sessionize`] | 1 read + 1 compare-and-swap write, denials too (always strict) | 1 | as the discrete refill, strict and restarting when empty; tells when the client's session (its last allowed request) started |
//!
//! A denied request costs the window algorithms one more round trip (the
//! refund) unless denied requests are counted
//! ([`DeniedRequests`]). The compare-and-swap
//! algorithms retry their read and write when another writer got there
//! first ([`CasPolicy`]), and skip the read of a state they wrote last
//! themselves, writing on the version the store returned
//! ([`CasPolicy::known_states`]): then an allowed decision is one store
//! call, and a denial on a long sliding log reads the state's version
//! alone ([`Store::version`](crate::store::Store::version)), not the
//! state.

mod cas;
mod choice;
mod deadline;
mod engine;
mod inspect;
mod repairs;
mod settings;
mod window;

pub use self::cas::{
    stored_log_entries, CasPolicy, CasStats, DiscreteRefill, Gcra, HybridQuota, Reservation,
    Sessionize, SharedKnownStates, SlidingLog, TokenBucket, DEFAULT_KNOWN_STATES, MAX_LOG_LIMIT,
};
pub use self::choice::Algorithm;
pub(crate) use self::engine::Engine;
pub use self::inspect::{InspectedKey, Inspection};
pub(crate) use self::repairs::Repairs;
pub use self::settings::DeniedRequests;
pub(crate) use self::settings::Settings;
pub(crate) use self::window::unix_nanos;
pub use self::window::{
    Estimator, FixedWindow, SlidingWindow, DEFAULT_SEALED_CACHE, DEFAULT_SUB_WINDOWS,
    MAX_MOMENT_COUNT, MAX_SUB_WINDOWS,
};
