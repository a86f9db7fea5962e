//! Auto-pipelining in the memcached store: calls in flight at once toward
//! one server share batches, each call still gets exactly its own results,
//! and hangs, deadlines and runtime shutdowns end calls instead of wedging
//! them.

use crate::common;

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use common::memcached::Memcached;
use common::{unique_client, T0};
use memcache_ratelimit::store::StoreErrorKind;
use memcache_ratelimit::store::{PutCondition, PutOutcome, Store};
use memcache_ratelimit::{
    Error, FailurePolicy, ManualClock, MemcachedStore, RateLimiter, SlidingWindow,
};
use tokio::sync::Barrier;

const MINUTE: Duration = Duration::from_secs(60);

/// A key of client `client`, bucket `bucket`: keys of one client share a
/// routing prefix and so a server.
fn key(client: &[u8], bucket: &str) -> Vec<u8> {
    let mut key = b"pipe:".to_vec();
    key.extend_from_slice(client);
    key.push(b'_');
    key.extend_from_slice(bucket.as_bytes());
    key
}

/// Polls a call once: it queues (every batch slot is taken) and waits.
async fn queue<F: Future + Unpin>(call: &mut F) {
    std::future::poll_fn(|context| {
        assert!(
            Pin::new(&mut *call).poll(context).is_pending(),
            "the call did not queue"
        );
        Poll::Ready(())
    })
    .await;
}

