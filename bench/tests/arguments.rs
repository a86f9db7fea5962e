//! Bad arguments to every benchmark program get clap's error and exit
//! code 2 before anything starts, never a panic.

use std::process::Command;

/// Runs `program` with `args`; its exit code and standard error.
fn run(program: &str, args: &[&str]) -> (Option<i32>, String) {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} did not start: {e}"));
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn refused(program: &str, args: &[&str], says: &str) {
    let (code, stderr) = run(program, args);
    assert_eq!(code, Some(2), "{program} {args:?}: {stderr}");
    assert!(
        stderr.starts_with("error: ") && stderr.contains(says) && !stderr.contains("panicked"),
        "{program} {args:?}: {stderr}"
    );
}

#[test]
fn the_matrix_refuses_counts_and_lengths_out_of_range_and_an_empty_selection() {
    let matrix = env!("CARGO_BIN_EXE_memcache-ratelimit-bench");
    refused(matrix, &["--runs", "0"], "at least 1");
    refused(matrix, &["--seconds", "0"], "more than 0");
    refused(matrix, &["--seconds", "NaN"], "more than 0");
    refused(matrix, &["--seconds", "soon"], "not a number of seconds");
    refused(matrix, &["--in-flight", "64,0"], "at least 1");
    refused(matrix, &["--in-flight", "64,many"], "not a whole number");
    refused(matrix, &["--in-flight", "99999999999"], "at most");
    refused(matrix, &["--only", "no such case"], "matches no case");
    refused(matrix, &["--mode", "warm"], "invalid value");
}

#[test]
fn the_other_programs_refuse_them_too() {
    let in_process = env!("CARGO_BIN_EXE_in-process");
    refused(in_process, &["--runs", "0"], "at least 1");
    refused(in_process, &["--only", "no such case"], "matches no case");
    // governor runs whatever the selection: naming it alone selects none.
    refused(in_process, &["--only", "governor"], "matches no case");
    let at_one = env!("CARGO_BIN_EXE_latency-at-one");
    refused(at_one, &["--runs", "0"], "at least 1");
    refused(at_one, &["--seconds", "0"], "more than 0");
    refused(at_one, &["--only", "no such case"], "matches no case");
    refused(at_one, &["--mode", "warm"], "invalid value");
    refused(at_one, &["--visit-reads", "0"], "not in 1..=100");
    refused(at_one, &["--visit-reads", "101"], "not in 1..=100");
    let cas = env!("CARGO_BIN_EXE_cas-contention");
    refused(cas, &["--in-flight", "0"], "at least 1");
    refused(cas, &["--processes", "1000"], "at most 64");
    refused(cas, &["--admission-seconds=-1"], "more than 0");
    let web = env!("CARGO_BIN_EXE_web-service");
    refused(
        web,
        &["--variant", "layer", "--case", "no such case"],
        "matches no case",
    );
    refused(web, &["--variant", "increment"], "--memcached");
    refused(
        web,
        &["--variant", "layer", "--key", "cookie"],
        "invalid value",
    );
    let protocols = env!("CARGO_BIN_EXE_protocols");
    refused(protocols, &["--in-flight", "0"], "at least 1");
    let memory = env!("CARGO_BIN_EXE_memory-latency");
    refused(memory, &["--kib", "0"], "not in 1..=4194304");
    refused(memory, &["--kib", "64,big"], "invalid value");
    refused(memory, &["--runs", "0"], "not in 1..=100");
    refused(memory, &["--loads", "0"], "not in 1..=1000000000");
    let soak = env!("CARGO_BIN_EXE_soak");
    refused(soak, &["--seconds", "0"], "invalid value");
    refused(soak, &["--clients", "0"], "invalid value");
}
