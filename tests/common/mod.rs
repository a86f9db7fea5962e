//! Shared test support: store fixtures that run one suite on every store,
//! on real memcached and nutcracker processes that the workspace's test
//! kit starts on loopback, and faults, policies and states to test with.

// Each test target uses its own part of this module; what one target
// leaves unused is not dead.
#![allow(dead_code)]

pub mod cas;
pub mod faults;
pub mod memcached;
#[cfg(feature = "memcached")]
pub mod policies;
pub mod replay;
pub mod states;
pub mod twemproxy;
pub mod wrapped;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "memcached")]
use memcache_ratelimit::store::{ClassicStore, MemcachedStore};
use memcache_ratelimit::store::{MemoryStore, Store};
use memcache_ratelimit::{
    FailurePolicy, Limiter, LimiterBuilder, ManualClock, Quota, RateLimiter, SlidingWindow,
};

/// The one key holding `client`'s state in a compare-and-swap `limiter`
/// (it does not depend on the time).
pub fn state_key(limiter: &memcache_ratelimit::RateLimiter, client: &[u8]) -> Vec<u8> {
    let mut keys = limiter.keys_at(client, chrono::Utc::now()).unwrap();
    assert_eq!(keys.len(), 1, "a compare-and-swap state is one key");
    keys.remove(0)
}

/// `builder` as tests of the algorithms' logic want it on a shared and
/// loaded test machine: a deadline (5 s) that a busy moment cannot reach,
/// and store failures returned as errors, so a failure fails the test with
/// its cause rather than becoming a decision of the failure policy.
pub fn patient<A>(builder: LimiterBuilder<A>) -> LimiterBuilder<A> {
    builder
        .deadline(Duration::from_secs(5))
        .on_failure(FailurePolicy::ReturnError)
}

/// A store under test, with the clock the limiters should read.
pub struct Fixture {
    pub name: &'static str,
    pub store: Arc<dyn Store>,
    pub clock: ManualClock,
    /// Keeps the memcached process alive for the fixture's lifetime.
    pub server: Option<memcached::Memcached>,
    /// Keeps a proxy and the servers behind it alive.
    pub proxy: Option<twemproxy::Twemproxy>,
}

impl Fixture {
    /// A fixture of `store` and `clock`, with no process behind it.
    fn new(name: &'static str, store: Arc<dyn Store>, clock: ManualClock) -> Self {
        Fixture {
            name,
            store,
            clock,
            server: None,
            proxy: None,
        }
    }

    /// Whether the store keeps real time (a server) rather than the
    /// fixture's manual clock.
    pub fn real_time(&self) -> bool {
        self.server.is_some() || self.proxy.is_some()
    }

    /// `algorithm`'s builder (`FixedWindow::builder`, ...) at `quota` on the
    /// fixture's store, [`patient`], reading the fixture's clock.
    pub fn builder<A>(
        &self,
        algorithm: fn(Quota, Arc<dyn Store>) -> LimiterBuilder<A>,
        quota: impl AsQuota,
    ) -> LimiterBuilder<A> {
        self.builder_on(self.store.clone(), algorithm, quota)
    }

    /// [`builder`](Self::builder), on `store` rather than the fixture's.
    pub fn builder_on<A>(
        &self,
        store: Arc<dyn Store>,
        algorithm: fn(Quota, Arc<dyn Store>) -> LimiterBuilder<A>,
        quota: impl AsQuota,
    ) -> LimiterBuilder<A> {
        patient(algorithm(quota.quota(), store)).clock(self.clock.clone())
    }

    /// A sliding window of `n` sub-windows at `quota`, otherwise as
    /// [`limiter`](Self::limiter) builds it.
    pub fn sliding_window(&self, quota: impl AsQuota, n: u32) -> RateLimiter {
        self.builder(SlidingWindow::builder, quota)
            .sub_windows(n)
            .build()
            .unwrap()
    }

    /// The limiter [`builder`](Self::builder) builds with nothing more set.
    pub fn limiter<A>(
        &self,
        algorithm: fn(Quota, Arc<dyn Store>) -> LimiterBuilder<A>,
        quota: impl AsQuota,
    ) -> RateLimiter {
        self.builder(algorithm, quota).build().unwrap()
    }
}

