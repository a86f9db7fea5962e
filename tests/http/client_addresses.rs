//! Client addresses from a proxy's `Forwarded` header (RFC 7239), on a
//! bare hyper server on loopback: the accept loop puts the peer address in
//! the request's extensions, and reqwest clients bind distinct loopback
//! addresses, so one plays a trusted proxy (127.0.0.1) and another an
//! untrusted client (127.0.0.2) that connects directly.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use http::StatusCode;
use memcache_ratelimit::http::{ClientIp, ProxyHeader, RateLimitLayer, TrustedProxies};
use memcache_ratelimit::{FixedWindow, MemoryStore};

use crate::server;

/// Serves `hello` behind a 2-per-hour layer keyed by `key`, on loopback.
async fn serve(key: ClientIp) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let limiter = FixedWindow::builder("2/hour".parse().unwrap(), Arc::new(MemoryStore::new()))
        .build()
        .unwrap();
    server::serve(RateLimitLayer::new(limiter, key)).await
}

/// A client whose connections come from `local` (a loopback address).
fn client_from(local: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(local.parse::<IpAddr>().unwrap())
        .build()
        .unwrap()
}

/// The statuses of requests sent with these `Forwarded` values, in turn.
async fn statuses(
    client: &reqwest::Client,
    address: SocketAddr,
    forwarded: &[&str],
) -> Vec<StatusCode> {
    let mut statuses = Vec::new();
    for value in forwarded {
        let response = client
            .get(format!("http://{address}/"))
            .header("forwarded", *value)
            .send()
            .await
            .unwrap();
        statuses.push(response.status());
    }
    statuses
}

const OK: StatusCode = StatusCode::OK;
const DENIED: StatusCode = StatusCode::TOO_MANY_REQUESTS;

#[tokio::test]
async fn clients_behind_a_trusted_proxy_are_counted_apart_and_spoofers_are_not() {
    let trusted = TrustedProxies::networks(["127.0.0.1/32"]).unwrap();
    let key = ClientIp::behind(ProxyHeader::Forwarded, trusted).unwrap();
    let (address, server) = serve(key).await;
    let proxy = client_from("127.0.0.1");

    // Two clients behind the proxy, as the proxy would append them after
    // whatever the clients sent themselves.
    let first = [
        "for=192.0.2.1",
        "for=6.6.6.6, for=192.0.2.1;proto=http",
        "for=192.0.2.1",
    ];
    assert_eq!(statuses(&proxy, address, &first).await, [OK, OK, DENIED]);
    let second = [
        "For=192.0.2.2",
        "for=192.0.2.2;proto=https",
        "for=192.0.2.2",
    ];
    assert_eq!(statuses(&proxy, address, &second).await, [OK, OK, DENIED]);
    // IPv6 clients are counted by their /64, from headers as from peers.
    let ipv6 = [
        r#"for="[2001:db8::1]:4711""#,
        r#"for="[2001:db8::2]""#,
        r#"for="[2001:db8::3]:_port""#,
    ];
    assert_eq!(statuses(&proxy, address, &ipv6).await, [OK, OK, DENIED]);
    // The proxy does not know its client: no key, the extractor's 500.
    assert_eq!(
        statuses(&proxy, address, &["for=unknown"]).await,
        [StatusCode::INTERNAL_SERVER_ERROR]
    );

    // A client that reaches the service directly is not trusted: whatever
    // `Forwarded` it sends, it is counted by its own address.
    let direct = client_from("127.0.0.2");
    let spoofed = ["for=203.0.113.1", "for=203.0.113.2", "for=203.0.113.3"];
    assert_eq!(statuses(&direct, address, &spoofed).await, [OK, OK, DENIED]);
    server.abort();
}

#[tokio::test]
async fn a_count_of_one_proxy_reads_only_the_entry_it_appended() {
    let key = ClientIp::behind(ProxyHeader::Forwarded, TrustedProxies::count(1).unwrap()).unwrap();
    let (address, server) = serve(key).await;
    let proxy = client_from("127.0.0.1");
    // The client rotates the address it writes; the proxy's entry stays.
    let rotating = [
        "for=198.51.100.1, for=192.0.2.7",
        "for=198.51.100.2, for=192.0.2.7",
        "for=198.51.100.3, for=192.0.2.7",
    ];
    assert_eq!(statuses(&proxy, address, &rotating).await, [OK, OK, DENIED]);
    server.abort();
}
