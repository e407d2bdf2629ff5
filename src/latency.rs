//! Delivery latency histograms: fixed buckets a minute of attempts is counted in, kept in the
//! activity history, added up over any range and read as percentiles (p50, p95, p99).
//!
//! The buckets are fixed so that minutes (and nodes) add up bucket by bucket; a percentile
//! is interpolated within its bucket, as Prometheus' `histogram_quantile` does, so it is
//! exact to the bucket and an estimate inside it.

/// The buckets' upper bounds, in milliseconds; the last bucket holds everything slower.
pub const BOUNDS_MS: [u64; 12] = [
    5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000,
];

/// Buckets in a histogram: one per bound, and one past the last.
pub const BUCKETS: usize = BOUNDS_MS.len() + 1;

/// How many attempts took how long.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LatencyHistogram {
    counts: [u64; BUCKETS],
}

impl LatencyHistogram {
    /// Count one attempt that took `ms`.
    pub fn record(&mut self, ms: u64) {
        let bucket = BOUNDS_MS
            .iter()
            .position(|&bound| ms <= bound)
            .unwrap_or(BUCKETS - 1);
        self.counts[bucket] += 1;
    }

    /// Add `other`'s attempts to these.
    pub fn add(&mut self, other: &LatencyHistogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts) {
            *mine += theirs;
        }
    }

    /// Attempts counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The latency (ms) under which a fraction `q` (0–1) of the attempts fell; `None` when
    /// none was counted. Interpolated linearly within its bucket; in the last, open-ended
    /// bucket, its lower bound (the histogram knows no more).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = q.clamp(0.0, 1.0) * total as f64;
        let mut below = 0u64;
        for (bucket, &count) in self.counts.iter().enumerate() {
            if count > 0 && (below + count) as f64 >= rank {
                let Some(&upper) = BOUNDS_MS.get(bucket) else {
                    return Some(BOUNDS_MS[BUCKETS - 2] as f64);
                };
                let lower = bucket.checked_sub(1).map_or(0, |b| BOUNDS_MS[b]);
                let within = ((rank - below as f64) / count as f64).clamp(0.0, 1.0);
                return Some(lower as f64 + within * (upper - lower) as f64);
            }
            below += count;
        }
        Some(BOUNDS_MS[BUCKETS - 2] as f64)
    }

    /// The stored form: the bucket counts, comma-separated, trailing empty buckets left out
    /// (`""` for none).
    pub fn to_stored(&self) -> String {
        let used = self
            .counts
            .iter()
            .rposition(|&c| c > 0)
            .map_or(0, |last| last + 1);
        let counts: Vec<String> = self.counts[..used].iter().map(u64::to_string).collect();
        counts.join(",")
    }

    /// Read the stored form back; what does not parse counts as nothing (a history row is a
    /// chart's input, never worth refusing a page for).
    pub fn from_stored(stored: &str) -> Self {
        let mut histogram = Self::default();
        let counts = stored.split(',').filter(|c| !c.is_empty());
        for (slot, count) in histogram.counts.iter_mut().zip(counts) {
            *slot = count.trim().parse().unwrap_or(0);
        }
        histogram
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(latencies: &[u64]) -> LatencyHistogram {
        let mut histogram = LatencyHistogram::default();
        for &ms in latencies {
            histogram.record(ms);
        }
        histogram
    }

    #[test]
    fn percentiles_fall_in_the_right_bucket_and_interpolate_within_it() {
        assert_eq!(LatencyHistogram::default().quantile(0.5), None);
        // 98 fast attempts (≤ 5 ms), one of 200 ms, one of 3 s.
        let mut latencies = vec![3; 98];
        latencies.extend([200, 3_000]);
        let h = of(&latencies);
        assert_eq!(h.count(), 100);
        let p50 = h.quantile(0.5).unwrap();
        assert!(p50 > 0.0 && p50 <= 5.0, "{p50}");
        let p99 = h.quantile(0.99).unwrap();
        assert!(p99 > 100.0 && p99 <= 250.0, "{p99}");
        let p100 = h.quantile(1.0).unwrap();
        assert!(p100 > 2_500.0 && p100 <= 5_000.0, "{p100}");
        // Past the last bound, the last bound is all it can say.
        assert_eq!(of(&[60_000]).quantile(0.5), Some(30_000.0));
        // Bounds are inclusive: 5 ms is in the first bucket.
        assert_eq!(of(&[5]).quantile(1.0), Some(5.0));
    }

    #[test]
    fn histograms_add_up_and_round_trip_through_their_stored_form() {
        let mut a = of(&[1, 7, 7, 400]);
        let b = of(&[7, 40_000]);
        a.add(&b);
        assert_eq!(a.count(), 6);
        assert_eq!(a.to_stored(), "1,3,0,0,0,0,1,0,0,0,0,0,1");
        assert_eq!(LatencyHistogram::from_stored(&a.to_stored()), a);
        assert_eq!(of(&[1, 30]).to_stored(), "1,0,0,1");
        assert_eq!(LatencyHistogram::default().to_stored(), "");
        assert_eq!(
            LatencyHistogram::from_stored(""),
            LatencyHistogram::default()
        );
        assert_eq!(LatencyHistogram::from_stored("x,2"), of(&[7, 7]));
    }
}