/// A quota as the tests write it: text such as `"10/minute"`, or a
/// [`Quota`].
pub trait AsQuota {
    fn quota(self) -> Quota;
}

impl AsQuota for &str {
    fn quota(self) -> Quota {
        self.parse().unwrap()
    }
}

impl AsQuota for Quota {
    fn quota(self) -> Quota {
        self
    }
}

/// A fixed unix time on a minute boundary (2027-01-15 08:00:00 UTC).
pub const T0: i64 = 1_800_000_000;

pub fn memory() -> Fixture {
    let clock = ManualClock::from_unix_secs(T0);
    let store = Arc::new(MemoryStore::with_clock(clock.clone()));
    Fixture::new("memory", store, clock)
}

#[cfg(feature = "memcached")]
pub async fn memcached() -> Fixture {
    let server = memcached::Memcached::start();
    let store = MemcachedStore::connect([server.address()])
        .await
        .expect("memcached store");
    Fixture {
        server: Some(server),
        ..Fixture::new(
            "memcached",
            Arc::new(store),
            ManualClock::from_unix_secs(T0),
        )
    }
}

#[cfg(feature = "memcached")]
/// A classic-protocol store of `address`, with an I/O timeout (5 s) a busy
/// test machine does not reach.
fn classic_store(address: String) -> Arc<dyn Store> {
    Arc::new(
        ClassicStore::builder()
            .server(address)
            .io_timeout(Duration::from_secs(5))
            .build()
            .expect("classic store"),
    )
}

#[cfg(feature = "memcached")]
/// A memcached spoken to over the classic text protocol
/// ([`ClassicStore`]), as through twemproxy or to memcached 1.5.
pub async fn classic() -> Fixture {
    let server = memcached::Memcached::start();
    let store = classic_store(server.address());
    Fixture {
        server: Some(server),
        ..Fixture::new("classic", store, ManualClock::from_unix_secs(T0))
    }
}

#[cfg(feature = "memcached")]
/// Twemproxy (nutcracker) in front of 3 memcached processes, spoken to
/// over the classic protocol, as an existing fleet behind a proxy runs.
pub async fn twemproxy() -> Fixture {
    let proxy = twemproxy::Twemproxy::start(3);
    let store = classic_store(proxy.address());
    Fixture {
        proxy: Some(proxy),
        ..Fixture::new("twemproxy", store, ManualClock::from_unix_secs(T0))
    }
}

#[cfg(feature = "memcached")]
/// `count` independent store clients of one server, each with its own
/// connection pool, as separate service instances would have, with an I/O
/// timeout (5 s) a busy test machine does not reach.
pub async fn independent_clients(
    server: &memcached::Memcached,
    count: usize,
) -> Vec<Arc<MemcachedStore>> {
    let mut stores = Vec::new();
    for _ in 0..count {
        let store = MemcachedStore::builder()
            .server(server.address())
            .max_connections(16)
            // A busy test machine is not a failure.
            .io_timeout(Duration::from_secs(5))
            .build()
            .await
            .expect("memcached store");
        stores.push(Arc::new(store));
    }
    stores
}

#[cfg(feature = "memcached")]
/// Where the exactness races run: one memcached over the meta protocol,
/// or three behind twemproxy over the classic protocol.
pub enum Fleet {
    /// One memcached, spoken to over the meta protocol.
    Meta(memcached::Memcached),
    /// Twemproxy in front of three memcached, over the classic protocol.
    Twemproxy(twemproxy::Twemproxy),
}

#[cfg(feature = "memcached")]
impl Fleet {
    /// Both fleets, started.
    pub fn both() -> Vec<Fleet> {
        vec![
            Fleet::Meta(memcached::Memcached::start()),
            Fleet::Twemproxy(twemproxy::Twemproxy::start(3)),
        ]
    }

