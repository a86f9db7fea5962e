//! The metrics of one algorithm on one workload, accumulated decision by
//! decision. `simulations/README.md` defines each one.

use memcache_ratelimit::store::StoreCalls;

/// What the runner knows about one decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observation {
    /// The algorithm allowed the request.
    pub allowed: bool,
    /// The independent exact sliding-window limiter, fed the same stream,
    /// allowed it.
    pub exact_allowed: bool,
    /// `Decision::used()`: what the algorithm counts against the limit
    /// right after the decision.
    pub estimate: f64,
    /// The exact count: the cost the algorithm itself admitted from this
    /// client in `(t − period, t]`, this request included if admitted.
    pub exact: u64,
    /// The request's cost.
    pub cost: u64,
}

/// Running totals.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    limit: f64,
    offered: u64,
    admitted: u64,
    wrongly_allowed: u64,
    wrongly_denied: u64,
    over_limit: u64,
    under_limit_denied: u64,
    diff_sum: f64,
    diff_max: f64,
    rel_sum: f64,
    rel_count: u64,
    peak: u64,
    admitted_before_denial: u64,
    denied_once: bool,
    keys_ratio_sum: f64,
    keys_samples: u64,
    keys_ratio_max: f64,
}

impl Tally {
    /// An empty tally for a quota of `limit`.
    pub fn new(limit: u64) -> Self {
        Self {
            limit: limit as f64,
            ..Self::default()
        }
    }

    /// Counts one decision.
    pub fn record(&mut self, o: Observation) {
        self.offered += 1;
        match (o.allowed, o.exact_allowed) {
            (true, false) => self.wrongly_allowed += 1,
            (false, true) => self.wrongly_denied += 1,
            _ => {}
        }
        if o.allowed {
            self.admitted += 1;
            if o.exact as f64 > self.limit {
                self.over_limit += 1;
            }
            self.peak = self.peak.max(o.exact);
            if !self.denied_once {
                self.admitted_before_denial += 1;
            }
        } else {
            self.denied_once = true;
            if (o.exact + o.cost) as f64 <= self.limit {
                self.under_limit_denied += 1;
            }
        }
        let diff = (o.estimate - o.exact as f64).abs();
        self.diff_sum += diff;
        self.diff_max = self.diff_max.max(diff);
        if o.exact >= 1 {
            self.rel_sum += diff / o.exact as f64;
            self.rel_count += 1;
        }
    }

    /// Counts one sample of the store: `keys` live items while `active`
    /// clients have sent within the last period.
    pub fn sample_keys(&mut self, keys: usize, active: usize) {
        if active == 0 {
            return;
        }
        let ratio = keys as f64 / active as f64;
        self.keys_ratio_sum += ratio;
        self.keys_samples += 1;
        self.keys_ratio_max = self.keys_ratio_max.max(ratio);
    }

    /// The metrics, given the store calls made during the run.
    pub fn finish(&self, calls: StoreCalls) -> Metrics {
        let offered = self.offered.max(1) as f64;
        let percent = |n: u64| 100.0 * n as f64 / offered;
        Metrics {
            offered: self.offered,
            admitted: self.admitted,
            wrongly_allowed_pct: percent(self.wrongly_allowed),
            wrongly_denied_pct: percent(self.wrongly_denied),
            over_limit_pct: percent(self.over_limit),
            under_limit_denied_pct: percent(self.under_limit_denied),
            mean_diff_pct: 100.0 * self.diff_sum / offered / self.limit,
            max_diff_pct: 100.0 * self.diff_max / self.limit,
            mean_rel_pct: (self.rel_count > 0)
                .then(|| 100.0 * self.rel_sum / self.rel_count as f64),
            peak: self.peak as f64 / self.limit,
            admitted_before_denial: self.denied_once.then_some(self.admitted_before_denial),
            ops_per_decision: calls.round_trips() as f64 / offered,
            keys_per_decision: calls.keys as f64 / offered,
            keys_per_client: (self.keys_samples > 0)
                .then(|| self.keys_ratio_sum / self.keys_samples as f64),
            max_keys_per_client: (self.keys_samples > 0).then_some(self.keys_ratio_max),
        }
    }
}

