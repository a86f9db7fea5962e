//! The server as `redis-cli` (Debian's redis-tools) sees it: Smyte's own
//! test sequences, redis-cell's example, the sliding window, the
//! connection commands, a password, malformed input and a clean stop.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use memcache_ratelimit_testkit::binary::redis_cli;

use crate::process::Served;

/// `redis-cli -p <port> <flags>` fed `commands`, one per line, on one
/// connection; its output lines, without the empty line redis-cli prints
/// after an error (so a nil reply, also an empty line, is left out too).
pub fn session(served: &Served, flags: &[&str], commands: &[&str]) -> Vec<String> {
    let mut child = Command::new(redis_cli())
        .args(["-h", "127.0.0.1", "-p", &served.port()])
        .args(flags)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("redis-cli starts");
    let mut input = child.stdin.take().expect("stdin is piped");
    input
        .write_all(format!("{}\n", commands.join("\n")).as_bytes())
        .expect("redis-cli reads its commands");
    drop(input);
    let output = child.wait_with_output().expect("redis-cli ends");
    assert!(
        output.status.success(),
        "redis-cli failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| !line.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Smyte's `GetReduceCommands` test (smyte/ratelimit,
/// `RateLimitHandlerTest.cpp`, <https://github.com/smyte/ratelimit>): one
/// bucket of 10, refilled by 3 every 5 s, through both units, with a
/// client's timestamps, reads, large takes and strict mode.
#[test]
fn smytes_own_test_sequence_gives_smytes_replies() {
    let served = Served::start(&[]);
    let steps = [
        ("rl.reduce a 10 5 refill 3 at 2", "10"),
        ("rl.preduce a 10 5000 at 2000 refill 3", "9"),
        ("rl.get a 10 5 at 2 refill 3", "8"),
        ("rl.pget a 10 5000 refill 3 at 2000", "8"),
        ("rl.reduce a 10 5 at 2 refill 3 take 5", "8"),
        ("rl.preduce a 10 5000 refill 3 take 5 at 2000", "3"),
        ("rl.get a 10 5 at 2 refill 3", "0"),
        ("rl.get a 10 5 at 8 refill 3", "3"),
        ("rl.reduce a 10 5 at 8 take 2 refill 3", "3"),
        ("rl.preduce a 10 5000 at 8000 refill 3", "1"),
        ("rl.preduce a 10 5000 at 9000 refill 3", "0"),
        ("rl.get a 10 5 at 13 refill 3", "3"),
        ("rl.reduce a 10 5 at 14 refill 3 take 4 strict", "3"),
        ("rl.reduce a 10 5 at 16 refill 3 take 4 strict", "0"),
        ("rl.reduce a 10 5 at 18 refill 3 take 1 strict", "0"),
        ("rl.reduce a 10 5 at 23 refill 3 take 2 strict", "3"),
    ];
    let commands: Vec<&str> = steps.iter().map(|(c, _)| *c).collect();
    let expected: Vec<&str> = steps.iter().map(|(_, r)| *r).collect();
    assert_eq!(session(&served, &[], &commands), expected);
    // Smyte's README: two a minute.
    let readme = ["RL.REDUCE twoPerMin 2 60"; 3];
    assert_eq!(session(&served, &[], &readme), ["2", "1", "0"]);
    // The parameters name the bucket: another max is another bucket.
    assert_eq!(session(&served, &[], &["RL.REDUCE twoPerMin 3 60"]), ["3"]);
}

/// Smyte's `SessionizeCommands` test (smyte/ratelimit,
/// `RateLimitHandlerTest.cpp`): one token an hour, each reply the tokens
/// available before and the session start in milliseconds (redis-cli
/// prints an array one element a line), in seconds and in milliseconds.
#[test]
fn smytes_sessionize_sequence_gives_smytes_replies() {
    let served = Served::start(&[]);
    let replies = [
        "1", "0", // a new session at 0
        "0", "0", // denied: the same session, the hour restarted
        "0", "0", //
        "0", "0", // no refill even after 3600 s: restarted at 1000 s
        "1", "7205000", // a whole hour of silence: a new session
    ];
    let seconds: Vec<String> = [0, 1, 1000, 3605, 7205]
        .iter()
        .map(|t| format!("rl.sessionize a 1 3600 at {t} STRICT"))
        .collect();
    let seconds: Vec<&str> = seconds.iter().map(String::as_str).collect();
    assert_eq!(session(&served, &[], &seconds), replies);
    // STRICT is optional: the command is always strict.
    let millis: Vec<String> = [0, 1_000, 1_000_000, 3_605_000, 7_205_000]
        .iter()
        .map(|t| format!("RL.PSESSIONIZE b 1 3600000 AT {t}"))
        .collect();
    let millis: Vec<&str> = millis.iter().map(String::as_str).collect();
    assert_eq!(session(&served, &[], &millis), replies);
    let after = session(
        &served,
        &[],
        &[
            // Both units name one bucket: the session of 7205 s goes on.
            "rl.psessionize a 1 3600000 at 7205001 take 1",
            // RL.REDUCE's bucket of the same parameters is another one.
            "rl.reduce a 1 3600 at 7205",
            "rl.sessionize a 1 3600 take 0",
            "rl.sessionize a 1",
        ],
    );
    assert_eq!(
        after,
        [
            "0",
            "7205000",
            "1",
            "Value is not an integer or out of range",
            "Wrong number of arguments for 'rl.sessionize' command",
        ]
    );
}

/// Smyte's `ParseRateLimitArgsWithErrors`, and the arity error, with
/// Smyte's texts.
#[test]
fn bad_arguments_get_smytes_errors() {
    let served = Served::start(&[]);
    let replies = session(
        &served,
        &[],
        &[
            "rl.get abc 10 abc",
            "rl.pget abc 0 60",
            "rl.reduce abc 10 60 refill strict 1",
            "rl.pget abc 0 60 take 2",
            "rl.reduce abc 10 60 refill",
            "rl.preduce abc 10 60 refill 1 strict abc",
            "rl.reduce abc 10",
            "RL.REDUCE abc 10 60 TAKE -1",
            "rl.reduce abc 10 60 refill 0",
            "rl.reduce abc 10 99999999999",
        ],
    );
    let invalid = "Value is not an integer or out of range";
    assert_eq!(
        replies,
        [
            invalid,
            invalid,
            invalid,
            "Syntax error",
            "Syntax error",
            "Syntax error",
            "Wrong number of arguments for 'rl.reduce' command",
            invalid,
            invalid,
            invalid,
        ]
    );
}

/// redis-cell's README example, and the sliding window.
#[test]
fn cl_throttle_and_rl_window_answer_five_integers() {
    let served = Served::start(&[]);
    let cell = session(&served, &[], &["CL.THROTTLE user123 15 30 60 1"]);
    assert_eq!(cell, ["0", "16", "15", "-1", "2"]);
    let window = session(&served, &[], &["RL.WINDOW w 2 60"; 3]);
    assert_eq!(&window[..3], ["1", "2", "1"]);
    assert_eq!(&window[5..8], ["1", "2", "0"]);
    assert_eq!(&window[10..13], ["0", "2", "0"], "{window:?}");
    let retry: i64 = window[14].parse().unwrap();
    // The requests leave the estimate when their sub-window has slid out:
    // at most the window and one sub-window (15 s) away.
    assert!(retry > 0 && retry <= 75_000, "{window:?}");
    // The moment estimator: its own buckets, the same replies.
    let moment = session(&served, &[], &["RL.WINDOW w 2 60 ESTIMATOR moment"; 3]);
    assert_eq!(&moment[..3], ["1", "2", "1"], "{moment:?}");
    assert_eq!(&moment[10..13], ["0", "2", "0"], "{moment:?}");
    let unknown = session(&served, &[], &["RL.WINDOW w 2 60 ESTIMATOR median"]);
    assert_eq!(unknown, ["ERR syntax error"]);
}

#[test]
fn connection_commands_answer_as_redis_does() {
    let served = Served::start(&[]);
    let replies = session(
        &served,
        &[],
        &[
            "PING",
            "PING hello",
            "ECHO there",
            "SELECT 0",
            "SELECT 1",
            "CLIENT SETNAME tester",
            "CLIENT GETNAME",
            "CLIENT SETINFO LIB-NAME cli-test",
            "COMMAND COUNT",
            "COMMAND DOCS",
            "COMMAND INFO rl.reduce",
            "NOSUCH x",
        ],
    );
    assert_eq!(
        replies,
        [
            "PONG",
            "hello",
            "there",
            "OK",
            "ERR DB index is out of range",
            "OK",
            "tester",
            "OK",
            "17",
            // COMMAND DOCS: an empty answer, which redis-cli accepts
            // (nothing printed); COMMAND INFO: name, arity, flags, keys.
            "rl.reduce",
            "-4",
            "write",
            "fast",
            "1",
            "1",
            "1",
            "ERR unknown command 'nosuch', with args beginning with: 'x' ",
        ]
    );
    let info = session(&served, &[], &["INFO"]).join("\n");
    for field in [
        "redis_version:",
        "loading:0",
        "connected_clients:",
        "decisions_rl_reduce:",
        "decisions_rl_sessionize:",
        "store:embedded",
    ] {
        assert!(info.contains(field), "{field} in {info}");
    }
    let hello = session(&served, &["-3"], &["HELLO 3"]).join("\n");
    assert!(hello.contains("proto") && hello.contains('3'), "{hello}");
}

#[test]
fn a_password_is_required_when_set() {
    let served = Served::start(&["--requirepass", "s3cret"]);
    let refused = session(
        &served,
        &[],
        &[
            "RL.REDUCE k 2 60",
            "AUTH wrong",
            "AUTH s3cret",
            "RL.REDUCE k 2 60",
        ],
    );
    assert_eq!(
        refused,
        [
            "NOAUTH Authentication required.",
            "WRONGPASS invalid username-password pair or user is disabled.",
            "OK",
            "2"
        ]
    );
    let with_flag = session(
        &served,
        &["-a", "s3cret", "--no-auth-warning"],
        &["RL.REDUCE k 2 60"],
    );
    assert_eq!(with_flag, ["1"]);
}

/// The password may come from the environment instead of a command line
/// others can read.
#[test]
fn the_password_can_come_from_the_environment() {
    let served = Served::start_with_env(&[], &[("MEMCACHE_RATELIMIT_REQUIREPASS", "from-env")]);
    let replies = session(
        &served,
        &[],
        &["PING", "AUTH wrong", "AUTH default from-env", "PING"],
    );
    assert_eq!(
        replies,
        [
            "NOAUTH Authentication required.",
            "WRONGPASS invalid username-password pair or user is disabled.",
            "OK",
            "PONG"
        ]
    );
}

/// Loopback on Smyte's port unless told otherwise; the limits are flags.
#[test]
fn it_listens_on_loopback_by_default_and_its_limits_are_flags() {
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_memcache-ratelimit"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("[default: 127.0.0.1:9049]"), "{help}");
    for flag in [
        "--max-args",
        "--max-bulk",
        "--max-inline",
        "--max-connections",
    ] {
        assert!(help.contains(flag), "{flag} in {help}");
    }
    // Four arguments where three are allowed: Redis's error, then closed.
    let served = Served::start(&["--max-args", "3"]);
    let mut stream = TcpStream::connect(&served.address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(b"*3\r\n$4\r\nPING\r\n$1\r\na\r\n$1\r\nb\r\n*4\r\n")
        .unwrap();
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&reply),
        "-ERR wrong number of arguments for 'ping' command\r\n\
         -ERR Protocol error: invalid multibulk length\r\n"
    );
}

/// Malformed input gets Redis's protocol error, then the connection
/// closes; the server goes on serving others.
#[test]
fn malformed_input_is_answered_and_closed() {
    let served = Served::start(&[]);
    for (input, error) in [
        (
            &b"*abc\r\n"[..],
            "-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*1\r\n+PING\r\n",
            "-ERR Protocol error: expected '$', got '+'\r\n",
        ),
        (
            b"*1\r\n$-5\r\n",
            "-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"\"unbalanced\r\n",
            "-ERR Protocol error: unbalanced quotes in request\r\n",
        ),
        (
            b"*100000\r\n",
            "-ERR Protocol error: invalid multibulk length\r\n",
        ),
    ] {
        let mut stream = TcpStream::connect(&served.address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream.write_all(b"PING\r\n").unwrap();
        stream.write_all(input).unwrap();
        let mut reply = Vec::new();
        stream
            .read_to_end(&mut reply)
            .expect("the server closes the connection");
        assert_eq!(String::from_utf8_lossy(&reply), format!("+PONG\r\n{error}"));
    }
    assert_eq!(session(&served, &[], &["PING"]), ["PONG"]);
}

/// SIGTERM: the server answers what it has read, then exits 0.
#[test]
fn sigterm_stops_cleanly() {
    let served = Served::start(&[]);
    let mut stream = TcpStream::connect(&served.address).unwrap();
    stream.write_all(b"RL.REDUCE k 5 60\r\n").unwrap();
    let mut first = [0u8; 4];
    stream.read_exact(&mut first).unwrap();
    assert_eq!(&first, b":5\r\n");
    let (status, log) = served.terminate();
    assert!(status.success(), "{status:?}");
    assert!(log.iter().any(|line| line.contains("stopped")), "{log:?}");
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    assert!(rest.is_empty(), "{rest:?}");
}
