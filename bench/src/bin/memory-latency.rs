//! How long this machine takes to load a cache line that depends on the
//! one before, by the size of the table it is drawn from: the floor under
//! a decision among many clients, whose lookups each fetch a line of a
//! table far larger than the processor's caches. See `bench/README.md`.
//!
//! Each size is a table of 128-byte entries, the size of an embedded
//! store's item, linked in one random cycle; a run follows the cycle, so
//! each load waits for the one before (the classic pointer chase: Ulrich
//! Drepper, "What Every Programmer Should Know About Memory", 2007,
//! <https://people.freebsd.org/~lstewart/articles/cpumemory.pdf>,
//! section 3.3.2).

use std::time::Instant;

use clap::Parser;
use memcache_ratelimit_bench::median;
use memcache_ratelimit_bench::server::place_self;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

#[derive(Parser, Debug)]
#[command(about = "Nanoseconds per dependent load from tables of 128-byte entries, by table size")]
struct Args {
    /// Table sizes in KiB, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "64,256,1024,2048,6250,12500,25000,50000",
        value_parser = clap::value_parser!(u64).range(1..=4_194_304)
    )]
    kib: Vec<u64>,
    /// Dependent loads per run.
    #[arg(long, default_value_t = 4_000_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    loads: u64,
    /// Runs per size; the table reports the median.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=100))]
    runs: u64,
    /// Do not pin the benchmark to one CPU.
    #[arg(long)]
    no_pin: bool,
}

/// One table entry: the index of the next, and the rest of an item's size.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Entry {
    next: usize,
    _rest: [u8; 120],
}

/// A table of `len` entries linked in one random cycle.
fn cycle(len: usize, rng: &mut StdRng) -> Vec<Entry> {
    let mut order: Vec<usize> = (0..len).collect();
    order.shuffle(rng);
    let mut table = vec![
        Entry {
            next: 0,
            _rest: [0; 120],
        };
        len
    ];
    for (at, &from) in order.iter().enumerate() {
        table[from].next = order[(at + 1) % len];
    }
    table
}

/// Nanoseconds per load of `loads` dependent loads along `table`'s cycle.
fn chase(table: &[Entry], loads: u64) -> f64 {
    let mut at = 0;
    let start = Instant::now();
    for _ in 0..loads {
        at = table[at].next;
    }
    let elapsed = start.elapsed();
    std::hint::black_box(at);
    elapsed.as_nanos() as f64 / loads as f64
}

fn main() {
    let args = Args::parse();
    let placement = place_self(args.no_pin);
    println!("# Dependent loads by table size\n");
    println!("- placement: {placement}");
    println!(
        "- {} dependent loads a run, {} runs a size, 128-byte entries in one random cycle\n",
        args.loads, args.runs
    );
    println!("| table | entries | ns per load (median) | runs |");
    println!("|---:|---:|---:|---|");
    let mut rng = StdRng::seed_from_u64(42);
    for &kib in &args.kib {
        let len = usize::try_from(kib * 1024 / 128)
            .unwrap_or(usize::MAX)
            .max(2);
        let table = cycle(len, &mut rng);
        // One pass first, so every run finds the table as the last left it.
        chase(&table, len as u64);
        let runs: Vec<f64> = (0..args.runs).map(|_| chase(&table, args.loads)).collect();
        let shown: Vec<String> = runs.iter().map(|ns| format!("{ns:.1}")).collect();
        println!(
            "| {kib} KiB | {len} | {:.1} | {} |",
            median(runs),
            shown.join(", ")
        );
    }
}
