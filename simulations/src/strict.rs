//! Cloudflare's measure of an approximated sliding window, beside the
//! project's own ([`crate::metrics`]).
//!
//! Julien Desgats, "How we built rate limiting capable of scaling to
//! millions of domains", Cloudflare blog, 2017,
//! <https://blog.cloudflare.com/counting-things-a-lot-of-different-things/>,
//! counts every request that matches a rule against its source, and
//! reports, over 400 million requests from 270,000 sources: the share of
//! requests wrongly allowed or rate limited (0.003%), the average
//! difference between the real and the approximate rate (6%), the sources
//! let through although their traffic was slightly above the threshold (3,
//! each less than 15% above it), and the mitigated sources that were below
//! it (none).
//!
//! Here the algorithm runs in strict mode (`DeniedRequests::Counted`: a
//! denied request counts like an allowed one, as at Cloudflare), and each
//! decision is compared with the exact count `x` of all the client's
//! requests in `(t − P, t]`, this one included, admitted or not
//! ([`ExactCounts`]). The reference allows the request if and only if
//! `x ≤ L`. Since `x` depends only on the requests sent, the algorithm and
//! the reference see the same input and never drift apart: each wrong
//! decision is counted once, where it happens. Every comparison that
//! decides a count is made in integers.

use crate::oracle::ExactCounts;
use crate::workload::Workload;

/// Whether a peak exact count `peak` is within ±15% of `limit`:
/// `0.85·limit ≤ peak ≤ 1.15·limit`, compared exactly as
/// `85·limit ≤ 100·peak ≤ 115·limit`. The band is the article's: the
/// sources it let through were less than 15% above the threshold.
pub fn near_limit(peak: u64, limit: u64) -> bool {
    let (peak, limit) = (u128::from(peak), u128::from(limit));
    85 * limit <= 100 * peak && 100 * peak <= 115 * limit
}

/// What the runner knows about one decision of an algorithm in strict mode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StrictObservation {
    /// The client, `0..clients`.
    pub client: usize,
    /// The algorithm allowed the request.
    pub allowed: bool,
    /// `Decision::used()`: what the algorithm counts against the limit
    /// right after the decision; in strict mode it includes this request.
    pub estimate: f64,
    /// The exact count of all the client's requests in `(t − P, t]`, this
    /// one included ([`ExactCounts::offer`]).
    pub exact: u64,
}

/// Whether a peak exact count `peak` stayed under the ±15% band around
/// `limit` ([`near_limit`]): `100·peak < 85·limit`.
pub fn below_band(peak: u64, limit: u64) -> bool {
    100 * u128::from(peak) < 85 * u128::from(limit)
}

/// What one source did, as far as the measure needs it.
#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    requests: u64,
    peak: u64,
    denied: bool,
    wrong: u64,
}

/// Running totals of the strict-mode comparison.
#[derive(Debug, Clone)]
pub struct StrictTally {
    limit: u64,
    offered: u64,
    admitted: u64,
    wrongly_allowed: u64,
    wrongly_denied: u64,
    rel_sum: f64,
    rel_count: u64,
    sources: Vec<Seen>,
}

impl StrictTally {
    /// An empty tally for a quota of `limit`, for clients `0..clients`.
    pub fn new(limit: u64, clients: usize) -> Self {
        Self {
            limit,
            offered: 0,
            admitted: 0,
            wrongly_allowed: 0,
            wrongly_denied: 0,
            rel_sum: 0.0,
            rel_count: 0,
            sources: vec![Seen::default(); clients],
        }
    }

    /// Counts one decision.
    pub fn record(&mut self, o: StrictObservation) {
        self.offered += 1;
        let exact_allows = o.exact <= self.limit;
        let wrong = o.allowed != exact_allows;
        match (o.allowed, exact_allows) {
            (true, false) => self.wrongly_allowed += 1,
            (false, true) => self.wrongly_denied += 1,
            _ => {}
        }
        if o.allowed {
            self.admitted += 1;
        }
        if o.exact >= 1 {
            self.rel_sum += (o.estimate - o.exact as f64).abs() / o.exact as f64;
            self.rel_count += 1;
        }
        let seen = &mut self.sources[o.client];
        seen.requests += 1;
        seen.peak = seen.peak.max(o.exact);
        seen.denied |= !o.allowed;
        seen.wrong += u64::from(wrong);
    }

