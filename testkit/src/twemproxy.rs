//! Twemproxy (nutcracker) on loopback in front of real memcached
//! processes, as a fleet behind a proxy runs.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{binary, process, Memcached};

/// A nutcracker process and the memcached processes behind it, all
/// stopped when dropped.
#[derive(Debug)]
pub struct Twemproxy {
    child: Child,
    port: u16,
    dir: PathBuf,
    /// The servers behind the proxy.
    pub backends: Vec<Memcached>,
}

impl Twemproxy {
    /// Starts `backends` memcached processes ([`Memcached::start`]) and a
    /// nutcracker in front of them (ketama over fnv1a_64, as twemproxy's
    /// examples configure it, hosts never ejected), trying up to 5 ports.
    ///
    /// # Panics
    ///
    /// When a binary is missing (with instructions) or a process does not
    /// start.
    pub fn start(backends: usize) -> Self {
        let binary = binary::nutcracker();
        let backends: Vec<Memcached> = (0..backends).map(|_| Memcached::start()).collect();
        for _ in 0..5 {
            let (port, stats) = (process::free_port(), process::free_port());
            let dir = std::env::temp_dir().join(format!(
                "memcache-ratelimit-twemproxy-{}-{port}",
                std::process::id()
            ));
            std::fs::create_dir_all(&dir).unwrap();
            let servers: String = backends
                .iter()
                .map(|server| format!("   - {}:1\n", server.address()))
                .collect();
            let config = dir.join("nutcracker.yml");
            std::fs::write(
                &config,
                format!(
                    "pool:\n  listen: 127.0.0.1:{port}\n  hash: fnv1a_64\n  distribution: ketama\n  \
                     timeout: 5000\n  auto_eject_hosts: false\n  servers:\n{servers}"
                ),
            )
            .unwrap();
            let mut child = Command::new(&binary)
                .arg("-c")
                .arg(&config)
                .args(["-s", &stats.to_string(), "-a", "127.0.0.1"])
                .arg("-o")
                .arg(dir.join("nutcracker.log"))
                .arg("-p")
                .arg(dir.join("nutcracker.pid"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|error| {
                    panic!(
                        "cannot run {}: {error}. {}",
                        binary.display(),
                        binary::NUTCRACKER_INSTALL
                    )
                });
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break; // exited: a port was taken, most likely
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Self {
                        child,
                        port,
                        dir,
                        backends,
                    };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_dir_all(&dir);
        }
        panic!("nutcracker did not start on any of 5 free ports");
    }

    /// `127.0.0.1:<port>`, where clients connect.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The nutcracker process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a signal such as `STOP` or `CONT` to nutcracker (not to the
    /// servers behind it).
    pub fn signal(&self, signal: &str) {
        process::signal(self.pid(), signal);
    }
}

impl Drop for Twemproxy {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-CONT")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::Twemproxy;

    #[test]
    fn forwards_to_the_servers_behind_it() {
        let proxy = Twemproxy::start(2);
        let address = proxy.address();
        for key in 0..8 {
            let set = format!("set k{key} 0 0 1\r\nv\r\n");
            assert_eq!(crate::text::exchange(&address, &set, |_| true), ["STORED"]);
        }
        let items: u64 = proxy
            .backends
            .iter()
            .map(|server| server.stat("curr_items"))
            .sum();
        assert_eq!(items, 8);
    }
}
