//! The layer on a bare hyper 1 server (no axum): a real connection on
//! loopback, the peer address put in the request's extensions by the
//! accept loop, and a real HTTP client.

use std::sync::Arc;

use http::StatusCode;
use memcache_ratelimit::http::{ClientIp, RateLimitLayer};
use memcache_ratelimit::{FixedWindow, MemoryStore};

use crate::server::serve;

#[tokio::test]
async fn a_hyper_server_answers_429_with_the_fields() {
    let limiter = FixedWindow::builder("2/hour".parse().unwrap(), Arc::new(MemoryStore::new()))
        .build()
        .unwrap();
    let layer = RateLimitLayer::new(limiter, ClientIp::peer());
    let (address, server) = serve(layer).await;
    let client = reqwest::Client::new();
    let mut statuses = Vec::new();
    let mut last = None;
    for _ in 0..3 {
        let response = client
            .get(format!("http://{address}/"))
            .send()
            .await
            .unwrap();
        statuses.push(response.status());
        last = Some(response);
    }
    assert_eq!(
        statuses,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
    let denied = last.unwrap();
    assert!(denied.headers()["ratelimit-policy"]
        .to_str()
        .unwrap()
        .starts_with(r#""default";q=2;w=3600;pk=:"#));
    assert!(denied.headers()["ratelimit"]
        .to_str()
        .unwrap()
        .starts_with(r#""default";r=0;t="#));
    let retry: u64 = denied.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=3600).contains(&retry), "{retry}");
    server.abort();
}
