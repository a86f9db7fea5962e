//! A bare hyper 1 server (no axum) for the layer: a real listener on
//! loopback, whose accept loop puts each connection's peer address in its
//! requests' extensions, where `ClientIp::peer()` reads it.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use memcache_ratelimit::http::RateLimitLayer;
use tokio::task::JoinHandle;
use tower::{Layer, ServiceBuilder};

/// Serves `layer` around a service that answers "hello", on 127.0.0.1 at
/// a free port; returns the address and the server's task (abort it to
/// stop the server).
pub async fn serve(layer: RateLimitLayer) -> (SocketAddr, JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        loop {
            let (stream, peer) = listener.accept().await.unwrap();
            let hello = tower::service_fn(|_: Request<Incoming>| async {
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"hello"))))
            });
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
    (address, server)
}
