//! The metrics scx_nimble serves over scx_stats (the standard socket,
//! /var/run/scx/root/stats, root only): configuration, NUMA thresholds, the
//! topology, and every counter as totals plus per-node and per-LLC groups.
//! schema.rs says what they are, this file sums the raw counters into them,
//! format.rs prints them (the `stats:` line, JSON, docs/metrics.md's table),
//! server.rs serves them; `--stats` and `--monitor` print what a client of
//! the socket reads, the TUI reads the same. Counters are cumulative since
//! attach; readers take differences. cgroups.rs adds the cgroups with
//! runnable tasks (Metrics::cgroups, filled in by the scheduler).

pub mod cgroups;
mod format;
pub mod human;
mod schema;
mod server;

pub use format::{print_metrics, StatsFormat, TOP_CGROUPS};
pub use schema::{Cgroup, Cpu, Group, Metrics, Threshold};
pub use server::{help, launch_server, monitor};

use crate::counters::{self, Counters, NR_LLC_STATS, NR_NODE_STATS, NR_STATS};
use crate::hist;
use std::collections::BTreeMap;

/// What does not change while the scheduler runs.
#[derive(Clone, Debug, Default)]
pub struct Setup {
    pub imb_formula: String,
    pub slice_us: u64,
    pub numa_patience_us: u64,
    pub swq_shards: u64,
    /// LLC of each CPU id (None: offline).
    pub cpu_llc: Vec<Option<usize>>,
    pub llc_node: Vec<usize>,
    pub thresholds: Vec<Threshold>,
}

/// A group's raw sums before they become a Group.
#[derive(Clone)]
struct Acc {
    ev: [u64; NR_STATS],
    numa: [u64; NR_NODE_STATS],
    swq: [u64; NR_LLC_STATS],
    nr_running: i64,
    queued: i64,
    swq_depth: i64,
    wait: [Vec<u64>; counters::NR_WAIT_QUEUES],
}

impl Default for Acc {
    fn default() -> Self {
        Acc {
            ev: [0; NR_STATS],
            numa: [0; NR_NODE_STATS],
            swq: [0; NR_LLC_STATS],
            nr_running: 0,
            queued: 0,
            swq_depth: 0,
            wait: std::array::from_fn(|_| vec![0; hist::BUCKETS]),
        }
    }
}

fn add_into<const N: usize>(to: &mut [u64; N], from: &[u64; N]) {
    for (t, f) in to.iter_mut().zip(from) {
        *t += f;
    }
}

impl Acc {
    fn add_swq_llc(&mut self, c: &Counters, llc: usize) {
        if let Some(s) = c.llc.get(llc) {
            add_into(&mut self.swq, s);
        }
        self.queued += c.llc_queued.get(llc).copied().unwrap_or(0);
        self.swq_depth += c.swq_depth.get(llc).copied().unwrap_or(0);
        if let Some(w) = c.wait.get(llc) {
            for (to, from) in self.wait.iter_mut().zip(w) {
                hist::add(to, from);
            }
        }
    }

    fn group(&self) -> Group {
        let [waits, swq_waits] = self.wait.each_ref().map(|h| h.iter().sum::<u64>());
        let us = |h: &[u64], q| hist::quantile(h, q).map_or(0.0, |ns| ns as f64 / 1000.0);
        let [llc, swq] = &self.wait;
        Group {
            nr_running: self.nr_running,
            queued: self.queued,
            swq_depth: self.swq_depth,
            waits,
            wait_p50_us: us(llc, 0.5),
            wait_p99_us: us(llc, 0.99),
            swq_waits,
            swq_wait_p50_us: us(swq, 0.5),
            swq_wait_p99_us: us(swq, 0.99),
            ..Group::with_counters(&self.ev, &self.numa, &self.swq)
        }
    }
}

/// /proc/stat per CPU: (busy, total) ticks.
pub fn cpu_ticks(proc_stat: &str) -> BTreeMap<usize, (u64, u64)> {
    let mut out = BTreeMap::new();
    for line in proc_stat.lines() {
        let mut f = line.split_whitespace();
        let Some(cpu) = f.next().and_then(|n| n.strip_prefix("cpu")) else {
            continue;
        };
        let Ok(cpu) = cpu.parse::<usize>() else {
            continue;
        };
        let v: Vec<u64> = f.filter_map(|x| x.parse().ok()).collect();
        // user nice system idle iowait irq softirq steal ...
        let total: u64 = v.iter().take(8).sum();
        let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
        out.insert(cpu, (total.saturating_sub(idle), total));
    }
    out
}

