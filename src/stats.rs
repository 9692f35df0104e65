//! Scheduler counters: summed from BPF's per-CPU counters, printed as one
//! line, and checked for consistency (every queued task is accounted exactly
//! once when it leaves its queue; see src/bpf/intf.h).

use crate::bpf_intf::*;
use crate::hist;
use std::fmt;

pub const NR_STATS: usize = nimble_stat_NR_NIMBLE_STATS as usize;
pub const NR_NODE_STATS: usize = node_stat_NR_NODE_STATS as usize;
pub const NR_LLC_STATS: usize = llc_stat_NR_LLC_STATS as usize;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    pub cnt: [u64; NR_STATS],
    /// Tasks queued by us that have neither run nor been dropped.
    pub pending: u64,
    /// Runnable tasks per node (signed: a bug would show as negative).
    pub node_running: Vec<i64>,
    /// NUMA counters per node (enum node_stat).
    pub node: Vec<[u64; NR_NODE_STATS]>,
    /// Shared wakequeue counters per LLC (enum llc_stat).
    pub llc: Vec<[u64; NR_LLC_STATS]>,
    /// Tasks in each LLC's swq.
    pub swq_depth: Vec<i64>,
    /// swq wait histogram per LLC (src/hist.rs).
    pub swq_wait: Vec<Vec<u64>>,
}

/// (index, short name) of every counter, in print order.
const NAMES: [(u32, &str); NR_STATS] = [
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

/// (index, short name) of every per-LLC swq counter, in print order.
const LLC_NAMES: [(u32, &str); NR_LLC_STATS] = [
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
            llc: Vec::new(),
            swq_depth: Vec::new(),
            swq_wait: Vec::new(),
        }
    }

    /// Adds one LLC's per-CPU `struct llc_stats`, its raw `struct swq_hist`
    /// and its swq depth (call per LLC).
    pub fn push_llc(&mut self, values: &[Vec<u8>], hist_raw: &[u8], depth: i64) {
        self.llc.push(sum_percpu(values));
        let mut h = vec![0u64; hist::BUCKETS];
        for (i, chunk) in hist_raw.chunks_exact(8).take(hist::BUCKETS).enumerate() {
            h[i] = u64::from_ne_bytes(chunk.try_into().unwrap());
        }
        self.swq_wait.push(h);
        self.swq_depth.push(depth);
    }

    /// A swq counter summed over LLCs.
    pub fn llc_total(&self, stat: u32) -> u64 {
        self.llc.iter().map(|n| n[stat as usize]).sum()
    }

    /// Tasks that entered LLC `llc`'s swq, for any reason.
    pub fn swq_enqueued(&self, llc: usize) -> u64 {
        let l = &self.llc[llc];
        l[llc_stat_LSTAT_ENQ_WAKE_IDLE as usize]
            + l[llc_stat_LSTAT_ENQ_WAKE_BUSY as usize]
            + l[llc_stat_LSTAT_ENQ_OTHER as usize]
    }

    /// The swq wait histogram of all LLCs together.
    pub fn swq_wait_total(&self) -> Vec<u64> {
        let mut h = vec![0u64; hist::BUCKETS];
        for l in &self.swq_wait {
            hist::add(&mut h, l);
        }
        h
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
            + self.get(nimble_stat_STAT_INS_SWQ)
    }

    /// Tasks that ran after being queued, by every path.
    pub fn dispatched(&self) -> u64 {
        self.get(nimble_stat_STAT_RUN_DIRECT)
            + self.get(nimble_stat_STAT_RUN_LOCAL)
            + self.get(nimble_stat_STAT_RUN_LLC_OWN)
            + self.get(nimble_stat_STAT_RUN_LLC_NODE)
            + self.get(nimble_stat_STAT_RUN_LLC_REMOTE)
            + self.get(nimble_stat_STAT_RUN_SWQ)
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
        if !self.llc.is_empty() {
            self.fmt_swq(f)?;
        }
        Ok(())
    }
}