/// Waits until the store has sent `batches` batches (a call taking a
/// free slot counts as its batch at once, before it is answered).
async fn wait_for_batches(store: &MemcachedStore, batches: u64) {
    let started = Instant::now();
    while store.pipeline_stats().batches < batches {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the call never went out"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Stops memcached (SIGSTOP) and waits until every one of its threads has
/// stopped: `kill` returns before they all have, and a request sent in
/// between would still be answered.
fn stop(server: &Memcached) {
    server.signal("STOP");
    let pid = server.pid().expect("memcached is running");
    let started = Instant::now();
    loop {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("/proc");
        let stopped = tasks.flatten().all(|task| {
            std::fs::read_to_string(task.path().join("stat"))
                .ok()
                .and_then(|stat| {
                    let state = stat.rsplit_once(')')?.1.trim_start().chars().next()?;
                    Some(state == 'T' || state == 't')
                })
                .unwrap_or(true)
        });
        if stopped {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "memcached did not stop"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A store of `server` with `depth` batches in flight, and an I/O timeout
/// (5 s) far beyond any deadline here.
async fn pipelined(server: &Memcached, depth: usize) -> MemcachedStore {
    MemcachedStore::builder()
        .server(server.address())
        .io_timeout(Duration::from_secs(5))
        .pipeline_depth(depth)
        .build()
        .await
        .unwrap()
}

/// The store configurations under test: pipelining as shipped, pipelining
/// with one batch in flight (so concurrent calls always coalesce), and the
/// direct path.
async fn configurations(server: &Memcached) -> Vec<(&'static str, MemcachedStore)> {
    let build = |pipelining: bool, depth: usize| {
        MemcachedStore::builder()
            .server(server.address())
            .pipelining(pipelining)
            .pipeline_depth(depth)
            .build()
    };
    vec![
        ("pipelined", build(true, 4).await.unwrap()),
        ("pipelined, depth 1", build(true, 1).await.unwrap()),
        ("direct", build(false, 4).await.unwrap()),
    ]
}

/// The Store contract (as in tests/store_conformance.rs, without the
/// real-time expiry wait), on keys of a fresh client. Unless `alone`, the
/// step that makes memcached reject an increment is left out: calls
/// batched with it would fail too (see
/// `an_error_reply_fails_the_calls_batched_after_it_as_unread`).
async fn contract(store: &MemcachedStore, name: &str, alone: bool) {
    let client = unique_client("contract");
    let k = |bucket: &str| key(&client, bucket);

    // increment creates at delta, adds, and reads in the same call
    let (a, b, missing) = (k("a"), k("b"), k("missing"));
    assert_eq!(store.increment(&a, 5, MINUTE, &[]).await.unwrap().value, 5);
    store.increment(&b, 7, MINUTE, &[]).await.unwrap();
    let second = store
        .increment(&a, 2, MINUTE, &[&b, &missing, &a])
        .await
        .unwrap();
    assert_eq!(second.value, 7, "{name}");
    assert_eq!(second.read, vec![Some(7), None, Some(7)], "{name}");

    // decrement stops at 0 and never creates
    let d = k("dec");
    store.increment(&d, 100, MINUTE, &[]).await.unwrap();
    assert_eq!(store.decrement(&d, 1).await.unwrap(), Some(99), "{name}");
    assert_eq!(
        store.get_counters(std::slice::from_ref(&d)).await.unwrap(),
        vec![Some(99)],
        "{name}"
    );
    assert_eq!(store.decrement(&d, 1000).await.unwrap(), Some(0), "{name}");
    assert_eq!(store.decrement(&missing, 1).await.unwrap(), None, "{name}");
    assert_eq!(
        store
            .get_counters(std::slice::from_ref(&missing))
            .await
            .unwrap(),
        vec![None],
        "{name}"
    );

    // increments wrap at 2^64
    let w = k("wrap");
    store
        .put(
            &w,
            u64::MAX.to_string().as_bytes(),
            MINUTE,
            PutCondition::Always,
        )
        .await
        .unwrap();
    assert_eq!(store.increment(&w, 2, MINUTE, &[]).await.unwrap().value, 1);

    // versions change on every write; conditional puts
    let v = k("v");
    assert_eq!(store.get(&v).await.unwrap(), None, "{name}");
    let put = |value: &'static [u8], condition| store.put(&v, value, MINUTE, condition);
    assert_eq!(
        put(b"first", PutCondition::Absent).await.unwrap(),
        PutOutcome::Stored
    );
    assert_eq!(
        put(b"second", PutCondition::Absent).await.unwrap(),
        PutOutcome::Conflict
    );
    let current = store.get(&v).await.unwrap().unwrap();
    assert_eq!(current.value, b"first", "{name}");
    assert_eq!(
        put(b"third", PutCondition::Version(current.version))
            .await
            .unwrap(),
        PutOutcome::Stored
    );
    assert_eq!(
        put(b"fourth", PutCondition::Version(current.version))
            .await
            .unwrap(),
        PutOutcome::Conflict,
        "{name}: a stale version wrote"
    );
    let third = store.get(&v).await.unwrap().unwrap();
    assert_eq!(third.value, b"third", "{name}");
    assert_ne!(third.version, current.version, "{name}");
    store
        .put(&a, b"1", MINUTE, PutCondition::Always)
        .await
        .unwrap();
    let before = store.get(&a).await.unwrap().unwrap().version;
    store.increment(&a, 1, MINUTE, &[]).await.unwrap();
    let after = store.get(&a).await.unwrap().unwrap();
    assert_eq!(after.value, b"2", "{name}");
    assert_ne!(before, after.version, "{name}: increment kept the version");

    // delete counts what existed
    assert_eq!(
        store
            .delete(&[a.clone(), b.clone(), missing.clone()])
            .await
            .unwrap(),
        2,
        "{name}"
    );
    assert_eq!(
        store.get_counters(&[a, b]).await.unwrap(),
        vec![None, None],
        "{name}"
    );

    // non-numbers are not counters
    let t = k("text");
    if !alone {
        return;
    }
    store
        .put(&t, b"hello", MINUTE, PutCondition::Always)
        .await
        .unwrap();
    let error = store.increment(&t, 1, MINUTE, &[]).await.unwrap_err();
    assert_eq!(error.kind(), StoreErrorKind::Rejected, "{name}: {error}");
    let error = store
        .get_counters(std::slice::from_ref(&t))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), StoreErrorKind::NotACounter, "{name}: {error}");

    // invalid keys and values are rejected before anything is sent
    for bad in [Vec::new(), vec![b'k'; 251], b"has space".to_vec()] {
        let error = store.increment(&bad, 1, MINUTE, &[]).await.unwrap_err();
        assert_eq!(error.kind(), StoreErrorKind::InvalidKey, "{name}: {bad:?}");
        let error = store.get_counters(&[k("ok"), bad]).await.unwrap_err();
        assert_eq!(error.kind(), StoreErrorKind::InvalidKey, "{name}");
    }
    let error = store
        .put(&k("empty"), b"", MINUTE, PutCondition::Always)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), StoreErrorKind::Rejected, "{name}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_contract_holds_with_pipelining_on_and_off_alone_and_under_concurrency() {
    let server = Memcached::start();
    for (name, store) in configurations(&server).await {
        contract(&store, name, true).await;
        // The same, 32 times at once: with pipelining the calls of
        // different contract runs share batches.
        let store = Arc::new(store);
        let runs: Vec<_> = (0..32)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move { contract(&store, name, false).await })
            })
            .collect();
        for run in runs {
            run.await.unwrap();
        }
        let stats = store.pipeline_stats();
        eprintln!("{name}: {stats:?}");
        if store.is_pipelining() {
            assert!(
                stats.batches > 0 && stats.jobs >= stats.batches,
                "{stats:?}"
            );
        } else {
            assert_eq!(stats, Default::default(), "{name}");
        }
        if name == "pipelined, depth 1" {
            assert!(
                stats.largest_batch > 1,
                "{name}: never coalesced: {stats:?}"
            );
        }
    }
}

