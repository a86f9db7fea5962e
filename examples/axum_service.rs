//! An axum service rate limited through memcached (or the embedded store):
//!
//! ```text
//! MEMCACHED_SERVERS=127.0.0.1:11211 cargo run --example axum_service --features axum
//! curl -i http://127.0.0.1:3000/
//! curl -i -H 'x-tenant: pro-acme' http://127.0.0.1:3000/api
//! ```
//!
//! - `GET /` is limited per client IP address to `QUOTA` (default `5/10s`),
//!   with a sliding window of `SUB_WINDOWS` sub-windows (default 5).
//! - `GET /api` is limited per tenant, named by the `x-tenant` header (in a
//!   real service, set by the authentication in front): tenants whose name
//!   starts with `pro-` get `PRO_QUOTA` (default `50/10s`), the others
//!   `QUOTA`.
//! - Every response carries `RateLimit-Policy`, `RateLimit` and the legacy
//!   `X-RateLimit-*` fields; a denied request gets 429 and `Retry-After`.
//!
//! `BIND` (default `127.0.0.1:3000`) is the address to listen on; with port
//! 0 the system picks one. The first line printed is
//! `listening on http://<address>`. `MEMCACHED_SERVERS` is a comma-separated
//! list; without it the limiter runs on the embedded `MemoryStore`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::routing::get;
use axum::Router;
use memcache_ratelimit::http::{ClientIp, Header, RateLimitLayer};
use memcache_ratelimit::store::Store;
use memcache_ratelimit::{
    Algorithm, DynamicLimiter, LimiterSpec, MemcachedStore, MemoryStore, Quota,
};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// What the service is configured with.
pub struct Settings {
    /// The per-IP quota, and the tenants' default.
    pub quota: Quota,
    /// The quota of tenants named `pro-...`.
    pub pro: Quota,
    /// Sub-windows of the sliding window.
    pub sub_windows: u32,
    /// memcached servers; none for the embedded store.
    pub servers: Vec<String>,
}

impl Settings {
    /// From the environment, with the defaults above.
    pub fn from_env() -> Result<Self> {
        let setting =
            |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
        Ok(Self {
            quota: setting("QUOTA", "5/10s").parse()?,
            pro: setting("PRO_QUOTA", "50/10s").parse()?,
            sub_windows: setting("SUB_WINDOWS", "5").parse()?,
            servers: setting("MEMCACHED_SERVERS", "")
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
        })
    }
}

/// The application: its routes, each behind its rate limit.
pub async fn app(settings: &Settings) -> Result<Router> {
    let store: Arc<dyn Store> = if settings.servers.is_empty() {
        Arc::new(MemoryStore::new())
    } else {
        Arc::new(MemcachedStore::connect(settings.servers.iter().cloned()).await?)
    };
    let (quota, pro) = (settings.quota, settings.pro);
    let spec = LimiterSpec::new(
        Algorithm::SlidingWindow {
            sub_windows: settings.sub_windows,
        },
        quota,
    );
    let per_ip = spec.clone().namespace("ip").build(store.clone())?;
    let per_tenant =
        DynamicLimiter::new(spec.namespace("tenant"), store, move |tenant: &[u8]| {
            if tenant.starts_with(b"pro-") {
                pro
            } else {
                quota
            }
        })?
        .prepare([pro])?;

    Ok(Router::new()
        .route("/", get(|| async { "hello\n" }))
        .layer(
            RateLimitLayer::shared(Arc::new(per_ip), ClientIp::peer())
                .policy_name("per-ip")?
                .legacy_headers(true),
        )
        .merge(
            Router::new()
                .route("/api", get(|| async { "api\n" }))
                .layer(
                    RateLimitLayer::new(per_tenant, Header::new("x-tenant")?)
                        .policy_name("per-tenant")?
                        .legacy_headers(true),
                ),
        ))
}

/// Serves `app` on `listener`, with the peer addresses the per-IP limit
/// reads.
pub async fn serve(listener: tokio::net::TcpListener, app: Router) -> std::io::Result<()> {
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await
}

#[allow(dead_code)]
#[tokio::main]
async fn main() -> Result<()> {
    let app = app(&Settings::from_env()?).await?;
    let bind = std::env::var("BIND").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
    let listener = tokio::net::TcpListener::bind(bind).await?;
    println!("listening on http://{}", listener.local_addr()?);
    serve(listener, app).await?;
    Ok(())
}
