//! `instructions-table` reads gungraun's saved summaries into its two
//! tables, per decision, and says which results are missing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use memcache_ratelimit_bench::instructions::TRACE;

/// A summary as gungraun saves it: `Left` alone on a first run, `Both`
/// (this run's, then the previous one's) once there was one before.
fn summary(instructions: u64, misses: u64, compared: bool) -> String {
    let metric = |count: u64| {
        if compared {
            format!(r#"{{"metrics": {{"Both": [{{"Int": {count}}}, {{"Int": 1}}]}}}}"#)
        } else {
            format!(r#"{{"metrics": {{"Left": {{"Int": {count}}}}}}}"#)
        }
    };
    format!(
        r#"{{"profiles": [{{"summaries": {{"total": {{"summary": {{"Callgrind": {{"Ir": {}, "RamHits": {}}}}}}}}}}}]}}"#,
        metric(instructions),
        metric(misses)
    )
}

fn save(dir: &Path, id: &str, text: &str) {
    let case = dir.join(format!("decisions.{id}"));
    std::fs::create_dir_all(&case).expect("a case directory");
    std::fs::write(case.join("summary.json"), text).expect("a summary");
}

/// An empty directory of this test's own.
fn fresh_dir(test: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("instructions-table-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// `instructions-table --dir <dir> <args>`, its output as text, and the
/// directory removed.
fn table(dir: &Path, args: &[&str]) -> (Output, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_instructions-table"))
        .arg("--dir")
        .arg(dir)
        .args(args)
        .output()
        .expect("instructions-table runs");
    let _ = std::fs::remove_dir_all(dir);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output, stdout, stderr)
}

/// Unix seconds a minute ago: a run that began then.
fn a_minute_ago() -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    (now.as_secs() - 60).to_string()
}

#[test]
fn both_tables_are_read_per_decision_and_missing_results_are_named() {
    let dir = fresh_dir("named");
    let trace = TRACE as u64;
    save(&dir, "embedded_hot_0", &summary(2_126 * trace, 0, false));
    save(
        &dir,
        "embedded_many_0",
        &summary(2_185 * trace, 6_310, true),
    );
    let (output, stdout, stderr) = table(&dir, &[]);
    assert!(
        stdout.contains("| FixedWindow | 2126 | 2185 | – | – |"),
        "{stdout}"
    );
    let misses = 6_310.0 / TRACE as f64;
    assert!(
        stdout.contains(&format!("| FixedWindow | 0.00 | {misses:.2} | – | – |")),
        "{stdout}"
    );
    assert!(stdout.contains("Last-level cache misses per decision"));
    // Every other case of both tables is missing, each named once.
    assert!(!output.status.success());
    assert!(
        stderr.contains("decisions.memcached_hot_0/summary.json"),
        "{stderr}"
    );
    assert!(stderr.contains("38 results missing"), "{stderr}");
}

#[test]
fn a_filtered_run_shows_its_own_results_alone_and_succeeds() {
    let dir = fresh_dir("since");
    let trace = TRACE as u64;
    // Left by an earlier run, an hour ago.
    save(&dir, "embedded_hot_0", &summary(1_000 * trace, 0, false));
    let an_hour_ago = SystemTime::now() - Duration::from_secs(3_600);
    std::fs::File::options()
        .write(true)
        .open(dir.join("decisions.embedded_hot_0/summary.json"))
        .and_then(|file| file.set_modified(an_hour_ago))
        .expect("an old summary");
    // This run's.
    save(&dir, "embedded_many_0", &summary(2_185 * trace, 0, false));
    let (output, stdout, stderr) = table(&dir, &["--since", &a_minute_ago(), "--partial"]);
    assert!(output.status.success(), "{stderr}");
    // The earlier run's count is not mixed into this run's table.
    assert!(
        stdout.contains("| FixedWindow | – | 2185 | – | – |"),
        "{stdout}"
    );
    assert!(
        stderr.contains("1 result from an earlier run left out"),
        "{stderr}"
    );
    assert!(stderr.contains("38 results not run"), "{stderr}");
}

#[test]
fn a_broken_summary_fails_even_a_filtered_run() {
    let dir = fresh_dir("broken");
    save(&dir, "embedded_hot_0", "not json");
    save(&dir, "embedded_many_0", r#"{"profiles": []}"#);
    let (output, stdout, stderr) = table(&dir, &["--since", &a_minute_ago(), "--partial"]);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stdout.contains("| FixedWindow | – | – | – | – |"),
        "{stdout}"
    );
    assert!(
        stderr.contains("decisions.embedded_hot_0/summary.json"),
        "{stderr}"
    );
    assert!(stderr.contains("no count of Ir"), "{stderr}");
    assert!(stderr.contains("38 results not run"), "{stderr}");
}
