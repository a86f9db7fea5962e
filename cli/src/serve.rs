//! `serve`: the RESP server (the `memcache-ratelimit-server` crate), on
//! the embedded store or a memcached fleet.

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use memcache_ratelimit::limiter::FailurePolicy;
use memcache_ratelimit::store::{Protocol, DEFAULT_PIPELINE_BATCH, DEFAULT_PIPELINE_DEPTH};
use memcache_ratelimit_server::resp::Limits;
use memcache_ratelimit_server::{
    Server, ServerConfig, StoreChoice, DEFAULT_KNOWN_STATES, DEFAULT_LIMITS, DEFAULT_LISTEN,
};

/// How to serve.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// host:port to listen on. Loopback by default: listening elsewhere
    /// is a choice to make explicitly.
    #[arg(long, default_value = DEFAULT_LISTEN)]
    listen: String,
    /// memcached servers, comma separated (host:port,...); without them
    /// the buckets live in this process alone (the embedded store).
    #[arg(long)]
    servers: Option<String>,
    /// The protocol spoken to memcached: meta, or classic (through
    /// twemproxy, for example).
    #[arg(long, default_value = "meta")]
    protocol: String,
    /// Pipelined batches in flight per memcached server at once (meta
    /// protocol). memcached serves each connection on one of its worker
    /// threads, so match its -t: more batches than it has threads add only
    /// smaller batches.
    #[arg(long, default_value_t = DEFAULT_PIPELINE_DEPTH)]
    pipeline_depth: usize,
    /// The most memcached operations one pipelined batch carries; bigger
    /// batches cost fewer system calls and context switches, on both sides.
    #[arg(long, default_value_t = DEFAULT_PIPELINE_BATCH)]
    pipeline_batch: usize,
    /// The password clients must give with AUTH or HELLO; better given in
    /// the environment than on a command line others can read.
    #[arg(long, env = "MEMCACHE_RATELIMIT_REQUIREPASS", hide_env_values = true)]
    requirepass: Option<String>,
    /// What a decision does when the store fails: open (allow), closed
    /// (deny) or error (reply an error).
    #[arg(long, default_value = "open")]
    on_failure: String,
    /// The most connections open at once.
    #[arg(long, default_value_t = 10_000)]
    max_connections: usize,
    /// The most arguments in one command.
    #[arg(long, default_value_t = DEFAULT_LIMITS.max_args)]
    max_args: usize,
    /// The longest argument, in bytes.
    #[arg(long, default_value_t = DEFAULT_LIMITS.max_bulk)]
    max_bulk: usize,
    /// The longest inline command (a line of text), in bytes.
    #[arg(long, default_value_t = DEFAULT_LIMITS.max_inline)]
    max_inline: usize,
    /// Serve Prometheus metrics over HTTP on this host:port (decisions by
    /// command and outcome, their latency, store failures).
    #[arg(long)]
    metrics: Option<String>,
    /// The most keys whose bucket state the server remembers, for all
    /// parameter sets together (about 180 bytes a key), so that an
    /// allowed decision on a bucket it wrote last is one memcached write,
    /// without a read first; 0 remembers none (every decision reads). The
    /// embedded store decides in place and needs none.
    #[arg(long, default_value_t = DEFAULT_KNOWN_STATES)]
    known_states: usize,
    /// Worker threads; the number of cores by default. With 1, one thread
    /// serves everything.
    #[arg(long)]
    threads: Option<usize>,
}

/// The configuration `args` describe; an error names the flag.
fn config(args: ServeArgs) -> Result<(ServerConfig, Option<usize>), String> {
    let protocol = match args.protocol.as_str() {
        "meta" => Protocol::Meta,
        "classic" => Protocol::Classic,
        other => {
            return Err(format!(
                "--protocol: {other:?}: is not one of meta, classic"
            ))
        }
    };
    let store = match &args.servers {
        None => StoreChoice::Embedded,
        Some(list) => {
            let servers: Vec<String> = list.split(',').map(|s| s.trim().to_owned()).collect();
            if let Some(bad) = servers.iter().find(|s| {
                s.rsplit_once(':')
                    .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
            }) {
                return Err(format!("--servers: {bad:?}: is not host:port"));
            }
            StoreChoice::Memcached {
                servers,
                protocol,
                pipeline_depth: args.pipeline_depth,
                pipeline_batch: args.pipeline_batch,
            }
        }
    };
    let on_failure = match args.on_failure.as_str() {
        "open" => FailurePolicy::Open,
        "closed" => FailurePolicy::Closed,
        "error" => FailurePolicy::ReturnError,
        other => {
            return Err(format!(
                "--on-failure: {other:?}: is not one of open, closed, error"
            ))
        }
    };
    for (flag, value) in [
        ("--max-connections", args.max_connections),
        ("--max-args", args.max_args),
        ("--max-bulk", args.max_bulk),
        ("--max-inline", args.max_inline),
        ("--pipeline-depth", args.pipeline_depth),
        ("--pipeline-batch", args.pipeline_batch),
    ] {
        if value == 0 {
            return Err(format!("{flag}: must be at least 1"));
        }
    }
    if let Some(address) = &args.metrics {
        if address.parse::<std::net::SocketAddr>().is_err() {
            return Err(format!("--metrics: {address:?}: is not an ip:port"));
        }
    }
    if args.threads == Some(0) {
        return Err("--threads: must be at least 1".to_owned());
    }
    let config = ServerConfig {
        listen: args.listen,
        store,
        requirepass: args.requirepass.filter(|p| !p.is_empty()),
        limits: Limits {
            max_args: args.max_args,
            max_bulk: args.max_bulk,
            max_inline: args.max_inline,
        },
        max_connections: args.max_connections,
        on_failure,
        metrics: args.metrics,
        shutdown_grace: Duration::from_secs(10),
        known_states: args.known_states,
    };
    Ok((config, args.threads))
}

/// Serves until SIGTERM or Ctrl-C; exit status 0 after a clean stop, 2 if
/// the server could not start.
pub fn run(args: ServeArgs) -> Result<ExitCode, String> {
    let (config, threads) = config(args)?;
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::INFO)
        .try_init();
    // One thread: tokio's current-thread scheduler, which runs every task
    // on the thread that serves, with no work-stealing machinery between.
    let mut runtime = match threads {
        Some(1) => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    };
    if let Some(threads) = threads.filter(|&threads| threads > 1) {
        runtime.worker_threads(threads);
    }
    let runtime = runtime
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start the async runtime: {error}"))?;
    runtime.block_on(async {
        let server = Server::bind(config).await.map_err(|e| e.to_string())?;
        let address = server.local_addr().map_err(|e| e.to_string())?;
        tracing::info!(%address, "serving RESP");
        server.run().await.map_err(|e| e.to_string())?;
        tracing::info!("stopped");
        Ok(ExitCode::SUCCESS)
    })
}
