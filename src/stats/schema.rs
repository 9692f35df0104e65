//! What the metrics are: the served structs, with a description per field
//! (`--help-stats`). A Group's counters come from intf.h's counter lists
//! (with_counters!), the gauges and waits are declared here.

use crate::counters::{with_counters, NR_LLC_STATS, NR_NODE_STATS, NR_STATS};
use scx_stats_derive::{stat_doc, Stats};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

macro_rules! define_group {
    (
        cpu [$(($c:ident, $ci:literal, $cd:literal))*]
        node [$(($n:ident, $ni:literal, $nd:literal))*]
        llc [$(($l:ident, $li:literal, $ld:literal))*]
    ) => {
        /// One group's counters: the whole machine, one node or one LLC.
        /// Attribution: events by the CPU that counted them (a node's are its
        /// CPUs'); NUMA decisions per node by the node they concern, per LLC
        /// by the CPU that decided; swq counters, depths and waits by the LLC
        /// whose queue it was.
        #[stat_doc]
        #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, Stats)]
        #[serde(deny_unknown_fields)]
        pub struct Group {
            $( #[stat(desc = $cd)] #[serde(default)] pub $c: u64, )*
            $( #[stat(desc = $nd)] #[serde(default)] pub $n: u64, )*
            $( #[stat(desc = $ld)] #[serde(default)] pub $l: u64, )*
    #[stat(desc = "Runnable tasks (running or queued) now")]
    pub nr_running: i64,
    #[stat(desc = "Tasks in the LLC dispatch queues now")]
    pub queued: i64,
    #[stat(desc = "Tasks in the shared wakequeues now")]
    pub swq_depth: i64,
    #[stat(desc = "Tasks that waited in an LLC dispatch queue (samples of wait_*)")]
    pub waits: u64,
    #[stat(desc = "Median wait in an LLC dispatch queue (us, within 25 %)")]
    pub wait_p50_us: f64,
    #[stat(desc = "99th percentile wait in an LLC dispatch queue (us)")]
    pub wait_p99_us: f64,
    #[stat(desc = "Tasks that waited in a shared wakequeue (samples of swq_wait_*)")]
    pub swq_waits: u64,
    #[stat(desc = "Median wait in a shared wakequeue (us, within 25 %)")]
    pub swq_wait_p50_us: f64,
    #[stat(desc = "99th percentile wait in a shared wakequeue (us)")]
    pub swq_wait_p99_us: f64,
        }

        impl Group {
            /// A group with these counter sums (gauges and waits zero).
            pub fn with_counters(
                cpu: &[u64; NR_STATS],
                node: &[u64; NR_NODE_STATS],
                llc: &[u64; NR_LLC_STATS],
            ) -> Self {
                Group {
                    $( $c: cpu[$ci], )*
                    $( $n: node[$ni], )*
                    $( $l: llc[$li], )*
                    ..Default::default()
                }
            }

            /// The per-CPU counters, in table order.
            pub fn cpu_counters(&self) -> [u64; NR_STATS] {
                [$(self.$c),*]
            }

            /// The per-node counters, in table order.
            pub fn node_counters(&self) -> [u64; NR_NODE_STATS] {
                [$(self.$n),*]
            }

            /// The per-LLC counters, in table order.
            pub fn llc_counters(&self) -> [u64; NR_LLC_STATS] {
                [$(self.$l),*]
            }
        }
    };
}

with_counters!(define_group);

/// One CPU: where it sits and how busy it has been.
#[stat_doc]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, Stats)]
pub struct Cpu {
    #[stat(desc = "LLC of the CPU")]
    pub llc: u64,
    #[stat(desc = "NUMA node of the CPU")]
    pub node: u64,
    #[stat(desc = "Busy time since boot, /proc/stat ticks (load = busy delta / total delta)")]
    pub busy_ticks: u64,
    #[stat(desc = "All time since boot, /proc/stat ticks")]
    pub total_ticks: u64,
    #[stat(desc = "Tasks this CPU ran from our queues")]
    pub runs: u64,
    #[stat(desc = "Tasks that arrived here from another CPU")]
    pub migrate: u64,
}

/// One SD_NUMA level of a node, as build_sched_domains() computes it.
#[stat_doc]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, Stats)]
pub struct Threshold {
    #[stat(desc = "Node")]
    pub node: u64,
    #[stat(desc = "NUMA level (1 = nearest remote tier)")]
    pub level: u64,
    #[stat(desc = "SLIT distance the level spans up to")]
    pub distance: u64,
    #[stat(desc = "CPUs in the level's span")]
    pub span_weight: u64,
    #[stat(desc = "Running tasks the level tolerates imbalanced (imb_numa_nr)")]
    pub imb_numa_nr: u64,
}

/// One cgroup with runnable tasks (cgroup cpu.weight, cgroups.rs).
#[stat_doc]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, Stats)]
pub struct Cgroup {
    #[stat(desc = "cpu.weight")]
    pub weight: u64,
    #[stat(
        desc = "cpu.idle: 1 while set (the cgroup then weighs 3/1024 of cpu.weight 100 among its siblings, and its tasks run as idle work)"
    )]
    #[serde(default)]
    pub idle: u64,
    #[stat(
        desc = "Share of the machine its weights entitle it to among the cgroups with runnable tasks (%, the product of its weight fractions up the tree)"
    )]
    pub share_pct: f64,
    #[stat(
        desc = "CPU time it received, us (the kernel's cpu.stat usage_usec; its rate between two samples is its CPU over the interval)"
    )]
    pub usage_us: u64,
}

