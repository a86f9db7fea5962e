//! The compare-and-swap algorithms: one stored value per client, read,
//! recomputed and written back by optimistic compare-and-swap.
//!
//! - [`optimistic`]: the bounded retry loop and the local combining of
//!   requests for one key, written once for all of them;
//! - one file per policy, each a pure function from the stored state, the
//!   time and the request to a decision and a new state: [`token_bucket`],
//!   [`gcra`], [`sliding_log`], [`hybrid_quota`].

mod gcra;
mod hybrid_quota;
mod optimistic;
mod sliding_log;
mod token_bucket;

pub use self::gcra::{Gcra, GcraConfig, Reservation};
pub use self::hybrid_quota::{HybridQuota, HybridQuotaConfig};
pub use self::optimistic::{CasPolicy, CasStats};
pub use self::sliding_log::{SlidingLog, SlidingLogConfig, MAX_LOG_LIMIT};
pub use self::token_bucket::{TokenBucket, TokenBucketConfig};
