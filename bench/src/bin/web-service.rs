//! What a web service pays per request for rate limiting: an axum "hello"
//! service on a tokio runtime with one worker, each client named by an
//! `x-api-key` header, bare or rate limited in one of the ways `--variant`
//! names. scripts/bench-web runs it under callgrind with wrk as the load
//! and divides the instructions it counted by the requests it served; see
//! `bench/README.md`.
//!
//! Before it listens, the service decides once for each of the `--keys`
//! clients the load will name (`client-1` ... `client-<keys>`), so that
//! the requests measured find every client already known, as in a service
//! that has run for a while.
//!
//! `GET /` answers `hello`, through the rate limit; `GET /__bench/count`
//! answers how many `GET /` the service has answered, without it.

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderName, HeaderValue};
use axum::routing::get;
use axum::Router;
use clap::{Parser, ValueEnum};
use memcache_ratelimit::http::{ApiKey, Header, RateLimitLayer};
use memcache_ratelimit::store::Store;
use memcache_ratelimit::{MemcachedStore, MemoryStore, Quota, RateLimiter};
use memcache_ratelimit_bench::algorithm::{Case, Setup};
use memcache_ratelimit_bench::client::warm_up_decision;
use memcache_ratelimit_bench::socket;
use tokio::task::JoinSet;
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::key_extractor::KeyExtractor as GovernorKey;
use tower_governor::{GovernorError, GovernorLayer};
use tower_layer::Identity;

/// The header that names the client.
const API_KEY: &str = "x-api-key";
/// [`API_KEY`] parsed once, as the layer's `Header` holds it: looked up by
/// a `&str`, a name is parsed again on every request (`parse_hdr`, some
/// 130 instructions under callgrind).
static API_KEY_NAME: HeaderName = HeaderName::from_static(API_KEY);
/// Warm-up decisions in flight at once: few enough that under callgrind,
/// some 50 times slower, each still meets the library's default deadline
/// (100 ms), which also decides when a bucket is sealed.
const WARM_UP_TASKS: usize = 8;
/// The lifetime of the counters the `increment` variant writes.
const INCREMENT_TTL: Duration = Duration::from_secs(3600);

#[derive(Parser, Debug)]
#[command(
    name = "web-service",
    about = "An axum hello service on one tokio worker, bare or rate limited, for scripts/bench-web"
)]
struct Args {
    /// What stands in front of the handler.
    #[arg(long, value_enum)]
    variant: Variant,
    /// The library's algorithm, by its name in the other tables
    /// (`--variant layer`).
    #[arg(long, default_value = "SlidingWindow n=4", value_parser = case_named)]
    case: Case,
    /// The layer's quota, in place of the case's own. scripts/bench-web
    /// gives `1000000000/hour`: 15-minute sub-windows, so that a run of
    /// a few seconds does not cross a sub-window's end, after which, for
    /// the allowed clock skew and the deadline, each decision reads the
    /// bucket just closed again (its figures would otherwise depend on
    /// when the run began).
    #[arg(long)]
    quota: Option<Quota>,
    /// The client's key as the layer counts it: the header's value as it
    /// is, or `ApiKey`'s hash of it (`--variant layer`).
    #[arg(long, value_enum, default_value_t = KeyKind::Header)]
    key: KeyKind,
    /// memcached's address for the layer's store and the `increment`
    /// and `raw-increment` variants; the layer runs on the embedded store
    /// without it.
    #[arg(long, required_if_eq_any([("variant", "increment"), ("variant", "raw-increment")]))]
    memcached: Option<String>,
    /// Clients decided once each before listening: `client-1` to
    /// `client-<keys>`, the names the load sends.
    #[arg(long, default_value_t = 1)]
    keys: u64,
    /// Where to listen; the address taken is printed after
    /// `listening on `.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Variant {
    /// The handler alone.
    Bare,
    /// tower_governor's layer, keyed by the header, with so large a quota
    /// that every request goes through.
    Governor,
    /// This library's `RateLimitLayer`, with so large a quota that every
    /// request goes through.
    Layer,
    /// One `MemcachedStore::increment` of the client's counter per
    /// request, in the handler, without a limiter.
    Increment,
    /// One meta increment of the client's counter per request, written
    /// and read by the handler itself on a pooled connection, with no
    /// client library (`memcache_ratelimit_bench::socket`): no deadline,
    /// no pipelining, no command built but the one line. What any
    /// memcached client pays per request at least, for `increment` to
    /// be measured against.
    RawIncrement,
    /// The handler alone, answering with the two fields the layer writes
    /// on an allowed request, as constants of the same length: what
    /// carrying them costs the service, whatever computes them.
    Fields,
    /// The handler behind a layer that does nothing (it hands back the
    /// service it wraps): what axum's `Router::layer` costs a request,
    /// whatever the layer does.
    Identity,
    /// The handler waits once before it answers (it yields to the
    /// runtime, which polls it again): what any store across the network
    /// costs the service at least, whatever the store does, since the
    /// request's task must stop and be polled again for its answer.
    Wait,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum KeyKind {
    /// `Header::new("x-api-key")`: the value itself.
    Header,
    /// `ApiKey::header("x-api-key")`: a hash of the value.
    ApiKey,
}

/// `GET /` answered so far.
static ANSWERED: AtomicU64 = AtomicU64::new(0);

async fn hello() -> &'static str {
    ANSWERED.fetch_add(1, Ordering::Relaxed);
    "hello\n"
}

