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

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn check_scripts_decisions_and_inspect_shows_what_they_counted() {
    let server = Memcached::start();
    let address = server.address();
    let target = [
        "--servers",
        address.as_str(),
        "--quota",
        "3/minute",
        "--sub-windows",
        "6",
        "--namespace",
        "cli",
    ];
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
    let lines: Vec<&str> = text.lines().collect();
    // The current 10 s bucket holds the 3 allowed (the denied one was
    // refunded), on the one server; 6 older buckets follow.
    let current = lines
        .iter()
        .find(|line| line.starts_with("cli:alice_"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(current.contains(&address), "{current}");
    assert!(current.trim_end().ends_with(" 3"), "{current}");
    assert_eq!(text.matches("cli:alice_").count(), 7, "{text}");
    assert!(text.contains("estimate  3.00 of 3, remaining 0"), "{text}");

    // Inspecting counted nothing: alice is still denied, not more so.
    assert_eq!(run("check", &["alice"]).status.code(), Some(1));
    let again = stdout(&run("inspect", &["alice"]));
    assert!(again.contains("estimate  3.00 of 3"), "{again}");

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
    assert!(!text.contains("(absent)"), "{text}");
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