impl Metrics {
    /// Builds the metrics from raw counters, the controls in force, and
    /// /proc/stat ticks.
    pub fn new(
        setup: &Setup,
        ctl: &crate::ctl::Ctl,
        c: &Counters,
        ticks: &BTreeMap<usize, (u64, u64)>,
        uptime_s: f64,
    ) -> Metrics {
        let nr_llcs = setup.llc_node.len();
        let nr_nodes = c.node_running.len().max(1);
        let mut llcs = vec![Acc::default(); nr_llcs];
        for (cpu, llc) in setup.cpu_llc.iter().enumerate() {
            let Some(llc) = *llc else { continue };
            if let Some(ev) = c.per_cpu.get(cpu) {
                add_into(&mut llcs[llc].ev, ev);
            }
            if let Some(n) = c.node_by_cpu.get(cpu) {
                add_into(&mut llcs[llc].numa, n);
            }
        }
        let mut nodes = vec![Acc::default(); nr_nodes];
        for (llc, acc) in llcs.iter_mut().enumerate() {
            acc.add_swq_llc(c, llc);
            acc.nr_running = c.llc_running.get(llc).copied().unwrap_or(0);
            let node = &mut nodes[setup.llc_node[llc]];
            add_into(&mut node.ev, &acc.ev);
            node.add_swq_llc(c, llc);
        }
        let mut total = Acc {
            ev: c.cnt,
            ..Default::default()
        };
        for (n, acc) in nodes.iter_mut().enumerate() {
            acc.numa = c.node.get(n).copied().unwrap_or([0; NR_NODE_STATS]);
            acc.nr_running = c.node_running.get(n).copied().unwrap_or(0);
            add_into(&mut total.numa, &acc.numa);
            total.nr_running += acc.nr_running;
        }
        for llc in 0..nr_llcs {
            total.add_swq_llc(c, llc);
        }
        let cpus = setup
            .cpu_llc
            .iter()
            .enumerate()
            .filter_map(|(cpu, llc)| {
                let llc = (*llc)?;
                let ev = c.per_cpu.get(cpu).copied().unwrap_or([0; NR_STATS]);
                let (busy, all) = ticks.get(&cpu).copied().unwrap_or((0, 0));
                Some((
                    cpu as u64,
                    Cpu {
                        llc: llc as u64,
                        node: setup.llc_node[llc] as u64,
                        busy_ticks: busy,
                        total_ticks: all,
                        runs: counters::ran(&ev),
                        migrate: ev[crate::bpf_intf::nimble_stat_STAT_MIGRATE as usize],
                    },
                ))
            })
            .collect();
        Metrics {
            sched: format!("scx_nimble {}", env!("CARGO_PKG_VERSION")),
            imb_formula: setup.imb_formula.clone(),
            numa_rule: ctl.numa_rule.name().into(),
            swq_mode: ctl.swq_mode.name().into(),
            swq_affinity: if ctl.swq_affinity { "on" } else { "off" }.into(),
            cgroup_weight: if ctl.cgroup_weight { "on" } else { "off" }.into(),
            mem_locality: if ctl.mem_locality { "on" } else { "off" }.into(),
            swq_shards: setup.swq_shards,
            slice_us: setup.slice_us,
            numa_patience_us: setup.numa_patience_us,
            uptime_s,
            pending: c.pending,
            total: total.group(),
            nodes: (0..).zip(nodes.iter().map(Acc::group)).collect(),
            llcs: (0..).zip(llcs.iter().map(Acc::group)).collect(),
            cpus,
            thresholds: setup.thresholds.clone(),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf_intf::*;
    use crate::ctl::{Ctl, SwqMode};
    use crate::topology::rules::NumaRule;
    use scx_stats::prelude::Meta;

    fn bytes<const N: usize>(v: [u64; N]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    /// 2 nodes x 2 LLCs x 2 CPUs; CPU c counted c+1 wakeups sent direct,
    /// node 1 pulled 4 tasks (counted on CPU 5), LLC 3's swq had waits.
    fn sample() -> (Setup, Counters) {
        let setup = Setup {
            imb_formula: "mainline".into(),
            slice_us: 5000,
            numa_patience_us: 10000,
            swq_shards: 1,
            cpu_llc: (0..8).map(|c| Some(c / 2)).collect(),
            llc_node: vec![0, 0, 1, 1],
            thresholds: vec![Threshold {
                node: 0,
                level: 1,
                distance: 20,
                span_weight: 8,
                imb_numa_nr: 2,
            }],
        };
        let per_cpu: Vec<Vec<u8>> = (0..8u64)
            .map(|c| {
                let mut v = [0u64; NR_STATS];
                v[nimble_stat_STAT_INS_DIRECT as usize] = c + 1;
                v[nimble_stat_STAT_RUN_DIRECT as usize] = c + 1;
                bytes(v)
            })
            .collect();
        let mut c = Counters::from_percpu(&per_cpu, 1, vec![2, 3]);
        let zero = bytes([0u64; NR_NODE_STATS]);
        let mut pulls = vec![zero.clone(); 8];
        let mut pull = [0u64; NR_NODE_STATS];
        pull[crate::bpf_intf::node_stat_NSTAT_PULL as usize] = 4;
        pulls[5] = bytes(pull);
        c.push_node(&vec![zero; 8]);
        c.push_node(&pulls);
        let mut h = vec![0u64; hist::BUCKETS];
        h[hist::bucket(2_000)] = 10;
        let h = bytes::<{ hist::BUCKETS }>(h.try_into().unwrap());
        // wake_idle, wake_busy, other, pull, xllc, skip, scanned, tries, ns,
        // scan ns, llc in, llc out (one queued in each LLC's DSQ)
        let swq = [
            [1, 2, 3, 5, 1, 0, 6, 4, 400, 40, 3, 2],
            [0, 4, 0, 4, 4, 2, 6, 4, 1200, 120, 1, 0],
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0],
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 4],
        ];
        for (llc, v) in swq.iter().enumerate() {
            let hs: [&[u8]; 2] = if llc == 0 { [&[], &h] } else { [&h, &[]] };
            c.push_llc(&[bytes(*v)], hs, llc as i64 % 2, llc as i64);
        }
        (setup, c)
    }

    fn metrics() -> Metrics {
        let (setup, c) = sample();
        let ctl = Ctl {
            numa_rule: NumaRule::Mainline,
            swq_mode: SwqMode::Off,
            swq_affinity: false,
            cgroup_weight: true,
            mem_locality: true,
        };
        let ticks = cpu_ticks("cpu  9 9 9 9\ncpu0 10 0 5 80 5 0 0 0 0 0\ncpu1 1 2 3 4\n");
        Metrics::new(&setup, &ctl, &c, &ticks, 1.5)
    }

    #[test]
    fn groups_break_totals_down_by_node_and_llc() {
        let m = metrics();
        assert_eq!(m.total.ins_direct, 36);
        assert_eq!(m.nodes[&0].ins_direct, 1 + 2 + 3 + 4);
        assert_eq!(m.llcs[&3].ins_direct, 7 + 8);
        // NUMA decisions: per node by key, per LLC by the deciding CPU.
        assert_eq!((m.nodes[&1].numa_pull, m.llcs[&2].numa_pull), (4, 4));
        assert_eq!(m.total.numa_pull, 4);
        assert_eq!(m.nodes[&0].swq_wake_busy, 6);
        assert_eq!(
            (m.llcs[&1].queued, m.nodes[&1].queued, m.total.queued),
            (1, 2, 4)
        );
        assert_eq!((m.nodes[&1].nr_running, m.llcs[&3].nr_running), (3, 3));
        assert_eq!((m.total.swq_waits, m.total.waits), (10, 30));
        assert_eq!(m.llcs[&0].swq_wait_p50_us, m.total.swq_wait_p50_us);
        assert_eq!(m.cpus.len(), 8);
        assert_eq!((m.cpus[&0].busy_ticks, m.cpus[&0].total_ticks), (15, 100));
        assert_eq!(
            (m.cpus[&5].llc, m.cpus[&5].node, m.cpus[&5].runs),
            (2, 1, 6)
        );
    }

    #[test]
    fn the_line_keeps_the_stats_format() {
        let line = metrics().line();
        for want in [
            "numa_rule=mainline swq=off swq_affinity=off cgroup_weight=on mem_locality=on nr_cgroups=0 ins_direct=36 ",
            " pending=1 node_running=2,3",
            " numa_pull=4 node_numa_pull=0,4",
            " swq_enq=10 llc_swq_enq=6,4,0,0",
            " swq_wake_busy=6 llc_swq_wake_busy=2,4,0,0",
            " swq_pull_cost_ns=200 swq_scan_cost_ns=20 swq_depth=2 llc_swq_depth=0,1,0,1",
            " queued=4 llc_queued=1,1,1,1 llc_running=0,1,2,3",
            " swq_wait_p50_us=2.0 llc_swq_wait_p50_us=2.0,-,-,-",
            " wait_p99_us=2.0 llc_wait_p99_us=-,2.0,2.0,2.0",
        ] {
            assert!(line.contains(want), "{want:?} in {line}");
        }
    }

    #[test]
    fn json_round_trips_and_help_lists_every_field() {
        let m = metrics();
        let back: Metrics = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back, m);
        let mut help = Vec::new();
        server::server_data()
            .describe_meta(&mut help, None)
            .unwrap();
        let help = String::from_utf8(help).unwrap();
        let fields = match serde_json::to_value(&m.total).unwrap() {
            serde_json::Value::Object(f) => f,
            _ => unreachable!(),
        };
        assert_eq!(fields.len(), Group::meta().fields.len());
        let others = [
            "thresholds",
            "imb_numa_nr",
            "busy_ticks",
            "swq_mode",
            "nr_cgroups",
            "nr_cgroups_over",
            "idle",
            "mem_pages_moved",
            "share_pct",
            "usage_us",
        ];
        for name in fields.keys().map(String::as_str).chain(others) {
            assert!(help.contains(name), "{name} missing from --help-stats");
        }
    }
}
