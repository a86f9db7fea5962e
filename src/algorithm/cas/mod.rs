//! The compare-and-swap algorithms: one stored value per client, read,
//! recomputed and written back by optimistic compare-and-swap.
//!
//! - [`optimistic`]: the limiter over them all, with the atomic path of a
//!   store that answers at once; [`group`]: the bounded retry loop,
//!   written once for all of them; [`combining`]: the requests for one key
//!   decided together; and
//!   [`known`]: the states a limiter last saw, so a decision can skip its
//!   read;
//! - [`core`]: what each algorithm supplies, a pure function from the
//!   stored state, the time and the request to a decision and a new state,
//!   and its refund, which gives back what an allowed decision took (for a
//!   request several limiters decide all or nothing);
//! - [`policy`] and [`stats`]: the retry settings and the counters;
//! - one file per algorithm: [`token_bucket`](mod@token_bucket),
//!   [`gcra`](mod@gcra), [`sliding_log`](mod@sliding_log),
//!   [`hybrid_quota`](mod@hybrid_quota),
//!   [`discrete_refill`](mod@discrete_refill) and
//!   [`sessionize`](mod@sessionize), which share Smyte's bucket rules.

mod combining;
mod core;
mod discrete_refill;
mod gcra;
mod group;
mod hybrid_quota;
mod known;
#[cfg(test)]
mod known_tests;
mod optimistic;
mod policy;
#[cfg(test)]
mod refund_tests;
mod sessionize;
mod sliding_log;
mod state_text;
mod stats;
#[cfg(test)]
mod tests;
mod token_bucket;

pub use self::discrete_refill::DiscreteRefill;
pub(crate) use self::discrete_refill::{discrete_refill, DiscreteRefillCore};
pub(crate) use self::gcra::{gcra, GcraCore};
pub use self::gcra::{Gcra, Reservation};
pub use self::hybrid_quota::HybridQuota;
pub(crate) use self::hybrid_quota::{hybrid_quota, HybridQuotaCore};
pub(crate) use self::optimistic::CasLimiter;
pub use self::policy::{CasPolicy, SharedKnownStates, DEFAULT_KNOWN_STATES};
pub use self::sessionize::Sessionize;
pub(crate) use self::sessionize::{sessionize, SessionizeCore};
pub(crate) use self::sliding_log::{sliding_log, SlidingLogCore};
pub use self::sliding_log::{stored_log_entries, SlidingLog, MAX_LOG_LIMIT};
pub use self::stats::CasStats;
pub use self::token_bucket::TokenBucket;
pub(crate) use self::token_bucket::{token_bucket, TokenBucketCore};
