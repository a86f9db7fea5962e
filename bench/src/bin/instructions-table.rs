//! The tables of the instruction-count benchmark: instructions per
//! decision of every algorithm, on the embedded store and on memcached's
//! client side, one hot client and 100,000 clients, then the memory reads
//! and writes its simulated last-level cache missed, read from the
//! summaries `cargo bench --bench instructions -- --save-summary=json`
//! leaves. `scripts/bench-instructions` runs both.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use memcache_ratelimit_bench::algorithm::Case;
use memcache_ratelimit_bench::instructions::TRACE;

#[derive(Parser, Debug)]
#[command(
    name = "instructions-table",
    about = "Instructions per decision, from the instruction-count benchmark's saved summaries"
)]
struct Args {
    /// Where gungraun saved the benchmark's results.
    #[arg(
        long,
        default_value = "target/gungraun/memcache-ratelimit-bench/instructions/harness/traces"
    )]
    dir: PathBuf,
}

/// The table's columns: the benchmark ids' prefixes, and their headings.
const COLUMNS: [(&str, &str); 4] = [
    ("embedded_hot", "embedded, one hot client"),
    ("embedded_many", "embedded, 100,000 clients"),
    ("memcached_hot", "memcached client side, one hot client"),
    ("memcached_many", "memcached client side, 100,000 clients"),
];

/// The figures each table gives: callgrind's event (as gungraun names it),
/// and the table's title.
const TABLES: [(&str, &str); 2] = [
    ("Ir", "Instructions per decision (callgrind's `Ir`"),
    (
        "RamHits",
        "Last-level cache misses per decision (gungraun's `RamHits`, callgrind's `ILmr + DLmr + DLmw` in its fixed cache model",
    ),
];

/// The count of `event` a benchmark's trace took, from its `summary.json`.
fn count(dir: &Path, id: &str, event: &str) -> Result<u64, String> {
    let path = dir.join(format!("decisions.{id}")).join("summary.json");
    let text =
        std::fs::read_to_string(&path).map_err(|error| format!("{}: {error}", path.display()))?;
    let summary: serde_json::Value =
        serde_json::from_str(&text).map_err(|error| format!("{}: {error}", path.display()))?;
    // `Left` alone on a first run; `Both`, this run's and the previous
    // one's, once there was a run to compare with.
    let metrics =
        &summary["profiles"][0]["summaries"]["total"]["summary"]["Callgrind"][event]["metrics"];
    let this_run = match &metrics["Both"] {
        serde_json::Value::Null => &metrics["Left"],
        both => &both[0],
    };
    this_run["Int"]
        .as_u64()
        .ok_or_else(|| format!("{}: no count of {event} in it", path.display()))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mut missing = Vec::new();
    for (event, title) in TABLES {
        println!("{title} for a trace of {TRACE} decisions ÷ {TRACE}; warm-up not counted)\n");
        let heading: Vec<&str> = COLUMNS.iter().map(|(_, title)| *title).collect();
        println!("| case | {} |", heading.join(" | "));
        println!("|---|{}", "---:|".repeat(COLUMNS.len()));
        for (index, case) in Case::ALL.iter().enumerate() {
            let cells: Vec<String> = COLUMNS
                .iter()
                .map(
                    |(prefix, _)| match count(&args.dir, &format!("{prefix}_{index}"), event) {
                        Ok(total) => per_decision(total, event),
                        Err(error) => {
                            missing.push(error);
                            "–".to_owned()
                        }
                    },
                )
                .collect();
            println!("| {} | {} |", case.name(), cells.join(" | "));
        }
        println!();
    }
    if missing.is_empty() {
        return ExitCode::SUCCESS;
    }
    missing.sort();
    missing.dedup();
    for error in &missing {
        eprintln!("instructions-table: {error}");
    }
    eprintln!(
        "instructions-table: {} results missing; run scripts/bench-instructions",
        missing.len()
    );
    ExitCode::FAILURE
}

/// `total` over the trace, per decision: instructions whole, misses to
/// two decimals (a hot client's are well under one).
fn per_decision(total: u64, event: &str) -> String {
    let each = total as f64 / TRACE as f64;
    match event {
        "Ir" => format!("{}", each.round()),
        _ => format!("{each:.2}"),
    }
}
