//! One memcached process on a free loopback port, stopped when dropped.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{binary, process, text};

/// The arguments of [`Memcached::start`]: no UDP, 64 MiB, 2 threads,
/// 4096 connections.
pub const TEST_ARGS: [&str; 8] = ["-U", "0", "-m", "64", "-t", "2", "-c", "4096"];

/// How a [`Memcached`] is started: its binary, its arguments and the CPU
/// it is pinned to.
#[derive(Debug, Clone)]
pub struct Builder {
    binary: Option<PathBuf>,
    args: Vec<String>,
    cpu: Option<usize>,
}

impl Builder {
    /// The binary to run, instead of the one [`binary::memcached`] finds.
    pub fn binary(mut self, binary: impl Into<PathBuf>) -> Self {
        self.binary = Some(binary.into());
        self
    }

    /// memcached's arguments (such as `-t 1 -m 1024`), instead of
    /// [`TEST_ARGS`]. `-l 127.0.0.1`, `-p <port>` and, as root,
    /// `-u root` are always added.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args = args.into_iter().map(Into::into).collect();
        self
    }

    /// Pins the server to `cpu` (`taskset -c <cpu>`); `None` leaves it
    /// unpinned.
    pub fn cpu(mut self, cpu: Option<usize>) -> Self {
        self.cpu = cpu;
        self
    }

    /// Starts memcached on a free loopback port and waits until it
    /// answers, trying up to 5 ports.
    ///
    /// # Panics
    ///
    /// When the binary is missing (with instructions) or the server does
    /// not start.
    pub fn start(self) -> Memcached {
        let mut flags = vec!["-l".to_owned(), "127.0.0.1".to_owned()];
        flags.extend(self.args);
        if process::running_as_root() {
            flags.extend(["-u".to_owned(), "root".to_owned()]);
        }
        let mut server = Memcached {
            binary: self.binary.unwrap_or_else(binary::memcached),
            flags,
            cpu: self.cpu,
            port: 0,
            child: None,
        };
        for _ in 0..5 {
            server.port = process::free_port();
            if server.spawn() {
                return server;
            }
        }
        panic!("memcached did not start on any of 5 free ports");
    }
}

/// A memcached process on `127.0.0.1`, killed when dropped.
#[derive(Debug)]
pub struct Memcached {
    binary: PathBuf,
    flags: Vec<String>,
    cpu: Option<usize>,
    port: u16,
    child: Option<Child>,
}

impl Memcached {
    /// Starts memcached with [`TEST_ARGS`] on a free loopback port and
    /// waits until it answers.
    ///
    /// # Panics
    ///
    /// When the binary is missing (with instructions) or the server does
    /// not start.
    pub fn start() -> Self {
        Self::builder().start()
    }

    /// A memcached to start with its own binary, arguments or CPU.
    pub fn builder() -> Builder {
        Builder {
            binary: None,
            args: TEST_ARGS.map(String::from).to_vec(),
            cpu: None,
        }
    }

    fn spawn(&mut self) -> bool {
        let mut command = match self.cpu {
            Some(cpu) => {
                let mut command = Command::new("taskset");
                command.arg("-c").arg(cpu.to_string()).arg(&self.binary);
                command
            }
            None => Command::new(&self.binary),
        };
        command
            .args(&self.flags)
            .arg("-p")
            .arg(self.port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = command.spawn().unwrap_or_else(|error| {
            panic!(
                "cannot run {}: {error}. {}",
                self.binary.display(),
                binary::MEMCACHED_INSTALL
            )
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return false; // exited: port taken, most likely
            }
            if let Ok(stream) =
                TcpStream::connect_timeout(&self.socket(), Duration::from_millis(100))
            {
                // Another process may have started its memcached on the
                // same free port a moment earlier, in which case ours is
                // about to exit: only the process that answers is ours
                // (`taskset` runs memcached in its own process).
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

    /// The binary this server runs.
    pub fn binary(&self) -> &Path {
        &self.binary
    }

    /// The arguments it runs with, the port aside.
    pub fn flags(&self) -> &[String] {
        &self.flags
    }

    /// The CPU it is pinned to, if any.
    pub fn cpu(&self) -> Option<usize> {
        self.cpu
    }

    /// `memcached -V`, such as `memcached 1.6.21`.
    pub fn version(&self) -> String {
        Command::new(&self.binary)
            .arg("-V")
            .output()
            .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
            .unwrap_or_else(|_| "unknown version".into())
    }

    /// A number from the server's `stats`, such as `incr_misses`.
    ///
    /// # Panics
    ///
    /// When the server does not answer or has no such number.
    pub fn stat(&self, name: &str) -> u64 {
        text::stat(&self.address(), name)
    }

    /// `flush_all`: every item is invalid from now on.
    pub fn flush_all(&self) {
        text::flush_all(&self.address());
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

    /// Starts a fresh, empty process on the same port, with the same
    /// binary, arguments and CPU.
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

    /// Sends a signal such as `STOP` or `CONT` to the process. After
    /// `STOP`, returns once every thread has stopped, so no request is
    /// answered after it.
    pub fn signal(&self, signal: &str) {
        let pid = self.pid().expect("memcached is running");
        process::signal(pid, signal);
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        if let Some(pid) = self.pid() {
            // A stopped process ignores SIGKILL until continued on some
            // systems' process accounting; continue it first.
            let _ = Command::new("kill")
                .arg("-CONT")
                .arg(pid.to_string())
                .status();
        }
        self.kill();
    }
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

#[cfg(test)]
mod tests {
    use super::Memcached;

    #[test]
    fn starts_answers_stops_and_restarts_empty() {
        let mut server = Memcached::builder()
            .args(["-U", "0", "-m", "8", "-t", "1"])
            .start();
        assert!(server.flags().iter().any(|flag| flag == "8"));
        assert_eq!(server.stat("curr_items"), 0);
        assert_eq!(
            crate::text::exchange(&server.address(), "set k 0 0 1\r\nv\r\n", |_| true),
            ["STORED"]
        );
        assert_eq!(server.stat("curr_items"), 1);
        server.restart();
        assert_eq!(server.stat("curr_items"), 0);
        let pid = server.pid().expect("running");
        server.kill();
        assert!(server.pid().is_none());
        assert!(!std::path::Path::new(&format!("/proc/{pid}/status")).exists());
    }
}