    /// The metrics.
    pub fn finish(&self) -> StrictMetrics {
        let offered = self.offered.max(1) as f64;
        let percent = |n: u64| 100.0 * n as f64 / offered;
        let sent = || self.sources.iter().filter(|s| s.requests > 0);
        let missed: Vec<&Seen> = sent()
            .filter(|s| s.peak > self.limit && !s.denied)
            .collect();
        StrictMetrics {
            offered: self.offered,
            admitted: self.admitted,
            wrongly_allowed: self.wrongly_allowed,
            wrongly_denied: self.wrongly_denied,
            wrongly_allowed_pct: percent(self.wrongly_allowed),
            wrongly_denied_pct: percent(self.wrongly_denied),
            mean_rel_pct: (self.rel_count > 0)
                .then(|| 100.0 * self.rel_sum / self.rel_count as f64),
            sources_missed: missed.len() as u64,
            sources_missed_max_peak: missed
                .iter()
                .map(|s| s.peak)
                .max()
                .map(|peak| peak as f64 / self.limit as f64),
            sources_wrongly_limited: sent().filter(|s| s.denied && s.peak <= self.limit).count()
                as u64,
            wrong_below_band: sent()
                .filter(|s| below_band(s.peak, self.limit))
                .map(|s| s.wrong)
                .sum(),
        }
    }
}

/// The results of one algorithm in strict mode on one workload, against
/// the exact count of all requests.
#[derive(Debug, Clone, PartialEq)]
pub struct StrictMetrics {
    /// Requests sent.
    pub offered: u64,
    /// Requests the algorithm allowed.
    pub admitted: u64,
    /// Allowed although the exact count, this request included, is over
    /// the limit.
    pub wrongly_allowed: u64,
    /// Denied although the exact count, this request included, is within
    /// the limit.
    pub wrongly_denied: u64,
    /// `wrongly_allowed`, % of offered.
    pub wrongly_allowed_pct: f64,
    /// `wrongly_denied`, % of offered.
    pub wrongly_denied_pct: f64,
    /// Mean over decisions with exact ≥ 1 (every decision, since the count
    /// includes the request) of |estimate − exact| / exact, in %.
    pub mean_rel_pct: Option<f64>,
    /// Sources whose exact count went over the limit but which were never
    /// denied: the article's false negatives.
    pub sources_missed: u64,
    /// The highest peak exact count among them, divided by the limit.
    pub sources_missed_max_peak: Option<f64>,
    /// Sources denied at least once although their exact count never went
    /// over the limit: the article's false positives.
    pub sources_wrongly_limited: u64,
    /// Wrong decisions (allowed or denied) on the requests of sources whose
    /// peak exact count stayed under the ±15% band ([`below_band`]).
    pub wrong_below_band: u64,
}

/// A workload's sources seen through the exact count of all their
/// requests. It depends on the requests alone, not on any algorithm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// Requests sent.
    pub requests: u64,
    /// Sources that sent at least one request.
    pub sources: u64,
    /// Sources whose peak exact count is over the limit: some period-long
    /// window `(t − P, t]` holds more than `L` of their requests.
    pub over_at_peak: u64,
    /// The requests those sources sent.
    pub over_at_peak_requests: u64,
    /// Sources over the limit on average: more than `L` requests per
    /// period over the workload's length (`count·P > L·length`).
    pub over_on_average: u64,
    /// The requests those sources sent.
    pub over_on_average_requests: u64,
    /// Sources whose peak exact count is within ±15% of the limit
    /// ([`near_limit`]).
    pub near_limit: u64,
    /// Requests decided near the limit: whose exact count, this request
    /// included, is within ±15% of it ([`near_limit`]). Only there can an
    /// approximation of the count change a decision by a few percent.
    pub near_limit_requests: u64,
    /// The requests of the sources whose peak exact count stayed under
    /// the ±15% band ([`below_band`]).
    pub below_band_requests: u64,
    /// The requests of the source that sent the most.
    pub heaviest_requests: u64,
}

