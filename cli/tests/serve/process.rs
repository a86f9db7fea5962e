//! The real server binary, started on a free loopback port and stopped
//! with SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// A running `memcache-ratelimit serve`.
pub struct Served {
    child: Child,
    /// `host:port` it listens on.
    pub address: String,
    /// Its stderr lines after the one saying where it listens.
    log: mpsc::Receiver<String>,
}

impl Served {
    /// `memcache-ratelimit serve --listen 127.0.0.1:0 <args>`, once it
    /// says where it listens.
    pub fn start(args: &[&str]) -> Self {
        Self::start_with_env(args, &[])
    }

    /// [`start`](Self::start), with `env` set in its environment.
    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_memcache-ratelimit"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the memcache-ratelimit binary starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let (lines, log) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match log.recv_timeout(left) {
                Ok(line) => {
                    if let Some((_, address)) = line.split_once("serving RESP address=") {
                        let address = address.trim().to_owned();
                        return Self {
                            child,
                            address,
                            log,
                        };
                    }
                }
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("the server did not say where it listens within 30 s");
                }
            }
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> String {
        self.address
            .rsplit(':')
            .next()
            .unwrap_or_default()
            .to_owned()
    }

    /// Sends SIGTERM and waits for the exit, at most 20 s; the exit status
    /// and what the server logged after it started.
    pub fn terminate(mut self) -> (ExitStatus, Vec<String>) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status();
        assert!(sent.is_ok_and(|s| s.success()), "kill -TERM {pid}");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                let mut log = Vec::new();
                while let Ok(line) = self.log.recv_timeout(Duration::from_secs(5)) {
                    log.push(line);
                }
                return (status, log);
            }
            assert!(
                Instant::now() < deadline,
                "the server did not stop within 20 s of SIGTERM"
            );
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
