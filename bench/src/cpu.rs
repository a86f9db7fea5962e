//! What a decision costs in CPU time, on both sides: the benchmark's own
//! process (`getrusage(RUSAGE_SELF)`, user + system) and memcached's (its
//! `stats` `rusage_user` + `rusage_system`, which memcached reads with
//! `getrusage` too, to the microsecond). Read before and after a run; the
//! differences over the run's decisions are the per-decision figures.

use std::time::Duration;

use memcache_ratelimit_testkit::text;

/// CPU time used by this process so far, user and system.
pub fn own() -> Duration {
    // SAFETY: `getrusage` writes the struct it is given and nothing else;
    // a zeroed `rusage` is a valid value of that plain C struct.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 {
            return Duration::ZERO;
        }
        usage
    };
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// memcached's CPU time so far.
#[derive(Debug, Clone, Copy, Default)]
pub struct Server {
    /// `rusage_user + rusage_system`.
    pub cpu: Duration,
    /// `cmd_get`: the keys read so far, by `get` or `mg`, found or not.
    pub gets: u64,
}

impl Server {
    /// Reads it from the `stats` of the memcached at `address`.
    pub fn read(address: &str) -> Self {
        let stats = text::stats(address);
        let number = |name: &str| {
            stats
                .iter()
                .find(|(stat, _)| stat == name)
                .and_then(|(_, value)| value.trim().parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        Self {
            cpu: Duration::from_secs_f64(number("rusage_user") + number("rusage_system")),
            gets: number("cmd_get") as u64,
        }
    }
}

/// A run's cost per decision.
#[derive(Debug, Clone, Copy, Default)]
pub struct PerDecision {
    /// The benchmark process's CPU time, µs.
    pub client_us: f64,
    /// memcached's CPU time, µs.
    pub server_us: f64,
    /// The keys memcached read (`cmd_get`).
    pub server_gets: f64,
}

/// Measures what happens between [`Meter::start`] and [`Meter::finish`].
#[derive(Debug, Clone, Copy)]
pub struct Meter {
    client: Duration,
    server: Server,
}

impl Meter {
    /// Reads both sides now.
    pub fn start(address: &str) -> Self {
        Self {
            server: Server::read(address),
            client: own(),
        }
    }

    /// What was used since the start, per decision of `decisions`.
    pub fn finish(self, address: &str, decisions: u64) -> PerDecision {
        let client = own().saturating_sub(self.client);
        let server = Server::read(address);
        let per = |total: f64| total / decisions.max(1) as f64;
        PerDecision {
            client_us: per(client.as_secs_f64() * 1e6),
            server_us: per(server.cpu.saturating_sub(self.server.cpu).as_secs_f64() * 1e6),
            server_gets: per(server.gets.saturating_sub(self.server.gets) as f64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn the_own_cpu_time_grows_by_the_work_done() {
        let before = own();
        let start = Instant::now();
        let mut spin = 0u64;
        while start.elapsed() < Duration::from_millis(200) {
            spin = std::hint::black_box(spin.wrapping_add(1));
        }
        let used = own() - before;
        // The loop ran on this thread for 200 ms of wall time; it was given
        // most of it unless the machine is very busy, never more.
        assert!(
            used >= Duration::from_millis(20) && used <= Duration::from_millis(400),
            "{used:?}"
        );
    }
}
