//! The bounded optimistic compare-and-swap loop, written once for every
//! algorithm whose state is one value that is read, recomputed and written
//! back: read the value with its version, decide, write the new value only
//! if the version is still the one read (or, for a missing key, only if it
//! is still missing). A lost race means someone else changed the state
//! first, so the decision is thrown away and made again on fresh state,
//! after a jittered, exponentially growing pause. When the attempts run out
//! the answer is [`Error::Contention`]; a request is never admitted on
//! state that another writer has already changed.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use rand::Rng;

use super::buckets::unix_nanos;
use crate::decision::Decision;
use crate::error::Error;
use crate::limiter::{DeniedRequests, Settings};
use crate::store::{PutCondition, PutOutcome};

/// How hard a compare-and-swap algorithm tries before giving up.
///
/// ```
/// use memcache_ratelimit::{CasPolicy, MemoryStore, TokenBucket};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let bucket = TokenBucket::builder("10/second".parse()?, Arc::new(MemoryStore::new()))
///     .cas_policy(CasPolicy::new(16, Duration::from_micros(200), Duration::from_millis(5))?)
///     .build()?;
/// # Ok::<(), memcache_ratelimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CasPolicy {
    attempts: u32,
    base_backoff: Duration,
    max_backoff: Duration,
}

impl CasPolicy {
    /// At most `attempts` tries (1 to 1,000); before retry `k` the loop
    /// sleeps a random time up to `base_backoff × 2^(k−1)`, capped at
    /// `max_backoff`.
    pub fn new(
        attempts: u32,
        base_backoff: Duration,
        max_backoff: Duration,
    ) -> Result<Self, crate::ConfigError> {
        if attempts == 0 || attempts > 1_000 {
            return Err(crate::ConfigError::new(
                "cas_attempts",
                format!("{attempts} is outside 1..=1000"),
            ));
        }
        if base_backoff > max_backoff {
            return Err(crate::ConfigError::new(
                "cas_backoff",
                format!("base {base_backoff:?} exceeds max {max_backoff:?}"),
            ));
        }
        Ok(Self {
            attempts,
            base_backoff,
            max_backoff,
        })
    }

    /// The most attempts per decision.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The pause before retry `retry` (1-based): full jitter over an
    /// exponentially growing, capped range.
    fn backoff(&self, retry: u32) -> Duration {
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
    /// 8 attempts, pauses from up to 500 µs growing to at most 10 ms.
    fn default() -> Self {
        Self {
            attempts: 8,
            base_backoff: Duration::from_micros(500),
            max_backoff: Duration::from_millis(10),
        }
    }
}

/// What a compare-and-swap limiter has been through, since it was built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CasStats {
    /// Decisions asked for.
    pub decisions: u64,
    /// Read-decide-write attempts made.
    pub attempts: u64,
    /// Writes that lost the race to another writer.
    pub conflicts: u64,
    /// Attempts made again after a conflict.
    pub retries: u64,
    /// Decisions that ran out of attempts ([`Error::Contention`]).
    pub exhausted: u64,
    /// Stored values that could not be read as this algorithm's state and
    /// were replaced.
    pub replaced: u64,
}

#[derive(Debug, Default)]
struct Counters([AtomicU64; 6]);

impl Counters {
    fn bump(&self, index: usize) {
        self.0[index].fetch_add(1, Ordering::Relaxed);
    }

    fn snapshot(&self) -> CasStats {
        let n = |i: usize| self.0[i].load(Ordering::Relaxed);
        CasStats {
            decisions: n(0),
            attempts: n(1),
            conflicts: n(2),
            retries: n(3),
            exhausted: n(4),
            replaced: n(5),
        }
    }
}

/// One request, as the pure core sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ask {
    pub(crate) cost: u64,
    pub(crate) now: i64,
    pub(crate) strict: bool,
    /// How long the caller is willing to wait for a later slot (GCRA's
    /// delay mode); zero for an immediate decision.
    pub(crate) max_delay: Duration,
}

/// What the pure core decided, and the state to write for it.
#[derive(Debug, Clone)]
pub(crate) struct Step<S> {
    pub(crate) decision: Decision,
    /// How long the caller must wait before acting (delay mode).
    pub(crate) delay: Duration,
    /// The new state and how long it must live; `None` leaves the store
    /// untouched.
    pub(crate) write: Option<(S, Duration)>,
}

/// The arithmetic of one compare-and-swap algorithm: a pure function from
/// the stored state, the time and the request to a decision and a new state.
pub(crate) trait CasCore: Send + Sync + fmt::Debug {
    type State;

