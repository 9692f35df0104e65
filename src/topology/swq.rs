//! Sharding of the per-LLC shared wakequeue: how many FIFO shards each LLC
//! gets and which shard each CPU queues on and pulls from first. The
//! SHARED_RUNQ v3 series sharded because one queue lock per LLC contended
//! badly on large LLCs; it used about six CPUs a shard.

use super::Layout;

/// Shards per LLC, at most (src/bpf/intf.h).
pub const MAX_SHARDS: usize = crate::bpf_intf::nimble_limits_MAX_SWQ_SHARDS as usize;
/// CPUs per shard when the user does not say (the series' choice).
pub const CPUS_PER_SHARD: usize = 6;

/// Shards for an LLC of `nr_cpus` CPUs: `requested`, or one per
/// CPUS_PER_SHARD CPUs; never more than the LLC has CPUs (a shard no CPU
/// queues on would stay empty) nor MAX_SHARDS, never less than one.
pub fn shards_for(nr_cpus: usize, requested: Option<usize>) -> usize {
    let want = requested.unwrap_or_else(|| nr_cpus.div_ceil(CPUS_PER_SHARD));
    want.min(nr_cpus).clamp(1, MAX_SHARDS)
}

/// The shard plan of a whole machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Shards of each LLC.
    pub llc_shards: Vec<usize>,
    /// Shard of each CPU id within its LLC (offline CPUs: 0).
    pub cpu_shard: Vec<usize>,
}

/// Splits each LLC's CPUs, in id order, into `shards_for` contiguous groups
/// whose sizes differ by at most one.
pub fn plan(layout: &Layout, requested: Option<usize>) -> Plan {
    let mut cpu_shard = vec![0; layout.nr_cpu_ids];
    let llc_shards = (0..layout.nr_llcs())
        .map(|llc| {
            let cpus = layout.llc_cpus(llc);
            let n = shards_for(cpus.len(), requested);
            for (i, &cpu) in cpus.iter().enumerate() {
                cpu_shard[cpu] = i * n / cpus.len();
            }
            n
        })
        .collect();
    Plan {
        llc_shards,
        cpu_shard,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(llc_sizes: &[usize]) -> Layout {
        let mut cpu_llc = Vec::new();
        for (llc, &n) in llc_sizes.iter().enumerate() {
            cpu_llc.extend(std::iter::repeat_n(Some(llc), n));
        }
        Layout {
            nr_cpu_ids: cpu_llc.len(),
            cpu_llc,
            llc_node: vec![0; llc_sizes.len()],
            node_distance: vec![vec![10]],
            smt: false,
        }
    }

    #[test]
    fn default_is_about_six_cpus_a_shard() {
        assert_eq!(shards_for(4, None), 1);
        assert_eq!(shards_for(6, None), 1);
        assert_eq!(shards_for(7, None), 2);
        assert_eq!(shards_for(16, None), 3);
        assert_eq!(shards_for(128, None), MAX_SHARDS);
    }

    #[test]
    fn requested_is_clamped_to_the_llc() {
        assert_eq!(shards_for(4, Some(2)), 2);
        assert_eq!(shards_for(4, Some(8)), 4);
        assert_eq!(shards_for(1, Some(3)), 1);
    }

    #[test]
    fn cpus_split_into_even_contiguous_groups() {
        let p = plan(&layout(&[4, 5]), Some(2));
        assert_eq!(p.llc_shards, vec![2, 2]);
        assert_eq!(&p.cpu_shard[..4], &[0, 0, 1, 1]);
        assert_eq!(&p.cpu_shard[4..], &[0, 0, 0, 1, 1]);
        // Every shard gets at least one CPU.
        let p = plan(&layout(&[16]), None);
        assert_eq!(p.llc_shards, vec![3]);
        for s in 0..3 {
            assert!(p.cpu_shard.contains(&s));
        }
    }
}
