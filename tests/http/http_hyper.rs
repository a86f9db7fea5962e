//! The layer on a bare hyper 1 server (no axum): a real connection on
//! loopback, the peer address put in the request's extensions by the
//! accept loop, and a real HTTP client.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use memcache_ratelimit::http::{ClientIp, RateLimitLayer};
use memcache_ratelimit::{FixedWindow, MemoryStore};
use tower::{Layer, ServiceBuilder};

#[tokio::test]
async fn a_hyper_server_answers_429_with_the_fields() {
    let limiter = FixedWindow::builder("2/hour".parse().unwrap(), Arc::new(MemoryStore::new()))
        .build()
        .unwrap();
    let layer = RateLimitLayer::new(limiter, ClientIp::peer());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        loop {
            let (stream, peer) = listener.accept().await.unwrap();
            let hello = tower::service_fn(|_: Request<Incoming>| async {
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"hello"))))
            });
            // The peer address, where ClientIp::peer() reads it.
            let service = ServiceBuilder::new()
                .map_request(move |mut request: Request<Incoming>| {
                    request.extensions_mut().insert::<SocketAddr>(peer);
                    request
                })
                .service(layer.layer(hello));
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service)),
            );
        }
    });
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
