//! Instructions per decision under callgrind: the same count on a noisy
//! machine, whatever else runs beside it.
//!
//! Every case runs one fixed trace of [`TRACE`] decisions on a limiter
//! whose clock stands still, after warm-up decisions that are not
//! counted: for the hot client, one decision; for many clients, one
//! decision for each of the [`MANY_CLIENTS`] ids. Only the trace is
//! counted (callgrind's `--toggle-collect` on the benchmark function), so
//! instructions per decision are the total ÷ [`TRACE`]; `instructions-table`
//! prints that table from the saved summaries.
//!
//! - `embedded`: the limiter on `MemoryStore`, in process: every
//!   instruction of a decision.
//! - `memcached`: the limiter on `MemcachedStore` against a memcached this
//!   benchmark starts (not traced: callgrind runs with
//!   `--trace-children=no`), one request in flight: the client side of a
//!   decision, request and answer included.
//!
//! Run by gungraun (the successor of iai-callgrind, by Joining7943,
//! <https://github.com/gungraun/gungraun>), whose runner must be installed
//! at the library's version: `scripts/bench-instructions` does it.

use std::hint::black_box;
use std::sync::Arc;

use gungraun::{
    library_benchmark, library_benchmark_group, main, Callgrind, LibraryBenchmarkConfig,
};
use memcache_ratelimit::store::Store;
use memcache_ratelimit::{ManualClock, MemoryStore, RateLimiter};
use memcache_ratelimit_bench::algorithm::{Case, Setup};
use memcache_ratelimit_bench::client::warm_up_decision;
use memcache_ratelimit_bench::instructions::{fixed_time, picks, TRACE};
use memcache_ratelimit_bench::{Mode, MANY_CLIENTS};
use memcache_ratelimit_testkit::Memcached;
use tokio::runtime::Runtime;

/// What one benchmark runs its trace on.
struct Prepared {
    runtime: Runtime,
    limiter: Arc<RateLimiter>,
    ids: Vec<Vec<u8>>,
    /// The trace: indices into `ids`.
    trace: Vec<u32>,
    /// Kept alive for the trace; stopped when dropped, after it.
    _server: Option<Memcached>,
}

fn prepare(case: usize, mode: Mode, memcached: bool) -> Prepared {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let case = Case::ALL[case];
    let clock = ManualClock::new(fixed_time());
    let (store, server): (Arc<dyn Store>, _) = if memcached {
        let server = Memcached::start();
        let address = server.address();
        let store = runtime.block_on(memcache_ratelimit_bench::client::store(
            &address,
            std::time::Duration::from_secs(5),
        ));
        (store, Some(server))
    } else {
        (Arc::new(MemoryStore::with_clock(clock.clone())), None)
    };
    let limiter: Arc<RateLimiter> = case
        .spec(Setup::default())
        .clock(clock)
        .build(store)
        .expect("a valid limiter")
        .into();
    let ids: Vec<Vec<u8>> = match mode {
        Mode::Hot => vec![b"hot".to_vec()],
        Mode::Many => (0..MANY_CLIENTS)
            .map(|id| format!("c{id}").into_bytes())
            .collect(),
    };
    let trace = picks(ids.len(), TRACE);
    runtime.block_on(async {
        for id in &ids {
            warm_up_decision(&limiter, id).await;
        }
    });
    Prepared {
        runtime,
        limiter,
        ids,
        trace,
        _server: server,
    }
}

fn embedded_hot(case: usize) -> Prepared {
    prepare(case, Mode::Hot, false)
}
fn embedded_many(case: usize) -> Prepared {
    prepare(case, Mode::Many, false)
}
fn memcached_hot(case: usize) -> Prepared {
    prepare(case, Mode::Hot, true)
}
fn memcached_many(case: usize) -> Prepared {
    prepare(case, Mode::Many, true)
}

// The trace: `TRACE` decisions, one at a time; the state is handed back
// so that its teardown is not counted.
#[library_benchmark]
#[benches::embedded_hot(args = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], setup = embedded_hot)]
#[benches::embedded_many(args = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], setup = embedded_many)]
#[benches::memcached_hot(args = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], setup = memcached_hot)]
#[benches::memcached_many(args = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], setup = memcached_many)]
fn decisions(prepared: Prepared) -> Prepared {
    trace(prepared)
}

/// The trace's decisions, one at a time.
fn trace(prepared: Prepared) -> Prepared {
    prepared.runtime.block_on(async {
        for &pick in &prepared.trace {
            let decision = prepared.limiter.check(&prepared.ids[pick as usize]).await;
            black_box(decision.expect("a decision"));
        }
    });
    prepared
}

library_benchmark_group!(name = traces; benchmarks = decisions);

/// callgrind's options: children (memcached) not traced, and its cache
/// simulated as one fixed model, whatever the machine's: 32 KiB 8-way
/// first-level caches and an 8 MiB 16-way last level, 64-byte lines. The
/// last level's misses (memory reads and writes) are then the same count
/// on any machine, and say what a working set larger than the caches
/// costs, which the instruction count does not.
const CALLGRIND_ARGS: [&str; 5] = [
    "--trace-children=no",
    "--cache-sim=yes",
    "--I1=32768,8,64",
    "--D1=32768,8,64",
    "--LL=8388608,16,64",
];

/// gungraun's entry point, for `cargo bench` and its runner.
mod harness {
    use super::*;

    main!(
        config = LibraryBenchmarkConfig::default()
            .env_clear(false)
            .tool(Callgrind::with_args(CALLGRIND_ARGS));
        library_benchmark_groups = traces
    );

    pub(super) fn run() {
        main();
    }
}

/// Under `cargo bench` (or gungraun's runner, which runs this program
/// again under callgrind), the benchmark; under `cargo test`, which runs
/// it with neither flag, every case's trace once, natively, one hot
/// client: a check that each still decides, without callgrind.
fn main() {
    let benched = std::env::args().any(|arg| arg == "--bench" || arg.starts_with("--gungraun"));
    if benched {
        return harness::run();
    }
    for case in 0..Case::ALL.len() {
        for prepared in [embedded_hot(case), memcached_hot(case)] {
            drop(trace(prepared));
        }
    }
    println!(
        "instructions: every trace ran once; `cargo bench --bench instructions` (scripts/bench-instructions) counts them"
    );
}
