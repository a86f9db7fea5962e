//! The `tower` layer and the service it wraps around another.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use ::http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use tower_layer::Layer;
use tower_service::Service;

use super::extract::KeyExtractor;
use super::headers::HeaderPolicy;
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
///     .policy_name("not a token")
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
    policy_name: String,
    legacy: bool,
    missing: Option<MissingKey>,
    cost: Option<Arc<CostFn>>,
}

impl std::fmt::Debug for RateLimitLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("quota", &self.shared.limiter.quota())
            .field("policy_name", &self.shared.policy_name)
            .field("legacy", &self.shared.legacy)
            .field("missing", &self.shared.missing)
            .finish_non_exhaustive()
    }
}

impl RateLimitLayer {
    /// Limits requests with `limiter`, counting each under the key `key`
    /// extracts. The policy is announced as `default`.
    pub fn new(limiter: impl Limiter + 'static, key: impl KeyExtractor) -> Self {
        Self::shared(Arc::new(limiter), key)
    }

    /// [`new`](Self::new), for a limiter already shared.
    pub fn shared(limiter: Arc<dyn Limiter>, key: impl KeyExtractor) -> Self {
        Self {
            shared: Arc::new(Shared {
                limiter,
                key: Arc::new(key),
                policy_name: "default".to_owned(),
                legacy: false,
                missing: None,
                cost: None,
            }),
        }
    }

    /// The policy's name in `RateLimit-Policy` and `RateLimit`: a
    /// Structured Fields token, as [`HeaderPolicy::new`] checks.
    pub fn policy_name(self, name: &str) -> Result<Self, ConfigError> {
        HeaderPolicy::new(name, self.shared.limiter.quota())?;
        Ok(self.with(|shared| shared.policy_name = name.to_owned()))
    }

    /// Adds `X-RateLimit-Limit`, `X-RateLimit-Remaining` and
    /// `X-RateLimit-Reset` (seconds until the reset) to every response.
    pub fn legacy_headers(self, legacy: bool) -> Self {
        self.with(|shared| shared.legacy = legacy)
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
    /// Writes the header fields for `decision` on client `key`.
    fn annotate(&self, headers: &mut HeaderMap, key: &[u8], decision: &Decision) {
        let quota = self.limiter.quota_for(key);
        let Ok(policy) = HeaderPolicy::new(&self.policy_name, quota) else {
            return;
        };
        for (name, value) in policy.fields(decision, self.legacy) {
            if let Ok(value) = HeaderValue::try_from(value) {
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