    /// The most cost units one request may ask for.
    fn capacity(&self) -> u64;
    /// The key suffix naming the algorithm and its parameters, so limiters
    /// with different parameters never share a state.
    fn suffix(&self) -> &str;
    fn encode(&self, state: &Self::State) -> Vec<u8>;
    /// `None` for bytes that are not this algorithm's state.
    fn decode(&self, bytes: &[u8]) -> Option<Self::State>;
    fn decide(&self, state: Option<&Self::State>, ask: Ask) -> Step<Self::State>;
}

/// A limiter running a [`CasCore`] through the optimistic loop.
#[derive(Debug)]
pub(crate) struct CasLimiter<C> {
    pub(crate) settings: Settings,
    pub(crate) core: C,
    policy: CasPolicy,
    counters: Arc<Counters>,
}

impl<C: CasCore> CasLimiter<C> {
    pub(crate) fn new(settings: Settings, core: C, policy: CasPolicy) -> Self {
        Self {
            settings,
            core,
            policy,
            counters: Arc::default(),
        }
    }

    pub(crate) fn stats(&self) -> CasStats {
        self.counters.snapshot()
    }

    /// The one key holding `client`'s state.
    pub(crate) fn key(&self, client: &[u8]) -> Vec<u8> {
        self.settings
            .keys
            .client(client)
            .with_suffix(self.core.suffix())
    }

    pub(crate) async fn check_at(
        &self,
        client: &[u8],
        cost: u64,
        at: DateTime<Utc>,
    ) -> Result<Decision, Error> {
        Ok(self.step(client, cost, at, Duration::ZERO).await?.0)
    }

    /// Decides a request that may wait up to `max_delay`; returns the
    /// decision and how long to wait.
    pub(crate) async fn step(
        &self,
        client: &[u8],
        cost: u64,
        at: DateTime<Utc>,
        max_delay: Duration,
    ) -> Result<(Decision, Duration), Error> {
        let settings = &self.settings;
        settings.check_cost(cost, self.core.capacity())?;
        let ask = Ask {
            cost,
            now: unix_nanos(at)?,
            strict: settings.denied == DeniedRequests::Counted,
            max_delay,
        };
        let key = self.key(client);
        self.counters.bump(0);
        settings.within_deadline(self.run(&key, ask)).await
    }

    async fn run(&self, key: &[u8], ask: Ask) -> Result<(Decision, Duration), Error> {
        let store = &self.settings.store;
        for attempt in 1..=self.policy.attempts {
            self.counters.bump(1);
            let current = store.get(key).await?;
            let (state, condition) = match &current {
                None => (None, PutCondition::Absent),
                Some(stored) => {
                    let state = self.core.decode(&stored.value);
                    if state.is_none() {
                        self.counters.bump(5);
                        tracing::warn!(
                            key = %String::from_utf8_lossy(key),
                            "stored value is not this limiter's state; replacing it"
                        );
                    }
                    (state, PutCondition::Version(stored.version))
                }
            };
            let step = self.core.decide(state.as_ref(), ask);
            let Some((next, ttl)) = step.write else {
                return Ok((step.decision, step.delay));
            };
            let value = self.core.encode(&next);
            match store.put(key, &value, ttl, condition).await? {
                PutOutcome::Stored => return Ok((step.decision, step.delay)),
                PutOutcome::Conflict => {
                    self.counters.bump(2);
                    if attempt < self.policy.attempts {
                        self.counters.bump(3);
                        tracing::trace!(attempt, "compare-and-swap conflict; retrying");
                        tokio::time::sleep(self.policy.backoff(attempt)).await;
                    }
                }
            }
        }
        self.counters.bump(4);
        tracing::debug!(
            attempts = self.policy.attempts,
            "compare-and-swap attempts exhausted"
        );
        Err(Error::Contention {
            attempts: self.policy.attempts,
        })
    }

    pub(crate) async fn reset(&self, client: &[u8]) -> Result<(), Error> {
        let settings = &self.settings;
        let key = self.key(client);
        settings
            .within_deadline(settings.store.delete(&[key]))
            .await?;
        Ok(())
    }
}

/// A key suffix naming an algorithm and its parameters: `<tag>-<hash>`,
/// where the hash is XXH3 of the parameters' canonical text.
pub(crate) fn parameter_suffix(tag: &str, parameters: &str) -> String {
    format!(
        "{tag}-{:016x}",
        xxhash_rust::xxh3::xxh3_64(parameters.as_bytes())
    )
}
