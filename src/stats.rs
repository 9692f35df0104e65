//! The metrics scx_nimble serves over scx_stats (the standard socket,
//! /var/run/scx/root/stats, root only): configuration, NUMA thresholds, the
//! topology, and every counter as totals plus per-node and per-LLC groups.
//! `--stats` prints them from the scheduler, `--monitor` and the TUI read them
//! from the socket, `--help-stats` lists them. Counters are cumulative since
//! attach; readers take differences.

use crate::counters::{self, Counters, NR_LLC_STATS, NR_NODE_STATS, NR_STATS};
use crate::hist;
use anyhow::{Context, Result};
use scx_stats::prelude::*;
use scx_stats_derive::{stat_doc, Stats};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One group's counters: the whole machine, one node or one LLC.
/// Attribution: events by the CPU that counted them (a node's are its CPUs');
/// NUMA decisions per node by the node they concern, per LLC by the CPU that
/// decided; swq counters, depths and waits by the LLC whose queue it was.
#[stat_doc]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, Stats)]
#[serde(deny_unknown_fields)]
pub struct Group {
    #[stat(desc = "Wakeups select_cpu sent straight to an idle CPU's local DSQ")]
    pub ins_direct: u64,
    #[stat(desc = "Single-CPU tasks enqueued on their idle CPU's local DSQ")]
    pub ins_local: u64,
    #[stat(desc = "Tasks queued on an LLC dispatch queue (deadline ordered)")]
    pub ins_llc: u64,
    #[stat(desc = "Tasks queued on an LLC's shared wakequeue")]
    pub ins_swq: u64,
    #[stat(desc = "Tasks that ran after ins_direct")]
    pub run_direct: u64,
    #[stat(desc = "Tasks that ran after ins_local")]
    pub run_local: u64,
    #[stat(desc = "Tasks run from the running CPU's own LLC queue")]
    pub llc_own: u64,
    #[stat(desc = "Tasks stolen from another LLC of the same node")]
    pub steal_node: u64,
    #[stat(desc = "Tasks stolen from an LLC of another node (= steal_l1 + steal_l2 + steal_far)")]
    pub steal_remote: u64,
    #[stat(desc = "Tasks that ran after waiting in a shared wakequeue")]
    pub run_swq: u64,
    #[stat(desc = "Tasks that left a queue without running (dequeued, exited, unload)")]
    pub dropped: u64,
    #[stat(desc = "select_cpu: the previous CPU (whole core) was idle")]
    pub idle_prev: u64,
    #[stat(desc = "select_cpu: an idle CPU in the previous CPU's LLC")]
    pub idle_llc: u64,
    #[stat(desc = "select_cpu: an idle CPU on the previous CPU's node")]
    pub idle_node: u64,
    #[stat(desc = "select_cpu: an idle CPU anywhere the task may run")]
    pub idle_any: u64,
    #[stat(desc = "Idle CPUs kicked to come and take a queued task")]
    pub kick: u64,
    #[stat(desc = "Dispatch found nothing and let the previous task run on")]
    pub keep_running: u64,
    #[stat(desc = "Tasks that ran on another CPU than last time")]
    pub migrate: u64,
    #[stat(desc = "Migrations to a CPU of another LLC (subset of migrate)")]
    pub migrate_llc: u64,
    #[stat(desc = "Migrations to another node (subset of migrate_llc)")]
    pub migrate_node: u64,
    #[stat(desc = "Remote steals from the nearest remote NUMA tier")]
    pub steal_l1: u64,
    #[stat(desc = "Remote steals from the second NUMA tier")]
    pub steal_l2: u64,
    #[stat(desc = "Remote steals from the third NUMA tier or farther")]
    pub steal_far: u64,
    #[stat(desc = "Sync wakeups queued on the waker's CPU (the waker is about to sleep)")]
    #[serde(default)]
    pub wake_sync: u64,
    #[stat(
        desc = "Tasks queued over a slice after their last deadline (no credit kept: lag clamp)"
    )]
    #[serde(default)]
    pub lag_clamp: u64,
    #[stat(desc = "Wakeups that preempted a later-deadline task on their CPU")]
    #[serde(default)]
    pub preempt: u64,
    #[stat(desc = "Tasks whose slice ended moved to a less loaded LLC (summed weights)")]
    #[serde(default)]
    pub balance: u64,
    #[stat(desc = "Slices given, shrunk with the LLC queue (see slice_ns)")]
    #[serde(default)]
    pub slices: u64,
    #[stat(desc = "Sum of those slices in ns (average slice: slice_ns / slices)")]
    #[serde(default)]
    pub slice_ns: u64,
    #[stat(desc = "Wakeups with no idle CPU queued on one CPU's own queue (not the LLC's)")]
    #[serde(default)]
    pub cpuq: u64,
    #[stat(desc = "Of those, on the sync waker's CPU (the waker runs there alone)")]
    #[serde(default)]
    pub cpuq_waker: u64,
    #[stat(desc = "Tasks taken from another CPU's own queue by a CPU with nothing else to run")]
    #[serde(default)]
    pub cpuq_steal: u64,
    #[stat(desc = "fork/exec: child kept on the parent's node")]
    pub fork_local: u64,
    #[stat(desc = "fork/exec: child placed on another node")]
    pub fork_remote: u64,
    #[stat(desc = "Tasks pulled from another node by the NUMA gate")]
    pub numa_pull: u64,
    #[stat(desc = "Tasks whose slice ended pushed to an idle CPU on another node")]
    pub numa_push: u64,
    #[stat(desc = "Dispatch rounds the NUMA rule kept from pulling across nodes")]
    pub numa_refused: u64,
    #[stat(desc = "Pulled tasks that came back to their home node")]
    pub home_return: u64,
    #[stat(desc = "swq enqueues of wakeups that had an idle CPU (mode wakeups/all)")]
    pub swq_wake_idle: u64,
    #[stat(desc = "swq enqueues of wakeups that found no idle CPU")]
    pub swq_wake_busy: u64,
    #[stat(desc = "swq enqueues of forks, preemptions and slice ends (mode all)")]
    pub swq_other: u64,
    #[stat(desc = "Tasks that ran from the swq")]
    pub swq_pull: u64,
    #[stat(desc = "swq tasks run by a CPU of another LLC (subset of swq_pull)")]
    pub swq_pull_xllc: u64,
    #[stat(desc = "Queued tasks a swq puller passed over (not allowed on its CPU)")]
    pub swq_skip_affinity: u64,
    #[stat(desc = "Queued tasks swq pullers looked at")]
    pub swq_scanned: u64,
    #[stat(desc = "Pull attempts on a non-empty swq shard")]
    pub swq_pull_tries: u64,
    #[stat(desc = "Time spent in swq pull attempts (ns; per try: swq_pull_cost_ns)")]
    pub swq_pull_ns: u64,
    #[stat(desc = "Part of swq_pull_ns spent choosing a task (ns)")]
    pub swq_scan_ns: u64,
    #[stat(desc = "Tasks inserted into the LLC dispatch queues")]
    #[serde(default)]
    pub llc_in: u64,
    #[stat(desc = "Tasks that left the LLC dispatch queues (queued = llc_in - llc_out)")]
    #[serde(default)]
    pub llc_out: u64,
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
}

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
        let mut m = Map::new();
        for (idx, name) in counters::NAMES {
            m.insert(name.into(), self.ev[idx as usize].into());
        }
        for (idx, name) in counters::NODE_NAMES {
            m.insert(name.into(), self.numa[idx as usize].into());
        }
        for (idx, name) in counters::LLC_NAMES {
            m.insert(name.into(), self.swq[idx as usize].into());
        }
        m.insert("nr_running".into(), self.nr_running.into());
        m.insert("queued".into(), self.queued.into());
        m.insert("swq_depth".into(), self.swq_depth.into());
        for (h, prefix) in self.wait.iter().zip(["", "swq_"]) {
            m.insert(format!("{prefix}waits"), h.iter().sum::<u64>().into());
            for (q, name) in [(0.5, "p50"), (0.99, "p99")] {
                let us = hist::quantile(h, q).map_or(0.0, |ns| ns as f64 / 1000.0);
                m.insert(format!("{prefix}wait_{name}_us"), us.into());
            }
        }
        serde_json::from_value(Value::Object(m)).expect("every Group field has a source")
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
        }
    }

    /// "numa_rule=X swq=Y swq_affinity=Z": the controls, as logs show them.
    pub fn controls(&self) -> String {
        format!(
            "numa_rule={} swq={} swq_affinity={}",
            self.numa_rule, self.swq_mode, self.swq_affinity
        )
    }

    /// The one-line form: controls, then counters (`stats:` lines).
    pub fn line(&self) -> String {
        format!("{} {}", self.controls(), self.counters_line())
    }

    /// Counters as `name=total` and, where a breakdown exists,
    /// `node_name=a,b` / `llc_name=a,b,c,d`.
    pub fn counters_line(&self) -> String {
        let tot = as_map(&self.total);
        let nodes: Vec<Map<String, Value>> = self.nodes.values().map(as_map).collect();
        let llcs: Vec<Map<String, Value>> = self.llcs.values().map(as_map).collect();
        let get = |m: &Map<String, Value>, k: &str| m.get(k).map_or("0".into(), num);
        let per = |v: &[Map<String, Value>], k: &str| {
            v.iter().map(|m| get(m, k)).collect::<Vec<_>>().join(",")
        };
        let mut s = String::new();
        for (_, name) in counters::NAMES {
            let _ = write!(s, "{name}={} ", get(&tot, name));
        }
        let _ = write!(
            s,
            "pending={} node_running={}",
            self.pending,
            per(&nodes, "nr_running")
        );
        if nodes.len() > 1 {
            for (_, name) in counters::NODE_NAMES {
                let _ = write!(
                    s,
                    " {name}={} node_{name}={}",
                    get(&tot, name),
                    per(&nodes, name)
                );
            }
        }
        let enq = |m: &Map<String, Value>| -> u64 {
            ["swq_wake_idle", "swq_wake_busy", "swq_other"]
                .iter()
                .map(|k| m.get(*k).and_then(Value::as_u64).unwrap_or(0))
                .sum()
        };
        let llc_enq: Vec<String> = llcs.iter().map(|m| enq(m).to_string()).collect();
        let _ = write!(
            s,
            " swq_enq={} llc_swq_enq={}",
            enq(&tot),
            llc_enq.join(",")
        );
        for (_, name) in counters::LLC_NAMES {
            let _ = write!(
                s,
                " {name}={} llc_{name}={}",
                get(&tot, name),
                per(&llcs, name)
            );
        }
        let t = &self.total;
        let per_try = |ns: u64| ns.checked_div(t.swq_pull_tries).unwrap_or(0);
        let _ = write!(
            s,
            " swq_pull_cost_ns={} swq_scan_cost_ns={}",
            per_try(t.swq_pull_ns),
            per_try(t.swq_scan_ns)
        );
        for name in ["swq_depth", "queued"] {
            let _ = write!(
                s,
                " {name}={} llc_{name}={}",
                get(&tot, name),
                per(&llcs, name)
            );
        }
        let _ = write!(s, " llc_running={}", per(&llcs, "nr_running"));
        for prefix in ["swq_", ""] {
            for q in ["p50", "p99"] {
                let key = format!("{prefix}wait_{q}_us");
                let show = |m: &Map<String, Value>| match m.get(&format!("{prefix}waits")) {
                    Some(n) if n.as_u64().unwrap_or(0) > 0 => {
                        format!("{:.1}", m[&key].as_f64().unwrap_or(0.0))
                    }
                    _ => "-".to_string(),
                };
                let each: Vec<String> = llcs.iter().map(show).collect();
                let _ = write!(s, " {key}={} llc_{key}={}", show(&tot), each.join(","));
            }
        }
        s
    }
}

