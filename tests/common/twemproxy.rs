//! Twemproxy (nutcracker) on loopback in front of real memcached
//! processes, as a fleet behind a proxy runs. A missing `nutcracker`
//! binary fails the test with instructions; it never skips.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::memcached::Memcached;

const INSTALL: &str = "nutcracker (twemproxy) was not found. Install it (Debian/Ubuntu: \
`sudo apt-get update && sudo apt-get install -y nutcracker`), or point NUTCRACKER_BIN at the \
binary. `scripts/test` installs it for you.";

/// A nutcracker process and the memcached processes behind it, stopped
/// when dropped.
pub struct Twemproxy {
    child: Child,
    port: u16,
    dir: PathBuf,
    /// The servers behind the proxy.
    pub backends: Vec<Memcached>,
}

fn find_binary() -> PathBuf {
    if let Ok(path) = std::env::var("NUTCRACKER_BIN") {
        return PathBuf::from(path);
    }
    let mut candidates: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("nutcracker"))
                .collect()
        })
        .unwrap_or_default();
    candidates.push(PathBuf::from("/usr/sbin/nutcracker"));
    candidates
        .into_iter()
        .find(|path| path.is_file())
        .unwrap_or_else(|| panic!("{INSTALL}"))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

impl Twemproxy {
    /// Starts `backends` memcached processes and a nutcracker in front of
    /// them (ketama over fnv1a_64, as twemproxy's examples configure it).
    pub fn start(backends: usize) -> Self {
        let binary = find_binary();
        let backends: Vec<Memcached> = (0..backends).map(|_| Memcached::start()).collect();
        for _ in 0..5 {
            let (port, stats) = (free_port(), free_port());
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
                    panic!("cannot run {}: {error}. {INSTALL}", binary.display())
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
        }
        panic!("nutcracker did not start on any of 5 free ports");
    }

    /// `127.0.0.1:<port>`, where clients connect.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Twemproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
