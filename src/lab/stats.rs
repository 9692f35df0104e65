//! Summary statistics of a cell's samples, and the seeds' "pct vs baseline".

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1); 0 for a single sample.
    pub stddev: f64,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    /// None for no samples: a cell that never ran has no statistics.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() {
            return None;
        }
        let n = samples.len();
        let mean = samples.iter().sum::<f64>() / n as f64;
        let var = if n > 1 {
            samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        let mut s = samples.to_vec();
        s.sort_by(|a, b| a.total_cmp(b));
        let median = if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        };
        Some(Summary {
            n,
            mean,
            stddev: var.sqrt(),
            median,
            min: s[0],
            max: s[n - 1],
        })
    }
}

/// Which statistic a table reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stat {
    Median,
    Mean,
}

impl Stat {
    pub fn pick(self, s: &Summary) -> f64 {
        match self {
            Stat::Median => s.median,
            Stat::Mean => s.mean,
        }
    }
}

/// The seeds' percentage: positive means better than the baseline, whichever
/// way the metric points (seed 002: hackbench 3.92 s → 3.35 s is "14.54 pct").
pub fn pct_vs(base: f64, value: f64, higher_is_better: bool) -> Option<f64> {
    if base == 0.0 || !base.is_finite() || !value.is_finite() {
        return None;
    }
    let gain = if higher_is_better {
        value - base
    } else {
        base - value
    };
    Some(gain / base.abs() * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_odd_even_single() {
        let s = Summary::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!(
            (s.n, s.mean, s.median, s.min, s.max),
            (3, 2.0, 2.0, 1.0, 3.0)
        );
        assert!((s.stddev - 1.0).abs() < 1e-12);
        let s = Summary::of(&[4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!(s.median, 2.5);
        assert!((s.stddev - (5.0f64 / 3.0).sqrt()).abs() < 1e-12);
        let s = Summary::of(&[7.0]).unwrap();
        assert_eq!((s.stddev, s.median), (0.0, 7.0));
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn pct_matches_the_seed() {
        // seed 002, hackbench 1 group: tip 3.92, david 3.35 -> 14.54 pct.
        let p = pct_vs(3.92, 3.35, false).unwrap();
        assert!((p - 14.54).abs() < 0.01, "{p}");
        // seed 002, tbench 1 client: tip 452.49, sis-node 457.94 -> 1.20 pct.
        let p = pct_vs(452.49, 457.94, true).unwrap();
        assert!((p - 1.20).abs() < 0.01, "{p}");
        assert_eq!(pct_vs(0.0, 1.0, true), None);
    }
}