fn as_map(g: &Group) -> Map<String, Value> {
    match serde_json::to_value(g) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

fn num(v: &Value) -> String {
    v.to_string()
}

/// The scx_stats server's description of the metrics ("top" is what
/// `--monitor` and scxtop ask for); the scheduler answers requests on the
/// returned channels.
pub fn server_data() -> StatsServerData<(), Metrics> {
    StatsServerData::new()
        .add_meta(Group::meta())
        .add_meta(Cpu::meta())
        .add_meta(Threshold::meta())
        .add_meta(Metrics::meta())
        .add_stats(
            "top",
            Box::new(move |_args, (req, res)| {
                req.send(())?;
                res.recv()?.to_json()
            }),
        )
}

/// Starts the stats server on the standard socket, reachable by root only:
/// the socket is created under umask 077 (no window where others may
/// connect) and its directory closed to others too.
pub fn launch_server() -> Result<StatsServer<(), Metrics>> {
    // SAFETY: umask only changes this process's file creation mask.
    let old = unsafe { libc::umask(0o077) };
    let server = StatsServer::new(server_data()).launch();
    unsafe { libc::umask(old) };
    let server = server.context("starting the stats server")?;
    Ok(server)
}

/// `--help-stats`: every metric with its description.
pub fn help() -> Result<()> {
    server_data().describe_meta(&mut std::io::stdout(), None)
}

/// `--monitor`: prints the running scheduler's metrics every `interval`
/// seconds (one `stats:` line, or one JSON object with `json`), until
/// `shutdown`.
pub fn monitor(
    interval: f64,
    json: bool,
    shutdown: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Result<()> {
    use std::sync::atomic::Ordering;
    scx_utils::monitor_stats::<Metrics>(
        &[],
        std::time::Duration::from_secs_f64(interval),
        || shutdown.load(Ordering::Relaxed),
        |m| {
            print_metrics(&m, json)?;
            Ok(())
        },
    )
}

/// One interval's output: the `stats:` line, or the JSON object.
pub fn print_metrics(m: &Metrics, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string(m)?);
    } else {
        println!("stats: {}", m.line());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf_intf::*;
    use crate::ctl::{Ctl, SwqMode};
    use crate::topology::rules::NumaRule;

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
        pulls[5] = bytes([0, 0, 4, 0, 0, 0]);
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
            "numa_rule=mainline swq=off swq_affinity=off ins_direct=36 ",
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
        server_data().describe_meta(&mut help, None).unwrap();
        let help = String::from_utf8(help).unwrap();
        let fields = as_map(&m.total);
        assert_eq!(fields.len(), Group::meta().fields.len());
        let others = ["thresholds", "imb_numa_nr", "busy_ticks", "swq_mode"];
        for name in fields.keys().map(String::as_str).chain(others) {
            assert!(help.contains(name), "{name} missing from --help-stats");
        }
    }
}
