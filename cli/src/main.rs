//! `memcache-ratelimit`: the operator's command line.
//!
//! - `inspect <client>`: a client's keys in the memcached fleet, the server
//!   holding them, their values, and the current estimate;
//! - `check <client>`: one real decision, for scripts (exit status 0
//!   allowed, 1 denied, 2 error);
//! - `simulate`: every algorithm against an exact sliding window (the
//!   `simulations` crate);
//! - `bench`: decisions/s and latency against a local memcached (the
//!   `bench` crate).
//!
//! The limiter is configured as a service configures it: `--config FILE`
//! (or `MEMCACHE_RATELIMIT_CONFIG`), the `MEMCACHE_RATELIMIT_*` variables,
//! then the flags below, each overriding the one before.

mod limiter;
mod report;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use limiter::Target;

/// Operate memcache-ratelimit: inspect clients, script checks, run the
/// simulations and the benchmark.
#[derive(Debug, Parser)]
#[command(name = "memcache-ratelimit", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show a client's keys, the server holding them, their values and the
    /// current estimate, without counting anything.
    Inspect {
        #[command(flatten)]
        target: Target,
        /// The client id, as the service passes it to the limiter.
        client: String,
    },
    /// Make one real decision for a client. Exit status: 0 allowed, 1
    /// denied, 2 error.
    Check {
        #[command(flatten)]
        target: Target,
        /// The client id, as the service passes it to the limiter.
        client: String,
        /// The request's cost.
        #[arg(long, default_value_t = 1)]
        cost: u64,
        /// Print the decision as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Run every algorithm on every workload against an exact sliding
    /// window (tables on stdout, CSV and SVG files written).
    Simulate(simulations::cli::Args),
    /// Measure decisions/s and latency of every algorithm against a local
    /// memcached (report on stdout).
    Bench(memcache_ratelimit_bench::matrix::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let outcome = match cli.command {
        Command::Inspect { target, client } => {
            runtime.block_on(report::inspect(&target, client.as_bytes()))
        }
        Command::Check {
            target,
            client,
            cost,
            json,
        } => runtime.block_on(report::check(&target, client.as_bytes(), cost, json)),
        Command::Simulate(args) => simulations::cli::run(args).map(|()| ExitCode::SUCCESS),
        Command::Bench(args) => {
            memcache_ratelimit_bench::matrix::run(args);
            Ok(ExitCode::SUCCESS)
        }
    };
    outcome.unwrap_or_else(|error| {
        eprintln!("memcache-ratelimit: {error}");
        ExitCode::from(2)
    })
}
