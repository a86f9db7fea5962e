//! The `tower` layer: its settings, one policy or several. The service it
//! wraps around another is in `service`, the answer to a denial in
//! `denial`.

mod announce;
mod denial;
mod field_values;
mod owned_keys;
mod rollout;
mod service;

use std::collections::HashSet;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use ::http::{Response, StatusCode};
use tower_layer::Layer;

pub use self::denial::Denial;
pub use self::service::{RateLimit, ResponseFuture};
use super::extract::KeyExtractor;
use super::headers::{HeaderPolicy, PartitionKeySecret, RateLimitFields};
use crate::error::ConfigError;
use crate::limiter::{Limiter, Policies, Policy};

/// What to do with a request whose client the extractor cannot name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MissingKey {
    /// Answer with this status, without calling the service.
    Reject(StatusCode),
    /// Let it through unlimited, without rate-limit header fields.
    Allow,
    /// Count every such request under this one key, as one client.
    Shared(Vec<u8>),
}

/// The cost of a request, from its head.
type CostFn = dyn Fn(&http::request::Parts) -> u64 + Send + Sync;

/// Rate limits the requests of the service it wraps; see the
/// [module documentation](super).
///
/// ```
/// use memcache_ratelimit::http::{Header, MissingKey, RateLimitLayer};
/// use memcache_ratelimit::{FixedWindow, MemoryStore};
/// use std::sync::Arc;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let limiter = FixedWindow::builder("1000/hour".parse()?, Arc::new(MemoryStore::new())).build()?;
/// let layer = RateLimitLayer::new(limiter, Header::new("x-tenant")?)
///     .on_missing_key(MissingKey::Shared(b"anonymous".to_vec()))
///     // Uploads cost 10.
///     .cost(|parts| if parts.method == http::Method::POST { 10 } else { 1 });
/// assert!(RateLimitLayer::new(FixedWindow::builder("1/second".parse()?, Arc::new(MemoryStore::new())).build()?, Header::new("x")?)
///     .policy_name("not\tprintable ASCII")
///     .is_err());
/// # let _ = layer;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
#[must_use]
pub struct RateLimitLayer {
    shared: Arc<Shared>,
}

/// How a denied request is answered.
type DenyFn = dyn Fn(&Denial) -> Response<String> + Send + Sync;

/// How a request without a key is answered.
type MissingFn = dyn Fn(&http::request::Parts) -> Response<String> + Send + Sync;

/// One policy of the layer: its limiter, who a request counts as, and how
/// the policy is announced (its quota is the limiter's for each key).
#[derive(Clone)]
struct Member {
    limiter: Arc<dyn Limiter>,
    key: Arc<dyn KeyExtractor>,
    policy: HeaderPolicy,
}

/// What every clone of the layer and its services share.
#[derive(Clone)]
struct Shared {
    /// At least one, in the order they decide.
    members: Vec<Member>,
    /// The members' limiters, deciding together.
    policies: Policies,
    /// The `pk` secret and whether the legacy fields are written.
    fields: RateLimitFields,
    missing: Option<MissingKey>,
    cost: Option<Arc<CostFn>>,
    /// Decide and announce, but never deny.
    shadow: bool,
    /// Keys whose requests are not limited at all.
    exempt: Arc<HashSet<Vec<u8>>>,
    on_denied: Option<Arc<DenyFn>>,
    /// Replaces the status answer to a request without a key.
    missing_response: Option<Arc<MissingFn>>,
    /// Requests shadow mode let through that would have been denied,
    /// counted across every clone.
    shadow_denials: Arc<AtomicU64>,
}

impl Shared {
    /// The policies the members make, checked.
    fn policies(members: &[Member]) -> Result<Policies, ConfigError> {
        Policies::all(
            members
                .iter()
                .map(|member| Policy::shared(member.policy.name(), member.limiter.clone())),
        )
    }

    /// The policy added last, which the per-policy settings change.
    fn last(&mut self) -> &mut Member {
        let last = self.members.len() - 1;
        &mut self.members[last]
    }
}

impl std::fmt::Debug for RateLimitLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let policies: Vec<&HeaderPolicy> = self.shared.members.iter().map(|m| &m.policy).collect();
        f.debug_struct("RateLimitLayer")
            .field("policies", &policies)
            .field("legacy", &self.shared.fields.legacy)
            .field("missing", &self.shared.missing)
            .field("shadow", &self.shared.shadow)
            .finish_non_exhaustive()
    }
}