/// The case called `name` in the other tables.
fn case_named(name: &str) -> Result<Case, String> {
    let names: Vec<String> = Case::ALL.iter().map(|case| case.name()).collect();
    Case::ALL
        .into_iter()
        .find(|case| case.name() == name)
        .ok_or_else(|| format!("matches no case; the cases: {}", names.join(", ")))
}

/// The name the load gives client `i` (from 1).
fn client(i: u64) -> String {
    format!("client-{i}")
}

/// tower_governor's key: the header's value.
#[derive(Clone)]
struct GovernorApiKey;

impl GovernorKey for GovernorApiKey {
    type Key = String;

    fn extract<T>(&self, request: &axum::http::Request<T>) -> Result<String, GovernorError> {
        request
            .headers()
            .get(&API_KEY_NAME)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
            .ok_or(GovernorError::UnableToExtractKey)
    }
}

/// Runs `decide` once for every client, `WARM_UP_TASKS` at a time.
async fn warm_up<F, Fut>(keys: u64, decide: F)
where
    F: Fn(String) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let mut tasks = JoinSet::new();
    for task in 0..WARM_UP_TASKS as u64 {
        let decide = decide.clone();
        tasks.spawn(async move {
            let mut i = task + 1;
            while i <= keys {
                decide(client(i)).await;
                i += WARM_UP_TASKS as u64;
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("a warm-up task ran to its end");
    }
}

/// `--memcached`, which clap requires for the variants that need it.
fn memcached_address(args: &Args) -> Result<&str, String> {
    args.memcached
        .as_deref()
        .ok_or_else(|| "no --memcached <address>".to_owned())
}

async fn memcached(args: &Args) -> Result<Arc<MemcachedStore>, String> {
    let address = memcached_address(args)?;
    Ok(memcache_ratelimit_bench::client::store(address, Duration::from_secs(5)).await)
}

/// The client's key, read from the request itself, not by axum's
/// `HeaderMap` extractor, which clones every header: in place, as the
/// layer reads it. Empty without the header.
fn api_key(request: &axum::extract::Request) -> &[u8] {
    request
        .headers()
        .get(&API_KEY_NAME)
        .map_or(&b""[..], |key| key.as_bytes())
}

async fn app(args: &Args) -> Result<Router, String> {
    let greeted = Router::new().route("/", get(hello));
    let app = match args.variant {
        Variant::Bare => greeted,
        Variant::Governor => {
            let config = GovernorConfigBuilder::default()
                .per_nanosecond(1)
                .burst_size(u32::MAX)
                .key_extractor(GovernorApiKey)
                .finish()
                .ok_or("tower_governor refused the quota")?;
            let limiter = config.limiter().clone();
            warm_up(args.keys, move |key| {
                let _ = limiter.check_key_n(&key, NonZeroU32::MIN);
                async {}
            })
            .await;
            greeted.layer(GovernorLayer::new(config))
        }
        Variant::Layer => {
            let store: Arc<dyn Store> = match &args.memcached {
                Some(_) => memcached(args).await?,
                None => Arc::new(MemoryStore::new()),
            };
            let case = args.case;
            let mut spec = case.spec(Setup::default());
            if let Some(quota) = args.quota {
                spec = spec.with_quota(quota);
            }
            let limiter: Arc<RateLimiter> =
                Arc::new(spec.build(store).map_err(|error| error.to_string())?);
            let warm = limiter.clone();
            let key = args.key;
            warm_up(args.keys, move |client| {
                let warm = warm.clone();
                async move {
                    let key = match key {
                        KeyKind::Header => client.into_bytes(),
                        KeyKind::ApiKey => api_key_of(&client),
                    };
                    warm_up_decision(&*warm, &key).await;
                }
            })
            .await;
            let layer = match args.key {
                KeyKind::Header => RateLimitLayer::shared(limiter, Header::new(API_KEY).unwrap()),
                KeyKind::ApiKey => {
                    RateLimitLayer::shared(limiter, ApiKey::header(API_KEY).unwrap())
                }
            };
            greeted.layer(layer)
        }
        Variant::Identity => greeted.layer(Identity::new()),
        Variant::Fields => Router::new().route(
            "/",
            get(|| async {
                let answer = hello().await;
                (
                    [
                        (
                            HeaderName::from_static("ratelimit-policy"),
                            HeaderValue::from_static(
                                r#""default";q=1000000000;w=3600;pk=:wkfpjMrY8Es4e3nE:"#,
                            ),
                        ),
                        (
                            HeaderName::from_static("ratelimit"),
                            HeaderValue::from_static(
                                r#""default";r=999999998;t=3602;pk=:wkfpjMrY8Es4e3nE:"#,
                            ),
                        ),
                    ],
                    answer,
                )
            }),
        ),
        Variant::Wait => Router::new().route(
            "/",
            get(|| async {
                tokio::task::yield_now().await;
                hello().await
            }),
        ),
        Variant::Increment => {
            let store = memcached(args).await?;
            let warm = store.clone();
            warm_up(args.keys, move |client| {
                let warm = warm.clone();
                async move {
                    warm.increment(client.as_bytes(), 1, INCREMENT_TTL, &[])
                        .await
                        .expect("a warm-up increment");
                }
            })
            .await;
            Router::new().route(
                "/",
                get(move |request: axum::extract::Request| async move {
                    match store
                        .increment(api_key(&request), 1, INCREMENT_TTL, &[])
                        .await
                    {
                        Ok(_) => hello().await,
                        Err(_) => "store error\n",
                    }
                }),
            )
        }
        Variant::RawIncrement => raw_increment(args).await?,
    };
    Ok(app.route(
        "/__bench/count",
        get(|| async { ANSWERED.load(Ordering::Relaxed).to_string() }),
    ))
}

/// The `raw-increment` variant's service: each request takes a connection
/// from a pool (dialling one when none is idle), increments the client's
/// counter on it and gives it back.
async fn raw_increment(args: &Args) -> Result<Router, String> {
    let address = memcached_address(args)?.to_owned();
    let ttl = INCREMENT_TTL.as_secs() as u32;
    let pool: Arc<Mutex<Vec<socket::Pipeline>>> = Arc::default();
    let mut warm = socket::Pipeline::connect(&address)
        .await
        .map_err(|error| format!("cannot connect to memcached at {address}: {error}"))?;
    for i in 1..=args.keys {
        warm.increment(client(i).as_bytes(), ttl)
            .await
            .map_err(|error| format!("a warm-up increment: {error}"))?;
    }
    pool.lock().unwrap().push(warm);
    Ok(Router::new().route(
        "/",
        get(move |request: axum::extract::Request| async move {
            let idle = pool.lock().unwrap().pop();
            let mut connection = match idle {
                Some(connection) => connection,
                None => match socket::Pipeline::connect(&address).await {
                    Ok(connection) => connection,
                    Err(_) => return "store error\n",
                },
            };
            match connection.increment(api_key(&request), ttl).await {
                Ok(_) => {
                    pool.lock().unwrap().push(connection);
                    hello().await
                }
                Err(_) => "store error\n",
            }
        }),
    ))
}

/// The key `ApiKey` counts the client `client` under.
fn api_key_of(client: &str) -> Vec<u8> {
    use memcache_ratelimit::http::KeyExtractor;
    let (parts, ()) = axum::http::Request::get("/")
        .header(API_KEY, client)
        .body(())
        .expect("a request")
        .into_parts();
    ApiKey::header(API_KEY)
        .unwrap()
        .extract(&parts)
        .expect("the key")
}

fn main() {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let result: Result<(), String> = runtime.block_on(async {
        let app = app(&args).await?;
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .map_err(|error| format!("cannot listen on {}: {error}", args.listen))?;
        let address = listener.local_addr().map_err(|error| error.to_string())?;
        println!("listening on {address}");
        axum::serve(listener, app)
            .await
            .map_err(|error| error.to_string())
    });
    if let Err(error) = result {
        eprintln!("web-service: {error}");
        std::process::exit(1);
    }
}
