//! The server's counters, which `INFO` reports.

use std::sync::atomic::{AtomicU64, Ordering};

/// A counter that only goes up.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// What a rate-limit command decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Allowed,
    Denied,
    /// Read without taking anything (`RL.GET`, `TAKE 0`).
    Read,
    /// Answered with an error.
    Error,
}

impl Outcome {
    /// A decision's outcome.
    pub fn of(decision: &memcache_ratelimit::Decision) -> Self {
        if decision.is_allowed() {
            Self::Allowed
        } else {
            Self::Denied
        }
    }
}

/// One command's counts.
#[derive(Debug, Default)]
pub struct CommandCounts {
    pub calls: Counter,
    pub allowed: Counter,
    pub denied: Counter,
    pub read: Counter,
    pub errors: Counter,
}

impl CommandCounts {
    pub fn record(&self, outcome: Outcome) {
        self.calls.add(1);
        match outcome {
            Outcome::Allowed => self.allowed.add(1),
            Outcome::Denied => self.denied.add(1),
            Outcome::Read => self.read.add(1),
            Outcome::Error => self.errors.add(1),
        }
    }
}

/// The rate-limit commands, in the order `INFO` lists them.
pub const RATE_COMMANDS: [&str; 8] = [
    "rl.reduce",
    "rl.get",
    "rl.preduce",
    "rl.pget",
    "rl.sessionize",
    "rl.psessionize",
    "cl.throttle",
    "rl.window",
];

/// Every counter of the server.
#[derive(Debug, Default)]
pub struct Stats {
    pub connections_received: Counter,
    pub connections_closed: Counter,
    pub connections_rejected: Counter,
    pub commands_processed: Counter,
    pub protocol_errors: Counter,
    pub auth_failures: Counter,
    pub commands: [CommandCounts; 8],
}

impl Stats {
    /// The counts of the rate-limit command `name` (lower case).
    pub fn command(&self, name: &str) -> Option<&CommandCounts> {
        let index = RATE_COMMANDS.iter().position(|c| *c == name)?;
        self.commands.get(index)
    }

    /// Connections open now.
    pub fn connected(&self) -> u64 {
        self.connections_received
            .get()
            .saturating_sub(self.connections_closed.get())
    }
}
