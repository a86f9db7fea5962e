//! Configuring the layer: every order of calls a user can write is
//! accepted, and a copy configured after cloning is a layer of its own.

use std::convert::Infallible;
use std::sync::Arc;

use http::{Request, Response};
use memcache_ratelimit::http::{Header, RateLimitLayer};
use memcache_ratelimit::{FixedWindow, MemoryStore};
use tower::{Layer, ServiceExt};

/// The header names of one response from `layer` over a bare service.
async fn field_names(layer: &RateLimitLayer) -> Vec<String> {
    let hello = tower::service_fn(|_: Request<String>| async {
        Ok::<_, Infallible>(Response::new(String::from("hello")))
    });
    let request = Request::builder()
        .header("x-tenant", "acme")
        .body(String::new())
        .unwrap();
    let response = layer.layer(hello).oneshot(request).await.unwrap();
    let mut names: Vec<String> = response.headers().keys().map(|n| n.to_string()).collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_clone_configured_later_is_a_layer_of_its_own() {
    let limiter = FixedWindow::builder("10/minute".parse().unwrap(), Arc::new(MemoryStore::new()))
        .build()
        .unwrap();
    let plain = RateLimitLayer::new(limiter, Header::new("x-tenant").unwrap());
    let kept = plain.clone();
    let legacy = plain.legacy_headers(true);
    assert!(field_names(&legacy)
        .await
        .contains(&"x-ratelimit-limit".to_owned()));
    assert!(!field_names(&kept)
        .await
        .contains(&"x-ratelimit-limit".to_owned()));
}
