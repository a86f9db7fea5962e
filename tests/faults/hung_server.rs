//! A hung memcached (stopped with SIGSTOP) does not cost a new connection
//! per decision that gives up on it: connections per server are bounded,
//! and the ones that were waiting on the hung server are used again once
//! it answers.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::memcached::Memcached;
use memcache_ratelimit::store::{
    ClassicStore, ClassicStoreBuilder, MemcachedStoreBuilder, Protocol, Store,
    DEFAULT_MAX_CONNECTIONS,
};
use memcache_ratelimit::{FailurePolicy, FixedWindow, MemcachedStore, RateLimiter};

/// Decisions made while the server is stopped: rounds of concurrent ones.
const ROUNDS: usize = 20;
const CONCURRENT: usize = 50;
const DEADLINE: Duration = Duration::from_millis(50);

fn limiter(store: Arc<dyn Store>) -> Arc<RateLimiter> {
    Arc::new(
        FixedWindow::builder("1000000/minute".parse().unwrap(), store)
            .deadline(DEADLINE)
            .on_failure(FailurePolicy::ReturnError)
            .build()
            .unwrap(),
    )
}

/// Runs `rounds` rounds of `CONCURRENT` decisions at once; how many were
/// answered (allowed or denied) rather than failed.
async fn decide(limiter: &Arc<RateLimiter>, rounds: usize) -> usize {
    let mut answered = 0;
    for round in 0..rounds {
        let tasks: Vec<_> = (0..CONCURRENT)
            .map(|task| {
                let limiter = Arc::clone(limiter);
                tokio::spawn(async move {
                    let client = format!("client-{round}-{task}");
                    limiter.check(client.as_bytes()).await
                })
            })
            .collect();
        for task in tasks {
            answered += usize::from(task.await.unwrap().is_ok());
        }
    }
    answered
}

