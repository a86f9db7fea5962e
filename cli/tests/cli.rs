//! The operator CLI as an operator runs it: the built binary, against a
//! real memcached started on a free loopback port.

use std::process::{Command, Output};

use memcache_ratelimit_bench::server::{find_binary, Memcached};

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
    let server = Memcached::start(&find_binary(), None);
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
