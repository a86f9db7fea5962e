//! The service a [`RateLimitLayer`](super::RateLimitLayer) wraps around
//! another: who the request counts as, the decision of every policy, and
//! the answer with its header fields.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

use ::http::request::Parts;
use ::http::{HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode};
use bytes::Bytes;
use smallvec::SmallVec;
use tower_service::Service;

use super::denial::Denial;
use super::{MissingKey, Shared};
use crate::error::Error;
use crate::http::headers::{field, HeaderPolicy};
use crate::http::KeyExtractor;
use crate::limiter::PolicyDecisions;

/// A service whose requests are rate limited by a
/// [`RateLimitLayer`](super::RateLimitLayer).
#[derive(Clone)]
pub struct RateLimit<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> RateLimit<S> {
    pub(super) fn new(inner: S, shared: Arc<Shared>) -> Self {
        Self { inner, shared }
    }
}

impl<S: std::fmt::Debug> std::fmt::Debug for RateLimit<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimit")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

/// Who a request counts as, under each policy.
enum Keys {
    /// One key per policy, in order (inline for up to two policies).
    Each(SmallVec<[Vec<u8>; 2]>),
    /// Not limited: let it through without fields.
    Unlimited,
    /// Answered at once with this response.
    Answer(Response<String>),
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    ReqBody: Send + 'static,
    ResBody: From<String> + Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = BoxedResponse<ResBody, S::Error>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let (parts, body) = request.into_parts();
        let keys = match self.shared.keys(&parts) {
            Keys::Each(keys) => keys,
            Keys::Unlimited => return Box::pin(self.inner.call(Request::from_parts(parts, body))),
            Keys::Answer(response) => return answer(response),
        };
        let cost = self.shared.cost.as_ref().map_or(1, |cost| cost(&parts));
        let decided_now = {
            let slices = slices(&keys);
            self.shared
                .policies
                .check_now(&slices, cost)
                .map(|decided| self.shared.settle(decided, &slices))
        };
        let shared = self.shared.clone();
        match decided_now {
            // Decided within this call (in-process stores): the service
            // polled ready serves the request, with no clone of it.
            Some(Settled::Answer(response)) => answer(response),
            Some(Settled::Serve(decided)) => {
                let served = self.inner.call(Request::from_parts(parts, body));
                Box::pin(async move {
                    let mut response = served.await?;
                    shared.annotate(response.headers_mut(), &slices(&keys), &decided);
                    Ok(response)
                })
            }
            // Waiting for the store: the future owns the service polled
            // ready, and a clone of it stays for the next call.
            None => {
                let clone = self.inner.clone();
                let mut inner = std::mem::replace(&mut self.inner, clone);
                Box::pin(async move {
                    let slices = slices(&keys);
                    let decided = shared.policies.check_n(&slices, cost).await;
                    let decided = match shared.settle(decided, &slices) {
                        Settled::Serve(decided) => decided,
                        Settled::Answer(response) => return Ok(response.map(ResBody::from)),
                    };
                    let mut response = inner.call(Request::from_parts(parts, body)).await?;
                    shared.annotate(response.headers_mut(), &slices, &decided);
                    Ok(response)
                })
            }
        }
    }
}

/// What the layer does with a request once its policies have decided.
enum Settled {
    /// Call the service, then write the fields of these decisions.
    Serve(PolicyDecisions),
    /// Answer at once with this response: a denial, or the failure to
    /// decide.
    Answer(Response<String>),
}

/// The keys as slices, inline for up to two policies.
fn slices(keys: &[Vec<u8>]) -> SmallVec<[&[u8]; 2]> {
    keys.iter().map(Vec::as_slice).collect()
}

/// A response answered without calling the service.
fn answer<ResBody, E>(response: Response<String>) -> BoxedResponse<ResBody, E>
where
    ResBody: From<String> + Send + 'static,
    E: 'static,
{
    // An async block rather than `ready`: its error type need not be
    // `Send`, as it holds none.
    Box::pin(async move { Ok(response.map(ResBody::from)) })
}

/// The future of a rate-limited request.
type BoxedResponse<ResBody, E> = Pin<Box<dyn Future<Output = Result<Response<ResBody>, E>> + Send>>;

impl Shared {
    /// Who `parts` counts as under each policy, or why it is not counted.
    fn keys(&self, parts: &Parts) -> Keys {
        if self
            .members
            .iter()
            .any(|member| member.key.is_exempt(parts))
        {
            return Keys::Unlimited;
        }
        let mut keys = SmallVec::with_capacity(self.members.len());
        for member in &self.members {
            match member.key.extract(parts) {
                Some(key) => keys.push(key),
                None => match &self.missing {
                    None => return Keys::Answer(self.no_key(parts, &*member.key, None)),
                    Some(MissingKey::Reject(code)) => {
                        return Keys::Answer(self.no_key(parts, &*member.key, Some(*code)))
                    }
                    Some(MissingKey::Allow) => return Keys::Unlimited,
                    Some(MissingKey::Shared(key)) => keys.push(key.clone()),
                },
            }
        }
        if keys.iter().any(|key| self.exempt.contains(key)) {
            return Keys::Unlimited;
        }
        Keys::Each(keys)
    }

