//! [`Policies`]: several limiters deciding one request, all or nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use smallvec::SmallVec;

use crate::decision::Decision;
use crate::error::{ConfigError, Error};
use crate::limiter::{clock_nanos, Limiter};
use crate::store::at_once;

/// One named limiter among [`Policies`]: `per-ip-burst`, `per-user-hour`.
#[derive(Clone)]
pub struct Policy {
    name: Arc<str>,
    limiter: Arc<dyn Limiter>,
}

impl Policy {
    /// The limiter `limiter`, called `name` in denials, logs and header
    /// fields.
    pub fn new(name: &str, limiter: impl Limiter + 'static) -> Self {
        Self::shared(name, Arc::new(limiter))
    }

    /// [`new`](Self::new), for a limiter already shared.
    pub fn shared(name: &str, limiter: Arc<dyn Limiter>) -> Self {
        Self {
            name: name.into(),
            limiter,
        }
    }

    /// The policy's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The policy's limiter.
    pub fn limiter(&self) -> &Arc<dyn Limiter> {
        &self.limiter
    }
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("name", &self.name)
            .field("quota", &self.limiter.quota())
            .finish()
    }
}

/// Several limiters that decide each request together: it is allowed only
/// if every one allows it, and when one denies it, none keeps its cost.
/// Real APIs combine, say, a per-IP burst limit, a per-user hourly quota and
/// a per-user monthly one.
///
/// # Take in order, give back on a denial
///
/// The policies decide in the order given, each counting the request as
/// its limiter does. The first denial (or error) stops the walk: the
/// policies after it are not asked at all, and those before it, which
/// counted the request, are given its cost back
/// ([`Limiter::refund_at`], at the same timestamp, so a window refunds
/// the very bucket it counted in). Put the policy most likely to deny
/// first: a burst limit ahead of a monthly quota means a request denied
/// for bursting never touches the monthly counter.
///
/// The race: between a policy's take and its refund, another request of
/// the same client sees the cost counted and may be denied by it, for the
/// length of one more store round trip. The error is always towards
/// denying; no policy ever admits more than its limit. A refund that fails
/// is logged and the cost stays spent (the client loses those units until
/// they leave the window), since the refund may have landed. Decisions made
/// under a store failure by a [`FailurePolicy`](crate::FailurePolicy) are
/// not refunded: the store never counted them.
///
/// The request's timestamp is read once, from the first policy's clock,
/// and every policy decides it at that time.
///
/// ```
/// use memcache_ratelimit::{FixedWindow, MemoryStore, Policies, Policy, SlidingWindow};
/// use std::sync::Arc;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let store = Arc::new(MemoryStore::new());
/// let burst = FixedWindow::builder("2/second".parse()?, store.clone()).namespace("burst").build()?;
/// let monthly = SlidingWindow::builder("1000/30d".parse()?, store).namespace("month").build()?;
/// let policies = Policies::all([Policy::new("per-ip-burst", burst), Policy::new("per-user-month", monthly)])?;
///
/// // The burst limit is keyed by address, the monthly quota by user.
/// let keys: [&[u8]; 2] = [b"203.0.113.7", b"alice"];
/// assert!(policies.check(&keys).await?.is_allowed());
/// assert!(policies.check(&keys).await?.is_allowed());
/// let third = policies.check(&keys).await?;
/// assert_eq!(third.denied_by(), Some("per-ip-burst"));
/// // Two requests spent the monthly quota; the denied one did not.
/// assert_eq!(third.decisions().count(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct Policies {
    policies: Arc<[Policy]>,
    /// Whether some policy has been seen to wait for its store, so that
    /// [`check_now`](Self::check_now) no longer tries.
    waits: Arc<AtomicBool>,
}

/// Whether `outcome` stops the walk: a denial or an error.
fn is_denial(outcome: &Result<Decision, Error>) -> bool {
    match outcome {
        Ok(decision) => decision.is_denied(),
        Err(_) => true,
    }
}

