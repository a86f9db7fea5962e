//! The `RateLimit-Policy`, `RateLimit` and `Retry-After` fields of
//! draft-ietf-httpapi-ratelimit-headers-11 as the layer writes them, every
//! one parsed back with `sfv`: in process with `oneshot`, on a real hyper
//! server, and for one request under three policies at once.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode};
use memcache_ratelimit::http::{
    ClientIp, Header, HeaderPolicy, KeyExtractor, PartitionKeySecret, QuotaUnit, RateLimitFields,
    RateLimitLayer,
};
use memcache_ratelimit::{FixedWindow, ManualClock, MemoryStore, RateLimiter};
use sfv::{List, ListEntry, Parameters, Parser};
use tower::{Layer, ServiceExt};

use crate::server::serve;

/// 10:00:15 on some day: a quarter into a minute.
const NOW: i64 = 1_700_000_000 - 1_700_000_000 % 3600 + 15;

fn fixed(quota: &str, clock: &ManualClock) -> RateLimiter {
    FixedWindow::builder(
        quota.parse().unwrap(),
        Arc::new(MemoryStore::with_clock(clock.clone())),
    )
    .clock(clock.clone())
    .build()
    .unwrap()
}

fn secret() -> PartitionKeySecret {
    PartitionKeySecret::new(b"shared by every instance of the fleet").unwrap()
}

/// A list field's members: (String value, parameters).
fn members(headers: &HeaderMap, name: &str) -> Vec<(String, Parameters)> {
    let value = headers[name].to_str().unwrap();
    let list: List = Parser::new(value).parse().unwrap();
    list.into_iter()
        .map(|entry| match entry {
            ListEntry::Item(item) => (
                item.bare_item.as_string().unwrap().as_str().to_owned(),
                item.params,
            ),
            ListEntry::InnerList(_) => panic!("an inner list in {name}: {value}"),
        })
        .collect()
}

/// A field that is one bare Integer, parsed as a Structured Field Item.
fn integer(headers: &HeaderMap, name: &str) -> i64 {
    let item: sfv::Item = Parser::new(headers[name].to_str().unwrap())
        .parse()
        .unwrap();
    assert!(item.params.is_empty(), "{name}");
    item.bare_item.as_integer().unwrap().into()
}

fn int(params: &Parameters, key: &str) -> Option<i64> {
    params
        .get(key)
        .map(|value| value.as_integer().unwrap().into())
}

fn pk(params: &Parameters) -> Option<Vec<u8>> {
    params
        .get("pk")
        .map(|pk| pk.as_byte_sequence().unwrap().to_vec())
}

fn tenant(name: &str) -> Request<String> {
    Request::get("/")
        .header("x-tenant", name)
        .body(String::new())
        .unwrap()
}

async fn send(layer: &RateLimitLayer, request: Request<String>) -> Response<String> {
    let hello = tower::service_fn(|_: Request<String>| async {
        Ok::<_, Infallible>(Response::new(String::from("hello")))
    });
    layer.layer(hello).oneshot(request).await.unwrap()
}

#[tokio::test]
async fn every_field_parses_and_retry_after_is_t_on_a_denial() {
    let clock = ManualClock::from_unix_secs(NOW);
    let layer = RateLimitLayer::new(fixed("3/minute", &clock), Header::new("x-tenant").unwrap())
        .policy_name("per tenant, \"v2\"")
        .unwrap()
        .partition_key_secret(secret())
        .legacy_headers(true);
    let acme_pk = secret().partition_key(b"acme").to_vec();
    for remaining in [2, 1, 0] {
        let response = send(&layer, tenant("acme")).await;
        assert_eq!(response.status(), StatusCode::OK);
        let headers = response.headers();
        let policies = members(headers, "ratelimit-policy");
        assert_eq!(policies.len(), 1);
        let (name, policy) = &policies[0];
        assert_eq!(name, "per tenant, \"v2\"");
        assert_eq!(int(policy, "q"), Some(3));
        assert_eq!(int(policy, "w"), Some(60));
        assert_eq!(policy.get("qu"), None, "requests, the default");
        assert_eq!(pk(policy), Some(acme_pk.clone()));
        let (limit_name, limit) = &members(headers, "ratelimit")[0];
        assert_eq!(limit_name, name);
        assert_eq!(int(limit, "r"), Some(remaining));
        // 45 s left in the minute.
        assert_eq!(int(limit, "t"), Some(45));
        assert_eq!(pk(limit), Some(acme_pk.clone()));
        assert!(headers.get("retry-after").is_none());
        assert_eq!(integer(headers, "x-ratelimit-limit"), 3);
        assert_eq!(integer(headers, "x-ratelimit-remaining"), remaining);
        assert_eq!(integer(headers, "x-ratelimit-reset"), 45);
    }
    clock.advance(Duration::from_millis(10_500));
    let denied = send(&layer, tenant("acme")).await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    let headers = denied.headers();
    let (_, limit) = &members(headers, "ratelimit")[0];
    assert_eq!(int(limit, "r"), Some(0));
    // 34.5 s to the next minute, rounded up, in both fields.
    assert_eq!(int(limit, "t"), Some(35));
    assert_eq!(integer(headers, "retry-after"), 35);
    // Waiting out Retry-After is enough.
    clock.advance(Duration::from_secs(35));
    assert_eq!(send(&layer, tenant("acme")).await.status(), StatusCode::OK);
    // Another client, another pk.
    let other = send(&layer, tenant("other")).await;
    let (_, policy) = &members(other.headers(), "ratelimit-policy")[0];
    assert_eq!(pk(policy), Some(secret().partition_key(b"other").to_vec()));
    assert_ne!(pk(policy), Some(acme_pk));
}

