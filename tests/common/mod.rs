//! Shared test support: store fixtures that run one suite on every store,
//! on real memcached and nutcracker processes that the workspace's test
//! kit starts on loopback, and faults, policies and states to test with.

// Each test target uses its own part of this module; what one target
// leaves unused is not dead.
#![allow(dead_code)]

pub mod faults;
pub mod memcached;
#[cfg(feature = "memcached")]
pub mod policies;
pub mod states;
pub mod twemproxy;

use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "memcached")]
use memcache_ratelimit::store::{ClassicStore, MemcachedStore};
use memcache_ratelimit::store::{MemoryStore, Store};
use memcache_ratelimit::{FailurePolicy, LimiterBuilder, ManualClock};

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
    /// Whether the store keeps real time (a server) rather than the
    /// fixture's manual clock.
    pub fn real_time(&self) -> bool {
        self.server.is_some() || self.proxy.is_some()
    }
}

/// A fixed unix time on a minute boundary (2027-01-15 08:00:00 UTC).
pub const T0: i64 = 1_800_000_000;

pub fn memory() -> Fixture {
    let clock = ManualClock::from_unix_secs(T0);
    Fixture {
        name: "memory",
        store: Arc::new(MemoryStore::with_clock(clock.clone())),
        clock,
        server: None,
        proxy: None,
    }
}

#[cfg(feature = "memcached")]
pub async fn memcached() -> Fixture {
    let server = memcached::Memcached::start();
    let store = MemcachedStore::connect([server.address()])
        .await
        .expect("memcached store");
    Fixture {
        name: "memcached",
        store: Arc::new(store),
        clock: ManualClock::from_unix_secs(T0),
        server: Some(server),
        proxy: None,
    }
}

#[cfg(feature = "memcached")]
/// A memcached spoken to over the classic text protocol
/// ([`ClassicStore`]), as through twemproxy or to memcached 1.5.
pub async fn classic() -> Fixture {
    let server = memcached::Memcached::start();
    let store = ClassicStore::builder()
        .server(server.address())
        // A busy test machine is not a failure.
        .io_timeout(Duration::from_secs(5))
        .build()
        .expect("classic store");
    Fixture {
        name: "classic",
        store: Arc::new(store),
        clock: ManualClock::from_unix_secs(T0),
        server: Some(server),
        proxy: None,
    }
}

#[cfg(feature = "memcached")]
/// Twemproxy (nutcracker) in front of 3 memcached processes, spoken to
/// over the classic protocol, as an existing fleet behind a proxy runs.
pub async fn twemproxy() -> Fixture {
    let proxy = twemproxy::Twemproxy::start(3);
    let store = ClassicStore::builder()
        .server(proxy.address())
        .io_timeout(Duration::from_secs(5))
        .build()
        .expect("classic store");
    Fixture {
        name: "twemproxy",
        store: Arc::new(store),
        clock: ManualClock::from_unix_secs(T0),
        server: None,
        proxy: Some(proxy),
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
            Fleet::Twemproxy(proxy) => (0..count)
                .map(|_| {
                    Arc::new(
                        ClassicStore::builder()
                            .server(proxy.address())
                            .io_timeout(Duration::from_secs(5))
                            .build()
                            .expect("classic store"),
                    ) as Arc<dyn Store>
                })
                .collect(),
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