async fn connections_stay_bounded(
    name: &str,
    store: Arc<dyn Store>,
    server: &Memcached,
    bound: usize,
) {
    let limiter = limiter(store);
    // Counted from before the first decision: the warm-up's connections
    // are within the bound too.
    let before = server.stat("total_connections");
    assert_eq!(decide(&limiter, 2).await, 2 * CONCURRENT, "{name}: warm-up");

    server.signal("STOP");
    let started = Instant::now();
    let answered = decide(&limiter, ROUNDS).await;
    let hung_for = started.elapsed();
    server.signal("CONT");
    assert_eq!(
        answered, 0,
        "{name}: nothing can be answered by a stopped server"
    );

    // Once the server answers again, so do the decisions, on the
    // connections that waited through the hang.
    let recovered = Instant::now() + Duration::from_secs(10);
    while decide(&limiter, 1).await < CONCURRENT {
        assert!(Instant::now() < recovered, "{name}: no recovery in 10 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(decide(&limiter, 4).await, 4 * CONCURRENT, "{name}: after");
    // The `stats` connection that reads the figure counts itself.
    let grew = server.stat("total_connections") - before - 1;
    eprintln!(
        "{name}: {} decisions before, {} over {hung_for:.2?} on a stopped server, then {} after \
         it continued; memcached accepted {grew} connections in all (bound {bound})",
        2 * CONCURRENT,
        ROUNDS * CONCURRENT,
        5 * CONCURRENT
    );
    assert!(
        grew <= bound as u64,
        "{name}: {grew} new connections for {} decisions that gave up on a hung server",
        ROUNDS * CONCURRENT
    );
}

/// A memcached, and a classic store of it as `configure` sets it up.
fn classic(
    configure: impl FnOnce(ClassicStoreBuilder) -> ClassicStoreBuilder,
) -> (Memcached, Arc<dyn Store>) {
    let server = Memcached::start();
    let store = configure(ClassicStore::builder().server(server.address()))
        .build()
        .unwrap();
    (server, Arc::new(store))
}

/// A memcached, and a memcached store of it as `configure` sets it up.
async fn meta(
    configure: impl FnOnce(MemcachedStoreBuilder) -> MemcachedStoreBuilder,
) -> (Memcached, Arc<dyn Store>) {
    let server = Memcached::start();
    let store = configure(MemcachedStore::builder().server(server.address()))
        .build()
        .await
        .unwrap();
    (server, Arc::new(store))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_server_costs_no_more_connections_than_the_bound_through_the_classic_store() {
    let (server, store) = classic(|store| store);
    connections_stay_bounded("classic store", store, &server, DEFAULT_MAX_CONNECTIONS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_server_costs_no_more_connections_than_the_bound_through_the_meta_store() {
    let (server, store) = meta(|store| store).await;
    let name = "meta store, pipelined";
    connections_stay_bounded(name, store, &server, DEFAULT_MAX_CONNECTIONS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_server_costs_no_more_connections_than_the_bound_without_pipelining() {
    let (server, store) = meta(|store| store.pipelining(false)).await;
    let name = "meta store, not pipelined";
    connections_stay_bounded(name, store, &server, DEFAULT_MAX_CONNECTIONS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_server_costs_no_more_connections_than_the_bound_through_the_classic_protocol() {
    let (server, store) = meta(|store| store.protocol(Protocol::Classic)).await;
    let name = "memcached store, classic protocol";
    connections_stay_bounded(name, store, &server, DEFAULT_MAX_CONNECTIONS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_bound_holds_through_the_classic_store() {
    let (server, store) = classic(|store| store.max_connections(8));
    connections_stay_bounded("classic store, 8 connections", store, &server, 8).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_bound_holds_through_the_meta_store_without_pipelining() {
    let (server, store) = meta(|store| store.pipelining(false).max_connections(8)).await;
    let name = "meta store, not pipelined, 8 connections";
    connections_stay_bounded(name, store, &server, 8).await;
}

/// With 2 connections, an I/O timeout of 100 ms and a drain timeout of
/// 100 ms: two calls on a stopped server time out and hold both
/// connections; a third finds none free; once the two exchanges have run
/// out their 200 ms their connections are closed, and a fourth call gets
/// one again.
async fn a_server_that_never_answers_holds_connections_only_for_the_drain_timeout(
    name: &str,
    store: Arc<dyn Store>,
    server: &Memcached,
) {
    let ttl = Duration::from_secs(60);
    let call = |tag: &'static str| {
        let store = Arc::clone(&store);
        async move {
            let key = format!("drain:{tag}");
            store.increment(key.as_bytes(), 1, ttl, &[]).await
        }
    };
    server.signal("STOP");
    let started = Instant::now();
    let (first, second) = tokio::join!(call("a"), call("b"));
    for outcome in [first, second] {
        let error = outcome.expect_err("a stopped server answers nothing");
        assert!(
            error.to_string().contains("did not answer"),
            "{name}: {error}"
        );
    }
    let third = call("c").await.expect_err("no free connection");
    assert!(
        third.to_string().contains("all 2 connections"),
        "{name}: {third}"
    );
    tokio::time::sleep(Duration::from_millis(350).saturating_sub(started.elapsed())).await;
    let fourth = call("d").await.expect_err("still stopped");
    assert!(
        fourth.to_string().contains("did not answer"),
        "{name}: the connections were not given up after the drain timeout: {fourth}"
    );
    server.signal("CONT");
    eprintln!("{name}: {third}; after the drain timeout: {fourth}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_classic_store_gives_up_connections_after_the_drain_timeout() {
    let (server, store) = classic(|store| {
        store
            .max_connections(2)
            .io_timeout(Duration::from_millis(100))
            .drain_timeout(Duration::from_millis(100))
            .connect_timeout(Duration::from_millis(50))
    });
    a_server_that_never_answers_holds_connections_only_for_the_drain_timeout(
        "classic store",
        store,
        &server,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_meta_store_gives_up_connections_after_the_drain_timeout() {
    let (server, store) = meta(|store| {
        store
            .pipelining(false)
            .max_connections(2)
            .io_timeout(Duration::from_millis(100))
            .drain_timeout(Duration::from_millis(100))
            .connect_timeout(Duration::from_millis(50))
    })
    .await;
    a_server_that_never_answers_holds_connections_only_for_the_drain_timeout(
        "meta store, not pipelined",
        store,
        &server,
    )
    .await;
}
