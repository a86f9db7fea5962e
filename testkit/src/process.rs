//! Ports, users, signals and process states, as the launchers need them.

use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

/// A loopback port nothing listens on at the moment of asking (another
/// process may take it before it is used: callers retry).
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

/// Whether this process runs as root (memcached then needs `-u root`).
pub(crate) fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("Uid:"))
                .map(|line| line.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// Sends `signal` (such as `STOP` or `CONT`) to process `pid` with
/// `kill`. After `STOP`, waits until every thread of the process has
/// really stopped, so no request is answered after it returns.
pub(crate) fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{signal} {pid} failed");
    if signal == "STOP" {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !stopped(pid) {
            assert!(Instant::now() < deadline, "process {pid} did not stop");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Whether every thread of process `pid` is stopped (state `T`).
fn stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|task| {
        std::fs::read_to_string(task.path().join("stat"))
            .ok()
            // The state follows the command name, which is in parentheses.
            .and_then(|stat| {
                stat.rsplit_once(')')
                    .map(|(_, rest)| rest.trim_start().starts_with('T'))
            })
            .unwrap_or(false)
    })
}