/// Everything scx_nimble reports.
#[stat_doc]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, Stats)]
#[stat(top)]
pub struct Metrics {
    #[stat(desc = "Scheduler name and version")]
    pub sched: String,
    #[stat(desc = "imb_numa_nr formula (--imb-formula)")]
    pub imb_formula: String,
    #[stat(desc = "NUMA imbalance rule (--numa-rule, tune --numa-rule)")]
    pub numa_rule: String,
    #[stat(desc = "Shared wakequeue mode (--swq, tune --swq)")]
    pub swq_mode: String,
    #[stat(desc = "Affinity-aware swq pulls, on or off (--swq-affinity)")]
    pub swq_affinity: String,
    #[stat(
        desc = "cgroup cpu.weight honoured, on or off (--no-cgroup-weight, tune --cgroup-weight)"
    )]
    #[serde(default)]
    pub cgroup_weight: String,
    #[stat(desc = "Memory locality, on or off (--no-mem-locality, tune --mem-locality)")]
    #[serde(default)]
    pub mem_locality: String,
    #[stat(desc = "swq shards per LLC (--swq-shards)")]
    pub swq_shards: u64,
    #[stat(desc = "Time slice (us)")]
    pub slice_us: u64,
    #[stat(desc = "NUMA patience (us)")]
    pub numa_patience_us: u64,
    #[stat(desc = "Seconds since the scheduler attached")]
    pub uptime_s: f64,
    #[stat(desc = "Tasks queued by scx_nimble that have not run or left yet")]
    pub pending: u64,
    #[stat(desc = "All counters, whole machine")]
    pub total: Group,
    #[stat(desc = "Counters per NUMA node")]
    pub nodes: BTreeMap<u64, Group>,
    #[stat(desc = "Counters per LLC")]
    pub llcs: BTreeMap<u64, Group>,
    #[stat(desc = "Online CPUs")]
    pub cpus: BTreeMap<u64, Cpu>,
    #[stat(desc = "NUMA imbalance thresholds per node and level")]
    pub thresholds: Vec<Threshold>,
    #[stat(
        desc = "Cgroups with a cpu.weight slot of their own (every non-root cgroup, up to MAX_CGROUPS: 16384)"
    )]
    #[serde(default)]
    pub nr_cgroups: u64,
    #[stat(
        desc = "Cgroups made when every slot was taken: their tasks count in their nearest ancestor that has one; their own cpu.weight and cpu.idle are not applied"
    )]
    #[serde(default)]
    pub nr_cgroups_over: u64,
    #[stat(
        desc = "Pages moved to the node where their process's threads settled, since attach (--mem-migrate-mbps)"
    )]
    #[serde(default)]
    pub mem_pages_moved: u64,
    #[stat(desc = "Cgroups with runnable tasks, by path below /sys/fs/cgroup")]
    #[serde(default)]
    pub cgroups: BTreeMap<String, Cgroup>,
}
