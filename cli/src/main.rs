//! `memcache-ratelimit`: the operator's command line.
//!
//! - `inspect <client>`: a client's keys in the memcached fleet, the server
//!   holding them, their values, and the current estimate;
//! - `check <client>`: one real decision, for scripts (exit status 0
//!   allowed by the store, 1 denied by the store, 2 an error or a decision
//!   the failure policy made because the store failed);
//! - `simulate`: every algorithm against an exact sliding window (the
//!   `simulations` crate);
//! - `bench`: decisions/s and latency against a local memcached (the
//!   `bench` crate).
//!
//! The limiter is configured as a service configures it: `--config FILE`
//! (or `MEMCACHE_RATELIMIT_CONFIG`), the `MEMCACHE_RATELIMIT_*` variables,
//! then the flags below, each overriding the one before. Servers are
//! required: without them only `check --embedded` runs, against an
//! in-process store that nothing else shares.

mod describe;
mod limiter;
mod report;
mod watch;

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
    /// current estimate, without counting anything. memcached servers are
    /// required; exit status 2 on an error, with the failing server named.
    Inspect {
        #[command(flatten)]
        target: Target,
        /// The client id, as the service passes it to the limiter.
        client: String,
    },
    /// Make one real decision for a client, and say which store made it.
    ///
    /// Exit status: 0 allowed by the store, 1 denied by the store, 2 an
    /// error (the failing server named) or a decision made by the failure
    /// policy because the store failed (the policy named): nothing was
    /// checked then. memcached servers are required (--servers, `servers`
    /// in the --config file, or MEMCACHE_RATELIMIT_SERVERS), unless
    /// --embedded is given.
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
        /// Without servers, decide against an embedded in-process store:
        /// nothing is shared with any service, so this checks only the
        /// configuration (the output says `store=embedded`).
        #[arg(long)]
        embedded: bool,
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
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("memcache-ratelimit: cannot start the async runtime: {error}");
            return ExitCode::from(2);
        }
    };
    let outcome = match cli.command {
        Command::Inspect { target, client } => {
            runtime.block_on(report::inspect(&target, client.as_bytes()))
        }
        Command::Check {
            target,
            client,
            cost,
            json,
            embedded,
        } => runtime.block_on(report::check(
            &target,
            client.as_bytes(),
            cost,
            json,
            embedded,
        )),
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
