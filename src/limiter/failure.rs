//! [`FailurePolicy`]: what a limiter decides when its store cannot, and
//! [`FailureStats`]: what it absorbed.

use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::algorithm::Algorithm;
use crate::decision::Decision;
use crate::error::{ConfigError, Error};
use crate::limiter::RateLimiter;
use crate::quota::Quota;

/// What a limiter decides when its store fails or misses the deadline.
///
/// A decision fails when the store returns an error (memcached killed,
/// refusing connections, answering garbage) or misses the limiter's
/// deadline (memcached hung, overloaded, or a network partition that drops
/// packets). The policy turns such a failure into a decision, so a service
/// keeps answering its own clients while memcached is away:
///
/// | policy | under failure | costs |
/// |---|---|---|
/// | [`FailurePolicy::Open`] (the default) | allowed | no limit at all while the store is away |
/// | [`FailurePolicy::Closed`] | denied | no traffic at all while the store is away |
/// | [`FailurePolicy::Fallback`] | decided by an in-process limiter of the same algorithm, holding this instance's share of the quota | the fleet admits up to the sum of the shares; counts made locally are not in memcached afterwards |
/// | [`FailurePolicy::ReturnError`] | the error, for the caller to decide | every caller handles it |
///
/// A decision made under a policy says so
/// ([`Decision::under_failure`]); every absorbed failure is logged through
/// `tracing` (a `warn` event with the error) and counted
/// ([`FailureStats`]). Requests the store could never decide are errors
/// whatever the policy: a zero cost, a cost above the limit, a clock out
/// of range, and a compare-and-swap that lost every attempt
/// ([`Error::Contention`]: the store works, other writers were faster).
///
/// A failure that happened after the request was sent may have been
/// counted in memcached all the same ([`StoreError::is_ambiguous`]); it is
/// never sent again, so nothing is counted twice in the store. Under
/// [`FailurePolicy::Fallback`] such a request is counted once more, in the
/// local limiter.
///
/// [`StoreError::is_ambiguous`]: crate::StoreError::is_ambiguous
///
/// ```
/// # #[cfg(feature = "memcached")] {
/// use memcache_ratelimit::{FailurePolicy, FixedWindow, MemcachedStore};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// // Nothing listens on port 1: every call fails at once.
/// let store = Arc::new(MemcachedStore::builder().server("127.0.0.1:1").build().await?);
/// let limiter = FixedWindow::builder("2/minute".parse()?, store)
///     .deadline(Duration::from_millis(50))
///     .on_failure(FailurePolicy::Fallback { share: 0.5 })
///     .build()?;
/// // Half of 2 is 1: the local stand-in admits one, then denies.
/// let first = limiter.check(b"alice").await?;
/// assert!(first.is_allowed() && first.under_failure());
/// assert!(limiter.check(b"alice").await?.is_denied());
/// assert_eq!(limiter.stats().failures.absorbed, 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum FailurePolicy {
    /// Allow the request ("fail open"). Its decision has `remaining` 0 and
    /// `reset_after` the quota's period: nothing is known of the client's
    /// real standing.
    #[default]
    Open,
    /// Deny the request ("fail closed"), with `retry_after` of one second
    /// (or the period, if shorter): the store may be back by then.
    Closed,
    /// Decide with an in-process limiter of the same algorithm and
    /// settings over a [`MemoryStore`](crate::MemoryStore), whose limit
    /// (and burst or capacity, where set) is `share` of this one's, rounded
    /// up, at least 1. `share` is in (0, 1]: with N instances sharing the
    /// quota evenly, 1/N. The stand-in counts only the requests it decides,
    /// from the first failure on; it is kept across failures, and its
    /// counts expire as the algorithm's keys do.
    Fallback {
        /// This instance's share of the quota, in (0, 1].
        share: f64,
    },
    /// Return the error ([`Error::Store`] or [`Error::DeadlineExceeded`])
    /// to the caller.
    ReturnError,
}

/// `value` scaled by `share`, rounded up, at least 1.
pub(crate) fn scale(value: u64, share: f64) -> u64 {
    ((value as f64 * share).ceil() as u64).clamp(1, value.max(1))
}

/// `algorithm` with what it sets beside the quota (a burst, a capacity)
/// scaled to `share`, for the local stand-in of [`FailurePolicy::Fallback`].
pub(crate) fn scale_algorithm(algorithm: Algorithm, share: f64) -> Algorithm {
    match algorithm {
        Algorithm::TokenBucket { capacity } => Algorithm::TokenBucket {
            capacity: capacity.map(|value| scale(value, share)),
        },
        Algorithm::Gcra { burst } => Algorithm::Gcra {
            burst: burst.map(|value| scale(value, share)),
        },
        Algorithm::DiscreteRefill {
            refill,
            restart_when_empty,
        } => Algorithm::DiscreteRefill {
            refill: refill.map(|value| scale(value, share)),
            restart_when_empty,
        },
        Algorithm::Sessionize { refill } => Algorithm::Sessionize {
            refill: refill.map(|value| scale(value, share)),
        },
        other => other,
    }
}

