//! Scheduler counters: summed from BPF's per-CPU counters, printed as one
//! line, and checked for consistency (every queued task is accounted exactly
//! once when it leaves its queue; see src/bpf/intf.h).

use crate::bpf_intf::*;
use std::fmt;

pub const NR_STATS: usize = nimble_stat_NR_NIMBLE_STATS as usize;
pub const NR_NODE_STATS: usize = node_stat_NR_NODE_STATS as usize;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    pub cnt: [u64; NR_STATS],
    /// Tasks queued by us that have neither run nor been dropped.
    pub pending: u64,
    /// Runnable tasks per node (signed: a bug would show as negative).
    pub node_running: Vec<i64>,
    /// NUMA counters per node (enum node_stat).
    pub node: Vec<[u64; NR_NODE_STATS]>,
}

/// (index, short name) of every counter, in print order.
const NAMES: [(u32, &str); NR_STATS] = [
    (nimble_stat_STAT_INS_DIRECT, "ins_direct"),
    (nimble_stat_STAT_INS_LOCAL, "ins_local"),
    (nimble_stat_STAT_INS_LLC, "ins_llc"),
    (nimble_stat_STAT_RUN_DIRECT, "run_direct"),
    (nimble_stat_STAT_RUN_LOCAL, "run_local"),
    (nimble_stat_STAT_RUN_LLC_OWN, "llc_own"),
    (nimble_stat_STAT_RUN_LLC_NODE, "steal_node"),
    (nimble_stat_STAT_RUN_LLC_REMOTE, "steal_remote"),
    (nimble_stat_STAT_DROPPED, "dropped"),
    (nimble_stat_STAT_IDLE_PREV, "idle_prev"),
    (nimble_stat_STAT_IDLE_LLC, "idle_llc"),
    (nimble_stat_STAT_IDLE_NODE, "idle_node"),
    (nimble_stat_STAT_IDLE_ANY, "idle_any"),
    (nimble_stat_STAT_KICK, "kick"),
    (nimble_stat_STAT_KEEP_RUNNING, "keep_running"),
];

/// (index, short name) of every per-node NUMA counter, in print order.
const NODE_NAMES: [(u32, &str); NR_NODE_STATS] = [
    (node_stat_NSTAT_FORK_LOCAL, "fork_local"),
    (node_stat_NSTAT_FORK_REMOTE, "fork_remote"),
    (node_stat_NSTAT_PULL, "numa_pull"),
    (node_stat_NSTAT_PUSH, "numa_push"),
    (node_stat_NSTAT_REFUSED, "numa_refused"),
    (node_stat_NSTAT_HOME_RETURN, "home_return"),
];

/// Sums per-CPU copies of a u64 counter array (raw map values).
fn sum_percpu<const N: usize>(values: &[Vec<u8>]) -> [u64; N] {
    let mut out = [0u64; N];
    for v in values {
        for (i, chunk) in v.chunks_exact(8).take(N).enumerate() {
            out[i] += u64::from_ne_bytes(chunk.try_into().unwrap());
        }
    }
    out
}

impl Counters {
    /// Sums per-CPU copies of `struct nimble_stats` (raw map values).
    pub fn from_percpu(values: &[Vec<u8>], pending: u64, node_running: Vec<i64>) -> Self {
        Counters {
            cnt: sum_percpu(values),
            pending,
            node_running,
            node: Vec::new(),
        }
    }

    /// Adds one node's per-CPU `struct node_stats` values (call per node).
    pub fn push_node(&mut self, values: &[Vec<u8>]) {
        self.node.push(sum_percpu(values));
    }

    /// A NUMA counter summed over nodes.
    pub fn node_total(&self, stat: u32) -> u64 {
        self.node.iter().map(|n| n[stat as usize]).sum()
    }

    pub fn get(&self, stat: u32) -> u64 {
        self.cnt[stat as usize]
    }

    pub fn inserted(&self) -> u64 {
        self.get(nimble_stat_STAT_INS_DIRECT)
            + self.get(nimble_stat_STAT_INS_LOCAL)
            + self.get(nimble_stat_STAT_INS_LLC)
    }

    /// Tasks that ran after being queued, by every path.
    pub fn dispatched(&self) -> u64 {
        self.get(nimble_stat_STAT_RUN_DIRECT)
            + self.get(nimble_stat_STAT_RUN_LOCAL)
            + self.get(nimble_stat_STAT_RUN_LLC_OWN)
            + self.get(nimble_stat_STAT_RUN_LLC_NODE)
            + self.get(nimble_stat_STAT_RUN_LLC_REMOTE)
    }

