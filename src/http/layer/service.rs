//! The service a [`RateLimitLayer`](super::RateLimitLayer) wraps around
//! another: who the request counts as, the decision of every policy, and
//! the answer with its header fields.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use ::http::request::Parts;
use ::http::{HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode};
use pin_project_lite::pin_project;
use smallvec::SmallVec;
use tower_service::Service;

use super::denial::Denial;
use super::field_values::cut_values;
use super::owned_keys::OwnedKeys;
use super::{Member, MissingKey, Shared};
use crate::error::Error;
use crate::http::headers::{Field, FieldBuf, HeaderPolicy, PolicyDecision};
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
enum Keys<'a> {
    /// One key per policy, in order (inline for up to two policies),
    /// borrowed from the request where the extractor can lend it.
    Each(SmallVec<[Cow<'a, [u8]>; 2]>),
    /// Not limited: let it through without fields.
    Unlimited,
    /// Answered at once with this response.
    Answer(Answer),
}

/// A response given without calling the service: a denial, a request
/// without a key, a failure to decide. Boxed, since it is rare: held
/// inline (136 bytes), it made `Keys`, `Next` and `Settled` as large,
/// and every allowed request's return of them a call to `memcpy`
/// (callgrind); boxed, they hold the fields (104 bytes) and move in
/// registers.
type Answer = Box<Response<String>>;

/// The header fields of a response: inline for the two an allowed
/// request gets from one policy or several. A name is one of the
/// constants below, borrowed: 48 bytes a field rather than 72, so that
/// the vector moves with the future in registers rather than through a
/// call to `memcpy`.
type Fields = SmallVec<[(&'static HeaderName, HeaderValue); 2]>;

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    ReqBody: Send + 'static,
    ResBody: From<String> + Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, ResBody, S::Error>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let (parts, body) = request.into_parts();
        match self.shared.next(&parts) {
            // Decided within this call (in-process stores), or not
            // counted: the service polled ready serves the request, with
            // no clone of it and no future of the layer's own on the heap.
            Next::Serve(fields) => {
                let served = self.inner.call(Request::from_parts(parts, body));
                ResponseFuture::serve(served, fields)
            }
            Next::Answer(response) => ResponseFuture::answer(*response),
            // Waiting for the store: the future owns the keys and the
            // service polled ready, and a clone of it stays for the next
            // call.
            Next::Wait { keys, cost } => {
                let shared = self.shared.clone();
                let clone = self.inner.clone();
                let mut inner = std::mem::replace(&mut self.inner, clone);
                ResponseFuture::waiting(crate::boxed::pinned(|| async move {
                    let slices = keys.slices();
                    let decided = shared.policies.check_n(&slices, cost).await;
                    let fields = match shared.settle(decided.as_ref(), &slices) {
                        Settled::Serve(fields) => fields,
                        Settled::Answer(response) => return Ok(response.map(ResBody::from)),
                    };
                    let mut response = inner.call(Request::from_parts(parts, body)).await?;
                    insert(response.headers_mut(), fields);
                    Ok(response)
                }))
            }
        }
    }
}

/// What becomes of a request, once its keys are known and, on a store
/// that answers at once, its policies have decided.
enum Next {
    /// Call the service, then add these fields to its response.
    Serve(Fields),
    /// Answer at once with this response.
    Answer(Answer),
    /// Wait for the store to decide for these keys, one per policy.
    Wait { keys: OwnedKeys, cost: u64 },
}

pin_project! {
    /// The future of a request a [`RateLimit`] service was called with:
    /// the wrapped service's future, to whose response it adds the
    /// rate-limit fields; an answer given without calling the service
    /// (a denial); or, on a store across the network, the wait for the
    /// decision and then the service. On an in-process store the request
    /// is decided, and its fields written, before the service is called,
    /// and this future holds no allocation of its own.
    ///
    /// ```
    /// use memcache_ratelimit::http::{Header, RateLimitLayer, ResponseFuture};
    /// use memcache_ratelimit::{FixedWindow, MemoryStore};
    /// use std::convert::Infallible;
    /// use std::future::{ready, Ready};
    /// use std::sync::Arc;
    /// use tower::{service_fn, Layer, Service};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// type Answer = http::Response<String>;
    /// let limiter = FixedWindow::builder("1/minute".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// let hello = service_fn(|_| ready(Ok::<_, Infallible>(Answer::new("hello".to_owned()))));
    /// let mut service = RateLimitLayer::new(limiter, Header::new("x-api-key")?).layer(hello);
    /// let request = || http::Request::builder().header("x-api-key", "k-1").body(()).unwrap();
    /// let first: ResponseFuture<Ready<Result<Answer, Infallible>>, String, Infallible> =
    ///     service.call(request());
    /// let first = first.await?;
    /// assert_eq!(first.headers()["ratelimit"].to_str()?.split(';').nth(1), Some("r=0"));
    /// let second = service.call(request()).await?;
    /// assert_eq!(second.status(), http::StatusCode::TOO_MANY_REQUESTS);
    /// # Ok(())
    /// # }
    /// ```
    pub struct ResponseFuture<F, B, E> {
        #[pin]
        state: State<F, B, E>,
    }
}

pin_project! {
    #[project = StateProjection]
    enum State<F, B, E> {
        /// The service's answer, to which `fields` are added.
        Serve { #[pin] served: F, fields: Fields },
        /// Answered without calling the service.
        Answer { response: Option<Response<String>> },
        /// Waiting for the store, then for the service.
        Waiting { future: BoxedResponse<B, E> },
    }
}

impl<F, B, E> ResponseFuture<F, B, E> {
    fn serve(served: F, fields: Fields) -> Self {
        Self {
            state: State::Serve { served, fields },
        }
    }

    fn answer(response: Response<String>) -> Self {
        Self {
            state: State::Answer {
                response: Some(response),
            },
        }
    }

    fn waiting(future: BoxedResponse<B, E>) -> Self {
        Self {
            state: State::Waiting { future },
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F, B, E>
where
    F: Future<Output = Result<Response<B>, E>>,
    B: From<String>,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProjection::Serve { served, fields } => {
                let mut response = ready!(served.poll(context))?;
                insert(response.headers_mut(), std::mem::take(fields));
                Poll::Ready(Ok(response))
            }
            StateProjection::Answer { response } => {
                let response = response
                    .take()
                    .expect("a rate-limited response's future polled after it completed");
                Poll::Ready(Ok(response.map(B::from)))
            }
            StateProjection::Waiting { future } => future.as_mut().poll(context),
        }
    }
}

impl<F, B, E> std::fmt::Debug for ResponseFuture<F, B, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state {
            State::Serve { .. } => "serve",
            State::Answer { .. } => "answer",
            State::Waiting { .. } => "waiting",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}

/// What the policies' decisions make of a request.
enum Settled {
    /// Call the service, then add these fields to its response.
    Serve(Fields),
    /// Answer at once with this response: a denial, or the failure to
    /// decide.
    Answer(Answer),
}

/// Adds `fields` to a response's header.
fn insert(headers: &mut HeaderMap, fields: Fields) {
    for (name, value) in fields {
        headers.insert(name.clone(), value);
    }
}

/// The future of a request waiting for the store.
type BoxedResponse<ResBody, E> = Pin<Box<dyn Future<Output = Result<Response<ResBody>, E>> + Send>>;

impl Shared {
    /// What becomes of the request `parts`: its keys, borrowed from it
    /// where the extractors can lend them, are decided on here when the
    /// stores answer at once, and owned by what waits for them otherwise.
    fn next(&self, parts: &Parts) -> Next {
        let keys = match self.keys(parts) {
            Keys::Each(keys) => keys,
            Keys::Unlimited => return Next::Serve(Fields::new()),
            Keys::Answer(response) => return Next::Answer(response),
        };
        let cost = self.cost.as_ref().map_or(1, |cost| cost(parts));
        let slices = slices(&keys);
        let Some(decided) = self.policies.check_now(&slices, cost) else {
            let keys = OwnedKeys::new(&slices);
            return Next::Wait { keys, cost };
        };
        match self.settle(decided.as_ref(), &slices) {
            Settled::Serve(fields) => Next::Serve(fields),
            Settled::Answer(response) => Next::Answer(response),
        }
    }

    /// Who `parts` counts as under each policy, or why it is not counted.
    fn keys<'a>(&'a self, parts: &'a Parts) -> Keys<'a> {
        if self
            .members
            .iter()
            .any(|member| member.key.is_exempt(parts))
        {
            return Keys::Unlimited;
        }
        let mut keys = SmallVec::with_capacity(self.members.len());
        for member in &self.members {
            match member.key.extract_borrowed(parts) {
                Some(key) => keys.push(key),
                None => match &self.missing {
                    None => return Keys::Answer(self.no_key(parts, &*member.key, None)),
                    Some(MissingKey::Reject(code)) => {
                        return Keys::Answer(self.no_key(parts, &*member.key, Some(*code)))
                    }
                    Some(MissingKey::Allow) => return Keys::Unlimited,
                    Some(MissingKey::Shared(key)) => keys.push(Cow::Borrowed(key.as_slice())),
                },
            }
        }
        if !self.exempt.is_empty()
            && keys
                .iter()
                .any(|key: &Cow<'_, [u8]>| self.exempt.contains(&key[..]))
        {
            return Keys::Unlimited;
        }
        Keys::Each(keys)
    }

    /// The answer to a request `key` finds no key in: the layer's
    /// [missing-key response](super::RateLimitLayer::missing_key_response)
    /// if it has one, else `code` (default: the extractor's status), with
    /// the extractor's `WWW-Authenticate` challenge on a 401.
    fn no_key(&self, parts: &Parts, key: &dyn KeyExtractor, code: Option<StatusCode>) -> Answer {
        if let Some(respond) = &self.missing_response {
            return Box::new(respond(parts));
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
        Box::new(response)
    }

    /// What the policies' decisions for the clients `keys` make of the
    /// request: the service's, with these fields, or an answer at once, a
    /// denial with its fields or the failure to decide. In shadow mode a
    /// denial is counted and logged, and the request goes on.
    fn settle(&self, decided: Result<&PolicyDecisions, &Error>, keys: &[&[u8]]) -> Settled {
        // Borrowed: the decisions of a request are 184 bytes, which a
        // move copies through a call to `memcpy`.
        let decided = match decided {
            Ok(decided) => decided,
            Err(error) => return Settled::Answer(Box::new(failed(error))),
        };
        let fields = self.fields(keys, decided);
        match decided.denied_by() {
            None => Settled::Serve(fields),
            Some(policy) if self.shadow => {
                self.shadow_denials.fetch_add(1, Ordering::Relaxed);
                tracing::info!(
                    policy,
                    "shadow mode: a request that would be denied goes on"
                );
                Settled::Serve(fields)
            }
            Some(_) => {
                let mut response = Box::new(self.denial(decided));
                insert(response.headers_mut(), fields);
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

    /// The header fields of `decided` for the clients `keys`: every
    /// policy that decided, and the ones after a denial announced in
    /// `RateLimit-Policy` alone. In shadow mode, no `Retry-After`.
    fn fields(&self, keys: &[&[u8]], decided: &PolicyDecisions) -> Fields {
        let mut decisions = decided.decisions();
        // One policy, the common layer: its entry in an array, without
        // the vectors below (callgrind).
        if let ([member], [key]) = (&self.members[..], keys) {
            let copy = announced_copy(member, key);
            let policy = copy.as_ref().unwrap_or(&member.policy);
            return match decisions.next() {
                Some((_, decision)) => self.write_fields(&[(policy, key, decision)], &[]),
                None => self.write_fields(&[], &[(policy, key)]),
            };
        }
        let mut copies: SmallVec<[Option<HeaderPolicy>; 2]> = SmallVec::new();
        for (member, key) in self.members.iter().zip(keys) {
            copies.push(announced_copy(member, key));
        }
        let policies = self.members.iter().zip(&copies);
        // Pushed one by one rather than collected (see `slices`).
        let mut decided_entries: SmallVec<[PolicyDecision<'_>; 2]> = SmallVec::new();
        let mut announced: SmallVec<[(&HeaderPolicy, &[u8]); 2]> = SmallVec::new();
        for ((member, copy), &key) in policies.zip(keys) {
            let policy = copy.as_ref().unwrap_or(&member.policy);
            match decisions.next() {
                Some((_, decision)) => decided_entries.push((policy, key, decision)),
                None => announced.push((policy, key)),
            }
        }
        self.write_fields(&decided_entries, &announced)
    }

    /// The fields of the policies that decided, `decided`, and of those
    /// only announced after a denial, `announced`.
    fn write_fields(
        &self,
        decided: &[PolicyDecision<'_>],
        announced: &[(&HeaderPolicy, &[u8])],
    ) -> Fields {
        // Every value written into one buffer on the stack, then copied
        // into this thread's buffer at once and cut there.
        let mut values = FieldBuf::new();
        let written = self
            .fields
            .write_announcing(&mut values, decided, announced);
        let mut fields = Fields::new();
        let (Some((_, first)), Some((_, last))) = (written.first(), written.last()) else {
            return fields;
        };
        debug_assert!(written
            .windows(2)
            .all(|pair| pair[0].1.end == pair[1].1.start));
        let lengths = written.iter().map(|(_, value)| value.len());
        cut_values(&values[first.start..last.end], lengths, |i, value| {
            let field = written[i].0;
            if self.shadow && field == Field::RetryAfter {
                return;
            }
            if let Ok(value) = value {
                fields.push((header_name(field), value));
            }
        });
        fields
    }
}

/// `member`'s policy as announced to client `key`: a copy only when the
/// client's quota is not the one it was built with (a dynamic plan).
fn announced_copy(member: &Member, key: &[u8]) -> Option<HeaderPolicy> {
    let quota = member.limiter.quota_for(key);
    (quota != member.policy.quota()).then(|| member.policy.with_quota(quota))
}

/// The keys of a request, one per policy, as slices: pushed one by one
/// rather than collected, since for the one or two keys of a request
/// `collect`'s reservation from the iterator's size hint costs more than
/// the pushes (callgrind).
fn slices<K: AsRef<[u8]>>(keys: &[K]) -> SmallVec<[&[u8]; 2]> {
    let mut slices = SmallVec::new();
    for key in keys {
        slices.push(key.as_ref());
    }
    slices
}

/// The name of a field [`RateLimitFields`](crate::http::RateLimitFields)
/// writes, without parsing it again on every response.
fn header_name(field: Field) -> &'static HeaderName {
    // Constants: `from_static` checks its name each time it runs.
    static POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
    static LIMIT: HeaderName = HeaderName::from_static("ratelimit");
    static RETRY_AFTER: HeaderName = http::header::RETRY_AFTER;
    static LEGACY_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
    static LEGACY_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
    static LEGACY_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
    match field {
        Field::Policy => &POLICY,
        Field::Limit => &LIMIT,
        Field::RetryAfter => &RETRY_AFTER,
        Field::LegacyLimit => &LEGACY_LIMIT,
        Field::LegacyRemaining => &LEGACY_REMAINING,
        Field::LegacyReset => &LEGACY_RESET,
    }
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
mod tests;