impl Policies {
    /// The policies, deciding in this order. At least one, with distinct
    /// names.
    pub fn all(policies: impl IntoIterator<Item = Policy>) -> Result<Self, ConfigError> {
        let policies: Arc<[Policy]> = policies.into_iter().collect();
        if policies.is_empty() {
            return Err(ConfigError::new(
                "policies",
                "at least one policy is needed",
            ));
        }
        for (i, policy) in policies.iter().enumerate() {
            if policies[..i].iter().any(|other| other.name == policy.name) {
                return Err(ConfigError::new(
                    "policies",
                    format!("two policies are called {:?}", policy.name()),
                ));
            }
        }
        Ok(Self {
            policies,
            waits: Arc::default(),
        })
    }

    /// One policy alone, which is always valid.
    #[cfg(feature = "tower")]
    pub(crate) fn one(policy: Policy) -> Self {
        Self {
            policies: Arc::new([policy]),
            waits: Arc::default(),
        }
    }

    /// The policies, in the order they decide.
    pub fn policies(&self) -> &[Policy] {
        &self.policies
    }

    /// Decides one request of cost 1; `keys[i]` is the client as policy
    /// `i` counts it (an address, a user, an API key).
    pub async fn check(&self, keys: &[&[u8]]) -> Result<PolicyDecisions, Error> {
        self.check_n(keys, 1).await
    }

    /// Decides one request of `cost` units; see [`check`](Self::check).
    /// One key is needed per policy, else [`Error::Config`].
    pub async fn check_n(&self, keys: &[&[u8]], cost: u64) -> Result<PolicyDecisions, Error> {
        self.check_keys(keys)?;
        let now = self.now()?;
        let mut decided: Decided = SmallVec::with_capacity(keys.len());
        for (policy, key) in self.policies.iter().zip(keys) {
            let outcome = policy.limiter.check_at_nanos(key, cost, now).await;
            let denied = is_denial(&outcome);
            if denied {
                // Boxed: a denial's refunds are rare, and held inline
                // they would make every request's future larger, by what
                // they and the outcome kept across them take. A layer's
                // future on memcached was 1,144 bytes, past the 1,032
                // that the allocator's per-thread cache serves.
                let at = chrono::DateTime::from_timestamp_nanos(now);
                Box::pin(self.give_back(&mut decided, keys, cost, at)).await;
            }
            decided.push(outcome?);
            if denied {
                break;
            }
        }
        Ok(self.decisions(decided))
    }