impl Profile {
    /// The profile of `workload`.
    pub fn of(workload: &Workload) -> Self {
        let clients = workload.clients as usize;
        let limit = workload.quota.limit();
        let mut counts = ExactCounts::new(clients, workload.quota.period());
        let mut seen = vec![Seen::default(); clients];
        let mut near_limit_requests = 0;
        for r in &workload.requests {
            let client = r.client as usize;
            let exact = counts.offer(client, r.at, r.cost);
            near_limit_requests += u64::from(near_limit(exact, limit));
            seen[client].requests += 1;
            seen[client].peak = seen[client].peak.max(exact);
        }
        let period = u128::from(workload.period());
        let over_on_average = |s: &Seen| {
            u128::from(s.requests) * period > u128::from(limit) * u128::from(workload.length)
        };
        let sent: Vec<&Seen> = seen.iter().filter(|s| s.requests > 0).collect();
        let over_at_peak: Vec<&&Seen> = sent.iter().filter(|s| s.peak > limit).collect();
        let on_average: Vec<&&Seen> = sent.iter().filter(|s| over_on_average(s)).collect();
        Profile {
            requests: workload.requests.len() as u64,
            sources: sent.len() as u64,
            over_at_peak: over_at_peak.len() as u64,
            over_at_peak_requests: over_at_peak.iter().map(|s| s.requests).sum(),
            over_on_average: on_average.len() as u64,
            over_on_average_requests: on_average.iter().map(|s| s.requests).sum(),
            near_limit: sent.iter().filter(|s| near_limit(s.peak, limit)).count() as u64,
            near_limit_requests,
            below_band_requests: sent
                .iter()
                .filter(|s| below_band(s.peak, limit))
                .map(|s| s.requests)
                .sum(),
            heaviest_requests: sent.iter().map(|s| s.requests).max().unwrap_or(0),
        }
    }

    /// `n` as a percentage of the sources that sent.
    pub fn of_sources(&self, n: u64) -> f64 {
        100.0 * n as f64 / self.sources.max(1) as f64
    }

    /// `n` as a percentage of the requests.
    pub fn of_requests(&self, n: u64) -> f64 {
        100.0 * n as f64 / self.requests.max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(client: usize, allowed: bool, estimate: f64, exact: u64) -> StrictObservation {
        StrictObservation {
            client,
            allowed,
            estimate,
            exact,
        }
    }

    #[test]
    fn the_band_is_exact() {
        assert!(near_limit(85, 100));
        assert!(near_limit(115, 100));
        assert!(!near_limit(84, 100));
        assert!(!near_limit(116, 100));
        // 0.85 × 7 = 5.95 and 1.15 × 7 = 8.05.
        assert!(!near_limit(5, 7));
        assert!(near_limit(6, 7));
        assert!(near_limit(8, 7));
        assert!(!near_limit(9, 7));
        assert!(below_band(84, 100) && !below_band(85, 100));
        assert!(below_band(5, 7) && !below_band(6, 7));
    }

    #[test]
    fn each_metric_follows_its_definition() {
        let mut tally = StrictTally::new(2, 4);
        // Client 0: allowed at 1 and 2, wrongly allowed at 3, denied at 3.
        tally.record(o(0, true, 1.0, 1));
        tally.record(o(0, true, 2.0, 2));
        tally.record(o(0, true, 2.5, 3));
        tally.record(o(0, false, 3.0, 3));
        // Client 1: wrongly denied at 2, so wrongly limited.
        tally.record(o(1, true, 1.5, 1));
        tally.record(o(1, false, 2.5, 2));
        // Client 2: over the limit, never denied: missed.
        tally.record(o(2, true, 1.0, 1));
        tally.record(o(2, true, 2.0, 4));
        let m = tally.finish();
        assert_eq!((m.offered, m.admitted), (8, 6));
        assert_eq!((m.wrongly_allowed, m.wrongly_denied), (2, 1));
        assert_eq!(m.wrongly_allowed_pct, 25.0);
        assert_eq!(m.wrongly_denied_pct, 12.5);
        // |e − x| / x: 0, 0, 0.5/3, 0, 0.5, 0.5/2, 0, 2/4.
        let expected = 100.0 * (0.5 / 3.0 + 0.5 + 0.25 + 0.5) / 8.0;
        assert!((m.mean_rel_pct.unwrap() - expected).abs() < 1e-9);
        assert_eq!(m.sources_missed, 1);
        assert_eq!(m.sources_missed_max_peak, Some(2.0));
        assert_eq!(m.sources_wrongly_limited, 1);
        assert_eq!(m.wrong_below_band, 0, "every peak is 2 or more");
    }
}
