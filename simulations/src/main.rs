//! Runs every algorithm of `memcache-ratelimit` on every workload against
//! an exact sliding window; see [`simulations::cli`].
//!
//! `cargo run --release -p simulations [-- --seed N --quick --out DIR --figures DIR --overwrite]`:
//! written under `target/simulations/` by default, and never over files
//! tracked by git without `--overwrite`.

use clap::Parser;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    simulations::cli::run(simulations::cli::Args::parse())
}