#[tokio::test]
async fn expiry_is_set_at_creation_and_never_extended_when_pipelined() {
    let server = Memcached::start();
    let store = MemcachedStore::connect([server.address()]).await.unwrap();
    assert!(store.is_pipelining(), "pipelining is on by default");
    let client = unique_client("ttl");
    let counter = key(&client, "ttl");
    let ttl = Duration::from_secs(2);
    store.increment(&counter, 1, ttl, &[]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let still = store.increment(&counter, 1, MINUTE, &[]).await.unwrap();
    assert_eq!(still.value, 2);
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    assert_eq!(
        store
            .get_counters(std::slice::from_ref(&counter))
            .await
            .unwrap(),
        vec![None]
    );
}

/// 256 tasks increment one key at once, each also reading a key of its
/// own: the count is exact, every task sees a distinct value, every task
/// reads its own key (so results are never handed to the wrong call), and
/// with pipelining the calls share batches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_increments_of_one_key_are_exact_and_share_batches() {
    const TASKS: u64 = 256;
    let server = Memcached::start();
    for (name, store) in configurations(&server).await {
        let store = Arc::new(store);
        let client = unique_client("hot");
        let hot = key(&client, "hot");
        for task in 0..TASKS {
            let own = key(&client, &format!("own{task}"));
            store
                .put(
                    &own,
                    task.to_string().as_bytes(),
                    MINUTE,
                    PutCondition::Always,
                )
                .await
                .unwrap();
        }
        let before = store.pipeline_stats();
        let barrier = Arc::new(Barrier::new(TASKS as usize));
        let tasks: Vec<_> = (0..TASKS)
            .map(|task| {
                let (store, barrier, hot) = (store.clone(), barrier.clone(), hot.clone());
                let own = key(&client, &format!("own{task}"));
                tokio::spawn(async move {
                    barrier.wait().await;
                    let counters = store.increment(&hot, 1, MINUTE, &[&own]).await.unwrap();
                    assert_eq!(
                        counters.read,
                        vec![Some(task)],
                        "task {task} read another's key"
                    );
                    counters.value
                })
            })
            .collect();
        let mut seen = BTreeSet::new();
        for task in tasks {
            assert!(
                seen.insert(task.await.unwrap()),
                "{name}: a value seen twice"
            );
        }
        assert_eq!(seen, (1..=TASKS).collect(), "{name}");
        let after = store.pipeline_stats();
        assert_eq!(
            store.get_counters(&[hot]).await.unwrap(),
            vec![Some(TASKS)],
            "{name}"
        );

        let (batches, jobs, ops) = (
            after.batches - before.batches,
            after.jobs - before.jobs,
            after.ops - before.ops,
        );
        eprintln!(
            "{name}: {jobs} calls in {batches} batches ({:.1} per batch, largest {})",
            jobs as f64 / batches.max(1) as f64,
            after.largest_batch
        );
        if store.is_pipelining() {
            assert_eq!(jobs, TASKS, "{name}: every call went through the pipeline");
            assert_eq!(ops, 2 * TASKS, "{name}: an increment and a read per call");
            assert!(jobs > batches, "{name}: no coalescing: {after:?}");
        } else {
            assert_eq!(after, Default::default(), "{name}");
        }
    }
}

