//! [`CasPolicy`]: how hard a compare-and-swap algorithm tries before it
//! gives up.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;

use crate::error::ConfigError;

/// How hard a compare-and-swap algorithm tries before giving up.
///
/// Requests for one key that overlap in one limiter are decided together,
/// one read and one write for the group, so they never race each other;
/// the attempts and pauses are spent only on writes that lose to another
/// process. A group that runs out of attempts fails every one of its
/// requests with [`Error::Contention`](crate::Error::Contention).
///
/// ```
/// use memcache_ratelimit::{MemoryStore, TokenBucket};
/// use memcache_ratelimit::algorithm::CasPolicy;
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let bucket = TokenBucket::builder("10/second".parse()?, Arc::new(MemoryStore::new()))
///     .cas_policy(CasPolicy::new(16, Duration::from_micros(200), Duration::from_millis(5))?)
///     .build()?;
/// # Ok::<(), memcache_ratelimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CasPolicy {
    pub(super) attempts: u32,
    pub(super) base_backoff: Duration,
    pub(super) max_backoff: Duration,
    pub(super) known_states: KnownBound,
    /// The smallest stored state, in bytes, whose denial on a known state
    /// checks its version instead of reading it.
    pub(super) check_versions_from: usize,
}

/// How many keys' states a limiter remembers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum KnownBound {
    /// At most this many, its own.
    Keys(usize),
    /// Within a bound shared with other limiters.
    Shared(SharedKnownStates),
}

/// How many keys' states a compare-and-swap limiter remembers by default
/// ([`CasPolicy::known_states`]). A key costs about 180 bytes (its name,
/// its state and the map's slot, with the allocator's rounding: the RESP
/// server grew by 157 MB for 865,000 buckets), so a limiter whose clients
/// fill it holds about 47 MB; one with fewer clients holds only theirs.
/// Two generations of half of it each keep every key of 100,000 clients
/// deciding at random: half as many left about 29% of the decisions of
/// such a load reading first.
pub const DEFAULT_KNOWN_STATES: usize = 262_144;

/// The smallest stored state, in bytes, whose denial on a known state asks
/// the store for its version alone instead of reading it: below this a
/// read's answer is hardly longer than a version's, and a state someone
/// else changed would cost the check a second round trip for nothing. A
/// sliding log past a few hundred entries is over it; a bucket's state
/// (some 30 bytes) never is.
const CHECK_VERSIONS_FROM: usize = 1024;

impl CasPolicy {
    /// Denials on known states of any size check their version: for the
    /// tests' small states.
    #[cfg(test)]
    pub(super) fn checking_every_version(mut self) -> Self {
        self.check_versions_from = 0;
        self
    }

    /// At most `attempts` tries (1 to 1,000); before retry `k` the loop
    /// sleeps a random time up to `base_backoff × 2^(k−1)`, capped at
    /// `max_backoff`.
    pub fn new(
        attempts: u32,
        base_backoff: Duration,
        max_backoff: Duration,
    ) -> Result<Self, ConfigError> {
        if attempts == 0 || attempts > 1_000 {
            return Err(ConfigError::new(
                "cas_attempts",
                format!("{attempts} is outside 1..=1000"),
            ));
        }
        if base_backoff > max_backoff {
            return Err(ConfigError::new(
                "cas_backoff",
                format!("base {base_backoff:?} exceeds max {max_backoff:?}"),
            ));
        }
        Ok(Self {
            attempts,
            base_backoff,
            max_backoff,
            known_states: KnownBound::Keys(DEFAULT_KNOWN_STATES),
            check_versions_from: CHECK_VERSIONS_FROM,
        })
    }

    /// Remember the state last written or read, with its version, for up
    /// to about `keys` keys (0: none), so that the next decision on a known
    /// key writes its new state on that version without reading it first:
    /// one store call instead of two, on a store that returns the version
    /// of a write ([`Store::put_versioned`](crate::store::Store::put_versioned):
    /// memcached's meta protocol does, the classic protocol does not). It
    /// stays exact: a write on a version that is no longer current fails,
    /// and the decision is made again on a fresh read
    /// ([`CasStats::stale`](crate::algorithm::CasStats::stale)), or, when
    /// the key is gone, on no state, written only if the key is still
    /// absent ([`CasStats::vanished`](crate::algorithm::CasStats::vanished)). A
    /// decision that would write nothing (a denial) on a known state of
    /// 1 KiB or more (a long sliding log), while nearly every recent try
    /// found its known state current, asks the store for the state's
    /// version alone ([`Store::version`](crate::store::Store::version)) and
    /// stands if it is the known one, or reads
    /// ([`CasStats::checked`](crate::algorithm::CasStats::checked)); any
    /// other denial reads. The default is [`DEFAULT_KNOWN_STATES`].
    ///
    /// ```
    /// use memcache_ratelimit::algorithm::CasPolicy;
    ///
    /// let policy = CasPolicy::default().known_states(0);
    /// assert_eq!(policy.known_states_capacity(), 0);
    /// ```
    #[must_use]
    pub fn known_states(mut self, keys: usize) -> Self {
        self.known_states = KnownBound::Keys(keys);
        self
    }