/// The results of one algorithm on one workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Metrics {
    /// Requests sent.
    pub offered: u64,
    /// Requests the algorithm allowed.
    pub admitted: u64,
    /// Allowed by the algorithm, denied by the exact limiter, % of offered.
    pub wrongly_allowed_pct: f64,
    /// Denied by the algorithm, allowed by the exact limiter, % of offered.
    pub wrongly_denied_pct: f64,
    /// Allowed although the algorithm's own admissions in the period ending
    /// with this request, this one included, exceed the limit, % of offered.
    pub over_limit_pct: f64,
    /// Denied although the algorithm's own admissions in the period ending
    /// with this request, plus its cost, are within the limit, % of
    /// offered. With `over_limit_pct`, the wrong decisions judged by what
    /// the algorithm itself admitted: its estimate's errors alone, where
    /// the independent exact limiter's may differ only because its history
    /// of admissions did.
    pub under_limit_denied_pct: f64,
    /// Mean over decisions of |estimate − exact| / limit, in %.
    pub mean_diff_pct: f64,
    /// Maximum over decisions of |estimate − exact| / limit, in %.
    pub max_diff_pct: f64,
    /// Mean over decisions with exact ≥ 1 of |estimate − exact| / exact, in
    /// % (the Cloudflare-style figure).
    pub mean_rel_pct: Option<f64>,
    /// Most admitted cost of one client in any period-long interval,
    /// divided by the limit.
    pub peak: f64,
    /// Requests admitted before the first denial; `None` if nothing was
    /// denied. Meaningful for a single client only.
    pub admitted_before_denial: Option<u64>,
    /// Store round trips per decision.
    pub ops_per_decision: f64,
    /// Keys named in store calls per decision.
    pub keys_per_decision: f64,
    /// Mean over samples of live keys per active client.
    pub keys_per_client: Option<f64>,
    /// Largest sample of live keys per active client.
    pub max_keys_per_client: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(allowed: bool, exact_allowed: bool, estimate: f64, exact: u64) -> Observation {
        Observation {
            allowed,
            exact_allowed,
            estimate,
            exact,
            cost: 1,
        }
    }

    #[test]
    fn each_metric_follows_its_definition() {
        let mut tally = Tally::new(10);
        tally.record(o(true, true, 1.0, 1));
        tally.record(o(true, false, 12.0, 11));
        tally.record(o(false, true, 9.0, 0));
        tally.record(o(true, true, 2.0, 2));
        tally.sample_keys(6, 2);
        tally.sample_keys(2, 2);
        tally.sample_keys(5, 0);
        let calls = StoreCalls {
            increments: 4,
            decrements: 1,
            keys: 10,
            ..StoreCalls::default()
        };
        let m = tally.finish(calls);
        assert_eq!((m.offered, m.admitted), (4, 3));
        assert_eq!(m.wrongly_allowed_pct, 25.0);
        // The one denial came with nothing admitted in its period.
        assert_eq!(m.under_limit_denied_pct, 25.0);
        assert_eq!(m.wrongly_denied_pct, 25.0);
        assert_eq!(m.over_limit_pct, 25.0);
        // Differences 0, 1, 9, 0 over a limit of 10.
        assert!((m.mean_diff_pct - 25.0).abs() < 1e-9);
        assert!((m.max_diff_pct - 90.0).abs() < 1e-9);
        // Relative to exact where exact >= 1: 0/1, 1/11, 0/2.
        assert!((m.mean_rel_pct.unwrap() - 100.0 / 33.0).abs() < 1e-9);
        assert!((m.peak - 1.1).abs() < 1e-9);
        assert_eq!(m.admitted_before_denial, Some(2));
        assert_eq!(m.ops_per_decision, 1.25);
        assert_eq!(m.keys_per_decision, 2.5);
        assert_eq!(m.keys_per_client, Some(2.0));
        assert_eq!(m.max_keys_per_client, Some(3.0));
    }
}
