//! The queue-wait histograms BPF keeps (struct wait_hist in intf.h): log2
//! buckets split in four, so a percentile read from it is within 25 %.

use crate::bpf_intf::nimble_limits_WAIT_HIST_BUCKETS;

pub const BUCKETS: usize = nimble_limits_WAIT_HIST_BUCKETS as usize;

/// The bucket of a wait of `ns`: wait_hist_bucket() of src/bpf/rules.h,
/// the function BPF fills the buckets with, compiled for the host.
pub fn bucket(ns: u64) -> usize {
    crate::topology::rules::wait_hist_bucket(ns)
}

/// The smallest wait that falls in bucket `b`.
pub fn lower(b: usize) -> u64 {
    if b < 4 {
        return b as u64;
    }
    let m = b / 4 + 1;
    (1u64 << m) + ((b % 4) as u64) * (1u64 << (m - 2))
}

/// The largest wait bucket `b` holds (the last bucket is open-ended).
pub fn upper(b: usize) -> u64 {
    if b + 1 >= BUCKETS {
        u64::MAX
    } else {
        lower(b + 1) - 1
    }
}

/// The `q`-quantile (0 < q <= 1) of a histogram, as the upper bound of the
/// bucket it falls in (the lower bound for the open last bucket); None if
/// empty.
pub fn quantile(h: &[u64], q: f64) -> Option<u64> {
    let total: u64 = h.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((q * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for (b, &n) in h.iter().enumerate() {
        seen += n;
        if seen >= rank {
            return Some(if b + 1 >= BUCKETS { lower(b) } else { upper(b) });
        }
    }
    None
}

/// Adds histogram `b` into `a`.
pub fn add(a: &mut [u64], b: &[u64]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_bounded() {
        for b in 0..BUCKETS - 1 {
            assert_eq!(bucket(lower(b)), b, "lower of {b}");
            assert_eq!(bucket(upper(b)), b, "upper of {b}");
            assert_eq!(upper(b) + 1, lower(b + 1));
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(4), 4);
        assert_eq!(bucket(8), 8);
        // ~8.6 s and more share the last bucket.
        assert_eq!(bucket(1 << 33), BUCKETS - 1);
    }

    #[test]
    fn resolution_is_a_quarter_of_a_power_of_two() {
        for ns in [5u64, 100, 1_000, 12_345, 1_000_000, 3_000_000_000] {
            let b = bucket(ns);
            let width = (upper(b) - lower(b) + 1) as f64;
            assert!(width / lower(b) as f64 <= 0.25 + 1e-9, "{ns}");
        }
    }

    #[test]
    fn quantiles() {
        let mut h = vec![0u64; BUCKETS];
        assert_eq!(quantile(&h, 0.5), None);
        // 90 waits of ~1 us, 10 of ~1 ms.
        h[bucket(1_000)] = 90;
        h[bucket(1_000_000)] = 10;
        let p50 = quantile(&h, 0.5).unwrap();
        let p99 = quantile(&h, 0.99).unwrap();
        assert!((1_000..1_250).contains(&p50), "{p50}");
        assert!((1_000_000..1_250_000).contains(&p99), "{p99}");
        assert_eq!(quantile(&h, 0.9), Some(upper(bucket(1_000))));
    }
}
