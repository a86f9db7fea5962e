//! Runs every algorithm of `memcache-ratelimit` on every workload, judges
//! each decision against an exact sliding window, and writes the results:
//! a markdown table per workload and one comparing the in-process caches
//! on stdout, CSV files and SVG figures. See
//! `simulations/README.md` for the workloads and the exact definition of
//! each metric.
//!
//! `cargo run --release -p simulations [-- --seed N --quick --out DIR --figures DIR]`,
//! or the operator CLI's `simulate`.

use std::error::Error;
use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};

use crate::algorithms;
use crate::workload::{self, Scale};
use crate::{figures, report, suite};

/// Measure every rate-limiting algorithm against an exact sliding window.
#[derive(Debug, Parser)]
#[command(version, about)]
pub struct Args {
    /// Seed of every random workload.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A smaller run: fewer clients and shorter workloads.
    #[arg(long)]
    quick: bool,
    /// Where the CSV files go.
    #[arg(long, default_value = "simulations/out")]
    out: PathBuf,
    /// Where the SVG figures go.
    #[arg(long, default_value = "simulations/figures")]
    figures: PathBuf,
    /// Threads running jobs in parallel (default: the available cores).
    #[arg(long)]
    threads: Option<usize>,
}

/// Runs every simulation as `args` say: tables on stdout, CSV files and
/// figures written, progress on stderr.
pub fn run(args: Args) -> Result<(), Box<dyn Error>> {
    let began = Instant::now();
    let scale = if args.quick {
        Scale::QUICK
    } else {
        Scale::FULL
    };
    let workloads = workload::all(args.seed, scale);
    let main_jobs = suite::jobs(&workloads, &algorithms::all());
    let caches_jobs = suite::caches_jobs(&workloads);
    let jobs = suite::merge(main_jobs.clone(), &caches_jobs);
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let decisions = |jobs: &[suite::Job]| -> u64 {
        jobs.iter()
            .map(|job| workloads[job.workload].requests.len() as u64)
            .sum()
    };
    let total = decisions(&jobs);
    let main_total = decisions(&main_jobs);

    let bar = ProgressBar::new(total).with_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {percent:>3}% {human_pos}/{human_len} decisions, ETA {eta}",
        )?
        .progress_chars("=> "),
    );
    let rows =
        suite::run(&workloads, &jobs, threads, &|n| bar.inc(n)).map_err(|e| e as Box<dyn Error>)?;
    bar.finish_and_clear();

    println!(
        "# memcache-ratelimit simulations\n\nSeed {}, {} run, quota {} for every client, {} decisions over {} workloads × {} algorithms, and {} more for the caches comparison ({} runs).\n",
        args.seed,
        if args.quick { "quick" } else { "full" },
        workload::QUOTA,
        main_total,
        workloads.len(),
        algorithms::all().len(),
        total - main_total,
        jobs.len() - main_jobs.len(),
    );
    print!("{}", report::markdown(&workloads, &rows));
    print!("{}", report::caches_markdown(&workloads, &rows));
    report::write_csv(&args.out, &workloads, &rows)?;
    let written = figures::write_all(&args.figures, &workloads, &rows)?;
    eprintln!(
        "Wrote {}, {} and {} figures to {} in {:.1} s on {threads} threads.",
        args.out.join("results.csv").display(),
        args.out.join("caches.csv").display(),
        written.len(),
        args.figures.display(),
        began.elapsed().as_secs_f64()
    );
    Ok(())
}