/// A store whose own timeout is long, under a limiter with a short
/// deadline; memcached hangs (SIGSTOP) while many checks are in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_memcached_yields_deadline_errors_promptly_and_then_recovers() {
    let server = Memcached::start();
    for depth in [1, 4] {
        let store = Arc::new(pipelined(&server, depth).await);
        let deadline = Duration::from_millis(50);
        let limiter = |deadline: Duration| {
            Arc::new(
                SlidingWindow::builder("1000000/minute".parse().unwrap(), store.clone())
                    .sub_windows(1)
                    .clock(ManualClock::from_unix_secs(T0 + 30))
                    .deadline(deadline)
                    .on_failure(FailurePolicy::ReturnError)
                    .build()
                    .unwrap(),
            )
        };
        // The short deadline while memcached hangs; a long one around it,
        // so a loaded test machine cannot fail the checks that must pass.
        let (hasty, patient) = (limiter(deadline), limiter(Duration::from_secs(5)));
        let checks = |limiter: &Arc<RateLimiter>, count: usize| {
            let tasks: Vec<_> = (0..count)
                .map(|_| {
                    let limiter = limiter.clone();
                    tokio::spawn(async move {
                        let started = Instant::now();
                        let outcome = limiter.check(b"hung").await;
                        (outcome, started.elapsed())
                    })
                })
                .collect();
            async move {
                let mut outcomes = Vec::new();
                for task in tasks {
                    outcomes.push(task.await.unwrap());
                }
                outcomes
            }
        };
        for (outcome, _) in checks(&patient, 64).await {
            assert!(outcome.unwrap().is_allowed());
        }

        stop(&server);
        for round in 0..2 {
            for (outcome, waited) in checks(&hasty, 64).await {
                assert!(
                    matches!(outcome, Err(Error::DeadlineExceeded(d)) if d == deadline),
                    "depth {depth}, round {round}: {outcome:?}"
                );
                // Far below the store's 5 s timeout: the deadline ended it.
                assert!(waited < Duration::from_secs(1), "waited {waited:?}");
            }
        }
        server.signal("CONT");

        let started = Instant::now();
        for (outcome, _) in checks(&patient, 64).await {
            assert!(outcome.unwrap().is_allowed(), "depth {depth}");
        }
        eprintln!(
            "depth {depth}: recovered in {:?}; {:?}",
            started.elapsed(),
            store.pipeline_stats()
        );
    }
}

/// Calls waiting in the pipeline when the runtime whose task would send
/// them shuts down fail at once with a store error; they never hang.
#[test]
fn calls_queued_behind_a_runtime_that_shuts_down_fail_instead_of_hanging() {
    let server = Memcached::start();
    let main = tokio::runtime::Runtime::new().unwrap();
    let store = main.block_on(pipelined(&server, 1));
    let client = unique_client("shutdown");
    let (first, second) = (key(&client, "1"), key(&client, "2"));
    main.block_on(store.increment(&first, 1, MINUTE, &[]))
        .unwrap();
    stop(&server);

    // On another runtime, a call takes the only batch slot and hangs.
    let other = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let hung = store.clone();
    other.spawn(async move { hung.increment(&first, 1, MINUTE, &[]).await });
    main.block_on(wait_for_batches(&store, 2));

    // This call queues behind it; then the other runtime goes away.
    let queued = store.clone();
    let mut waiting = Box::pin(async move { queued.increment(&second, 1, MINUTE, &[]).await });
    main.block_on(queue(&mut waiting));
    other.shutdown_timeout(Duration::from_secs(1));

    let started = Instant::now();
    let outcome = main.block_on(async {
        tokio::time::timeout(Duration::from_secs(2), waiting)
            .await
            .expect("a queued call hung after the runtime shut down")
    });
    let error = outcome.unwrap_err();
    eprintln!("after {:?}: {error}", started.elapsed());
    assert_eq!(error.kind(), StoreErrorKind::Io, "{error}");
    assert!(!error.is_ambiguous(), "it was never sent: {error}");
    assert!(error.message().contains("runtime"), "{error}");
    server.signal("CONT");

    // The store still works.
    let again = main
        .block_on(store.increment(&key(&client, "3"), 1, MINUTE, &[]))
        .unwrap();
    assert_eq!(again.value, 1);
}

