//! The axum example (`examples/axum_service.rs`) as a client sees it: the
//! example's application serving on loopback, rate limiting through a real
//! memcached, driven by a real HTTP client across window boundaries.

use crate::common;
#[path = "../../examples/axum_service.rs"]
mod example;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::memcached::Memcached;
use reqwest::{Response, StatusCode};

/// The example's application, serving on a free loopback port.
struct Service {
    base: String,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Drop for Service {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn start(memcached: &Memcached, quota: &str, sub_windows: u32) -> Service {
    let settings = example::Settings {
        quota: quota.parse().unwrap(),
        pro: "20/2s".parse().unwrap(),
        sub_windows,
        servers: vec![memcached.address()],
    };
    let app = example::app(&settings).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    Service {
        base,
        task: tokio::spawn(example::serve(listener, app)),
    }
}

fn header<'a>(response: &'a Response, name: &str) -> &'a str {
    response
        .headers()
        .get(name)
        .unwrap_or_else(|| panic!("no {name} in {:?}", response.headers()))
        .to_str()
        .unwrap()
}

fn unix_now() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap()
}

/// Sleeps until 50 ms past the next multiple of `period` in unix time.
async fn align(period: Duration) {
    let now = unix_now().as_nanos();
    let period = period.as_nanos();
    let next = (now / period + 1) * period + 50_000_000;
    tokio::time::sleep(Duration::from_nanos((next - now) as u64)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_codes_and_fields_across_window_boundaries() {
    let memcached = Memcached::start();
    // 3 per 2 s, in two 1-second sub-windows.
    let service = start(&memcached, "3/2s", 2).await;
    let client = reqwest::Client::new();
    let get = |path: &str| client.get(format!("{}{path}", service.base)).send();

    align(Duration::from_secs(2)).await;
    let started = unix_now();
    for remaining in [2, 1, 0] {
        let response = get("/").await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert!(header(&response, "ratelimit-policy").starts_with(r#""per-ip";q=3;w=2;pk=:"#));
        assert!(
            header(&response, "ratelimit").starts_with(&format!(r#""per-ip";r={remaining};t="#)),
            "{}",
            header(&response, "ratelimit")
        );
        assert_eq!(header(&response, "x-ratelimit-limit"), "3");
        assert_eq!(
            header(&response, "x-ratelimit-remaining"),
            remaining.to_string()
        );
        assert!(response.headers().get("retry-after").is_none());
        assert_eq!(response.text().await.unwrap(), "hello\n");
    }
    let denied = get("/").await.unwrap();
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(header(&denied, "ratelimit").starts_with(r#""per-ip";r=0;t="#));
    assert_eq!(header(&denied, "x-ratelimit-remaining"), "0");
    let retry: u64 = header(&denied, "retry-after").parse().unwrap();
    // The three requests stay whole in the estimate until the sub-window
    // they were made in starts sliding out, a full period later: at least
    // 1 s more of waiting, at most the period plus one rounded-up second.
    assert!((1..=3).contains(&retry), "Retry-After: {retry}");

    // Denied requests are refunded: asking again changes nothing.
    assert_eq!(
        get("/").await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );

    // Waiting out Retry-After crosses at least one window boundary, and is
    // enough.
    tokio::time::sleep(Duration::from_secs(retry)).await;
    assert!(unix_now().as_secs() > started.as_secs());
    let again = get("/").await.unwrap();
    assert_eq!(again.status(), StatusCode::OK, "{:?}", again.headers());
    assert!(header(&again, "ratelimit-policy").starts_with(r#""per-ip";q=3;w=2;pk=:"#));

    // Two whole periods later, every earlier request has slid out.
    align(Duration::from_secs(2)).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let fresh = get("/").await.unwrap();
    assert_eq!(fresh.status(), StatusCode::OK);
    assert!(
        header(&fresh, "ratelimit").starts_with(r#""per-ip";r=2;t="#),
        "{}",
        header(&fresh, "ratelimit")
    );

    // Per tenant, each on its own plan.
    let tenant = |name: &str| {
        client
            .get(format!("{}/api", service.base))
            .header("x-tenant", name)
            .send()
    };
    let pro = tenant("pro-acme").await.unwrap();
    assert_eq!(pro.status(), StatusCode::OK);
    assert!(header(&pro, "ratelimit-policy").starts_with(r#""per-tenant";q=20;w=2;pk=:"#));
    let free = tenant("corner-shop").await.unwrap();
    assert!(header(&free, "ratelimit-policy").starts_with(r#""per-tenant";q=3;w=2;pk=:"#));
    let anonymous = client
        .get(format!("{}/api", service.base))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_counts_live_in_memcached_and_two_instances_share_them() {
    let memcached = Memcached::start();
    // Two instances of the service, each with its own memcached clients.
    let first = start(&memcached, "4/10s", 5).await;
    let second = start(&memcached, "4/10s", 5).await;
    let client = reqwest::Client::new();
    let mut statuses = Vec::new();
    align(Duration::from_secs(2)).await;
    for service in [&first, &second, &first, &second, &first, &second] {
        let response = client
            .get(format!("{}/", service.base))
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    // Both instances see one client on one set of counters.
    assert_eq!(statuses, [200, 200, 200, 200, 429, 429]);
}
