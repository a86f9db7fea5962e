//! The algorithms under test, each built through the library's public
//! builders on a shared store and a node's clock.

use std::fmt;
use std::sync::Arc;

use memcache_ratelimit::store::Store;
use memcache_ratelimit::{
    ConfigError, FixedWindow, Gcra, HybridQuota, ManualClock, Quota, RateLimiter, SlidingLog,
    SlidingWindow, TokenBucket, MAX_DEADLINE,
};

/// The sliding window's sub-window counts the simulations compare.
pub const SUB_WINDOWS: [u32; 6] = [1, 2, 4, 6, 12, 60];

/// One algorithm, with its parameters. Every one runs with the library's
/// defaults (denied requests refunded, token bucket capacity and GCRA burst
/// equal to the limit), except the deadline, which is the longest allowed so
/// that a descheduled simulation thread never turns into a failed decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// [`FixedWindow`].
    FixedWindow,
    /// [`SlidingWindow`] with this many sub-windows.
    SlidingWindow(u32),
    /// [`TokenBucket`], capacity = limit.
    TokenBucket,
    /// [`Gcra`], burst = limit.
    Gcra,
    /// [`SlidingLog`].
    SlidingLog,
    /// [`HybridQuota`].
    HybridQuota,
}

impl Algorithm {
    /// Every algorithm, in the order the tables list them.
    pub fn all() -> Vec<Algorithm> {
        let mut all = vec![Algorithm::FixedWindow];
        all.extend(SUB_WINDOWS.iter().map(|&n| Algorithm::SlidingWindow(n)));
        all.extend([
            Algorithm::TokenBucket,
            Algorithm::Gcra,
            Algorithm::SlidingLog,
            Algorithm::HybridQuota,
        ]);
        all
    }

    /// A short identifier for file names and CSV rows: `fixed`,
    /// `sliding-4`, `token-bucket`, `gcra`, `sliding-log`, `hybrid-quota`.
    pub fn id(self) -> String {
        match self {
            Algorithm::FixedWindow => "fixed".to_owned(),
            Algorithm::SlidingWindow(n) => format!("sliding-{n}"),
            Algorithm::TokenBucket => "token-bucket".to_owned(),
            Algorithm::Gcra => "gcra".to_owned(),
            Algorithm::SlidingLog => "sliding-log".to_owned(),
            Algorithm::HybridQuota => "hybrid-quota".to_owned(),
        }
    }

    /// The sliding window's sub-window count, if this is one.
    pub fn sub_windows(self) -> Option<u32> {
        match self {
            Algorithm::SlidingWindow(n) => Some(n),
            _ => None,
        }
    }

    /// Builds the limiter on `store`, reading `clock`.
    pub fn build(
        self,
        quota: Quota,
        store: Arc<dyn Store>,
        clock: ManualClock,
    ) -> Result<Box<dyn RateLimiter>, ConfigError> {
        Ok(match self {
            Algorithm::FixedWindow => Box::new(
                FixedWindow::builder(quota, store)
                    .clock(clock)
                    .deadline(MAX_DEADLINE)
                    .build()?,
            ),
            Algorithm::SlidingWindow(n) => Box::new(
                SlidingWindow::builder(quota, store)
                    .sub_windows(n)
                    .clock(clock)
                    .deadline(MAX_DEADLINE)
                    .build()?,
            ),
            Algorithm::TokenBucket => Box::new(
                TokenBucket::builder(quota, store)
                    .clock(clock)
                    .deadline(MAX_DEADLINE)
                    .build()?,
            ),
            Algorithm::Gcra => Box::new(
                Gcra::builder(quota, store)
                    .clock(clock)
                    .deadline(MAX_DEADLINE)
                    .build()?,
            ),
            Algorithm::SlidingLog => Box::new(
                SlidingLog::builder(quota, store)
                    .clock(clock)
                    .deadline(MAX_DEADLINE)
                    .build()?,
            ),
            Algorithm::HybridQuota => Box::new(
                HybridQuota::builder(quota, store)
                    .clock(clock)
                    .deadline(MAX_DEADLINE)
                    .build()?,
            ),
        })
    }
}

impl fmt::Display for Algorithm {
    /// The name the tables print: `fixed window`, `sliding n=4`, ...
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Algorithm::FixedWindow => f.write_str("fixed window"),
            Algorithm::SlidingWindow(n) => write!(f, "sliding n={n}"),
            Algorithm::TokenBucket => f.write_str("token bucket"),
            Algorithm::Gcra => f.write_str("GCRA"),
            Algorithm::SlidingLog => f.write_str("sliding log"),
            Algorithm::HybridQuota => f.write_str("hybrid quota"),
        }
    }
}
