//! The tower layer in process: status codes, header fields, key
//! extractors, missing keys, dynamic quotas and store failures, on a
//! `ManualClock`.

#![cfg(feature = "tower")]

use crate::common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response, StatusCode};
use memcache_ratelimit::http::{ApiKey, ClientIp, Header, MissingKey, RateLimitLayer};
use memcache_ratelimit::{
    Algorithm, DynamicLimiter, FailurePolicy, LimiterSpec, ManualClock, MemoryStore, Quota,
    RateLimiter, SlidingWindow,
};
use tower::{Layer, Service, ServiceExt};

/// The wrapped service: counts its calls and answers 200 "ok".
#[derive(Clone, Default)]
struct Counted(Arc<AtomicU64>);

impl Counted {
    fn calls(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }

    fn service(
        &self,
    ) -> impl Service<Request<String>, Response = Response<String>, Error = Infallible, Future: Send>
           + Clone
           + Send
           + 'static {
        let calls = self.0.clone();
        tower::service_fn(move |_request: Request<String>| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, Infallible>(Response::new("ok".to_owned())) }
        })
    }
}

fn clock() -> ManualClock {
    ManualClock::from_unix_secs(common::T0)
}

fn window(quota: &str, clock: &ManualClock) -> RateLimiter {
    SlidingWindow::builder(
        quota.parse().unwrap(),
        Arc::new(MemoryStore::with_clock(clock.clone())),
    )
    .sub_windows(1)
    .clock(clock.clone())
    .build()
    .unwrap()
}

fn from(peer: &str) -> Request<String> {
    let mut request = Request::get("/").body(String::new()).unwrap();
    request
        .extensions_mut()
        .insert(peer.parse::<SocketAddr>().unwrap());
    request
}

async fn send<S>(service: &S, request: Request<String>) -> Response<String>
where
    S: Service<Request<String>, Response = Response<String>, Error = Infallible> + Clone,
{
    service.clone().oneshot(request).await.unwrap()
}

fn field<'a>(response: &'a Response<String>, name: &str) -> Option<&'a str> {
    response
        .headers()
        .get(name)
        .map(|value| value.to_str().unwrap())
}