/// `quota` with its limit scaled by `share`.
pub(crate) fn scale_quota(quota: Quota, share: f64) -> Quota {
    let limit = NonZeroU64::new(scale(quota.limit(), share)).unwrap_or(NonZeroU64::MIN);
    quota.with_limit(limit)
}

/// Failures a limiter absorbed under its [`FailurePolicy`], since it was
/// built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FailureStats {
    /// Decisions made under the policy instead of by the store.
    pub absorbed: u64,
    /// Of those, the store returned an error.
    pub store_errors: u64,
    /// Of those, the deadline passed.
    pub deadlines: u64,
    /// Of those, decided by the local stand-in
    /// ([`FailurePolicy::Fallback`]).
    pub fallbacks: u64,
    /// Failures returned to the caller ([`FailurePolicy::ReturnError`], or
    /// a stand-in that failed too).
    pub returned: u64,
    /// Stored values found untrustworthy and repaired, after which the
    /// store decided as usual: window counters holding something other
    /// than a count (written over by another program, or an attack on the
    /// store), reset to zero; compare-and-swap states that are not the
    /// algorithm's state, replaced by a fresh one; and compare-and-swap
    /// states beyond the policy's horizon (a time further ahead than any
    /// writer's clock could be), clamped to it. Not a failure the policy
    /// absorbed: the decision is the store's.
    pub repaired: u64,
}

/// A limiter's policy, with its stand-in, and its counters.
pub(crate) struct Failures {
    policy: Policy,
    counts: [AtomicU64; 8],
}

/// A [`FailurePolicy`] ready to apply.
enum Policy {
    Open,
    Closed,
    Fallback(Box<RateLimiter>),
    ReturnError,
}

impl std::fmt::Debug for Failures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Failures")
            .field("policy", &self.policy)
            .field("outcomes", &self.outcomes())
            .finish()
    }
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Policy::Open => f.write_str("Open"),
            Policy::Closed => f.write_str("Closed"),
            Policy::Fallback(local) => write!(f, "Fallback({})", local.quota()),
            Policy::ReturnError => f.write_str("ReturnError"),
        }
    }
}

const ABSORBED: usize = 0;
const STORE_ERRORS: usize = 1;
const DEADLINES: usize = 2;
const FALLBACKS: usize = 3;
const RETURNED: usize = 4;
const ALLOWED: usize = 5;
const DENIED: usize = 6;
const ERRORS: usize = 7;

impl Failures {
    /// `policy`, checked, with the stand-in a
    /// [`FailurePolicy::Fallback`] needs.
    pub(crate) fn new(
        policy: FailurePolicy,
        fallback: Option<RateLimiter>,
    ) -> Result<Self, ConfigError> {
        let policy = match policy {
            FailurePolicy::Open => Policy::Open,
            FailurePolicy::Closed => Policy::Closed,
            FailurePolicy::ReturnError => Policy::ReturnError,
            FailurePolicy::Fallback { share } if !(share > 0.0 && share <= 1.0) => {
                return Err(ConfigError::new(
                    "failure_policy",
                    format!("the fallback share {share} is outside (0, 1]"),
                ))
            }
            FailurePolicy::Fallback { .. } => {
                let Some(local) = fallback else {
                    return Err(ConfigError::new(
                        "failure_policy",
                        "a fallback policy needs its local stand-in",
                    ));
                };
                Policy::Fallback(Box::new(local))
            }
        };
        Ok(Self {
            policy,
            counts: Default::default(),
        })
    }

    /// The counts, with `repaired`, the engine's count of stored values
    /// it repaired.
    pub(crate) fn stats(&self, repaired: u64) -> FailureStats {
        let n = |i: usize| self.counts[i].load(Ordering::Relaxed);
        FailureStats {
            absorbed: n(ABSORBED),
            store_errors: n(STORE_ERRORS),
            deadlines: n(DEADLINES),
            fallbacks: n(FALLBACKS),
            returned: n(RETURNED),
            repaired,
        }
    }

    fn bump(&self, index: usize) {
        self.counts[index].fetch_add(1, Ordering::Relaxed);
    }

    /// Allowed, denied and errors returned, since the limiter was built.
    pub(crate) fn outcomes(&self) -> (u64, u64, u64) {
        let n = |i: usize| self.counts[i].load(Ordering::Relaxed);
        (n(ALLOWED), n(DENIED), n(ERRORS))
    }

