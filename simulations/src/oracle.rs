//! The exact sliding window each decision is judged against, and the
//! metrics of one run.

use std::collections::VecDeque;
use std::time::Duration;

/// Judges a stream of decisions, in time order, against the exact sliding
/// window over the requests the limiter under test actually admitted.
#[derive(Debug)]
pub struct Oracle {
    limit: u64,
    period: Duration,
    /// Times of the admitted requests in the period ending at the latest
    /// request.
    window: VecDeque<Duration>,
    report: Report,
}

/// The outcome of one run.
#[derive(Debug, Default, Clone, Copy)]
pub struct Report {
    /// Requests sent.
    pub offered: u64,
    /// Requests the limiter allowed.
    pub admitted: u64,
    /// Allowed although the exact window was already full.
    pub wrongly_allowed: u64,
    /// Denied although the exact window had room.
    pub wrongly_denied: u64,
    /// Most admitted requests in any interval of one period.
    pub peak: u64,
}

impl Oracle {
    pub fn new(limit: u64, period: Duration) -> Self {
        Self {
            limit,
            period,
            window: VecDeque::new(),
            report: Report::default(),
        }
    }

    /// Records the decision on a request at `at`, no earlier than the last.
    pub fn record(&mut self, at: Duration, admitted: bool) {
        // Keep the admissions in (at - period, at].
        while self
            .window
            .front()
            .is_some_and(|&first| first + self.period <= at)
        {
            self.window.pop_front();
        }
        // Correct to admit iff the count so far plus this request fits.
        let correct_to_admit = (self.window.len() as u64) < self.limit;
        let report = &mut self.report;
        report.offered += 1;
        match (admitted, correct_to_admit) {
            (true, false) => report.wrongly_allowed += 1,
            (false, true) => report.wrongly_denied += 1,
            _ => {}
        }
        if admitted {
            report.admitted += 1;
            self.window.push_back(at);
            report.peak = report.peak.max(self.window.len() as u64);
        }
    }

    pub fn report(&self) -> Report {
        self.report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judges_against_the_admissions_of_the_last_period() {
        let s = Duration::from_secs;
        let mut oracle = Oracle::new(2, s(60));
        oracle.record(s(0), true);
        oracle.record(s(10), true);
        oracle.record(s(20), true); // 2 already in (-40, 20]
        oracle.record(s(30), false); // 3 in (-30, 30]: correct
        oracle.record(s(60), false); // 2 in (0, 60]: correct
        oracle.record(s(70), false); // 1 in (10, 70]: room
        let report = oracle.report();
        assert_eq!(report.offered, 6);
        assert_eq!(report.admitted, 3);
        assert_eq!(report.wrongly_allowed, 1);
        assert_eq!(report.wrongly_denied, 1);
        assert_eq!(report.peak, 3);
    }
}