/// A wait quantile in µs for the stats line ("-" when nothing waited).
fn quantile_us(h: &[u64], q: f64) -> String {
    hist::quantile(h, q).map_or("-".into(), |ns| format!("{:.1}", ns as f64 / 1000.0))
}

fn join<T: ToString>(v: impl Iterator<Item = T>) -> String {
    v.map(|x| x.to_string()).collect::<Vec<_>>().join(",")
}

impl Counters {
    /// swq totals then per LLC: swq_enq=12 llc_swq_enq=8,4 ...
    fn fmt_swq(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.llc.len();
        let enq: Vec<u64> = (0..n).map(|l| self.swq_enqueued(l)).collect();
        write!(
            f,
            " swq_enq={} llc_swq_enq={}",
            enq.iter().sum::<u64>(),
            join(enq.iter())
        )?;
        for (idx, name) in LLC_NAMES {
            write!(
                f,
                " {name}={} llc_{name}={}",
                self.llc_total(idx),
                join(self.llc.iter().map(|l| l[idx as usize]))
            )?;
        }
        let tries = self.llc_total(llc_stat_LSTAT_PULL_TRIES);
        let cost = self
            .llc_total(llc_stat_LSTAT_PULL_NS)
            .checked_div(tries)
            .unwrap_or(0);
        let scan = self
            .llc_total(llc_stat_LSTAT_SCAN_NS)
            .checked_div(tries)
            .unwrap_or(0);
        write!(
            f,
            " swq_pull_cost_ns={cost} swq_scan_cost_ns={scan} swq_depth={} llc_swq_depth={}",
            self.swq_depth.iter().sum::<i64>(),
            join(self.swq_depth.iter())
        )?;
        let total = self.swq_wait_total();
        for (q, name) in [(0.5, "p50"), (0.99, "p99")] {
            write!(
                f,
                " swq_wait_{name}_us={} llc_swq_wait_{name}_us={}",
                quantile_us(&total, q),
                join(self.swq_wait.iter().map(|h| quantile_us(h, q)))
            )?;
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
        let line = c.to_string();
        assert!(
            line.contains("ins_llc=5") && line.contains("steal_remote=1"),
            "{line}"
        );
        assert!(line.ends_with("pending=1 node_running=2,0"), "{line}");
    }

    #[test]
    fn swq_counters_print_totals_per_llc_and_wait_quantiles() {
        let mut c = Counters::from_percpu(&[], 0, vec![0]);
        let llc = |v: [u64; NR_LLC_STATS]| -> Vec<u8> {
            v.iter().flat_map(|x| x.to_ne_bytes()).collect()
        };
        let mut h = vec![0u64; hist::BUCKETS];
        h[hist::bucket(2_000)] = 10;
        let h_raw: Vec<u8> = h.iter().flat_map(|x| x.to_ne_bytes()).collect();
        // wake_idle, wake_busy, other, pull, xllc, skip, scanned, tries, ns, scan ns
        c.push_llc(&[llc([1, 2, 3, 5, 1, 0, 6, 4, 400, 40])], &h_raw, 1);
        c.push_llc(&[llc([0, 4, 0, 4, 4, 2, 6, 4, 1200, 120])], &[], 0);
        let line = c.to_string();
        for want in [
            " swq_enq=10 llc_swq_enq=6,4",
            " swq_wake_busy=6 llc_swq_wake_busy=2,4",
            " swq_pull_xllc=5 llc_swq_pull_xllc=1,4",
            " swq_pull_cost_ns=200 swq_scan_cost_ns=20 swq_depth=1 llc_swq_depth=1,0",
            " swq_wait_p50_us=2.0 llc_swq_wait_p50_us=2.0,-",
        ] {
            assert!(line.contains(want), "{want} in {line}");
        }
        let mut idx: Vec<u32> = LLC_NAMES.iter().map(|n| n.0).collect();
        idx.sort();
        assert_eq!(idx, (0..NR_LLC_STATS as u32).collect::<Vec<_>>());
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