#[tokio::test]
async fn pk_is_keyed_never_the_raw_key_and_a_fleet_shares_it() {
    let clock = ManualClock::from_unix_secs(NOW);
    let key = Header::new("x-tenant").unwrap();
    let request_pk = |response: &Response<String>| {
        let (_, policy) = &members(response.headers(), "ratelimit-policy")[0];
        pk(policy).unwrap()
    };
    let first =
        RateLimitLayer::new(fixed("5/minute", &clock), key.clone()).partition_key_secret(secret());
    let second =
        RateLimitLayer::new(fixed("5/minute", &clock), key.clone()).partition_key_secret(secret());
    let own = RateLimitLayer::new(fixed("5/minute", &clock), key.clone());
    let shared = request_pk(&send(&first, tenant("192.0.2.1")).await);
    assert_eq!(shared.len(), 12);
    assert_eq!(
        shared,
        request_pk(&send(&second, tenant("192.0.2.1")).await)
    );
    assert_ne!(shared, request_pk(&send(&own, tenant("192.0.2.1")).await));
    assert!(!shared.windows(4).any(|window| window == b"192."));
    // A clone keeps its layer's random secret.
    let clone = own.clone().legacy_headers(true);
    assert_eq!(
        request_pk(&send(&own, tenant("t")).await),
        request_pk(&send(&clone, tenant("t")).await)
    );
    // No pk when the layer is told the policy is not per client.
    let global = own.announce_partition_key(false);
    let response = send(&global, tenant("t")).await;
    for name in ["ratelimit-policy", "ratelimit"] {
        assert_eq!(pk(&members(response.headers(), name)[0].1), None, "{name}");
    }
}

#[tokio::test]
async fn quota_units_other_than_requests_are_announced() {
    let clock = ManualClock::from_unix_secs(NOW);
    let layer = RateLimitLayer::new(
        fixed("1000000/1500ms", &clock),
        Header::new("x-tenant").unwrap(),
    )
    .quota_unit(QuotaUnit::ContentBytes)
    .cost(|_| 1000);
    let response = send(&layer, tenant("acme")).await;
    let (name, policy) = &members(response.headers(), "ratelimit-policy")[0];
    assert_eq!(name, "default");
    assert_eq!(
        policy.get("qu").unwrap().as_string().unwrap().as_str(),
        "content-bytes"
    );
    // 1.5 s announced as 2: whole seconds, rounded up.
    assert_eq!(int(policy, "w"), Some(2));
    assert_eq!(
        int(&members(response.headers(), "ratelimit")[0].1, "r"),
        Some(999_000)
    );
}

#[tokio::test]
async fn a_hyper_server_sends_fields_that_parse() {
    let layer = RateLimitLayer::new(
        FixedWindow::builder("1/hour".parse().unwrap(), Arc::new(MemoryStore::new()))
            .build()
            .unwrap(),
        ClientIp::peer(),
    )
    .policy_name("per-ip")
    .unwrap()
    .partition_key_secret(secret());
    let (address, server) = serve(layer).await;
    let client = reqwest::Client::new();
    let url = format!("http://{address}/");
    let allowed = client.get(&url).send().await.unwrap();
    let denied = client.get(&url).send().await.unwrap();
    server.abort();
    assert_eq!(allowed.status(), StatusCode::OK);
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    // What ClientIp counts the client under: `ip:<address>`.
    let key = format!("ip:{}", address.ip());
    let expected_pk = secret().partition_key(key.as_bytes()).to_vec();
    let headers = denied.headers();
    let (name, policy) = &members(headers, "ratelimit-policy")[0];
    assert_eq!(name, "per-ip");
    assert_eq!((int(policy, "q"), int(policy, "w")), (Some(1), Some(3600)));
    assert_eq!(pk(policy), Some(expected_pk.clone()));
    let (_, limit) = &members(headers, "ratelimit")[0];
    assert_eq!(int(limit, "r"), Some(0));
    assert_eq!(pk(limit), Some(expected_pk));
    let t = int(limit, "t").unwrap();
    assert!((1..=3600).contains(&t), "{t}");
    assert_eq!(integer(headers, "retry-after"), t);
}