    /// The fleet's name in messages.
    pub fn name(&self) -> &'static str {
        match self {
            Fleet::Meta(_) => "memcached (meta)",
            Fleet::Twemproxy(_) => "twemproxy (classic)",
        }
    }

    /// `count` independent store clients, each with its own connections,
    /// as separate service instances would have, with an I/O timeout (5 s)
    /// a busy test machine does not reach.
    pub async fn stores(&self, count: usize) -> Vec<Arc<dyn Store>> {
        match self {
            Fleet::Meta(server) => independent_clients(server, count)
                .await
                .into_iter()
                .map(|store| store as Arc<dyn Store>)
                .collect(),
            Fleet::Twemproxy(proxy) => (0..count).map(|_| classic_store(proxy.address())).collect(),
        }
    }
}

/// Every store, each with a fresh clock at [`T0`]: embedded, memcached
/// over the meta protocol, memcached over the classic protocol, and three
/// memcached behind twemproxy over the classic protocol.
/// Without the `memcached` feature, the embedded store alone.
pub async fn fixtures() -> Vec<Fixture> {
    #[cfg(feature = "memcached")]
    return vec![
        memory(),
        memcached().await,
        classic().await,
        twemproxy().await,
    ];
    #[cfg(not(feature = "memcached"))]
    vec![memory()]
}

/// A client id unique to this call, so tests sharing a memcached never
/// share counters.
pub fn unique_client(tag: &str) -> Vec<u8> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{tag}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
    .into_bytes()
}

pub const SECOND: Duration = Duration::from_secs(1);

/// How many of `tries` checks for `client`, one after another, `limiter`
/// admits.
pub async fn admitted(limiter: &dyn Limiter, client: &[u8], tries: usize) -> usize {
    let mut allowed = 0;
    for _ in 0..tries {
        if limiter.check(client).await.unwrap().is_allowed() {
            allowed += 1;
        }
    }
    allowed
}

/// For a `limiter` whose limit is 10: a cost of 11 and a cost of 0 are
/// errors, not decisions.
pub async fn assert_impossible_costs_are_errors(limiter: &RateLimiter, client: &[u8]) {
    assert!(matches!(
        limiter.check_n(client, 11).await,
        Err(memcache_ratelimit::Error::CostExceedsLimit {
            cost: 11,
            limit: 10
        })
    ));
    assert!(matches!(
        limiter.check_n(client, 0).await,
        Err(memcache_ratelimit::Error::ZeroCost)
    ));
}

/// A client that retries every second while denied: how many of its
/// checks over `secs` seconds `limiter` admits, the first a second on.
pub async fn admitted_every_second(
    clock: &ManualClock,
    limiter: &dyn Limiter,
    client: &[u8],
    secs: u32,
) -> usize {
    let mut allowed = 0;
    for _ in 0..secs {
        clock.advance(SECOND);
        allowed += admitted(limiter, client, 1).await;
    }
    allowed
}

/// Spawns a task per `(limiter, checks)` that makes `checks` checks for
/// `client` on `limiter`, all at once; how many were admitted in all.
pub async fn admitted_by_tasks(
    tasks: impl IntoIterator<Item = (Arc<dyn Limiter>, usize)>,
    client: &[u8],
) -> usize {
    let handles: Vec<_> = tasks
        .into_iter()
        .map(|(limiter, checks)| {
            let client = client.to_vec();
            tokio::spawn(async move { admitted(&*limiter, &client, checks).await })
        })
        .collect();
    let mut allowed = 0;
    for handle in handles {
        allowed += handle.await.unwrap();
    }
    allowed
}

/// Runs `future` to completion on a runtime of its own, for tests that are
/// not async themselves (such as proptest's).
pub fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

/// A proptest configuration whose failing cases are saved beside the tests
/// (`tests/proptest-regressions/<name>.txt`) to be committed and replayed.
pub fn proptest_config(name: &str, cases: u32) -> proptest::test_runner::Config {
    let path: &'static str =
        Box::leak(format!("tests/proptest-regressions/{name}.txt").into_boxed_str());
    proptest::test_runner::Config {
        cases,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::Direct(path),
        )),
        ..proptest::test_runner::Config::default()
    }
}

#[cfg(feature = "memcached")]
/// A memcached store whose one server is a port nothing listens on
/// (port 1): every call is refused at once, a real connection failure.
pub async fn refusing_store() -> Arc<MemcachedStore> {
    Arc::new(
        MemcachedStore::builder()
            .server("127.0.0.1:1")
            .build()
            .await
            .expect("a store builds without reaching its servers"),
    )
}
