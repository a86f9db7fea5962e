//! One request in flight, each decision timed beside a bare `mg` in
//! alternating order; see `bench/README.md`.

use clap::Parser;
use memcache_ratelimit_bench::paired::{run, Args};

fn main() {
    run(Args::parse());
}
