//! The `tower` layer and the service it wraps around another.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use ::http::{HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode};
use tower_layer::Layer;
use tower_service::Service;

use super::extract::KeyExtractor;
use super::headers::{HeaderPolicy, PartitionKeySecret, QuotaUnit, RateLimitFields};
use crate::decision::Decision;
use crate::error::{ConfigError, Error};
use crate::limiter::Limiter;

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

/// What every clone of the layer and its services share.
#[derive(Clone)]
struct Shared {
    limiter: Arc<dyn Limiter>,
    key: Arc<dyn KeyExtractor>,
    /// The announced policy: its name, unit and whether it is per client;
    /// its quota is the limiter's for each request's key.
    policy: HeaderPolicy,
    /// The `pk` secret and whether the legacy fields are written.
    fields: RateLimitFields,
    missing: Option<MissingKey>,
    cost: Option<Arc<CostFn>>,
}

impl std::fmt::Debug for RateLimitLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("quota", &self.shared.limiter.quota())
            .field("policy", &self.shared.policy)
            .field("legacy", &self.shared.fields.legacy)
            .field("missing", &self.shared.missing)
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
        let policy = HeaderPolicy::default_for(limiter.quota());
        Self {
            shared: Arc::new(Shared {
                limiter,
                key: Arc::new(key),
                policy,
                fields: RateLimitFields::new(PartitionKeySecret::random()),
                missing: None,
                cost: None,
            }),
        }
    }

    /// The policy's name in `RateLimit-Policy` and `RateLimit`: a
    /// Structured Fields String of printable ASCII, as
    /// [`HeaderPolicy::new`] checks.
    pub fn policy_name(self, name: &str) -> Result<Self, ConfigError> {
        let policy = self.shared.policy.renamed(name)?;
        Ok(self.with(|shared| shared.policy = policy))
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

    /// What the quota counts, announced as `qu` (default
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
        self.with(|shared| shared.policy = shared.policy.clone().quota_unit(unit))
    }

    /// Whether the fields carry `pk`, the keyed hash of the client's key
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
        self.with(|shared| shared.policy = shared.policy.clone().per_client(announce))
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
    /// extractor's [`missing`](KeyExtractor::missing) status).
    pub fn on_missing_key(self, missing: MissingKey) -> Self {
        self.with(|shared| shared.missing = Some(missing))
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
        RateLimit {
            inner,
            shared: self.shared.clone(),
        }
    }
}

/// A service whose requests are rate limited by a [`RateLimitLayer`].
#[derive(Clone)]
pub struct RateLimit<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S: std::fmt::Debug> std::fmt::Debug for RateLimit<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimit")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    ReqBody: Send + 'static,
    ResBody: Default + Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<ResBody>, S::Error>> + Send>>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        // The clone is not ready; the instance polled ready serves this call.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let shared = self.shared.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let key = match shared.key.extract(&parts) {
                Some(key) => key,
                None => match &shared.missing {
                    None => return Ok(status(shared.key.missing())),
                    Some(MissingKey::Reject(code)) => return Ok(status(*code)),
                    Some(MissingKey::Allow) => {
                        return inner.call(Request::from_parts(parts, body)).await
                    }
                    Some(MissingKey::Shared(key)) => key.clone(),
                },
            };
            let cost = shared.cost.as_ref().map_or(1, |cost| cost(&parts));
            let decision = match shared.limiter.check_n(&key, cost).await {
                Ok(decision) => decision,
                Err(error) => return Ok(failed(&error)),
            };
            let mut response = if decision.is_allowed() {
                inner.call(Request::from_parts(parts, body)).await?
            } else {
                status(StatusCode::TOO_MANY_REQUESTS)
            };
            shared.annotate(response.headers_mut(), &key, &decision);
            Ok(response)
        })
    }
}

impl Shared {
    /// Writes the header fields for `decision` on client `key`, through
    /// [`RateLimitFields::fields`] as for any number of policies.
    fn annotate(&self, headers: &mut HeaderMap, key: &[u8], decision: &Decision) {
        let policy = self.policy.with_quota(self.limiter.quota_for(key));
        for (name, value) in self.fields.fields(&[(&policy, key, decision)]) {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::try_from(value),
            ) {
                headers.insert(name, value);
            }
        }
    }
}

/// An empty response with `code`.
fn status<B: Default>(code: StatusCode) -> Response<B> {
    let mut response = Response::new(B::default());
    *response.status_mut() = code;
    response
}

/// The answer when the limiter gave an error instead of a decision.
fn failed<B: Default>(error: &Error) -> Response<B> {
    let code = match error {
        Error::Store(_) | Error::DeadlineExceeded(_) | Error::Contention { .. } => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        Error::CostExceedsLimit { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    tracing::warn!(%error, status = code.as_u16(), "no rate-limit decision; answered without calling the service");
    let mut response = status(code);
    if code == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}
