//! Medians and spreads of repeated measurements.

/// A summary of repeated measurements of one quantity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Stats {
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// The first and third quartiles (linear interpolation).
    pub q1: f64,
    pub q3: f64,
}

impl Stats {
    /// `None` for no samples (or a NaN among them).
    pub(super) fn of(samples: &[f64]) -> Option<Stats> {
        if samples.is_empty() || samples.iter().any(|x| x.is_nan()) {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        Some(Stats {
            n: sorted.len(),
            median: quantile(&sorted, 0.5),
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            q1: quantile(&sorted, 0.25),
            q3: quantile(&sorted, 0.75),
        })
    }
}

/// The `q` quantile of sorted, non-empty `xs`, interpolating between ranks.
fn quantile(xs: &[f64], q: f64) -> f64 {
    let rank = q * (xs.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    xs[lo] + (xs[hi] - xs[lo]) * (rank - lo as f64)
}

/// The `q` quantile of `samples` (0.5 the median, 0.99 the 99th
/// percentile, 1 the maximum), interpolating between ranks; NaN when there
/// are none.
pub(super) fn percentile(samples: &[f64], q: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    quantile(&sorted, q)
}

/// The median of `samples`, NaN when there are none.
pub(super) fn median(samples: &[f64]) -> f64 {
    Stats::of(samples).map_or(f64::NAN, |s| s.median)
}

/// Element-wise ratios of two equally long series of paired measurements.
pub(super) fn paired_ratios(numerators: &[f64], denominators: &[f64]) -> Vec<f64> {
    numerators
        .iter()
        .zip(denominators)
        .map(|(a, b)| a / b)
        .collect()
}
