//! `INFO [section ...]`: the server's counters as Redis lays them out,
//! `# Section` headers and `name:value` lines.

use std::fmt::Write as _;

use bytes::Bytes;

use crate::commands::args::is;
use crate::resp::Reply;
use crate::shared::Shared;
use crate::stats::RATE_COMMANDS;

/// The sections, in order. `loading:0` and `redis_version` are there
/// because client libraries read them on connect (ioredis waits while
/// `loading` is 1).
const SECTIONS: [&str; 5] = ["server", "clients", "stats", "decisions", "store"];

pub fn info(args: &[Bytes], shared: &Shared) -> Reply {
    let wanted = |section: &str| {
        args.len() < 2
            || args[1..]
                .iter()
                .any(|a| is(a, section) || is(a, "all") || is(a, "everything") || is(a, "default"))
    };
    let mut out = String::new();
    for section in SECTIONS {
        if !wanted(section) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let title = section[..1].to_ascii_uppercase() + &section[1..];
        let _ = write!(out, "# {title}\r\n");
        write_section(&mut out, section, shared);
    }
    Reply::Bulk(Bytes::from(out))
}

fn write_section(out: &mut String, section: &str, shared: &Shared) {
    let stats = &shared.stats;
    let mut line = |name: &str, value: &dyn std::fmt::Display| {
        let _ = write!(out, "{name}:{value}\r\n");
    };
    match section {
        "server" => {
            line("server_name", &"memcache-ratelimit");
            line("version", &env!("CARGO_PKG_VERSION"));
            line("redis_version", &"7.2.0");
            line("redis_mode", &"standalone");
            line("process_id", &std::process::id());
            line("tcp_port", &shared.port);
            line("uptime_in_seconds", &shared.started.elapsed().as_secs());
            line("loading", &0);
        }
        "clients" => {
            line("connected_clients", &stats.connected());
            line("maxclients", &shared.config.max_connections);
        }
        "stats" => {
            line(
                "total_connections_received",
                &stats.connections_received.get(),
            );
            line("rejected_connections", &stats.connections_rejected.get());
            line("total_commands_processed", &stats.commands_processed.get());
            line("total_error_replies_protocol", &stats.protocol_errors.get());
            line("auth_failures", &stats.auth_failures.get());
        }
        "decisions" => {
            for name in RATE_COMMANDS {
                if let Some(c) = stats.command(name) {
                    let value = format!(
                        "calls={},allowed={},denied={},read={},errors={}",
                        c.calls.get(),
                        c.allowed.get(),
                        c.denied.get(),
                        c.read.get(),
                        c.errors.get()
                    );
                    line(&format!("decisions_{}", name.replace('.', "_")), &value);
                }
            }
        }
        _ => {
            let limiters = shared.limiters.stats();
            let failures = limiters.failures;
            line("store", &shared.store);
            line("on_failure", &format!("{:?}", shared.config.on_failure));
            line("limiters", &shared.limiters.len());
            line("known_states", &shared.limiters.known_states());
            line("known_states_max", &shared.config.known_states);
            line("store_errors", &failures.store_errors);
            line("store_deadlines", &failures.deadlines);
            line("failures_absorbed", &failures.absorbed);
            line("failures_fallbacks", &failures.fallbacks);
            line("failures_returned", &failures.returned);
            line("state_repaired", &failures.repaired);
            line("cas_retries", &limiters.cas_retries);
            line("cas_known", &limiters.cas_known);
            line("cas_stale", &limiters.cas_stale);
            line("cas_vanished", &limiters.cas_vanished);
            line("sealed_refused", &limiters.sealed_refused);
            if let Some(memcached) = &shared.memcached {
                let pipeline = memcached.pipeline_stats();
                line("store_round_trips", &pipeline.batches);
                line("store_calls_pipelined", &pipeline.jobs);
                line("store_largest_batch", &pipeline.largest_batch);
            }
        }
    }
}
