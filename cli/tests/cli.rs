//! The operator CLI as an operator runs it: the built binary, against a
//! real memcached started on a free loopback port.

use std::process::{Command, Output};

use memcache_ratelimit_testkit::Memcached;

fn cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memcache-ratelimit"))
        .args(args)
        .env_remove("MEMCACHE_RATELIMIT_CONFIG")
        .output()
        .expect("the CLI runs")
}

/// The flags of a 3/minute sliding window of 6 sub-windows on the
/// memcached at `address`, in `namespace`.
fn sliding_target<'a>(address: &'a str, namespace: &'a str) -> [&'a str; 8] {
    [
        "--servers",
        address,
        "--quota",
        "3/minute",
        "--sub-windows",
        "6",
        "--namespace",
        namespace,
    ]
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn check_scripts_decisions_and_inspect_shows_what_they_counted() {
    let server = Memcached::start();
    let address = server.address();
    let target = sliding_target(&address, "cli");
    let run = |command: &str, extra: &[&str]| {
        let mut args = vec![command];
        args.extend_from_slice(&target);
        args.extend_from_slice(extra);
        cli(&args)
    };

    let mut statuses = Vec::new();
    for _ in 0..4 {
        let output = run("check", &["alice"]);
        statuses.push(output.status.code());
        if output.status.code() == Some(1) {
            let text = stdout(&output);
            assert!(
                text.starts_with("allowed=false limit=3 remaining=0 "),
                "{text}"
            );
            assert!(!text.contains("retry_after_ms=-"), "{text}");
        }
    }
    assert_eq!(statuses, [Some(0), Some(0), Some(0), Some(1)]);
    let json = stdout(&run("check", &["bob", "--json", "--cost", "2"]));
    assert!(
        json.starts_with("{\"allowed\":true,\"limit\":3,\"remaining\":1,"),
        "{json}"
    );

    let output = run("inspect", &["alice"]);
    assert_eq!(output.status.code(), Some(0));
    let text = stdout(&output);
    // The current 10 s bucket and the 6 before it, each on the one server;
    // the 3 allowed are in the newest (the denied one was refunded).
    let rows: Vec<&str> = text
        .lines()
        .filter(|line| line.contains(" cli:alice_"))
        .collect();
    assert_eq!(rows.len(), 7, "{text}");
    assert!(rows[0].starts_with("current "), "{text}");
    assert!(rows[6].starts_with("-6 oldest "), "{text}");
    assert!(
        rows.iter().all(|row| row.trim_end().ends_with(&address)),
        "{text}"
    );
    let counted: u64 = rows
        .iter()
        .filter_map(|row| row.split_whitespace().nth_back(3)?.parse::<u64>().ok())
        .sum();
    assert_eq!(counted, 3, "{text}");
    assert!(text.contains("estimate   3.00 of 3"), "{text}");
    assert!(text.contains("remaining  0\n"), "{text}");

    // Inspecting counted nothing: alice is still denied, not more so.
    assert_eq!(run("check", &["alice"]).status.code(), Some(1));
    let again = stdout(&run("inspect", &["alice"]));
    assert!(again.contains("estimate   3.00 of 3"), "{again}");

    // The compare-and-swap algorithms show their state's key and value.
    assert_eq!(
        run(
            "check",
            &["carol", "--algorithm", "gcra", "--sub-windows", "1"]
        )
        .status
        .code(),
        Some(2)
    );
    let target_gcra = [
        "--servers",
        address.as_str(),
        "--quota",
        "3/minute",
        "--algorithm",
        "gcra",
    ];
    let mut args = vec!["check"];
    args.extend_from_slice(&target_gcra);
    args.push("carol");
    assert_eq!(cli(&args).status.code(), Some(0));
    args[0] = "inspect";
    let text = stdout(&cli(&args));
    assert!(text.contains("rl:carol_gcra-"), "{text}");
    assert!(!text.contains("(absent"), "{text}");
    assert!(text.contains("= TAT "), "{text}");
}

#[test]
fn a_bad_configuration_fails_with_the_field_named() {
    let dir = std::env::temp_dir().join(format!("memcache-ratelimit-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.toml");
    std::fs::write(&file, "quota = \"100/minute\"\n[plans]\npro = \"many\"\n").unwrap();
    let output = cli(&["check", "alice", "--config", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("invalid plans.pro"), "{error}");

    let output = cli(&["inspect", "alice", "--quota", "3/minute"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("give --servers"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn simulate_and_bench_are_entry_points() {
    for (command, expected) in [("simulate", "--quick"), ("bench", "--in-flight")] {
        let output = cli(&[command, "--help"]);
        assert_eq!(output.status.code(), Some(0), "{command}");
        assert!(
            stdout(&output).contains(expected),
            "{command}: {}",
            stdout(&output)
        );
    }
}

/// A loopback address nothing listens on: connections are refused.
fn refused_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let address = listener.local_addr().expect("its address").to_string();
    drop(listener);
    address
}

fn all_output(output: &Output) -> String {
    format!(
        "{}{}",
        stdout(output),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn does_not_say_allowed_when_every_server_is_down() {
    let down = refused_address();
    for (policy, share, named) in [
        ("open", None, "failure policy open (allow)"),
        ("closed", None, "failure policy closed (deny)"),
        (
            "fallback",
            Some("0.5"),
            "failure policy fallback (an in-process stand-in with a 0.5 share",
        ),
    ] {
        for json in [false, true] {
            let mut args = vec![
                "check",
                "--servers",
                down.as_str(),
                "--quota",
                "3/minute",
                "alice",
            ];
            if json {
                args.push("--json");
            }
            let mut command = Command::new(env!("CARGO_BIN_EXE_memcache-ratelimit"));
            command
                .args(&args)
                .env_remove("MEMCACHE_RATELIMIT_CONFIG")
                .env("MEMCACHE_RATELIMIT_FAILURE_POLICY", policy);
            if let Some(share) = share {
                command.env("MEMCACHE_RATELIMIT_FALLBACK_SHARE", share);
            }
            let output = command.output().expect("the CLI runs");
            let text = all_output(&output);
            assert_eq!(output.status.code(), Some(2), "{policy}: {text}");
            assert!(text.contains(named), "{policy}: {text}");
            assert!(text.contains("not by the store"), "{policy}: {text}");
            assert!(
                text.contains(&format!("memcached {down} failed")),
                "{policy}: {text}"
            );
        }
    }

    // Without a policy to decide, the error names the server too.
    let output = Command::new(env!("CARGO_BIN_EXE_memcache-ratelimit"))
        .args(["check", "--servers", down.as_str(), "alice"])
        .env_remove("MEMCACHE_RATELIMIT_CONFIG")
        .env("MEMCACHE_RATELIMIT_FAILURE_POLICY", "return_error")
        .output()
        .expect("the CLI runs");
    let text = all_output(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(text.contains(&format!("memcached {down} failed")), "{text}");
}

#[test]
fn a_hung_server_is_named_when_the_deadline_passes() {
    // It accepts connections (the kernel's backlog) and never answers.
    let hung = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let address = hung.local_addr().expect("its address").to_string();
    let output = cli(&["check", "--servers", address.as_str(), "alice"]);
    let text = all_output(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(text.contains("failure policy open (allow)"), "{text}");
    assert!(
        text.contains(&format!(
            "memcached {address} did not answer within the deadline"
        )),
        "{text}"
    );
    drop(hung);
}

#[test]
fn inspect_names_the_server_that_is_down() {
    let down = refused_address();
    let output = cli(&["inspect", "--servers", down.as_str(), "alice"]);
    let text = all_output(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(text.contains(&format!("memcached {down} failed")), "{text}");
}

#[test]
fn does_not_check_silently_against_an_unshared_store_without_servers() {
    let output = Command::new(env!("CARGO_BIN_EXE_memcache-ratelimit"))
        .args(["check", "--quota", "3/minute", "alice"])
        .env_remove("MEMCACHE_RATELIMIT_CONFIG")
        .env_remove("MEMCACHE_RATELIMIT_SERVERS")
        .output()
        .expect("the CLI runs");
    let text = all_output(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    for hint in ["--servers", "MEMCACHE_RATELIMIT_SERVERS", "--config"] {
        assert!(text.contains(hint), "{hint}: {text}");
    }

    // Asked for explicitly, the embedded store decides, and says what it is.
    let output = Command::new(env!("CARGO_BIN_EXE_memcache-ratelimit"))
        .args(["check", "--quota", "3/minute", "--embedded", "alice"])
        .env_remove("MEMCACHE_RATELIMIT_CONFIG")
        .env_remove("MEMCACHE_RATELIMIT_SERVERS")
        .output()
        .expect("the CLI runs");
    let text = all_output(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(
        stdout(&output).contains("store=embedded (in-process, not shared)"),
        "{text}"
    );
}

#[test]
fn check_names_the_store_that_decided() {
    let server = Memcached::start();
    let address = server.address();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "check",
            "--servers",
            address.as_str(),
            "--quota",
            "1/minute",
            "--namespace",
            "named",
        ];
        args.extend_from_slice(extra);
        cli(&args)
    };
    let store = format!("store=memcached servers={address} protocol=meta");

    let allowed = run(&["alice"]);
    assert_eq!(allowed.status.code(), Some(0), "{}", all_output(&allowed));
    let text = stdout(&allowed);
    assert!(text.starts_with("allowed=true "), "{text}");
    assert!(text.contains("decided_by=store"), "{text}");
    assert!(text.trim_end().ends_with(&store), "{text}");

    let denied = run(&["alice"]);
    assert_eq!(denied.status.code(), Some(1), "{}", all_output(&denied));
    let text = stdout(&denied);
    assert!(text.starts_with("allowed=false "), "{text}");
    assert!(text.trim_end().ends_with(&store), "{text}");

    let json = run(&["alice", "--json"]);
    assert_eq!(json.status.code(), Some(1));
    let text = stdout(&json);
    assert!(text.contains("\"decided_by\":\"store\""), "{text}");
    assert!(
        text.contains(&format!(
            "\"store\":\"memcached\",\"servers\":[\"{address}\"],\"protocol\":\"meta\""
        )),
        "{text}"
    );
}

/// `args` (the command first) against the memcached at `address`, parsed
/// as JSON.
fn json(args: &[&str]) -> serde_json::Value {
    let output = cli(args);
    assert_eq!(output.status.code(), Some(0), "{}", all_output(&output));
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", stdout(&output)))
}

#[test]
fn inspect_shows_each_bucket_of_a_sliding_window_for_people_and_scripts() {
    let server = Memcached::start();
    let address = server.address();
    let target = sliding_target(&address, "buckets");
    let with = |command: &'static str, extra: &[&'static str]| {
        let mut args = vec![command];
        args.extend_from_slice(&target);
        args.extend_from_slice(extra);
        args
    };
    for _ in 0..2 {
        assert_eq!(cli(&with("check", &["alice"])).status.code(), Some(0));
    }

    let output = cli(&with("inspect", &["alice"]));
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{}", all_output(&output));
    for expected in [
        "client     alice\n",
        "limiter    3/1m SlidingWindow n=6\n",
        &format!("store      memcached servers={address} protocol=meta\n"),
        "read at    ",
        "bucket     span (UTC)",
        "estimate   2.00 of 3",
        "remaining  1\n",
        "reset      in ",
    ] {
        assert!(text.contains(expected), "{expected:?}: {text}");
    }

    let report = json(&with("inspect", &["alice", "--json"]));
    assert_eq!(report["client"], "alice");
    assert_eq!(report["algorithm"], "sliding_window");
    assert_eq!(report["parameters"], "SlidingWindow n=6");
    assert_eq!(report["quota"], "3/1m");
    assert_eq!(report["limit"], 3);
    assert_eq!(report["period_ms"], 60_000);
    assert_eq!(report["store"], "memcached");
    assert_eq!(report["servers"], serde_json::json!([address]));
    assert_eq!(report["protocol"], "meta");
    assert_eq!(report["state"], serde_json::Value::Null);
    assert_eq!(report["estimate"], 2.0);
    assert_eq!(report["remaining"], 1);
    let reset = report["reset_after_ms"].as_u64().expect("reset_after_ms");
    assert!(reset > 50_000 && reset <= 70_000, "{report}");

    let read_at = report["read_at_unix_ms"].as_i64().expect("read_at_unix_ms");
    let buckets = report["buckets"].as_array().expect("buckets");
    let keys = report["keys"].as_array().expect("keys");
    assert_eq!(buckets.len(), 7, "{report}");
    assert_eq!(keys.len(), 7, "{report}");
    let mut counted = 0;
    for (age, (bucket, key)) in buckets.iter().zip(keys).enumerate() {
        let start = bucket["start_unix_ms"].as_i64().expect("start_unix_ms");
        let end = bucket["end_unix_ms"].as_i64().expect("end_unix_ms");
        assert_eq!(bucket["age"], age, "{bucket}");
        assert_eq!(end - start, 10_000, "{bucket}");
        assert_eq!(start % 10_000, 0, "aligned on unix time: {bucket}");
        assert_eq!(bucket["key"], key["key"], "{report}");
        assert!(bucket["key"]
            .as_str()
            .unwrap()
            .starts_with("buckets:alice_"));
        assert_eq!(key["server"], address.as_str());
        assert_eq!(key["value_encoding"], "text");
        let count = bucket["count"].as_u64().expect("count");
        match bucket["stored"].as_bool().expect("stored") {
            true => assert_eq!(key["value"], count.to_string(), "{report}"),
            false => assert_eq!((count, &key["value"]), (0, &serde_json::Value::Null)),
        }
        counted += count;
        let weight = bucket["weight"].as_f64().expect("weight");
        match age {
            0 => assert!(start <= read_at && read_at < end, "{report}"),
            _ => assert_eq!(end, buckets[age - 1]["start_unix_ms"], "{report}"),
        }
        if age < 6 {
            assert_eq!(weight, 1.0, "{bucket}");
        } else {
            // The oldest is in the estimate for what of it is in the period.
            let inside = (end - (read_at - 60_000)) as f64 / 10_000.0;
            assert!((weight - inside).abs() < 0.01, "{inside}: {bucket}");
        }
    }
    assert_eq!(counted, 2, "{report}");
}

#[test]
fn inspect_decodes_the_compare_and_swap_states() {
    let server = Memcached::start();
    let address = server.address();
    let run = |command: &'static str, algorithm: &'static str, extra: &[&'static str]| {
        let mut args = vec![
            command,
            "--servers",
            address.as_str(),
            "--quota",
            "3/minute",
            "--algorithm",
            algorithm,
        ];
        args.extend_from_slice(extra);
        args
    };

    // A new client: nothing stored, a full bucket.
    let fresh = json(&run("inspect", "token_bucket", &["nobody", "--json"]));
    assert_eq!(fresh["state"]["stored"], "absent", "{fresh}");
    assert_eq!(fresh["keys"][0]["value"], serde_json::Value::Null);
    assert_eq!(fresh["state"]["tokens"], 3.0, "{fresh}");
    assert_eq!(fresh["state"]["next_refill_ms"], serde_json::Value::Null);
    assert_eq!(
        (&fresh["remaining"], &fresh["reset_after_ms"]),
        (&3.into(), &0.into())
    );

    // Two taken of 3, refilled at one per 20 s.
    for algorithm in [
        "token_bucket",
        "gcra",
        "sliding_log",
        "hybrid_quota",
        "discrete_refill",
        "sessionize",
    ] {
        for _ in 0..2 {
            let output = cli(&run("check", algorithm, &["alice"]));
            assert_eq!(output.status.code(), Some(0), "{}", all_output(&output));
        }
        let report = json(&run("inspect", algorithm, &["alice", "--json"]));
        let state = &report["state"];
        assert_eq!(report["algorithm"], algorithm, "{report}");
        assert_eq!(report["buckets"], serde_json::Value::Null, "{report}");
        assert_eq!(report["estimate"], serde_json::Value::Null, "{report}");
        assert_eq!(state["stored"], "decoded", "{report}");
        assert_eq!(report["remaining"], 1, "{report}");
        let next = state["next_refill_ms"].as_u64().expect("next_refill_ms");
        let full = state["full_in_ms"].as_u64().expect("full_in_ms");
        assert_eq!(report["reset_after_ms"], full, "{report}");
        match algorithm {
            "token_bucket" | "gcra" => {
                let tokens = state["tokens"].as_f64().expect("tokens");
                assert!((1.0..1.5).contains(&tokens), "{report}");
                assert!(next > 10_000 && next <= 20_000, "{report}");
                assert!(full > 30_000 && full <= 40_000, "{report}");
            }
            "sliding_log" => {
                assert_eq!(report["keys"][0]["value_encoding"], "hex", "{report}");
                assert_eq!(state["stored_entries"], 2, "{report}");
                assert_eq!(state["in_window"], 2, "{report}");
                assert!(next > 50_000 && next <= 60_000, "{report}");
            }
            "discrete_refill" => {
                // The whole bucket back one minute after the first request.
                let value = report["keys"][0]["value"].as_str().expect("a value");
                assert!(value.starts_with("dr1 1 "), "{report}");
                assert_eq!(state["tokens"], 1, "{report}");
                assert_eq!(next, full, "{report}");
                assert!(next > 50_000 && next <= 60_000, "{report}");
            }
            "sessionize" => {
                // The same bucket, and the session of the second request.
                let value = report["keys"][0]["value"].as_str().expect("a value");
                let words: Vec<&str> = value.split(' ').collect();
                assert_eq!(words[..2], ["ds1", "1"], "{report}");
                let start = words[3].parse::<i64>().unwrap().div_euclid(1_000_000);
                assert_eq!(state["session_start_unix_ms"], start, "{report}");
                assert_eq!(state["tokens"], 1, "{report}");
                assert!(next > 50_000 && next <= 60_000, "{report}");
            }
            _ => {
                assert_eq!(state["stored_mode"], "bursty", "{report}");
                assert_eq!(state["mode"], "bursty", "{report}");
                assert_eq!(state["tokens"], 1.0, "{report}");
                assert!(full > 50_000 && full <= 60_000, "{report}");
            }
        }
    }
    let stored = json(&run("inspect", "token_bucket", &["alice", "--json"]));
    let value = stored["keys"][0]["value"].as_str().expect("a value");
    let (tokens, updated) = value.split_once(' ').expect("<tokens> <updated>");
    assert_eq!(
        stored["state"]["stored_tokens"],
        tokens.parse::<f64>().unwrap()
    );
    assert_eq!(
        stored["state"]["stored_at_unix_ms"],
        updated.parse::<i64>().unwrap() / 1_000_000
    );

    // For people: the value as stored, then what it means now.
    let output = cli(&run("inspect", "token_bucket", &["alice"]));
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{}", all_output(&output));
    for expected in [
        "limiter    3/1m TokenBucket\n",
        "key        rl:alice_tb-",
        &format!("server     {address}\n"),
        &format!("stored     {value:?}\n"),
        "format: <tokens> <updated, unix ns>",
        " of 3 now, refilling one every 20.0 s\n",
        "remaining  1\n",
        "refill     one more in ",
    ] {
        assert!(text.contains(expected), "{expected:?}: {text}");
    }
    let log = stdout(&cli(&run("inspect", "sliding_log", &["alice"])));
    assert!(log.contains("= 2 entries"), "{log}");
    assert!(log.contains("in window  2 of 3 in the last 1m\n"), "{log}");
}

#[test]
fn check_takes_the_sliding_windows_estimator() {
    let memcached = Memcached::start();
    let servers = memcached.address();
    let run = |command: &str, extra: &[&str]| {
        let mut args = vec![command, "erin", "--servers", &servers];
        args.extend_from_slice(&["--quota", "2/minute", "--estimator", "moment"]);
        args.extend_from_slice(extra);
        cli(&args)
    };
    let statuses: Vec<_> = (0..3).map(|_| run("check", &[]).status.code()).collect();
    assert_eq!(statuses, [Some(0), Some(0), Some(1)]);
    let inspected = stdout(&run("inspect", &["--json"]));
    assert!(inspected.contains("-mom\""), "{inspected}");
    assert!(inspected.contains("\"count\":2,"), "{inspected}");
    assert!(inspected.contains("(offset sum "), "{inspected}");
}

#[test]
fn a_bad_flag_is_named_not_an_environment_variable() {
    for (flags, expected) in [
        (
            &["--quota", "10/fortnight"][..],
            "--quota: \"10/fortnight\": invalid period",
        ),
        (
            &["--quota", "0/minute"],
            "--quota: \"0/minute\": invalid limit",
        ),
        (
            &["--algorithm", "leaky_bucket"],
            "--algorithm: \"leaky_bucket\": is not one of sliding_window, fixed_window",
        ),
        (
            &["--sub-windows", "7"],
            "--sub-windows: 7: invalid sub_windows: 7 does not split the period 1m",
        ),
        (
            &["--algorithm", "gcra", "--sub-windows", "6"],
            "--sub-windows: 6: the gcra algorithm (given by --algorithm) has no sub-windows",
        ),
        (
            &["--estimator", "median"],
            "--estimator: \"median\": \"median\" is not one of uniform, moment",
        ),
        (
            &["--algorithm", "gcra", "--estimator", "moment"],
            "--estimator: \"moment\": the gcra algorithm has no sub-windows to weigh",
        ),
        (
            &["--namespace", "a b"],
            "--namespace: \"a b\": invalid namespace",
        ),
        (
            &["--servers", "localhost"],
            "--servers: \"localhost\": is not host:port",
        ),
        (&["--servers", ","], "--servers: \",\": names no server"),
    ] {
        for command in ["check", "inspect"] {
            let mut args = vec![command, "alice"];
            args.extend_from_slice(flags);
            if command == "check" {
                args.push("--embedded");
            }
            let output = Command::new(env!("CARGO_BIN_EXE_memcache-ratelimit"))
                .args(&args)
                .env_remove("MEMCACHE_RATELIMIT_CONFIG")
                .env("MEMCACHE_RATELIMIT_SERVERS", "127.0.0.1:1")
                .output()
                .expect("the CLI runs");
            let error = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(2), "{args:?}: {error}");
            assert!(error.contains(expected), "{args:?}: {error}");
            assert!(!error.contains("MEMCACHE_RATELIMIT_"), "{args:?}: {error}");
            assert!(output.stdout.is_empty(), "{args:?}");
        }
    }
}

#[test]
fn flags_override_the_environment_which_overrides_the_file() {
    let dir =
        std::env::temp_dir().join(format!("memcache-ratelimit-cli-env-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("limits.toml");
    std::fs::write(
        &file,
        "quota = \"7/minute\"\nalgorithm = \"gcra\"\nburst = 4\n",
    )
    .unwrap();
    let check = |env: Option<&str>, flags: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_memcache-ratelimit"));
        command
            .args([
                "check",
                "alice",
                "--embedded",
                "--config",
                file.to_str().unwrap(),
            ])
            .args(flags)
            .env_remove("MEMCACHE_RATELIMIT_SERVERS")
            .env_remove("MEMCACHE_RATELIMIT_QUOTA");
        if let Some(quota) = env {
            command.env("MEMCACHE_RATELIMIT_QUOTA", quota);
        }
        command.output().expect("the CLI runs")
    };
    // GCRA's limit is its burst, from the file, as long as it is GCRA.
    assert!(stdout(&check(None, &[])).starts_with("allowed=true limit=4 "));
    assert!(stdout(&check(None, &["--algorithm", "gcra"])).starts_with("allowed=true limit=4 "));
    let other = check(Some("5/minute"), &["--algorithm", "fixed_window"]);
    assert!(
        stdout(&other).starts_with("allowed=true limit=5 "),
        "{}",
        all_output(&other)
    );
    let flag = check(
        Some("5/minute"),
        &["--algorithm", "fixed_window", "--quota", "3/minute"],
    );
    assert!(
        stdout(&flag).starts_with("allowed=true limit=3 "),
        "{}",
        all_output(&flag)
    );

    // A bad variable is named as the variable, a bad flag as the flag.
    let env = check(Some("5/fortnight"), &[]);
    let error = String::from_utf8_lossy(&env.stderr);
    assert_eq!(env.status.code(), Some(2));
    assert!(
        error.contains("invalid quota (from MEMCACHE_RATELIMIT_QUOTA)"),
        "{error}"
    );
    let flag = check(None, &["--quota", "5/fortnight"]);
    let error = String::from_utf8_lossy(&flag.stderr);
    assert!(error.contains("--quota: \"5/fortnight\""), "{error}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs git in `dir`; `false` when git cannot be run.
fn git(dir: &std::path::Path, args: &[&str]) -> bool {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .is_ok_and(|output| output.status.success())
}

#[test]
fn simulate_writes_under_target_and_never_over_tracked_files_unasked() {
    let repo =
        std::env::temp_dir().join(format!("memcache-ratelimit-cli-sim-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&repo);
    let figures = repo.join("figures");
    std::fs::create_dir_all(&figures).unwrap();
    let committed = figures.join("estimate-fixed.svg");
    std::fs::write(&committed, "committed").unwrap();
    assert!(
        git(&repo, &["init", "-q"]) && git(&repo, &["add", "figures"]),
        "git is needed to tell tracked files"
    );
    let simulate = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_memcache-ratelimit"))
            .args(["simulate", "--quick"])
            .args(extra)
            .current_dir(&repo)
            .output()
            .expect("the CLI runs")
    };

    // Refused before anything runs or is written.
    for args in [
        &["--figures", "figures"][..],
        &["--out", "figures"],
        &["--out", "."],
    ] {
        let output = simulate(args);
        let error = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {error}");
        assert!(
            error.contains(&format!("{} ", args[0])),
            "{args:?}: {error}"
        );
        assert!(error.contains("tracked by git"), "{error}");
        assert!(error.contains("--overwrite"), "{error}");
        assert!(output.stdout.is_empty());
    }
    assert_eq!(std::fs::read_to_string(&committed).unwrap(), "committed");
    assert!(!repo.join("target").exists());

    // Asked for, the figures are regenerated; the CSV files go under
    // target/ by default.
    let output = simulate(&["--figures", "figures", "--overwrite", "--threads", "2"]);
    assert_eq!(output.status.code(), Some(0), "{}", all_output(&output));
    assert_ne!(std::fs::read_to_string(&committed).unwrap(), "committed");
    for csv in ["results.csv", "caches.csv", "traces.csv"] {
        let path = repo.join("target/simulations/out").join(csv);
        assert!(path.is_file(), "{}", path.display());
    }
    assert!(!repo.join("simulations").exists());
    std::fs::remove_dir_all(&repo).unwrap();
}

#[test]
fn simulate_defaults_to_target() {
    let output = cli(&["simulate", "--help"]);
    let help = stdout(&output);
    assert!(help.contains("[default: target/simulations/out]"), "{help}");
    assert!(
        help.contains("[default: target/simulations/figures]"),
        "{help}"
    );
    assert!(help.contains("--overwrite"), "{help}");
}