    /// [`check_n`](Self::check_n) within the caller's poll, when every
    /// policy decides at once ([`Limiter::check_now`]: their stores are
    /// in process); `None` when one must wait, and the request is then
    /// decided by `check_n`, from the start. A policy that waits after
    /// some that decided at once (limiters on different stores) has them
    /// give the request back, as on a denial, and from then on these
    /// policies always go the waiting way.
    ///
    /// ```
    /// use memcache_ratelimit::{FixedWindow, MemoryStore, Policies, Policy};
    /// use std::sync::Arc;
    ///
    /// let store = Arc::new(MemoryStore::new());
    /// let burst = FixedWindow::builder("1/second".parse()?, store).build()?;
    /// let policies = Policies::all([Policy::new("burst", burst)])?;
    /// let first = policies.check_now(&[b"alice"], 1).expect("an in-process store")?;
    /// assert!(first.is_allowed());
    /// let second = policies.check_now(&[b"alice"], 1).expect("an in-process store")?;
    /// assert_eq!(second.denied_by(), Some("burst"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn check_now(&self, keys: &[&[u8]], cost: u64) -> Option<Result<PolicyDecisions, Error>> {
        if let Err(error) = self.check_keys(keys) {
            return Some(Err(error));
        }
        if self.waits.load(Ordering::Relaxed) {
            return None;
        }
        let now = match self.now() {
            Ok(now) => now,
            Err(error) => return Some(Err(error)),
        };
        let mut decided: Decided = SmallVec::with_capacity(keys.len());
        for (policy, key) in self.policies.iter().zip(keys) {
            let Some(outcome) = policy.limiter.check_now_nanos(key, cost, now) else {
                self.waits.store(true, Ordering::Relaxed);
                self.give_back_now(&mut decided, keys, cost, now);
                return None;
            };
            let denied = is_denial(&outcome);
            if denied {
                self.give_back_now(&mut decided, keys, cost, now);
            }
            match outcome {
                Ok(decision) => decided.push(decision),
                Err(error) => return Some(Err(error)),
            }
            if denied {
                break;
            }
        }
        Some(Ok(self.decisions(decided)))
    }

    /// The first policy's clock, in unix nanoseconds: every policy of a
    /// request decides at that one time.
    fn now(&self) -> Result<i64, Error> {
        clock_nanos(self.policies[0].limiter.clock())
    }

    /// One key per policy, else [`Error::Config`].
    fn check_keys(&self, keys: &[&[u8]]) -> Result<(), Error> {
        if keys.len() == self.policies.len() {
            return Ok(());
        }
        Err(Error::Config(ConfigError::new(
            "keys",
            format!(
                "{} keys for {} policies: one key per policy",
                keys.len(),
                self.policies.len()
            ),
        )))
    }

    fn decisions(&self, decided: Decided) -> PolicyDecisions {
        PolicyDecisions {
            policies: self.policies.clone(),
            decided,
        }
    }

    /// [`give_back`](Self::give_back) for policies that decided at once,
    /// whose refunds complete at once too.
    fn give_back_now(&self, decided: &mut [Decision], keys: &[&[u8]], cost: u64, now: i64) {
        let at = chrono::DateTime::from_timestamp_nanos(now);
        if let Err(error) = at_once(self.give_back(decided, keys, cost, at)) {
            tracing::warn!(%error, cost, "refunds to the policies that allowed a denied request did not complete; their cost stays spent");
        }
    }

    /// Gives `cost` back to every policy in `decided` whose store counted
    /// it, and reports each one's remaining units as they are after.
    async fn give_back(
        &self,
        decided: &mut [Decision],
        keys: &[&[u8]],
        cost: u64,
        at: chrono::DateTime<chrono::Utc>,
    ) {
        for ((policy, key), decision) in self.policies.iter().zip(keys).zip(decided) {
            if decision.under_failure() {
                continue;
            }
            match policy.limiter.refund_at(key, cost, at).await {
                Ok(()) => *decision = decision.refunded(cost),
                Err(error) => tracing::warn!(
                    %error,
                    policy = policy.name(),
                    cost,
                    "refund to a policy that allowed a denied request failed; its cost stays spent"
                ),
            }
        }
    }
}

/// What [`Policies`] decided for one request: each policy's decision in
/// order, up to and including the one that denied.
#[derive(Debug, Clone)]
pub struct PolicyDecisions {
    policies: Arc<[Policy]>,
    decided: Decided,
}

/// The decisions of one request, held inline for up to two policies: no
/// allocation per request for most layers.
type Decided = SmallVec<[Decision; 2]>;

impl PolicyDecisions {
    /// Whether every policy allowed the request.
    pub fn is_allowed(&self) -> bool {
        self.denier().is_none()
    }

    /// The name of the policy that denied the request, if one did.
    pub fn denied_by(&self) -> Option<&str> {
        self.denier().map(|i| self.policies[i].name())
    }

    /// How long to wait before the request can be allowed by the policy
    /// that denied it; `None` when allowed.
    pub fn retry_after(&self) -> Option<Duration> {
        self.denier().and_then(|i| self.decided[i].retry_after())
    }

    /// Each policy that decided, with its decision, in order. On a denial
    /// the policies after the denying one are not asked and not listed;
    /// those before it show their units as they are after the refund.
    pub fn decisions(&self) -> impl Iterator<Item = (&Policy, &Decision)> {
        self.policies.iter().zip(&self.decided)
    }

    /// The decision that binds: the denial, or, when every policy allowed
    /// the request, the one with the fewest units left.
    pub fn decision(&self) -> &Decision {
        match self.denier() {
            Some(i) => &self.decided[i],
            None => self
                .decided
                .iter()
                .min_by_key(|decision| decision.remaining())
                .unwrap_or(&self.decided[0]),
        }
    }

    fn denier(&self) -> Option<usize> {
        self.decided.iter().position(Decision::is_denied)
    }
}
