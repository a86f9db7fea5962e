//! The tables of the instruction-count benchmark: instructions per
//! decision of every algorithm, on the embedded store and on memcached's
//! client side, one hot client and 100,000 clients, then the memory reads
//! and writes its simulated last-level cache missed, read from the
//! summaries `cargo bench --bench instructions -- --save-summary=json`
//! leaves. `scripts/bench-instructions` runs both.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
    /// Unix seconds when this run began: a summary saved before then is
    /// an earlier run's, perhaps of other code, and is left out of the
    /// tables rather than mixed into them.
    #[arg(long)]
    since: Option<u64>,
    /// A run of some of the cases (a filter): the ones it did not run are
    /// named on stderr, not an error.
    #[arg(long)]
    partial: bool,
}

/// Why a case's figures are not in the tables.
enum Absent {
    /// No summary.
    NotRun(String),
    /// A summary saved before this run began.
    Earlier(String),
    /// A summary that cannot be read, or lacks a count: an error even in
    /// a filtered run.
    Broken(String),
}

/// What kept cases out of the tables, by kind.
#[derive(Default)]
struct Absences {
    not_run: Vec<String>,
    earlier: Vec<String>,
    broken: Vec<String>,
}

impl Absences {
    fn add(&mut self, absent: Absent) {
        match absent {
            Absent::NotRun(error) => self.not_run.push(error),
            Absent::Earlier(error) => self.earlier.push(error),
            Absent::Broken(error) => self.broken.push(error),
        }
    }
}

/// `n results`, or `1 result`.
fn results(n: usize) -> String {
    format!("{n} result{}", if n == 1 { "" } else { "s" })
}

/// The table's columns: the benchmark ids' prefixes, and their headings.
const COLUMNS: [(&str, &str); 4] = [
    ("embedded_hot", "embedded, one hot client"),
    ("embedded_many", "embedded, 100,000 clients"),
    ("memcached_hot", "memcached client side, one hot client"),
    ("memcached_many", "memcached client side, 100,000 clients"),
];

/// A table: callgrind's event (as gungraun names it), the table's title,
/// and the decimals of its figures per decision (a hot client's misses
/// are well under one).
struct Table {
    event: &'static str,
    title: &'static str,
    decimals: usize,
}

const TABLES: [Table; 2] = [
    Table {
        event: "Ir",
        title: "Instructions per decision (callgrind's `Ir`",
        decimals: 0,
    },
    Table {
        event: "RamHits",
        title: "Last-level cache misses per decision (gungraun's `RamHits`, callgrind's `ILmr + DLmr + DLmw` in its fixed cache model",
        decimals: 2,
    },
];

/// A benchmark's saved counts, from its `summary.json`, each read once.
struct Summary {
    path: PathBuf,
    callgrind: serde_json::Value,
}

impl Summary {
    fn read(dir: &Path, id: &str, since: Option<SystemTime>) -> Result<Self, Absent> {
        let path = dir.join(format!("decisions.{id}")).join("summary.json");
        let named = |error: &dyn std::fmt::Display| format!("{}: {error}", path.display());
        let io = |error: std::io::Error| match error.kind() {
            std::io::ErrorKind::NotFound => Absent::NotRun(named(&error)),
            _ => Absent::Broken(named(&error)),
        };
        let saved = std::fs::metadata(&path)
            .and_then(|metadata| metadata.modified())
            .map_err(io)?;
        if since.is_some_and(|since| saved < since) {
            return Err(Absent::Earlier(named(&"saved before this run began")));
        }
        let text = std::fs::read_to_string(&path).map_err(io)?;
        let mut summary: serde_json::Value =
            serde_json::from_str(&text).map_err(|error| Absent::Broken(named(&error)))?;
        // By pointer: indexing a summary of another shape would panic.
        let callgrind = summary
            .pointer_mut("/profiles/0/summaries/total/summary/Callgrind")
            .map(serde_json::Value::take)
            .unwrap_or_default();
        Ok(Self { path, callgrind })
    }

    /// The count of `event` the trace took.
    fn count(&self, event: &str) -> Result<u64, String> {
        // `Left` alone on a first run; `Both`, this run's and the previous
        // one's, once there was a run to compare with.
        let metrics = &self.callgrind[event]["metrics"];
        let this_run = match &metrics["Both"] {
            serde_json::Value::Null => &metrics["Left"],
            both => &both[0],
        };
        this_run["Int"]
            .as_u64()
            .ok_or_else(|| format!("{}: no count of {event} in it", self.path.display()))
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let since = args
        .since
        .map(|secs| UNIX_EPOCH + Duration::from_secs(secs));
    let mut absences = Absences::default();
    // Per case, per column.
    let summaries: Vec<Vec<Option<Summary>>> = (0..Case::ALL.len())
        .map(|index| {
            COLUMNS
                .iter()
                .map(|(prefix, _)| {
                    Summary::read(&args.dir, &format!("{prefix}_{index}"), since)
                        .map_err(|absent| absences.add(absent))
                        .ok()
                })
                .collect()
        })
        .collect();
    for table in &TABLES {
        println!(
            "{} for a trace of {TRACE} decisions ÷ {TRACE}; warm-up not counted)\n",
            table.title
        );
        let heading: Vec<&str> = COLUMNS.iter().map(|(_, title)| *title).collect();
        println!("| case | {} |", heading.join(" | "));
        println!("|---|{}", "---:|".repeat(COLUMNS.len()));
        for (case, row) in Case::ALL.iter().zip(&summaries) {
            let cells: Vec<String> = row
                .iter()
                .map(
                    |summary| match summary.as_ref().map(|s| s.count(table.event)) {
                        Some(Ok(total)) => {
                            format!("{:.*}", table.decimals, total as f64 / TRACE as f64)
                        }
                        Some(Err(error)) => {
                            absences.add(Absent::Broken(error));
                            "–".to_owned()
                        }
                        None => "–".to_owned(),
                    },
                )
                .collect();
            println!("| {} | {} |", case.name(), cells.join(" | "));
        }
        println!();
    }
    let Absences {
        not_run,
        earlier,
        broken,
    } = absences;
    // A filtered run leaves most cases out on purpose: counted, not named.
    // A broken summary is named, and an error, either way.
    if !args.partial {
        for error in not_run.iter().chain(&earlier) {
            eprintln!("instructions-table: {error}");
        }
    }
    for error in &broken {
        eprintln!("instructions-table: {error}");
    }
    if !earlier.is_empty() {
        eprintln!(
            "instructions-table: {} from an earlier run left out",
            results(earlier.len())
        );
    }
    if args.partial && !not_run.is_empty() {
        eprintln!("instructions-table: {} not run", results(not_run.len()));
    }
    let failed = if args.partial {
        broken.len()
    } else {
        not_run.len() + earlier.len() + broken.len()
    };
    if failed == 0 {
        return ExitCode::SUCCESS;
    }
    eprintln!(
        "instructions-table: {} missing; run scripts/bench-instructions",
        results(failed)
    );
    ExitCode::FAILURE
}
