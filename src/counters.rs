//! The scheduler's raw counters as BPF keeps them (per CPU, per node, per
//! LLC), and the books: every queued task is accounted exactly once when it
//! leaves its queue (src/bpf/intf.h). stats.rs turns them into metrics.

use crate::bpf_intf::*;
use crate::hist;

pub const NR_STATS: usize = nimble_stat_NR_NIMBLE_STATS as usize;
pub const NR_NODE_STATS: usize = node_stat_NR_NODE_STATS as usize;
pub const NR_LLC_STATS: usize = llc_stat_NR_LLC_STATS as usize;

pub const NR_WAIT_QUEUES: usize = wait_queue_NR_WAIT_QUEUES as usize;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    /// Event counters summed over CPUs (enum nimble_stat).
    pub cnt: [u64; NR_STATS],
    /// The same, per CPU (index: CPU id).
    pub per_cpu: Vec<[u64; NR_STATS]>,
    /// Tasks queued by us that have neither run nor been dropped.
    pub pending: u64,
    /// Runnable tasks per node (signed: a bug would show as negative).
    pub node_running: Vec<i64>,
    /// Runnable tasks per LLC.
    pub llc_running: Vec<i64>,
    /// NUMA counters per node (enum node_stat), by the node they concern.
    pub node: Vec<[u64; NR_NODE_STATS]>,
    /// The same counts by the CPU that counted them (index: CPU id).
    pub node_by_cpu: Vec<[u64; NR_NODE_STATS]>,
    /// Shared wakequeue counters per LLC (enum llc_stat).
    pub llc: Vec<[u64; NR_LLC_STATS]>,
    /// Tasks in each LLC's swq.
    pub swq_depth: Vec<i64>,
    /// Tasks in each LLC's DSQ.
    pub llc_queued: Vec<i64>,
    /// Wait histograms per LLC and queue (enum wait_queue; src/hist.rs).
    pub wait: Vec<[Vec<u64>; NR_WAIT_QUEUES]>,
}

/// (index, short name) of every counter, in print order.
pub const NAMES: [(u32, &str); NR_STATS] = [
    (nimble_stat_STAT_INS_DIRECT, "ins_direct"),
    (nimble_stat_STAT_INS_LOCAL, "ins_local"),
    (nimble_stat_STAT_INS_LLC, "ins_llc"),
    (nimble_stat_STAT_INS_SWQ, "ins_swq"),
    (nimble_stat_STAT_RUN_DIRECT, "run_direct"),
    (nimble_stat_STAT_RUN_LOCAL, "run_local"),
    (nimble_stat_STAT_RUN_LLC_OWN, "llc_own"),
    (nimble_stat_STAT_RUN_LLC_NODE, "steal_node"),
    (nimble_stat_STAT_RUN_LLC_REMOTE, "steal_remote"),
    (nimble_stat_STAT_RUN_SWQ, "run_swq"),
    (nimble_stat_STAT_DROPPED, "dropped"),
    (nimble_stat_STAT_IDLE_PREV, "idle_prev"),
    (nimble_stat_STAT_IDLE_LLC, "idle_llc"),
    (nimble_stat_STAT_IDLE_NODE, "idle_node"),
    (nimble_stat_STAT_IDLE_ANY, "idle_any"),
    (nimble_stat_STAT_KICK, "kick"),
    (nimble_stat_STAT_KEEP_RUNNING, "keep_running"),
    (nimble_stat_STAT_MIGRATE, "migrate"),
    (nimble_stat_STAT_MIGRATE_LLC, "migrate_llc"),
    (nimble_stat_STAT_MIGRATE_NODE, "migrate_node"),
    (nimble_stat_STAT_STEAL_L1, "steal_l1"),
    (nimble_stat_STAT_STEAL_L2, "steal_l2"),
    (nimble_stat_STAT_STEAL_FAR, "steal_far"),
    (nimble_stat_STAT_WAKE_SYNC, "wake_sync"),
    (nimble_stat_STAT_LAG_CLAMP, "lag_clamp"),
    (nimble_stat_STAT_PREEMPT, "preempt"),
    (nimble_stat_STAT_BALANCE, "balance"),
    (nimble_stat_STAT_SLICES, "slices"),
    (nimble_stat_STAT_SLICE_NS, "slice_ns"),
    (nimble_stat_STAT_CPUQ, "cpuq"),
    (nimble_stat_STAT_CPUQ_WAKER, "cpuq_waker"),
    (nimble_stat_STAT_CPUQ_STEAL, "cpuq_steal"),
];

/// (index, short name) of every per-node NUMA counter, in print order.
pub const NODE_NAMES: [(u32, &str); NR_NODE_STATS] = [
    (node_stat_NSTAT_FORK_LOCAL, "fork_local"),
    (node_stat_NSTAT_FORK_REMOTE, "fork_remote"),
    (node_stat_NSTAT_PULL, "numa_pull"),
    (node_stat_NSTAT_PUSH, "numa_push"),
    (node_stat_NSTAT_REFUSED, "numa_refused"),
    (node_stat_NSTAT_HOME_RETURN, "home_return"),
];

