//! The `tower` layer: its settings, one policy or several. The service it
//! wraps around another is in `service`, the answer to a denial in
//! `denial`.

mod denial;
mod service;

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ::http::{Response, StatusCode};
use tower_layer::Layer;

pub use self::denial::Denial;
pub use self::service::RateLimit;
use super::extract::KeyExtractor;
use super::headers::{HeaderPolicy, PartitionKeySecret, QuotaUnit, RateLimitFields};
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

    /// Shadow mode: every request is decided, counted, logged and given
    /// its header fields, but none is denied; a request that would have
    /// been is logged (`tracing`, at `info`) and counted in
    /// [`shadow_denials`](Self::shadow_denials), and gets no
    /// `Retry-After`. This is how a new limit is rolled out: watch what it
    /// would deny, then turn shadow mode off.
    ///
    /// ```
    /// use memcache_ratelimit::http::{ClientIp, RateLimitLayer};
    /// use memcache_ratelimit::{FixedWindow, MemoryStore};
    /// use std::sync::Arc;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = FixedWindow::builder("100/minute".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// let layer = RateLimitLayer::new(limiter, ClientIp::peer()).shadow(true);
    /// assert_eq!(layer.shadow_denials(), 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn shadow(self, shadow: bool) -> Self {
        self.with(|shared| shared.shadow = shadow)
    }

    /// How many requests shadow mode let through that would otherwise have
    /// been denied, across this layer, its clones and their services.
    pub fn shadow_denials(&self) -> u64 {
        self.shared.shadow_denials.load(Ordering::Relaxed)
    }

    /// Requests counted under any of these keys (as an extractor names
    /// them, for example `ip:10.0.0.7` or an API key) are not limited at
    /// all: no policy counts them and they get no rate-limit fields. For
    /// internal callers, health checks and partners with their own terms.
    ///
    /// ```
    /// use memcache_ratelimit::http::{ApiKey, RateLimitLayer};
    /// use memcache_ratelimit::{FixedWindow, MemoryStore};
    /// use std::sync::Arc;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = FixedWindow::builder("100/minute".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// let layer = RateLimitLayer::new(limiter, ApiKey::header("x-api-key")?)
    ///     .exempt_keys([b"internal-batch-job".to_vec()]);
    /// # let _ = layer;
    /// # Ok(())
    /// # }
    /// ```
    pub fn exempt_keys(self, keys: impl IntoIterator<Item = Vec<u8>>) -> Self {
        let keys: HashSet<Vec<u8>> = keys.into_iter().collect();
        self.with(|shared| shared.exempt = Arc::new(keys))
    }

    /// Builds the answer to a denied request (default:
    /// [`Denial::problem`], a 429 with an RFC 9457 problem body). The
    /// layer adds the rate-limit fields and `Retry-After` to whatever it
    /// returns.
    ///
    /// ```
    /// use memcache_ratelimit::http::{ClientIp, RateLimitLayer};
    /// use memcache_ratelimit::{FixedWindow, MemoryStore};
    /// use std::sync::Arc;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = FixedWindow::builder("100/minute".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// let layer = RateLimitLayer::new(limiter, ClientIp::peer()).on_denied(|denial| {
    ///     let mut response = http::Response::new(format!("slow down ({})", denial.policy()));
    ///     *response.status_mut() = http::StatusCode::TOO_MANY_REQUESTS;
    ///     response
    /// });
    /// # let _ = layer;
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_denied(
        self,
        respond: impl Fn(&Denial) -> Response<String> + Send + Sync + 'static,
    ) -> Self {
        self.with(|shared| shared.on_denied = Some(Arc::new(respond)))
    }

    /// Adds `X-RateLimit-Limit`, `X-RateLimit-Remaining` and
    /// `X-RateLimit-Reset` (seconds until the client's usage has drained)
    /// to every response with rate-limit fields.
    ///
    /// ```
    /// use memcache_ratelimit::http::{ClientIp, RateLimitLayer};
    /// use memcache_ratelimit::{FixedWindow, MemoryStore};
    /// use std::sync::Arc;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = FixedWindow::builder("100/minute".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// let layer = RateLimitLayer::new(limiter, ClientIp::peer()).legacy_headers(true);
    /// # let _ = layer;
    /// # Ok(())
    /// # }
    /// ```
    pub fn legacy_headers(self, legacy: bool) -> Self {
        self.with(|shared| shared.fields.legacy = legacy)
    }

    /// What the quota of the policy added last counts, announced as `qu` (default
    /// [`QuotaUnit::Requests`], announced by leaving `qu` out): for
    /// example [`QuotaUnit::ContentBytes`] when the [`cost`](Self::cost)
    /// of a request is its size.
    ///
    /// ```
    /// use memcache_ratelimit::http::{Header, QuotaUnit, RateLimitLayer};
    /// use memcache_ratelimit::{FixedWindow, MemoryStore};
    /// use std::sync::Arc;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = FixedWindow::builder("10000000/hour".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// let layer = RateLimitLayer::new(limiter, Header::new("x-tenant")?)
    ///     .quota_unit(QuotaUnit::ContentBytes)
    ///     .cost(|parts| {
    ///         parts.headers.get(http::header::CONTENT_LENGTH)
    ///             .and_then(|length| length.to_str().ok()?.parse().ok())
    ///             .unwrap_or(1)
    ///             .max(1)
    ///     });
    /// # let _ = layer;
    /// # Ok(())
    /// # }
    /// ```
    pub fn quota_unit(self, unit: QuotaUnit) -> Self {
        self.with(|shared| {
            let member = shared.last();
            member.policy = member.policy.clone().quota_unit(unit);
        })
    }

    /// Whether the fields of the policy added last carry `pk`, the keyed
    /// hash of the client's key
    /// (default: true, since the layer counts each client apart). Turn it
    /// off when the extractor names one key for everyone, a global limit.
    ///
    /// ```
    /// use memcache_ratelimit::http::RateLimitLayer;
    /// use memcache_ratelimit::{FixedWindow, MemoryStore};
    /// use std::sync::Arc;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = FixedWindow::builder("5000/second".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// // Every request counted under one key: the whole service's limit.
    /// let everyone = |_: &http::request::Parts| Some(b"everyone".to_vec());
    /// let layer = RateLimitLayer::new(limiter, everyone)
    ///     .policy_name("service")?
    ///     .announce_partition_key(false);
    /// # let _ = layer;
    /// # Ok(())
    /// # }
    /// ```
    pub fn announce_partition_key(self, announce: bool) -> Self {
        self.with(|shared| {
            let member = shared.last();
            member.policy = member.policy.clone().per_client(announce);
        })
    }

    /// The secret `pk` is keyed with (default: random, for this layer and
    /// its clones). Give every instance of a service the same one so they
    /// announce the same `pk` for a client; see [`PartitionKeySecret`] for
    /// why the client's key is never sent as it is.
    ///
    /// ```
    /// use memcache_ratelimit::http::{ClientIp, PartitionKeySecret, RateLimitLayer};
    /// use memcache_ratelimit::{FixedWindow, MemoryStore};
    /// use std::sync::Arc;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // In a real deployment: read from the fleet's secret store.
    /// let secret = PartitionKeySecret::new(b"a secret of at least thirty-two bytes")?;
    /// let limiter = FixedWindow::builder("100/minute".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// let layer = RateLimitLayer::new(limiter, ClientIp::peer()).partition_key_secret(secret);
    /// # let _ = layer;
    /// # Ok(())
    /// # }
    /// ```
    pub fn partition_key_secret(self, secret: PartitionKeySecret) -> Self {
        self.with(|shared| shared.fields.secret = secret)
    }

    /// What a request without a key gets (default: rejected with the
    /// extractor's [`missing`](KeyExtractor::missing) status, and on a 401
    /// the extractor's [`challenge`](KeyExtractor::challenge) in
    /// `WWW-Authenticate`: an [`ApiKey`](super::ApiKey) asks for its key).
    pub fn on_missing_key(self, missing: MissingKey) -> Self {
        self.with(|shared| shared.missing = Some(missing))
    }

    /// The answer to a request rejected for having no key, in place of
    /// the bare status: for example a JSON error body, or a redirect to a
    /// sign-in page. It does not change [`MissingKey::Allow`] or
    /// [`MissingKey::Shared`], which let the request through.
    ///
    /// ```
    /// use memcache_ratelimit::http::{ApiKey, RateLimitLayer};
    /// use memcache_ratelimit::{FixedWindow, MemoryStore};
    /// use std::sync::Arc;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = FixedWindow::builder("100/minute".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// let layer = RateLimitLayer::new(limiter, ApiKey::header("x-api-key")?).missing_key_response(|_| {
    ///     let mut response = http::Response::new(r#"{"error":"send your key in x-api-key"}"#.to_owned());
    ///     *response.status_mut() = http::StatusCode::UNAUTHORIZED;
    ///     response.headers_mut().insert("www-authenticate", http::HeaderValue::from_static(r#"ApiKey header="x-api-key""#));
    ///     response
    /// });
    /// # let _ = layer;
    /// # Ok(())
    /// # }
    /// ```
    pub fn missing_key_response(
        self,
        respond: impl Fn(&http::request::Parts) -> Response<String> + Send + Sync + 'static,
    ) -> Self {
        self.with(|shared| shared.missing_response = Some(Arc::new(respond)))
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