/// Bursts of calls, each more than the batch slots take, with quiet
/// moments between them: the tasks that send the queued calls wait for
/// the next burst rather than end, so a lane never starts more of them
/// than its depth, however many bursts come, and every call is still
/// counted once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bursts_reuse_the_lanes_sending_tasks_instead_of_starting_new_ones() {
    let server = Memcached::start();
    let depth = 2;
    let store = pipelined(&server, depth).await;
    let client = unique_client("bursts");
    let counter = key(&client, "1");
    let (bursts, calls) = (40, 24);
    for _ in 0..bursts {
        let results = burst(&store, &counter, calls).await;
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        // Quiet: every sending task finds the queue empty and waits.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let stats = store.pipeline_stats();
    eprintln!("{stats:?}");
    assert!(
        stats.jobs > stats.batches,
        "no burst ever queued, so nothing was tested: {stats:?}"
    );
    assert!(
        stats.drivers >= 1 && stats.drivers <= depth as u64,
        "{} sending tasks started for a depth of {depth}: {stats:?}",
        stats.drivers
    );
    let total = store.increment(&counter, 0, MINUTE, &[]).await.unwrap();
    assert_eq!(total.value, (bursts * calls) as u64);
}

/// A burst of `calls` increments of `counter` at once, on the current
/// runtime; every result.
async fn burst(store: &MemcachedStore, counter: &[u8], calls: usize) -> Vec<Result<u64, String>> {
    let calls: Vec<_> = (0..calls)
        .map(|_| {
            let (store, counter) = (store.clone(), counter.to_vec());
            tokio::spawn(async move {
                let counted = store.increment(&counter, 1, MINUTE, &[]).await;
                counted
                    .map(|counters| counters.value)
                    .map_err(|error| error.to_string())
            })
        })
        .collect();
    let mut results = Vec::new();
    for call in calls {
        results.push(call.await.unwrap());
    }
    results
}

/// The tasks that wait for queued calls end with the store: dropped, it
/// leaves no task behind on the runtime.
#[test]
fn a_dropped_store_leaves_no_waiting_task_behind() {
    let server = Memcached::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        // Short timeouts: the timer a batch's deadlines share sleeps until
        // the last one armed (the I/O and drain timeouts) before it ends
        // with the store.
        let store = MemcachedStore::builder()
            .server(server.address())
            .io_timeout(Duration::from_millis(200))
            .drain_timeout(Duration::from_millis(200))
            .pipeline_depth(2)
            .build()
            .await
            .unwrap();
        let counter = key(&unique_client("dropped"), "1");
        for _ in 0..5 {
            assert!(burst(&store, &counter, 24).await.iter().all(Result::is_ok));
        }
        let metrics = tokio::runtime::Handle::current().metrics();
        let drivers = store.pipeline_stats().drivers;
        assert!(drivers > 0, "no burst queued, so nothing was tested");
        assert!(
            metrics.num_alive_tasks() > 0,
            "the drivers wait on the runtime"
        );
        drop(store);
        let started = Instant::now();
        while metrics.num_alive_tasks() > 0 {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "{} tasks outlived the store",
                metrics.num_alive_tasks()
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    });
}

/// The runtime on which a lane's tasks wait for queued calls shuts down;
/// calls queued afterwards, on another runtime, still go out: no slot is
/// handed to a task that no longer runs.
#[test]
fn calls_queued_after_the_waiting_tasks_runtime_shut_down_still_go_out() {
    let server = Memcached::start();
    let main = tokio::runtime::Runtime::new().unwrap();
    let store = main.block_on(pipelined(&server, 2));
    let counter = key(&unique_client("moved"), "1");
    let first = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    first.block_on(async {
        for _ in 0..5 {
            assert!(burst(&store, &counter, 24).await.iter().all(Result::is_ok));
        }
    });
    let drivers = store.pipeline_stats().drivers;
    assert!(drivers > 0, "no burst queued, so nothing was tested");
    first.shutdown_timeout(Duration::from_secs(1));

    main.block_on(async {
        // The connections dialled on the first runtime fail with it; the
        // calls must end either way, and the store then work again.
        for round in 0.. {
            let results = tokio::time::timeout(Duration::from_secs(5), burst(&store, &counter, 24))
                .await
                .expect("queued calls hung behind a task that no longer runs");
            if results.iter().all(Result::is_ok) {
                break;
            }
            assert!(round < 20, "the store never recovered: {results:?}");
        }
    });
    assert!(
        store.pipeline_stats().drivers > drivers,
        "new tasks on the new runtime"
    );
}

