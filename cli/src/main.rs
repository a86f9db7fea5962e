//! `memcache-ratelimit`: the operator's command line.
//!
//! - `inspect <client> [--json]`: a client's keys in the memcached fleet,
//!   the server holding them, their values and what they mean now: each
//!   bucket's span and count and the estimate for the windows, the tokens
//!   (or log entries) and the next refill for the others;
//! - `check <client>`: one real decision, for scripts (exit status 0
//!   allowed by the store, 1 denied by the store, 2 an error or a decision
//!   the failure policy made because the store failed);
//! - `simulate`: every algorithm against an exact sliding window (the
//!   `simulations` crate);
//! - `bench`: decisions/s and latency against a local memcached (the
//!   `bench` crate);
//! - `serve`: the rate limits over the Redis protocol, for clients in any
//!   language (the `memcache-ratelimit-server` crate).
//!
//! The limiter is configured as a service configures it: `--config FILE`
//! (or `MEMCACHE_RATELIMIT_CONFIG`), the `MEMCACHE_RATELIMIT_*` variables,
//! then the flags below, each overriding the one before; an error in a
//! flag names the flag. Servers are
//! required: without them only `check --embedded` runs, against an
//! in-process store that nothing else shares.

#[global_allocator]
static ALLOCATOR: allocator::Mimalloc = allocator::Mimalloc;

mod allocator;
mod describe;
mod inspect;
mod limiter;
mod report;
mod serve;
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
    /// Show what the store holds for a client, as it stands now, without
    /// counting anything. memcached servers are required; exit status 2
    /// on an error, with the failing server named.
    ///
    /// For the window algorithms, every bucket the next decision reads:
    /// its span (buckets are aligned on unix time), its count, its weight
    /// in the estimate, the key and the server holding it; then the
    /// estimate, what remains and when the window is empty. For the
    /// compare-and-swap algorithms, the key, the value as stored (the
    /// sliding log's bytes in hexadecimal) and, decoded, the tokens (or
    /// the sliding log's entries) now, what remains, the next refill and
    /// when the limit is whole again. A value that does not decode is
    /// shown as stored; the limiter takes it for a new client's.
    ///
    /// With --json, one object. Its fields, stable for scripts (times in
    /// milliseconds; `null` where a field does not apply):
    ///
    /// - client, algorithm (sliding_window, fixed_window, token_bucket,
    ///   gcra, sliding_log, hybrid_quota), parameters (such as
    ///   "SlidingWindow n=4"), quota (such as "100/1m"), limit, period_ms;
    /// - store ("memcached"), servers (array), protocol ("meta" or
    ///   "classic");
    /// - read_at (RFC 3339, UTC), read_at_unix_ms;
    /// - keys: [{key, server, value (null when absent), value_encoding
    ///   ("text", or "hex" for the sliding log)}];
    /// - buckets (windows; null otherwise): [{age (0 for the current
    ///   bucket), key, start (RFC 3339), start_unix_ms, end_unix_ms,
    ///   count, stored (false when the key is absent: it counts 0),
    ///   weight (its share in the estimate)}];
    /// - state (compare-and-swap algorithms; null otherwise): stored
    ///   ("absent", "decoded" or "unreadable"), next_refill_ms (until one
    ///   more request fits; null when full), full_in_ms, and by algorithm:
    ///   token_bucket: capacity, refill_per_second, stored_tokens,
    ///   stored_at_unix_ms, tokens; gcra: burst, emission_interval_ms,
    ///   stored_tat_unix_ms, tokens; sliding_log: stored_entries,
    ///   oldest_unix_ms, newest_unix_ms, in_window; hybrid_quota:
    ///   stored_mode ("bursty" or "smooth"), stored_bucket,
    ///   stored_at_unix_ms, mode, window_end_unix_ms, tokens;
    /// - estimate (windows: the estimated count in the period; null
    ///   otherwise), remaining (what a request now could take),
    ///   reset_after_ms (until the whole limit is available again).
    #[command(verbatim_doc_comment)]
    Inspect {
        #[command(flatten)]
        target: Target,
        /// The client id, as the service passes it to the limiter.
        client: String,
        /// Print one JSON object, with the fields listed above.
        #[arg(long)]
        json: bool,
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
    /// Serve the rate limits over the Redis protocol (RESP), for clients
    /// in any language: Smyte's RL.REDUCE, RL.GET, RL.PREDUCE and RL.PGET,
    /// redis-cell's CL.THROTTLE, and RL.WINDOW, the sliding window. The
    /// buckets live in memcached (--servers), shared by every instance, or
    /// in this process. Stops on SIGTERM or Ctrl-C after answering what it
    /// has read; exit status 0.
    Serve(serve::ServeArgs),
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
        Command::Inspect {
            target,
            client,
            json,
        } => runtime.block_on(report::inspect(&target, client.as_bytes(), json)),
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
        Command::Serve(args) => serve::run(args).map_err(Into::into),
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