    /// Remember known states (see [`known_states`](Self::known_states))
    /// within one bound shared by every limiter built with `shared`: the
    /// keys they remember together stay within about
    /// [`SharedKnownStates::keys`], however many limiters there are. A
    /// process that builds limiters on demand (one per parameter set, as
    /// the RESP server does) bounds its memory this way.
    ///
    /// ```
    /// use memcache_ratelimit::algorithm::{CasPolicy, SharedKnownStates};
    ///
    /// let shared = SharedKnownStates::new(1_000_000);
    /// let policy = CasPolicy::default().known_states_shared(&shared);
    /// assert_eq!(policy.known_states_capacity(), 1_000_000);
    /// ```
    #[must_use]
    pub fn known_states_shared(mut self, shared: &SharedKnownStates) -> Self {
        self.known_states = KnownBound::Shared(shared.clone());
        self
    }

    /// How many keys' states are remembered at most (see
    /// [`known_states`](Self::known_states)).
    pub fn known_states_capacity(&self) -> usize {
        match &self.known_states {
            KnownBound::Keys(keys) => *keys,
            KnownBound::Shared(shared) => shared.keys(),
        }
    }

    /// The most attempts per decision (per group of combined decisions).
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The pause before retry `retry` (1-based): full jitter over an
    /// exponentially growing, capped range.
    pub(super) fn backoff(&self, retry: u32) -> Duration {
        let ceiling = self
            .base_backoff
            .saturating_mul(1u32 << retry.saturating_sub(1).min(20))
            .min(self.max_backoff);
        if ceiling.is_zero() {
            return Duration::ZERO;
        }
        rand::rng().random_range(Duration::ZERO..=ceiling)
    }
}

impl Default for CasPolicy {
    /// 8 attempts, pauses from up to 500 µs growing to at most 10 ms,
    /// [`DEFAULT_KNOWN_STATES`] known states.
    fn default() -> Self {
        Self {
            attempts: 8,
            base_backoff: Duration::from_micros(500),
            max_backoff: Duration::from_millis(10),
            known_states: KnownBound::Keys(DEFAULT_KNOWN_STATES),
            check_versions_from: CHECK_VERSIONS_FROM,
        }
    }
}

/// One bound on the keys whose states many compare-and-swap limiters
/// remember together ([`CasPolicy::known_states_shared`]).
///
/// Each limiter keeps its own known states, in two generations per shard
/// (see [`CasPolicy::known_states`]); with a shared bound, a limiter that
/// remembers a new key while the limiters together hold
/// [`keys`](Self::keys) or more first drops its own oldest generation in
/// that key's shard. The keys held together stay within `keys` plus two
/// per shard of each limiter. A limiter that sits idle keeps what it holds
/// until it is dropped, so the busy ones then remember fewer keys (their
/// decisions read first, as without known states).
///
/// ```
/// use memcache_ratelimit::algorithm::SharedKnownStates;
///
/// let shared = SharedKnownStates::new(262_144);
/// assert_eq!((shared.keys(), shared.held()), (262_144, 0));
/// ```
#[derive(Debug, Clone)]
pub struct SharedKnownStates(Arc<Budget>);

#[derive(Debug)]
struct Budget {
    keys: usize,
    held: AtomicUsize,
}

impl SharedKnownStates {
    /// A bound of about `keys` keys (0: no limiter remembers any).
    pub fn new(keys: usize) -> Self {
        Self(Arc::new(Budget {
            keys,
            held: AtomicUsize::new(0),
        }))
    }

    /// The bound.
    pub fn keys(&self) -> usize {
        self.0.keys
    }

    /// How many keys the limiters sharing this bound remember now.
    pub fn held(&self) -> usize {
        self.0.held.load(Relaxed)
    }

    /// Whether the limiters together hold the bound or more.
    pub(super) fn full(&self) -> bool {
        self.held() >= self.0.keys
    }

    /// Counts `keys` more remembered.
    pub(super) fn add(&self, keys: usize) {
        self.0.held.fetch_add(keys, Relaxed);
    }

    /// Counts `keys` fewer remembered.
    pub(super) fn remove(&self, keys: usize) {
        if keys > 0 {
            self.0.held.fetch_sub(keys, Relaxed);
        }
    }
}

/// The same bound, not two bounds of the same size.
impl PartialEq for SharedKnownStates {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for SharedKnownStates {}
