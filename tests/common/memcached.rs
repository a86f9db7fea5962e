//! Real memcached processes, started on free loopback ports and stopped
//! when dropped. A missing `memcached` binary fails the test with
//! instructions; it never skips.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use memcache_ratelimit::MemcachedStore;

/// A store on `addresses` whose own timeouts (5 s) are far beyond any
/// limiter's deadline, so the deadline is what ends a wait on a hung
/// server.
pub async fn patient_store(addresses: Vec<String>) -> Arc<MemcachedStore> {
    Arc::new(
        MemcachedStore::builder()
            .servers(addresses)
            .io_timeout(Duration::from_secs(5))
            .connect_timeout(Duration::from_secs(5))
            .build()
            .await
            .unwrap(),
    )
}

/// A memcached process owned by a test.
pub struct Memcached {
    binary: PathBuf,
    port: u16,
    child: Option<Child>,
}

const INSTALL: &str = "memcached was not found. Install it (Debian/Ubuntu: \
`sudo apt-get update && sudo apt-get install -y memcached`, macOS: `brew install memcached`), \
or point MEMCACHED_BIN at the binary. `scripts/test` installs it for you.";

fn find_binary() -> PathBuf {
    if let Ok(path) = std::env::var("MEMCACHED_BIN") {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "MEMCACHED_BIN={} is not a file. {INSTALL}",
            path.display()
        );
        return path;
    }
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
        .unwrap_or_else(|| panic!("{INSTALL}"))
}

/// The `pid` that the memcached answering on `stream` reports in `stats`.
fn server_pid(mut stream: TcpStream) -> Option<u32> {
    use std::io::{BufRead, BufReader, Write};
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream.write_all(b"stats\r\n").ok()?;
    for line in BufReader::new(stream).lines() {
        let line = line.ok()?;
        if let Some(pid) = line.strip_prefix("STAT pid ") {
            return pid.trim().parse().ok();
        }
        if line == "END" {
            return None;
        }
    }
    None
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

impl Memcached {
    /// Starts memcached on a free loopback port and waits until it accepts
    /// connections.
    pub fn start() -> Self {
        let mut server = Self {
            binary: find_binary(),
            port: 0,
            child: None,
        };
        for _ in 0..5 {
            server.port = free_port();
            if server.spawn() {
                return server;
            }
        }
        panic!("memcached did not start on any of 5 free ports");
    }

    fn spawn(&mut self) -> bool {
        let mut command = Command::new(&self.binary);
        command
            .args([
                "-l",
                "127.0.0.1",
                "-U",
                "0",
                "-m",
                "64",
                "-t",
                "2",
                "-c",
                "4096",
            ])
            .arg("-p")
            .arg(self.port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if running_as_root() {
            command.args(["-u", "root"]);
        }
        let mut child = command.spawn().unwrap_or_else(|error| {
            panic!("cannot run {}: {error}. {INSTALL}", self.binary.display())
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return false; // exited: port taken, most likely
            }
            if let Ok(stream) =
                TcpStream::connect_timeout(&self.socket(), Duration::from_millis(100))
            {
                // Another test may have started its memcached on the same
                // free port a moment earlier, in which case ours is about
                // to exit: only the process that answers is ours.
                if server_pid(stream) == Some(child.id()) {
                    self.child = Some(child);
                    return true;
                }
                let _ = child.kill();
                let _ = child.wait();
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    /// `127.0.0.1:<port>`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn socket(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// A number from the server's `stats`, such as `incr_misses`.
    pub fn stat(&self, name: &str) -> u64 {
        use std::io::{BufRead, BufReader, Write};
        let mut stream = TcpStream::connect(self.socket()).expect("connect for stats");
        stream.write_all(b"stats\r\n").unwrap();
        let prefix = format!("STAT {name} ");
        for line in BufReader::new(stream).lines() {
            let line = line.unwrap();
            if let Some(value) = line.strip_prefix(&prefix) {
                return value.trim().parse().unwrap();
            }
            assert_ne!(line, "END", "no stat {name}");
        }
        panic!("stats ended early");
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills the process (SIGKILL) and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts a fresh, empty process on the same port.
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self.spawn() {
            assert!(
                Instant::now() < deadline,
                "memcached did not restart on port {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends a signal such as `STOP` or `CONT` to the process.
    pub fn signal(&self, signal: &str) {
        let pid = self.pid().expect("memcached is running");
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} {pid} failed");
        if signal == "STOP" {
            // `kill` returns once the signal is sent; wait until every
            // thread has really stopped, so no request is answered after.
            let deadline = Instant::now() + Duration::from_secs(5);
            while !stopped(pid) {
                assert!(Instant::now() < deadline, "memcached {pid} did not stop");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        if self.child.is_some() {
            // A stopped process ignores SIGKILL until continued on some
            // systems' process accounting; continue it first.
            let _ = self.pid().map(|pid| {
                Command::new("kill")
                    .arg("-CONT")
                    .arg(pid.to_string())
                    .status()
            });
        }
        self.kill();
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
