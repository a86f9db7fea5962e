//! Runs every algorithm of `memcache-ratelimit` on every workload, judges
//! each decision against an exact sliding window, and writes the results:
//! a markdown table per workload and one comparing the in-process caches
//! on stdout, CSV files and SVG figures. See
//! `simulations/README.md` for the workloads and the exact definition of
//! each metric.
//!
//! `cargo run --release -p simulations [-- --seed N --quick --out DIR --figures DIR --overwrite]`,
//! or the operator CLI's `simulate`.
//!
//! Everything is written under `target/simulations/` (relative to the
//! current directory) unless `--out` and `--figures` say otherwise, and
//! never into a directory holding files tracked by git, such as the
//! committed `docs/figures`, unless `--overwrite` is given:
//! `--figures docs/figures --overwrite` regenerates the committed
//! figures.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};

use crate::algorithms;
use crate::workload::{self, Scale};
use crate::{estimators, figures, generated, report, suite};

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
    /// Where the CSV files go (created if need be).
    #[arg(long, default_value = "target/simulations/out")]
    out: PathBuf,
    /// Where the SVG figures go (created if need be);
    /// `--figures docs/figures --overwrite` regenerates the
    /// committed figures.
    #[arg(long, default_value = "target/simulations/figures")]
    figures: PathBuf,
    /// Write into --out and --figures even if they hold files tracked by
    /// git (without it, such a directory is refused before anything runs).
    #[arg(long)]
    overwrite: bool,
    /// Threads running jobs in parallel (default: the available cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Only the sliding window's estimators side by side (uniform,
    /// moment), at 1, 4, 12 and 60 sub-windows on every workload: a
    /// table on stdout and `estimators.md` in --out.
    #[arg(long)]
    estimators: bool,
}

/// Runs every simulation as `args` say: tables on stdout, CSV files and
/// figures written, progress on stderr.
pub fn run(args: Args) -> Result<(), Box<dyn Error>> {
    let began = Instant::now();
    if !args.overwrite {
        for (flag, dir) in [("--out", &args.out), ("--figures", &args.figures)] {
            refuse_tracked(flag, dir)?;
        }
    }
    let scale = if args.quick {
        Scale::QUICK
    } else {
        Scale::FULL
    };
    let main = workload::all(args.seed, scale);
    let main_count = main.len();
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    // The main workloads, then the estimators' populations: the main
    // suite's sliding windows are the estimators' uniform runs on the
    // first ones, so only the full comparison alone runs them itself.
    let estimated = estimators::workloads(main, args.seed, args.quick);
    let workloads = &estimated[..main_count];
    let run_already = if args.estimators { 0 } else { main_count };
    let estimator_jobs = estimators::jobs(&estimated, run_already);
    let estimator_total: u64 = estimator_jobs
        .iter()
        .map(|job| estimated[job.0].requests.len() as u64)
        .sum();
    let bar = ProgressBar::new(estimator_total).with_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {percent:>3}% {human_pos}/{human_len} decisions, ETA {eta}",
        )?
        .progress_chars("=> "),
    );
    let heading = |what: &str| {
        format!(
            "# memcache-ratelimit simulations{what}\n\nSeed {}, {} run, quota {} for every client",
            args.seed,
            if args.quick { "quick" } else { "full" },
            workload::QUOTA,
        )
    };
    if args.estimators {
        let rows = estimators::run(&estimated, &estimator_jobs, threads, &|n| bar.inc(n))
            .map_err(|e| e as Box<dyn Error>)?;
        bar.finish_and_clear();
        let table = format!(
            "{}.\n\n{}",
            heading(": the sliding window's estimators"),
            estimators::markdown(&estimated, &rows)
        );
        print!("{table}");
        std::fs::create_dir_all(&args.out)?;
        let path = args.out.join("estimators.md");
        std::fs::write(&path, &table)?;
        let figures = write_estimators(&args, &estimated, &rows)?;
        eprintln!(
            "Wrote {} and {} figures to {} in {:.1} s on {threads} threads.",
            path.display(),
            figures.len(),
            args.figures.display(),
            began.elapsed().as_secs_f64()
        );
        return Ok(());
    }
    let main_jobs = suite::jobs(workloads, &algorithms::all());
    let caches_jobs = suite::caches_jobs(workloads);
    let jobs = suite::merge(main_jobs.clone(), &caches_jobs);
    let decisions = |jobs: &[suite::Job]| -> u64 {
        jobs.iter()
            .map(|job| workloads[job.workload].requests.len() as u64)
            .sum()
    };
    let total = decisions(&jobs);
    let main_total = decisions(&main_jobs);
    bar.set_length(total + estimator_total);
    let rows =
        suite::run(workloads, &jobs, threads, &|n| bar.inc(n)).map_err(|e| e as Box<dyn Error>)?;
    let mut estimator_rows = estimators::from_suite(&rows);
    estimator_rows.extend(
        estimators::run(&estimated, &estimator_jobs, threads, &|n| bar.inc(n))
            .map_err(|e| e as Box<dyn Error>)?,
    );
    bar.finish_and_clear();

    let mut results = format!(
        "{}, {} decisions over {} workloads × {} algorithms × 2 modes (denied requests refunded, then counted), {} more for the caches comparison ({} runs), and {} more for the sliding window's estimators ({} runs, beside the main runs of the uniform rule).\n\n",
        heading(""),
        main_total,
        workloads.len(),
        algorithms::all().len(),
        total - main_total,
        jobs.len() - main_jobs.len(),
        estimator_total,
        estimator_jobs.len(),
    );
    results.push_str(&report::markdown(workloads, &rows));
    results.push_str(&report::caches_markdown(workloads, &rows));
    results.push_str(&estimators::markdown(&estimated, &estimator_rows));
    print!("{results}");
    report::write_csv(&args.out, workloads, &rows)?;
    generated::write_all(&args.out, &results, workloads, &rows)?;
    let mut written = figures::write_all(&args.figures, workloads, &rows)?;
    written.extend(write_estimators(&args, &estimated, &estimator_rows)?);
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