/// The fields of one request decided by three limiters, written by
/// `RateLimitFields` as a response would carry them. Run with
/// `--nocapture` to see them.
#[tokio::test]
async fn one_request_under_three_policies() {
    let clock = ManualClock::from_unix_secs(NOW);
    let secret = secret();
    let key = ClientIp::peer();
    let mut request = Request::get("/upload").body(()).unwrap();
    request
        .extensions_mut()
        .insert("192.0.2.1:50000".parse::<SocketAddr>().unwrap());
    let (parts, ()) = request.into_parts();
    let client = key.extract(&parts).unwrap();
    let burst = fixed("2/second", &clock);
    let hourly = fixed("100/hour", &clock);
    let bytes = fixed("10000000/day", &clock);
    let burst_policy = HeaderPolicy::new("burst", burst.quota())
        .unwrap()
        .per_client(true);
    let hourly_policy = HeaderPolicy::new("hourly", hourly.quota())
        .unwrap()
        .per_client(true);
    let bytes_policy = HeaderPolicy::new("all clients' upload bytes", bytes.quota())
        .unwrap()
        .quota_unit(QuotaUnit::ContentBytes);
    burst.check_n(&client, 2).await.unwrap();
    hourly.check_n(&client, 40).await.unwrap();
    clock.advance(Duration::from_millis(250));
    // This request: the burst policy denies it, the others would allow it.
    let burst_decision = burst.check(&client).await.unwrap();
    let hourly_decision = hourly.check(&client).await.unwrap();
    let bytes_decision = bytes.check_n(b"everyone", 65_536).await.unwrap();
    assert!(burst_decision.is_denied());
    let fields = RateLimitFields::new(secret.clone()).legacy_headers(true);
    let mut headers = HeaderMap::new();
    for (name, value) in fields.fields(&[
        (&burst_policy, &client, &burst_decision),
        (&hourly_policy, &client, &hourly_decision),
        (&bytes_policy, b"everyone", &bytes_decision),
    ]) {
        headers.insert(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::try_from(value).unwrap(),
        );
    }
    println!("429 Too Many Requests");
    for (name, value) in &headers {
        println!("{name}: {}", value.to_str().unwrap());
    }
    let policies = members(&headers, "ratelimit-policy");
    let limits = members(&headers, "ratelimit");
    let names: Vec<&str> = policies.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["burst", "hourly", "all clients' upload bytes"]);
    let client_pk = secret.partition_key(&client).to_vec();
    assert_eq!(pk(&policies[0].1), Some(client_pk.clone()));
    assert_eq!(pk(&limits[1].1), Some(client_pk));
    assert_eq!(pk(&policies[2].1), None);
    let w: Vec<Option<i64>> = policies.iter().map(|(_, p)| int(p, "w")).collect();
    assert_eq!(w, [Some(1), Some(3600), Some(86_400)]);
    let r: Vec<Option<i64>> = limits.iter().map(|(_, p)| int(p, "r")).collect();
    assert_eq!(r, [Some(0), Some(59), Some(10_000_000 - 65_536)]);
    // The denial's t is its retry (0.75 s, rounded up), and so is
    // Retry-After; the other policies keep the time to their windows' ends.
    let t: Vec<Option<i64>> = limits.iter().map(|(_, p)| int(p, "t")).collect();
    let to_the_hour = 3600 - 15;
    assert_eq!(t, [Some(1), Some(to_the_hour), Some(NOW_TO_MIDNIGHT)]);
    assert_eq!(integer(&headers, "retry-after"), 1);
    assert_eq!(integer(&headers, "x-ratelimit-limit"), 2);
    assert_eq!(integer(&headers, "x-ratelimit-remaining"), 0);
}

/// Seconds from `NOW` (plus the quarter second the test waits) to the
/// end of its UTC day, rounded up.
const NOW_TO_MIDNIGHT: i64 = 86_400 - NOW % 86_400;
