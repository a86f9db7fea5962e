//! Throughput, latency and memory of memcache-ratelimit's algorithms
//! against one local memcached; see `bench/README.md`.

use clap::Parser;
use memcache_ratelimit_bench::matrix::{run, Args};

fn main() {
    run(Args::parse());
}