/// The estimators comparison's summary table (`estimators-table.md` in
/// --out) and its figures; returns the figures' paths.
fn write_estimators(
    args: &Args,
    workloads: &[workload::Workload],
    rows: &[estimators::Row],
) -> Result<Vec<PathBuf>, Box<dyn Error>> {
    std::fs::create_dir_all(&args.out)?;
    if let Some(summary) = estimators::summary(workloads, rows) {
        std::fs::write(args.out.join("estimators-table.md"), summary)?;
    }
    estimators::figures(&args.figures, workloads, rows)
}

/// An error if `dir` holds files tracked by git: the run would write over
/// committed files.
fn refuse_tracked(flag: &str, dir: &Path) -> Result<(), Box<dyn Error>> {
    let tracked = tracked_files(dir);
    let Some(first) = tracked.first() else {
        return Ok(());
    };
    let more = match tracked.len() {
        1 => String::new(),
        n => format!(" and {} more", n - 1),
    };
    Err(format!(
        "{flag} {}: the directory holds files tracked by git ({first}{more}), which this run \
         would overwrite; give --overwrite to regenerate them, or another directory \
         (the default is under target/simulations/)",
        dir.display()
    )
    .into())
}

/// The files under `dir` that git tracks, as git names them; none when
/// `dir` is in no git work tree or git cannot be run. A directory not
/// created yet is asked about from its nearest existing ancestor, so
/// tracked files deleted from the work tree count too.
pub fn tracked_files(dir: &Path) -> Vec<String> {
    let mut base = dir;
    let mut rest = Vec::new();
    while !base.is_dir() {
        match (base.parent(), base.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                base = parent;
            }
            _ => return Vec::new(),
        }
    }
    let base = if base.as_os_str().is_empty() {
        Path::new(".")
    } else {
        base
    };
    let pathspec: PathBuf = rest.iter().rev().collect();
    let pathspec = if pathspec.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        pathspec
    };
    let output = Command::new("git")
        .arg("-C")
        .arg(base)
        .args(["ls-files", "-z", "--"])
        .arg(&pathspec)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    match output {
        Ok(output) if output.status.success() => output
            .stdout
            .split(|&byte| byte == 0)
            .filter(|name| !name.is_empty())
            .map(|name| String::from_utf8_lossy(name).into_owned())
            .collect(),
        _ => Vec::new(),
    }
}