    /// The store's answer, or the policy's decision in its place, counted.
    pub(crate) async fn decide(
        &self,
        outcome: Result<Decision, Error>,
        quota: Quota,
        key: &[u8],
        cost: u64,
        now: i64,
    ) -> Result<Decision, Error> {
        let stand_in = match self.stand_in(&outcome) {
            Some(local) => Some(Box::pin(local.decide(key, cost, now)).await),
            None => None,
        };
        self.settle(outcome, quota, stand_in)
    }

    /// The local limiter whose decision [`decide`](Self::decide) waits
    /// for on `outcome`: a store's failure under
    /// [`FailurePolicy::Fallback`]. Without one, [`settle`](Self::settle)
    /// decides within the caller's poll.
    pub(crate) fn stand_in(&self, outcome: &Result<Decision, Error>) -> Option<&RateLimiter> {
        match (&self.policy, outcome) {
            (Policy::Fallback(local), Err(error)) if store_failed(error) => Some(local),
            _ => None,
        }
    }

    /// [`decide`](Self::decide)'s answer once the stand-in, if any, has
    /// decided.
    pub(crate) fn settle(
        &self,
        outcome: Result<Decision, Error>,
        quota: Quota,
        stand_in: Option<Result<Decision, Error>>,
    ) -> Result<Decision, Error> {
        let outcome = match outcome {
            Err(error) if store_failed(&error) => self.absorb(error, quota, stand_in),
            other => other,
        };
        match &outcome {
            Ok(decision) => self.count(decision),
            Err(_) => self.bump(ERRORS),
        }
        outcome
    }

    /// Counts a decision the store made, as [`decide`](Self::decide) does
    /// for one it is handed.
    pub(crate) fn count(&self, decision: &Decision) {
        self.bump(if decision.is_allowed() {
            ALLOWED
        } else {
            DENIED
        });
    }

    /// The policy's decision in place of the store's `error`; `stand_in`
    /// is the local fallback's answer, when the policy has one.
    fn absorb(
        &self,
        error: Error,
        quota: Quota,
        stand_in: Option<Result<Decision, Error>>,
    ) -> Result<Decision, Error> {
        let decision = match (&self.policy, stand_in) {
            (Policy::Open, _) => Decision::allowed(quota.limit(), 0, quota.period()),
            (Policy::Closed, _) => {
                let retry = quota.period().min(Duration::from_secs(1));
                Decision::denied(quota.limit(), 0, quota.period(), retry)
            }
            (Policy::Fallback(_), Some(Ok(decision))) => {
                self.bump(FALLBACKS);
                decision
            }
            (Policy::Fallback(_), Some(Err(failed))) => {
                self.bump(RETURNED);
                tracing::error!(%error, %failed, "store failed and so did the local fallback");
                return Err(error);
            }
            (Policy::ReturnError | Policy::Fallback(_), _) => {
                self.bump(RETURNED);
                return Err(error);
            }
        };
        self.bump(ABSORBED);
        self.bump(if matches!(error, Error::Store(_)) {
            STORE_ERRORS
        } else {
            DEADLINES
        });
        tracing::warn!(%error, policy = ?self.policy, allowed = decision.is_allowed(), "store failure absorbed by the failure policy");
        Ok(decision.made_under_failure())
    }

    /// Forgets `key` in the stand-in, if there is one.
    pub(crate) async fn reset(&self, key: &[u8]) {
        if let Policy::Fallback(local) = &self.policy {
            // An in-process store: it cannot fail.
            let _ = Box::pin(local.reset(key)).await;
        }
    }
}

/// Whether `error` is the store's failure, which the policy decides in
/// its place: the store failed, or did not answer within the deadline.
fn store_failed(error: &Error) -> bool {
    matches!(error, Error::Store(_) | Error::DeadlineExceeded(_))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FixedWindow, Gcra, MemoryStore};
    use std::sync::Arc;

    #[test]
    fn a_share_outside_zero_to_one_is_rejected_when_built() {
        for share in [0.0, -0.5, 1.5, f64::NAN, f64::INFINITY] {
            let built =
                FixedWindow::builder("10/second".parse().unwrap(), Arc::new(MemoryStore::new()))
                    .on_failure(FailurePolicy::Fallback { share })
                    .build();
            assert_eq!(
                built.unwrap_err().field(),
                "failure_policy",
                "share {share}"
            );
        }
        assert!(
            Gcra::builder("10/second".parse().unwrap(), Arc::new(MemoryStore::new()))
                .on_failure(FailurePolicy::Fallback { share: 1.0 })
                .build()
                .is_ok()
        );
    }

    #[test]
    fn shares_round_up_and_never_reach_zero() {
        assert_eq!(scale(100, 0.25), 25);
        assert_eq!(scale(10, 0.33), 4);
        assert_eq!(scale(3, 0.01), 1);
        assert_eq!(scale(7, 1.0), 7);
        let quota = scale_quota("9/minute".parse().unwrap(), 0.5);
        assert_eq!(
            (quota.limit(), quota.period()),
            (5, Duration::from_secs(60))
        );
    }
}
