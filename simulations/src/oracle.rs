//! The exact sliding window: the ground truth every decision is judged
//! against, over what an algorithm admitted ([`ExactWindows`],
//! [`ExactLimiter`]) or over every request sent ([`ExactCounts`]).
//!
//! Times are nanoseconds since the start of a run, in true time. The window
//! of a request at `t` is `(t − period, t]`.

use std::collections::VecDeque;
use std::time::Duration;

/// The admitted cost of one client over the last period, kept exactly.
#[derive(Debug, Clone)]
pub struct ExactWindow {
    period: u64,
    /// `(time, cost)` of each admission still inside the window, oldest
    /// first.
    entries: VecDeque<(u64, u64)>,
    total: u64,
}

impl ExactWindow {
    /// An empty window of `period`.
    pub fn new(period: Duration) -> Self {
        Self {
            period: u64::try_from(period.as_nanos()).unwrap_or(u64::MAX),
            entries: VecDeque::new(),
            total: 0,
        }
    }

    /// The admitted cost in `(now − period, now]`. Calls must come with
    /// `now` never decreasing: older admissions are forgotten.
    pub fn count(&mut self, now: u64) -> u64 {
        while let Some(&(at, cost)) = self.entries.front() {
            if at.saturating_add(self.period) > now {
                break;
            }
            self.entries.pop_front();
            self.total -= cost;
        }
        self.total
    }

    /// Records an admission of `cost` at `now` (no earlier than the last).
    pub fn admit(&mut self, now: u64, cost: u64) {
        self.entries.push_back((now, cost));
        self.total += cost;
    }
}

/// One exact window per client, for clients numbered `0..clients`.
#[derive(Debug, Clone)]
pub struct ExactWindows {
    windows: Vec<ExactWindow>,
}

impl ExactWindows {
    /// `clients` empty windows of `period`.
    pub fn new(clients: usize, period: Duration) -> Self {
        Self {
            windows: vec![ExactWindow::new(period); clients],
        }
    }

    /// The window of `client`.
    pub fn client(&mut self, client: usize) -> &mut ExactWindow {
        &mut self.windows[client]
    }
}

/// An exact sliding-window limiter, the reference decision: a request of
/// cost `c` at `t` is allowed if and only if the cost it has itself admitted
/// in `(t − period, t]`, plus `c`, is at most the limit. Denied requests
/// count for nothing, as with the library's default of refunding them.
#[derive(Debug, Clone)]
pub struct ExactLimiter {
    limit: u64,
    windows: ExactWindows,
}

impl ExactLimiter {
    /// A limiter of `limit` per `period` for clients `0..clients`.
    pub fn new(limit: u64, period: Duration, clients: usize) -> Self {
        Self {
            limit,
            windows: ExactWindows::new(clients, period),
        }
    }

    /// Decides the request of `cost` from `client` at `now`.
    pub fn check(&mut self, client: usize, now: u64, cost: u64) -> bool {
        let window = self.windows.client(client);
        let allowed = window.count(now) + cost <= self.limit;
        if allowed {
            window.admit(now, cost);
        }
        allowed
    }
}

/// The exact count of every request sent, admitted or not: for each
/// client, the cost of all its requests in `(t − period, t]`. This is the
/// reference of the strict-mode comparison ([`crate::strict`]): it depends
/// only on the requests offered, never on any decision, so the algorithm
/// under test and the reference see the same input and never drift apart.
#[derive(Debug, Clone)]
pub struct ExactCounts {
    windows: ExactWindows,
}

impl ExactCounts {
    /// Empty counts of `period` for clients `0..clients`.
    pub fn new(clients: usize, period: Duration) -> Self {
        Self {
            windows: ExactWindows::new(clients, period),
        }
    }

    /// Records the request of `cost` from `client` at `now` and returns the
    /// cost of all of `client`'s requests in `(now − period, now]`, this
    /// one included. Calls must come in time order.
    pub fn offer(&mut self, client: usize, now: u64, cost: u64) -> u64 {
        let window = self.windows.client(client);
        let before = window.count(now);
        window.admit(now, cost);
        before + cost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn the_window_is_half_open_on_the_left() {
        let mut window = ExactWindow::new(Duration::from_secs(60));
        window.admit(0, 1);
        window.admit(10 * S, 2);
        assert_eq!(window.count(59 * S), 3);
        assert_eq!(window.count(60 * S), 2, "(0, 60 s] no longer holds 0");
        assert_eq!(window.count(70 * S), 0);
    }

    #[test]
    fn the_limiter_counts_only_what_it_admits() {
        let mut exact = ExactLimiter::new(2, Duration::from_secs(60), 1);
        assert!(exact.check(0, 0, 1));
        assert!(exact.check(0, 10 * S, 1));
        assert!(!exact.check(0, 20 * S, 1));
        assert!(!exact.check(0, 59 * S, 1));
        assert!(exact.check(0, 60 * S, 1), "the first admission slid out");
        assert!(!exact.check(0, 61 * S, 2));
        assert!(exact.check(0, 130 * S, 2));
    }

    #[test]
    fn the_counts_include_every_request() {
        let mut counts = ExactCounts::new(2, Duration::from_secs(60));
        assert_eq!(counts.offer(0, 0, 1), 1);
        assert_eq!(counts.offer(0, 10 * S, 1), 2);
        assert_eq!(counts.offer(1, 10 * S, 3), 3, "clients are apart");
        assert_eq!(counts.offer(0, 60 * S, 1), 2, "(0, 60 s] no longer holds 0");
        assert_eq!(counts.offer(0, 200 * S, 1), 1);
    }
}
