//! Decisions recorded over time for one client, for the figures.

/// One decision of the traced client.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TracePoint {
    /// True time, in nanoseconds since the start.
    pub at: u64,
    /// `Decision::used()` right after the decision.
    pub estimate: f64,
    /// The exact count in the last period: of the algorithm's own
    /// admissions, or in strict mode of every request sent.
    pub exact: f64,
    /// Whether the request was allowed.
    pub allowed: bool,
}

impl TracePoint {
    /// The time in seconds since the start.
    pub fn seconds(&self) -> f64 {
        self.at as f64 / 1e9
    }
}

/// One quantity of `trace` against time in seconds, downsampled to at
/// most about `max` points ([`downsample`]): a line of a figure.
pub fn series(trace: &[TracePoint], value: fn(&TracePoint) -> f64, max: usize) -> Vec<(f64, f64)> {
    let points: Vec<(f64, f64)> = trace.iter().map(|p| (p.seconds(), value(p))).collect();
    downsample(&points, max)
}

/// At most about `max` of `points` (in time order), keeping the shape: the
/// points are cut into `max / 2` runs of equal length and each run keeps
/// its lowest and its highest point, in time order. Fewer than `max` points
/// are kept as they are.
pub fn downsample(points: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
    if points.len() <= max || max < 2 {
        return points.to_vec();
    }
    let runs = max / 2;
    let size = points.len().div_ceil(runs);
    let mut kept = Vec::with_capacity(max);
    for run in points.chunks(size) {
        let by_y = |a: &&(f64, f64), b: &&(f64, f64)| a.1.total_cmp(&b.1);
        let (low, high) = (
            run.iter()
                .enumerate()
                .min_by(|a, b| by_y(&a.1, &b.1))
                .unwrap(),
            run.iter()
                .enumerate()
                .max_by(|a, b| by_y(&a.1, &b.1))
                .unwrap(),
        );
        let (first, second) = if low.0 <= high.0 {
            (low, high)
        } else {
            (high, low)
        };
        kept.push(*first.1);
        if second.0 != first.0 {
            kept.push(*second.1);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_extremes_in_time_order() {
        let points: Vec<(f64, f64)> = (0..100)
            .map(|i| (i as f64, ((i * 37) % 11) as f64))
            .collect();
        let kept = downsample(&points, 20);
        assert!(kept.len() <= 20);
        assert!(kept.windows(2).all(|w| w[0].0 < w[1].0));
        let max = kept.iter().map(|p| p.1).fold(f64::MIN, f64::max);
        assert_eq!(max, 10.0);
        assert_eq!(downsample(&points[..5], 20), points[..5].to_vec());
    }
}