    /// The answer to a request `key` finds no key in: the layer's
    /// [missing-key response](super::RateLimitLayer::missing_key_response)
    /// if it has one, else `code` (default: the extractor's status), with
    /// the extractor's `WWW-Authenticate` challenge on a 401.
    fn no_key(
        &self,
        parts: &Parts,
        key: &dyn KeyExtractor,
        code: Option<StatusCode>,
    ) -> Response<String> {
        if let Some(respond) = &self.missing_response {
            return respond(parts);
        }
        let code = code.unwrap_or_else(|| key.missing());
        let mut response = status(code);
        if code == StatusCode::UNAUTHORIZED {
            if let Some(challenge) = key.challenge() {
                response
                    .headers_mut()
                    .insert(http::header::WWW_AUTHENTICATE, challenge);
            }
        }
        response
    }

    /// The request goes on to the service with the policies' decisions,
    /// or is answered at once: a denial, with its fields, or the failure
    /// to decide. In shadow mode a denial is counted and logged, and the
    /// request goes on.
    fn settle(&self, decided: Result<PolicyDecisions, Error>, keys: &[&[u8]]) -> Settled {
        let decided = match decided {
            Ok(decided) => decided,
            Err(error) => return Settled::Answer(failed(&error)),
        };
        match decided.denied_by() {
            None => Settled::Serve(decided),
            Some(policy) if self.shadow => {
                self.shadow_denials.fetch_add(1, Ordering::Relaxed);
                tracing::info!(
                    policy,
                    "shadow mode: a request that would be denied goes on"
                );
                Settled::Serve(decided)
            }
            Some(_) => {
                let mut response = self.denial(&decided);
                self.annotate(response.headers_mut(), keys, &decided);
                Settled::Answer(response)
            }
        }
    }

    /// The answer to a request that `decided` denies.
    fn denial(&self, decided: &PolicyDecisions) -> Response<String> {
        let denial = Denial {
            policy: decided.denied_by().unwrap_or_default().to_owned(),
            retry_after: decided.retry_after().unwrap_or_default(),
        };
        match &self.on_denied {
            Some(respond) => respond(&denial),
            None => denial.problem(),
        }
    }

    /// Writes the header fields of `decided` for the clients `keys`: every
    /// policy that decided, and the ones after a denial announced in
    /// `RateLimit-Policy` alone. In shadow mode, no `Retry-After`.
    fn annotate(&self, headers: &mut HeaderMap, keys: &[&[u8]], decided: &PolicyDecisions) {
        // Each policy as announced to this client: copied only when the
        // client's quota is not the one it was built with (a dynamic plan).
        let policies: SmallVec<[(Cow<'_, HeaderPolicy>, &[u8]); 2]> = self
            .members
            .iter()
            .zip(keys)
            .map(|(member, &key)| {
                let quota = member.limiter.quota_for(key);
                let policy = if quota == member.policy.quota() {
                    Cow::Borrowed(&member.policy)
                } else {
                    Cow::Owned(member.policy.with_quota(quota))
                };
                (policy, key)
            })
            .collect();
        let decided_entries: SmallVec<[_; 2]> = policies
            .iter()
            .zip(decided.decisions())
            .map(|((policy, key), (_, decision))| (&**policy, *key, decision))
            .collect();
        let announced: SmallVec<[_; 2]> = policies[decided_entries.len()..]
            .iter()
            .map(|(policy, key)| (&**policy, *key))
            .collect();
        let mut values = Vec::new();
        let written = self
            .fields
            .write_announcing(&mut values, &decided_entries, &announced);
        // One buffer for every value: each field holds a slice of it.
        let values = Bytes::from(values);
        headers.reserve(written.len());
        for (name, value) in written {
            if self.shadow && name == field::RETRY_AFTER {
                continue;
            }
            if let (Some(name), Ok(value)) = (
                header_name(name),
                HeaderValue::from_maybe_shared(values.slice(value)),
            ) {
                headers.insert(name, value);
            }
        }
    }
}

/// The name of a field [`RateLimitFields`](crate::http::RateLimitFields)
/// writes, without parsing it again on every response.
fn header_name(name: &str) -> Option<HeaderName> {
    // Constants: `from_static` checks its name each time it runs.
    const POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
    const LIMIT: HeaderName = HeaderName::from_static("ratelimit");
    const LEGACY_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
    const LEGACY_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
    const LEGACY_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
    Some(match name {
        field::POLICY => POLICY,
        field::LIMIT => LIMIT,
        field::RETRY_AFTER => http::header::RETRY_AFTER,
        field::LEGACY_LIMIT => LEGACY_LIMIT,
        field::LEGACY_REMAINING => LEGACY_REMAINING,
        field::LEGACY_RESET => LEGACY_RESET,
        other => HeaderName::from_bytes(other.as_bytes()).ok()?,
    })
}

/// An empty response with `code`.
fn status(code: StatusCode) -> Response<String> {
    let mut response = Response::new(String::new());
    *response.status_mut() = code;
    response
}

/// The answer when the limiter gave an error instead of a decision.
fn failed(error: &Error) -> Response<String> {
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

#[cfg(test)]
mod tests {
    use super::header_name;
    use crate::http::headers::field;

    #[test]
    fn every_field_name_is_known_without_parsing() {
        for name in [
            field::POLICY,
            field::LIMIT,
            field::RETRY_AFTER,
            field::LEGACY_LIMIT,
            field::LEGACY_REMAINING,
            field::LEGACY_RESET,
        ] {
            let known = header_name(name).expect("a field name");
            assert_eq!(known.as_str(), name.to_ascii_lowercase());
        }
    }
}