/// A fleet: each client's calls are pipelined to its own server, and a call
/// whose keys span servers takes the direct path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_pipelines_per_server_and_calls_spanning_servers_still_work() {
    let servers = [Memcached::start(), Memcached::start(), Memcached::start()];
    let store = Arc::new(
        MemcachedStore::connect(servers.iter().map(Memcached::address))
            .await
            .unwrap(),
    );
    let clients: Vec<Vec<u8>> = (0..24).map(|_| unique_client("fleet")).collect();
    let homes: BTreeSet<&str> = clients
        .iter()
        .map(|client| store.server_for(&key(client, "n")))
        .collect();
    assert!(homes.len() > 1, "every client on one server: {homes:?}");

    let tasks: Vec<_> = clients
        .iter()
        .flat_map(|client| {
            (0..16).map(|_| {
                let (store, k) = (store.clone(), key(client, "n"));
                tokio::spawn(async move { store.increment(&k, 1, MINUTE, &[]).await.unwrap() })
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let stats = store.pipeline_stats();
    assert_eq!(stats.jobs, 24 * 16, "{stats:?}");

    // One read of every client's counter, across all servers at once.
    let keys: Vec<Vec<u8>> = clients.iter().map(|client| key(client, "n")).collect();
    assert_eq!(
        store.get_counters(&keys).await.unwrap(),
        vec![Some(16); clients.len()]
    );
    assert_eq!(
        store.pipeline_stats().jobs,
        stats.jobs,
        "a call spanning servers went through one server's pipeline"
    );
    assert_eq!(store.delete(&keys).await.unwrap(), clients.len());
}

#[tokio::test]
async fn a_pipeline_depth_of_zero_is_rejected() {
    let error = MemcachedStore::builder()
        .server("127.0.0.1:11211")
        .pipeline_depth(0)
        .build()
        .await
        .unwrap_err();
    assert_eq!(error.kind(), StoreErrorKind::Config);
    let store = MemcachedStore::builder()
        .server("127.0.0.1:11211")
        .pipelining(false)
        .build()
        .await
        .unwrap();
    assert!(!store.is_pipelining());
}

#[tokio::test]
async fn a_pipeline_batch_of_zero_is_rejected() {
    let error = MemcachedStore::builder()
        .server("127.0.0.1:11211")
        .pipeline_batch(0)
        .build()
        .await
        .unwrap_err();
    assert_eq!(error.kind(), StoreErrorKind::Config);
    assert!(
        error
            .to_string()
            .contains("pipeline_batch must be at least 1"),
        "{error}"
    );
}

/// With one batch in flight and room for 1,024 operations, the 600 calls
/// queued behind it go out in one batch, where the default carries 128,
/// and every call gets its own answer. memcached is stopped
/// while the calls queue, so the batches are the same on every machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bigger_batch_setting_carries_more_calls_per_round_trip() {
    let server = Memcached::start();
    let store = Arc::new(
        MemcachedStore::builder()
            .server(server.address())
            .io_timeout(Duration::from_secs(10))
            .pipeline_depth(1)
            .pipeline_batch(1_024)
            .build()
            .await
            .unwrap(),
    );
    let ttl = Duration::from_secs(60);
    store
        .increment(b"big-batch-warm", 1, ttl, &[])
        .await
        .unwrap();
    server.signal("STOP");
    let call = |i: u64| {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            let key = format!("big-batch-{i}");
            let counters = store.increment(key.as_bytes(), i + 1, ttl, &[]).await;
            assert_eq!(counters.unwrap().value, i + 1);
        })
    };
    // The first takes the one batch slot and waits on the stopped server;
    // the 600 after it queue.
    let mut calls = vec![call(0)];
    tokio::time::sleep(Duration::from_millis(100)).await;
    calls.extend((1..=600).map(call));
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.signal("CONT");
    for call in calls {
        call.await.unwrap();
    }
    let stats = store.pipeline_stats();
    assert_eq!(stats.jobs, 602, "{stats:?}");
    // The warm-up, the first call, then the 600 queued calls.
    assert_eq!(stats.batches, 3, "{stats:?}");
    assert_eq!(stats.largest_batch, 600, "{stats:?}");
}