impl RateLimitLayer {
    /// Limits requests with `limiter`, counting each under the key `key`
    /// extracts. The policy is announced as `"default"`, per client (with
    /// a `pk` keyed by a [random](PartitionKeySecret::random) secret of
    /// this layer's own), in requests.
    pub fn new(limiter: impl Limiter + 'static, key: impl KeyExtractor) -> Self {
        Self::shared(Arc::new(limiter), key)
    }

    /// [`new`](Self::new), for a limiter already shared.
    pub fn shared(limiter: Arc<dyn Limiter>, key: impl KeyExtractor) -> Self {
        let members = vec![Member {
            policy: HeaderPolicy::default_for(limiter.quota()),
            limiter,
            key: Arc::new(key),
        }];
        let policies = Policies::one(Policy::shared(
            members[0].policy.name(),
            members[0].limiter.clone(),
        ));
        Self {
            shared: Arc::new(Shared {
                members,
                policies,
                fields: RateLimitFields::new(PartitionKeySecret::random()),
                missing: None,
                cost: None,
                shadow: false,
                exempt: Arc::default(),
                on_denied: None,
                missing_response: None,
                shadow_denials: Arc::default(),
            }),
        }
    }

    /// Adds a policy called `name`: `limiter`, counting each request
    /// under the key `key` extracts. Every request must then be allowed
    /// by every policy, all or nothing, as [`Policies`] decides: in the
    /// order added, stopping at the first denial, giving the cost back to
    /// the policies before it. So add the policy most likely to deny
    /// first (a per-IP burst before a per-user monthly quota). The
    /// per-policy settings that follow ([`policy_name`](Self::policy_name),
    /// [`quota_unit`](Self::quota_unit),
    /// [`announce_partition_key`](Self::announce_partition_key)) apply to
    /// this policy.
    ///
    /// ```
    /// use memcache_ratelimit::http::{ApiKey, ClientIp, RateLimitLayer};
    /// use memcache_ratelimit::{FixedWindow, MemoryStore, SlidingWindow};
    /// use std::sync::Arc;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = Arc::new(MemoryStore::new());
    /// let burst = FixedWindow::builder("20/second".parse()?, store.clone()).namespace("burst").build()?;
    /// let hourly = SlidingWindow::builder("1000/hour".parse()?, store.clone()).namespace("hour").build()?;
    /// let monthly = SlidingWindow::builder("100000/30d".parse()?, store).namespace("month").build()?;
    /// let layer = RateLimitLayer::new(burst, ClientIp::peer())
    ///     .policy_name("per-ip-burst")?
    ///     .and("per-user-hour", hourly, ApiKey::bearer())?
    ///     .and("per-user-month", monthly, ApiKey::bearer())?;
    /// # let _ = layer;
    /// # Ok(())
    /// # }
    /// ```
    pub fn and(
        self,
        name: &str,
        limiter: impl Limiter + 'static,
        key: impl KeyExtractor,
    ) -> Result<Self, ConfigError> {
        let limiter: Arc<dyn Limiter> = Arc::new(limiter);
        let policy = HeaderPolicy::new(name, limiter.quota())?.per_client(true);
        let mut members = self.shared.members.clone();
        members.push(Member {
            limiter,
            key: Arc::new(key),
            policy,
        });
        let policies = Shared::policies(&members)?;
        Ok(self.with(|shared| {
            shared.members = members;
            shared.policies = policies;
        }))
    }

    /// The name of the policy added last (the one of [`new`](Self::new),
    /// unless [`and`](Self::and) added more) in `RateLimit-Policy`,
    /// `RateLimit` and denials: a Structured Fields String of printable
    /// ASCII, as [`HeaderPolicy::new`] checks, distinct from the others.
    pub fn policy_name(self, name: &str) -> Result<Self, ConfigError> {
        let mut members = self.shared.members.clone();
        let last = members.len() - 1;
        members[last].policy = members[last].policy.renamed(name)?;
        let policies = Shared::policies(&members)?;
        Ok(self.with(|shared| {
            shared.members = members;
            shared.policies = policies;
        }))
    }

    /// The cost of each request (default 1). A cost of 0 is answered 500:
    /// every request costs at least 1.
    pub fn cost(self, cost: impl Fn(&http::request::Parts) -> u64 + Send + Sync + 'static) -> Self {
        self.with(|shared| shared.cost = Some(Arc::new(cost)))
    }

    /// Changes this layer's settings. A layer that shares them with a
    /// clone copies them first, so configuring one copy never changes
    /// another, in whatever order the calls come.
    fn with(mut self, change: impl FnOnce(&mut Shared)) -> Self {
        change(Arc::make_mut(&mut self.shared));
        self
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit::new(inner, self.shared.clone())
    }
}
