//! `instructions-table` reads gungraun's saved summaries into its two
//! tables, per decision, and says which results are missing.

use std::path::Path;
use std::process::Command;

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

#[test]
fn both_tables_are_read_per_decision_and_missing_results_are_named() {
    let dir = std::env::temp_dir().join(format!("instructions-table-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let trace = TRACE as u64;
    save(&dir, "embedded_hot_0", &summary(2_126 * trace, 0, false));
    save(
        &dir,
        "embedded_many_0",
        &summary(2_185 * trace, 6_310, true),
    );
    let output = Command::new(env!("CARGO_BIN_EXE_instructions-table"))
        .arg("--dir")
        .arg(&dir)
        .output()
        .expect("instructions-table runs");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
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
    let dir = std::env::temp_dir().join(format!("instructions-table-since-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let trace = TRACE as u64;
    // Left by an earlier run, an hour ago.
    save(&dir, "embedded_hot_0", &summary(1_000 * trace, 0, false));
    let an_hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3_600);
    std::fs::File::options()
        .write(true)
        .open(dir.join("decisions.embedded_hot_0/summary.json"))
        .and_then(|file| file.set_modified(an_hour_ago))
        .expect("an old summary");
    // This run's.
    save(&dir, "embedded_many_0", &summary(2_185 * trace, 0, false));
    let run_began = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 60;
    let output = Command::new(env!("CARGO_BIN_EXE_instructions-table"))
        .arg("--dir")
        .arg(&dir)
        .args(["--since", &run_began.to_string(), "--partial"])
        .output()
        .expect("instructions-table runs");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
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
