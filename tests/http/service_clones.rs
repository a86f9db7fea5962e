//! The service the layer wraps is cloned only when a decision must wait
//! for its store: on an in-process store the instance polled ready serves
//! the request, as the decision is made within the call, for a limiter
//! and for a `DynamicLimiter` alike.

#![cfg(feature = "tower")]

use crate::common;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response, StatusCode};
use memcache_ratelimit::http::{Header, RateLimitLayer};
use memcache_ratelimit::store::{CountingStore, Store};
use memcache_ratelimit::{
    Algorithm, DynamicLimiter, Limiter, LimiterSpec, ManualClock, MemoryStore,
};
use tower::{Layer, Service, ServiceExt};

/// A service that counts its clones and its calls, answering 200.
struct Clones {
    clones: Arc<AtomicU64>,
    calls: Arc<AtomicU64>,
}

impl Clone for Clones {
    fn clone(&self) -> Self {
        self.clones.fetch_add(1, Ordering::SeqCst);
        Self {
            clones: self.clones.clone(),
            calls: self.calls.clone(),
        }
    }
}

impl Service<Request<String>> for Clones {
    type Response = Response<String>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<String>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<String>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(Response::new("ok".to_owned())) })
    }
}

/// A fixed window of 3/minute on `store`, alone or as the quota every
/// client of a `DynamicLimiter` is held to.
fn limiter(store: Arc<dyn Store>, dynamic: bool) -> Arc<dyn Limiter> {
    let clock = ManualClock::from_unix_secs(common::T0);
    let spec = LimiterSpec::new(Algorithm::FixedWindow, "3/minute".parse().unwrap()).clock(clock);
    if dynamic {
        let quota = spec.quota();
        Arc::new(DynamicLimiter::new(spec, store, move |_: &[u8]| quota).unwrap())
    } else {
        Arc::new(spec.build(store).unwrap())
    }
}

/// Sends 5 requests of one client through a layer of `limiter` to one
/// service instance, polled ready before each; returns the statuses, the
/// clones of the wrapped service made while serving and the calls it
/// got.
async fn serve(limiter: Arc<dyn Limiter>) -> (Vec<StatusCode>, u64, u64) {
    let clones = Arc::new(AtomicU64::new(0));
    let calls = Arc::new(AtomicU64::new(0));
    let inner = Clones {
        clones: clones.clone(),
        calls: calls.clone(),
    };
    let mut service =
        RateLimitLayer::shared(limiter, Header::new("x-api-key").unwrap()).layer(inner);
    let made = clones.load(Ordering::SeqCst);
    let mut statuses = Vec::new();
    for _ in 0..5 {
        let request = Request::get("/")
            .header("x-api-key", "alice")
            .body(String::new())
            .unwrap();
        let response = service.ready().await.unwrap().call(request).await.unwrap();
        statuses.push(response.status());
    }
    let clones = clones.load(Ordering::SeqCst) - made;
    (statuses, clones, calls.load(Ordering::SeqCst))
}

#[tokio::test]
async fn the_wrapped_service_is_cloned_only_for_decisions_that_wait() {
    let ok = StatusCode::OK;
    let denied = StatusCode::TOO_MANY_REQUESTS;
    let clock = ManualClock::from_unix_secs(common::T0);
    for dynamic in [false, true] {
        let in_process = Arc::new(MemoryStore::with_clock(clock.clone()));
        let (statuses, clones, calls) = serve(limiter(in_process, dynamic)).await;
        assert_eq!(statuses, [ok, ok, ok, denied, denied], "dynamic: {dynamic}");
        assert_eq!((clones, calls), (0, 3), "dynamic: {dynamic}");
        // The same store behind a decorator that must see every call:
        // each request waits, so the service is cloned for each.
        let waiting = Arc::new(CountingStore::new(MemoryStore::with_clock(clock.clone())));
        let (statuses, clones, calls) = serve(limiter(waiting, dynamic)).await;
        assert_eq!(statuses, [ok, ok, ok, denied, denied], "dynamic: {dynamic}");
        assert_eq!((clones, calls), (5, 3), "dynamic: {dynamic}");
    }
}
