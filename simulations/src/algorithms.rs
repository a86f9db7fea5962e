//! The algorithms under test, each built through the library's public
//! builders on a shared store and a node's clock, and the in-process caches
//! they can run with.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use memcache_ratelimit::store::Store;
use memcache_ratelimit::{
    ConfigError, DenyCache, FixedWindow, Gcra, HybridQuota, ManualClock, Quota, RateLimiter,
    SlidingLog, SlidingWindow, TokenBucket,
};

/// The sliding window's sub-window counts the simulations compare.
pub const SUB_WINDOWS: [u32; 6] = [1, 2, 4, 6, 12, 60];

/// The deadline every limiter is built with. The embedded `MemoryStore`
/// never waits (every call is done at its first poll), so a decision takes
/// microseconds of real time; tokio's timer runs on real time, not on the
/// `ManualClock`s, so the simulated hours never count against it. A
/// decision that did miss the deadline would stop the run with an error,
/// never record a wrong answer. One second is a realistic bound for an
/// in-process store, and it matters: the sliding window keeps a bucket in
/// its sealed-bucket cache once it closed longer ago than `max_clock_skew`
/// (1 s by default) plus the deadline. With the library's maximum of 60 s no
/// bucket would ever be sealed in a 60 s period, and the simulations would
/// not exercise the cache every sliding window runs with by default.
pub const DEADLINE: Duration = Duration::from_secs(1);

/// How many clients each node's [`DenyCache`] remembers: more than any
/// workload has, so none is ever turned away for want of room.
pub const DENY_CACHE_CAPACITY: usize = 65_536;

/// The in-process caches a limiter runs with. Each node builds its own
/// limiter, so each node has its own caches, as each process would.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Caches {
    /// The sliding window's sealed-bucket cache, at the library's default
    /// size (`false`: `.sealed_cache(0)`). Only the sliding window has one.
    pub sealed: bool,
    /// The limiter wrapped in a [`DenyCache`] of
    /// [`DENY_CACHE_CAPACITY`] clients.
    pub deny: bool,
}

impl Caches {
    /// No cache: every decision asks the store for everything.
    pub const NONE: Caches = Caches {
        sealed: false,
        deny: false,
    };
    /// The library's defaults: the sealed-bucket cache, no deny cache. The
    /// main tables run with these.
    pub const DEFAULT: Caches = Caches {
        sealed: true,
        deny: false,
    };
    /// The deny cache only.
    pub const DENY: Caches = Caches {
        sealed: false,
        deny: true,
    };
    /// Both caches.
    pub const BOTH: Caches = Caches {
        sealed: true,
        deny: true,
    };

    /// These caches as `algorithm` can have them: the sealed-bucket cache
    /// belongs to the sliding window alone.
    pub fn for_algorithm(self, algorithm: Algorithm) -> Caches {
        Caches {
            sealed: self.sealed && algorithm.sub_windows().is_some(),
            deny: self.deny,
        }
    }

    /// The variants the caches comparison runs for `algorithm`: none, the
    /// default and both for the sliding window; none and the deny cache for
    /// the others.
    pub fn variants(algorithm: Algorithm) -> Vec<Caches> {
        if algorithm.sub_windows().is_some() {
            vec![Caches::NONE, Caches::DEFAULT, Caches::BOTH]
        } else {
            vec![Caches::NONE, Caches::DENY]
        }
    }

    /// A short identifier for CSV rows: `none`, `sealed`, `deny`,
    /// `sealed+deny`.
    pub fn id(self) -> &'static str {
        match (self.sealed, self.deny) {
            (false, false) => "none",
            (true, false) => "sealed",
            (false, true) => "deny",
            (true, true) => "sealed+deny",
        }
    }
}

impl Default for Caches {
    fn default() -> Self {
        Caches::DEFAULT
    }
}

impl fmt::Display for Caches {
    /// The name the caches table prints: `none`, `sealed`, `deny`,
    /// `sealed + deny`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match (self.sealed, self.deny) {
            (false, false) => "none",
            (true, false) => "sealed",
            (false, true) => "deny",
            (true, true) => "sealed + deny",
        })
    }
}

/// One algorithm, with its parameters. Every one runs with the library's
/// defaults (denied requests refunded, token bucket capacity and GCRA burst
/// equal to the limit, the sliding window's sealed-bucket cache on, clock
/// skew allowance 1 s), except the deadline, which is [`DEADLINE`].
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

    /// Builds the limiter on `store`, reading `clock`, with the library's
    /// default caches.
    pub fn build(
        self,
        quota: Quota,
        store: Arc<dyn Store>,
        clock: ManualClock,
    ) -> Result<Box<dyn RateLimiter>, ConfigError> {
        self.build_with(quota, store, clock, Caches::DEFAULT)
    }

    /// Builds the limiter on `store`, reading `clock`, with `caches` (as
    /// far as this algorithm has them). Every call builds new caches.
    pub fn build_with(
        self,
        quota: Quota,
        store: Arc<dyn Store>,
        clock: ManualClock,
        caches: Caches,
    ) -> Result<Box<dyn RateLimiter>, ConfigError> {
        let limiter = self.build_bare(quota, store, clock, caches.sealed)?;
        Ok(if caches.deny {
            Box::new(DenyCache::new(limiter, DENY_CACHE_CAPACITY))
        } else {
            limiter
        })
    }

    fn build_bare(
        self,
        quota: Quota,
        store: Arc<dyn Store>,
        clock: ManualClock,
        sealed: bool,
    ) -> Result<Box<dyn RateLimiter>, ConfigError> {
        Ok(match self {
            Algorithm::FixedWindow => Box::new(
                FixedWindow::builder(quota, store)
                    .clock(clock)
                    .deadline(DEADLINE)
                    .build()?,
            ),
            Algorithm::SlidingWindow(n) => {
                let builder = SlidingWindow::builder(quota, store)
                    .sub_windows(n)
                    .clock(clock)
                    .deadline(DEADLINE);
                // Off is capacity 0; on keeps the library's default size.
                let builder = if sealed {
                    builder
                } else {
                    builder.sealed_cache(0)
                };
                Box::new(builder.build()?)
            }
            Algorithm::TokenBucket => Box::new(
                TokenBucket::builder(quota, store)
                    .clock(clock)
                    .deadline(DEADLINE)
                    .build()?,
            ),
            Algorithm::Gcra => Box::new(
                Gcra::builder(quota, store)
                    .clock(clock)
                    .deadline(DEADLINE)
                    .build()?,
            ),
            Algorithm::SlidingLog => Box::new(
                SlidingLog::builder(quota, store)
                    .clock(clock)
                    .deadline(DEADLINE)
                    .build()?,
            ),
            Algorithm::HybridQuota => Box::new(
                HybridQuota::builder(quota, store)
                    .clock(clock)
                    .deadline(DEADLINE)
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
