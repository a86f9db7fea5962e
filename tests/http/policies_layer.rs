//! The layer with several policies, on a real hyper server, a real HTTP
//! client and a real memcached: a per-IP burst, a per-user hourly and a
//! per-user monthly quota, all or nothing; shadow mode; exemptions; the
//! denial hook.

use std::net::SocketAddr;
use std::sync::Arc;

use http::{Request, Response, StatusCode};
use memcache_ratelimit::http::{ApiKey, ClientIp, KeyExtractor, RateLimitLayer};
use memcache_ratelimit::store::Store;
use memcache_ratelimit::{FixedWindow, RateLimiter, SlidingWindow};

use crate::common;
use crate::server::serve;

/// The three policies, each in its own namespace on `store`; the monthly
/// limiter is returned too, to read what it counted.
fn three_policies(store: Arc<dyn Store>) -> (RateLimitLayer, Arc<RateLimiter>) {
    let burst = FixedWindow::builder("3/hour".parse().unwrap(), store.clone())
        .namespace("burst")
        .build()
        .unwrap();
    let hourly = SlidingWindow::builder("50/hour".parse().unwrap(), store.clone())
        .namespace("hour")
        .build()
        .unwrap();
    let monthly = Arc::new(
        SlidingWindow::builder("1000/30d".parse().unwrap(), store)
            .namespace("month")
            .build()
            .unwrap(),
    );
    let layer = RateLimitLayer::new(burst, ClientIp::peer())
        .policy_name("per-ip-burst")
        .unwrap()
        .and("per-user-hour", hourly, ApiKey::bearer())
        .unwrap()
        .and("per-user-month", monthly.clone(), ApiKey::bearer())
        .unwrap();
    (layer, monthly)
}

async fn get(address: SocketAddr, token: &str) -> reqwest::Response {
    reqwest::Client::new()
        .get(format!("http://{address}/"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
}

/// The key `ApiKey::bearer()` counts a request with `token` under.
fn bearer_key(token: &str) -> Vec<u8> {
    let (parts, ()) = Request::get("/")
        .header("authorization", format!("Bearer {token}"))
        .body(())
        .unwrap()
        .into_parts();
    ApiKey::bearer().extract(&parts).unwrap()
}

/// Prints the status and rate-limit fields of `response`.
fn show(response: &reqwest::Response) {
    let status = response.status();
    println!(
        "{} {}",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    for name in [
        "ratelimit-policy",
        "ratelimit",
        "retry-after",
        "content-type",
    ] {
        println!("{name}: {}", field(response, name));
    }
}

/// Asserts that the list field `value` has a member for each of the three
/// policies, with the parameter `param`.
fn assert_names_the_three(value: &str, param: &str) {
    for name in ["per-ip-burst", "per-user-hour", "per-user-month"] {
        assert!(value.contains(&format!("\"{name}\";{param}=")), "{value}");
    }
}

fn field<'a>(response: &'a reqwest::Response, name: &str) -> &'a str {
    response
        .headers()
        .get(name)
        .map_or("", |value| value.to_str().unwrap())
}

#[tokio::test]
async fn requests_denied_by_the_burst_limit_do_not_spend_the_monthly_quota() {
    let memcached = common::memcached().await;
    let (layer, monthly) = three_policies(memcached.store.clone());
    let (address, server) = serve(layer).await;
    let mut statuses = Vec::new();
    for i in 0..8 {
        let response = get(address, "alice-token").await;
        if i == 0 {
            show(&response);
            assert_names_the_three(field(&response, "ratelimit"), "r");
        }
        statuses.push(response.status());
        if response.status() == StatusCode::TOO_MANY_REQUESTS {
            let body = response.text().await.unwrap();
            assert!(
                body.contains(r#""violated-policies":["per-ip-burst"]"#),
                "{body}"
            );
        }
    }
    let allowed = statuses.iter().filter(|s| **s == StatusCode::OK).count();
    assert_eq!(allowed, 3, "{statuses:?}");
    // The monthly counter in memcached holds the three allowed requests
    // only: the five denied by the burst limit never reached it.
    let inspection = monthly.inspect(&bearer_key("alice-token")).await.unwrap();
    assert_eq!(inspection.estimate, Some(3.0), "{inspection:?}");

    // The fields of one denied request under the three policies.
    let denied = get(address, "alice-token").await;
    show(&denied);
    assert_names_the_three(field(&denied, "ratelimit-policy"), "q");
    let limit_field = field(&denied, "ratelimit");
    assert!(
        limit_field.starts_with(r#""per-ip-burst";r=0;t="#),
        "{limit_field}"
    );
    assert!(!limit_field.contains("per-user-month"), "{limit_field}");
    server.abort();
}

#[tokio::test]
async fn shadow_mode_decides_and_announces_but_never_denies() {
    let memcached = common::memcached().await;
    let (layer, _) = three_policies(memcached.store.clone());
    let layer = layer.shadow(true);
    let (address, server) = serve(layer.clone()).await;
    for _ in 0..5 {
        let response = get(address, "bob-token").await;
        assert_eq!(response.status(), StatusCode::OK);
        assert!(field(&response, "ratelimit").contains("\"per-ip-burst\";r="));
        assert_eq!(field(&response, "retry-after"), "");
    }
    assert_eq!(layer.shadow_denials(), 2, "the 4th and 5th would be denied");
    server.abort();
}

#[tokio::test]
async fn exempt_keys_are_not_limited_and_the_denial_hook_answers() {
    let memcached = common::memcached().await;
    let (layer, _) = three_policies(memcached.store.clone());
    let layer = layer
        .exempt_keys([bearer_key("internal-token")])
        .on_denied(|denial| {
            let mut response = Response::new(format!("slow down: {}", denial.policy()));
            *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            response
        });
    let (address, server) = serve(layer).await;
    for _ in 0..6 {
        let response = get(address, "internal-token").await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(field(&response, "ratelimit"), "");
    }
    let mut last = None;
    for _ in 0..4 {
        last = Some(get(address, "carol-token").await);
    }
    let denied = last.unwrap();
    assert_eq!(denied.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(field(&denied, "retry-after").parse::<u64>().is_ok());
    assert_eq!(denied.text().await.unwrap(), "slow down: per-ip-burst");
    server.abort();
}

#[tokio::test]
async fn a_missing_api_key_is_asked_for_and_exempt_networks_pass() {
    let memcached = common::memcached().await;
    let (layer, _) = three_policies(memcached.store.clone());
    let (address, server) = serve(layer).await;
    let response = reqwest::get(format!("http://{address}/")).await.unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(field(&response, "www-authenticate"), "Bearer");
    server.abort();

    // A response of the user's own, and loopback exempt from the burst
    // limit's extractor: the whole request goes unlimited.
    let (layer, _) = three_policies(memcached.store.clone());
    let layer = layer.missing_key_response(|_| {
        let mut response = Response::new("send a key".to_owned());
        *response.status_mut() = StatusCode::FORBIDDEN;
        response
    });
    let (address, server) = serve(layer).await;
    let response = reqwest::get(format!("http://{address}/")).await.unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert_eq!(response.text().await.unwrap(), "send a key");
    server.abort();

    let burst = FixedWindow::builder("1/hour".parse().unwrap(), memcached.store.clone())
        .namespace("exempt-burst")
        .build()
        .unwrap();
    let layer = RateLimitLayer::new(burst, ClientIp::peer().exempt(["127.0.0.0/8"]).unwrap());
    let (address, server) = serve(layer).await;
    for _ in 0..3 {
        let response = get(address, "dave-token").await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(field(&response, "ratelimit"), "");
    }
    server.abort();
}
