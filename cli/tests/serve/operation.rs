//! The server under load and faults: the connection limit, a store that
//! goes down (the library's failure policy decides, and `INFO` shows it),
//! and pipelined commands batched into few memcached round trips.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use memcache_ratelimit_testkit::Memcached;

use crate::process::Served;
use crate::redis_cli::session;

/// The `name:value` field of `INFO`, as a number.
fn info_field(served: &Served, name: &str) -> u64 {
    let info = session(served, &[], &["INFO"]);
    info.iter()
        .find_map(|line| line.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("{name} in {info:?}"))
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{name} in {info:?}"))
}

#[test]
fn one_connection_too_many_is_told_so() {
    let served = Served::start(&["--max-connections", "1"]);
    let mut first = BufReader::new(TcpStream::connect(&served.address).unwrap());
    first.get_mut().write_all(b"PING\r\n").unwrap();
    let mut pong = String::new();
    first.read_line(&mut pong).unwrap();
    assert_eq!(pong, "+PONG\r\n");
    let mut second = TcpStream::connect(&served.address).unwrap();
    second
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut refused = String::new();
    second.read_to_string(&mut refused).unwrap();
    assert_eq!(refused, "-ERR max number of clients reached\r\n");
    drop(first);
    // Once the first has gone, a new one is served.
    let mut served_again = None;
    for _ in 0..100 {
        let mut third = BufReader::new(TcpStream::connect(&served.address).unwrap());
        third.get_mut().write_all(b"PING\r\n").unwrap();
        let mut line = String::new();
        third.read_line(&mut line).unwrap();
        if line == "+PONG\r\n" {
            served_again = Some(third);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let third = served_again.expect("a connection is served once the first has closed");
    drop(third);
    assert!(info_field(&served, "rejected_connections") >= 1);
}

#[test]
fn a_store_that_goes_down_is_decided_by_the_failure_policy_and_counted() {
    let mut memcached = Memcached::start();
    let closed = Served::start(&["--servers", &memcached.address(), "--on-failure", "closed"]);
    let errors = Served::start(&["--servers", &memcached.address(), "--on-failure", "error"]);
    assert_eq!(session(&closed, &[], &["RL.REDUCE k 5 60"]), ["5"]);
    memcached.kill();
    // Closed: denied, so no token is reported available.
    assert_eq!(session(&closed, &[], &["RL.REDUCE k 5 60"]), ["0"]);
    let window = session(&closed, &[], &["RL.WINDOW k 5 60"]);
    assert_eq!(window[0], "0", "{window:?}");
    assert!(info_field(&closed, "failures_absorbed") >= 2);
    assert!(info_field(&closed, "store_errors") >= 2);
    // Error: the client is told.
    let told = session(&errors, &[], &["RL.REDUCE k 5 60"]);
    assert!(told[0].starts_with("ERR "), "{told:?}");
    assert!(info_field(&errors, "failures_returned") >= 1);
    memcached.restart();
    let mut back = Vec::new();
    for _ in 0..100 {
        back = session(&closed, &[], &["RL.REDUCE k2 5 60"]);
        if back == ["5"] {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(back, ["5"], "decided by the store again once it is back");
}

/// 256 commands on as many buckets in one write: the server runs them
/// side by side, and the library's pipeline sends their memcached calls
/// in a few round trips, not one each.
#[test]
fn pipelined_commands_share_memcached_round_trips() {
    let memcached = Memcached::start();
    let served = Served::start(&["--servers", &memcached.address()]);
    let before = info_field(&served, "store_round_trips");
    let commands = 256;
    let mut input = String::new();
    for i in 0..commands {
        input.push_str(&format!("RL.PREDUCE bucket-{i} 5 60000\r\n"));
    }
    let mut stream = BufReader::new(TcpStream::connect(&served.address).unwrap());
    let mut send = |expected: &str| {
        stream.get_mut().write_all(input.as_bytes()).unwrap();
        for _ in 0..commands {
            let mut line = String::new();
            stream.read_line(&mut line).unwrap();
            assert_eq!(line, expected);
        }
    };
    send(":5\r\n");
    let trips = info_field(&served, "store_round_trips") - before;
    let largest = info_field(&served, "store_largest_batch");
    // Each command is a read and a compare-and-swap write: 512 store calls,
    // which took 11 to 28 round trips in runs on an idle machine and 143
    // once in a full test run on a loaded one. Without sharing, 512.
    assert!(
        trips <= commands,
        "{trips} round trips for {commands} commands (largest batch {largest})"
    );
    assert!(largest >= 8, "largest batch {largest}");
    // The same buckets again: the server wrote each last and knows its
    // version, so each command is one compare-and-swap write, no read.
    let calls = info_field(&served, "store_calls_pipelined");
    send(":4\r\n");
    assert_eq!(
        info_field(&served, "store_calls_pipelined") - calls,
        commands
    );
    assert_eq!(info_field(&served, "cas_known"), commands);
    assert_eq!(info_field(&served, "cas_stale"), 0);
    assert_eq!(info_field(&served, "cas_vanished"), 0);
    assert_eq!(info_field(&served, "sealed_refused"), 0);
}

/// `--known-states` bounds the bucket states the server remembers, for
/// all its limiters together: past the bound a decision reads first, and
/// with 0 every decision reads.
#[test]
fn the_known_states_stay_within_their_bound() {
    let memcached = Memcached::start();
    let bounded = Served::start(&["--servers", &memcached.address(), "--known-states", "64"]);
    let none = Served::start(&["--servers", &memcached.address(), "--known-states", "0"]);
    let buckets = 1_000;
    let decide_all = |served: &Served, period: u32| {
        let mut stream = BufReader::new(TcpStream::connect(&served.address).unwrap());
        let mut input = String::new();
        for i in 0..buckets {
            input.push_str(&format!("RL.PREDUCE bucket-{i} 5 {period}\r\n"));
        }
        stream.get_mut().write_all(input.as_bytes()).unwrap();
        for _ in 0..buckets {
            let mut line = String::new();
            stream.read_line(&mut line).unwrap();
            assert_eq!(line, ":5\r\n");
        }
    };
    // Two parameter sets: two limiters sharing the one bound.
    decide_all(&bounded, 60_000);
    decide_all(&bounded, 30_000);
    let known = info_field(&bounded, "known_states");
    assert_eq!(info_field(&bounded, "known_states_max"), 64);
    // The bound, plus at most two keys per shard (16) of each limiter.
    assert!((1..=64 + 2 * 2 * 16).contains(&known), "{known} known");
    decide_all(&none, 20_000);
    assert_eq!(info_field(&none, "known_states"), 0);
    assert_eq!(info_field(&none, "cas_known"), 0);
}

/// `--pipeline-depth` and `--pipeline-batch` shape the memcached batches:
/// with one batch in flight and room for 1,024 operations, the calls of 256
/// pipelined commands share batches of more than the default's 128,
/// and the answers are the same. Settings that cannot work are refused at
/// start.
#[test]
fn the_memcached_batches_follow_the_pipeline_flags() {
    let memcached = Memcached::start();
    let served = Served::start(&[
        "--servers",
        &memcached.address(),
        "--pipeline-depth",
        "1",
        "--pipeline-batch",
        "1024",
    ]);
    let commands = 256;
    let mut input = String::new();
    for i in 0..commands {
        input.push_str(&format!("RL.PREDUCE bucket-{i} 5 60000\r\n"));
    }
    let mut stream = BufReader::new(TcpStream::connect(&served.address).unwrap());
    stream.get_mut().write_all(input.as_bytes()).unwrap();
    for _ in 0..commands {
        let mut line = String::new();
        stream.read_line(&mut line).unwrap();
        assert_eq!(line, ":5\r\n");
    }
    let largest = info_field(&served, "store_largest_batch");
    assert!(largest > 128, "largest batch {largest}");
    assert!(largest <= 1024, "largest batch {largest}");

    for (flag, value, says) in [
        (
            "--pipeline-batch",
            "0",
            "--pipeline-batch: must be at least 1",
        ),
        (
            "--pipeline-depth",
            "0",
            "--pipeline-depth: must be at least 1",
        ),
    ] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_memcache-ratelimit"))
            .args(["serve", "--listen", "127.0.0.1:0", flag, value])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{flag} {value}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(says), "{flag} {value}: {stderr}");
    }
}

/// `--metrics`: Prometheus text over HTTP, with the decisions by command
/// and outcome, their latency, and the library's store counters.
#[test]
fn metrics_are_served_for_prometheus() {
    let metrics = format!("127.0.0.1:{}", free_port());
    let served = Served::start(&["--metrics", &metrics]);
    assert_eq!(
        session(
            &served,
            &[],
            &["RL.REDUCE m 1 60", "RL.REDUCE m 1 60", "RL.GET m 1 60"]
        ),
        ["1", "0", "0"]
    );
    let mut body = String::new();
    for _ in 0..100 {
        body = http_get(&metrics, "/metrics");
        if body.contains("ratelimit_decisions_total") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    for line in [
        r#"ratelimit_server_decisions_total{command="rl.reduce",outcome="allowed"} 1"#,
        r#"ratelimit_server_decisions_total{command="rl.reduce",outcome="denied"} 1"#,
        r#"ratelimit_server_decisions_total{command="rl.get",outcome="read"} 1"#,
        r#"ratelimit_server_decision_seconds_count{command="rl.reduce"} 2"#,
        r#"ratelimit_store_failures_total{limiter="serve",kind="error"} 0"#,
    ] {
        assert!(body.contains(line), "{line} in\n{body}");
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn http_get(address: &str, path: &str) -> String {
    let Ok(mut stream) = TcpStream::connect(address) else {
        return String::new();
    };
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response
}
