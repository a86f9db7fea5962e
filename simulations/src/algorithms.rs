//! The algorithms under test, each built from the library's
//! `LimiterSpec` on a shared store and a node's clock, and the in-process caches
//! they can run with.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use memcache_ratelimit::algorithm::CasPolicy;
pub use memcache_ratelimit::limiter::DeniedRequests;
use memcache_ratelimit::store::Store;
pub use memcache_ratelimit::Algorithm;
use memcache_ratelimit::Limiter;
use memcache_ratelimit::{ConfigError, DenyCache, LimiterSpec, ManualClock, Quota};

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
    /// The algorithm's cache of what it read or wrote before, at the
    /// library's default size: the sliding window's sealed-bucket cache
    /// (`false`: `.sealed_cache(0)`), or the compare-and-swap algorithms'
    /// known states (`false`: `CasPolicy::known_states(0)`). The fixed
    /// window has none.
    pub sealed: bool,
    /// The limiter wrapped in a [`DenyCache`] of
    /// [`DENY_CACHE_CAPACITY`] clients.
    pub deny: bool,
}

impl Caches {
    /// No cache: every decision asks the store for everything.
    pub const NONE: Caches = Caches::new(false, false);
    /// The library's defaults: the sealed-bucket cache, no deny cache. The
    /// main tables run with these.
    pub const DEFAULT: Caches = Caches::new(true, false);
    /// The deny cache only.
    pub const DENY: Caches = Caches::new(false, true);
    /// Both caches.
    pub const BOTH: Caches = Caches::new(true, true);

    const fn new(sealed: bool, deny: bool) -> Caches {
        Caches { sealed, deny }
    }

    /// These caches as `algorithm` can have them: the fixed window has no
    /// cache of what it read.
    pub fn for_algorithm(self, algorithm: Algorithm) -> Caches {
        Caches {
            sealed: self.sealed && algorithm != Algorithm::FixedWindow,
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
    /// The name the caches table prints: the [`id`](Caches::id), spaced
    /// out (`none`, `sealed`, `deny`, `sealed + deny`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.id().replace('+', " + "))
    }
}

/// Every algorithm, in the order the tables list them: the library's
/// [`Algorithm`] with its defaults (token bucket capacity and GCRA burst
/// equal to the limit), the sliding window at each of [`SUB_WINDOWS`].
pub fn all() -> Vec<Algorithm> {
    let mut all = vec![Algorithm::FixedWindow];
    all.extend(
        SUB_WINDOWS
            .iter()
            .map(|&n| Algorithm::SlidingWindow { sub_windows: n }),
    );
    all.extend([
        Algorithm::TokenBucket { capacity: None },
        Algorithm::Gcra { burst: None },
        Algorithm::SlidingLog,
        Algorithm::HybridQuota,
    ]);
    all
}

/// The library's [`Algorithm`] as the simulations name and build it. Every
/// one runs with the library's defaults (denied requests refunded, the
/// sliding window's sealed-bucket cache on, clock skew allowance 1 s),
/// except the deadline, which is [`DEADLINE`], and, for the strict-mode
/// comparison, what denied requests cost ([`DeniedRequests::Counted`]).
pub trait Simulated: Copy {
    /// A short identifier for file names and CSV rows: `fixed`,
    /// `sliding-4`, `token-bucket`, `gcra`, `sliding-log`, `hybrid-quota`.
    fn id(self) -> String;

    /// The name the tables print: `fixed window`, `sliding n=4`, ...
    fn label(self) -> String;

    /// The limiter's description: `quota`, read on `clock`, with the
    /// sealed-bucket cache at the library's default size or off, denied
    /// requests costing as `denied` says.
    fn spec(
        self,
        quota: Quota,
        clock: ManualClock,
        sealed: bool,
        denied: DeniedRequests,
    ) -> LimiterSpec;

    /// Builds the limiter on `store`, reading `clock`, with the library's
    /// default caches.
    fn build(
        self,
        quota: Quota,
        store: Arc<dyn Store>,
        clock: ManualClock,
    ) -> Result<Box<dyn Limiter>, ConfigError> {
        self.build_with(quota, store, clock, Caches::DEFAULT)
    }

    /// Builds the limiter on `store`, reading `clock`, with `caches` (as
    /// far as this algorithm has them). Every call builds new caches.
    fn build_with(
        self,
        quota: Quota,
        store: Arc<dyn Store>,
        clock: ManualClock,
        caches: Caches,
    ) -> Result<Box<dyn Limiter>, ConfigError> {
        self.build_mode(quota, store, clock, caches, DeniedRequests::Refunded)
    }

    /// Builds the limiter as [`build_with`](Simulated::build_with) does,
    /// with denied requests costing as `denied` says.
    fn build_mode(
        self,
        quota: Quota,
        store: Arc<dyn Store>,
        clock: ManualClock,
        caches: Caches,
        denied: DeniedRequests,
    ) -> Result<Box<dyn Limiter>, ConfigError> {
        let limiter = self
            .spec(quota, clock, caches.sealed, denied)
            .build(store)?;
        Ok(if caches.deny {
            Box::new(DenyCache::new(limiter, DENY_CACHE_CAPACITY))
        } else {
            Box::new(limiter)
        })
    }
}

/// `algorithm`'s [`id`](Simulated::id) and [`label`](Simulated::label).
fn names(algorithm: Algorithm) -> (String, String) {
    let named = |id: &str, label: &str| (id.to_owned(), label.to_owned());
    match algorithm {
        Algorithm::FixedWindow => named("fixed", "fixed window"),
        Algorithm::SlidingWindow { sub_windows } => (
            format!("sliding-{sub_windows}"),
            format!("sliding n={sub_windows}"),
        ),
        Algorithm::TokenBucket { .. } => named("token-bucket", "token bucket"),
        Algorithm::Gcra { .. } => named("gcra", "GCRA"),
        Algorithm::SlidingLog => named("sliding-log", "sliding log"),
        Algorithm::HybridQuota => named("hybrid-quota", "hybrid quota"),
        Algorithm::DiscreteRefill { .. } => named("discrete-refill", "discrete refill"),
        Algorithm::Sessionize { .. } => named("sessionize", "sessionize"),
    }
}

impl Simulated for Algorithm {
    fn id(self) -> String {
        names(self).0
    }

    fn label(self) -> String {
        names(self).1
    }

    fn spec(
        self,
        quota: Quota,
        clock: ManualClock,
        sealed: bool,
        denied: DeniedRequests,
    ) -> LimiterSpec {
        let spec = LimiterSpec::new(self, quota)
            .clock(clock)
            .deadline(DEADLINE)
            .denied_requests(denied);
        // Off is capacity 0; on keeps the library's default size.
        if sealed {
            spec
        } else {
            spec.sealed_cache(0)
                .cas_policy(CasPolicy::default().known_states(0))
        }
    }
}
