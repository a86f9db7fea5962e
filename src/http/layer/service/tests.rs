use std::sync::Arc;

use ::http::Request;
use tower::{Layer, Service};

use super::{header_name, State};
use crate::http::headers::Field;
use crate::http::{Header, RateLimitLayer};
use crate::store::CountingStore;
use crate::thread_cache::THREAD_CACHED;
use crate::{MemoryStore, SlidingWindow};

#[test]
fn every_field_name_is_known_without_parsing() {
    for field in Field::ALL {
        assert_eq!(
            header_name(field).as_str(),
            field.name().to_ascii_lowercase()
        );
    }
}

/// A request that waits for its store (`CountingStore` answers through
/// the waiting path, as memcached does) boxes its future within the
/// allocator's per-thread cache, in front of an axum router, whose own
/// futures take 320 bytes: every such request allocates that box.
#[tokio::test]
async fn a_waiting_request_is_boxed_within_the_allocators_thread_cache() {
    let store = Arc::new(CountingStore::new(MemoryStore::new()));
    let limiter = SlidingWindow::builder("100/minute".parse().unwrap(), store)
        .build()
        .unwrap();
    let router = axum::Router::new().route("/", axum::routing::get(|| async { "hello" }));
    let key = Header::new("x-api-key").unwrap();
    let mut service = RateLimitLayer::new(limiter, key).layer(router);
    let request = Request::builder()
        .uri("/")
        .header("x-api-key", "k-1")
        .body(axum::body::Body::empty())
        .unwrap();
    let future = service.call(request);
    let State::Waiting { future: boxed } = &future.state else {
        panic!("a store that waits, yet {future:?}");
    };
    let size = std::mem::size_of_val(&**boxed);
    assert!(size <= THREAD_CACHED, "{size} bytes");
    let response = future.await.unwrap();
    assert_eq!(response.status(), ::http::StatusCode::OK);
    assert!(response.headers().contains_key("ratelimit"));
}

/// What an allowed request's decision returns through (`Keys`, `Next`,
/// `Settled`) stays within 128 bytes, which a move copies in registers
/// rather than through a call to `memcpy`: a response given without the
/// service is boxed, not held inline.
#[test]
fn what_an_allowed_request_returns_through_moves_in_registers() {
    use std::mem::size_of;
    assert!(size_of::<super::Keys<'static>>() <= 128);
    assert!(size_of::<super::Next>() <= 128);
    assert!(size_of::<super::Settled>() <= 128);
}
