//! The memcached under test and the CPU placement. memcached is started
//! by the workspace's test kit (`memcache-ratelimit-testkit`), as the
//! crate's tests start it: a free loopback port, retried; here with the
//! benchmark's arguments and pinned to a CPU of its own.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use memcache_ratelimit_testkit as testkit;

/// Set in the re-executed, pinned benchmark: the CPU for memcached.
const SERVER_CPU_ENV: &str = "MEMCACHE_RATELIMIT_BENCH_SERVER_CPU";

/// Where memcached and the benchmark run.
pub struct Placement {
    /// `taskset -c <cpu>` for memcached, when pinning is possible.
    pub pin_server: Option<usize>,
    /// How the benchmark itself was placed, in words.
    pub how: String,
}

/// How a benchmark that runs alone on one CPU is placed, in words: pinned
/// as [`pin_self_or_reexec`] pins it, unless `no_pin` (its `--no-pin`).
pub fn place_self(no_pin: bool) -> String {
    if no_pin {
        "not pinned (`--no-pin`)".to_owned()
    } else {
        pin_self_or_reexec().how
    }
}

/// Pins this process to the second allowed CPU by re-executing itself under
/// `taskset -c`, leaving the first for memcached. Without `taskset` or with
/// fewer than 2 allowed CPUs, nothing is pinned.
pub fn pin_self_or_reexec() -> Placement {
    if let Ok(cpu) = std::env::var(SERVER_CPU_ENV) {
        return Placement {
            pin_server: cpu.parse().ok(),
            how: "re-executed under `taskset -c` at start".into(),
        };
    }
    let allowed = parse_cpu_list(&own_cpus());
    if allowed.len() < 2 {
        return Placement {
            pin_server: None,
            how: format!("not pinned: only {} CPU(s) allowed", allowed.len()),
        };
    }
    if !has_taskset() {
        return Placement {
            pin_server: None,
            how: "not pinned: `taskset` not found".into(),
        };
    }
    let exe = std::env::current_exe().expect("the benchmark's own path");
    let status = Command::new("taskset")
        .arg("-c")
        .arg(allowed[1].to_string())
        .arg(exe)
        .args(std::env::args_os().skip(1))
        .env(SERVER_CPU_ENV, allowed[0].to_string())
        .status()
        .expect("re-execute under taskset");
    std::process::exit(status.code().unwrap_or(1));
}

fn has_taskset() -> bool {
    Command::new("taskset")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// `Cpus_allowed_list` of a process, from /proc.
fn cpus_of(pid: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("Cpus_allowed_list:"))
                .map(|line| line["Cpus_allowed_list:".len()..].trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// This process's allowed CPUs, as /proc lists them (e.g. `1` or `0-1`).
pub fn own_cpus() -> String {
    cpus_of("self")
}

/// CPUs online, from /sys (not limited by this process's affinity).
pub fn cpu_count() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .map(|list| parse_cpu_list(list.trim()).len())
        .unwrap_or(0)
}

fn parse_cpu_list(list: &str) -> Vec<usize> {
    let mut cpus = Vec::new();
    for part in list.split(',').filter(|part| !part.is_empty()) {
        match part.split_once('-') {
            Some((low, high)) => {
                if let (Ok(low), Ok(high)) = (low.parse::<usize>(), high.parse::<usize>()) {
                    cpus.extend(low..=high);
                }
            }
            None => cpus.extend(part.parse::<usize>().ok()),
        }
    }
    cpus
}

/// The memcached binary: `MEMCACHED_BIN`, else the first on `PATH` or in
/// the usual places; a missing one fails with instructions.
pub fn find_binary() -> PathBuf {
    testkit::binary::memcached()
}

/// The memcached arguments of every benchmark: one thread, 1 GiB, 4096
/// connections, no UDP (the kit adds `-l 127.0.0.1`, the port and, as
/// root, `-u root`).
pub const ARGS: [&str; 8] = ["-t", "1", "-m", "1024", "-c", "4096", "-U", "0"];

/// memcached's `stats`, the two numbers the memory table needs.
pub struct Stats {
    pub bytes: u64,
    pub items: u64,
}

/// The memcached under test: a process started through the test kit
/// (killed when dropped), or one given with `--server` (left alone).
pub struct Memcached {
    address: String,
    started: Option<testkit::Memcached>,
}

impl Memcached {
    /// Starts `binary` with [`ARGS`] on a free loopback port, under
    /// `taskset -c <pin>` when given, and waits until it accepts
    /// connections.
    pub fn start(binary: &Path, pin: Option<usize>) -> Self {
        let started = testkit::Memcached::builder()
            .binary(binary)
            .args(ARGS)
            .cpu(pin)
            .start();
        Self {
            address: started.address(),
            started: Some(started),
        }
    }

    /// An already-running memcached at `HOST:PORT`, which must answer
    /// `version`; it is neither placed nor stopped here.
    pub fn given(address: &str) -> Self {
        testkit::text::version(address);
        Self {
            address: address.to_owned(),
            started: None,
        }
    }

    /// `127.0.0.1:<port>`, or the address given.
    pub fn address(&self) -> String {
        self.address.clone()
    }

    /// The flags memcached runs with (the port aside), as one line.
    pub fn flags(&self) -> String {
        match &self.started {
            Some(started) => started.flags().join(" "),
            None => "unknown (given with `--server`, not started here)".into(),
        }
    }

    /// memcached's allowed CPUs, as /proc lists them.
    pub fn cpus(&self) -> String {
        let Some(started) = &self.started else {
            return "unknown (given with `--server`, not started here)".into();
        };
        let listed = started
            .pid()
            .map(|pid| cpus_of(&pid.to_string()))
            .unwrap_or_else(|| "unknown".into());
        match started.cpu() {
            Some(cpu) => format!("{listed} (`taskset -c {cpu}`)"),
            None => format!("{listed} (not pinned)"),
        }
    }

    /// `memcached -V`, or the given server's answer to `version`.
    pub fn version(&self) -> String {
        match &self.started {
            Some(started) => started.version(),
            None => testkit::text::version(&self.address),
        }
    }

    /// `flush_all`: every item is invalid from now on.
    pub fn flush_all(&self) {
        testkit::text::flush_all(&self.address);
    }

    /// `stats`: `bytes` and `curr_items`.
    pub fn stats(&self) -> Stats {
        Stats {
            bytes: testkit::text::stat(&self.address, "bytes"),
            items: testkit::text::stat(&self.address, "curr_items"),
        }
    }
}