    /// Inserted minus accounted-for (ran, dropped or still pending). Zero when
    /// the books balance; only meaningful on a snapshot BPF no longer writes
    /// (after unload), since live per-CPU reads are not atomic.
    pub fn imbalance(&self) -> i128 {
        self.inserted() as i128
            - (self.dispatched() + self.get(nimble_stat_STAT_DROPPED) + self.pending) as i128
    }
}

impl fmt::Display for Counters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (idx, name)) in NAMES.iter().enumerate() {
            if i > 0 {
                write!(f, " ")?;
            }
            write!(f, "{name}={}", self.cnt[*idx as usize])?;
        }
        write!(f, " pending={}", self.pending)?;
        let nodes: Vec<String> = self.node_running.iter().map(|n| n.to_string()).collect();
        write!(f, " node_running={}", nodes.join(","))?;
        if self.node.len() > 1 {
            // Totals, then one value per node: fork_local=5 node_fork_local=4,1
            for (idx, name) in NODE_NAMES {
                let per: Vec<String> = self
                    .node
                    .iter()
                    .map(|n| n[idx as usize].to_string())
                    .collect();
                write!(
                    f,
                    " {name}={} node_{name}={}",
                    self.node_total(idx),
                    per.join(",")
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(vals: &[(u32, u64)]) -> Vec<u8> {
        let mut v = [0u64; NR_STATS];
        for &(i, x) in vals {
            v[i as usize] = x;
        }
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    #[test]
    fn names_cover_every_counter_once() {
        let mut idx: Vec<u32> = NAMES.iter().map(|n| n.0).collect();
        idx.sort();
        assert_eq!(idx, (0..NR_STATS as u32).collect::<Vec<_>>());
    }

    #[test]
    fn sums_over_cpus_and_balances() {
        let cpu0 = raw(&[
            (nimble_stat_STAT_INS_LLC, 5),
            (nimble_stat_STAT_RUN_LLC_OWN, 3),
        ]);
        let cpu1 = raw(&[
            (nimble_stat_STAT_INS_DIRECT, 2),
            (nimble_stat_STAT_RUN_DIRECT, 2),
        ]);
        let cpu2 = raw(&[(nimble_stat_STAT_RUN_LLC_REMOTE, 1)]);
        let c = Counters::from_percpu(&[cpu0, cpu1, cpu2], 1, vec![2, 0]);
        assert_eq!(c.inserted(), 7);
        assert_eq!(c.dispatched(), 6);
        assert_eq!(c.imbalance(), 0);
        let line = c.to_string();
        assert!(
            line.contains("ins_llc=5") && line.contains("steal_remote=1"),
            "{line}"
        );
        assert!(line.ends_with("pending=1 node_running=2,0"), "{line}");
    }

    #[test]
    fn node_counters_print_totals_and_per_node() {
        let mut c = Counters::from_percpu(&[], 0, vec![1, 2]);
        let n0: Vec<u8> = [3u64, 1, 0, 0, 2, 0]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        let n1: Vec<u8> = [0u64, 0, 4, 1, 0, 2]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        c.push_node(&[n0.clone(), n0]);
        c.push_node(&[n1]);
        assert_eq!(c.node_total(node_stat_NSTAT_FORK_LOCAL), 6);
        let line = c.to_string();
        assert!(line.contains(" fork_local=6 node_fork_local=6,0"), "{line}");
        assert!(line.contains(" numa_pull=4 node_numa_pull=0,4"), "{line}");
        assert!(
            line.contains(" home_return=2 node_home_return=0,2"),
            "{line}"
        );
        let mut idx: Vec<u32> = NODE_NAMES.iter().map(|n| n.0).collect();
        idx.sort();
        assert_eq!(idx, (0..NR_NODE_STATS as u32).collect::<Vec<_>>());
    }

    #[test]
    fn a_lost_task_shows_as_imbalance() {
        let cpu0 = raw(&[
            (nimble_stat_STAT_INS_LLC, 4),
            (nimble_stat_STAT_RUN_LLC_NODE, 2),
        ]);
        let c = Counters::from_percpu(&[cpu0], 1, vec![]);
        assert_eq!(c.imbalance(), 1);
    }
}
