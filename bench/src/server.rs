//! The memcached under test, the CPU placement, and a plain-text `stats`
//! and `flush_all` over TCP. Started the way the crate's tests start it
//! (tests/common/memcached.rs): a free loopback port, retried.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Set in the re-executed, pinned benchmark: the CPU for memcached.
const SERVER_CPU_ENV: &str = "MEMCACHE_RATELIMIT_BENCH_SERVER_CPU";

/// Where memcached and the benchmark run.
pub struct Placement {
    /// `taskset -c <cpu>` for memcached, when pinning is possible.
    pub pin_server: Option<usize>,
    /// How the benchmark itself was placed, in words.
    pub how: String,
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

/// The memcached binary on PATH (or in the usual places).
pub fn find_binary() -> PathBuf {
    let mut candidates: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("memcached"))
                .collect()
        })
        .unwrap_or_default();
    candidates.extend(
        [
            "/usr/bin/memcached",
            "/usr/local/bin/memcached",
            "/usr/sbin/memcached",
        ]
        .map(PathBuf::from),
    );
    candidates
        .into_iter()
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!("memcached was not found on PATH; install it (apt-get install memcached) or pass --memcached <path>")
        })
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

fn running_as_root() -> bool {
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

/// memcached's `stats`, the two numbers the memory table needs.
pub struct Stats {
    pub bytes: u64,
    pub items: u64,
}

/// The memcached under test: a process started here (killed when
/// dropped), or one given with `--server` (left alone).
pub struct Memcached {
    address: String,
    started: Option<Started>,
}

/// A memcached process this benchmark started.
struct Started {
    binary: PathBuf,
    pin: Option<usize>,
    child: Child,
}

/// The flags memcached runs with (the port aside).
pub fn flags() -> Vec<String> {
    let mut flags: Vec<String> = [
        "-l",
        "127.0.0.1",
        "-t",
        "1",
        "-m",
        "1024",
        "-c",
        "4096",
        "-U",
        "0",
    ]
    .map(String::from)
    .to_vec();
    if running_as_root() {
        flags.extend(["-u".to_owned(), "root".to_owned()]);
    }
    flags
}

impl Memcached {
    /// Starts memcached on a free loopback port, under `taskset -c <pin>`
    /// when given, and waits until it accepts connections.
    pub fn start(binary: &Path, pin: Option<usize>) -> Self {
        for _ in 0..5 {
            let port = free_port();
            let mut command = match pin {
                Some(cpu) => {
                    let mut command = Command::new("taskset");
                    command.arg("-c").arg(cpu.to_string()).arg(binary);
                    command
                }
                None => Command::new(binary),
            };
            command
                .args(flags())
                .arg("-p")
                .arg(port.to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let mut child = command
                .spawn()
                .unwrap_or_else(|error| panic!("cannot run {}: {error}", binary.display()));
            let socket = SocketAddr::from(([127, 0, 0, 1], port));
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break; // exited: port taken, most likely
                }
                if TcpStream::connect_timeout(&socket, Duration::from_millis(100)).is_ok() {
                    return Self {
                        address: socket.to_string(),
                        started: Some(Started {
                            binary: binary.to_owned(),
                            pin,
                            child,
                        }),
                    };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("memcached did not start on any of 5 free ports");
    }

    /// An already-running memcached at `HOST:PORT`, which must answer
    /// `version`; it is neither placed nor stopped here.
    pub fn given(address: &str) -> Self {
        let server = Self {
            address: address.to_owned(),
            started: None,
        };
        let reply = server.exchange("version\r\n", |_| true);
        assert!(
            reply[0].starts_with("VERSION "),
            "{address} answered `version` with {reply:?}"
        );
        server
    }

    /// `127.0.0.1:<port>`, or the address given.
    pub fn address(&self) -> String {
        self.address.clone()
    }

    /// memcached's allowed CPUs, as /proc lists them.
    pub fn cpus(&self) -> String {
        let Some(started) = &self.started else {
            return "unknown (given with `--server`, not started here)".into();
        };
        let listed = cpus_of(&started.child.id().to_string());
        match started.pin {
            Some(cpu) => format!("{listed} (`taskset -c {cpu}`)"),
            None => format!("{listed} (not pinned)"),
        }
    }

    /// `memcached -V`, or the given server's answer to `version`.
    pub fn version(&self) -> String {
        let Some(started) = &self.started else {
            return self.exchange("version\r\n", |_| true).join(" ");
        };
        Command::new(&started.binary)
            .arg("-V")
            .output()
            .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
            .unwrap_or_else(|_| "unknown version".into())
    }

    fn exchange(&self, command: &str, done: impl Fn(&str) -> bool) -> Vec<String> {
        let mut stream = TcpStream::connect(self.address()).expect("connect to memcached");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("set a read timeout");
        stream
            .write_all(command.as_bytes())
            .expect("write to memcached");
        let mut reader = BufReader::new(stream);
        let mut lines = Vec::new();
        loop {
            let mut line = String::new();
            let read = reader.read_line(&mut line).expect("read from memcached");
            assert!(read > 0, "memcached closed the connection");
            let line = line.trim_end().to_owned();
            let finished = done(&line);
            lines.push(line);
            if finished {
                return lines;
            }
        }
    }

    /// `flush_all`: every item is invalid from now on.
    pub fn flush_all(&self) {
        let reply = self.exchange("flush_all\r\n", |_| true);
        assert_eq!(reply, ["OK"], "flush_all failed");
    }

    /// `stats`: `bytes` and `curr_items`.
    pub fn stats(&self) -> Stats {
        let lines = self.exchange("stats\r\n", |line| line == "END");
        let stat = |name: &str| -> u64 {
            lines
                .iter()
                .find_map(|line| {
                    let mut parts = line.split_whitespace();
                    (parts.next() == Some("STAT") && parts.next() == Some(name))
                        .then(|| parts.next().and_then(|value| value.parse().ok()))
                        .flatten()
                })
                .unwrap_or_else(|| panic!("no `{name}` in memcached's stats"))
        };
        Stats {
            bytes: stat("bytes"),
            items: stat("curr_items"),
        }
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        if let Some(started) = &mut self.started {
            let _ = started.child.kill();
            let _ = started.child.wait();
        }
    }
}