/// (index, short name) of every per-LLC swq counter, in print order.
pub const LLC_NAMES: [(u32, &str); NR_LLC_STATS] = [
    (llc_stat_LSTAT_ENQ_WAKE_IDLE, "swq_wake_idle"),
    (llc_stat_LSTAT_ENQ_WAKE_BUSY, "swq_wake_busy"),
    (llc_stat_LSTAT_ENQ_OTHER, "swq_other"),
    (llc_stat_LSTAT_PULL, "swq_pull"),
    (llc_stat_LSTAT_PULL_XLLC, "swq_pull_xllc"),
    (llc_stat_LSTAT_SKIP_AFFINITY, "swq_skip_affinity"),
    (llc_stat_LSTAT_SCANNED, "swq_scanned"),
    (llc_stat_LSTAT_PULL_TRIES, "swq_pull_tries"),
    (llc_stat_LSTAT_PULL_NS, "swq_pull_ns"),
    (llc_stat_LSTAT_SCAN_NS, "swq_scan_ns"),
    (llc_stat_LSTAT_LLC_IN, "llc_in"),
    (llc_stat_LSTAT_LLC_OUT, "llc_out"),
];

/// A raw map value as u64s (at most N of them).
fn words<const N: usize>(raw: &[u8]) -> [u64; N] {
    let mut out = [0u64; N];
    for (i, chunk) in raw.chunks_exact(8).take(N).enumerate() {
        out[i] = u64::from_ne_bytes(chunk.try_into().unwrap());
    }
    out
}

/// Sums per-CPU copies of a u64 counter array (raw map values). Wrapping:
/// per-CPU deltas of a depth (+1 on one CPU, -1 on another) sum exactly.
pub fn sum_percpu<const N: usize>(values: &[Vec<u8>]) -> [u64; N] {
    let mut out = [0u64; N];
    for v in values {
        for (o, x) in out.iter_mut().zip(words::<N>(v)) {
            *o = o.wrapping_add(x);
        }
    }
    out
}

/// Sums per-CPU copies of a raw wait histogram.
pub fn sum_hist_percpu(values: &[Vec<u8>]) -> Vec<u8> {
    let sum: [u64; hist::BUCKETS] = sum_percpu(values);
    sum.iter().flat_map(|w| w.to_ne_bytes()).collect()
}

/// A raw histogram map value.
fn hist_words(raw: &[u8]) -> Vec<u64> {
    let mut h = vec![0u64; hist::BUCKETS];
    for (i, chunk) in raw.chunks_exact(8).take(hist::BUCKETS).enumerate() {
        h[i] = u64::from_ne_bytes(chunk.try_into().unwrap());
    }
    h
}

/// Tasks that ran after being queued, by every path, in one counter set.
pub fn ran(ev: &[u64; NR_STATS]) -> u64 {
    [
        nimble_stat_STAT_RUN_DIRECT,
        nimble_stat_STAT_RUN_LOCAL,
        nimble_stat_STAT_RUN_LLC_OWN,
        nimble_stat_STAT_RUN_LLC_NODE,
        nimble_stat_STAT_RUN_LLC_REMOTE,
        nimble_stat_STAT_RUN_SWQ,
    ]
    .iter()
    .map(|&i| ev[i as usize])
    .sum()
}

impl Counters {
    /// Reads per-CPU copies of `struct nimble_stats` (raw map values, one
    /// per possible CPU).
    pub fn from_percpu(values: &[Vec<u8>], pending: u64, node_running: Vec<i64>) -> Self {
        Counters {
            cnt: sum_percpu(values),
            per_cpu: values.iter().map(|v| words(v)).collect(),
            pending,
            node_running,
            ..Default::default()
        }
    }

    /// Adds one LLC's per-CPU `struct llc_stats`, its raw wait histograms
    /// (`struct wait_hist` per enum wait_queue; missing ones are empty), its
    /// swq depth and runnable count (call per LLC).
    pub fn push_llc(
        &mut self,
        values: &[Vec<u8>],
        hists: [&[u8]; NR_WAIT_QUEUES],
        swq_depth: i64,
        running: i64,
    ) {
        self.llc.push(sum_percpu(values));
        self.wait.push(hists.map(hist_words));
        self.swq_depth.push(swq_depth);
        // The DSQ's depth: tasks in minus tasks out, each counted per CPU.
        let s = self.llc.last().unwrap();
        self.llc_queued.push(
            s[llc_stat_LSTAT_LLC_IN as usize].wrapping_sub(s[llc_stat_LSTAT_LLC_OUT as usize])
                as i64,
        );
        self.llc_running.push(running);
    }

    /// Adds one node's per-CPU `struct node_stats` values (call per node).
    pub fn push_node(&mut self, values: &[Vec<u8>]) {
        self.node.push(sum_percpu(values));
        if self.node_by_cpu.len() < values.len() {
            self.node_by_cpu.resize(values.len(), [0; NR_NODE_STATS]);
        }
        for (cpu, v) in values.iter().enumerate() {
            for (o, x) in self.node_by_cpu[cpu]
                .iter_mut()
                .zip(words::<NR_NODE_STATS>(v))
            {
                *o += x;
            }
        }
    }