/// memcached answers an increment of a non-number with `CLIENT_ERROR`, and
/// the memcache client stops reading a batch at an error line, though
/// memcached executes the rest. So the calls batched after such a call
/// fail: a write as ambiguous (it did land), a read as not, and both say
/// why instead of repeating the other call's error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_reply_fails_the_calls_batched_after_it_as_unread() {
    let server = Memcached::start();
    let store = Arc::new(pipelined(&server, 1).await);
    let client = unique_client("poison");
    let (text, counter, before, blocker) = (
        key(&client, "text"),
        key(&client, "counter"),
        key(&client, "before"),
        key(&client, "blocker"),
    );
    store
        .put(&text, b"hello", MINUTE, PutCondition::Always)
        .await
        .unwrap();

    // The only batch slot is held by a call to a stopped server; the
    // calls made meanwhile queue, in order, into one batch.
    stop(&server);
    let batches = store.pipeline_stats().batches;
    let held = {
        let (store, k) = (store.clone(), blocker.clone());
        tokio::spawn(async move { store.increment(&k, 1, MINUTE, &[]).await })
    };
    wait_for_batches(&store, batches + 1).await;
    let increment = |k: &Vec<u8>| {
        let (store, k) = (store.clone(), k.clone());
        Box::pin(async move { store.increment(&k, 1, MINUTE, &[]).await })
    };
    let mut ok = increment(&before);
    queue(&mut ok).await;
    let mut rejected = increment(&text);
    queue(&mut rejected).await;
    let mut write = increment(&counter);
    queue(&mut write).await;
    let mut read = {
        let (store, k) = (store.clone(), counter.clone());
        Box::pin(async move { store.get_counters(&[k]).await })
    };
    queue(&mut read).await;
    server.signal("CONT");

    assert_eq!(held.await.unwrap().unwrap().value, 1);
    assert_eq!(ok.await.unwrap().value, 1, "batched before: unharmed");
    let error = rejected.await.unwrap_err();
    assert_eq!(error.kind(), StoreErrorKind::Rejected, "{error}");
    let error = write.await.unwrap_err();
    assert_eq!(error.kind(), StoreErrorKind::Io, "{error}");
    assert!(error.is_ambiguous(), "{error}");
    assert!(error.message().contains("earlier call"), "{error}");
    let error = read.await.unwrap_err();
    assert!(!error.is_ambiguous(), "{error}");
    assert!(error.message().contains("earlier call"), "{error}");
    assert_eq!(
        store.pipeline_stats().batches,
        batches + 2,
        "the queued calls did not share one batch"
    );
    // memcached did execute the unread increment: ambiguous was the truth.
    assert_eq!(store.get_counters(&[counter]).await.unwrap(), vec![Some(1)]);
}

/// A pooled connection that memcached closed (here, by restarting) is never
/// handed to a call: the first call after the restart is answered, on every
/// path, instead of failing on the dead connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_a_restarted_memcached_closed_are_not_reused() {
    let mut server = Memcached::start();
    let stores = configurations(&server).await;
    let client = unique_client("restart");
    for (at, (_, store)) in stores.iter().enumerate() {
        let k = key(&client, &at.to_string());
        assert_eq!(store.increment(&k, 1, MINUTE, &[]).await.unwrap().value, 1);
    }
    server.restart();
    for (at, (name, store)) in stores.iter().enumerate() {
        let k = key(&client, &at.to_string());
        match store.increment(&k, 1, MINUTE, &[]).await {
            Ok(counters) => assert_eq!(counters.value, 1, "{name}: memcached restarts empty"),
            Err(error) => panic!("{name}: the first call after the restart failed: {error}"),
        }
    }
}