#[tokio::test]
async fn allowed_requests_carry_the_fields_and_the_one_over_the_limit_gets_429() {
    let clock = clock();
    let inner = Counted::default();
    let service = RateLimitLayer::new(window("3/minute", &clock), ClientIp::peer())
        .policy_name("per-ip")
        .unwrap()
        .legacy_headers(true)
        .layer(inner.service());
    for remaining in [2, 1, 0] {
        let response = send(&service, from("192.0.2.1:5000")).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.body(), "ok");
        assert!(field(&response, "ratelimit-policy")
            .unwrap()
            .starts_with(r#""per-ip";q=3;w=60;pk=:"#));
        let ratelimit = field(&response, "ratelimit").unwrap();
        assert!(
            ratelimit.starts_with(&format!(r#""per-ip";r={remaining};t="#)),
            "{ratelimit}"
        );
        assert_eq!(field(&response, "x-ratelimit-limit"), Some("3"));
        assert_eq!(
            field(&response, "x-ratelimit-remaining"),
            Some(remaining.to_string().as_str())
        );
        assert_eq!(field(&response, "retry-after"), None);
    }
    let denied = send(&service, from("192.0.2.1:5001")).await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    // An RFC 9457 problem naming the policy and the retry time.
    assert_eq!(
        field(&denied, "content-type"),
        Some("application/problem+json")
    );
    assert!(
        denied
            .body()
            .contains(r#""violated-policies":["per-ip"],"retry-after":80}"#),
        "{}",
        denied.body()
    );
    assert_eq!(
        inner.calls(),
        3,
        "a denied request never reaches the service"
    );
    let retry: u64 = field(&denied, "retry-after").unwrap().parse().unwrap();
    // One sub-window: the three requests at 0 s weigh 3·(1 − x/60) at x s
    // into the next minute, so a fourth fits from 80 s.
    assert_eq!(retry, 80);
    assert!(field(&denied, "ratelimit")
        .unwrap()
        .starts_with(&format!(r#""per-ip";r=0;t={retry};pk=:"#)));
    assert_eq!(field(&denied, "x-ratelimit-remaining"), Some("0"));

    // Another address is another client.
    assert_eq!(
        send(&service, from("192.0.2.2:5000")).await.status(),
        StatusCode::OK
    );
    // Waiting out Retry-After is enough.
    clock.advance(Duration::from_secs(retry));
    assert_eq!(
        send(&service, from("192.0.2.1:5000")).await.status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn ipv6_clients_are_counted_by_their_64_and_mapped_ipv4_as_ipv4() {
    let clock = clock();
    let service = RateLimitLayer::new(window("2/minute", &clock), ClientIp::peer())
        .layer(Counted::default().service());
    assert_eq!(
        send(&service, from("[2001:db8:1:2::1]:80")).await.status(),
        StatusCode::OK
    );
    assert_eq!(
        send(&service, from("[2001:db8:1:2::ffff]:80"))
            .await
            .status(),
        StatusCode::OK
    );
    let third = send(&service, from("[2001:db8:1:2:abcd::9]:80")).await;
    assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        send(&service, from("[2001:db8:1:3::1]:80")).await.status(),
        StatusCode::OK
    );

    assert_eq!(
        send(&service, from("198.51.100.4:1")).await.status(),
        StatusCode::OK
    );
    assert_eq!(
        send(&service, from("[::ffff:198.51.100.4]:2"))
            .await
            .status(),
        StatusCode::OK
    );
    assert_eq!(
        send(&service, from("198.51.100.4:3")).await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn a_request_without_a_key_gets_the_extractors_status_or_the_layers_choice() {
    let clock = clock();
    let inner = Counted::default();
    let bare = || Request::get("/").body(String::new()).unwrap();

    let by_ip =
        RateLimitLayer::new(window("5/minute", &clock), ClientIp::peer()).layer(inner.service());
    assert_eq!(
        send(&by_ip, bare()).await.status(),
        StatusCode::INTERNAL_SERVER_ERROR
    );
    let by_key =
        RateLimitLayer::new(window("5/minute", &clock), ApiKey::bearer()).layer(inner.service());
    assert_eq!(
        send(&by_key, bare()).await.status(),
        StatusCode::UNAUTHORIZED
    );
    let basic = Request::get("/")
        .header("authorization", "Basic dXNlcjpwYXNz")
        .body(String::new())
        .unwrap();
    assert_eq!(
        send(&by_key, basic).await.status(),
        StatusCode::UNAUTHORIZED
    );
    let by_header = RateLimitLayer::new(window("5/minute", &clock), Header::new("x-user").unwrap())
        .layer(inner.service());
    assert_eq!(
        send(&by_header, bare()).await.status(),
        StatusCode::BAD_REQUEST
    );
    assert_eq!(inner.calls(), 0);

    let allow = RateLimitLayer::new(window("1/minute", &clock), ApiKey::bearer())
        .on_missing_key(MissingKey::Allow)
        .layer(inner.service());
    for _ in 0..3 {
        let response = send(&allow, bare()).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(field(&response, "ratelimit"), None);
    }
    let shared = RateLimitLayer::new(window("2/minute", &clock), ApiKey::bearer())
        .on_missing_key(MissingKey::Shared(b"anonymous".to_vec()))
        .layer(inner.service());
    let statuses: Vec<u16> = [
        send(&shared, bare()).await,
        send(&shared, bare()).await,
        send(&shared, bare()).await,
    ]
    .iter()
    .map(|r| r.status().as_u16())
    .collect();
    assert_eq!(statuses, [200, 200, 429]);
    // A key-holding client is not the anonymous one.
    let keyed = Request::get("/")
        .header("authorization", "bearer abc")
        .body(String::new())
        .unwrap();
    assert_eq!(send(&shared, keyed).await.status(), StatusCode::OK);
}

#[tokio::test]
async fn each_client_is_announced_the_quota_of_its_plan() {
    let clock = clock();
    let free: Quota = "2/minute".parse().unwrap();
    let pro: Quota = "100/hour".parse().unwrap();
    let limiter = DynamicLimiter::new(
        LimiterSpec::new(Algorithm::SlidingWindow { sub_windows: 4 }, free).clock(clock.clone()),
        Arc::new(MemoryStore::with_clock(clock.clone())),
        move |key: &[u8]| if key == b"acme" { pro } else { free },
    )
    .unwrap();
    let service = RateLimitLayer::new(limiter, Header::new("x-tenant").unwrap())
        .layer(Counted::default().service());
    let tenant = |name: &str| {
        Request::get("/")
            .header("x-tenant", name)
            .body(String::new())
            .unwrap()
    };
    let acme = send(&service, tenant("acme")).await;
    assert!(field(&acme, "ratelimit-policy")
        .unwrap()
        .starts_with(r#""default";q=100;w=3600;pk=:"#));
    assert!(field(&acme, "ratelimit")
        .unwrap()
        .starts_with(r#""default";r=99;"#));
    let other = send(&service, tenant("other")).await;
    assert!(field(&other, "ratelimit-policy")
        .unwrap()
        .starts_with(r#""default";q=2;w=60;pk=:"#));
    assert!(field(&other, "ratelimit")
        .unwrap()
        .starts_with(r#""default";r=1;"#));
}

#[tokio::test]
async fn failures_and_impossible_costs_are_answered_without_the_service() {
    let inner = Counted::default();
    // Nothing listens on port 1: the store fails at once, and this
    // limiter returns the failure rather than deciding under a policy.
    let store = common::refusing_store().await;
    let failing = SlidingWindow::builder("5/minute".parse().unwrap(), store)
        .on_failure(FailurePolicy::ReturnError)
        .build()
        .unwrap();
    let service = RateLimitLayer::new(failing, ClientIp::peer()).layer(inner.service());
    let response = send(&service, from("192.0.2.1:1")).await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(field(&response, "retry-after"), Some("1"));

    let clock = clock();
    let costly = RateLimitLayer::new(window("5/minute", &clock), ClientIp::peer())
        .cost(|parts| {
            if parts.method == http::Method::POST {
                10
            } else {
                1
            }
        })
        .layer(inner.service());
    let mut post = from("192.0.2.1:1");
    *post.method_mut() = http::Method::POST;
    assert_eq!(
        send(&costly, post).await.status(),
        StatusCode::PAYLOAD_TOO_LARGE
    );
    assert_eq!(inner.calls(), 0);
    assert_eq!(
        send(&costly, from("192.0.2.1:1")).await.status(),
        StatusCode::OK
    );
}