    pub fn get(&self, stat: u32) -> u64 {
        self.cnt[stat as usize]
    }

    pub fn inserted(&self) -> u64 {
        self.get(nimble_stat_STAT_INS_DIRECT)
            + self.get(nimble_stat_STAT_INS_LOCAL)
            + self.get(nimble_stat_STAT_INS_LLC)
            + self.get(nimble_stat_STAT_INS_SWQ)
    }

    /// Tasks that ran after being queued, by every path.
    pub fn dispatched(&self) -> u64 {
        ran(&self.cnt)
    }

    /// Inserted minus accounted-for (ran, dropped or still pending). Zero when
    /// the books balance; only meaningful on a snapshot BPF no longer writes
    /// (after unload), since live per-CPU reads are not atomic.
    pub fn imbalance(&self) -> i128 {
        self.inserted() as i128
            - (self.dispatched() + self.get(nimble_stat_STAT_DROPPED) + self.pending) as i128
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
    fn per_cpu_deltas_sum_exactly() {
        // pending: +3 queued on CPU 0, -2 run on CPU 1 (stored as u64), +1 on CPU 2.
        let cpus: Vec<Vec<u8>> = [3i64, -2, 1]
            .iter()
            .map(|v| v.to_ne_bytes().to_vec())
            .collect();
        assert_eq!(sum_percpu::<1>(&cpus)[0] as i64, 2);
        // Wait histograms: bucket by bucket over CPUs.
        let mut a = vec![0u64; hist::BUCKETS];
        let mut b = vec![0u64; hist::BUCKETS];
        a[3] = 5;
        b[3] = 2;
        b[7] = 1;
        let raw = |h: &Vec<u64>| h.iter().flat_map(|w| w.to_ne_bytes()).collect::<Vec<u8>>();
        let sum = hist_words(&sum_hist_percpu(&[raw(&a), raw(&b)]));
        assert_eq!((sum[3], sum[7], sum.iter().sum::<u64>()), (7, 1, 8));
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
        let cpu2 = raw(&[
            (nimble_stat_STAT_RUN_LLC_REMOTE, 1),
            (nimble_stat_STAT_INS_SWQ, 3),
            (nimble_stat_STAT_RUN_SWQ, 2),
            (nimble_stat_STAT_DROPPED, 1),
        ]);
        let c = Counters::from_percpu(&[cpu0, cpu1, cpu2], 1, vec![2, 0]);
        assert_eq!(c.inserted(), 10);
        assert_eq!(c.dispatched(), 8);
        assert_eq!(c.imbalance(), 0);
        assert_eq!(c.per_cpu[2][nimble_stat_STAT_RUN_SWQ as usize], 2);
        assert_eq!(c.per_cpu.len(), 3);
    }

    #[test]
    fn node_counters_by_key_and_by_counting_cpu() {
        let mut c = Counters::from_percpu(&[], 0, vec![1, 2]);
        let raw = |v: [u64; NR_NODE_STATS]| -> Vec<u8> {
            v.iter().flat_map(|x| x.to_ne_bytes()).collect()
        };
        // node 0 counted on CPUs 0 and 1, node 1 on CPU 1 only
        c.push_node(&[raw([3, 1, 0, 0, 2, 0]), raw([3, 1, 0, 0, 2, 0])]);
        c.push_node(&[raw([0; NR_NODE_STATS]), raw([0, 0, 4, 1, 0, 2])]);
        assert_eq!(c.node[0][node_stat_NSTAT_FORK_LOCAL as usize], 6);
        assert_eq!(c.node[1][node_stat_NSTAT_PULL as usize], 4);
        assert_eq!(c.node_by_cpu[0], [3, 1, 0, 0, 2, 0]);
        assert_eq!(c.node_by_cpu[1], [3, 1, 4, 1, 2, 2]);
        let mut idx: Vec<u32> = NODE_NAMES.iter().map(|n| n.0).collect();
        idx.sort();
        assert_eq!(idx, (0..NR_NODE_STATS as u32).collect::<Vec<_>>());
        let mut idx: Vec<u32> = LLC_NAMES.iter().map(|n| n.0).collect();
        idx.sort();
        assert_eq!(idx, (0..NR_LLC_STATS as u32).collect::<Vec<_>>());
    }

    #[test]
    fn every_queue_counts_in_the_books() {
        // Each ins_* counter is a queue a task enters; each queue must count.
        let mut c = Counters::from_percpu(&[], 0, vec![]);
        let ins: Vec<u32> = NAMES
            .iter()
            .filter(|(_, n)| n.starts_with("ins_"))
            .map(|n| n.0)
            .collect();
        for &i in &ins {
            c.cnt[i as usize] = 1;
        }
        assert_eq!(c.inserted(), ins.len() as u64);
        assert_eq!(c.imbalance(), ins.len() as i128);
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
